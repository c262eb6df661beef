//! The recordings' index: one SQLite file (`INDEX_NAME`) in the recordings' root (the
//! folders of `--record` before its first `{…}` or `%`), a row for each segment closed:
//! its input, its file (relative to the root), its wall-clock start and end, its time in
//! the input's own timeline, its size and its detections sidecar. Retention (`retain`)
//! and the browser view's `/api/recordings` read it; nothing guesses from the folder.
//!
//! Invariants: a row is added only after its file was renamed into place, in one
//! transaction, so after a `kill -9` the index lists only whole files and at most misses the
//! last one; each segment carries its own mark in the container (`comment`, or an MPEG-TS
//! program's `service_name`: `framepipe start_us=… media_us=… input=…`), so that an index
//! that is missing, damaged or behind is made again from the files (`Index::open` reconciles
//! every time it opens: rows whose file is gone are dropped, marked files matching an
//! input's pattern that have no row are added); a file without the mark (one put there by
//! hand) is never listed, hence never deleted; a damaged index is moved aside, never
//! written over.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use ffmpeg_next as ff;
use rusqlite::{params, Connection, OptionalExtension};

/// The index's file name, in the recordings' root.
pub const INDEX_NAME: &str = "framepipe-index.sqlite";
/// What starts a segment's mark.
const MARK: &str = "framepipe";
/// How deep the root's folders are looked through when the index is made again.
const MAX_DEPTH: usize = 8;

/// One closed segment, as the index lists it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Segment {
    /// Its row's number (the browser view names a segment by it, never by a path).
    pub id: i64,
    /// The input's name (`{name}`, or its number where it has none).
    pub input: String,
    /// Its file, relative to the root.
    pub file: PathBuf,
    /// Wall-clock start, µs since the Unix epoch.
    pub start_us: i64,
    /// Wall-clock end (its start and its length), µs since the Unix epoch.
    pub end_us: i64,
    /// Its first picture's time in the input's own timeline, µs.
    pub media_us: i64,
    /// Its size, bytes.
    pub bytes: u64,
    /// Its detections (`NAME.detections.jsonl`), relative to the root, where it has them.
    pub sidecar: Option<PathBuf>,
}

impl Segment {
    /// Its length, µs.
    pub fn duration_us(&self) -> i64 {
        self.end_us - self.start_us
    }
}

/// What a segment's container says of it (`mark_of`, `probe`).
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// The input's name.
    pub input: String,
    /// Wall-clock start, µs since the Unix epoch.
    pub start_us: i64,
    /// Its first picture's time in the input's timeline, µs.
    pub media_us: i64,
}

impl Mark {
    /// The mark's text, as written into the container.
    pub fn text(&self) -> String {
        format!(
            "{MARK} start_us={} media_us={} input={}",
            self.start_us, self.media_us, self.input
        )
    }

    /// A mark read back (None: not one of ours).
    pub fn parse(text: &str) -> Option<Self> {
        let rest = text.strip_prefix(MARK)?.strip_prefix(" start_us=")?;
        let (start, rest) = rest.split_once(" media_us=")?;
        let (media, input) = rest.split_once(" input=")?;
        Some(Self {
            input: input.to_string(),
            start_us: start.parse().ok()?,
            media_us: media.parse().ok()?,
        })
    }
}

/// Where the mark goes in a container: MPEG-TS keeps no file comment, but a program's
/// service name.
pub fn mark_key(muxer: &str) -> &'static str {
    match muxer {
        "mpegts" => "service_name",
        _ => "comment",
    }
}

/// A closed file's mark and length (µs), read back by libavformat (None: not a whole file
/// of ours).
pub fn probe(path: &Path) -> Option<(Mark, i64)> {
    let input = ff::format::input(path).ok()?;
    let comment = input.metadata().get("comment").map(str::to_string);
    let service = service_name(&input);
    let mark = comment.or(service).as_deref().and_then(Mark::parse)?;
    let duration = input.duration();
    (duration > 0).then_some((mark, duration))
}

/// The service name of an MPEG-TS file's first program that has one (ffmpeg-next does not
/// list a file's programs).
fn service_name(input: &ff::format::context::Input) -> Option<String> {
    let key = c"service_name";
    // SAFETY: `input` is an open AVFormatContext, borrowed for this call; its `programs`
    // array holds `nb_programs` valid pointers that it owns, each with a metadata dictionary
    // (possibly null, which av_dict_get takes); the value found is copied before returning.
    unsafe {
        let ctx = input.as_ptr();
        let programs = (*ctx).programs;
        (0..(*ctx).nb_programs as usize).find_map(|i| {
            let program = *programs.add(i);
            let entry =
                ff::ffi::av_dict_get((*program).metadata, key.as_ptr(), std::ptr::null(), 0);
            (!entry.is_null()).then(|| {
                std::ffi::CStr::from_ptr((*entry).value)
                    .to_string_lossy()
                    .into_owned()
            })
        })
    }
}

