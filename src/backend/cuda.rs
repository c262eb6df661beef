//! The CUDA backend: each frame is cut into bands (H2D → filter kernels → D2H), several
//! frames in flight.
//!
//! Two stream layouts (`StreamLayout`): `per-band` gives every (frame in flight, band) pair
//! its own stream; `per-stage` queues every band's upload on one copy-in stream, kernels on
//! one compute stream and downloads on one copy-out stream, ordered per band by events, so
//! that the upload of band k+1 overlaps the kernels and download of band k.
//!
//! Pixel formats: a band of a YUV frame is uploaded plane by plane into its raw buffer
//! (laid out as a frame of the band's rows), converted to BGR by `fp_to_bgr`, filtered, and
//! its own rows converted by `fp_from_bgr` into a second raw buffer that is downloaded plane
//! by plane (`kernels/convert.cu`); BGR skips either conversion, and a chain that changes
//! nothing between one format copies the planes up and back down.
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
//! - a submitted slot stays in `pending` until its frame's downloads have completed, so the
//!   asynchronous copies never outlive the host memory they read or write;
//! - frames complete in submission order; lane `k` is reused only after its frame completed;
//! - ring buffers are page-locked once in `attach` (`cuMemHostRegister`), unlocked on drop;
//! - a frame that finds the GPU idle (none pending) for longer than the last frame took is
//!   cut by the idle plan, any other by the busy plan;
//! - a frame cut by the idle plan (none pending, so every stream is idle) may replay a
//!   CUDA graph captured from the same calls, launched on the copy-in stream so that frames
//!   queued behind it finish after it; graphs are keyed by (lane, slot, timed) and dropped
//!   when page-locking changes.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use cudarc::driver::{
    sys, CudaContext, CudaEvent, CudaGraph, CudaSlice, CudaStream, DevicePtr, DevicePtrMut,
};

use super::kernels::ChainKernels;
use super::{Backend, BackendConfig, Control, IssueOrder, StreamLayout};
use crate::band::BandPlan;
use crate::filter::reference::View;
use crate::filter::{Chain, Filter};
use crate::frame::FrameSize;
use crate::pixel::{Formats, PixelFormat};
use crate::ring::{HostBuffer, Slot};
use crate::stats::StageTimes;

/// Whether CUDA can be used here; the reason when not. Never panics.
pub fn probe() -> Result<(), String> {
    // SAFETY: only tries to load the shared library.
    if !unsafe { sys::is_culib_present() } {
        return Err("the NVIDIA driver library libcuda was not found".into());
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err("the CUDA runtime compiler library libnvrtc was not found".into());
    }
    match CudaContext::device_count() {
        Ok(0) => Err("no CUDA device was found".into()),
        Ok(_) => Ok(()),
        Err(e) => Err(format!("the CUDA driver did not start: {e}")),
    }
}

/// The device the bench, doctor and the bound measurement use.
pub const DEFAULT_DEVICE: usize = 0;

/// Opens CUDA device `device` (its primary context), after `probe` passed.
pub fn open_device(device: usize) -> Result<Arc<CudaContext>> {
    CudaContext::new(device).with_context(|| format!("opening CUDA device {device}"))
}

/// "NVIDIA H200 (sm_90)" for device `device`.
pub fn device_name(device: usize) -> Result<String> {
    let ctx = open_device(device)?;
    let (major, minor) = ctx.compute_capability()?;
    Ok(format!("{} (sm_{major}{minor})", ctx.name()?))
}

/// Starts CUDA on a helper thread, so that it overlaps the input's opening (a camera or a
/// pipe's first frame): device `device`'s context and the built-in kernels' compilation
/// (NVRTC's cache keeps them). The context it returns is to be held until the backend
/// exists, so that the primary context stays alive. None where CUDA is missing.
pub fn warm_up(device: usize) -> std::thread::JoinHandle<Option<Arc<CudaContext>>> {
    std::thread::spawn(move || {
        probe().ok()?;
        let ctx = open_device(device).ok()?;
        let arch = super::kernels::arch(&ctx).ok()?;
        super::kernels::compiled(&arch).ok()?;
        Some(ctx)
    })
}

