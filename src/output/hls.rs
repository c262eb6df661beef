//! The files of an HLS output (`live/index.m3u8`): which names it writes (the playlist and
//! its numbered segments `live/index0.ts`, `live/index1.ts`…, each first written under
//! `NAME.tmp` and renamed), the claim on them before the run, and the way FFmpeg's HLS muxer
//! opens them during it: through `io_open`/`io_close2` callbacks of our own instead of
//! FFmpeg's file protocol.
//!
//! Invariants:
//! - the muxer opens only this output's names (`Names::owns`); any other is refused;
//! - every file is created new (`O_CREAT|O_EXCL|O_NOFOLLOW`) after whatever had its name is
//!   unlinked, so a link planted at a name, before or during the run, is removed and never
//!   followed;
//! - before the run, a name of this output that exists is refused without `-y`, and one that
//!   is an input file (by identity) is refused always; two HLS outputs whose segments share
//!   names, and another output that is one of these names, are refused (`refuse_crossing`);
//! - the first write or close that fails is kept (`Files::failure`): the output stops and
//!   the run says so, never "sent"; the file that failed is removed, so no part of it is
//!   renamed into place, and nothing more is opened, so the last whole playlist stays;
//! - a segment the playlist lists that is gone from the folder (removed by something else)
//!   is said once, when the playlist is next written, and counted (`Files::missing`).

use std::collections::BTreeSet;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ffmpeg_next as ff;

use super::claim::Overwrite;
use crate::paths::{self, InputFile};

