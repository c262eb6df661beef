//! The detections beside each recorded segment (`--record` with `--detect`): for a segment
//! `NAME`, `NAME.detections.jsonl` holds the `--detections` line of every frame detected
//! while it was the file being written, so that a recording can be searched later without
//! the run's own file.
//!
//! A line is placed by its frame's moment against the moment each segment began (`When`): a
//! file's frame by its time in the file against the segment's first keyframe's (a file is
//! read ahead of its frames), a live input's by when the frame reached the detector against
//! when the segment was opened. A frame of before the segment now open began (its detection
//! came after the cut) goes to the one before. Lines that come before the first segment
//! opens (the camera's first keyframe) wait for it, at most `PENDING`.
//!
//! Invariants: each line goes to exactly one sidecar (or, beyond `PENDING` waiting for a
//! first segment, to none, counted); a sidecar is written under a hidden `.part` name beside
//! its segment's and renamed with it, to the segment's final name; a segment given up takes
//! its sidecar with it; nothing is replaced (`create_new`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Lines kept while no segment is open yet.
const PENDING: usize = 1000;

/// A frame's moment, or a segment's start: when it reached the detector (a live input's),
/// and its time in the input's packets' timeline, in seconds (a file's).
#[derive(Clone, Copy, Debug)]
pub enum When {
    /// Seen at this instant.
    Seen(Instant),
    /// At this time of the input's packets.
    Media(f64),
}

/// When a segment began, both ways.
#[derive(Clone, Copy, Debug)]
pub struct Began {
    /// When it was opened.
    pub at: Instant,
    /// Its first keyframe's time, seconds.
    pub media: f64,
}

impl When {
    /// Whether this moment is before `began`.
    fn before(self, began: Began) -> bool {
        match self {
            When::Seen(i) => i < began.at,
            When::Media(t) => t < began.media,
        }
    }
}

/// The open segment's sidecar.
struct Open {
    part: PathBuf,
    file: std::fs::File,
    began: Began,
}

/// The sidecars of one recording (module doc).
#[derive(Default)]
pub struct Sidecars {
    open: Option<Open>,
    /// The sidecar closed last, and when the segment after it began (None: none yet).
    closed: Option<(PathBuf, Option<Began>)>,
    pending: Vec<(String, When)>,
    /// Lines no sidecar could take (a failed write, too many waiting).
    pub lost: u64,
}

impl Sidecars {
    /// A segment is being written under `part` since `began`: its sidecar is made beside
    /// it, and takes the lines that waited.
    pub fn open(&mut self, part: &Path, began: Began) {
        let name = part.file_name().unwrap_or_default().to_string_lossy();
        let part = part.with_file_name(format!("{name}.detections.jsonl"));
        let made = std::fs::OpenOptions::new()
            .append(true)
            .create_new(true)
            .open(&part);
        match made {
            Ok(file) => {
                if let Some((_, next)) = &mut self.closed {
                    *next = Some(began);
                }
                self.open = Some(Open { part, file, began });
                for (line, when) in std::mem::take(&mut self.pending) {
                    self.line(&line, when);
                }
            }
            Err(e) => {
                crate::warn!("recording: '{}' can't be made: {e}", part.display());
                self.open = None;
            }
        }
    }

    /// A frame of moment `when` had `line`.
    pub fn line(&mut self, line: &str, when: When) {
        let written = match (&mut self.open, &self.closed) {
            // Of before the open segment began: the one closed before takes it.
            (Some(open), Some((path, _))) if when.before(open.began) => append(path, line),
            (Some(open), _) => writeln!(open.file, "{line}").is_ok(),
            // Between segments: the closed one's, unless it is of the next one's time.
            (None, Some((path, next))) if next.is_none_or(|n| when.before(n)) => append(path, line),
            (None, _) if self.pending.len() < PENDING => {
                self.pending.push((line.to_string(), when));
                true
            }
            (None, _) => false,
        };
        if !written {
            self.lost += 1;
        }
    }

    /// The open segment was closed as `name`: its sidecar takes the name beside it
    /// (`beside`), which is returned.
    pub fn close(&mut self, name: &Path) -> Option<PathBuf> {
        let open = self.open.take()?;
        drop(open.file);
        match super::rename_without_replacing(&open.part, &beside(name)) {
            Ok(to) => {
                self.closed = Some((to.clone(), None));
                Some(to)
            }
            Err(e) => {
                crate::warn!("recording: {e:#}");
                let _ = std::fs::remove_file(&open.part);
                None
            }
        }
    }

    /// The open segment was given up: its sidecar goes with it.
    pub fn abandon(&mut self) {
        if let Some(open) = self.open.take() {
            let _ = std::fs::remove_file(&open.part);
        }
    }
}

/// The sidecar's name beside segment `name`: `NAME.detections.jsonl`.
pub fn beside(name: &Path) -> PathBuf {
    let file = name.file_name().unwrap_or_default().to_string_lossy();
    name.with_file_name(format!("{file}.detections.jsonl"))
}

/// Appends `line` to the closed sidecar `path`; whether it was written.
fn append(path: &Path, line: &str) -> bool {
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .and_then(|mut f| writeln!(f, "{line}"))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_go_to_the_segment_their_frame_was_seen_in() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Sidecars::default();
        let t0 = Instant::now();
        let began = |at: Instant, media: f64| Began { at, media };
        s.line("early", When::Media(0.0));
        let part = dir.path().join(".a.mp4.part");
        s.open(&part, began(t0, 0.0));
        s.line("one", When::Media(0.5));
        s.close(&dir.path().join("a.mp4"));
        s.line("between", When::Media(0.9));
        let t1 = t0 + std::time::Duration::from_millis(10);
        s.open(&dir.path().join(".b.mp4.part"), began(t1, 1.0));
        s.line(
            "late for a",
            When::Seen(t0 + std::time::Duration::from_millis(6)),
        );
        s.line("two", When::Media(1.0));
        s.close(&dir.path().join("b.mp4"));
        let read = |n: &str| std::fs::read_to_string(dir.path().join(n)).unwrap();
        assert_eq!(
            read("a.mp4.detections.jsonl"),
            "early\none\nbetween\nlate for a\n"
        );
        assert_eq!(read("b.mp4.detections.jsonl"), "two\n");
        assert_eq!(s.lost, 0);
    }
}
