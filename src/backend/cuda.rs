//! The CUDA backend: each frame is cut into bands, each band on its own stream
//! (H2D → filter kernels → D2H), several frames in flight.
//!
//! Invariants:
//! - every (lane, band) pair owns its stream and its two device buffers, so bands and frames
//!   never share device memory and cudarc's per-slice event tracking can stay off;
//! - a submitted slot stays in `pending` until every band's last event has completed, so the
//!   asynchronous copies never outlive the host memory they read or write;
//! - frames complete in submission order; lane `k` is reused only after its frame completed;
//! - ring buffers are page-locked once in `attach` (`cuMemHostRegister`), unlocked on drop.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream};

use super::kernels::Kernels;
use super::{Backend, BackendConfig};
use crate::band::BandPlan;
use crate::filter::Chain;
use crate::frame::FrameSize;
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

/// Keeps a host range page-locked; unregisters it when dropped.
pub struct PinnedRange {
    ptr: *mut u8,
    ctx: Arc<CudaContext>,
}

// SAFETY: the registration is a process-wide property of the pages; unregistering from
// another thread is allowed once the context is bound there.
unsafe impl Send for PinnedRange {}

impl PinnedRange {
    /// Page-locks `len` bytes at `ptr` (page-aligned, owned by the caller for as long as the
    /// returned value lives).
    pub fn register(ctx: &Arc<CudaContext>, ptr: *mut u8, len: usize) -> Result<Self> {
        ctx.bind_to_thread()?;
        // SAFETY: ptr..ptr+len is a live allocation that outlives the returned guard.
        unsafe { sys::cuMemHostRegister_v2(ptr.cast(), len, sys::CU_MEMHOSTREGISTER_PORTABLE) }
            .result()
            .with_context(|| format!("page-locking a {len}-byte frame buffer"))?;
        Ok(Self {
            ptr,
            ctx: ctx.clone(),
        })
    }
}

impl Drop for PinnedRange {
    fn drop(&mut self) {
        let _ = self.ctx.bind_to_thread();
        // SAFETY: ptr was registered by `register` and is unregistered exactly once.
        let _ = unsafe { sys::cuMemHostUnregister(self.ptr.cast()) };
    }
}

/// The device resources of one band of one frame in flight.
struct BandLane {
    stream: Arc<CudaStream>,
    bufs: [CudaSlice<u8>; 2],
    /// Before H2D, after H2D, after kernels, after D2H (the completion event).
    events: [CudaEvent; 4],
}

/// A frame on the GPU.
struct InFlight {
    lane: usize,
    slot: Slot,
    timed: bool,
}

/// Stage timing is sampled on one frame in this many, to keep event traffic low.
const TIME_EVERY: u64 = 4;

pub struct CudaBackend {
    ctx: Arc<CudaContext>,
    kernels: Kernels,
    size: FrameSize,
    chain: Chain,
    plan: BandPlan,
    lanes: Vec<Vec<BandLane>>,
    pending: VecDeque<InFlight>,
    next_lane: usize,
    pageable: bool,
    device: String,
    submitted: u64,
}

