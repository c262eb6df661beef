//! Files written to disk: videos through FFmpeg's libraries (`av`: the codec, every frame's
//! time, the input's audio), and image sequences (PNG and friends, numbered from 0) through
//! OpenCV's `imwrite`.
//!
//! A video file is watched as it grows:
//! - before it is opened, its file system must hold the first frames and the file's index;
//! - after every frame, the free space must still hold the next frames (by the largest growth
//!   of the file seen so far) and the index; when it does not, the run stops with "no space
//!   left" while the file can still be finalized;
//! - `finish` releases the writer (which finalizes the container) and reopens the file to
//!   check that it holds every frame written, counting them where it does not;
//! - a process ended from inside a library (Qt calls `exit` when the X display dies) still
//!   finalizes every open video file, from an exit handler.

use std::sync::{Arc, Mutex, Once, Weak};

use anyhow::{bail, Context, Result};
use opencv::core::{Mat, Vec3b, Vector};
use opencv::prelude::*;
use opencv::{imgcodecs, videoio};

use super::av::{self, AvFile, Timing};
use super::Codec;
use super::{Flow, Sink};
use crate::budget::human;
use crate::frame::{FrameSize, SequencePattern};
use crate::paths;

/// Frame rates each container accepts here: AVI counts whole frames per second of its
/// clock (from 1 fps); FFmpeg's Matroska muxer keeps milliseconds; no file below 0.01.
pub fn rate_range(extension: &str, _codec: Codec) -> (f64, f64) {
    match extension {
        "avi" => (1.0, 1000.0),
        _ => (0.01, 1000.0),
    }
}

/// Room always kept free beside a file's frames: its index and trailer.
const INDEX_RESERVE: u64 = 256 * 1024;
/// Bytes of index per frame (MP4's stts/stsz/stco, Matroska's cues, AVI's idx1), generously.
const INDEX_PER_FRAME: u64 = 64;

/// Watches the free space beside a video file as it grows.
struct SpaceWatch {
    /// The largest growth of the file between two frames.
    max_growth: u64,
    last_len: u64,
    /// A frame's raw size: the estimate until the encoder has put out a few frames.
    raw_frame: u64,
}

impl SpaceWatch {
    /// Free bytes the file system must keep after `frames` frames.
    fn need(&self, frames: u64) -> u64 {
        let frame = if frames < 4 {
            self.raw_frame.max(self.max_growth)
        } else {
            self.max_growth
        };
        INDEX_RESERVE + 2 * frame + INDEX_PER_FRAME * frames
    }

    /// After frame `frames` went to `path`: fails when the next one may not fit.
    fn check(&mut self, path: &str, frames: u64) -> Result<(), String> {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        self.max_growth = self.max_growth.max(len.saturating_sub(self.last_len));
        self.last_len = len;
        let Some(free) = paths::free_space(paths::folder_of(path)) else {
            return Ok(());
        };
        let need = self.need(frames);
        if free < need {
            return Err(format!(
                "writing '{path}': no space left on its file system ({} free; the next frame and the file's index need about {}); stopped so that the file can be finalized",
                human(free),
                human(need)
            ));
        }
        Ok(())
    }
}

/// What a video file's exit handler needs: the writer until it is finalized.
struct Open {
    writer: Option<AvFile>,
    path: String,
    written: u64,
}

/// Video files not yet finalized, for the exit handler.
static OPEN_FILES: Mutex<Vec<Weak<Mutex<Open>>>> = Mutex::new(Vec::new());