/// Milliseconds from `a` to `b`, two recorded events that have completed.
fn elapsed_ms(a: &CudaEvent, b: &CudaEvent) -> Result<f64> {
    // SAFETY: both events belong to one context, were recorded, and have completed (callers
    // only ask about finished frames and the calibration event).
    let ms = unsafe { cudarc::driver::result::event::elapsed(a.cu_event(), b.cu_event()) }?;
    Ok(f64::from(ms))
}

/// Records a timing event on `s`; inside a capture as an event node, which fires on every
/// replay of the graph.
fn mark(e: &CudaEvent, s: &CudaStream, in_capture: bool) -> Result<()> {
    if in_capture {
        let external = sys::CUevent_record_flags_enum::CU_EVENT_RECORD_EXTERNAL as u32;
        // SAFETY: the event and the stream are live and belong to the current context.
        unsafe { sys::cuEventRecordWithFlags(e.cu_event(), s.cu_stream(), external) }.result()?;
    } else {
        e.record(s)?;
    }
    Ok(())
}

/// Whether a frame submitted at `now` gets the idle plan: nothing is pending and the GPU has
/// been idle for longer than the last frame took (`last_done`: when it was seen done, and its
/// submit → done time), or no frame came before it.
fn finds_gpu_idle(
    pending: usize,
    last_done: Option<(Instant, std::time::Duration)>,
    now: Instant,
) -> bool {
    pending == 0 && last_done.is_none_or(|(at, took)| now.saturating_duration_since(at) > took)
}

/// Keeps a host range page-locked; unregisters it when dropped.
pub struct PinnedRange {
    ptr: *mut u8,
    ctx: Arc<CudaContext>,
}

// SAFETY: the registration is a process-wide property of the pages; unregistering from
// another thread is allowed once the context is bound there.
unsafe impl Send for PinnedRange {}

impl PinnedRange {
    /// Page-locks `len` bytes at `ptr` until the returned value is dropped.
    ///
    /// # Safety
    ///
    /// - `ptr..ptr + len` is one live, page-aligned allocation of the caller's;
    /// - it stays allocated until the returned `PinnedRange` is dropped (dropping unregisters
    ///   the pages; unregistering freed memory is undefined behaviour in the driver);
    /// - no other registration covers any of its pages.
    pub unsafe fn register(ctx: &Arc<CudaContext>, ptr: *mut u8, len: usize) -> Result<Self> {
        ctx.bind_to_thread()?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        // SAFETY: the caller guarantees the range is live, page-aligned and not registered.
        unsafe { sys::cuMemHostRegister_v2(ptr.cast(), len, flags) }
            .result()
            .with_context(|| format!("page-locking a {len}-byte frame buffer"))?;
        REGISTRATIONS.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(Self {
            ptr,
            ctx: ctx.clone(),
        })
    }
}

impl PinnedRange {
    /// Page-locks a ring buffer for as long as it lives (or until its lock is replaced).
    pub fn lock(ctx: &Arc<CudaContext>, buffer: &mut HostBuffer) -> Result<()> {
        let (ptr, len) = buffer.allocation();
        buffer.set_lock(None); // a previous registration of these pages goes first
                               // SAFETY: `allocation` is the buffer's whole page-aligned allocation; the lock is
                               // stored in the buffer, which drops it before freeing the memory (`HostBuffer::drop`),
                               // and the line above released any earlier registration of it.
        let range = unsafe { Self::register(ctx, ptr, len)? };
        buffer.set_lock(Some(Box::new(range)));
        Ok(())
    }
}

