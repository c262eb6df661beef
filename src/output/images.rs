//! Image sequences (PNG, PPM, BMP, TIFF, JPEG, numbered from 0) encoded by libavcodec's image
//! encoders (`picture`), each file written whole under a temporary name and renamed into place
//! (`paths::write_atomically`), in a folder claimed for the run (`claim::FolderLock`).

use anyhow::{bail, Result};

use super::claim;
use super::picture::{ImageFormat, PictureEncoder};
use super::Frame;
use super::{Output, Taken};
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

/// An image sequence encoded by libavcodec, each file written whole and renamed into place,
/// numbered from 0.
pub struct ImageSequence {
    pattern: SequencePattern,
    format: ImageFormat,
    /// Made for the first frame's size (again where a frame's size differs).
    encoder: Option<PictureEncoder>,
    next: u64,
    _lock: claim::FolderLock,
}

impl ImageSequence {
    /// A sequence named by `pattern`, in the folder `lock` holds.
    pub fn new(pattern: SequencePattern, size: FrameSize, lock: claim::FolderLock) -> Result<Self> {
        check_sequence_space(&pattern.path(0), size)?;
        let extension = paths::extension(std::path::Path::new(&pattern.path(0)));
        let Some(format) = ImageFormat::of_extension(&extension) else {
            bail!("--output '{}': .{extension} is not an image format framepipe writes (png, ppm, bmp, tif, jpg)", pattern.path(0));
        };
        Ok(Self {
            pattern,
            format,
            encoder: PictureEncoder::new(format, size).ok(),
            next: 0,
            _lock: lock,
        })
    }
}

impl Output for ImageSequence {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("image sequence {}", self.pattern.path(0))
    }
    fn consume(&mut self, frame: &Frame) -> Result<Taken> {
        let (size, frame) = (frame.size(), crate::sink::bgr(frame, "an image sequence")?);
        let path = self.pattern.path(self.next);
        if self.encoder.as_ref().map(PictureEncoder::size) != Some(size) {
            self.encoder = Some(PictureEncoder::new(self.format, size)?);
        }
        let encoder = self.encoder.as_mut().expect("made above");
        let bytes = encoder
            .encode(frame)
            .map_err(|e| anyhow::anyhow!("writing '{path}': {e:#}"))?;
        paths::write_atomically(std::path::Path::new(&path), &bytes).map_err(|e| {
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
        Ok(Taken::Kept)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
