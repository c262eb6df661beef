//! File-name checks shared by `--input`, `--output`, `--trace` and `--timeline`, all made
//! before anything is opened for writing.
//!
//! Invariants: an output is compared with the input by device and inode (so a symbolic or a
//! hard link to the input is caught, whatever its name), and an image sequence by every
//! existing name it would write; a probe for writability never truncates a file and removes
//! what it created; a report is written whole under a temporary name and renamed
//! (`write_atomically`), never through a link.

use std::fs::OpenOptions;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::frame::SequencePattern;

/// Why a name can't be written as given (each message names the flag and the name).
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The folder it would be written into is missing.
    #[error("{flag} '{path}': folder '{}' does not exist", folder.display())]
    NoFolder {
        /// The flag that named it.
        flag: String,
        /// As given.
        path: String,
        /// Its folder.
        folder: std::path::PathBuf,
    },
    /// It does not end in the extension the flag writes.
    #[error("{flag} '{path}' must end in .{ext}")]
    Extension {
        /// The flag that named it.
        flag: String,
        /// As given.
        path: String,
        /// What it must end in.
        ext: String,
    },
    /// It is the input file (by identity).
    #[error("{flag} '{path}' is the input file '{input}' (the same file on disk); writing it would destroy the input: choose another output name")]
    IsTheInput {
        /// The flag that named it.
        flag: String,
        /// The name that reaches the input.
        path: String,
        /// The input, as the user wrote it.
        input: String,
    },
    /// The system refuses to open it for writing.
    #[error("{flag} '{path}' can't be written: {source}")]
    NotWritable {
        /// The flag that named it.
        flag: String,
        /// As given.
        path: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// It exists and is not a regular file.
    #[error("{flag} '{path}' is a {kind}{target}, not a regular file: framepipe writes files; to write a stream to a pipe use --output - (standard output)")]
    Special {
        /// The flag that named it.
        flag: String,
        /// As given.
        path: String,
        /// What it is, in words.
        kind: &'static str,
        /// " (it leads to '…')" where it is a link, else empty.
        target: String,
    },
    /// Its file name is longer than its file system allows.
    #[error("{flag}: the file name is {len} bytes long, and its file system allows at most {max}: choose a shorter name")]
    NameTooLong {
        /// The flag that named it.
        flag: String,
        /// Its length in bytes.
        len: usize,
        /// The file system's limit.
        max: usize,
    },
}

/// The extension of `path`, lower-cased; empty when there is none.
pub fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default()
}

/// Fails with "`flag` 'path': folder '…' does not exist" when `path`'s folder is missing.
pub fn check_folder(flag: &str, path: &str) -> Result<(), PathError> {
    let dir = folder_of(path);
    if dir.is_dir() {
        return Ok(());
    }
    Err(PathError::NoFolder {
        flag: flag.into(),
        path: path.into(),
        folder: dir.to_path_buf(),
    })
}

/// Checks that `path` ends in `.ext` and that its folder exists.
pub fn check_file_arg(flag: &str, path: &str, ext: &str) -> Result<(), PathError> {
    if extension(Path::new(path)) != ext {
        return Err(PathError::Extension {
            flag: flag.into(),
            path: path.into(),
            ext: ext.into(),
        });
    }
    check_folder(flag, path)
}

/// A file's identity: the same for every name, hard link or symbolic link that reaches it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileId {
    dev: u64,
    ino: u64,
}

/// The identity of the file `path` reaches (following symbolic links); None when there is
/// none.
pub fn file_id(path: &Path) -> Option<FileId> {
    let m = std::fs::metadata(path).ok()?;
    Some(FileId {
        dev: m.dev(),
        ino: m.ino(),
    })
}

/// The input file a run reads, by name and identity.
#[derive(Clone, Debug)]
pub struct InputFile<'a> {
    /// As the user wrote it.
    pub name: &'a str,
    /// What it reaches.
    pub id: FileId,
}