/// The device address of page-locked host memory at `ptr` (registered by `PinnedRange`, so
/// mapped into the device's address space): kernels read and write it over PCIe.
pub fn mapped(ptr: *const u8) -> Result<u64> {
    let mut dptr: sys::CUdeviceptr = 0;
    // SAFETY: writes one device address; `ptr` lies in a registered range (callers).
    unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dptr, ptr.cast_mut().cast(), 0) }
        .result()
        .context("mapping page-locked host memory into the device's address space")?;
    Ok(dptr)
}

impl Drop for PinnedRange {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr was registered by `register` and is unregistered exactly once.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr.cast()) };
        REGISTRATIONS.fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
    }
}

static REGISTRATIONS: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// Host ranges page-locked by this process right now (soak tests watch it for leaks).
pub fn live_registrations() -> i64 {
    REGISTRATIONS.load(std::sync::atomic::Ordering::SeqCst)
}

/// Which of the backend's two band plans cuts a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
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

/// A frame on the GPU.
struct InFlight {
    lane: usize,
    /// Which of the backend's band plans it was cut with.
    plan: Plan,
    /// Its spans go into the trace.
    traced: bool,
    slot: Slot,
    timed: bool,
}

/// A captured frame: the idle plan's bands of one lane, reading and writing one slot.
struct Graph(CudaGraph);

// SAFETY: a graph is not safe for concurrent use, and it never is: it is used only by the
// backend that owns it, which one thread at a time holds (`Backend: Send`, not `Sync`).
unsafe impl Send for Graph {}

/// The CUDA backend: banded frames on streams, several frames in flight (module doc).
pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    kernels: ChainKernels,
    /// Band plans for a frame that finds the GPU idle (latency) and one submitted behind
    /// others (throughput).
    plans: Plans,
    lanes: Vec<Vec<BandLane>>,
    pending: VecDeque<InFlight>,
    next_lane: usize,
    /// Copy-in, compute and copy-out streams (`per-stage` layout); the first also captures
    /// and launches graphs, so that frames queued behind a graph finish after it.
    stage_streams: [Arc<CudaStream>; 3],
    /// When the last frame was seen done, and its submit → done time: a frame that finds
    /// the GPU idle for longer than that comes from a source slower than the pipeline.
    last_done: Option<(Instant, std::time::Duration)>,
    /// Captured graphs by (lane, address of the slot's input buffer, timed).
    graphs: HashMap<(usize, usize, bool), Graph>,
    /// A capture is being recorded: timing events become graph nodes.
    capturing: bool,
    /// Fork and join points of a capture.
    capture_events: [CudaEvent; 2],
    device: String,
    submitted: u64,
    /// A completed event and the host instant it was seen complete: GPU time → host time.
    calibration: (CudaEvent, Instant),
    /// What it was built from (size, formats, chain, layout, issue order, page-locking,
    /// tracing); rebuilt from on a `Control`.
    cfg: BackendConfig,
    /// Which buffers a band goes through, from `cfg.formats` and `cfg.chain`.
    route: Route,
}

/// Which buffers a band goes through, decided once per configuration.
#[derive(Clone, Copy)]
struct Route {
    /// Frames pass untouched (`Formats::passthrough`): bands are copied up and back down.
    through: bool,
    /// Bands are uploaded into `raw_in` (a format other than BGR, or a frame passed through
    /// untouched) rather than straight into the first BGR buffer.
    raw_in: bool,
    /// Bands are converted into `raw_out` before their download.
    raw_out: bool,
}

impl Route {
    fn of(cfg: &BackendConfig) -> Self {
        let through = cfg.formats.passthrough(cfg.chain.is_identity());
        Self {
            through,
            raw_in: cfg.formats.input != PixelFormat::Bgr24 || through,
            raw_out: cfg.formats.output != PixelFormat::Bgr24 && !through,
        }
    }
}