/// The recordings' root of a `--record` name: its folders before the first one that changes
/// from input to input or segment to segment (`{…}`, `%`); "" for the current folder.
pub fn root_of(pattern: &str) -> PathBuf {
    let path = Path::new(pattern);
    let mut root = PathBuf::new();
    let parts: Vec<Component> = path.components().collect();
    for part in &parts[..parts.len().saturating_sub(1)] {
        let text = part.as_os_str().to_string_lossy();
        if text.contains('{') || text.contains('%') {
            break;
        }
        root.push(part);
    }
    root
}

/// The index of one root (module doc).
pub struct Index {
    root: PathBuf,
    db: Mutex<Connection>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Index({})", self.root.display())
    }
}

/// The query every listing shares: a segment's row, oldest first.
const COLUMNS: &str = "id, input, file, start_us, end_us, media_us, bytes, sidecar";

impl Index {
    /// Opens `root`'s index (made where missing, moved aside and made again where damaged)
    /// and reconciles it with the files: `inputs` are each input's name and its `--record`
    /// name (its `{n}`/`{name}` put in), whose files are looked for.
    pub fn open(root: &Path, inputs: &[(String, String)]) -> Result<Self> {
        let path = root.join(INDEX_NAME);
        if !root.as_os_str().is_empty() {
            std::fs::create_dir_all(root)
                .with_context(|| format!("making the recordings' folder '{}'", root.display()))?;
        }
        let db = match connect(&path) {
            Ok(db) => db,
            Err(e) => {
                let aside = path.with_extension(format!(
                    "sqlite.damaged-{}",
                    chrono::Local::now().format("%Y%m%d-%H%M%S")
                ));
                crate::warn!(
                    "the recordings' index '{}' can't be read ({e:#}); it is moved to '{}' and made again from the files",
                    path.display(),
                    aside.display()
                );
                std::fs::rename(&path, &aside)
                    .with_context(|| format!("moving '{}' aside", path.display()))?;
                connect(&path)?
            }
        };
        let index = Self {
            root: root.to_path_buf(),
            db: Mutex::new(db),
        };
        index.reconcile(inputs)?;
        Ok(index)
    }

    /// The root this index lists.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A file's path as the recorder names it (`root` joined).
    pub fn path_of(&self, file: &Path) -> PathBuf {
        self.root.join(file)
    }