/// Finalizes every video file still open when the process exits before the run finished:
/// `exit` called from inside a library (Qt, when the X display dies), or the abort of a
/// second Ctrl-C.
extern "C" fn finalize_at_exit() {
    let Ok(files) = OPEN_FILES.try_lock() else {
        return;
    };
    for file in files.iter().filter_map(Weak::upgrade) {
        let Ok(mut open) = file.try_lock() else {
            continue;
        }; // never wait inside exit
        if let Some(mut w) = open.writer.take() {
            let ok = w.finish().is_ok();
            let why = if crate::stop::aborting() {
                "aborted by a second Ctrl-C"
            } else {
                "error: the process was ended from inside the window system (its display went away?)"
            };
            crate::say!(
                "framepipe: {why}; '{}' {} with the {} frames written so far",
                open.path,
                if ok {
                    "was finalized"
                } else {
                    "could not be finalized"
                },
                open.written
            );
        }
    }
}

/// A video file written through FFmpeg's libraries (`av::AvFile`).
pub struct VideoFile {
    open: Arc<Mutex<Open>>,
    /// The codec written, by name.
    codec: &'static str,
    path: String,
    watch: SpaceWatch,
    written: u64,
    stored: Option<u64>,
}

impl VideoFile {
    /// Opens `path` for `size` frames timed by `timing`; fails before creating it when its
    /// file system can't hold the first frames.
    pub fn open(
        path: &str,
        codec: Codec,
        quality: Option<u8>,
        size: FrameSize,
        timing: &Timing,
    ) -> Result<Self> {
        if av::needs_even_size(codec) && (size.width % 2 == 1 || size.height % 2 == 1) {
            crate::warn!(
                "{} stores even sizes only: {size} frames are written as {}x{} to '{path}' (mjpeg or ffv1, or an image sequence, keep every pixel)",
                codec.name(),
                size.width & !1,
                size.height & !1
            );
        }
        let mut watch = SpaceWatch {
            max_growth: 0,
            last_len: 0,
            raw_frame: size.bytes() as u64,
        };
        if let Some(free) = paths::free_space(paths::folder_of(path)) {
            if free < watch.need(0) {
                bail!(
                    "--output '{path}': no space left on its file system ({} free; the first frame and the file's index need about {})",
                    human(free),
                    human(watch.need(0))
                );
            }
        }
        let mut written_codec = codec;
        if !av::available(codec) && matches!(codec, Codec::H264 | Codec::Hevc) {
            written_codec = Codec::Mpeg4;
            crate::warn!(
                "this FFmpeg build has no {} encoder; writing MPEG-4 Part 2 into '{path}' instead",
                codec.name()
            );
        }
        let opened = AvFile::open(path, written_codec, quality, size, timing).or_else(|e| {
            // A muxer may still refuse an audio codec it said it holds (Vorbis in MP4 is
            // "experimental"): the video alone, with a warning, rather than nothing.
            if timing.audio.is_none() {
                return Err(e);
            }
            crate::warn!(
                "'{path}' could not take the input's audio ({e:#}); writing the video without it"
            );
            let silent = Timing {
                audio: None,
                ..timing.clone()
            };
            AvFile::open(path, written_codec, quality, size, &silent)
        });
        let writer = match opened {
            Ok(w) => w,
            Err(e) => {
                // Say the OS's reason where there is one (the path was probed at start, but
                // things change).
                paths::check_writable("--output", path).map_err(anyhow::Error::msg)?;
                return Err(e.context(format!(
                    "cannot write video '{path}' ({} for {size} frames)",
                    written_codec.name()
                )));
            }
        };
        if writer.audio_kept > 0 {
            crate::info!(
                "'{path}': the input's {} audio stream(s) are copied as they are",
                writer.audio_kept
            );
        }
        watch.last_len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        let open = Arc::new(Mutex::new(Open {
            writer: Some(writer),
            path: path.to_string(),
            written: 0,
        }));
        static HANDLER: Once = Once::new();
        // SAFETY: `finalize_at_exit` is an `extern "C" fn()` that never unwinds (it only
        // takes locks and ignores every error).
        HANDLER.call_once(|| unsafe {
            libc::atexit(finalize_at_exit);
        });
        if let Ok(mut files) = OPEN_FILES.lock() {
            files.retain(|f| f.strong_count() > 0);
            files.push(Arc::downgrade(&open));
        }
        Ok(Self {
            open,
            codec: written_codec.name(),
            path: path.to_string(),
            watch,
            written: 0,
            stored: None,
        })
    }

