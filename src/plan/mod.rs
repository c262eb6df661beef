//! One run's configuration, decided once, as ripgrep turns its low-level arguments into a
//! high-level plan: `RunPlan::from_args` consumes the flags and decides what they say before
//! anything opens (`run`); `Machine` holds what the machine says, gathered once beside it
//! (`machine`); `Plan::settle` adds what an opened input says (size, format, rate) and
//! decides its ring, the frames in flight, the band counts and the format its frames are
//! handed to the sinks in (`sink::negotiate`). `Plan::new` makes a plan from explicit counts:
//! the bench and the tests make theirs with it, and every pipeline in framepipe is started
//! from a plan (`Plan::options`, `Plan::run`).
//!
//! Invariants: the counts' defaults live here once (ring, frames in flight, band counts,
//! spare slots; the rate where nothing says one is `frame::DEFAULT_FPS`, the formats' row
//! alignment `band`'s); a plan is valid when made (bands cut for the size and the formats'
//! row alignment, formats checked against the size, frames in flight between 1 and the
//! ring's slots, the ring at least 2); deciding opens nothing: a file, a device or a window
//! is opened only when a plan is run (`Plan::make_backend`, `Plan::run`) or by `app`.

use std::sync::Arc;

use anyhow::Result;

use crate::backend::{self, Backend, BackendConfig, BackendKind};
use crate::band;
use crate::filter::Chain;
use crate::frame::{FrameSize, DEFAULT_FPS};
use crate::pipeline::{self, Options};
use crate::pixel::{Formats, PixelFormat};
use crate::reload::Reloader;
use crate::sink::{self, Sink};
use crate::source::Source;
use crate::stats::Summary;
use crate::stop::Stop;

pub mod cameras;
pub mod copy;
pub mod entry;
pub mod error;
pub mod machine;
pub mod names;
pub mod opencv;
pub mod run;
pub mod shard;
pub mod start;

pub use error::PlanError;

pub use machine::Machine;
pub use opencv::OpenCvPart;
pub use run::{Engine, InputPlan, RunPlan};
pub use start::Start;

/// Slots the ring holds beyond the frames in flight where nothing else decides (the bench,
/// the tests): frames being captured, waiting and consumed while others are on the GPU.
pub const RING_SPARE: usize = 4;

/// Slots each input's ring holds in a run of several inputs when `--ring` is not given
/// (fewer than one input's default: many rings share the host's memory).
pub const RING_EACH: usize = 6;

/// The rates `--fps` (and a pattern's rate) take, besides 0 (`frame` keeps them, below the
/// sources that read them too).
pub use crate::frame::{MAX_FPS, MIN_FPS};

/// How many of each a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Slots in the ring (frames that exist at once).
    pub ring: usize,
    /// Frames on the backend at once.
    pub in_flight: usize,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Bands of a frame submitted behind others.
    pub busy_bands: usize,
}

impl Counts {
    /// `bands` bands for every frame, `in_flight` frames in flight, `RING_SPARE` more slots.
    pub fn spare(bands: usize, in_flight: usize) -> Self {
        Self {
            ring: in_flight + RING_SPARE,
            in_flight,
            bands,
            busy_bands: bands,
        }
    }

    /// The app's defaults for `size` frames whose bands keep `align` rows whole: the ring
    /// the host's memory allows (`budget::default_ring`), frames in flight for the height
    /// (two slots left for capture and display), the height's bands, one band behind others.
    pub fn defaults(size: FrameSize, align: usize) -> Self {
        let ring = crate::budget::default_ring(size);
        Self {
            ring,
            in_flight: Self::in_flight_for(ring, size),
            bands: band::default_bands_in(size.height, align),
            busy_bands: 1,
        }
    }

    /// Frames in flight where `--in-flight` does not say: the height's (`band`), leaving two
    /// of the `ring`'s slots for capture and display.
    pub fn in_flight_for(ring: usize, size: FrameSize) -> usize {
        ring.saturating_sub(2)
            .clamp(1, band::default_in_flight(size.height))
    }
}

/// One run's validated configuration (module doc).
#[derive(Clone, Debug)]
pub struct Plan {
    /// Which backend runs the frames.
    pub kind: BackendKind,
    /// What the backend is made from: the first frames' size and formats, the chain, the
    /// band plans, frames in flight, page-locking, tracing, the CUDA settings.
    pub backend: BackendConfig,
    /// Slots in the ring.
    pub ring: usize,
    /// Stop after this many captured frames.
    pub frames: Option<u64>,
    /// The summary's trace is the last N traced frames (0: the first `trace_frames`).
    pub trace_last: u64,
    /// Keep every frame's submit and done instants (the bench).
    pub keep_frame_times: bool,
    /// The output's frame rate: the input's, `--fps`, or `DEFAULT_FPS`.
    pub fps: f64,
}