    /// A row's `file` (relative to the root) as a path that may be read or deleted: a
    /// regular file under the root, reached through no symbolic link and no `..`; None
    /// otherwise (a folder swapped for a link, a row planted with `../`).
    pub fn file_of(&self, file: &Path) -> Option<PathBuf> {
        let mut at = self.root.clone();
        let parts: Vec<Component> = file.components().collect();
        if parts.is_empty() || !parts.iter().all(|c| matches!(c, Component::Normal(_))) {
            return None;
        }
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let meta = std::fs::symlink_metadata(&at).ok()?;
            let last = i + 1 == parts.len();
            let fits = match last {
                true => meta.file_type().is_file(),
                false => meta.file_type().is_dir(),
            };
            if !fits {
                return None;
            }
        }
        Some(at)
    }

    /// Segment `seg`'s file and its sidecar, where they are this recorder's to touch: the
    /// file as `file_of` takes it and marked by framepipe for the row's input, the sidecar
    /// beside it (where it has one); Err saying why not.
    pub fn owned(&self, seg: &Segment) -> Result<(PathBuf, Option<PathBuf>), String> {
        let shown = self.path_of(&seg.file).display().to_string();
        let file = self.file_of(&seg.file).ok_or_else(|| {
            format!("'{shown}' is not a regular file under the recordings' folder (a link, '..', or gone)")
        })?;
        match probe(&file) {
            Some((mark, _)) if mark.input == seg.input => {}
            _ => {
                return Err(format!(
                    "'{shown}' is not a segment framepipe recorded of '{}'",
                    seg.input
                ))
            }
        }
        let sidecar = match &seg.sidecar {
            None => None,
            Some(s) if *s == super::sidecar::beside(&seg.file) => self.file_of(s),
            Some(s) => {
                return Err(format!(
                    "'{}' is not the detections beside '{shown}'",
                    self.path_of(s).display()
                ))
            }
        };
        Ok((file, sidecar))
    }

    fn db(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.db.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds a closed segment at `path` (as the recorder named it): the row's number.
    pub fn add(
        &self,
        path: &Path,
        mark: &Mark,
        duration_us: i64,
        sidecar: Option<&Path>,
    ) -> Result<i64> {
        let file = self.relative(path)?;
        let sidecar = sidecar.map(|s| self.relative(s)).transpose()?;
        let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
        let db = self.db();
        db.execute(
            "INSERT OR REPLACE INTO segments (input, file, start_us, end_us, media_us, bytes, sidecar)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                mark.input,
                text_of(&file),
                mark.start_us,
                mark.start_us + duration_us,
                mark.media_us,
                bytes as i64,
                sidecar.as_deref().map(text_of),
            ],
        )
        .context("adding a segment to the recordings' index")?;
        Ok(db.last_insert_rowid())
    }

    /// The segments of `input` (every input's where None) that overlap `from..to` (µs since
    /// the epoch; open ends where None), oldest first.
    pub fn list(
        &self,
        input: Option<&str>,
        from: Option<i64>,
        to: Option<i64>,
    ) -> Result<Vec<Segment>> {
        let sql = format!(
            "SELECT {COLUMNS} FROM segments
             WHERE (?1 IS NULL OR input = ?1) AND (?2 IS NULL OR end_us > ?2) AND (?3 IS NULL OR start_us < ?3)
             ORDER BY start_us, id"
        );
        let db = self.db();
        let mut stmt = db.prepare_cached(&sql)?;
        let rows = stmt.query_map(params![input, from, to], row_of)?;
        rows.collect::<rusqlite::Result<_>>()
            .context("reading the recordings' index")
    }

    /// Segment `id`, if listed.
    pub fn get(&self, id: i64) -> Result<Option<Segment>> {
        let sql = format!("SELECT {COLUMNS} FROM segments WHERE id = ?1");
        let db = self.db();
        let found = db.query_row(&sql, params![id], row_of).optional()?;
        Ok(found)
    }

    /// Forgets segment `id` (its files were deleted).
    pub fn remove(&self, id: i64) -> Result<()> {
        self.db()
            .execute("DELETE FROM segments WHERE id = ?1", params![id])
            .context("removing a segment from the recordings' index")?;
        Ok(())
    }

    /// The bytes the index itself holds on the disk: its file and its write-ahead log
    /// (counted in `--retain-size`; the log's 32 KiB shared-memory map is not).
    pub fn disk_bytes(&self) -> u64 {
        ["", "-wal"]
            .iter()
            .filter_map(|end| {
                let mut name = self.root.join(INDEX_NAME).into_os_string();
                name.push(end);
                std::fs::metadata(name).ok()
            })
            .map(|m| m.len())
            .sum()
    }

    /// Folds the write-ahead log into the index and cuts it back (after retention deleted).
    pub fn checkpoint(&self) {
        let db = self.db();
        if let Err(e) = db.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
            crate::debug!("recordings' index: checkpoint: {e}");
        }
    }

    /// `path` relative to the root (a recorder's file is always under it).
    fn relative(&self, path: &Path) -> Result<PathBuf> {
        let rel = path.strip_prefix(&self.root).with_context(|| {
            format!(
                "'{}' is not under the recordings' folder '{}'",
                path.display(),
                self.root.display()
            )
        })?;
        Ok(rel.to_path_buf())
    }

    /// Drops the rows whose file is gone and adds the marked files of `inputs` that have
    /// none (module doc).
    fn reconcile(&self, inputs: &[(String, String)]) -> Result<()> {
        let listed = self.list(None, None, None)?;
        let mut gone = 0;
        for seg in &listed {
            if self.file_of(&seg.file).is_none() {
                self.remove(seg.id)?;
                gone += 1;
            }
        }
        let known: std::collections::HashSet<PathBuf> =
            listed.into_iter().map(|s| s.file).collect();
        let patterns: Vec<(&str, Pattern)> = inputs
            .iter()
            .map(|(name, pattern)| (name.as_str(), Pattern::of(pattern)))
            .collect();
        let mut added = 0;
        for path in files_under(&self.root) {
            let Ok(rel) = self.relative(&path) else {
                continue;
            };
            if known.contains(&rel) {
                continue;
            }
            let text = path.to_string_lossy();
            let Some((name, _)) = patterns.iter().find(|(_, p)| p.matches(&text)) else {
                continue;
            };
            let Some((mark, duration)) = probe(&path) else {
                continue;
            };
            if mark.input != *name {
                continue;
            }
            let sidecar = super::sidecar::beside(&path);
            self.add(
                &path,
                &mark,
                duration,
                sidecar.is_file().then_some(sidecar.as_path()),
            )?;
            added += 1;
        }
        if gone + added > 0 {
            crate::info!(
                "recordings' index '{}': {added} segment(s) found on disk added, {gone} whose file is gone (or not a regular file under it) dropped",
                self.root.join(INDEX_NAME).display()
            );
        }
        Ok(())
    }
}

