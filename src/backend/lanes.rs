//! A lane set: the device side of one frame configuration (size, formats, chain) on a
//! `Device`. It holds the configuration's two band plans, one lane per frame in flight
//! (each band's device buffers, scratch and events), and the CUDA graphs captured from its
//! lanes; it queues a frame's bands (H2D → filter kernels → D2H) on the device's streams.
//! The backend keeps one lane set per configuration it has seen, so frames of another size
//! or format are served beside the others, and a control (a filter key, a reload) replaces
//! the lane sets without reopening the device.
//!
//! Pixel formats: a band of a YUV frame is uploaded plane by plane into its raw buffer
//! (laid out as a frame of the band's rows; planes that step evenly, as I420's two chroma
//! planes do, go as one 2D copy), converted to BGR by `fp_to_bgr`, filtered, and
//! its own rows converted by `fp_from_bgr` into a second raw buffer that is downloaded plane
//! by plane (`kernels/convert.cu`); BGR skips either conversion, a chain that changes
//! nothing between one format copies the planes up and back down, and one that changes
//! nothing between I420 and NV12 repacks the raw buffer into the other (`fp_repack420`),
//! samples untouched. A frame lent from device memory (NVDEC's pictures:
//! `desc::Memory::Device`) is copied into the raw buffers the same way, plane by plane, from
//! the surface at its pitches (`Planes::band_copies`), device to device.
//!
//! A frame lent on the device (`lend`: `Slot::output_memory` holds a device buffer) is
//! "downloaded" the same way into that buffer, device to device; one shaped for a model
//! (`BackendConfig::shape`) has the fit appended to the set's chain, so it always finishes
//! on the whole frame (`Reshape::lay_out`).
//!
//! The mosaic (several inputs, `tiles::Compose`): after its filters, each band writes the
//! rows of its input's tile that sample it (`kernels/compose.cu`) on its filter stream, so a
//! frame's bands fill its tile exactly once whatever the stream layout; a frame that only the
//! mosaic needs skips its download copies (its events are still recorded).
//!
//! A chain that changes the size (`Reshape`): the bands run the filters before its first
//! geometry filter and each writes its own rows into a whole frame on the device; after
//! every band's filters, the rest of the chain runs on that frame, which is converted and
//! downloaded whole, before the bands' download events mark the frame done. Such a frame
//! is not replayed from a graph, and a run of several inputs (the mosaic) has none.
//!
//! Words: a **lane** is the device side of one frame in flight (a band's buffers, scratch
//! and events, for each band), used by one frame at a time, in turn; the ring's `Slot` is
//! the host side that travels between threads. A **plan** (`Plan::Idle` or `Plan::Busy`)
//! says how a frame is cut into bands; a **stage** (`Stage`) is one step of a band
//! (upload, filter, download), and `PerStage` holds one thing per stage by name.
//!
//! Invariants:
//! - every (lane, band) pair owns its device buffers (two BGR, two raw), so bands and
//!   frames never share device memory and cudarc's per-slice event tracking can stay off;
//! - every buffer is allocated in `LaneSet::new`, which synchronizes the streams that
//!   allocated (never the context: another backend may be capturing) before the set's
//!   first frame;
//! - lanes are used in turn (`next_lane`), and the backend never holds more frames than a
//!   set has lanes, so lane `k` is reused only after its previous frame completed;
//! - a frame cut by the idle plan may replay a CUDA graph captured from the same calls,
//!   launched on the copy-in stream so that frames queued behind it finish after it;
//!   graphs are keyed by (lane, slot, timed, tile and download) and dropped when
//!   page-locking changes; a frame in device memory is never replayed from a graph (the
//!   graph would keep its surface's address); a capture that fails runs its frame without
//!   a graph, and the set captures no more (`graphs_broken`).

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use super::copies::{copy_down, copy_from_lent, copy_up, output_end, End};
use super::device::{elapsed_ms, mark, Device};
use super::kernels::{ChainKernels, Tile};
use super::reshape::Reshape;
use super::{BackendConfig, IssueOrder, StreamLayout};
use crate::band::BandPlan;
use crate::desc::Memory;
use crate::filter::reference::View;
use crate::filter::Filter;
use crate::frame::FrameSize;
use crate::pixel::{BandCopy, Formats, PixelFormat};
use crate::ring::Slot;
use crate::stats::StageTimes;
use crate::tiles::{Area, Scaler};

/// Which of the backend's two band plans cuts a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plan {
    /// A frame that found the GPU idle: fine bands, lowest latency (`cfg.plan`).
    Idle,
    /// Any other frame: few bands, least overhead (`cfg.busy_plan`).
    Busy,
}

/// The backend's band plans, one per `Plan`.
struct Plans {
    idle: BandPlan,
    busy: BandPlan,
}

impl std::ops::Index<Plan> for Plans {
    type Output = BandPlan;
    fn index(&self, plan: Plan) -> &BandPlan {
        match plan {
            Plan::Idle => &self.idle,
            Plan::Busy => &self.busy,
        }
    }
}

/// Where a band's work goes: `lane` (one frame in flight's device buffers, not
/// the ring's `Slot`), cut by `plan`, band `band`.
#[derive(Clone, Copy)]
struct Place {
    lane: usize,
    plan: Plan,
    band: usize,
}

/// One step of a band's journey.
#[derive(Clone, Copy)]
enum Stage {
    Upload,
    Filter,
    Download,
}

