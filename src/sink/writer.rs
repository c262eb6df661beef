//! Files written with OpenCV: videos through `VideoWriter`, and image sequences (PNG and
//! friends, numbered from 0) through `imwrite`. `finish` releases the writer, which is what
//! finalizes a video's container so that it plays.

use anyhow::{bail, Context, Result};
use opencv::core::{Mat, Size, Vec3b, Vector};
use opencv::prelude::*;
use opencv::{imgcodecs, videoio};

use super::{Flow, Sink};
use crate::frame::{FrameSize, SequencePattern};

/// The OpenCV backend and codec written for each container: `.avi` is OpenCV's own Motion
/// JPEG writer (keeps odd sizes), `.mkv` is lossless FFV1 and `.mp4` MPEG-4 through FFmpeg
/// (whose writer needs even sizes).
pub fn codec_for(extension: &str) -> (i32, [char; 4]) {
    match extension {
        "avi" => (videoio::CAP_OPENCV_MJPEG, ['M', 'J', 'P', 'G']),
        "mkv" => (videoio::CAP_FFMPEG, ['F', 'F', 'V', '1']),
        _ => (videoio::CAP_FFMPEG, ['m', 'p', '4', 'v']),
    }
}

pub struct VideoFile {
    path: String,
    writer: Option<videoio::VideoWriter>,
}

impl VideoFile {
    pub fn open(path: &str, extension: &str, size: FrameSize, fps: f64) -> Result<Self> {
        let (api, [a, b, c, d]) = codec_for(extension);
        if api == videoio::CAP_FFMPEG && (size.width % 2 == 1 || size.height % 2 == 1) {
            eprintln!(
                "framepipe: warning: FFmpeg stores even sizes only: {size} frames are written as {}x{} to '{path}' (.avi or an image sequence keep every pixel)",
                size.width & !1,
                size.height & !1
            );
        }
        let fourcc = videoio::VideoWriter::fourcc(a, b, c, d)?;
        let frame = Size::new(size.width as i32, size.height as i32);
        let writer = videoio::VideoWriter::new_with_backend(path, api, fourcc, fps, frame, true)
            .with_context(|| format!("opening '{path}' for writing"))?;
        if !writer.is_opened()? {
            bail!(
                "cannot write video '{path}': OpenCV could not open a {a}{b}{c}{d} writer for it"
            );
        }
        Ok(Self {
            path: path.to_string(),
            writer: Some(writer),
        })
    }
}

impl Sink for VideoFile {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("video file {}", self.path)
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        let mat =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, frame)?;
        let writer = self
            .writer
            .as_mut()
            .context("video writer already closed")?;
        writer
            .write(&mat)
            .with_context(|| format!("writing a frame to {}", self.path))?;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        if let Some(mut w) = self.writer.take() {
            w.release()
                .with_context(|| format!("finalizing {}", self.path))?;
        }
        Ok(())
    }
}

pub struct ImageSequence {
    pattern: SequencePattern,
    next: u64,
}

impl ImageSequence {
    pub fn new(pattern: SequencePattern) -> Self {
        Self { pattern, next: 0 }
    }
}

impl Sink for ImageSequence {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("image sequence {}", self.pattern.path(0))
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        let mat =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, frame)?;
        let path = self.pattern.path(self.next);
        let ok = imgcodecs::imwrite(&path, &mat, &Vector::new())
            .with_context(|| format!("writing {path}"))?;
        if !ok {
            bail!("OpenCV could not write {path}");
        }
        self.next += 1;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