/// Opens (or makes) the index at `path`, checked whole.
fn connect(path: &Path) -> Result<Connection> {
    let db = Connection::open(path).with_context(|| format!("opening '{}'", path.display()))?;
    // WAL: a reader (the browser view) never waits for the recorders, and a crash leaves
    // every committed row.
    db.pragma_update(None, "journal_mode", "WAL")?;
    db.pragma_update(None, "synchronous", "NORMAL")?;
    // The write-ahead log stays small (it counts in --retain-size, and a small disk must
    // not fill with it): checkpointed every 16 pages, cut back to 64 KiB when it is.
    db.pragma_update(None, "wal_autocheckpoint", 16)?;
    db.pragma_update(None, "journal_size_limit", 64 * 1024)?;
    db.busy_timeout(std::time::Duration::from_secs(2))?;
    let check: String = db.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
    anyhow::ensure!(check == "ok", "{check}");
    db.execute_batch(
        "CREATE TABLE IF NOT EXISTS segments (
            id INTEGER PRIMARY KEY,
            input TEXT NOT NULL,
            file TEXT NOT NULL UNIQUE,
            start_us INTEGER NOT NULL,
            end_us INTEGER NOT NULL,
            media_us INTEGER NOT NULL,
            bytes INTEGER NOT NULL,
            sidecar TEXT
        );
        CREATE INDEX IF NOT EXISTS segments_by_time ON segments (input, start_us);",
    )?;
    Ok(db)
}

fn row_of(r: &rusqlite::Row) -> rusqlite::Result<Segment> {
    Ok(Segment {
        id: r.get(0)?,
        input: r.get(1)?,
        file: PathBuf::from(r.get::<_, String>(2)?),
        start_us: r.get(3)?,
        end_us: r.get(4)?,
        media_us: r.get(5)?,
        bytes: r.get::<_, i64>(6)?.max(0) as u64,
        sidecar: r.get::<_, Option<String>>(7)?.map(PathBuf::from),
    })
}