impl Stage {
    const ALL: [Stage; 3] = [Stage::Upload, Stage::Filter, Stage::Download];

    /// The stage a band must have finished before this one.
    fn after(self) -> Option<Stage> {
        match self {
            Stage::Upload => None,
            Stage::Filter => Some(Stage::Upload),
            Stage::Download => Some(Stage::Filter),
        }
    }
}

/// One `T` per stage of a band, named.
struct PerStage<T> {
    upload: T,
    filter: T,
    download: T,
}

impl<T> PerStage<T> {
    /// Makes each stage's `T`.
    fn new(mut make: impl FnMut() -> Result<T>) -> Result<Self> {
        Ok(Self {
            upload: make()?,
            filter: make()?,
            download: make()?,
        })
    }

    fn of(&self, stage: Stage) -> &T {
        match stage {
            Stage::Upload => &self.upload,
            Stage::Filter => &self.filter,
            Stage::Download => &self.download,
        }
    }
}

/// A stage's timing events: when it could start (after waiting for the stage before it)
/// and when it ended.
struct Marks {
    start: CudaEvent,
    end: CudaEvent,
}

/// The bands' own streams (`per-band` layout; none in the `per-stage` one).
fn band_streams(lanes: &[Vec<BandLane>]) -> impl Iterator<Item = &Arc<CudaStream>> {
    lanes.iter().flatten().filter_map(|b| b.stream.as_ref())
}

/// The device resources of one band of one frame in flight.
struct BandLane {
    /// The band's own stream (`per-band` layout only).
    stream: Option<Arc<CudaStream>>,
    bufs: [CudaSlice<u8>; 2],
    /// The band's input rows in the input format, where that is not BGR (or the frame
    /// passes untouched); one byte where unused.
    raw_in: CudaSlice<u8>,
    /// The band's own rows in the output format, where that is not BGR; one byte where
    /// unused.
    raw_out: CudaSlice<u8>,
    /// Scratch of the separable filters' row pass.
    tmp: CudaSlice<u16>,
    /// Which of `bufs` holds the filtered band.
    result: usize,
    /// Ordering events, without timing (the lightest kind), recorded when each stage is
    /// done; `done.download` means the band is done.
    done: PerStage<CudaEvent>,
    /// Timing events, recorded on sampled and traced frames only.
    timing: PerStage<Marks>,
}

/// What a captured graph is for: (lane, address of the slot's input buffer, timed, its
/// tile in the mosaic and whether the frame is downloaded).
type GraphKey = (usize, usize, bool, Option<(Area, bool)>);

/// A captured frame: the idle plan's bands of one lane, reading and writing one slot.
struct Graph(CudaGraph);

// SAFETY: a graph is not safe for concurrent use, and it never is: it is used only by the
// backend that owns it, which one thread at a time holds (`Backend: Send`, not `Sync`).
unsafe impl Send for Graph {}

/// Which buffers a band goes through, decided once per configuration.
#[derive(Clone, Copy)]
struct Route {
    /// Frames pass untouched (`Formats::passthrough`): bands are copied up and back down.
    through: bool,
    /// Frames change only their 4:2:0 layout (`Formats::repacked`): `raw_in` is repacked
    /// into `raw_out`, never through BGR.
    repack: bool,
    /// Bands are uploaded into `raw_in` (a format other than BGR, or a frame passed through
    /// untouched) rather than straight into the first BGR buffer.
    raw_in: bool,
    /// Bands are converted into `raw_out` before their download.
    raw_out: bool,
    /// The chain runs on the planes of the whole frame (`pixel::planes`, `Reshape`): the
    /// bands' raw planes are gathered into it, never converted.
    planes: bool,
}

impl Route {
    fn of(cfg: &BackendConfig) -> Self {
        let (formats, chain) = (cfg.formats, &cfg.chain);
        let through = formats.passthrough(chain.is_identity());
        let repack = formats.repacked(chain.is_identity());
        // Not for the mosaic (it composes BGR bands) nor a model's shape (laid out from BGR).
        let planes = !through
            && !repack
            && cfg.compose.is_none()
            && cfg.shape.is_none()
            && formats.input == formats.output
            && crate::pixel::planes::fits(chain, formats.input, cfg.size);
        Self {
            through,
            repack,
            raw_in: formats.input != PixelFormat::Bgr24 || through,
            // A chain that changes the size converts its whole frame (`Reshape`).
            raw_out: formats.output != PixelFormat::Bgr24
                && !through
                && !chain.changes_size()
                && !planes,
            planes,
        }
    }
}

/// The bytes of each band's buffers: band i's hold the largest band i of either plan.
struct BandSizes {
    bands: usize,
    /// Per band: the most input rows and the most own rows of either plan.
    rows: Vec<(usize, usize)>,
    width: usize,
    formats: Formats,
    route: Route,
}

impl BandSizes {
    fn of(plans: &Plans, cfg: &BackendConfig, route: Route) -> Self {
        let bands = plans.idle.len().max(plans.busy.len());
        let most = |i: usize, own: bool| {
            [&plans.idle, &plans.busy]
                .into_iter()
                .filter_map(|p| p.bands().get(i))
                .map(|b| {
                    if own {
                        b.rows.len()
                    } else {
                        b.input_rows.len()
                    }
                })
                .max()
                .unwrap_or(1)
        };
        Self {
            bands,
            rows: (0..bands)
                .map(|i| (most(i, false), most(i, true)))
                .collect(),
            width: cfg.size.width,
            formats: cfg.formats,
            route,
        }
    }

