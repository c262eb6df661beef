//! What runs the filters: CUDA (banded streams, several frames in flight) or the CPU.
//!
//! A backend takes slots whose input buffer holds a frame (described by the slot's
//! `FrameDesc`: size, format, planes), fills their output buffer (in the slot's output
//! format: the input converted to BGR, the chain, the result converted, as
//! `pixel::apply_reference` defines it), and hands them back **in submission order**. It
//! never keeps more than `capacity()` frames. Each frame is processed as its own descriptor
//! says, so frames of several sizes and formats may be interleaved; `formats()` and the
//! config's `size` are the run's first configuration, which the ring's slots are made for;
//! a chain that changes the size makes frames of the size `resizer` says, which the slots'
//! output buffers are made for (`Slot::output_size` says it on each frame).
//! `attach` prepares a ring buffer (the CUDA backend page-locks it); `submit` attaches the
//! slot's buffers as a copy first goes through them (a no-op after that), and a caller may attach them
//! ahead (the bench does). Where the config asks for a mosaic (`compose`), the backend scales
//! each processed frame into its tile too and hands pictures out through `picture`; the
//! CUDA backend then brings a frame down only where some output needs it whole
//! (`Slot::output_skipped` says it didn't). Where the config lends frames (`lend`: the
//! run's one consumer takes them on the device), the CUDA backend leaves each frame in a
//! device buffer that goes with it (`Slot::output_memory`, `lend`) instead, and the CPU
//! backend makes it into a host buffer that goes with it (`host_lend`). A CUDA backend
//! tells its context (`cuda_context`), on which `--detect` fits its pictures to the model
//! (`fit`).

mod canvas;
pub mod check;
mod compose;
mod copies;
pub mod cpu;
pub mod cuda;
pub mod device;
pub mod fit;
pub mod host_lend;
pub mod kcache;
mod kernels;
mod lanes;
pub mod lend;
pub mod measure;
mod nvrtc;
mod reshape;
pub mod teardown;

use anyhow::{bail, Result};

use crate::band::{BandError, BandPlan};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::Formats;
use crate::ring::{HostBuffer, Slot};

/// Runs a filter chain on frames: takes slots, fills their output buffers, hands them back in order.
pub trait Backend: Send {
    /// One line for the log, e.g. "cuda: NVIDIA H200 (sm_90), 4 bands, page-locked".
    fn describe(&self) -> String;
    /// The formats of the frames it takes and gives (the ring's slots are sized by them).
    fn formats(&self) -> Formats;
    /// What size of frame it makes of each size it takes (a chain that scales, crops, pads
    /// or turns), for the ring's output buffers; the same size unless it says otherwise.
    fn resizer(&self) -> Resizer {
        std::sync::Arc::new(|size| size)
    }
    /// Prepares a ring buffer for this backend (page-locks it for CUDA).
    fn attach(&mut self, buffer: &mut HostBuffer) -> Result<()>;
    /// The most frames this backend holds at once.
    fn capacity(&self) -> usize;
    /// Names of the trace tracks its spans use, by their numbers (`trace::Track::Backend`).
    fn tracks(&self) -> Vec<String>;
    /// Frames submitted and not yet handed back.
    fn in_flight(&self) -> usize;
    /// Starts processing a frame. Callers keep `in_flight() < capacity()`.
    fn submit(&mut self, slot: Slot) -> Result<()>;
    /// The oldest submitted frame once it is done; with `wait`, blocks until it is.
    fn complete(&mut self, wait: bool) -> Result<Option<Slot>>;
    /// Applies a change while running; called only with no frame in flight.
    fn control(&mut self, control: &Control) -> Result<()>;
    /// The mosaic its config asks for (`BackendConfig::compose`) as composed so far, once a
    /// picture of it is ready; `fetch` says whether to bring what the last frames composed
    /// (None where the run has no mosaic).
    fn picture(&mut self, fetch: Fetch) -> Result<Option<Picture>>;
    /// The CUDA context it runs on, where it runs on a device (the detector fits its
    /// pictures there: `fit::ModelFit`).
    fn cuda_context(&self) -> Option<std::sync::Arc<cudarc::driver::CudaContext>> {
        None
    }
}

