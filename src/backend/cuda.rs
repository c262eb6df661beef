//! The CUDA backend: each frame is cut into bands (H2D → filter kernels → D2H), several
//! frames in flight, on one `Device` with one `LaneSet` per frame configuration.
//!
//! Two stream layouts (`StreamLayout`): `per-band` gives every (frame in flight, band) pair
//! its own stream; `per-stage` queues every band's upload on one copy-in stream, kernels on
//! one compute stream and downloads on one copy-out stream, ordered per band by events, so
//! that the upload of band k+1 overlaps the kernels and download of band k.
//!
//! Where things are: `device` opens the GPU once (context, stage streams, the clock);
//! `lanes` holds a configuration's band plans, device buffers and graphs and queues a
//! frame's bands; `compose` holds the mosaic of several inputs where the run shows one
//! (each frame scaled into its tile by its bands, the picture brought down a few times a
//! second); this file picks a frame's lane set by its descriptor (size and formats),
//! decides its band plan, and keeps frames in order.
//!
//! Invariants:
//! - a frame is served by the lane set of its own size and formats, made on first sight
//!   (cut with the configured band counts, 4:2:0 row pairs kept whole); the backend keeps at
//!   most `MAX_LANE_SETS` sets and drops the least recently used one that holds no frame;
//! - a submitted slot stays in `pending` until its frame's downloads have completed, so the
//!   asynchronous copies never outlive the host memory they read or write; a lent frame
//!   (NVDEC's from device memory, `desc::Memory::Device`, YUV on this backend's device; a
//!   CPU decoder's from page-locked host memory, `desc::Memory::HostLent`) keeps its lease as
//!   long, and the lease is dropped as the frame completes, giving the buffer back to the
//!   decoder;
//! - frames complete in submission order, and at most `capacity()` are pending (as many as a
//!   lane set has lanes), so a lane is reused only after its previous frame completed;
//! - ring buffers are page-locked once in `attach` (`cuMemHostRegister`), as a copy first
//!   goes through them (a lent frame leaves its input buffer unlocked,
//!   and one whose output stays on the device, composed into the mosaic or lent, its output
//!   buffer), and unlocked on drop;
//! - where the run's one consumer takes frames on the device (`BackendConfig::lend`), each
//!   frame not composed is copied into a buffer of `lend`'s pool instead of its slot, goes
//!   with the slot as `Slot::output_memory`, and is never replayed from a graph;
//! - a frame that finds the GPU idle (none pending) for longer than the last frame took is
//!   cut by the idle plan, any other by the busy plan;
//! - a control (chain, bands) drops every lane set and compiles the new chain once, with no
//!   frame in flight; the device, its streams and the page-locked ring stay.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use super::compose::Composer;
use super::device::{Device, PinnedRange};
use super::kernels::ChainKernels;
use super::lanes::{LaneKey, LaneSet, Plan};
use super::lend::Lender;
use super::{Backend, BackendConfig, Control, Fetch, Picture, StreamLayout};
use crate::filter::Chain;
use crate::pixel::Formats;
use crate::ring::{HostBuffer, Slot};

/// The most lane sets (frame configurations) kept at once.
pub const MAX_LANE_SETS: usize = 8;

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

/// A frame on the GPU.
struct InFlight {
    /// Its lane set's configuration.
    key: LaneKey,
    lane: usize,
    /// Which of the lane set's band plans it was cut with.
    plan: Plan,
    /// Its spans go into the trace.
    traced: bool,
    slot: Slot,
    timed: bool,
}

/// The CUDA backend: banded frames on streams, several frames in flight (module doc).
pub struct CudaBackend {
    device: Device,
    /// The chain's kernels, compiled once and shared by every lane set.
    kernels: Arc<ChainKernels>,
    /// One per configuration seen, most recently used last.
    sets: Vec<LaneSet>,
    pending: VecDeque<InFlight>,
    /// When the last frame was seen done, and its submit → done time: a frame that finds
    /// the GPU idle for longer than that comes from a source slower than the pipeline.
    last_done: Option<(Instant, std::time::Duration)>,
    submitted: u64,
    /// The mosaic, where the run composes one (`compose`).
    composer: Option<Composer>,
    /// Lends frames on the device, where the run's one consumer takes them there (`lend`).
    lender: Option<Lender>,
    /// The run's configuration (the first lane set's size and formats, the chain, band
    /// counts, frames in flight, page-locking, tracing); a control changes it.
    cfg: BackendConfig,
}

