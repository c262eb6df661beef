//! Claiming an output before writing it: the file (or image sequence) is locked for this run,
//! an existing one is replaced only when asked (`-y`), and a replacement is written beside it
//! and renamed over it only once it is finished and holds at least one frame.
//!
//! Invariants:
//! - a run holds an exclusive `flock` on its output (a video file, or an image sequence's
//!   folder) from before the input opens until the process ends; a second run that asks for
//!   the same output is refused with the first run's process id (read from `/proc/locks`);
//! - without `-y` an existing output is never opened for writing (`-n` says so explicitly);
//! - a new video file is written in place (so that a crash keeps what its container keeps),
//!   created exclusively; one that ends with no frame is removed again;
//! - a replaced video file is written to `NAME.framepipe-PID.part.EXT` in the same folder and
//!   renamed over the old one by `commit`; on any failure the old file is left untouched;
//! - an image sequence is claimed by its folder; its files, like the reports
//!   (`--summary-json`, `--trace`, `--timeline`), are written by `paths::write_atomically`
//!   (a temporary name created with `O_EXCL|O_NOFOLLOW`, renamed into place), so a crash never
//!   leaves a truncated image and a link planted during the run is replaced, not followed.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What to do with an output that already exists (`-y`, `-n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Overwrite {
    /// Refuse it, saying `-y` replaces it (the default, as ffmpeg's without a terminal).
    #[default]
    Refuse,
    /// `-n`: never replace; refuse it, saying so.
    Never,
    /// `-y`: replace it, atomically, once the new one is finished.
    Replace,
}

impl Overwrite {
    /// From the two flags (clap keeps them exclusive).
    pub fn from_flags(yes: bool, no: bool) -> Self {
        match (yes, no) {
            (true, _) => Overwrite::Replace,
            (_, true) => Overwrite::Never,
            _ => Overwrite::Refuse,
        }
    }
}