impl CudaBackend {
    /// Opens device 0, compiles the kernels and allocates every device buffer.
    pub fn new(cfg: &BackendConfig) -> Result<Self> {
        let ctx = CudaContext::new(0).context("opening CUDA device 0")?;
        // SAFETY: every device buffer below is used only on the stream it was allocated
        // for, and the completion events order the host's reuse of it (module invariants).
        unsafe { ctx.disable_event_tracking() };
        let kernels = Kernels::load(&ctx)?;
        let (major, minor) = ctx.compute_capability()?;
        let device = format!("{} (sm_{major}{minor})", ctx.name()?);
        let band_bytes = cfg.plan.max_input_rows() * cfg.size.stride();
        let mut lanes = Vec::new();
        for _ in 0..cfg.in_flight.max(1) {
            let mut bands = Vec::new();
            for _ in 0..cfg.plan.len() {
                let stream = ctx.new_stream()?;
                let bufs = [
                    stream.alloc_zeros::<u8>(band_bytes)?,
                    stream.alloc_zeros::<u8>(band_bytes)?,
                ];
                let ev = || ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT));
                let events = [ev()?, ev()?, ev()?, ev()?];
                bands.push(BandLane {
                    stream,
                    bufs,
                    events,
                });
            }
            lanes.push(bands);
        }
        ctx.synchronize().context("allocating device buffers")?;
        Ok(Self {
            ctx,
            kernels,
            size: cfg.size,
            chain: cfg.chain.clone(),
            plan: cfg.plan.clone(),
            lanes,
            pending: VecDeque::new(),
            next_lane: 0,
            pageable: cfg.pageable,
            device,
            submitted: 0,
        })
    }

    /// Queues one band of `slot` on its lane's stream.
    fn enqueue_band(
        &mut self,
        lane: usize,
        band: usize,
        slot: &mut Slot,
        timed: bool,
    ) -> Result<()> {
        let geo = &self.plan.bands()[band];
        let stride = self.size.stride();
        let in_bytes = geo.input_rows.len() * stride;
        let in_start = geo.input_rows.start * stride;
        let out_start = geo.rows.start * stride;
        let out_len = geo.rows.len() * stride;
        let out_off = geo.offset_in_input() * stride;
        let bl = &mut self.lanes[lane][band];
        let s = &bl.stream;
        if timed {
            bl.events[0].record(s)?;
        }
        // The slot's buffers are not touched again until events[3] completes (module invariant),
        // so these asynchronous copies never outlive the memory they use.
        s.memcpy_htod(
            &slot.input[in_start..in_start + in_bytes],
            &mut bl.bufs[0].slice_mut(0..in_bytes),
        )?;
        if timed {
            bl.events[1].record(s)?;
        }
        let mut cur = 0;
        for filter in self.chain.filters() {
            let [a, b] = &mut bl.bufs;
            let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
            self.kernels.launch(s, *filter, src, dst, in_bytes)?;
            cur = 1 - cur;
        }
        if timed {
            bl.events[2].record(s)?;
        }
        let result = &bl.bufs[cur];
        s.memcpy_dtoh(
            &result.slice(out_off..out_off + out_len),
            &mut slot.output[out_start..out_start + out_len],
        )?;
        bl.events[3].record(s)?;
        Ok(())
    }

    fn stage_times(&self, lane: usize) -> Result<StageTimes> {
        let bands = &self.lanes[lane];
        let origin = &bands[0].events[0];
        let mut t = StageTimes::default();
        let (mut first, mut last) = (f64::MAX, f64::MIN);
        for b in bands {
            let e = &b.events;
            t.h2d_ms += f64::from(e[0].elapsed_ms(&e[1])?);
            t.kernel_ms += f64::from(e[1].elapsed_ms(&e[2])?);
            t.d2h_ms += f64::from(e[2].elapsed_ms(&e[3])?);
            first = first.min(f64::from(origin.elapsed_ms(&e[0])?));
            last = last.max(f64::from(origin.elapsed_ms(&e[3])?));
        }
        t.span_ms = last - first;
        Ok(t)
    }
}

impl Backend for CudaBackend {
    fn describe(&self) -> String {
        format!(
            "cuda: {}, {} band(s), {} frame(s) in flight, {}",
            self.device,
            self.plan.len(),
            self.lanes.len(),
            if self.pageable {
                "pageable"
            } else {
                "page-locked"
            }
        )
    }

    fn attach(&mut self, buffer: &mut HostBuffer) -> Result<()> {
        if self.pageable {
            buffer.set_lock(None);
        } else if !buffer.is_locked() {
            let (ptr, len) = buffer.allocation();
            buffer.set_lock(Some(Box::new(PinnedRange::register(&self.ctx, ptr, len)?)));
        }
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.lanes.len()
    }

    fn in_flight(&self) -> usize {
        self.pending.len()
    }

    fn submit(&mut self, mut slot: Slot) -> Result<()> {
        anyhow::ensure!(
            self.pending.len() < self.lanes.len(),
            "CUDA backend: too many frames in flight"
        );
        anyhow::ensure!(
            slot.size == self.size,
            "frame size changed from {} to {}",
            self.size,
            slot.size
        );
        slot.stamps.submitted = Instant::now();
        let lane = self.next_lane;
        self.next_lane = (lane + 1) % self.lanes.len();
        let timed = self.submitted.is_multiple_of(TIME_EVERY);
        self.submitted += 1;
        for band in 0..self.plan.len() {
            self.enqueue_band(lane, band, &mut slot, timed)?;
        }
        self.pending.push_back(InFlight { lane, slot, timed });
        Ok(())
    }

    fn complete(&mut self, wait: bool) -> Result<Option<Slot>> {
        let Some(front) = self.pending.front() else {
            return Ok(None);
        };
        for b in &self.lanes[front.lane] {
            if wait {
                b.events[3].synchronize().context("waiting for the GPU")?;
            } else if !b.events[3].try_is_complete().context("polling the GPU")? {
                return Ok(None);
            }
        }
        let done = Instant::now();
        let InFlight {
            lane,
            mut slot,
            timed,
        } = self.pending.pop_front().expect("front exists");
        slot.stamps.done = done;
        slot.gpu = if timed {
            Some(self.stage_times(lane)?)
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