impl CudaBackend {
    /// Opens `cfg.cuda.device`, compiles the chain's kernels and allocates the lane set of
    /// `cfg`'s own size and formats.
    pub fn new(cfg: &BackendConfig) -> Result<Self> {
        let device = Device::open(cfg.cuda)?;
        let kernels = Arc::new(ChainKernels::new(
            &device.ctx,
            &device.stage_streams[0],
            &cfg.chain,
        )?);
        let first = LaneSet::new(&device, cfg, kernels.clone())?;
        let composer = cfg
            .compose
            .as_ref()
            .map(|plan| Composer::new(&device, plan))
            .transpose()?;
        let lender = cfg
            .lend
            .then(|| Lender::new(&device.ctx, cfg.cuda.device))
            .transpose()?;
        Ok(Self {
            device,
            kernels,
            sets: vec![first],
            pending: VecDeque::new(),
            last_done: None,
            submitted: 0,
            composer,
            lender,
            cfg: cfg.clone(),
        })
    }

    /// Makes the lane set for `key` the most recently used (the last), made (and the least
    /// recently used idle one dropped, past `MAX_LANE_SETS`) where there is none.
    fn use_set(&mut self, key: LaneKey) -> Result<()> {
        let at = match self.sets.iter().position(|s| s.key == key) {
            Some(at) => at,
            None => {
                let cfg = self
                    .cfg
                    .reshaped(key.size, key.formats)
                    .map_err(|e| anyhow::anyhow!("a {} frame ({}): {e}", key.size, key.formats))?;
                if self.sets.len() >= MAX_LANE_SETS {
                    let busy = |s: &LaneSet| self.pending.iter().any(|f| f.key == s.key);
                    if let Some(old) = self.sets.iter().position(|s| !busy(s)) {
                        self.sets.remove(old);
                    }
                }
                self.sets
                    .push(LaneSet::new(&self.device, &cfg, self.kernels.clone())?);
                self.sets.len() - 1
            }
        };
        let set = self.sets.remove(at);
        self.sets.push(set);
        Ok(())
    }

    /// The lane set of a pending frame.
    fn set_of(&self, key: LaneKey) -> &LaneSet {
        self.sets
            .iter()
            .find(|s| s.key == key)
            .expect("a pending frame's lane set is kept")
    }
}

impl Backend for CudaBackend {
    fn cuda_context(&self) -> Option<Arc<cudarc::driver::CudaContext>> {
        Some(self.device.ctx.clone())
    }

    fn describe(&self) -> String {
        let (idle, busy) = (self.cfg.plan.len(), self.cfg.busy_plan.len());
        format!(
            "cuda: {}; filter {}; {}; {idle} band(s) ({busy} behind other frames), {} frame(s) in flight, {} streams, {}",
            self.device.name,
            self.cfg.chain.brief(),
            self.cfg.formats,
            self.capacity(),
            self.device.settings.streams,
            match (self.cfg.pageable, self.device.settings.graphs) {
                (true, _) => "pageable",
                (false, true) => "page-locked, graphs for frames that find the GPU idle",
                (false, false) => "page-locked",
            }
        )
    }

    fn formats(&self) -> Formats {
        self.cfg.formats
    }

    fn resizer(&self) -> super::Resizer {
        super::resizer_of(&self.cfg.chain)
    }

    fn attach(&mut self, buffer: &mut HostBuffer) -> Result<()> {
        attach(self.cfg.pageable, &self.device, buffer)
    }

    fn capacity(&self) -> usize {
        self.cfg.in_flight.max(1)
    }