/// Why an output can't be claimed, or its claim not kept (`what`: the flag and the name).
#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    /// The lock could not be taken, for a reason of the system's.
    #[error("{what}: can't be locked for this run: {source}")]
    Lock {
        /// The flag and the name.
        what: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Another process holds the lock.
    #[error("{what} is being written by another run: {holder}; wait for it to end, or choose another name")]
    Held {
        /// The flag and the name.
        what: String,
        /// "name (pid N)", or "another process".
        holder: String,
    },
    /// It exists and `-n` never replaces.
    #[error("{what} already exists and -n never replaces a file")]
    NeverReplaced {
        /// The flag and the name.
        what: String,
    },
    /// It exists, without `-y`.
    #[error("{what} already exists; -y (--overwrite) replaces it once the new one is finished, or choose another name")]
    Exists {
        /// The flag and the name.
        what: String,
    },
    /// Files of an image sequence exist and `-n` never replaces.
    #[error("{flag}: {what}, already exist and -n never replaces a file")]
    SequenceNeverReplaced {
        /// The flag.
        flag: String,
        /// How many files, and the first.
        what: String,
    },
    /// Files of an image sequence exist, without `-y`.
    #[error(
        "{flag}: {what}, already exist; -y (--overwrite) replaces them, or choose another name"
    )]
    SequenceExists {
        /// The flag.
        flag: String,
        /// How many files, and the first.
        what: String,
    },
    /// A file or folder could not be opened or created.
    #[error("{what}: {source}")]
    Open {
        /// The flag, the name and what was tried.
        what: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// No frame was written: the new file is removed, an old one left as it was.
    #[error("no frame was written, so '{path}' was {}", if *.replacing { "left as it was" } else { "not kept" })]
    Empty {
        /// The output.
        path: String,
        /// Whether an old file was there.
        replacing: bool,
    },
    /// The finished replacement could not be renamed over the old file.
    #[error("the new video is finished in '{writing}' but could not replace '{path}': {source}")]
    NotReplaced {
        /// Where it is finished.
        writing: String,
        /// The output.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// Takes an exclusive, non-blocking `flock` on `file`; fails naming the process that holds
/// it.
fn lock(file: &File, what: &str) -> Result<(), ClaimError> {
    match rustix::fs::flock(file, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => return Ok(()),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => {}
        Err(e) => {
            return Err(ClaimError::Lock {
                what: what.into(),
                source: e.into(),
            });
        }
    }
    let holder = file
        .metadata()
        .ok()
        .and_then(|m| lock_holder(m.dev(), m.ino()))
        .map(|(pid, name)| format!("{name} (pid {pid})"))
        .unwrap_or_else(|| "another process".into());
    Err(ClaimError::Held {
        what: what.into(),
        holder,
    })
}

/// The process holding a `flock` on the file `dev`/`ino`, and its name, from `/proc/locks`.
fn lock_holder(dev: u64, ino: u64) -> Option<(u32, String)> {
    let locks = std::fs::read_to_string("/proc/locks").ok()?;
    let (major, minor) = (
        u64::from(rustix::fs::major(dev)),
        u64::from(rustix::fs::minor(dev)),
    );
    locks.lines().find_map(|line| {
        // "1: FLOCK  ADVISORY  WRITE 12345 fd:01:1234567 0 EOF"
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.get(1) != Some(&"FLOCK") {
            return None;
        }
        let pid: u32 = f.get(4)?.parse().ok()?;
        let mut id = f.get(5)?.split(':');
        let ma = u64::from_str_radix(id.next()?, 16).ok()?;
        let mi = u64::from_str_radix(id.next()?, 16).ok()?;
        let i: u64 = id.next()?.parse().ok()?;
        if (ma, mi, i) != (major, minor, ino) || pid == std::process::id() {
            return None;
        }
        let name = std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "a process".into());
        Some((pid, name))
    })
}

/// Why an existing output is not replaced.
fn exists_error(flag: &str, path: &str, overwrite: Overwrite) -> ClaimError {
    let what = format!("{flag} '{path}'");
    match overwrite {
        Overwrite::Never => ClaimError::NeverReplaced { what },
        _ => ClaimError::Exists { what },
    }
}

/// The temporary name a replacement of `path` is written under: same folder, same
/// extension (the container is chosen by it), this process's id.
fn part_name(path: &Path) -> PathBuf {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let ext = path
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    let pid = std::process::id();
    let mut name = format!("{stem}.framepipe-{pid}.part{ext}");
    // A name near the file system's limit leaves no room for the suffix: a short one then.
    if name.len() > 255 {
        name = format!(".framepipe-{pid}.part{ext}");
    }
    path.with_file_name(name)
}

/// A video file claimed for this run.
#[derive(Debug)]
pub struct VideoClaim {
    /// The name the user gave.
    pub path: String,
    /// Where the frames are written: `path`, or a temporary name beside it when replacing.
    pub writing: String,
    /// Holds the lock for the run.
    _lock: File,
    replacing: bool,
    done: bool,
}

impl VideoClaim {
    /// Claims `path`: locks it, refuses it when it exists and `overwrite` does not replace,
    /// and picks the name to write.
    pub fn new(flag: &str, path: &str, overwrite: Overwrite) -> Result<Self, ClaimError> {
        let p = Path::new(path);
        match OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(p)
        {
            Ok(file) => {
                // Another run may have locked the file we just made: it is theirs then.
                lock(&file, &format!("{flag} '{path}'"))?;
                Ok(Self {
                    path: path.into(),
                    writing: path.into(),
                    _lock: file,
                    replacing: false,
                    done: false,
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                let file = File::open(p)
                    .or_else(|_| OpenOptions::new().write(true).open(p))
                    .map_err(|source| ClaimError::Open {
                        what: format!("{flag} '{path}' can't be opened"),
                        source,
                    })?;
                lock(&file, &format!("{flag} '{path}'"))?;
                if overwrite != Overwrite::Replace {
                    return Err(exists_error(flag, path, overwrite));
                }
                let part = part_name(p);
                OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .mode(0o666)
                    .open(&part)
                    .map_err(|source| ClaimError::Open {
                        what: format!("{flag} '{path}': can't create '{}'", part.display()),
                        source,
                    })?;
                Ok(Self {
                    path: path.into(),
                    writing: part.to_string_lossy().into_owned(),
                    _lock: file,
                    replacing: true,
                    done: false,
                })
            }
            Err(source) => Err(ClaimError::Open {
                what: format!("{flag} '{path}' can't be written"),
                source,
            }),
        }
    }

    /// Whether an existing file is being replaced.
    pub fn replacing(&self) -> bool {
        self.replacing
    }

    /// Ends the claim once the file is finalized holding `frames` frames: a replacement is
    /// renamed over the old file when it holds at least one; otherwise what was written is
    /// removed (the old file, if any, stays as it was). Says what happened, in words.
    pub fn commit(&mut self, frames: u64) -> Result<(), ClaimError> {
        if self.done {
            return Ok(());
        }
        self.done = true;
        if frames == 0 {
            let _ = std::fs::remove_file(&self.writing);
            return Err(ClaimError::Empty {
                path: self.path.clone(),
                replacing: self.replacing,
            });
        }
        if self.replacing {
            std::fs::rename(&self.writing, &self.path).map_err(|source| {
                ClaimError::NotReplaced {
                    writing: self.writing.clone(),
                    path: self.path.clone(),
                    source,
                }
            })?;
        }
        Ok(())
    }
}

impl Drop for VideoClaim {
    /// A claim dropped without `commit` (the writer never opened): a replacement's
    /// temporary file is removed, and so is a new file that holds nothing.
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let empty = || std::fs::metadata(&self.writing).is_ok_and(|m| m.len() == 0);
        if self.replacing || empty() {
            let _ = std::fs::remove_file(&self.writing);
        }
    }
}

/// What a run holds on its output until it ends.
#[derive(Debug)]
pub enum Claimed {
    /// Nothing (standard output, or no output).
    Nothing,
    /// A video file.
    Video(VideoClaim),
    /// An image sequence's folder.
    Folder(FolderLock),
    /// An HLS playlist.
    Playlist(PlaylistLock),
}

/// An image sequence's folder, locked for this run.
#[derive(Debug)]
pub struct FolderLock(#[allow(dead_code)] File);

impl FolderLock {
    /// Locks `folder` for an image sequence written by `flag`.
    pub fn new(flag: &str, folder: &Path, pattern: &str) -> Result<Self, ClaimError> {
        let dir = File::open(folder).map_err(|source| ClaimError::Open {
            what: format!("{flag} '{pattern}': can't open its folder"),
            source,
        })?;
        lock(&dir, &format!("{flag} '{pattern}' (its folder)"))?;
        Ok(Self(dir))
    }
}

/// An HLS playlist locked for this run (`PlaylistLock::new`): its hidden lock file, removed
/// when the run ends.
#[derive(Debug)]
pub struct PlaylistLock {
    _file: File,
    path: PathBuf,
}

impl PlaylistLock {
    /// Locks an HLS playlist for this run: its hidden lock file beside it
    /// (`.NAME.m3u8.lock`, made where missing, never followed where it is a link; the
    /// playlist itself is replaced at every write, so it can't hold the lock), so that a
    /// second run on the same playlist is refused naming the first.
    pub fn new(flag: &str, playlist: &Path) -> Result<Self, ClaimError> {
        let name = playlist.file_name().unwrap_or_default().to_string_lossy();
        let lock_path = playlist.with_file_name(format!(".{name}.lock"));
        let what = format!("{flag} '{}'", playlist.display());
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o666)
            .open(&lock_path)
            .map_err(|source| ClaimError::Open {
                what: format!("{what}: can't open its lock file '{}'", lock_path.display()),
                source,
            })?;
        lock(&file, &what)?;
        Ok(Self {
            _file: file,
            path: lock_path,
        })
    }
}

impl Drop for PlaylistLock {
    fn drop(&mut self) {
        // Removed while still held: the folder keeps only the playlist and its segments.
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Refuses an image sequence when a file it would write exists, unless `overwrite` replaces.
pub fn check_sequence(
    flag: &str,
    pattern: &crate::frame::SequencePattern,
    overwrite: Overwrite,
) -> Result<(), ClaimError> {
    if overwrite == Overwrite::Replace {
        return Ok(());
    }
    let Ok(entries) = std::fs::read_dir(pattern.folder()) else {
        return Ok(());
    };
    let mut found: Vec<String> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str().map(str::to_string))
        .filter(|n| pattern.index_of(n).is_some())
        .collect();
    if found.is_empty() {
        return Ok(());
    }
    found.sort();
    let first = pattern.folder().join(&found[0]);
    let what = format!(
        "{} file(s) of that sequence, '{}' the first",
        found.len(),
        first.display()
    );
    let flag = flag.to_string();
    Err(match overwrite {
        Overwrite::Never => ClaimError::SequenceNeverReplaced { flag, what },
        _ => ClaimError::SequenceExists { flag, what },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("framepipe-claim-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn an_existing_file_is_refused_or_replaced_only_when_finished() {
        let tmp = dir("replace");
        let d = tmp.path();
        let p = d.join("precious.mp4");
        let s = p.to_str().unwrap();
        std::fs::write(&p, b"precious").unwrap();
        let e = VideoClaim::new("--output", s, Overwrite::Refuse)
            .unwrap_err()
            .to_string();
        assert!(e.contains("already exists") && e.contains("-y"), "{e}");
        let e = VideoClaim::new("--output", s, Overwrite::Never)
            .unwrap_err()
            .to_string();
        assert!(e.contains("-n never"), "{e}");
        // A replacement that ends with no frame leaves the old file.
        let mut c = VideoClaim::new("--output", s, Overwrite::Replace).unwrap();
        assert!(c.replacing() && c.writing != s);
        assert!(c.writing.ends_with(".part.mp4"), "{}", c.writing);
        assert!(part_name(&d.join(format!("{}.mkv", "n".repeat(250))))
            .file_name()
            .is_some_and(|n| n.len() < 40));
        std::fs::write(&c.writing, b"half").unwrap();
        assert!(c.commit(0).is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"precious");
        assert!(!Path::new(&c.writing).exists());
        drop(c);
        // One that holds a frame replaces it.
        let mut c = VideoClaim::new("--output", s, Overwrite::Replace).unwrap();
        std::fs::write(&c.writing, b"new").unwrap();
        c.commit(1).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"new");
    }

    #[test]
    fn a_new_file_with_no_frame_is_not_kept() {
        let tmp = dir("new");
        let d = tmp.path();
        let p = d.join("out.mkv");
        let mut c = VideoClaim::new("--output", p.to_str().unwrap(), Overwrite::Refuse).unwrap();
        assert_eq!(c.writing, p.to_str().unwrap());
        assert!(p.exists());
        assert!(c.commit(0).is_err());
        assert!(!p.exists());
    }
}