/// The size of frame a backend makes of a frame of a size (`Backend::resizer`).
pub type Resizer = std::sync::Arc<dyn Fn(FrameSize) -> FrameSize + Send + Sync>;

/// The resizer of a backend running `chain`.
pub fn resizer_of(chain: &Chain) -> Resizer {
    let chain = chain.clone();
    std::sync::Arc::new(move |size| chain.output_size(size).unwrap_or(size))
}

/// The chain a backend running `now` over frames of `size` takes when a control asks for
/// `asked`: without its rate (set for the outputs at the start, `sink::rate`) and with
/// `now`'s geometry where it has none; None, with a warning, where it would change the
/// frames' size, which the outputs opened at.
pub fn next_chain(now: &Chain, asked: &Chain, size: Option<FrameSize>) -> Option<Chain> {
    let chain = asked.without_rate().0.keeping_geometry_of(now);
    let Some(size) = size else {
        return Some(chain);
    };
    let (before, then) = (now.output_size(size), chain.output_size(size));
    if then.is_err() || then != before {
        crate::warn!(
            "the chain {chain} would change the frames' size ({}), which the outputs opened at: the chain stays {now}",
            then.map_or_else(|e| e.to_string(), |s| s.to_string()),
        );
        return None;
    }
    Some(chain)
}

/// A picture of the mosaic a backend composed (packed BGR, the mosaic's size), shared with
/// the sink thread; the backend writes the buffer again only once the sink lets go.
pub type Picture = std::sync::Arc<HostBuffer>;

/// How hard `Backend::picture` tries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fetch {
    /// Only a picture whose download has finished.
    Ready,
    /// The GPU is idle: tiles written since the last picture also come down, where that
    /// was longer ago than the pictures' period.
    Idle,
    /// The run's last frames are done: tiles written since the last picture come down now.
    Last,
}

/// A change to a running backend (from the window's keys).
#[derive(Clone, Debug, PartialEq)]
pub enum Control {
    /// Run this filter chain from the next frame on.
    Chain(Chain),
    /// Page-lock (false) or unlock (true) the ring's buffers, each as it next passes.
    Pageable(bool),
    /// Cut frames that find the GPU idle into this many bands.
    Bands(usize),
}

/// What `slot`'s frame says of itself for a text filter (`filter::text`).
pub fn facts_of<'a>(slot: &Slot, names: &'a [String]) -> crate::filter::text::Facts<'a> {
    let input = usize::from(slot.desc.input.0);
    crate::filter::text::Facts {
        pts: slot.desc.seconds(),
        wall: std::time::SystemTime::now() - slot.stamps.captured.elapsed(),
        name: names.get(input).map_or("", String::as_str),
        input,
        frame: slot.desc.index,
    }
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BackendKind {
    /// CUDA when a driver and a GPU are present, else the CPU.
    Auto,
    /// CUDA, or an error where it is missing.
    Cuda,
    /// The CPU backend (OpenCV, or the plain-Rust reference).
    Cpu,
}

