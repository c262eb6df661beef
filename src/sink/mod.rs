//! How the run's consumers are put together into the one `Sink` the pipeline drives: `Tee`
//! (several fed the same frames), `route` (each input's own, by input, and an embedding
//! program's hand-over first), `rate` (`fps:N`: an input's frames dropped or repeated for
//! its outputs), `progress` (the bar of a headless run), `handover` (frames handed to the
//! Python package), `marks` (an embedding program's boxes drawn into its inputs' frames),
//! `detecting` (`--detect`: due frames handed to the detector, its lines written) and
//! `null` (nowhere). The consumers themselves are outputs (`output`) and displays
//! (`display`), each made a `Sink` by its room's `boxed`; `negotiate` decides once what
//! format every consumer takes; `report` is what the outputs hold once finished.
//!
//! Sinks run on one thread (the main thread, so that every highgui call stays there), see
//! frames in order as `Frame`s (a descriptor and its bytes, in the negotiated format), and
//! are always `finish`ed, also after an error, so that files are finalized. A consumer that
//! takes BGR only checks the descriptor (`bgr`), so a frame is never misread. Nothing here
//! imports `output` or `display`: they build on this room.

pub mod detecting;
pub mod handover;
pub mod marks;
pub mod null;
pub mod progress;
pub mod rate;
pub mod route;

use anyhow::Result;

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
    pub fn merge(self, other: Flow) -> Flow {
        match (self, other) {
            (Flow::Quit, _) | (_, Flow::Quit) => Flow::Quit,
            (Flow::Continue, o) => o,
            (s, _) => s,
        }
    }
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
    /// Whether it reads the frames' pixels (every sink but `null::Null`): a frame that
    /// passed untouched in memory its source lent is packed into the slot for one that
    /// does, and never copied for one that doesn't (`pipeline::sink`).
    fn reads_pixels(&self) -> bool {
        true
    }
    /// Called when no frame came for a while (keeps a window responsive).
    fn idle(&mut self) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// Starts ending without waiting (a stream lets its thread send what is queued), so
    /// that several sinks end together: `finish` then waits for each. Optional.
    fn begin_finish(&mut self) {}
    /// Input `input` left the run (removed while the run goes) and its last frame was
    /// taken: its own outputs are finished now, and what the sink keeps of it is forgotten,
    /// since another input may take its place later (`pipeline::Joiner`): its next frame
    /// is that input's first (a wrapper forwards it). Optional.
    fn leave(&mut self, _input: usize) -> Result<()> {
        Ok(())
    }
    /// Flushes and closes; called exactly once, also after errors.
    fn finish(&mut self) -> Result<()>;
    /// What the outputs among these sinks hold and sent, once finished (`SinkReport`): a
    /// wrapper forwards its inner sink's.
    fn report(&self) -> SinkReport {
        SinkReport::default()
    }
}

/// What a run's outputs hold and sent, once finished: one report a sink gives, so that a
/// sink wrapping another forwards one thing.
#[derive(Clone, Debug, Default)]
pub struct SinkReport {
    /// Frames the outputs really hold, where they check (a video file reopens what it
    /// wrote); None where every consumed frame is known to be stored.
    pub stored: Option<u64>,
    /// What each input's own outputs hold, by input, where the sink tells inputs apart
    /// (empty where it doesn't: then every input's is `stored`).
    pub inputs: Vec<Option<u64>>,
    /// What each stream out sent and dropped.
    pub streams: Vec<crate::stats::StreamStats>,
    /// What the mosaic's recording holds, where the mosaic is recorded to a file.
    pub mosaic: Option<crate::stats::MosaicRecorded>,
    /// What the detector did (`--detect`), for the summary.
    pub detection: Option<serde_json::Value>,
}

impl SinkReport {
    /// An output's report: what it stored and what its streams sent.
    pub fn of_output(stored: Option<u64>, streams: Vec<crate::stats::StreamStats>) -> Self {
        Self {
            stored,
            streams,
            ..Self::default()
        }
    }

    /// What input `input`'s outputs hold: its own where the sink tells inputs apart, else
    /// what every output holds.
    pub fn of_input(&self, input: usize) -> Option<u64> {
        if self.inputs.is_empty() {
            self.stored
        } else {
            self.inputs.get(input).copied().flatten()
        }
    }

    /// The report of sinks fed the same frames (`Tee`): the files' least, else the streams'
    /// least; each input's least of every part's (input 0's where no part tells inputs
    /// apart); every stream; the first mosaic recording.
    pub fn together(parts: Vec<SinkReport>) -> Self {
        let (streams, files): (Vec<_>, Vec<_>) = parts.iter().partition(|r| !r.streams.is_empty());
        let least = |reports: Vec<&SinkReport>| reports.iter().filter_map(|r| r.stored).min();
        let told_apart = parts
            .iter()
            .map(|r| r.inputs.len())
            .max()
            .unwrap_or(0)
            .max(1);
        let inputs = (0..told_apart)
            .map(|i| parts.iter().filter_map(|r| r.of_input(i)).min())
            .collect();
        Self {
            stored: least(files).or_else(|| least(streams)),
            inputs,
            streams: parts.iter().flat_map(|r| r.streams.clone()).collect(),
            mosaic: parts.iter().find_map(|r| r.mosaic.clone()),
            detection: parts.iter().find_map(|r| r.detection.clone()),
        }
    }
}

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
    fn leave(&mut self, input: usize) -> Result<()> {
        let mut first = Ok(());
        for s in &mut self.0 {
            first = first.and(s.leave(input));
        }
        first
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
    fn report(&self) -> SinkReport {
        SinkReport::together(self.0.iter().map(|s| s.report()).collect())
    }
}