impl CudaBackend {
    /// Opens `cfg.cuda.device`, compiles the kernels and allocates every device buffer.
    pub fn new(cfg: &BackendConfig) -> Result<Self> {
        let ctx = open_device(cfg.cuda.device)?;
        // SAFETY: with tracking off, cudarc no longer orders a buffer's uses across streams,
        // so this backend does: every device buffer is allocated before any work and the
        // context is synchronized once after the allocations; a band's buffers move from the
        // copy-in to the compute to the copy-out stream only behind the events each stage
        // records (the per-band stream layout keeps a band on one stream); and a lane is
        // reused, or dropped with the backend, only after its frame's last event completed
        // (`Drop` synchronizes the context).
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability()?;
        let device = format!("{} (sm_{major}{minor})", ctx.name()?);
        let plans = Plans {
            idle: cfg.plan.clone(),
            busy: cfg.busy_plan.clone(),
        };
        let band_count = plans.idle.len().max(plans.busy.len());
        // Band i's buffers hold the largest band i of either plan.
        let most_rows = |i: usize, own: bool| {
            let rows = [&plans.idle, &plans.busy]
                .into_iter()
                .filter_map(|p| p.bands().get(i))
                .map(|b| {
                    if own {
                        b.rows.len()
                    } else {
                        b.input_rows.len()
                    }
                })
                .max();
            rows.unwrap_or(1)
        };
        let band_bytes = |i: usize| most_rows(i, false) * cfg.size.stride();
        let Formats { input, output } = cfg.formats;
        let width = cfg.size.width;
        let route = Route::of(cfg);
        let raw_in_bytes = |i: usize| match route.raw_in {
            true => input.bytes(FrameSize::new(width, most_rows(i, false))),
            false => 1,
        };
        let raw_out_bytes = |i: usize| match route.raw_out {
            true => output.bytes(FrameSize::new(width, most_rows(i, true))),
            false => 1,
        };
        let stage_streams = if cfg.cuda.priorities {
            // Lower numbers run first: downloads (frames about to finish), then kernels,
            // then uploads.
            let (low, high) = cudarc::driver::result::stream::get_priority_range()?;
            let mid = (low + high) / 2;
            [
                ctx.new_stream_with_priority(low)?,
                ctx.new_stream_with_priority(mid)?,
                ctx.new_stream_with_priority(high)?,
            ]
        } else {
            [ctx.new_stream()?, ctx.new_stream()?, ctx.new_stream()?]
        };
        let sync_event = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING));
        let kernels = ChainKernels::new(&ctx, &stage_streams[0], &cfg.chain)?;
        let separable = cfg
            .chain
            .filters()
            .iter()
            .any(|f| matches!(f, Filter::Box { .. } | Filter::Gauss { .. }));
        // Refuse before allocating what the device can't hold (an error, not an abort).
        let lane_bytes: u64 = (0..band_count)
            .map(|b| {
                let n = band_bytes(b) as u64;
                let raw = (raw_in_bytes(b) + raw_out_bytes(b)) as u64;
                2 * n + 2 * if separable { n } else { 1 } + raw
            })
            .sum();
        let (free, _) = ctx
            .mem_get_info()
            .context("reading the device's free memory")?;
        crate::budget::check_device(
            lane_bytes.saturating_mul(cfg.in_flight.max(1) as u64),
            free as u64,
            &device,
        )
        .map_err(anyhow::Error::msg)?;
        let mut lanes = Vec::new();
        for _ in 0..cfg.in_flight.max(1) {
            let mut bands = Vec::new();
            for band in 0..band_count {
                let stream = match cfg.cuda.streams {
                    StreamLayout::PerBand => Some(ctx.new_stream()?),
                    StreamLayout::PerStage => None,
                };
                let alloc_on = stream.as_ref().unwrap_or(&stage_streams[0]);
                let bufs = [
                    alloc_on.alloc_zeros::<u8>(band_bytes(band))?,
                    alloc_on.alloc_zeros::<u8>(band_bytes(band))?,
                ];
                let tmp =
                    alloc_on.alloc_zeros::<u16>(if separable { band_bytes(band) } else { 1 })?;
                let raw_in = alloc_on.alloc_zeros::<u8>(raw_in_bytes(band))?;
                let raw_out = alloc_on.alloc_zeros::<u8>(raw_out_bytes(band))?;
                let ev = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
                let timing = PerStage::new(|| {
                    Ok(Marks {
                        start: ev()?,
                        end: ev()?,
                    })
                })?;
                let done = PerStage::new(|| Ok(sync_event()?))?;
                bands.push(BandLane {
                    stream,
                    bufs,
                    raw_in,
                    raw_out,
                    tmp,
                    result: 0,
                    done,
                    timing,
                });
            }
            lanes.push(bands);
        }
        ctx.synchronize().context("allocating device buffers")?;
        let calibration = {
            let e = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            e.record(&stage_streams[0])?;
            e.synchronize()?;
            (e, Instant::now())
        };
        let capture_events = [sync_event()?, sync_event()?];
        Ok(Self {
            ctx,
            kernels,
            plans,
            lanes,
            pending: VecDeque::new(),
            next_lane: 0,
            stage_streams,
            last_done: None,
            graphs: HashMap::new(),
            capturing: false,
            capture_events,
            device,
            submitted: 0,
            calibration,
            cfg: cfg.clone(),
            route,
        })
    }

    /// Queues one stage of one band of `slot` in `lane`.
    fn enqueue(&mut self, stage: Stage, at: Place, slot: &mut Slot, timed: bool) -> Result<()> {
        let Place { lane, plan, band } = at;
        let geo = &self.plans[plan].bands()[band];
        let stride = self.cfg.size.stride();
        let in_bytes = geo.input_rows.len() * stride;
        let per_stage = self.cfg.cuda.streams == StreamLayout::PerStage;
        let capturing = self.capturing;
        let bl = &mut self.lanes[lane][band];
        let s = match &bl.stream {
            Some(own) => own,
            None => &self.stage_streams[stage as usize],
        };
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
        let size = self.cfg.size;
        let Formats { input, output } = self.cfg.formats;
        let Route {
            through,
            raw_in,
            raw_out,
        } = self.route;
        match stage {
            Stage::Upload if raw_in => {
                for (frame, band) in input.band_planes(size, geo.input_rows.clone()) {
                    s.memcpy_htod(&slot.input[frame], &mut bl.raw_in.slice_mut(band))?;
                }
            }
            Stage::Upload => {
                let from = geo.input_rows.start * stride;
                s.memcpy_htod(
                    &slot.input[from..from + in_bytes],
                    &mut bl.bufs[0].slice_mut(0..in_bytes),
                )?;
            }
            Stage::Filter if through => {} // the planes go back as they came
            Stage::Filter => {
                let (w, rows) = (size.width, geo.input_rows.len());
                if raw_in {
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
                bl.result = self.kernels.enqueue(s, &mut bl.bufs, &mut bl.tmp, view)?;
                if raw_out {
                    let off = (geo.offset_in_input() * stride) as u64;
                    let (src, _) = bl.bufs[bl.result].device_ptr(s);
                    let (dst, _) = bl.raw_out.device_ptr_mut(s);
                    let own = geo.rows.len();
                    self.kernels
                        .convert_out(s, src + off, dst, w, own, output)?;
                }
            }
            Stage::Download if through || raw_out => {
                // Passing through, a band reads no halo: its input rows are its own.
                let from = if through { &bl.raw_in } else { &bl.raw_out };
                for (frame, band) in output.band_planes(size, geo.rows.clone()) {
                    s.memcpy_dtoh(&from.slice(band), &mut slot.output[frame])?;
                }
            }
            Stage::Download => {
                let out_start = geo.rows.start * stride;
                let out_len = geo.rows.len() * stride;
                let off = geo.offset_in_input() * stride;
                s.memcpy_dtoh(
                    &bl.bufs[bl.result].slice(off..off + out_len),
                    &mut slot.output[out_start..out_start + out_len],
                )?;
            }
        }
        if timed {
            mark(&bl.timing.of(stage).end, s, capturing)?;
        }
        // The download's event marks the band done, whatever the layout.
        if per_stage || matches!(stage, Stage::Download) {
            bl.done.of(stage).record(s)?;
        }
        Ok(())
    }

    /// Queues every stage of every band of `slot` in `lane`, cut by `plan`, in the
    /// configured issue order.
    fn enqueue_frame(
        &mut self,
        lane: usize,
        plan: Plan,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<()> {
        let bands = self.plans[plan].len();
        let at = |band| Place { lane, plan, band };
        match self.cfg.cuda.issue {
            IssueOrder::Depth => {
                for band in 0..bands {
                    for stage in Stage::ALL {
                        self.enqueue(stage, at(band), slot, timed)?;
                    }
                }
            }
            IssueOrder::Breadth => {
                for stage in Stage::ALL {
                    for band in 0..bands {
                        self.enqueue(stage, at(band), slot, timed)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The streams a frame cut by `plan` in `lane` uses besides the first stage stream.
    fn other_streams(&self, lane: usize, plan: Plan) -> Vec<Arc<CudaStream>> {
        match self.cfg.cuda.streams {
            StreamLayout::PerStage => self.stage_streams[1..].to_vec(),
            StreamLayout::PerBand => self.lanes[lane][..self.plans[plan].len()]
                .iter()
                .filter_map(|b| b.stream.clone())
                .collect(),
        }
    }

    /// Records the frame's work (idle plan) into a graph instead of running it: the first
    /// stage stream captures, the other streams fork from it and join back.
    fn capture(&mut self, lane: usize, slot: &mut Slot, timed: bool) -> Result<Graph> {
        let origin = self.stage_streams[0].clone();
        let others = self.other_streams(lane, Plan::Idle);
        origin.begin_capture(sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)?;
        self.capturing = true;
        let recorded = self.capture_body(lane, slot, timed, &origin, &others);
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
        lane: usize,
        slot: &mut Slot,
        timed: bool,
        origin: &CudaStream,
        others: &[Arc<CudaStream>],
    ) -> Result<()> {
        let [fork, _] = &self.capture_events;
        fork.record(origin)?;
        for s in others {
            s.wait(fork)?;
        }
        self.enqueue_frame(lane, Plan::Idle, slot, timed)?;
        let [_, join] = &self.capture_events;
        for s in others {
            join.record(s)?;
            origin.wait(join)?;
        }
        Ok(())
    }

    /// Runs the idle plan's work for `slot` in `lane` as one graph launch, capturing the
    /// graph on first use.
    fn launch_graph(&mut self, lane: usize, slot: &mut Slot, timed: bool) -> Result<()> {
        let key = (lane, slot.input.as_ptr() as usize, timed);
        if !self.graphs.contains_key(&key) {
            let graph = self.capture(lane, slot, timed)?;
            self.graphs.insert(key, graph);
        }
        let s = &self.stage_streams[0];
        self.graphs[&key].0.launch()?;
        // Events recorded inside a capture do not fire on replay: mark the frame done here.
        for b in self.done_events(lane, Plan::Idle) {
            b.done.download.record(s)?;
        }
        Ok(())
    }

    /// The events whose completion means the frame in `lane` is done: the last band's
    /// download when downloads share one stream, else every band's.
    fn done_events(&self, lane: usize, plan: Plan) -> &[BandLane] {
        let bands = &self.lanes[lane][..self.plans[plan].len()];
        match self.cfg.cuda.streams {
            StreamLayout::PerStage => &bands[bands.len() - 1..],
            StreamLayout::PerBand => bands,
        }
    }

    /// The host instant of a completed event.
    fn host_time(&self, e: &CudaEvent) -> Result<Instant> {
        let (origin, at) = &self.calibration;
        let ms = elapsed_ms(origin, e)?;
        Ok(*at + std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3))
    }

    /// Appends a traced frame's spans: each band's H2D, kernels and D2H on its stream's track.
    fn trace_spans(&self, lane: usize, plan: Plan, slot: &mut Slot) -> Result<()> {
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
                let track = match self.cfg.cuda.streams {
                    StreamLayout::PerStage => Track::Backend(stage as u16),
                    StreamLayout::PerBand => Track::Backend((lane * per_band + i) as u16),
                };
                slot.spans.push(Span {
                    track,
                    kind,
                    frame: slot.seq,
                    band: Some(i as u16),
                    start: self.host_time(&marks.start)?,
                    end: self.host_time(&marks.end)?,
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

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        format!(
            "cuda: {}; filter {}; {}; {} band(s) ({} behind other frames), {} frame(s) in flight, {} streams, {}",
            self.device,
            self.cfg.chain,
            self.cfg.formats,
            self.plans[Plan::Idle].len(),
            self.plans[Plan::Busy].len(),
            self.lanes.len(),
            self.cfg.cuda.streams,
            match (self.cfg.pageable, self.cfg.cuda.graphs) {
                (true, _) => "pageable",
                (false, true) => "page-locked, graphs for frames that find the GPU idle",
                (false, false) => "page-locked",
            }
        )
    }

    fn formats(&self) -> Formats {
        self.cfg.formats
    }

    fn attach(&mut self, buffer: &mut HostBuffer) -> Result<()> {
        if self.cfg.pageable {
            buffer.set_lock(None);
        } else if !buffer.is_locked() {
            PinnedRange::lock(&self.ctx, buffer)?;
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.lanes.len()
    }

    fn tracks(&self) -> Vec<String> {
        match self.cfg.cuda.streams {
            StreamLayout::PerStage => [
                "copy-in stream (H2D)",
                "compute stream",
                "copy-out stream (D2H)",
            ]
            .map(String::from)
            .to_vec(),
            StreamLayout::PerBand => self
                .lanes
                .iter()
                .enumerate()
                .flat_map(|(l, bands)| {
                    (0..bands.len()).map(move |b| format!("stream: lane {l}, band {b}"))
                })
                .collect(),
        }
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn submit(&mut self, slot: Slot) -> Result<()> {
        self.submit_frame(slot).map_err(|e| self.blame(e))
    }

    fn control(&mut self, control: &Control) -> Result<()> {
        self.apply(control)
    }

    fn complete(&mut self, wait: bool) -> Result<Option<Slot>> {
        self.complete_frame(wait).map_err(|e| self.blame(e))
    }
}

impl CudaBackend {
    /// Names the chain's user kernels in a device error: after a fault the device reports
    /// it on whatever call comes next, and a user kernel is the likely cause.
    fn blame(&self, e: anyhow::Error) -> anyhow::Error {
        let users: Vec<String> = self
            .cfg
            .chain
            .user_kernels()
            .map(|k| format!("'{}' ({})", k.function, k.file()))
            .collect();
        if users.is_empty() {
            e
        } else {
            e.context(format!(
                "the GPU failed while running the user kernel {}",
                users.join(", ")
            ))
        }
    }

    fn submit_frame(&mut self, mut slot: Slot) -> Result<()> {
        anyhow::ensure!(
            self.pending.len() < self.lanes.len(),
            "CUDA backend: too many frames in flight"
        );
        anyhow::ensure!(
            slot.size == self.cfg.size,
            "frame size changed from {} to {}",
            self.cfg.size,
            slot.size
        );
        slot.stamps.submitted = Instant::now();
        // Page-lock (or unlock, after `p`) lazily: a no-op unless the mode changed.
        for buf in slot.buffers_mut() {
            self.attach(buf)?;
        }
        let lane = self.next_lane;
        self.next_lane = (lane + 1) % self.lanes.len();
        let traced = slot.seq < self.cfg.trace_frames || self.cfg.rolling.traces(slot.seq);
        let every = self.cfg.sample_every;
        let timed = traced || (every > 0 && self.submitted.is_multiple_of(every));
        self.submitted += 1;
        // A frame that finds the GPU idle, and idle for longer than a frame takes (a source
        // slower than the pipeline), is cut finely so that its copies overlap each other and
        // it is ready soonest. Any other frame uses the busy plan (fewer bands, less overhead
        // per frame): overlap with its neighbours hides its copies, and a stream that drains
        // for a moment does not switch to the slower plan.
        let idle = finds_gpu_idle(self.pending.len(), self.last_done, slot.stamps.submitted);
        let plan = if idle { Plan::Idle } else { Plan::Busy };
        // A frame alone on the GPU is replayed as a graph: one launch instead of a few calls
        // per band. (Graphs of timed frames hold their timing events as nodes.)
        if self.cfg.cuda.graphs && plan == Plan::Idle && !self.cfg.pageable {
            self.launch_graph(lane, &mut slot, timed)?;
        } else {
            self.enqueue_frame(lane, plan, &mut slot, timed)?;
        }
        self.pending.push_back(InFlight {
            lane,
            plan,
            slot,
            timed,
            traced,
        });
        Ok(())
    }

    fn apply(&mut self, control: &Control) -> Result<()> {
        anyhow::ensure!(
            self.pending.is_empty(),
            "internal: control with frames in flight"
        );
        let mut cfg = self.cfg.clone();
        let height = cfg.size.height;
        let base = self.cfg.clone();
        let cut = |bands: usize, chain: &Chain| {
            base.cut(bands, chain)
                .map_err(|e| anyhow::anyhow!("{bands} bands: {e}"))
        };
        match control {
            // Buffers are (un)locked lazily as they next pass `submit`.
            Control::Pageable(p) => {
                self.cfg.pageable = *p;
                // Graphs name host buffers whose page-locking is about to change.
                self.graphs.clear();
                return Ok(());
            }
            Control::Chain(chain) => {
                cfg.plan = cut(cfg.plan.len(), chain)?;
                cfg.busy_plan = cut(cfg.busy_plan.len(), chain)?;
                cfg.chain = chain.clone();
            }
            Control::Bands(n) => cfg.plan = cut((*n).clamp(1, height), &cfg.chain)?,
        }
        cfg.trace_frames = 0;
        *self = CudaBackend::new(&cfg)?;
        Ok(())
    }

    fn complete_frame(&mut self, wait: bool) -> Result<Option<Slot>> {
        let Some(front) = self.pending.front() else {
            return Ok(None);
        };
        for b in self.done_events(front.lane, front.plan) {
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
                return Ok(None);
            }
        }
        let done = Instant::now();
        let InFlight {
            lane,
            plan,
            mut slot,
            timed,
            traced,
        } = self.pending.pop_front().expect("front exists");
        slot.stamps.done = done;
        self.last_done = Some((done, done.saturating_duration_since(slot.stamps.submitted)));
        slot.spans.clear();
        if traced {
            self.trace_spans(lane, plan, &mut slot)?;
        }
        slot.gpu = if timed {
            Some(self.stage_times(lane, plan)?)
        } else {
            None
        };
        Ok(Some(slot))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Copies in flight must finish before the slots in `pending` free their memory.
        let _ = self.ctx.synchronize();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn idle_plan_only_for_a_source_slower_than_the_pipeline() {
        let t0 = Instant::now();
        let took = Duration::from_micros(200);
        let at = |us| t0 + Duration::from_micros(us);
        // The first frame, and a frame after a pause longer than a frame takes (a live source).
        assert!(finds_gpu_idle(0, None, t0));
        assert!(finds_gpu_idle(0, Some((t0, took)), at(16_000)));
        // A steady stream that drained for a moment, and a frame behind others.
        assert!(!finds_gpu_idle(0, Some((t0, took)), at(50)));
        assert!(!finds_gpu_idle(0, Some((t0, took)), at(200)));
        assert!(!finds_gpu_idle(2, Some((t0, took)), at(16_000)));
        assert!(!finds_gpu_idle(1, None, t0));
    }
}