    /// A BGR buffer of band `i` (its input rows, halo included).
    fn bgr(&self, i: usize) -> usize {
        self.rows[i].0 * FrameSize::new(self.width, 1).stride()
    }

    /// The raw input buffer of band `i` (one byte where unused).
    fn raw_in(&self, i: usize) -> usize {
        match self.route.raw_in {
            true => self
                .formats
                .input
                .bytes(FrameSize::new(self.width, self.rows[i].0)),
            false => 1,
        }
    }

    /// The raw output buffer of band `i` (its own rows; one byte where unused).
    fn raw_out(&self, i: usize) -> usize {
        match self.route.raw_out {
            true => self
                .formats
                .output
                .bytes(FrameSize::new(self.width, self.rows[i].1)),
            false => 1,
        }
    }
}

impl BandLane {
    /// Band `band`'s buffers and events of one lane, allocated on its stream.
    fn new(dev: &Device, sizes: &BandSizes, band: usize, separable: bool) -> Result<Self> {
        let stream = match dev.settings.streams {
            StreamLayout::PerBand => Some(dev.ctx.new_stream()?),
            StreamLayout::PerStage => None,
        };
        let alloc_on = stream.as_ref().unwrap_or(&dev.stage_streams[0]);
        let n = sizes.bgr(band);
        let bufs = [
            alloc_on.alloc_zeros::<u8>(n)?,
            alloc_on.alloc_zeros::<u8>(n)?,
        ];
        let tmp = alloc_on.alloc_zeros::<u16>(if separable { n } else { 1 })?;
        let raw_in = alloc_on.alloc_zeros::<u8>(sizes.raw_in(band))?;
        let raw_out = alloc_on.alloc_zeros::<u8>(sizes.raw_out(band))?;
        let timing = PerStage::new(|| {
            Ok(Marks {
                start: dev.timing_event()?,
                end: dev.timing_event()?,
            })
        })?;
        let done = PerStage::new(|| dev.sync_event())?;
        Ok(Self {
            stream,
            bufs,
            raw_in,
            raw_out,
            tmp,
            result: 0,
            done,
            timing,
        })
    }
}

/// What a lane set serves: frames of this size and these formats (the chain is the
/// backend's, the same for every set).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct LaneKey {
    /// The frames' size.
    pub(super) size: FrameSize,
    /// The input and output buffers' formats.
    pub(super) formats: Formats,
}

impl LaneKey {
    /// The configuration of `slot`'s frame.
    pub(super) fn of(slot: &Slot) -> Self {
        Self {
            size: slot.size(),
            formats: slot.formats(),
        }
    }
}

/// The device side of one configuration (module doc).
pub(super) struct LaneSet {
    pub(super) key: LaneKey,
    kernels: Arc<ChainKernels>,
    /// Band plans for a frame that finds the GPU idle (latency) and one submitted behind
    /// others (throughput).
    plans: Plans,
    lanes: Vec<Vec<BandLane>>,
    next_lane: usize,
    /// Captured graphs by (lane, address of the slot's input buffer, timed, its tile and
    /// whether it is downloaded where the mosaic is composed).
    graphs: HashMap<GraphKey, Graph>,
    /// A capture is being recorded: timing events become graph nodes.
    capturing: bool,
    /// A capture failed (another thread's CUDA call can break one: a decoder freeing its
    /// surfaces as a camera reconnects synchronizes the whole context, which CUDA refuses
    /// while a stream captures): this set's frames run without graphs from then on.
    graphs_broken: bool,
    /// Which buffers a band goes through, from the formats and the chain.
    route: Route,
    /// The frame being queued: each band's part of its tile of the mosaic (empty: not
    /// composed), and whether its bands are downloaded.
    compose: Vec<Tile>,
    download: bool,
    /// The frame being queued: the chain bound to it, where its texts show its facts.
    bound: Option<crate::filter::Chain>,
    /// The chain's part from its first geometry filter on, on whole frames (None where
    /// the chain keeps the size).
    reshape: Option<Reshape>,
    /// Frames lent shaped for a model (`BackendConfig::shape`): the shape, and its lookup
    /// tables on the device. The fit is part of the set's chain, so `reshape` is there.
    shape: Option<(super::Shape, CudaSlice<u8>)>,
}

/// How one frame is queued (`LaneSet::run`): cut by `plan`, timed or not, as one graph
/// launch where `graph` allows it, composed into the mosaic where `mosaic` says, with the
/// chain `bound` to this frame's facts where it has text.
pub(super) struct FrameRun<'a> {
    /// How the frame is cut into bands.
    pub plan: Plan,
    /// Whether its stages are timed (sampled and traced frames).
    pub timed: bool,
    /// Whether a graph may replay it.
    pub graph: bool,
    /// Its tile of the mosaic, where the backend composes one.
    pub mosaic: Option<&'a FrameMosaic<'a>>,
    /// The chain bound to the frame (text filters), where it differs from the set's.
    pub bound: Option<crate::filter::Chain>,
}

/// Where a frame goes in the mosaic the backend composes.
pub(super) struct FrameMosaic<'a> {
    /// The mosaic's device address and width.
    pub(super) canvas: u64,
    pub(super) canvas_width: usize,
    /// The frame's tile in the mosaic.
    pub(super) tile: Area,
    /// The frame's scaler into its picture area (absolute in the mosaic).
    pub(super) scaler: &'a Scaler,
    /// Whether the frame itself is downloaded too.
    pub(super) download: bool,
    /// The event after the last picture's download, which the tile's writes must follow
    /// (so that a picture never holds half of a frame).
    pub(super) fence: Option<&'a CudaEvent>,
}