fn text_of(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Every file under `root` (its hidden files, a segment still being written among them,
/// left out), at most `MAX_DEPTH` folders down.
fn files_under(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut folders = vec![(root.to_path_buf(), 0)];
    while let Some((folder, depth)) = folders.pop() {
        let at = match folder.as_os_str().is_empty() {
            true => Path::new("."),
            false => folder.as_path(),
        };
        let Ok(entries) = std::fs::read_dir(at) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if name.to_string_lossy().starts_with('.') {
                continue;
            }
            let path = folder.join(&name);
            match entry.file_type() {
                Ok(t) if t.is_dir() && depth < MAX_DEPTH => folders.push((path, depth + 1)),
                Ok(t) if t.is_file() => files.push(path),
                _ => {}
            }
        }
    }
    files
}

/// A `--record` name's shape (`{seg}` five digits or more, `%Y` four, `%m %d %H %M %S`
/// two, `%%` a `%`, and before the extension the `-K` a name already taken gets), to find
/// its files again.
#[derive(Debug)]
struct Pattern(Vec<Piece>);

#[derive(Debug)]
enum Piece {
    Text(char),
    Digits {
        at_least: usize,
        at_most: usize,
    },
    /// Nothing, or `-` and a number (`rename_without_replacing`'s second choice).
    Taken,
}

impl Pattern {
    fn of(pattern: &str) -> Self {
        let digits = |at_least, at_most| Piece::Digits { at_least, at_most };
        let mut pieces = Vec::new();
        let text = pattern.replace("{seg}", "\u{0}");
        let ext = text.rfind('.').filter(|&at| !text[at..].contains('/'));
        let (text, ext) = match ext {
            Some(at) => (&text[..at], &text[at..]),
            None => (text.as_str(), ""),
        };
        let mut chars = text.chars().peekable();
        while let Some(c) = chars.next() {
            let piece = match (c, chars.peek().copied()) {
                ('\u{0}', _) => digits(5, 10),
                ('%', Some('Y')) => digits(4, 4),
                ('%', Some('m' | 'd' | 'H' | 'M' | 'S')) => digits(2, 2),
                ('%', Some('%')) => Piece::Text('%'),
                (c, _) => {
                    pieces.push(Piece::Text(c));
                    continue;
                }
            };
            if c == '%' {
                chars.next();
            }
            pieces.push(piece);
        }
        pieces.push(Piece::Taken);
        pieces.extend(ext.chars().map(Piece::Text));
        Self(pieces)
    }

    fn matches(&self, text: &str) -> bool {
        let chars: Vec<char> = text.chars().collect();
        matches_from(&self.0, &chars)
    }
}

fn matches_from(pieces: &[Piece], text: &[char]) -> bool {
    match pieces.split_first() {
        None => text.is_empty(),
        Some((Piece::Text(c), rest)) => text.first() == Some(c) && matches_from(rest, &text[1..]),
        Some((Piece::Taken, rest)) => {
            let run = match text.first() {
                Some('-') => text[1..].iter().take_while(|c| c.is_ascii_digit()).count(),
                _ => 0,
            };
            matches_from(rest, text) || (run > 0 && matches_from(rest, &text[run + 1..]))
        }
        Some((&Piece::Digits { at_least, at_most }, rest)) => {
            let run = text.iter().take_while(|c| c.is_ascii_digit()).count();
            (at_least..=at_most.min(run)).any(|n| matches_from(rest, &text[n..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_root_is_the_folders_every_input_shares() {
        assert_eq!(
            root_of("rec/{name}/%Y%m%d-%H%M%S.mp4"),
            PathBuf::from("rec")
        );
        assert_eq!(
            root_of("/srv/nvr/cam-{n}-{seg}.mkv"),
            PathBuf::from("/srv/nvr")
        );
        assert_eq!(root_of("cam-{seg}.ts"), PathBuf::new());
        assert_eq!(root_of("a/b/%Y/x.mp4"), PathBuf::from("a/b"));
    }

    #[test]
    fn a_row_is_touched_only_as_a_regular_file_under_the_root() {
        let top = std::env::temp_dir().join(format!("fp-index-files-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&top);
        let root = top.join("rec");
        std::fs::create_dir_all(root.join("cam")).unwrap();
        std::fs::create_dir_all(top.join("outside")).unwrap();
        std::fs::write(root.join("cam/a.mp4"), b"x").unwrap();
        std::fs::write(top.join("outside/victim.txt"), b"x").unwrap();
        std::os::unix::fs::symlink(top.join("outside"), root.join("linked")).unwrap();
        std::os::unix::fs::symlink(top.join("outside/victim.txt"), root.join("cam/b.mp4")).unwrap();
        let index = Index::open(&root, &[]).unwrap();
        assert_eq!(
            index.file_of(Path::new("cam/a.mp4")),
            Some(root.join("cam/a.mp4"))
        );
        for refused in [
            "../outside/victim.txt",
            "cam/../../outside/victim.txt",
            "linked/victim.txt",
            "cam/b.mp4",
            "cam",
            "/etc/passwd",
            "cam/none.mp4",
            "",
        ] {
            assert_eq!(index.file_of(Path::new(refused)), None, "{refused}");
        }
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn a_pattern_finds_its_own_files_only() {
        let p = Pattern::of("rec/front/%Y%m%d-%H%M%S-{seg}.mp4");
        assert!(p.matches("rec/front/20261206-103355-00012.mp4"));
        assert!(!p.matches("rec/front/20261206-103355-0001.mp4"));
        assert!(!p.matches("rec/back/20261206-103355-00012.mp4"));
        assert!(!p.matches("rec/front/20261206-103355-00012.mp4.bak"));
        assert!(p.matches("rec/front/20261206-103355-00012-3.mp4"));
        let q = Pattern::of("x%%y-{seg}.ts");
        assert!(q.matches("x%y-123456.ts"));
    }

    #[test]
    fn a_mark_reads_back_with_any_name() {
        let m = Mark {
            input: "front door = 2".into(),
            start_us: 1_765_000_000_000_000,
            media_us: -5,
        };
        assert_eq!(Mark::parse(&m.text()), Some(m));
        assert_eq!(Mark::parse("Lavf59"), None);
    }
}
