//! Where processed frames go. Two kinds of consumer, each a trait of its own: an **output**
//! (`output::Output`: a video file, a stream or HLS, an image sequence, standard output,
//! nowhere) takes frames and finishes; a **display** (`display::Display`: the window, the
//! browser view) shows them and answers with what the person asked for (`Flow`). Each output
//! kind's type, claim and opening are `kind`; what `--output` names is `spec`; the
//! containers and codecs are `codec`; claiming a file before writing it is `claim`. The
//! pipeline drives one `Sink`: the run's consumers put together by `Tee` (several fed the
//! same frames), `route` (each input's own, by input), `mosaic` (every input's tiles),
//! `rate` (`fps:N`: an input's frames dropped or repeated for its outputs) and `progress`; an output or a display becomes a `Sink` through `output::boxed` and
//! `display::boxed`. `negotiate` decides once what format every consumer takes.
//!
//! Sinks run on one thread (the main thread, so that every highgui call stays there), see
//! frames in order as `Frame`s (a descriptor and its bytes, in the negotiated format), and
//! are always `finish`ed, also after an error, so that files are finalized. A consumer that
//! takes BGR only checks the descriptor (`bgr`), so a frame is never misread.

#[cfg(feature = "ffmpeg")]
pub mod audio;
#[cfg(feature = "ffmpeg")]
pub mod av;
pub mod claim;
pub mod codec;
pub mod display;
pub mod draw;
pub mod encode;
pub mod handover;
#[cfg(feature = "ffmpeg")]
pub mod hls;
#[cfg(feature = "ffmpeg")]
pub mod images;
pub mod kind;
pub mod marks;
pub mod mosaic;
pub mod null;
pub mod output;
#[cfg(feature = "ffmpeg")]
pub mod picture;
pub mod ppm;
pub mod progress;
pub mod rate;
#[cfg(feature = "ffmpeg")]
pub mod record;
#[cfg(feature = "ffmpeg")]
pub mod reencode;
pub mod route;
pub mod spec;
#[cfg(feature = "ffmpeg")]
pub mod stream;
#[cfg(feature = "opencv")]
pub mod strip;
#[cfg(feature = "ffmpeg")]
pub mod web;
#[cfg(feature = "opencv")]
pub mod window;
#[cfg(feature = "ffmpeg")]
pub mod writer;
#[cfg(feature = "opencv")]
mod xscreen;
pub mod y4m;

use anyhow::Result;

pub use codec::{Codec, Container, VIDEO_EXTENSIONS};
pub use encode::Encoding;
pub use spec::{check_rate, OutputSpec, SEQUENCE_EXTENSIONS};

pub use crate::desc::Frame;
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// What a sink wants after a frame.
#[derive(Debug, PartialEq, Clone)]
pub enum Flow {
    /// Go on.
    Continue,
    /// The user asked to quit (q, Esc, window closed).
    Quit,
    /// Pause or resume capture (space).
    TogglePause,
    /// Show the next frame, staying paused (`.`).
    Step,
    /// Change the running backend (filter preset, page-locking, bands).
    Control(crate::backend::Control),
    /// Compile the chain's kernel files again and swap them in (`r`).
    Reload,
    /// Select the mosaic's next tile (Tab, n; the mosaic takes it, nothing else does).
    NextTile,
    /// A left click on the picture at (`x`, `y`), picture pixels (the mosaic selects the
    /// tile there; a double click shows it alone).
    Pick {
        /// Column.
        x: i32,
        /// Row.
        y: i32,
        /// A double click.
        double: bool,
    },
    /// Show the selected input alone and back (Enter, z; the mosaic's).
    Alone,
}

impl Flow {
    /// The more important of two answers: quitting wins, then any request over `Continue`.
    fn merge(self, other: Flow) -> Flow {
        match (self, other) {
            (Flow::Quit, _) | (_, Flow::Quit) => Flow::Quit,
            (Flow::Continue, o) => o,
            (s, _) => s,
        }
    }
}

/// The settings the window's keys change, as the window last asked for them.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Ring buffers left pageable.
    pub pageable: bool,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Frame height (the most bands there can be).
    pub height: usize,
}