/// Counts or formats a plan can't be made of.
#[derive(Debug, thiserror::Error)]
pub enum CountError {
    /// `--ring` below 2.
    #[error("--ring {0} is too small: the ring needs at least 2 slots")]
    Ring(usize),
    /// `--in-flight` 0 or over the ring.
    #[error("--in-flight {in_flight} must be between 1 and the ring's {ring} slots")]
    InFlight {
        /// Asked.
        in_flight: usize,
        /// The ring's slots.
        ring: usize,
    },
    /// `--bands` the frame can't be cut into.
    #[error("--bands {count}: {why}")]
    Bands {
        /// Asked.
        count: usize,
        /// Why not.
        why: crate::band::BandError,
    },
    /// `--busy-bands` the frame can't be cut into.
    #[error("--busy-bands {count}: {why}")]
    BusyBands {
        /// Asked.
        count: usize,
        /// Why not.
        why: crate::band::BandError,
    },
    /// Formats the frame can't be carried in (about the input, not a flag).
    #[error(transparent)]
    Formats(#[from] crate::backend::ConfigError),
}

impl CountError {
    /// Whether it is about a flag (else about the input's frames).
    fn about_flags(&self) -> bool {
        !matches!(self, CountError::Formats(_))
    }
}

/// What the run decides of the backend once its inputs and consumers are open (`app`): the
/// mosaic it composes, whether processed frames stay on the device for an embedding
/// program (and how they are shaped for its model), and the inputs' names for a text
/// filter's `{name}`.
#[derive(Debug)]
pub struct Consumers {
    /// The mosaic the backend composes, where the run shows or records one.
    pub compose: Option<crate::tiles::Compose>,
    /// Frames lent on the device to the run's one consumer.
    pub lend: bool,
    /// Lent frames shaped for a model (`lend` only).
    pub shape: Option<backend::Shape>,
    /// Each input's name, by its number in the pipeline.
    pub names: Arc<[String]>,
}

impl Plan {
    /// Settles what the backend does for the run's consumers (`Consumers`).
    pub fn settle_consumers(&mut self, consumers: Consumers) {
        let cfg = &mut self.backend;
        cfg.compose = consumers.compose;
        cfg.shape = consumers.shape.filter(|_| consumers.lend);
        cfg.lend = consumers.lend;
        cfg.names = consumers.names;
    }

    /// `size` frames in `formats` through `chain` on `kind`, with `counts`; untraced,
    /// page-locked, CUDA's default settings, to the end of the input. The error says which
    /// count or format is wrong.
    pub fn new(
        kind: BackendKind,
        size: FrameSize,
        formats: Formats,
        chain: Chain,
        counts: Counts,
    ) -> Result<Self, CountError> {
        let Counts {
            ring,
            in_flight,
            bands,
            busy_bands,
        } = counts;
        if ring < 2 {
            return Err(CountError::Ring(ring));
        }
        if in_flight == 0 || in_flight > ring {
            return Err(CountError::InFlight { in_flight, ring });
        }
        let backend = BackendConfig::new(size, chain, bands, in_flight)
            .map_err(|why| CountError::Bands { count: bands, why })?
            .with_busy_bands(busy_bands.min(size.height))
            .map_err(|why| CountError::BusyBands {
                count: busy_bands,
                why,
            })?
            .with_formats(formats)?;
        Ok(Self {
            kind,
            backend,
            ring,
            frames: None,
            trace_last: 0,
            keep_frame_times: false,
            fps: DEFAULT_FPS,
        })
    }

    /// The app's plan for input `input` of the run (`engine`: what the flags ask of the
    /// backend) over what its opened `source` says.
    pub fn settle(engine: &Engine, input: &InputPlan, source: &dyn Source) -> Result<Self> {
        let size = source.size();
        let counts = settle_counts(engine, size, source.format().row_align())?;
        // The outputs take the chain's frames: of its output size.
        let out = engine
            .chain
            .output_size(size)
            .map_err(|why| anyhow::anyhow!("{}: {why}", source.describe()))?;
        let formats = Formats {
            input: source.format(),
            output: sink::negotiate(source.format(), out, &input.takes),
        };
        if let Some(lost) = chroma_lost(formats) {
            crate::warn!("{lost}");
        }
        let mut plan = Self::new(engine.kind, size, formats, engine.chain.clone(), counts)
            .map_err(|e| match e.about_flags() {
                true => anyhow::Error::from(e),
                false => anyhow::anyhow!("{}: {e}", source.describe()),
            })?;
        let cfg = &mut plan.backend;
        cfg.pageable = engine.pageable;
        cfg.trace_frames = engine.trace_frames;
        cfg.rolling = engine.rolling;
        cfg.cuda.streams = engine.streams;
        cfg.cuda.graphs = engine.graphs;
        plan.frames = engine.frames;
        plan.trace_last = engine.trace_last;
        plan.fps = source.fps().or(engine.fps).unwrap_or(DEFAULT_FPS);
        // Beside other inputs the ring is smaller; the backend's frames in flight are taken
        // from every input's ring, not from this one alone: they stay as planned.
        if let Some(cap) = engine.ring_cap {
            plan.ring = plan.ring.min(cap);
        }
        Ok(plan)
    }

