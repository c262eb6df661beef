//! Image sequences (PNG and friends, numbered from 0) encoded by OpenCV's `imencode`, each
//! file written whole under a temporary name and renamed into place
//! (`paths::write_atomically`), in a folder claimed for the run (`claim::FolderLock`).

use anyhow::{bail, Context, Result};
use opencv::core::{Mat, Vec3b, Vector};
use opencv::imgcodecs;

use super::claim;
use super::{Flow, Frame, Sink};
use crate::budget::human;
use crate::frame::{FrameSize, SequencePattern};
use crate::paths;

/// Room kept free beside the first image (as beside a video file's frames).
const RESERVE: u64 = 256 * 1024;

/// Fails when `path`'s folder can't hold even the first image of a sequence.
fn check_sequence_space(path: &str, size: FrameSize) -> Result<()> {
    let need = size.bytes() as u64 + RESERVE;
    match paths::free_space(paths::folder_of(path)) {
        Some(free) if free < need => bail!(
            "--output '{path}': no space left on its file system ({} free)",
            human(free)
        ),
        _ => Ok(()),
    }
}

/// An image sequence encoded with `imencode`, each file written whole and renamed into
/// place, numbered from 0.
pub struct ImageSequence {
    pattern: SequencePattern,
    extension: String,
    next: u64,
    _lock: claim::FolderLock,
}

impl ImageSequence {
    /// A sequence named by `pattern`, in the folder `lock` holds.
    pub fn new(pattern: SequencePattern, size: FrameSize, lock: claim::FolderLock) -> Result<Self> {
        check_sequence_space(&pattern.path(0), size)?;
        let extension = paths::extension(std::path::Path::new(&pattern.path(0)));
        Ok(Self {
            pattern,
            extension,
            next: 0,
            _lock: lock,
        })
    }
}

impl Sink for ImageSequence {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("image sequence {}", self.pattern.path(0))
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let (size, frame) = (frame.size(), super::bgr(frame, "an image sequence")?);
        let mat =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, frame)?;
        let path = self.pattern.path(self.next);
        let mut bytes = Vector::<u8>::new();
        let ok = imgcodecs::imencode(
            &format!(".{}", self.extension),
            &mat,
            &mut bytes,
            &Vector::new(),
        )
        .with_context(|| format!("encoding {path}"))?;
        if !ok {
            bail!(
                "writing '{path}': OpenCV could not encode the frame as .{}",
                self.extension
            );
        }
        paths::write_atomically(std::path::Path::new(&path), bytes.as_slice()).map_err(|e| {
            // The file system says why, where it can.
            let why = match paths::free_space(paths::folder_of(&path)) {
                Some(free) if free < bytes.len() as u64 => {
                    "no space left on its file system".to_string()
                }
                _ => e.to_string(),
            };
            anyhow::anyhow!("writing '{path}': {why}")
        })?;
        self.next += 1;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