impl LaneSet {
    /// Waits until the work queued on this set's own streams (its bands', in the
    /// `per-band` layout) has completed.
    pub(super) fn synchronize(&self) -> Result<()> {
        for stream in band_streams(&self.lanes) {
            stream.synchronize()?;
        }
        Ok(())
    }

    /// Allocates the lanes for `cfg`'s frames (its size, formats, plans and frames in
    /// flight) on `dev`, running `kernels` (compiled for `cfg.chain`); refuses what the
    /// device's free memory can't hold.
    pub(super) fn new(
        dev: &Device,
        cfg: &BackendConfig,
        kernels: Arc<ChainKernels>,
    ) -> Result<Self> {
        // Frames shaped for a model have the fit after the chain, on whole frames.
        let shaped;
        let cfg = match &cfg.shape {
            Some(shape) => {
                let chain = shape.after(&cfg.chain, cfg.size)?;
                shaped = BackendConfig {
                    chain,
                    ..cfg.clone()
                };
                &shaped
            }
            None => cfg,
        };
        let plans = Plans {
            idle: cfg.plan.clone(),
            busy: cfg.busy_plan.clone(),
        };
        let route = Route::of(cfg);
        let sizes = BandSizes::of(&plans, cfg, route);
        let separable = cfg
            .chain
            .filters()
            .iter()
            .any(|f| matches!(f, Filter::Box { .. } | Filter::Gauss { .. }));
        check_room(dev, cfg, &sizes, separable)?;
        let lanes = (0..cfg.in_flight.max(1))
            .map(|_| {
                (0..sizes.bands)
                    .map(|band| BandLane::new(dev, &sizes, band, separable))
                    .collect::<Result<Vec<_>>>()
            })
            .collect::<Result<Vec<_>>>()?;
        let (s, output) = (&dev.stage_streams[0], cfg.formats.output);
        let planes = route.planes.then_some(output);
        let lanes_n = cfg.in_flight.max(1);
        let reshape = Reshape::new(s, &cfg.chain, (cfg.size, output), lanes_n, planes)?;
        let shape = match &cfg.shape {
            Some(shape) => Some((shape.clone(), s.clone_htod(&shape.lookup.tables)?)),
            None => None,
        };
        // The streams that allocated, not the whole context: another backend of this
        // process may be capturing a graph, and CUDA refuses to synchronize a context then.
        for stream in dev.stage_streams.iter().chain(band_streams(&lanes)) {
            stream.synchronize().context("allocating device buffers")?;
        }
        Ok(Self {
            key: LaneKey {
                size: cfg.size,
                formats: cfg.formats,
            },
            kernels,
            plans,
            lanes,
            next_lane: 0,
            graphs: HashMap::new(),
            capturing: false,
            graphs_broken: false,
            route,
            compose: Vec::new(),
            download: true,
            bound: None,
            reshape,
            shape,
        })
    }

    /// Per-band stream tracks' names (`per-band` layout).
    pub(super) fn band_tracks(&self) -> Vec<String> {
        self.lanes
            .iter()
            .enumerate()
            .flat_map(|(l, bands)| {
                (0..bands.len()).map(move |b| format!("stream: lane {l}, band {b}"))
            })
            .collect()
    }

    /// Forgets the captured graphs (they name host buffers whose page-locking changes).
    pub(super) fn clear_graphs(&mut self) {
        self.graphs.clear();
    }

    /// Queues `slot`'s frame in the next lane as `how` says (`FrameRun`); returns the lane.
    pub(super) fn run(&mut self, dev: &Device, slot: &mut Slot, how: FrameRun) -> Result<usize> {
        let FrameRun {
            plan,
            timed,
            graph,
            mosaic,
            bound,
        } = how;
        self.bound = bound;
        let lane = self.next_lane;
        self.next_lane = (lane + 1) % self.lanes.len();
        self.aim(plan, mosaic);
        let graph = self.replays(graph, plan);
        if let Some(fence) = mosaic.and_then(|m| m.fence) {
            // The tile is written after the last picture came down: waited on outside any
            // capture (a graph can't wait on an event recorded outside it).
            let streams = match graph {
                true => vec![dev.stage_streams[0].clone()],
                false => self.filter_streams(dev, lane, plan),
            };
            for s in streams {
                s.wait(fence)?;
            }
        }
        let key = mosaic.map(|m| (m.tile, m.download));
        if graph {
            self.launch_graph(dev, lane, slot, timed, key)?;
        } else {
            self.enqueue_frame(dev, lane, plan, slot, timed)?;
        }
        Ok(lane)
    }