    /// The size of the frames the backend hands over (the chain's output size).
    pub fn output_size(&self) -> FrameSize {
        let size = self.backend.size;
        self.backend.chain.output_size(size).unwrap_or(size)
    }

    /// Traces frames `0..n` (spans into the summary's trace).
    pub fn traced(mut self, n: u64) -> Self {
        self.backend.trace_frames = n;
        self
    }

    /// Leaves the ring's buffers pageable (`--pageable`: the original question's mistake).
    pub fn pageable(mut self, pageable: bool) -> Self {
        self.backend.pageable = pageable;
        self
    }

    /// The CUDA backend's own settings.
    pub fn cuda(&self) -> backend::CudaSettings {
        self.backend.cuda
    }

    /// Runs the CUDA backend as `cuda` says (its stream layout, issue order, graphs).
    pub fn with_cuda(mut self, cuda: backend::CudaSettings) -> Self {
        self.backend.cuda = cuda;
        self
    }

    /// Has the backend compose the mosaic `compose` describes.
    pub fn composing(mut self, compose: Option<crate::tiles::Compose>) -> Self {
        self.backend.compose = compose;
        self
    }

    /// Lends processed frames on the device to the run's one consumer, shaped for a model
    /// where `shape` says (the CPU backend ignores both).
    pub fn lending(mut self, lend: bool, shape: Option<backend::Shape>) -> Self {
        self.backend.lend = lend;
        self.backend.shape = shape.filter(|_| lend);
        self
    }

    /// The frames' size and formats as the backend takes them.
    pub fn frame(&self) -> (FrameSize, Formats) {
        (self.backend.size, self.backend.formats)
    }

    /// The pipeline's options, with `reload` watching the chain's kernel files.
    pub fn options(&self, reload: Option<Arc<Reloader>>) -> Options {
        Options {
            ring: self.ring,
            frames: self.frames,
            keep_frame_times: self.keep_frame_times,
            trace_frames: self.backend.trace_frames,
            trace_last: self.trace_last,
            reload,
            progress: Default::default(),
            joins: None,
        }
    }

    /// The backend the plan asks for.
    pub fn make_backend(&self) -> Result<Box<dyn Backend>> {
        backend::create(self.kind, &self.backend)
    }

    /// Runs `source` into `sink` as planned, until the input ends, `frames` are captured or
    /// `stop` is asked for.
    pub fn run(
        &self,
        source: Box<dyn Source>,
        sink: &mut dyn Sink,
        stop: &Stop,
    ) -> Result<Summary> {
        let backend = self.make_backend()?;
        pipeline::run(source, backend, sink, &self.options(None), stop)
    }
}

/// What a run loses of its input's chroma, said before it starts: a 4:2:2 or 4:4:4 input
/// whose frames are handed to the outputs as 4:2:0 (I420 or NV12). (A video file's encoder
/// may store 4:2:2 or 4:4:4 again, `--pix-fmt`, from those 4:2:0 frames.)
fn chroma_lost(formats: Formats) -> Option<String> {
    let from = match formats.input {
        PixelFormat::Yuyv | PixelFormat::Yuv422p => "4:2:2",
        PixelFormat::Yuv444p => "4:4:4",
        _ => return None,
    };
    matches!(formats.output, PixelFormat::I420 | PixelFormat::Nv12).then(|| {
        format!(
            "the input is {from} ({}) and the output {} is 4:2:0: half of its colour resolution is dropped (--output-format bgr24 keeps every pixel's colour)",
            formats.input, formats.output
        )
    })
}

/// The counts of a run of `size` frames (rows kept whole by `align`) as `engine` asks: its
/// ring (the memory's default, checked against the memory), the frames in flight and the
/// bands.
fn settle_counts(engine: &Engine, size: FrameSize, align: usize) -> Result<Counts> {
    let defaults = Counts::defaults(size, align);
    let ring = engine.ring.unwrap_or_else(|| {
        if defaults.ring < crate::budget::DEFAULT_RING {
            crate::info!(
                "{size} frames are large: the ring holds {} of them (--ring sets it)",
                defaults.ring
            );
        }
        defaults.ring
    });
    crate::budget::check_ring(ring, size, crate::host::memory_available())?;
    Ok(Counts {
        ring,
        in_flight: engine
            .in_flight
            .unwrap_or_else(|| Counts::in_flight_for(ring, size)),
        bands: engine.bands.unwrap_or(defaults.bands),
        busy_bands: engine.busy_bands,
    })
}