/// What a key that acts on the running pipeline asks for (the window's and the browser
/// view's keys share this table): **1**–**9** a filter preset, **p** page-locked ↔ pageable,
/// **b**/**-** and **B**/**+**/**=** halve and double the bands (`knobs` keeps the current
/// settings), **space** pause, **.** step, **r** reload; None for any other key.
pub fn pipeline_key(key: u8, knobs: &mut Knobs) -> Result<Option<Flow>> {
    use crate::backend::Control;
    let k = knobs;
    Ok(Some(match key {
        b'1'..=b'9' => {
            let chain: crate::filter::Chain =
                crate::filter::PRESETS[usize::from(key - b'1')].parse()?;
            Flow::Control(Control::Chain(chain))
        }
        b'p' | b'P' => {
            k.pageable = !k.pageable;
            Flow::Control(Control::Pageable(k.pageable))
        }
        b'b' | b'-' => {
            k.bands = (k.bands / 2).max(1);
            Flow::Control(Control::Bands(k.bands))
        }
        b'B' | b'+' | b'=' => {
            k.bands = (k.bands * 2).min(64).min(k.height);
            Flow::Control(Control::Bands(k.bands))
        }
        b' ' => Flow::TogglePause,
        b'.' => Flow::Step,
        b'r' | b'R' => Flow::Reload,
        _ => return Ok(None),
    }))
}

/// What the pipeline drives, on its calling thread: the run's outputs and displays put
/// together (module doc). Outputs and displays implement their own traits; a `Sink` is
/// written only to put consumers together (and by tests that steer a run).
pub trait Sink {
    /// One word for the summary: "shown", "written".
    fn verb(&self) -> &'static str;
    /// One line for the log.
    fn describe(&self) -> String;
    /// Takes one processed frame (in the format the run negotiated for its sinks: the
    /// descriptor says which, and its time where the source gave one) and says what the user
    /// wants next.
    fn consume(&mut self, frame: &Frame) -> Result<Flow>;
    /// Takes the mosaic as the backend composed it (packed BGR, the mosaic's size), where
    /// the backend composes it (`tiles::Compose`); before the frame it came down with.
    fn composed(&mut self, _picture: &crate::backend::Picture) -> Result<()> {
        Ok(())
    }
    /// The live figures, before each frame (the window's overlay shows them).
    fn status(&mut self, _live: &crate::stats::Live) {}
    /// Whether `status` should carry the recent frames' timeline (the window's strip is
    /// on): laying it out costs a little, so only then.
    fn wants_timeline(&self) -> bool {
        false
    }
    /// Called when no frame came for a while (keeps a window responsive).
    fn idle(&mut self) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// Starts ending without waiting (a stream lets its thread send what is queued), so
    /// that several sinks end together: `finish` then waits for each. Optional.
    fn begin_finish(&mut self) {}
    /// Flushes and closes; called exactly once, also after errors.
    fn finish(&mut self) -> Result<()>;
    /// Frames the output really holds, once finished, where the sink checks (a video file
    /// reopens what it wrote); None where every consumed frame is known to be stored.
    fn stored(&self) -> Option<u64> {
        None
    }
    /// What `stored` says of input `input`'s output, in a run of several inputs (each may
    /// have its own); the same as `stored` where the sink doesn't tell inputs apart.
    fn stored_of(&self, input: usize) -> Option<u64> {
        let _ = input;
        self.stored()
    }
    /// What each stream out among these sinks sent and dropped, once finished.
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        Vec::new()
    }
    /// What the mosaic's recording holds, once finished, where the mosaic is recorded to a
    /// file among these sinks.
    fn mosaic_recorded(&self) -> Option<crate::stats::MosaicRecorded> {
        None
    }
}

/// The formats a window takes (it shows BGR).
pub const WINDOW_TAKES: &[PixelFormat] = &[PixelFormat::Bgr24];