    /// Sets what the next frame's bands do besides their chain: each band's part of its
    /// tile (`compose`) and whether they are downloaded.
    fn aim(&mut self, plan: Plan, mosaic: Option<&FrameMosaic>) {
        self.compose.clear();
        self.download = mosaic.is_none_or(|m| m.download);
        let Some(m) = mosaic else { return };
        let (size, to, tile) = (self.key.size, m.scaler.to, m.tile);
        for geo in self.plans[plan].bands() {
            // Rows of the tile: the picture's rows this band's rows fill, and the letterbox
            // above (the first band) and below (the last).
            let picture = m.scaler.rows_from(geo.rows.clone());
            let top = to.y - tile.y;
            let first = if geo.rows.start == 0 {
                0
            } else {
                top + picture.start
            };
            let end = if geo.rows.end == size.height {
                tile.height
            } else {
                top + picture.end
            };
            self.compose.push(Tile {
                canvas: m.canvas,
                canvas_width: m.canvas_width as i32,
                tile_x: tile.x as i32,
                tile_y: tile.y as i32,
                tile_w: tile.width as i32,
                pic_x: (to.x - tile.x) as i32,
                pic_y: top as i32,
                pic_w: to.width as i32,
                pic_h: to.height as i32,
                src_w: size.width as i32,
                src_h: size.height as i32,
                first: first as i32,
                rows: end.saturating_sub(first) as i32,
                band_row0: geo.input_rows.start as i32,
            });
        }
    }

    /// The streams a frame's filters (and so its tile's writes) run on.
    fn filter_streams(&self, dev: &Device, lane: usize, plan: Plan) -> Vec<Arc<CudaStream>> {
        match dev.settings.streams {
            StreamLayout::PerStage => vec![dev.stage_streams[Stage::Filter as usize].clone()],
            StreamLayout::PerBand => self.other_streams(dev, lane, plan),
        }
    }

    /// The streams after which a frame just queued in `lane` has written its tile (the
    /// mosaic's download waits on them): the graph's stream, or its filter streams.
    pub(super) fn composed_on(
        &self,
        dev: &Device,
        lane: usize,
        plan: Plan,
        graph: bool,
    ) -> Vec<Arc<CudaStream>> {
        match self.replays(graph, plan) {
            true => vec![dev.stage_streams[0].clone()],
            false => self.filter_streams(dev, lane, plan),
        }
    }

    /// Whether a frame cut by `plan` is replayed from a graph where the backend asks for
    /// one (`graph`): the idle plan only, never a frame whose size changes (this version
    /// captures bands only), nor after a capture failed in this set.
    fn replays(&self, graph: bool, plan: Plan) -> bool {
        graph && plan == Plan::Idle && self.reshape.is_none() && !self.graphs_broken
    }

