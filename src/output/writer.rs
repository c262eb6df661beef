//! Video files written to disk through FFmpeg's libraries (`av`: the codec, every frame's
//! time, the input's audio); image sequences are `images`.
//!
//! A video file is claimed before it is opened (`claim`: locked, never replacing an existing
//! file unless asked, a replacement written beside it and renamed once finished) and
//! watched as it grows:
//! - before it is opened, its file system must hold the first frames and the file's index;
//! - after every frame, the free space must still hold the next frames (by the largest growth
//!   of the file seen so far) and the index; when it does not, the run stops with "no space
//!   left" while the file can still be finalized;
//! - `finish` finalizes the container and counts the video packets the file holds (reading
//!   it back with libavformat), reporting any that are missing, then commits the claim;
//! - finalizing holds the file's lock, so an abort (a second stop signal, the stop watchdog)
//!   or a process ended from inside a library (Qt calls `exit` when the X display dies) waits
//!   for it, and otherwise finalizes every open video file itself;
//! - MP4 and MOV from a live source (or with `--fragmented`) are written as fragments of at
//!   most `FRAGMENT_SECONDS`, so a crash or `kill -9` loses at most the last fragment and the
//!   frames still inside the encoder.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::av::{self, AvFile, Timing};
use super::claim::VideoClaim;
use super::codec::{Codec, Container};
use super::Frame;
use super::{Output, Taken};
use crate::budget::human;
use crate::frame::FrameSize;
use crate::paths;
use crate::pixel::PixelFormat;

/// Room always kept free beside a file's frames: its index and trailer.
pub(super) const INDEX_RESERVE: u64 = 256 * 1024;
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
    fn check(&mut self, path: &str, frames: u64) -> Result<(), NoSpace> {
        let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
        self.max_growth = self.max_growth.max(len.saturating_sub(self.last_len));
        self.last_len = len;
        let Some(free) = paths::free_space(paths::folder_of(path)) else {
            return Ok(());
        };
        let need = self.need(frames);
        if free < need {
            return Err(NoSpace {
                path: path.into(),
                free,
                need,
            });
        }
        Ok(())
    }
}

/// What a video file's `at_end` hook needs: the writer until it is finalized, and the claim
/// to commit then.
struct Open {
    writer: Option<AvFile>,
    claim: VideoClaim,
    written: u64,
}

/// The longest the `at_end` hook waits for a file that another thread is writing or
/// finalizing.
const EXIT_WAIT: Duration = Duration::from_secs(60);

/// Finalizes a video file still open when the process ends before the run finished it: an
/// abort (a second stop signal, the stop watchdog), or `exit` called from inside a library
/// (Qt, when the X display dies). A file another thread is finalizing is waited for.
fn finalize_at_exit(file: &Weak<Mutex<Open>>) {
    let Some(file) = file.upgrade() else {
        return;
    };
    {
        let deadline = Instant::now() + EXIT_WAIT;
        let mut open = loop {
            match file.try_lock() {
                Ok(open) => break open,
                Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(_) => return,
            }
        };
        let Some(mut w) = open.writer.take() else {
            return; // finalized by its own thread
        };
        let written = open.written;
        let ok = w.finish().is_ok();
        drop(w);
        let committed = if ok {
            open.claim.commit(written).map_err(|e| e.to_string())
        } else {
            Err("could not be finalized".to_string())
        };
        let why = if crate::stop::aborting() {
            "aborted"
        } else {
            "error: the process was ended from inside the window system (its display went away?)"
        };
        match committed {
            Ok(()) => crate::say!(
                "framepipe: {why}; '{}' was finalized with the {written} frames written so far",
                open.claim.path
            ),
            Err(e) => crate::say!("framepipe: {why}; '{}': {e}", open.claim.path),
        }
    }
}

/// The file system of an output is about to fill: the run stops so the file can be finalized.
#[derive(Debug, thiserror::Error)]
#[error("writing '{path}': no space left on its file system ({} free; the next frame and the file's index need about {}); stopped so that the file can be finalized", human(*.free), human(*.need))]
pub struct NoSpace {
    /// The file.
    path: String,
    /// Bytes free.
    free: u64,
    /// Bytes the next frame and the index need.
    need: u64,
}

/// A video file written through FFmpeg's libraries (`av::AvFile`).
pub struct VideoFile {
    /// The file's finalizing if the process ends first.
    _at_end: crate::stop::AtEnd,
    open: Arc<Mutex<Open>>,
    /// The codec written, by name.
    codec: &'static str,
    path: String,
    /// Where the frames go: `path`, or the replacement's temporary name.
    writing: String,
    watch: SpaceWatch,
    written: u64,
    stored: Option<u64>,
}