fn same_file_error(flag: &str, out: &str, input: &InputFile) -> PathError {
    PathError::IsTheInput {
        flag: flag.into(),
        path: out.into(),
        input: input.name.into(),
    }
}

/// Fails when writing `path` (for `flag`) would write over the input file.
pub fn refuse_input_file(flag: &str, path: &str, input: &InputFile) -> Result<(), PathError> {
    match file_id(Path::new(path)) {
        Some(id) if id == input.id => Err(same_file_error(flag, path, input)),
        _ => Ok(()),
    }
}

/// Fails when any file the image sequence `pattern` would write is the input file: every
/// existing name in the sequence's folder that the pattern produces is compared by identity.
pub fn refuse_input_in_sequence(
    flag: &str,
    pattern: &SequencePattern,
    input: &InputFile,
) -> Result<(), PathError> {
    let Ok(entries) = std::fs::read_dir(pattern.folder()) else {
        return Ok(()); // a missing folder is reported by the writability check
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(index) = name.to_str().and_then(|n| pattern.index_of(n)) else {
            continue;
        };
        if file_id(&entry.path()) == Some(input.id) {
            return Err(same_file_error(flag, &pattern.path(index), input));
        }
    }
    Ok(())
}

/// Fails, with the operating system's reason, when `path` can't be opened for writing. The
/// file is opened without truncation; one the probe created is removed again.
pub fn check_writable(flag: &str, path: &str) -> Result<(), PathError> {
    let existed = Path::new(path).exists();
    match OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
    {
        Ok(_) => {
            if !existed {
                let _ = std::fs::remove_file(path);
            }
            Ok(())
        }
        Err(source) => Err(PathError::NotWritable {
            flag: flag.into(),
            path: path.into(),
            source,
        }),
    }
}

/// What a non-regular file is, in words; None for a regular file.
pub fn special_kind(meta: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_file() {
        None
    } else if t.is_dir() {
        Some("folder")
    } else if t.is_fifo() {
        Some("pipe (FIFO)")
    } else if t.is_socket() {
        Some("socket")
    } else if t.is_char_device() {
        Some("character device")
    } else if t.is_block_device() {
        Some("block device")
    } else {
        Some("special file")
    }
}

/// Fails when `path` exists and is not a regular file (after following links): a FIFO
/// would block the run forever, a device (`/dev/null`) would swallow the output. Standard
/// output is `-`.
pub fn refuse_special(flag: &str, path: &str) -> Result<(), PathError> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let Some(kind) = special_kind(&meta) else {
        return Ok(());
    };
    let target = std::fs::canonicalize(path)
        .ok()
        .filter(|t| t.as_os_str() != path)
        .map(|t| format!(" (it leads to '{}')", t.display()))
        .unwrap_or_default();
    Err(PathError::Special {
        flag: flag.into(),
        path: path.into(),
        kind,
        target,
    })
}

/// Whether two names given for outputs reach the same file: the same name, or the same
/// existing file by identity.
pub fn same_file(a: &str, b: &str) -> bool {
    if Path::new(a) == Path::new(b) {
        return true;
    }
    match (file_id(Path::new(a)), file_id(Path::new(b))) {
        (Some(x), Some(y)) => x == y,
        _ => {
            // Not there yet: compare the folders by identity and the names as written.
            let (fa, fb) = (folder_of(a), folder_of(b));
            Path::new(a).file_name() == Path::new(b).file_name()
                && file_id(fa).is_some()
                && file_id(fa) == file_id(fb)
        }
    }
}

/// Fails when `path`'s file name is longer than its file system allows (with the limit,
/// instead of the system's "File name too long" later).
pub fn check_name(flag: &str, path: &str) -> Result<(), PathError> {
    use std::os::unix::ffi::OsStrExt;
    let Some(name) = Path::new(path).file_name() else {
        return Ok(());
    };
    let len = name.as_bytes().len();
    let max = rustix::fs::statvfs(folder_of(path))
        .ok()
        .map(|st| st.f_namemax)
        .filter(|&m| m > 0)
        .map_or(255, |m| m as usize);
    if len > max {
        return Err(PathError::NameTooLong {
            flag: flag.into(),
            len,
            max,
        });
    }
    Ok(())
}