    fn tracks(&self) -> Vec<String> {
        match self.device.settings.streams {
            StreamLayout::PerStage => [
                "copy-in stream (H2D)",
                "compute stream",
                "copy-out stream (D2H)",
            ]
            .map(String::from)
            .to_vec(),
            // Numbered within a lane set: the run's own configuration's (the first set).
            StreamLayout::PerBand => self
                .sets
                .first()
                .map(LaneSet::band_tracks)
                .unwrap_or_default(),
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

    fn picture(&mut self, fetch: Fetch) -> Result<Option<Picture>> {
        let in_flight = self.pending.len();
        match &mut self.composer {
            Some(c) => c.picture(&self.device, fetch, in_flight),
            None => Ok(None),
        }
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

    /// Whether `slot`'s frame is lent (NVDEC's in device memory, or a CPU decoder's in
    /// page-locked host memory: copied band by band from there, at its planes' pitches, into
    /// the bands' raw buffers) rather than in the ring's packed host buffer; an error for a
    /// frame this backend can't take from where it is.
    fn where_input_is(&self, slot: &Slot) -> Result<bool> {
        let lent = match &slot.desc.memory {
            crate::desc::Memory::Host => false,
            crate::desc::Memory::HostLent { .. } => {
                anyhow::ensure!(
                    slot.desc.format != crate::pixel::PixelFormat::Bgr24,
                    "frame {} is lent in host memory as bgr24: this backend takes YUV from there",
                    slot.seq()
                );
                true
            }
            crate::desc::Memory::Device { device, .. } => {
                anyhow::ensure!(
                    *device == self.device.settings.device
                        && slot.desc.format != crate::pixel::PixelFormat::Bgr24,
                    "frame {} is in device memory of CUDA device {device} as {}: this backend runs on device {} and takes YUV from there",
                    slot.seq(),
                    slot.desc.format,
                    self.device.settings.device
                );
                true
            }
        };
        anyhow::ensure!(
            lent || slot.desc.planes.is_packed(slot.desc.format, slot.size()),
            "frame {} has padded planes: the ring holds packed frames",
            slot.seq()
        );
        Ok(lent)
    }

    fn submit_frame(&mut self, mut slot: Slot) -> Result<()> {
        anyhow::ensure!(
            self.pending.len() < self.capacity(),
            "CUDA backend: too many frames in flight"
        );
        let lent = self.where_input_is(&slot)?;
        slot.stamps.submitted = Instant::now();
        slot.output_size = None; // said again where the chain changes it (`reshape`)
        let seq = slot.seq();
        let traced = seq < self.cfg.trace_frames || self.cfg.rolling.traces(seq);
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
        // (A lent frame is not: the graph would keep its owner's buffer's address.)
        // (Nor is a frame whose texts show its own facts: a graph keeps its kernels' arguments.)
        let changes = self.cfg.chain.changes_per_frame();
        let graph = self.device.settings.graphs && !self.cfg.pageable && !lent && !changes;
        let bound = changes.then(|| {
            self.cfg
                .chain
                .bound(&super::facts_of(&slot, &self.cfg.names))
        });
        let key = LaneKey::of(&slot);
        self.use_set(key)?;
        let mosaic = match &mut self.composer {
            Some(c) => c.target(&slot)?,
            None => None,
        };
        slot.output_skipped = mosaic.as_ref().is_some_and(|m| !m.download);
        // A frame lent on the device is copied there, not brought down, and not replayed
        // from a graph (the graph would keep the lent buffer's address).
        slot.output_memory = crate::desc::Memory::Host;
        if let (Some(lender), None) = (&self.lender, &mosaic) {
            let set = self.sets.last().expect("use_set made it the last");
            slot.output_memory = lender.take(set.lent_bytes())?;
            slot.output_skipped = true;
        }
        let lent_out = matches!(slot.output_memory, crate::desc::Memory::Device { .. });
        let graph = graph && !lent_out;
        lock_buffers(self.cfg.pageable, &self.device, &mut slot, lent)?;
        let set = self.sets.last_mut().expect("use_set made it the last");
        let composed = mosaic.is_some();
        let how = super::lanes::FrameRun {
            plan,
            timed,
            graph,
            mosaic: mosaic.as_ref(),
            bound,
        };
        let lane = set.run(&self.device, &mut slot, how)?;
        if let (true, Some(c)) = (composed, &mut self.composer) {
            c.written(&self.device, || {
                set.composed_on(&self.device, lane, plan, graph)
            })?;
        }
        self.pending.push_back(InFlight {
            key,
            lane,
            plan,
            slot,
            timed,
            traced,
        });
        Ok(())
    }

    fn apply(&mut self, control: &Control) -> Result<()> {
        crate::ensure_kept!(self.pending.is_empty(), "control with frames in flight");
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
                self.sets.iter_mut().for_each(LaneSet::clear_graphs);
                return Ok(());
            }
            Control::Chain(asked) => {
                let Some(chain) = super::next_chain(&cfg.chain, asked, Some(cfg.size)) else {
                    return Ok(());
                };
                cfg.plan = cut(cfg.plan.len(), &chain)?;
                cfg.busy_plan = cut(cfg.busy_plan.len(), &chain)?;
                cfg.chain = chain;
            }
            Control::Bands(n) => cfg.plan = cut((*n).clamp(1, height), &cfg.chain)?,
        }
        cfg.trace_frames = 0;
        // The lane sets go (none holds a frame); the device stays. The new chain is compiled
        // once, and the run's own configuration gets its lane set back at once.
        self.sets.clear();
        if matches!(control, Control::Chain(_)) {
            self.kernels = Arc::new(ChainKernels::new(
                &self.device.ctx,
                &self.device.stage_streams[0],
                &cfg.chain,
            )?);
        }
        self.sets
            .push(LaneSet::new(&self.device, &cfg, self.kernels.clone())?);
        self.cfg = cfg;
        self.last_done = None;
        Ok(())
    }

    fn complete_frame(&mut self, wait: bool) -> Result<Option<Slot>> {
        let Some(front) = self.pending.front() else {
            return Ok(None);
        };
        let set = self.set_of(front.key);
        if !set.is_done(&self.device, front.lane, front.plan, wait)? {
            return Ok(None);
        }
        let done = Instant::now();
        let InFlight {
            key,
            lane,
            plan,
            mut slot,
            timed,
            traced,
        } = self.pending.pop_front().expect("front exists");
        slot.stamps.done = done;
        // Its bands are copied: a lent frame (device or page-locked memory) goes back to its owner
        // (the slot's host buffer describes it no more: the capture thread describes the
        // next frame anew).
        slot.desc.memory = crate::desc::Memory::Host;
        self.last_done = Some((done, done.saturating_duration_since(slot.stamps.submitted)));
        self.set_of(key)
            .measured(&self.device, lane, plan, &mut slot, traced, timed)?;
        Ok(Some(slot))
    }
}

impl Drop for CudaBackend {
    fn drop(&mut self) {
        // Copies in flight must finish before the slots in `pending` free their memory:
        // they are on the backend's own streams (the context is not synchronized: another
        // backend of this process may be capturing a graph, which CUDA would refuse).
        for stream in &self.device.stage_streams {
            let _ = stream.synchronize();
        }
        for set in &self.sets {
            let _ = set.synchronize();
        }
    }
}

/// Page-locks (or unlocks, after `p`) `slot`'s buffers lazily, where a copy goes through
/// them: a lent frame (`lent`: NVDEC's on the device, or a CPU decoder's in its own
/// page-locked buffer) touches no input buffer, and one composed into the mosaic or lent on
/// the device (`output_skipped`) no output buffer (a wall of NVDEC cameras composed into the
/// mosaic locks nothing).
fn lock_buffers(pageable: bool, device: &Device, slot: &mut Slot, lent: bool) -> Result<()> {
    let skipped = slot.output_skipped;
    let [input, output] = slot.buffers_mut();
    if !lent {
        attach(pageable, device, input)?;
    }
    if !skipped {
        attach(pageable, device, output)?;
    }
    Ok(())
}

/// Page-locks `buffer` on `device` (unlocks it where the run is `pageable`); a no-op where
/// it already is as asked.
fn attach(pageable: bool, device: &Device, buffer: &mut HostBuffer) -> Result<()> {
    if pageable {
        buffer.set_lock(None);
    } else if !buffer.is_locked() {
        PinnedRange::lock(&device.ctx, buffer)?;
    }
    Ok(())
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