    /// Reopens the finalized file and counts the frames it really holds: the container's
    /// count when its last frame decodes, else every frame, one by one.
    fn frames_in_file(&self) -> u64 {
        let Ok(mut cap) = videoio::VideoCapture::from_file(&self.path, videoio::CAP_FFMPEG) else {
            return 0;
        };
        if !cap.is_opened().unwrap_or(false) {
            return 0;
        }
        let claimed = cap.get(videoio::CAP_PROP_FRAME_COUNT).unwrap_or(0.0);
        let mut frame = Mat::default();
        if claimed.is_finite() && claimed >= self.written as f64 && self.written > 0 {
            let last = (self.written - 1) as f64;
            if cap.set(videoio::CAP_PROP_POS_FRAMES, last).unwrap_or(false)
                && cap.read(&mut frame).unwrap_or(false)
                && !frame.empty()
            {
                return self.written;
            }
            let _ = cap.set(videoio::CAP_PROP_POS_FRAMES, 0.0);
        }
        let mut n = 0;
        while cap.grab().unwrap_or(false) {
            n += 1;
        }
        n
    }
}

impl Sink for VideoFile {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("video file {} ({})", self.path, self.codec)
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        self.consume_at(frame, size, None)
    }
    fn consume_at(&mut self, frame: &[u8], size: FrameSize, at: Option<f64>) -> Result<Flow> {
        {
            let mut open = self
                .open
                .lock()
                .map_err(|_| anyhow::anyhow!("the video writer's lock is poisoned"))?;
            let writer = open
                .writer
                .as_mut()
                .context("video writer already closed")?;
            writer
                .write(frame, size, at)
                .with_context(|| format!("writing a frame to {}", self.path))?;
            open.written += 1;
        }
        self.written += 1;
        self.watch
            .check(&self.path, self.written)
            .map_err(anyhow::Error::msg)?;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        let writer = self.open.lock().ok().and_then(|mut o| o.writer.take());
        if let Some(mut w) = writer {
            w.finish()
                .with_context(|| format!("finalizing {}", self.path))?;
        }
        let held = self.frames_in_file();
        self.stored = Some(held);
        if held < self.written {
            let why = match std::fs::metadata(&self.path) {
                Err(e) => format!("it can't be read back: {e}"),
                Ok(_) if held == 0 => "it holds no playable frame (the disk may be full)".into(),
                Ok(_) => "some frames were lost (the disk may be full)".into(),
            };
            bail!(
                "'{}' holds {held} of the {} frames written: {why}",
                self.path,
                self.written
            );
        }
        Ok(())
    }
    fn stored(&self) -> Option<u64> {
        self.stored
    }
}

/// Fails when `path`'s folder can't hold even the first image of a sequence.
fn check_sequence_space(path: &str, size: FrameSize) -> Result<()> {
    let need = size.bytes() as u64 + INDEX_RESERVE;
    match paths::free_space(paths::folder_of(path)) {
        Some(free) if free < need => bail!(
            "--output '{path}': no space left on its file system ({} free)",
            human(free)
        ),
        _ => Ok(()),
    }
}

/// An image sequence written with `imwrite`, numbered from 0.
pub struct ImageSequence {
    pattern: SequencePattern,
    next: u64,
}

impl ImageSequence {
    /// A sequence named by `pattern`.
    pub fn new(pattern: SequencePattern, size: FrameSize) -> Result<Self> {
        check_sequence_space(&pattern.path(0), size)?;
        Ok(Self { pattern, next: 0 })
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
            // imwrite says no more than false: the file system says why, where it can.
            let why = match paths::free_space(paths::folder_of(&path)) {
                Some(free) if free < size.bytes() as u64 => "no space left on its file system",
                _ => "OpenCV's image writer failed",
            };
            bail!("writing '{path}': {why}");
        }
        self.next += 1;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