/// What a backend is built from, decided by the plan (`plan::Plan`: made with
/// `BackendConfig::new`, settled by `Plan::settle_consumers` and the plan's builders); its
/// fields are the crate's own, read by the backends. The CUDA backend's own settings are in
/// `cuda`, which the CPU backend ignores.
#[derive(Clone, Debug)]
pub struct BackendConfig {
    /// Frame size of every frame.
    pub(crate) size: FrameSize,
    /// The frames' formats in the input and output buffers (set with `with_formats`).
    pub(crate) formats: Formats,
    /// The filter chain to run.
    pub(crate) chain: Chain,
    /// Bands of a frame that finds the GPU idle, for longer than a frame takes (a source
    /// slower than the pipeline: its latency matters).
    pub(crate) plan: BandPlan,
    /// Bands of any other frame (a steady stream: throughput matters).
    pub(crate) busy_plan: BandPlan,
    /// Frames in flight at once.
    pub(crate) in_flight: usize,
    /// Leave ring buffers pageable (the original question's mistake, for comparison).
    pub(crate) pageable: bool,
    /// Frames `0..trace_frames` record their spans (`trace`).
    pub(crate) trace_frames: u64,
    /// Which later frames record their spans too, for the rolling trace (the window's
    /// strip, `--trace-frames last:N`); kept through controls, unlike `trace_frames`.
    pub(crate) rolling: crate::trace::Rolling,
    /// Time the stages of one frame in this many (0: never).
    pub(crate) sample_every: u64,
    /// Settings only the CUDA backend reads.
    pub(crate) cuda: CudaSettings,
    /// The mosaic of a run of several inputs, which the backend composes (each processed
    /// frame scaled into its tile), where the run shows or records one.
    pub(crate) compose: Option<crate::tiles::Compose>,
    /// The inputs' names by `InputId`, for a text filter's `{name}`.
    pub(crate) names: std::sync::Arc<[String]>,
    /// Processed frames stay on the device, lent to the run's one consumer (an embedding
    /// program's hand-over, where nothing else reads them: `lend`). The CPU backend
    /// ignores it.
    pub(crate) lend: bool,
    /// Lent frames shaped for a model on the device (`lend` only): fitted and laid out as
    /// `Shape` says, after the chain.
    pub(crate) shape: Option<Shape>,
}

/// Frames shaped for a model (the Python package's `size=`, `fit=` and model formats):
/// fitted to `size` by the geometry filters (`filter::fit`), then laid out by `lookup`.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// The size every frame is fitted to.
    pub size: crate::frame::FrameSize,
    /// How.
    pub fit: crate::filter::fit::Fit,
    /// The layout, as lookup tables.
    pub lookup: crate::pixel::lookup::Lookup,
}

impl Shape {
    /// `chain` followed by the fit of its `size` frames' output (a geometry chain: it runs
    /// on whole frames, `reshape`).
    pub fn after(
        &self,
        chain: &Chain,
        size: FrameSize,
    ) -> Result<Chain, crate::filter::geometry::GeometryError> {
        let made = chain.output_size(size)?;
        let fit = crate::filter::fit::fitting(made, self.size, self.fit);
        let filters = chain.filters().iter().chain(fit.filters()).cloned();
        Ok(Chain::from_filters(filters.collect()))
    }
}

/// The CUDA backend's own settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudaSettings {
    /// The CUDA device's index.
    pub device: usize,
    /// How the CUDA backend orders a frame's band operations across streams.
    pub issue: IssueOrder,
    /// How the CUDA backend maps bands to streams.
    pub streams: StreamLayout,
    /// Replay a captured CUDA graph for a frame that finds the GPU idle (page-locked only).
    pub graphs: bool,
    /// Give the per-stage streams priorities: downloads first, then kernels, then uploads.
    pub priorities: bool,
}

impl Default for CudaSettings {
    fn default() -> Self {
        Self {
            device: 0,
            issue: IssueOrder::Depth,
            streams: StreamLayout::PerStage,
            graphs: true,
            priorities: false,
        }
    }
}

impl BackendConfig {
    /// The app's defaults for `size` frames through `chain`: `bands` bands for a frame that
    /// finds the GPU idle, one band behind other frames, `in_flight` frames on the GPU,
    /// page-locked, untraced, CUDA's default settings. The error says what is wrong with
    /// `bands`.
    pub fn new(
        size: FrameSize,
        chain: Chain,
        bands: usize,
        in_flight: usize,
    ) -> Result<Self, BandError> {
        let plan = BandPlan::new(size.height, bands, chain.banded_radius())?;
        let busy_plan = BandPlan::new(size.height, 1, chain.banded_radius())?;
        Ok(Self {
            size,
            formats: Formats::BGR,
            chain,
            plan,
            busy_plan,
            in_flight,
            pageable: false,
            trace_frames: 0,
            rolling: crate::trace::Rolling::Off,
            sample_every: SAMPLE_EVERY,
            cuda: CudaSettings::default(),
            compose: None,
            lend: false,
            shape: None,
            names: std::sync::Arc::from(Vec::new()),
        })
    }

