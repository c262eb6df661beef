//! One CUDA device, opened once: its context, the three stage streams every lane set shares,
//! the events a graph capture forks and joins on, and the clock that turns GPU events into
//! host instants. Also what the rest of framepipe asks of CUDA without a backend: whether
//! it is here (`probe`), a device's name, page-locking a host range (`PinnedRange`), and
//! warming CUDA up while the input opens.
//!
//! Invariants: `probe` never panics and is asked before anything else here; a `Device` is
//! opened once per backend and outlives every lane set made on it (the backend drops its
//! lane sets first and synchronizes the context before it lets go of host memory); cudarc's
//! per-buffer event tracking is off for the whole context (the lane sets order their buffers'
//! uses by their own events, `lanes`); a `PinnedRange` is unregistered before its memory is
//! freed, and `live_registrations` counts the ranges locked now.

use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaStream};

use super::CudaSettings;
use crate::ring::HostBuffer;

/// Why CUDA can't be used here.
#[derive(Clone, Debug, thiserror::Error)]
pub enum NoCuda {
    /// No driver library.
    #[error("the NVIDIA driver library libcuda was not found")]
    NoDriver,
    /// No runtime compiler library.
    #[error("the CUDA runtime compiler library libnvrtc was not found")]
    NoNvrtc,
    /// The driver sees no device.
    #[error("no CUDA device was found")]
    NoDevice,
    /// The driver did not start (its error).
    #[error("the CUDA driver did not start: {0}")]
    DriverFailed(String),
    /// The plan did not need to know, so the machine was not asked (`plan::Machine`).
    #[error("not asked")]
    NotAsked,
}

/// Whether CUDA can be used here; the reason when not. Never panics.
pub fn probe() -> Result<(), NoCuda> {
    // SAFETY: only tries to load the shared library.
    if !unsafe { sys::is_culib_present() } {
        return Err(NoCuda::NoDriver);
    }
    // SAFETY: as above.
    if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
        return Err(NoCuda::NoNvrtc);
    }
    match CudaContext::device_count() {
        Ok(0) => Err(NoCuda::NoDevice),
        Ok(_) => Ok(()),
        Err(e) => Err(NoCuda::DriverFailed(e.to_string())),
    }
}

/// The device the bench, doctor and the bound measurement use.
pub const DEFAULT_DEVICE: usize = 0;

/// Opens CUDA device `device` (its primary context), after `probe` passed.
pub fn open_device(device: usize) -> Result<Arc<CudaContext>> {
    let ctx = CudaContext::new(device).with_context(|| format!("opening CUDA device {device}"))?;
    super::teardown::note_cuda();
    Ok(ctx)
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
pub(super) fn elapsed_ms(a: &CudaEvent, b: &CudaEvent) -> Result<f64> {
    // SAFETY: both events belong to one context, were recorded, and have completed (callers
    // only ask about finished frames and the calibration event).
    let ms = unsafe { cudarc::driver::result::event::elapsed(a.cu_event(), b.cu_event()) }?;
    Ok(f64::from(ms))
}

/// Records a timing event on `s`; inside a capture as an event node, which fires on every
/// replay of the graph.
pub(super) fn mark(e: &CudaEvent, s: &CudaStream, in_capture: bool) -> Result<()> {
    if in_capture {
        let external = sys::CUevent_record_flags_enum::CU_EVENT_RECORD_EXTERNAL as u32;
        // SAFETY: the event and the stream are live and belong to the current context.
        unsafe { sys::cuEventRecordWithFlags(e.cu_event(), s.cu_stream(), external) }.result()?;
    } else {
        e.record(s)?;
    }
    Ok(())
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

/// One opened CUDA device (module doc): what every lane set on it shares.
pub(super) struct Device {
    pub(super) ctx: Arc<CudaContext>,
    /// "NVIDIA H200 (sm_90)".
    pub(super) name: String,
    /// How lane sets on it lay out streams, order their work and use graphs.
    pub(super) settings: CudaSettings,
    /// Copy-in, compute and copy-out streams (`per-stage` layout); the first also captures
    /// and launches graphs, so that frames queued behind a graph finish after it.
    pub(super) stage_streams: [Arc<CudaStream>; 3],
    /// Fork and join points of a capture.
    pub(super) capture_events: [CudaEvent; 2],
    /// A completed event and the host instant it was seen complete: GPU time → host time.
    calibration: (CudaEvent, Instant),
}

impl Device {
    /// Opens device `settings.device` and makes its streams and events.
    pub(super) fn open(settings: CudaSettings) -> Result<Self> {
        let ctx = open_device(settings.device)?;
        // SAFETY: with tracking off, cudarc no longer orders a buffer's uses across streams,
        // so the lane sets do (`lanes` module doc): every device buffer of a lane set is
        // allocated before its first frame and the streams that allocated it are
        // synchronized after the allocations (`LaneSet::new`); a band's buffers move from the
        // copy-in to the compute to the copy-out stream only behind the events each stage
        // records (the per-band stream layout keeps a band on one stream); and a lane is
        // reused, or dropped, only after its frame's last event completed (the backend drops
        // lane sets only with no frame of theirs in flight, and synchronizes its own streams
        // in its `Drop`).
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability()?;
        let name = format!("{} (sm_{major}{minor})", ctx.name()?);
        let stage_streams = if settings.priorities {
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
        let capture_events = [sync_event()?, sync_event()?];
        let calibration = {
            let e = ctx.new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?;
            e.record(&stage_streams[0])?;
            e.synchronize()?;
            (e, Instant::now())
        };
        Ok(Self {
            ctx,
            name,
            settings,
            stage_streams,
            capture_events,
            calibration,
        })
    }

    /// An ordering event (no timing: the lightest kind).
    pub(super) fn sync_event(&self) -> Result<CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING))?)
    }

    /// A timing event.
    pub(super) fn timing_event(&self) -> Result<CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// The host instant of a completed event.
    pub(super) fn host_time(&self, e: &CudaEvent) -> Result<Instant> {
        let (origin, at) = &self.calibration;
        let ms = elapsed_ms(origin, e)?;
        Ok(*at + std::time::Duration::from_secs_f64(ms.max(0.0) / 1e3))
    }
}