/// Why an HLS output can't be written as named.
#[derive(Debug, thiserror::Error)]
pub enum HlsError {
    /// The playlist's path has no file name.
    #[error("--output '{0}': an HLS playlist needs a file name")]
    NoFileName(String),
    /// Its stem is empty or holds '%'.
    #[error("--output '{0}': an HLS playlist's name must have a stem without '%' (its segments are named after it)")]
    BadStem(String),
    /// Its folder can't be made.
    #[error("--output: creating the folder '{}': {source}", folder.display())]
    Folder {
        /// The folder.
        folder: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// One of its names exists, without `-y`.
    #[error("--output '{path}': '{}' exists (one of the files this HLS output writes); they are replaced only with -y, or choose another name", file.display())]
    Exists {
        /// The playlist.
        path: String,
        /// The file that exists.
        file: PathBuf,
    },
    /// One of its names is an input file.
    #[error("--output '{path}' would write '{}', which is the input file '{input}': choose another playlist name", file.display())]
    IsAnInput {
        /// The playlist.
        path: String,
        /// The name it would write.
        file: PathBuf,
        /// The input, as given.
        input: String,
    },
    /// Two HLS outputs would write the same segments.
    #[error("--output '{first}' and --output '{second}' would write segments of the same names ({stem}N.ts): give each playlist a name that is not the other's followed by digits")]
    SameSegments {
        /// The first playlist.
        first: String,
        /// The second.
        second: String,
        /// Their segments' stem.
        stem: String,
    },
    /// Another output is one of its files.
    #[error("'{other}' is one of the files the HLS output '{path}' writes: choose another name")]
    Crossed {
        /// The other output.
        other: String,
        /// The playlist.
        path: String,
    },
    /// Its folder can't be written.
    #[error(transparent)]
    Path(#[from] paths::PathError),
}

/// The names an HLS output writes, from its playlist's path.
#[derive(Clone, Debug)]
pub struct Names {
    folder: PathBuf,
    /// The playlist's file name.
    playlist: String,
    /// The segments' names are `{stem}{n}.ts`.
    stem: String,
}

impl Names {
    /// The names of the playlist `path` (which ends in `.m3u8`, any case).
    pub fn new(path: &str) -> Result<Self, HlsError> {
        let p = Path::new(path);
        let playlist = p
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| HlsError::NoFileName(path.into()))?;
        let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or_default();
        if stem.is_empty() || stem.contains('%') {
            return Err(HlsError::BadStem(path.into()));
        }
        Ok(Self {
            folder: paths::folder_of(path).to_path_buf(),
            playlist: playlist.to_string(),
            stem: stem.to_string(),
        })
    }

    /// The segments' file name pattern for the muxer (`hls_segment_filename`).
    pub fn segment_pattern(&self) -> String {
        self.folder
            .join(format!("{}%d.ts", self.stem))
            .to_string_lossy()
            .into_owned()
    }

    /// Whether `name` (a file name in the folder) is one this output writes.
    pub fn owns(&self, name: &str) -> bool {
        let name = name.strip_suffix(".tmp").unwrap_or(name);
        if name == self.playlist {
            return true;
        }
        name.strip_prefix(self.stem.as_str())
            .and_then(|rest| rest.strip_suffix(".ts"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    }

    /// Whether `path` is one of this output's files: in its folder (by identity) and owned.
    fn owns_path(&self, path: &Path) -> bool {
        let folder = paths::folder_of(&path.to_string_lossy()).to_path_buf();
        let same_folder = folder == self.folder
            || paths::file_id(&folder).is_some_and(|id| paths::file_id(&self.folder) == Some(id));
        same_folder
            && path
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| self.owns(n))
    }

    /// Every existing file in the folder that this output would write.
    fn existing(&self) -> Vec<PathBuf> {
        let Ok(entries) = std::fs::read_dir(&self.folder) else {
            return Vec::new();
        };
        let mut found: Vec<PathBuf> = entries
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(|n| self.owns(n)))
            .map(|e| e.path())
            .collect();
        found.sort();
        found
    }
}

/// Claims the HLS output `path` before the run (module doc): makes its folder, refuses an
/// input among its names, and, without `-y`, any of its names that exists.
pub fn claim(path: &str, overwrite: Overwrite, inputs: &[InputFile]) -> Result<Names, HlsError> {
    let names = Names::new(path)?;
    std::fs::create_dir_all(&names.folder).map_err(|source| HlsError::Folder {
        folder: names.folder.clone(),
        source,
    })?;
    refuse_inputs(path, inputs)?;
    for file in names.existing() {
        if overwrite != Overwrite::Replace {
            return Err(HlsError::Exists {
                path: path.into(),
                file,
            });
        }
    }
    let probe = names
        .folder
        .join(format!(".framepipe-{}.probe", std::process::id()));
    paths::check_writable("--output", &probe.to_string_lossy())?;
    Ok(names)
}

/// Fails when a file the HLS output `path` would write is one of `inputs` (by identity).
pub fn refuse_inputs(path: &str, inputs: &[InputFile]) -> Result<(), HlsError> {
    let names = Names::new(path)?;
    for file in names.existing() {
        if let Some(input) = inputs.iter().find(|i| paths::file_id(&file) == Some(i.id)) {
            return Err(HlsError::IsAnInput {
                path: path.into(),
                file,
                input: input.name.into(),
            });
        }
    }
    Ok(())
}

/// Refuses outputs that cross an HLS output's files: another HLS output whose segments have
/// the same names, or another output (file, report) that is one of them.
pub fn refuse_crossing(hls: &[&str], others: &[&str]) -> Result<(), HlsError> {
    let names: Vec<Names> = hls
        .iter()
        .map(|p| Names::new(p))
        .collect::<Result<_, _>>()?;
    for (k, n) in names.iter().enumerate() {
        for (j, m) in names[..k].iter().enumerate() {
            let clash = stems_cross(&n.stem, &m.stem)
                && (m.owns_path(&n.folder.join(format!("{}10.ts", n.stem)))
                    || n.owns_path(&m.folder.join(format!("{}10.ts", m.stem))));
            if clash {
                return Err(HlsError::SameSegments {
                    first: hls[j].into(),
                    second: hls[k].into(),
                    stem: n.stem.clone(),
                });
            }
        }
        if let Some(o) = others.iter().find(|o| n.owns_path(Path::new(o))) {
            return Err(HlsError::Crossed {
                other: o.to_string(),
                path: hls[k].into(),
            });
        }
    }
    Ok(())
}

/// Whether two stems' segments can have one name: `{a}{n}.ts` is `{b}{m}.ts` where the
/// stems are equal, or one is the other followed by digits (`x` and `x1` both write
/// `x10.ts`).
fn stems_cross(a: &str, b: &str) -> bool {
    let digits = |rest: &str| rest.bytes().all(|c| c.is_ascii_digit());
    a.strip_prefix(b).is_some_and(digits) || b.strip_prefix(a).is_some_and(digits)
}

/// What the muxer's files went through, shared with the output that checks it.
#[derive(Debug)]
pub struct Files {
    names: Names,
    failure: Mutex<Option<String>>,
    missing: Mutex<BTreeSet<String>>,
}

impl Files {
    /// The state of the output named by `names`, before its muxer opens anything.
    pub fn new(names: Names) -> Self {
        Self {
            names,
            failure: Mutex::new(None),
            missing: Mutex::new(BTreeSet::new()),
        }
    }

    /// The first write, open or close that failed, in words.
    pub fn failure(&self) -> Option<String> {
        self.failure.lock().ok().and_then(|f| f.clone())
    }

    /// How many segments the playlist listed after they were removed by something else.
    pub fn missing(&self) -> usize {
        self.missing.lock().map_or(0, |m| m.len())
    }

