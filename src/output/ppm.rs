//! A lossless PPM (P6) image sequence, written without OpenCV so that builds for the GPU
//! machine can save exact results. Frames are numbered from 0.
//!
//! Invariants: each file is written whole under a temporary name and renamed into place
//! (`paths::write_atomically`), so a crash never leaves a truncated image and a link in the
//! folder is replaced, never followed; the folder is locked for the run.

use std::io::Write;

use anyhow::{Context, Result};

use super::Frame;
use super::{Output, Taken};
use crate::frame::{FrameSize, SequencePattern};

/// A numbered PPM sequence.
pub struct PpmSequence {
    pattern: SequencePattern,
    next: u64,
    _lock: super::claim::FolderLock,
    bytes: Vec<u8>,
}

impl PpmSequence {
    /// A sequence named by `pattern`, numbered from 0, in the folder `lock` holds.
    pub fn new(pattern: SequencePattern, lock: super::claim::FolderLock) -> Self {
        Self {
            pattern,
            next: 0,
            _lock: lock,
            bytes: Vec::new(),
        }
    }
}

/// Writes one BGR frame as a binary PPM (which stores RGB).
pub fn write_ppm(w: &mut impl Write, frame: &[u8], size: FrameSize) -> std::io::Result<()> {
    write!(w, "P6\n{} {}\n255\n", size.width, size.height)?;
    let mut row = vec![0u8; size.stride()];
    for src in frame.chunks_exact(size.stride()) {
        for (d, s) in row.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
            d.copy_from_slice(&[s[2], s[1], s[0]]);
        }
        w.write_all(&row)?;
    }
    Ok(())
}

impl Output for PpmSequence {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("PPM sequence {}", self.pattern.path(0))
    }
    fn consume(&mut self, frame: &Frame) -> Result<Taken> {
        let (size, frame) = (frame.size(), crate::sink::bgr(frame, "a PPM sequence")?);
        let path = self.pattern.path(self.next);
        self.bytes.clear();
        write_ppm(&mut self.bytes, frame, size)?;
        crate::paths::write_atomically(std::path::Path::new(&path), &self.bytes)
            .with_context(|| format!("writing {path}"))?;
        self.next += 1;
        Ok(Taken::Kept)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
