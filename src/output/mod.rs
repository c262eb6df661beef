//! Where frames are written: one file a kind — a video file (`writer`, encoded and muxed by
//! `av`, its audio copied by `audio` or encoded again by `reencode`), a stream (`stream`:
//! UDP, SRT, RTMP, RTSP publishing, HLS through `hls`), an image sequence (`images`, each
//! picture by `picture`; `ppm` without FFmpeg), standard output (`y4m`), and an input's
//! own packets copied to a file or a stream (`copy`, `--codec copy`: a packet tap, not an
//! `Output` of frames). What `--output` names is `spec`; the containers
//! and codecs `codec`; the encoder's flags `encode`; claiming a file before writing it
//! `claim`; and `kind` each kind's formats, claim and opening: a new output is a file here
//! and a variant in `kind`'s list.
//!
//! An output takes frames in order and finishes; it says what it stored and what its
//! streams sent. It never steers the run (no keys, no controls, no figures on screen): that
//! is a display's job (`display`). It becomes one of the run's sinks through `boxed`.
//!
//! Invariants: `finish` is called exactly once, also after an error, so that a file is
//! finalized; an output whose reader went away says so (`Taken::Closed`) and the run stops;
//! nothing here imports `source` or `display` (the media facts they share are `media`).

#[cfg(feature = "ffmpeg")]
pub mod audio;
#[cfg(feature = "ffmpeg")]
pub mod av;
pub mod claim;
pub mod codec;
#[cfg(feature = "ffmpeg")]
pub mod copy;
pub mod encode;
#[cfg(feature = "ffmpeg")]
pub mod hls;
#[cfg(feature = "ffmpeg")]
pub mod images;
pub mod kind;
#[cfg(feature = "ffmpeg")]
pub mod picture;
pub mod ppm;
#[cfg(feature = "ffmpeg")]
pub mod reencode;
pub mod spec;
#[cfg(feature = "ffmpeg")]
pub mod stream;
#[cfg(feature = "ffmpeg")]
pub mod writer;
pub mod y4m;

use anyhow::Result;

pub use codec::{Codec, Container, VIDEO_EXTENSIONS};
pub use encode::Encoding;
pub use spec::{check_rate, OutputSpec, SEQUENCE_EXTENSIONS};

pub use crate::desc::Frame;
use crate::sink::{Flow, Sink};

/// What an output did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Taken (written, queued, or dropped as the output's own policy says).
    Kept,
    /// The output can take no more (its reader closed standard output): the run stops.
    Closed,
}

/// A place frames are written (module doc).
pub trait Output {
    /// One word for the summary.
    fn verb(&self) -> &'static str {
        "written"
    }
    /// One line for the log.
    fn describe(&self) -> String;
    /// Takes one processed frame, in the format the run negotiated for it.
    fn consume(&mut self, frame: &Frame) -> Result<Taken>;
    /// Starts ending without waiting (a stream lets its thread send what is queued), so
    /// that several outputs end together: `finish` then waits for each.
    fn begin_finish(&mut self) {}
    /// Flushes and closes; called exactly once, also after errors.
    fn finish(&mut self) -> Result<()>;
    /// Frames the output really holds, once finished, where it checks (a video file reopens
    /// what it wrote); None where every consumed frame is known to be stored.
    fn stored(&self) -> Option<u64> {
        None
    }
    /// What each stream out among these outputs sent and dropped, once finished.
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        Vec::new()
    }
}

/// `output` as one of the run's sinks.
pub fn boxed(output: impl Output + 'static) -> Box<dyn Sink> {
    Box::new(AsSink(output))
}

/// An output among the run's sinks: it answers the pipeline's frames, and steers nothing.
struct AsSink<O>(O);

impl<O: Output> Sink for AsSink<O> {
    fn verb(&self) -> &'static str {
        self.0.verb()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        Ok(match self.0.consume(frame)? {
            Taken::Kept => Flow::Continue,
            Taken::Closed => Flow::Quit,
        })
    }
    fn begin_finish(&mut self) {
        self.0.begin_finish()
    }
    fn finish(&mut self) -> Result<()> {
        self.0.finish()
    }
    fn report(&self) -> crate::sink::SinkReport {
        crate::sink::SinkReport::of_output(self.0.stored(), self.0.streams())
    }
}

/// What a video file needs to keep the input's timing and audio (see `av::Timing`).
#[cfg(feature = "ffmpeg")]
pub use av::Timing;
/// Without FFmpeg's libraries there are no video files, and nothing to time.
#[cfg(not(feature = "ffmpeg"))]
#[derive(Clone, Debug, Default)]
pub struct Timing;