/// Bytes an unprivileged writer may still use on the file system holding `path` (a file or
/// a folder); None where the system does not say.
pub fn free_space(path: &Path) -> Option<u64> {
    let st = rustix::fs::statvfs(path).ok()?;
    st.f_bavail.checked_mul(st.f_frsize)
}

/// The folder `path` is written into ("." for a bare file name).
pub fn folder_of(path: &str) -> &Path {
    Path::new(path)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

/// Writes `bytes` to `path` whole or not at all: into a temporary file beside it, created
/// exclusively without following links, then renamed over `path` (replacing a link there,
/// never writing through it).
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // One name per write: two threads writing one path never share a temporary file.
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = path.with_file_name(format!(".{name}.framepipe-{}-{n}.tmp", std::process::id()));
    let result = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .mode(0o666)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes))
        .and_then(|_| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(name: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("framepipe-paths-{name}-"))
            .tempdir()
            .unwrap()
    }

    #[test]
    fn the_input_is_found_through_links_and_sequences() {
        let tmp = dir("links");
        let d = tmp.path();
        let input = d.join("clip.avi");
        std::fs::write(&input, b"frames").unwrap();
        let name = input.to_str().unwrap();
        let input_file = InputFile {
            name,
            id: file_id(&input).unwrap(),
        };
        std::os::unix::fs::symlink(&input, d.join("sym.avi")).unwrap();
        std::fs::hard_link(&input, d.join("hard.avi")).unwrap();
        for out in ["clip.avi", "sym.avi", "hard.avi"] {
            let p = d.join(out);
            let e = refuse_input_file("--output", p.to_str().unwrap(), &input_file)
                .unwrap_err()
                .to_string();
            assert!(e.contains("would destroy the input"), "{e}");
        }
        assert!(
            refuse_input_file("--output", d.join("new.avi").to_str().unwrap(), &input_file).is_ok()
        );

        std::fs::hard_link(&input, d.join("00003.png")).unwrap();
        let seq = |s: &str| {
            SequencePattern::parse(d.join(s).to_str().unwrap())
                .unwrap()
                .unwrap()
        };
        let e = refuse_input_in_sequence("--output", &seq("%05d.png"), &input_file)
            .unwrap_err()
            .to_string();
        assert!(e.contains("00003.png"), "{e}");
        assert!(refuse_input_in_sequence("--output", &seq("%04d.png"), &input_file).is_ok());
        assert!(refuse_input_in_sequence("--output", &seq("x%05d.png"), &input_file).is_ok());
    }

    #[test]
    fn a_writability_probe_leaves_no_trace() {
        let tmp = dir("probe");
        let d = tmp.path();
        let p = d.join("out.mkv");
        check_writable("--output", p.to_str().unwrap()).unwrap();
        assert!(!p.exists());
        std::fs::write(&p, b"keep").unwrap();
        check_writable("--output", p.to_str().unwrap()).unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"keep");
        let e = check_writable("--output", d.join("no/such.mkv").to_str().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("No such file"), "{e}");
        assert!(free_space(d).is_some_and(|b| b > 0));
        assert_eq!(folder_of("x.mkv"), Path::new("."));
        assert_eq!(folder_of("a/x.mkv"), Path::new("a"));
    }

    #[test]
    fn an_atomic_write_replaces_a_link_instead_of_following_it() {
        let tmp = dir("atomic");
        let d = tmp.path();
        let target = d.join("input.ts");
        std::fs::write(&target, b"input").unwrap();
        let link = d.join("00001.png");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        write_atomically(&link, b"frame").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"input");
        assert_eq!(std::fs::read(&link).unwrap(), b"frame");
        assert!(!std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
    }
}