    /// What the playlist on disk lists: its segments and their seconds (`#EXTINF`); none
    /// where it was never written whole.
    pub fn listed(&self) -> (usize, f64) {
        let path = self.names.folder.join(&self.names.playlist);
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines()
            .filter_map(|l| l.strip_prefix("#EXTINF:"))
            .filter_map(|d| d.split(',').next()?.trim().parse::<f64>().ok())
            .fold((0, 0.0), |(n, secs), d| (n + 1, secs + d))
    }

    fn fail(&self, why: String) {
        if let Ok(mut f) = self.failure.lock() {
            if f.is_none() {
                crate::warn!("HLS: {why}");
                *f = Some(why);
            }
        }
    }

    /// Says each segment `playlist` lists that is gone from the folder (once each).
    fn check_listed(&self, playlist: &[u8]) {
        let text = String::from_utf8_lossy(playlist);
        for seg in text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
        {
            let path = self.names.folder.join(seg);
            let tmp = self.names.folder.join(format!("{seg}.tmp"));
            if path.exists() || tmp.exists() {
                continue;
            }
            let Ok(mut missing) = self.missing.lock() else {
                return;
            };
            if missing.insert(seg.to_string()) {
                crate::warn!(
                    "HLS: segment '{}' was removed by something else during the run; the playlist still lists it, and players will fail on it",
                    path.display()
                );
            }
        }
    }
}

/// Creates `path` new: whatever has its name is unlinked first (a link is removed, not
/// followed), then the file is made with `O_EXCL|O_NOFOLLOW`. A name planted again between
/// the two is unlinked again, up to `CREATE_TRIES` times; where every try lost, the name is
/// unlinked once more before the error, so that the muxer's rename of a temporary playlist
/// over the real one finds no planted link to rename.
fn create_new(path: &Path) -> std::io::Result<File> {
    let mut tries = 0;
    loop {
        match std::fs::remove_file(path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        let made = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .mode(0o666)
            .open(path);
        match made {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                tries += 1;
                if tries == CREATE_TRIES {
                    let _ = std::fs::remove_file(path);
                    return Err(e);
                }
            }
            made => return made,
        }
    }
}

/// How often `create_new` unlinks a name planted again before it gives up.
const CREATE_TRIES: u32 = 64;

/// One file the muxer has open.
struct Open {
    file: File,
    path: PathBuf,
    shown: String,
    /// A write failed: the file is removed when closed, so that no part of it is renamed
    /// into place (the muxer's rename then finds nothing).
    failed: bool,
    /// The playlist's bytes, kept to check what it lists.
    playlist: Option<Vec<u8>>,
    files: *const Files,
}

const BUFFER: c_int = 64 * 1024;

/// Points `ctx`'s `io_open` and `io_close2` at this module, for `files`.
///
/// # Safety
/// `ctx` is a live output context; `files` outlives it (the caller holds the `Arc`).
pub unsafe fn install(ctx: *mut ff::ffi::AVFormatContext, files: *const Files) {
    // SAFETY: the caller's contract: ctx is live and files outlives it.
    unsafe {
        (*ctx).opaque = files as *mut c_void;
        (*ctx).io_open = Some(io_open);
        (*ctx).io_close2 = Some(io_close2);
    }
}

/// FFmpeg's `io_open`: a file of this output, created new (module doc).
unsafe extern "C" fn io_open(
    s: *mut ff::ffi::AVFormatContext,
    pb: *mut *mut ff::ffi::AVIOContext,
    url: *const c_char,
    flags: c_int,
    _options: *mut *mut ff::ffi::AVDictionary,
) -> c_int {
    // SAFETY: FFmpeg passes the context `install` set up (its opaque is the live `Files`),
    // a NUL-terminated name and a place for the new byte stream.
    let (files, name) = unsafe { (&*((*s).opaque as *const Files), CStr::from_ptr(url)) };
    let path = PathBuf::from(name.to_string_lossy().into_owned());
    let shown = path.display().to_string();
    if files.failure().is_some() {
        // Nothing more after a failure: the last whole playlist stays as it is.
        return ff::ffi::AVERROR(libc::EIO);
    }
    if flags & ff::ffi::AVIO_FLAG_READ != 0 || !files.names.owns_path(&path) {
        files.fail(format!(
            "the muxer asked for '{shown}', which is not one of its files"
        ));
        return ff::ffi::AVERROR(libc::EPERM);
    }
    let file = match create_new(&path) {
        Ok(f) => f,
        Err(e) => {
            files.fail(format!("creating '{shown}': {e}"));
            return ff::ffi::AVERROR(e.raw_os_error().unwrap_or(libc::EIO));
        }
    };
    let playlist = shown
        .to_ascii_lowercase()
        .ends_with(".m3u8.tmp")
        .then(Vec::new);
    let open = Box::into_raw(Box::new(Open {
        file,
        path,
        shown,
        failed: false,
        playlist,
        files,
    }));
    // SAFETY: av_malloc'd buffer handed to the context, which frees it in io_close2; the
    // opaque is the Box just made, taken back in io_close2.
    unsafe {
        let buffer = ff::ffi::av_malloc(BUFFER as usize) as *mut u8;
        let ctx = ff::ffi::avio_alloc_context(
            buffer,
            BUFFER,
            1,
            open as *mut c_void,
            None,
            Some(write_packet),
            None,
        );
        if buffer.is_null() || ctx.is_null() {
            drop(Box::from_raw(open));
            return ff::ffi::AVERROR(libc::ENOMEM);
        }
        *pb = ctx;
    }
    0
}

/// The byte stream's writer: the bytes to the file, an error kept.
unsafe extern "C" fn write_packet(opaque: *mut c_void, buf: *mut u8, size: c_int) -> c_int {
    // SAFETY: opaque is the `Open` io_open made, alive until io_close2; buf holds size bytes.
    let (open, bytes) = unsafe {
        (
            &mut *(opaque as *mut Open),
            std::slice::from_raw_parts(buf, size.max(0) as usize),
        )
    };
    if let Some(p) = &mut open.playlist {
        p.extend_from_slice(bytes);
    }
    match open.file.write_all(bytes) {
        Ok(()) => size,
        Err(e) => {
            open.failed = true;
            // SAFETY: files outlives every context of the output (install's contract).
            let files = unsafe { &*open.files };
            files.fail(format!("writing '{}': {e}", open.shown));
            ff::ffi::AVERROR(e.raw_os_error().unwrap_or(libc::EIO))
        }
    }
}

/// FFmpeg's `io_close2`: flushes, closes, frees; the first error kept.
unsafe extern "C" fn io_close2(
    _s: *mut ff::ffi::AVFormatContext,
    pb: *mut ff::ffi::AVIOContext,
) -> c_int {
    if pb.is_null() {
        return 0;
    }
    // SAFETY: pb is a byte stream io_open made: its opaque is our `Open`, its buffer
    // av_malloc'd; both are freed here once, as FFmpeg closes each stream once.
    unsafe {
        ff::ffi::avio_flush(pb);
        let error = (*pb).error;
        let open = Box::from_raw((*pb).opaque as *mut Open);
        let files = &*open.files;
        let closed = open.file.sync_data().or_else(|e| match e.raw_os_error() {
            Some(libc::EINVAL) => Ok(()), // a file system without sync
            _ => Err(e),
        });
        if let Err(e) = &closed {
            files.fail(format!("closing '{}': {e}", open.shown));
        }
        if open.failed || error < 0 || closed.is_err() {
            let _ = std::fs::remove_file(&open.path);
        } else if let Some(list) = &open.playlist {
            files.check_listed(list);
        }
        let mut pb = pb;
        ff::ffi::av_freep(&mut (*pb).buffer as *mut *mut u8 as *mut c_void);
        ff::ffi::avio_context_free(&mut pb);
        error.min(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_hls_output_owns_its_playlist_and_numbered_segments() {
        let n = Names::new("live/index.m3u8").unwrap();
        for ok in [
            "index.m3u8",
            "index.m3u8.tmp",
            "index0.ts",
            "index17.ts.tmp",
        ] {
            assert!(n.owns(ok), "{ok}");
        }
        for no in [
            "index.ts",
            "indexa.ts",
            "other0.ts",
            "index0.mp4",
            "index0.ts.bak",
        ] {
            assert!(!n.owns(no), "{no}");
        }
        assert!(n.segment_pattern().ends_with("live/index%d.ts"));
        assert!(Names::new("live/a%d.m3u8").is_err());
    }

    #[test]
    fn playlists_sharing_segments_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let a = dir.join("x.m3u8").to_string_lossy().into_owned();
        let b = dir.join("x.M3U8").to_string_lossy().into_owned();
        let c = dir.join("y.m3u8").to_string_lossy().into_owned();
        let seg = dir.join("x3.ts").to_string_lossy().into_owned();
        assert!(refuse_crossing(&[&a, &b], &[]).is_err());
        assert!(refuse_crossing(&[&a, &c], &[]).is_ok());
        assert!(refuse_crossing(&[&a], &[&seg]).is_err());
    }
}