impl VideoFile {
    /// Opens the claimed file for `size` frames timed by `timing` (fragmented MP4/MOV where
    /// `fragmented`); fails before writing it when its file system can't hold the first
    /// frames.
    pub fn open(claim: VideoClaim, settings: av::Settings) -> Result<Self> {
        let (codec, size, fragmented) = (settings.codec, settings.size, settings.fragmented);
        let timing = &settings.timing;
        let path = claim.path.clone();
        let path = path.as_str();
        let writing = claim.writing.clone();
        let mut watch = check_before_writing(codec, size, path)?;
        let written_codec = encoder_here(codec, path);
        let open = |t: &Timing| {
            AvFile::open(&av::Settings {
                path: writing.clone(),
                codec: written_codec,
                timing: t.clone(),
                ..settings.clone()
            })
        };
        let opened = open(timing).or_else(|e| {
            // A muxer may still refuse an audio codec it said it holds (Vorbis in MP4 is
            // "experimental"): the video alone, with a warning, rather than nothing. Where
            // the video alone fails too, the audio was not the cause (a bad --codec-opt):
            // the first error is said, and nothing of the audio.
            if timing.audio.is_none() {
                return Err(e);
            }
            match open(&Timing {
                audio: None,
                ..timing.clone()
            }) {
                Ok(alone) => {
                    crate::warn!(
                        "'{path}' could not take the input's audio ({e:#}); writing the video without it"
                    );
                    Ok(alone)
                }
                Err(_) => Err(e),
            }
        });
        let writer = match opened {
            Ok(w) => w,
            Err(e) => {
                let mut claim = claim;
                let _ = claim.commit(0); // removes what was made; an old file stays
                return Err(e.context(format!(
                    "cannot write video '{path}' ({} for {size} frames)",
                    written_codec.name()
                )));
            }
        };
        say_how_written(&writer, &claim, fragmented);
        watch.last_len = std::fs::metadata(&writing).map(|m| m.len()).unwrap_or(0);
        let open = Arc::new(Mutex::new(Open {
            writer: Some(writer),
            claim,
            written: 0,
        }));
        let at_end = finalized_at_exit(&open);
        Ok(Self {
            _at_end: at_end,
            open,
            codec: written_codec.name(),
            path: path.to_string(),
            writing,
            watch,
            written: 0,
            stored: None,
        })
    }
}

/// Refuses (or warns about) a frame size the codec can't store, and a file system without
/// room for the first frame and the file's index; the space watch that follows the file.
fn check_before_writing(codec: Codec, size: FrameSize, path: &str) -> Result<SpaceWatch> {
    if av::needs_even_size(codec) && (size.width % 2 == 1 || size.height % 2 == 1) {
        crate::warn!(
            "{} stores even sizes only: {size} frames are written as {}x{} to '{path}' (mjpeg or ffv1, or an image sequence, keep every pixel)",
            codec.name(),
            size.width & !1,
            size.height & !1
        );
    }
    av::check_size(codec, size).map_err(|e| anyhow::anyhow!("--output '{path}': {e}"))?;
    let watch = SpaceWatch {
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
    Ok(watch)
}

/// `codec`, or MPEG-4 Part 2 (said) where this FFmpeg build has no H.264 or HEVC encoder.
fn encoder_here(codec: Codec, path: &str) -> Codec {
    if !av::available(codec) && matches!(codec, Codec::H264 | Codec::Hevc) {
        crate::warn!(
            "this FFmpeg build has no {} encoder; writing MPEG-4 Part 2 into '{path}' instead",
            codec.name()
        );
        return Codec::Mpeg4;
    }
    codec
}

/// Says what the opened file keeps: the input's audio, fragments, a replacement.
fn say_how_written(writer: &AvFile, claim: &VideoClaim, fragmented: bool) {
    let path = claim.path.as_str();
    if writer.audio_kept > 0 {
        crate::info!(
            "'{path}': the input's {} audio stream(s) are copied as they are",
            writer.audio_kept
        );
    }
    if fragmented && Container::of_path(path).is_some_and(Container::fragments) {
        crate::info!(
            "'{path}' is written in fragments of at most {} s: a crash keeps all but the last",
            av::FRAGMENT_SECONDS
        );
    }
    if claim.replacing() {
        crate::info!(
            "'{path}' exists: the new video is written to '{}' and replaces it once finished",
            claim.writing
        );
    }
}

/// The open file is finalized by the process's end too (`stop::at_end`), if the run never
/// finishes it (the display dies, a second stop signal); the hook is taken back with the
/// file.
fn finalized_at_exit(open: &Arc<Mutex<Open>>) -> crate::stop::AtEnd {
    let file = Arc::downgrade(open);
    crate::stop::at_end(move || finalize_at_exit(&file))
}

impl Output for VideoFile {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("video file {} ({})", self.path, self.codec)
    }
    fn consume(&mut self, frame: &Frame) -> Result<Taken> {
        let (size, at, format) = (frame.size(), frame.desc.seconds(), frame.format());
        crate::ensure_kept!(
            matches!(format, PixelFormat::Bgr24 | PixelFormat::I420),
            "a video writer takes bgr24 or i420 frames and was given {format}"
        );
        let frame = frame.bytes;
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
                .write(frame, format, size, at)
                .with_context(|| format!("writing a frame to {}", self.path))?;
            open.written += 1;
        }
        self.written += 1;
        self.watch.check(&self.writing, self.written)?;
        Ok(Taken::Kept)
    }
    fn finish(&mut self) -> Result<()> {
        let _finishing = crate::stop::Finishing::start();
        let mut open = match self.open.lock() {
            Ok(o) => o,
            Err(p) => p.into_inner(),
        };
        let Some(mut w) = open.writer.take() else {
            return Ok(()); // finalized by its at_end hook
        };
        let finished = w.finish();
        drop(w);
        let held = av::count_video_packets(&self.writing).unwrap_or(0);
        self.stored = Some(held);
        let committed = open.claim.commit(held.min(self.written));
        drop(open);
        finished.with_context(|| format!("finalizing {}", self.path))?;
        if self.written == 0 && crate::stop::signalled() {
            // Stopped before the first frame: a clean stop that wrote nothing.
            crate::info!(
                "stopped before the first frame: '{}' was not written",
                self.path
            );
            return Ok(());
        }
        committed?;
        if held < self.written {
            let why = match std::fs::metadata(&self.path) {
                Err(e) => format!("it can't be read back: {e}"),
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