    /// Cuts frames submitted behind others into `bands` bands instead of one.
    pub fn with_busy_bands(mut self, bands: usize) -> Result<Self, BandError> {
        self.busy_plan = self.cut(bands, &self.chain)?;
        Ok(self)
    }

    /// Frames come in and go out in `formats`; bands are cut again to keep 4:2:0 row pairs
    /// whole. The error says what the formats can't carry.
    pub fn with_formats(mut self, formats: Formats) -> Result<Self, ConfigError> {
        let out = self.chain.output_size(self.size).unwrap_or(self.size);
        formats.check_resized(self.size, out)?;
        self.formats = formats;
        self.plan = self.cut(self.plan.len(), &self.chain)?;
        self.busy_plan = self.cut(self.busy_plan.len(), &self.chain)?;
        Ok(self)
    }

    /// This configuration for frames of another size and formats: the same chain, band
    /// counts (cut down to what the frame holds), frames in flight and settings. The error
    /// says what the formats can't carry.
    pub fn reshaped(&self, size: FrameSize, formats: Formats) -> Result<Self, ConfigError> {
        let mut cfg = self.clone();
        formats.check_resized(size, self.chain.output_size(size).unwrap_or(size))?;
        cfg.size = size;
        cfg.formats = formats;
        cfg.plan = cfg.cut(self.plan.len(), &self.chain)?;
        cfg.busy_plan = cfg.cut(self.busy_plan.len(), &self.chain)?;
        Ok(cfg)
    }

    /// `bands` bands of this config's frames for `chain`, row pairs kept whole where a
    /// format is 4:2:0. Counts above what the frame holds are cut down to it.
    pub fn cut(&self, bands: usize, chain: &Chain) -> Result<BandPlan, BandError> {
        let align = self.formats.row_align();
        let most = self.size.height.div_ceil(align);
        BandPlan::aligned(
            self.size.height,
            bands.min(most),
            chain.banded_radius(),
            align,
        )
    }
}

/// Formats a configuration can't carry, or a band count its frames can't be cut into.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The formats, for the frame's size.
    #[error(transparent)]
    Formats(#[from] crate::pixel::FormatError),
    /// The band counts, for the frame's height.
    #[error(transparent)]
    Bands(#[from] BandError),
}

/// Stage timing is sampled on one frame in this many, to keep event traffic low.
pub const SAMPLE_EVERY: u64 = 16;

/// How the CUDA backend maps a frame's bands to streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum StreamLayout {
    /// One copy-in, one compute and one copy-out stream, bands ordered by events.
    #[default]
    PerStage,
    /// One stream per (frame in flight, band).
    PerBand,
}

impl std::fmt::Display for StreamLayout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StreamLayout::PerStage => "per-stage",
            StreamLayout::PerBand => "per-band",
        })
    }
}

/// The order in which a frame's band operations are queued on their streams.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IssueOrder {
    /// Band by band: upload, filter, download of band 0, then band 1, …
    #[default]
    Depth,
    /// Stage by stage: every band's upload, then every band's filter, then downloads.
    Breadth,
}

/// Builds the backend `kind` asks for; `auto` says in one line why it fell back to the CPU.
pub fn create(kind: BackendKind, cfg: &BackendConfig) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new(cfg)?)),
        BackendKind::Cuda => match device::probe() {
            Ok(()) => Ok(Box::new(cuda::CudaBackend::new(cfg)?)),
            Err(why) => bail!("--backend cuda: {why}"),
        },
        BackendKind::Auto => match device::probe() {
            Ok(()) => Ok(Box::new(cuda::CudaBackend::new(cfg)?)),
            Err(why) => {
                if let Some(k) = cfg.chain.user_kernels().next() {
                    bail!("{}: no CUDA here ({why})", cpu::needs_cuda(k));
                }
                crate::notice!("framepipe: no CUDA ({why}); using the CPU backend");
                Ok(Box::new(cpu::CpuBackend::new(cfg)?))
            }
        },
    }
}
