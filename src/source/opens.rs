//! The local files an input opens, whatever its URL form: a plain path, FFmpeg's `file:`
//! protocol (`file:///x.ts`, `file:x.ts`), `concat:a|b` and the protocols that wrap
//! another (`cache:`, `async:`), and an HLS playlist read from files, whose segments (and
//! variant playlists) are opened too. The claims compare every output with each of these by
//! identity, so that no URL form lets an output replace what the run reads.
//!
//! Invariants: reading only (a playlist is read to at most `PLAYLIST_BYTES`, as a regular
//! file opened without blocking); a name that can't be resolved is left out, never guessed
//! (an output is then compared with what does exist); network URLs open no local file.

use std::path::{Path, PathBuf};

use super::InputSpec;

/// The most of a playlist read to find its segments.
const PLAYLIST_BYTES: u64 = 1 << 20;
/// How deep playlists are followed (a master playlist's variants, their segments).
const PLAYLIST_DEPTH: usize = 2;

impl InputSpec {
    /// The local files this input opens (module doc); none for a camera, the pattern or a
    /// network stream.
    pub fn files_opened(&self) -> Vec<PathBuf> {
        let mut files = Vec::new();
        match self {
            InputSpec::Video(p) | InputSpec::Image(p) => add_path(p, &mut files, PLAYLIST_DEPTH),
            InputSpec::Stream(url) => add_url(url, &mut files, PLAYLIST_DEPTH),
            _ => {}
        }
        files
    }
}

/// The local path a URL names for FFmpeg, or the URLs it wraps (`concat:`, `cache:`…).
fn add_url(url: &str, files: &mut Vec<PathBuf>, depth: usize) {
    let scheme_is = |s: &str| {
        url.get(..s.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(s))
    };
    if scheme_is("concat:") {
        for part in url["concat:".len()..].split('|') {
            add_url(part, files, depth);
        }
    } else if let Some(inner) = ["cache:", "async:"]
        .iter()
        .find(|s| scheme_is(s))
        .map(|s| &url[s.len()..])
    {
        add_url(inner, files, depth);
    } else if scheme_is("file:") {
        // FFmpeg's file protocol takes what follows `file:` as the path itself
        // (`file:///a` is `///a`, which is `/a`).
        add_path(Path::new(&url["file:".len()..]), files, depth);
    } else if !url.contains("://") && !url.contains('!') && !url.is_empty() {
        add_path(Path::new(url), files, depth);
    }
}

/// `path`, and where it is an HLS playlist, what it lists.
fn add_path(path: &Path, files: &mut Vec<PathBuf>, depth: usize) {
    if files.iter().any(|f| f == path) {
        return;
    }
    files.push(path.to_path_buf());
    if depth == 0 || !is_playlist(path) {
        return;
    }
    let Some(text) = read_bounded(path) else {
        return;
    };
    let folder = path.parent().unwrap_or(Path::new("."));
    for entry in listed(&text, folder) {
        add_path(&entry, files, depth - 1);
    }
}

/// The local entries a playlist's text lists, resolved against its `folder`.
fn listed(text: &str, folder: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let name = match line.get(..5).filter(|p| p.eq_ignore_ascii_case("file:")) {
            Some(_) => &line[5..],
            None if line.contains("://") => continue,
            None => line,
        };
        let path = Path::new(name);
        out.push(match path.is_absolute() {
            true => path.to_path_buf(),
            false => folder.join(path),
        });
    }
    out
}

/// Whether `path` names an HLS playlist.
fn is_playlist(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("m3u8") || e.eq_ignore_ascii_case("m3u"))
}

/// A regular file's text, at most `PLAYLIST_BYTES` of it.
fn read_bounded(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    file.take(PLAYLIST_BYTES).read_to_end(&mut bytes).ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_url_form_of_a_file_is_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let d = |n: &str| dir.path().join(n);
        std::fs::write(d("i0.ts"), b"x").unwrap();
        std::fs::write(d("i1.ts"), b"x").unwrap();
        let list = format!(
            "#EXTM3U\n#EXTINF:1,\ni0.ts\n#EXTINF:1,\nfile://{}\n",
            d("i1.ts").display()
        );
        std::fs::write(d("in.m3u8"), list).unwrap();
        let opened = |s: &str| InputSpec::Stream(s.into()).files_opened();
        let i0 = d("i0.ts");
        assert_eq!(
            opened(&format!("file://{}", i0.display())),
            vec![i0.clone()]
        );
        assert_eq!(opened(&format!("file:{}", i0.display())), vec![i0.clone()]);
        let both = format!("concat:{}|file:{}", i0.display(), d("i1.ts").display());
        assert_eq!(opened(&both), vec![i0.clone(), d("i1.ts")]);
        let hls = opened(&format!("file://{}", d("in.m3u8").display()));
        assert_eq!(hls, vec![d("in.m3u8"), i0.clone(), d("i1.ts")]);
        assert!(opened("rtsp://127.0.0.1/cam").is_empty());
        assert!(opened("videotestsrc ! appsink").is_empty());
        let local = InputSpec::Video(d("in.m3u8")).files_opened();
        assert_eq!(local, vec![d("in.m3u8"), i0, d("i1.ts")]);
    }
}