    /// Whether the frame in `lane`, cut by `plan`, is done; with `wait`, waits until it is.
    pub(super) fn is_done(
        &self,
        dev: &Device,
        lane: usize,
        plan: Plan,
        wait: bool,
    ) -> Result<bool> {
        for b in self.done_events(dev, lane, plan) {
            if wait {
                b.done
                    .download
                    .synchronize()
                    .context("waiting for the GPU")?;
            } else if !b
                .done
                .download
                .try_is_complete()
                .context("polling the GPU")?
            {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// What a completed frame in `lane` measured: its spans (when `traced`) and its stage
    /// times (when `timed`).
    pub(super) fn measured(
        &self,
        dev: &Device,
        lane: usize,
        plan: Plan,
        slot: &mut Slot,
        traced: bool,
        timed: bool,
    ) -> Result<()> {
        slot.spans.clear();
        if traced {
            self.trace_spans(dev, lane, plan, slot)?;
        }
        slot.gpu = if timed {
            Some(self.stage_times(lane, plan)?)
        } else {
            None
        };
        Ok(())
    }

    /// The stream `stage` of `band` in `lane` runs on: the band's own, or the stage's.
    fn stream_of(&self, dev: &Device, lane: usize, band: usize, stage: Stage) -> Arc<CudaStream> {
        match &self.lanes[lane][band].stream {
            Some(own) => own.clone(),
            None => dev.stage_streams[stage as usize].clone(),
        }
    }

    /// Queues one stage of one band of `slot` in `lane`.
    fn enqueue(
        &mut self,
        dev: &Device,
        stage: Stage,
        at: Place,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<()> {
        let Place { lane, band, .. } = at;
        let per_stage = dev.settings.streams == StreamLayout::PerStage;
        let capturing = self.capturing;
        let s = self.stream_of(dev, lane, band, stage);
        let s = &s;
        let bl = &self.lanes[lane][band];
        // With stage streams a band's stages are ordered by events; on a band's own stream
        // they are in order already.
        if let Some(before) = stage.after().filter(|_| per_stage) {
            s.wait(bl.done.of(before))?;
        }
        if timed {
            mark(&bl.timing.of(stage).start, s, capturing)?;
        }
        // The slot's buffers are not touched again until its frame completes (module
        // invariant), so these asynchronous copies never outlive the memory they use.
        match stage {
            Stage::Upload => self.upload(s, at, slot)?,
            Stage::Filter => self.filter(s, at)?,
            Stage::Download => self.download(s, at, slot)?,
        }
        let bl = &self.lanes[lane][band];
        if timed {
            mark(&bl.timing.of(stage).end, s, capturing)?;
        }
        // The download's event marks the band done, whatever the layout; the filter's is
        // waited on by the part of the chain that runs on the whole frame.
        let whole_waits = matches!(stage, Stage::Filter) && self.reshape.is_some();
        if per_stage || whole_waits || matches!(stage, Stage::Download) {
            bl.done.of(stage).record(s)?;
        }
        Ok(())
    }

    /// Queues a band's upload on `s`: its input rows from the slot (its planes as they
    /// came where the frame is not BGR, device to device for a frame lent from device
    /// memory), halo included.
    fn upload(&mut self, s: &Arc<CudaStream>, at: Place, slot: &Slot) -> Result<()> {
        let geo = &self.plans[at.plan].bands()[at.band];
        let bl = &mut self.lanes[at.lane][at.band];
        let (size, input) = (self.key.size, self.key.formats.input);
        if !self.route.raw_in {
            let stride = size.stride();
            let (from, len) = (geo.input_rows.start * stride, geo.input_rows.len() * stride);
            s.memcpy_htod(
                &slot.input[from..from + len],
                &mut bl.bufs[0].slice_mut(0..len),
            )?;
            return Ok(());
        }
        let lent = match &slot.desc.memory {
            Memory::Device { ptr, .. } => Some(End::Device(*ptr)),
            Memory::HostLent { ptr, .. } => Some(End::Host(*ptr as *const u8)),
            Memory::Host => None,
        };
        match lent {
            Some(frame) => {
                let planes = &slot.desc.planes;
                let extent = planes.extent(input, size);
                for c in planes.band_copies(input, size, geo.input_rows.clone()) {
                    // SAFETY: the source checked the planes against the buffer it lends them
                    // in (NVDEC's surface, `Nvdec::lend`; the pool's page-locked picture,
                    // `source::pinned`), so their extent is its memory, and the slot's lease
                    // keeps that buffer until the frame completes.
                    unsafe { copy_from_lent(s, frame, extent, &mut bl.raw_in, c)? };
                }
            }
            None => {
                for c in input.band_copies(size, geo.input_rows.clone()) {
                    copy_up(s, &slot.input, &mut bl.raw_in, c)?;
                }
            }
        }
        Ok(())
    }

    /// Queues a band's kernels on `s`: the planes passed through or repacked, or converted
    /// to BGR, filtered and converted to the output format; its tile of the mosaic.
    fn filter(&mut self, s: &Arc<CudaStream>, at: Place) -> Result<()> {
        let geo = &self.plans[at.plan].bands()[at.band];
        let bl = &mut self.lanes[at.lane][at.band];
        let size = self.key.size;
        let Formats { input, output } = self.key.formats;
        let (w, rows) = (size.width, geo.input_rows.len());
        let tile = self.compose.get(at.band);
        if self.route.through {
            // The planes go back as they came; the mosaic reads them as they are (BGR).
            if let Some(tile) = tile {
                let (src, _) = bl.raw_in.device_ptr(s);
                self.kernels.compose(s, src, *tile)?;
            }
            return Ok(());
        }
        if self.route.repack {
            // A chain that changes nothing reads no halo: the band's input rows are its
            // own. (The mosaic takes BGR, so a run with one never repacks.)
            let (src, _) = bl.raw_in.device_ptr(s);
            let (dst, _) = bl.raw_out.device_ptr_mut(s);
            return self.kernels.repack_420(s, src, dst, w, rows, input);
        }
        if self.route.planes {
            // The planes go into the whole frame as they came; the chain runs there.
            crate::ensure_kept!(
                geo.input_rows == geo.rows,
                "a band of a chain run on planes reads no halo"
            );
            let reshape = self
                .reshape
                .as_mut()
                .expect("a chain on planes has its Reshape");
            return reshape.gather_planes(s, at.lane, &bl.raw_in, (input, size), geo.rows.clone());
        }
        if self.route.raw_in {
            let (src, _) = bl.raw_in.device_ptr(s);
            let (dst, _) = bl.bufs[0].device_ptr_mut(s);
            self.kernels.convert_in(s, src, dst, w, rows, input)?;
        }
        let view = View {
            width: w,
            rows,
            row0: geo.input_rows.start,
            height: size.height,
        };
        let banded = 0..self.kernels.chain().banded();
        let bound = self.bound.as_ref();
        bl.result = self
            .kernels
            .enqueue_part(s, &mut bl.bufs, &mut bl.tmp, view, bound, banded)?;
        if let Some(reshape) = &mut self.reshape {
            // The band's own rows go into the frame the rest of the chain runs on.
            let stride = size.stride();
            let off = geo.offset_in_input() * stride;
            let own = off..off + geo.rows.len() * stride;
            let band = &bl.bufs[bl.result];
            return reshape.gather(s, at.lane, band, own, geo.rows.start * stride);
        }
        if self.route.raw_out {
            let off = (geo.offset_in_input() * size.stride()) as u64;
            let (src, _) = bl.bufs[bl.result].device_ptr(s);
            let (dst, _) = bl.raw_out.device_ptr_mut(s);
            let own = geo.rows.len();
            self.kernels
                .convert_out(s, src + off, dst, w, own, output)?;
        }
        if let Some(tile) = tile {
            let (src, _) = bl.bufs[bl.result].device_ptr(s);
            self.kernels.compose(s, src, *tile)?;
        }
        Ok(())
    }

    /// Queues a band's download on `s`: its own rows into the slot's output (none where
    /// only the mosaic needs the frame).
    fn download(&mut self, s: &Arc<CudaStream>, at: Place, slot: &mut Slot) -> Result<()> {
        let geo = &self.plans[at.plan].bands()[at.band];
        let bl = &self.lanes[at.lane][at.band];
        let (size, output) = (self.key.size, self.key.formats.output);
        let Route {
            through, raw_out, ..
        } = self.route;
        if !self.download || self.reshape.is_some() {
            // Only the mosaic needed the frame, or it came down whole (`finish_whole`).
            return Ok(());
        }
        let out = output_end(slot, self.lent_bytes());
        let bytes = |b: &CudaSlice<u8>| (b.device_ptr(s).0, b.len());
        if through || raw_out {
            // Passing through, a band reads no halo: its input rows are its own.
            let from = bytes(if through { &bl.raw_in } else { &bl.raw_out });
            for c in output.band_copies(size, geo.rows.clone()) {
                // SAFETY: the band's buffer is the lane's, and the output the slot's, both
                // kept until the frame completes (module doc).
                unsafe { copy_down(s, from, out, c)? };
            }
            return Ok(());
        }
        let stride = size.stride();
        let rows = geo.rows.len() * stride;
        let c = BandCopy {
            src: geo.rows.start * stride,
            src_pitch: rows,
            dst: geo.offset_in_input() * stride,
            dst_pitch: rows,
            width: rows,
            height: 1,
        };
        // SAFETY: as above.
        unsafe { copy_down(s, bytes(&bl.bufs[bl.result]), out, c) }
    }

    /// The bytes of a frame lent on the device by this configuration (its output format at
    /// its output size).
    pub(super) fn lent_bytes(&self) -> usize {
        if let Some((shape, _)) = &self.shape {
            return shape.lookup.bytes(shape.size);
        }
        let out = self.reshape.as_ref().map_or(self.key.size, Reshape::out);
        self.key.formats.output.bytes(out)
    }

    /// Queues every stage of every band of `slot` in `lane`, cut by `plan`, in the
    /// configured issue order.
    fn enqueue_frame(
        &mut self,
        dev: &Device,
        lane: usize,
        plan: Plan,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<()> {
        let bands = self.plans[plan].len();
        let at = |band| Place { lane, plan, band };
        // A chain that changes the size finishes on the whole frame, after every band.
        let stages = match self.reshape {
            Some(_) => &Stage::ALL[..2],
            None => &Stage::ALL[..],
        };
        match dev.settings.issue {
            IssueOrder::Depth => {
                for band in 0..bands {
                    for &stage in stages {
                        self.enqueue(dev, stage, at(band), slot, timed)?;
                    }
                }
            }
            IssueOrder::Breadth => {
                for &stage in stages {
                    for band in 0..bands {
                        self.enqueue(dev, stage, at(band), slot, timed)?;
                    }
                }
            }
        }
        if self.reshape.is_some() {
            self.finish_whole(dev, lane, plan, slot, timed)?;
        }
        Ok(())
    }

    /// Queues the chain's part after the bands on the frame they assembled (`Reshape`),
    /// its download, and then each band's download stage, which marks the bands done: on
    /// the copy-out stream, or the last band's own stream, after every band's filters.
    fn finish_whole(
        &mut self,
        dev: &Device,
        lane: usize,
        plan: Plan,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<()> {
        let bands = self.plans[plan].len();
        let s = self.stream_of(dev, lane, bands - 1, Stage::Download);
        for b in &self.lanes[lane][..bands] {
            s.wait(&b.done.filter)?;
        }
        let reshape = self
            .reshape
            .as_mut()
            .expect("finish_whole: a chain that reshapes");
        reshape.queue(&s, lane, &self.kernels, self.bound.as_ref())?;
        if self.download {
            match &self.shape {
                Some((shape, tables)) => {
                    reshape.lay_out(&s, lane, slot, &self.kernels, (shape, tables))?
                }
                None => {
                    let lent = self.key.formats.output.bytes(reshape.out());
                    reshape.download(&s, lane, slot, lent)?;
                }
            }
        }
        for band in 0..bands {
            let at = Place { lane, plan, band };
            self.enqueue(dev, Stage::Download, at, slot, timed)?;
        }
        Ok(())
    }

    /// The streams a frame cut by `plan` in `lane` uses besides the first stage stream.
    fn other_streams(&self, dev: &Device, lane: usize, plan: Plan) -> Vec<Arc<CudaStream>> {
        match dev.settings.streams {
            StreamLayout::PerStage => dev.stage_streams[1..].to_vec(),
            StreamLayout::PerBand => self.lanes[lane][..self.plans[plan].len()]
                .iter()
                .filter_map(|b| b.stream.clone())
                .collect(),
        }
    }

    /// Records the frame's work (idle plan) into a graph instead of running it: the first
    /// stage stream captures, the other streams fork from it and join back.
    fn capture(
        &mut self,
        dev: &Device,
        lane: usize,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<Graph> {
        let origin = dev.stage_streams[0].clone();
        let others = self.other_streams(dev, lane, Plan::Idle);
        origin.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        self.capturing = true;
        let recorded = self.capture_body(dev, lane, slot, timed, &origin, &others);
        self.capturing = false;
        // The capture is always ended, so that the stream leaves capture mode.
        let graph = origin.end_capture(sys::CUgraphInstantiate_flags(0));
        recorded.context("capturing a frame into a CUDA graph")?;
        let graph = graph
            .context("instantiating a CUDA graph")?
            .context("the captured CUDA graph is empty")?;
        graph.upload()?;
        Ok(Graph(graph))
    }

    /// Inside a capture: forks the other streams from `origin`, queues the frame, and joins
    /// them back (a capture must end on the stream it began on, with every stream joined).
    fn capture_body(
        &mut self,
        dev: &Device,
        lane: usize,
        slot: &mut Slot,
        timed: bool,
        origin: &CudaStream,
        others: &[Arc<CudaStream>],
    ) -> Result<()> {
        let [fork, _] = &dev.capture_events;
        fork.record(origin)?;
        for s in others {
            s.wait(fork)?;
        }
        let queued = self.enqueue_frame(dev, lane, Plan::Idle, slot, timed);
        // Joined back whatever happened, so that every stream leaves the capture with it.
        let [_, join] = &dev.capture_events;
        let joined = others.iter().try_for_each(|s| {
            join.record(s)?;
            origin.wait(join)
        });
        queued.and(joined.map_err(Into::into))
    }

    /// Runs the idle plan's work for `slot` in `lane` as one graph launch, capturing the
    /// graph on first use.
    fn launch_graph(
        &mut self,
        dev: &Device,
        lane: usize,
        slot: &mut Slot,
        timed: bool,
        mosaic: Option<(Area, bool)>,
    ) -> Result<()> {
        let key = (lane, slot.input.as_ptr() as usize, timed, mosaic);
        if !self.graphs.contains_key(&key) {
            match self.capture(dev, lane, slot, timed) {
                Ok(graph) => {
                    self.graphs.insert(key, graph);
                }
                // A graph only saves launches: a capture that fails (another thread's CUDA
                // call broke it) costs this frame nothing but the graph, and a fault of the
                // device shows again as the frame runs without one.
                Err(e) => {
                    crate::warn!(
                        "a CUDA graph capture failed ({e:#}; another thread's CUDA call, such as a decoder closing, can break one): {} frames of {} run without graphs from now on",
                        self.key.size,
                        self.key.formats.input
                    );
                    self.graphs_broken = true;
                    return self.enqueue_frame(dev, lane, Plan::Idle, slot, timed);
                }
            }
        }
        let s = &dev.stage_streams[0];
        self.graphs[&key].0.launch()?;
        // Events recorded inside a capture do not fire on replay: mark the frame done here.
        for b in self.done_events(dev, lane, Plan::Idle) {
            b.done.download.record(s)?;
        }
        Ok(())
    }

    /// The events whose completion means the frame in `lane` is done: the last band's
    /// download when downloads share one stream, else every band's.
    fn done_events(&self, dev: &Device, lane: usize, plan: Plan) -> &[BandLane] {
        let bands = &self.lanes[lane][..self.plans[plan].len()];
        match dev.settings.streams {
            StreamLayout::PerStage => &bands[bands.len() - 1..],
            StreamLayout::PerBand => bands,
        }
    }

    /// Appends a traced frame's spans: each band's H2D, kernels and D2H on its stream's track.
    fn trace_spans(&self, dev: &Device, lane: usize, plan: Plan, slot: &mut Slot) -> Result<()> {
        use crate::trace::{Kind, Span, Track};
        let per_band = self.lanes[lane].len();
        let bands = &self.lanes[lane][..self.plans[plan].len()];
        for (i, b) in bands.iter().enumerate() {
            for (kind, stage) in [
                (Kind::H2d, Stage::Upload),
                (Kind::Kernels, Stage::Filter),
                (Kind::D2h, Stage::Download),
            ] {
                let marks = b.timing.of(stage);
                let track = match dev.settings.streams {
                    StreamLayout::PerStage => Track::Backend(stage as u16),
                    StreamLayout::PerBand => Track::Backend((lane * per_band + i) as u16),
                };
                slot.spans.push(Span {
                    track,
                    kind,
                    input: slot.desc.input.0,
                    frame: slot.seq(),
                    band: Some(i as u16),
                    start: dev.host_time(&marks.start)?,
                    end: dev.host_time(&marks.end)?,
                });
            }
        }
        Ok(())
    }

    /// Device time of each stage of a completed, sampled frame (each band from its
    /// upload's start; with shared streams a stage's time includes waiting for its stream).
    fn stage_times(&self, lane: usize, plan: Plan) -> Result<StageTimes> {
        let bands = &self.lanes[lane][..self.plans[plan].len()];
        let origin = &bands[0].timing.upload.start;
        let mut t = StageTimes::default();
        let (mut first, mut last) = (f64::MAX, f64::MIN);
        for b in bands {
            // Each stage from the end of the one before (so a stage includes its wait).
            let PerStage {
                upload,
                filter,
                download,
            } = &b.timing;
            t.h2d_ms += elapsed_ms(&upload.start, &upload.end)?;
            t.kernel_ms += elapsed_ms(&upload.end, &filter.end)?;
            t.d2h_ms += elapsed_ms(&filter.end, &download.end)?;
            first = first.min(elapsed_ms(origin, &upload.start)?);
            last = last.max(elapsed_ms(origin, &download.end)?);
        }
        t.span_ms = last - first;
        Ok(t)
    }
}
/// Refuses, before anything is allocated, lanes for `cfg` that the device's free memory
/// can't hold (an error, not an abort): each lane's band buffers (`sizes`, with the
/// separable filters' intermediate rows) and its whole-frame steps, times the frames in
/// flight.
fn check_room(dev: &Device, cfg: &BackendConfig, sizes: &BandSizes, separable: bool) -> Result<()> {
    let lane_bytes: u64 = (0..sizes.bands)
        .map(|b| {
            let n = sizes.bgr(b) as u64;
            let raw = (sizes.raw_in(b) + sizes.raw_out(b)) as u64;
            2 * n + 2 * if separable { n } else { 1 } + raw
        })
        .sum();
    let (free, _) = dev
        .ctx
        .mem_get_info()
        .context("reading the device's free memory")?;
    let lane_bytes = lane_bytes + Reshape::bytes(&cfg.chain, cfg.size, cfg.formats.output);
    crate::budget::check_device(
        lane_bytes.saturating_mul(cfg.in_flight.max(1) as u64),
        free as u64,
        &dev.name,
    )?;
    Ok(())
}