/// The format frames are handed to the sinks in, negotiated once before the run (as
/// GStreamer negotiates caps): the first format that every sink takes (`takes`: each sink's
/// formats, preferred first) and that can hold `size` frames, in the first sink's order;
/// BGR where they share none (every sink takes BGR). Where no sink looks at the frames, the
/// source's own format when it can be written, else BGR.
pub fn negotiate(source: PixelFormat, size: FrameSize, takes: &[Vec<PixelFormat>]) -> PixelFormat {
    let Some(first) = takes.first() else {
        return if source.writable() {
            source
        } else {
            PixelFormat::Bgr24
        };
    };
    first
        .iter()
        .copied()
        .find(|f| f.check(size).is_ok() && takes.iter().all(|t| t.contains(f)))
        .unwrap_or(PixelFormat::Bgr24)
}

/// The bytes of `frame`, which must be packed BGR: what `who` (a sink that takes BGR only,
/// as the run's format negotiation promised it) can take.
pub fn bgr<'a>(frame: &Frame<'a>, who: &str) -> Result<&'a [u8]> {
    crate::ensure_kept!(
        frame.format() == crate::pixel::PixelFormat::Bgr24,
        "{who} takes bgr24 frames and was given {}",
        frame.format()
    );
    Ok(frame.bytes)
}

/// Several sinks fed the same frames (a window and a file).
pub struct Tee(pub Vec<Box<dyn Sink>>);

/// `sinks` as one sink: None for none, the one itself, else a `Tee` of them.
pub fn tee(mut sinks: Vec<Box<dyn Sink>>) -> Option<Box<dyn Sink>> {
    match sinks.len() {
        0 => None,
        1 => sinks.pop(),
        _ => Some(Box::new(Tee(sinks))),
    }
}

impl Sink for Tee {
    fn verb(&self) -> &'static str {
        self.0.last().map_or("consumed", |s| s.verb())
    }
    fn describe(&self) -> String {
        let parts: Vec<_> = self.0.iter().map(|s| s.describe()).collect();
        parts.join(" and ")
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let mut flow = Flow::Continue;
        for s in &mut self.0 {
            flow = flow.merge(s.consume(frame)?);
        }
        Ok(flow)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.0.iter_mut().try_for_each(|s| s.composed(picture))
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.0.iter_mut().for_each(|s| s.status(live));
    }
    fn wants_timeline(&self) -> bool {
        self.0.iter().any(|s| s.wants_timeline())
    }
    fn idle(&mut self) -> Result<Flow> {
        let mut flow = Flow::Continue;
        for s in &mut self.0 {
            flow = flow.merge(s.idle()?);
        }
        Ok(flow)
    }
    fn finish(&mut self) -> Result<()> {
        // Files first: a window may keep its last frame up until q (sinks are added window
        // first).
        self.begin_finish();
        let mut first_err = None;
        for s in self.0.iter_mut().rev() {
            if let Err(e) = s.finish() {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
    fn begin_finish(&mut self) {
        self.0.iter_mut().for_each(|s| s.begin_finish());
    }
    /// What the outputs hold: the files' (the least), else the streams' (what they sent).
    fn stored(&self) -> Option<u64> {
        let (streams, files): (Vec<_>, Vec<_>) =
            self.0.iter().partition(|s| !s.streams().is_empty());
        let least = |sinks: Vec<&Box<dyn Sink>>| sinks.iter().filter_map(|s| s.stored()).min();
        least(files).or_else(|| least(streams))
    }
    fn stored_of(&self, input: usize) -> Option<u64> {
        self.0.iter().filter_map(|s| s.stored_of(input)).min()
    }
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        self.0.iter().flat_map(|s| s.streams()).collect()
    }
    fn mosaic_recorded(&self) -> Option<crate::stats::MosaicRecorded> {
        self.0.iter().find_map(|s| s.mosaic_recorded())
    }
}

/// What a video file needs to keep the input's timing and audio (see `av::Timing`).
#[cfg(feature = "ffmpeg")]
pub use av::Timing;
/// Without FFmpeg's libraries there are no video files, and nothing to time.
#[cfg(not(feature = "ffmpeg"))]
#[derive(Clone, Debug, Default)]
pub struct Timing;
