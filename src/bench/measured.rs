//! One measured configuration: the real pipeline (capture thread, ring, GPU thread, consumer)
//! on the cheap pattern, or the backend alone driven from one thread.

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::{Context, Result};
use serde::Serialize;

use super::RING_SPARE;
use crate::backend::{Backend, BackendKind, CudaSettings, IssueOrder, StreamLayout};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::Formats;
use crate::plan::{Counts, Plan};
use crate::ring::{self, Slot};
use crate::sink::null::Null;
use crate::source::pattern::{self, Pattern};
use crate::stop::Stop;

/// What a section of the bench measures: frames of one size, in one pair of formats,
/// through one chain. Made once per section and passed down whole.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Subject<'a> {
    /// The frames' size.
    pub size: FrameSize,
    /// The chain they go through.
    pub chain: &'a Chain,
    /// Their formats in and out.
    pub formats: Formats,
}

/// One configuration of the pipeline to measure.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Setup {
    /// Ring buffers left pageable.
    pub pageable: bool,
    /// How bands map to streams.
    pub streams: StreamLayout,
    /// The order of a frame's band operations.
    pub issue: IssueOrder,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Bands of frames submitted behind others.
    pub busy_bands: usize,
    /// Frames in flight.
    pub in_flight: usize,
    /// Slots in the ring.
    pub ring: usize,
    /// Frames that find the GPU idle are replayed as CUDA graphs.
    pub graphs: bool,
    /// The per-stage streams have priorities.
    pub priorities: bool,
    /// Through the real threads (false: the backend alone, driven from one thread).
    pub threads: bool,
    /// Frames per second the source is paced at; 0 = unpaced.
    pub paced_fps: f64,
    /// The app's default settings.
    pub defaults: bool,
    /// The rolling trace's bursts are timed, as in a window run (`trace::Rolling::Bursts`).
    pub rolling: bool,
    /// The bare baseline (`Setup::bare`).
    pub bare: bool,
}

impl Setup {
    pub(crate) fn new(pageable: bool, bands: usize, in_flight: usize) -> Self {
        Self {
            pageable,
            streams: StreamLayout::default(),
            issue: IssueOrder::Depth,
            bands,
            busy_bands: bands,
            in_flight,
            ring: in_flight + RING_SPARE,
            graphs: true,
            priorities: false,
            threads: true,
            paced_fps: 0.0,
            defaults: false,
            rolling: false,
            bare: false,
        }
    }
}

impl Setup {
    /// The app's own defaults for `size` frames in `formats` (`plan::Counts::defaults`: its
    /// ring, frames in flight, fine bands for a frame that finds the GPU idle, one band
    /// behind others), page-locked, unpaced.
    pub(crate) fn defaults(subject: &Subject) -> Self {
        let (size, formats) = (subject.size, subject.formats);
        let c = Counts::defaults(size, formats.input.row_align());
        Self {
            busy_bands: c.busy_bands,
            ring: c.ring,
            defaults: true,
            ..Setup::new(false, c.bands.min(size.height), c.in_flight)
        }
    }

    /// The bare baseline beside `defaults`: one thread driving the backend over a ring of
    /// page-locked buffers (the defaults' ring and frames in flight), one band, plain calls
    /// (no graphs), no capture or consumer thread, no channels: what the defaults would
    /// reach if their threads and hand-offs cost nothing.
    pub(crate) fn bare(defaults: Setup) -> Self {
        Self {
            bands: 1,
            busy_bands: 1,
            graphs: false,
            threads: false,
            defaults: false,
            bare: true,
            ..defaults
        }
    }

    /// Its counts, for a `Plan`.
    fn counts(&self) -> Counts {
        Counts {
            ring: self.ring,
            in_flight: self.in_flight,
            bands: self.bands,
            busy_bands: self.busy_bands,
        }
    }
}

/// Per-frame (submitted, done) times in ms.
pub(crate) type FrameTimes = Vec<(f64, f64)>;

/// Per-frame (submitted, done) ms of one configuration.
pub(crate) fn measure_row(subject: &Subject, setup: Setup, frames: u64) -> Result<FrameTimes> {
    Ok(run_setup(subject, setup, frames, 0)?.0)
}

/// Runs one configuration through the real pipeline (or the backend alone, for a setup
/// without threads); traces its first `trace_frames` frames.
pub(crate) fn run_setup(
    subject: &Subject,
    setup: Setup,
    frames: u64,
    trace_frames: u64,
) -> Result<(FrameTimes, Option<crate::trace::Trace>)> {
    let Subject {
        size,
        chain,
        formats,
    } = *subject;
    let mut plan = Plan::new(
        BackendKind::Cuda,
        size,
        formats,
        chain.clone(),
        setup.counts(),
    )?
    .traced(trace_frames);
    let cfg = &mut plan.backend;
    cfg.pageable = setup.pageable;
    if setup.rolling {
        cfg.rolling = crate::trace::Rolling::Bursts;
    }
    cfg.cuda = CudaSettings {
        issue: setup.issue,
        streams: setup.streams,
        graphs: setup.graphs,
        priorities: setup.priorities,
        ..CudaSettings::default()
    };
    plan.frames = Some(frames);
    plan.keep_frame_times = true;
    let (instants, trace) = if setup.threads {
        let source = Box::new(
            Pattern::new(size, setup.paced_fps)
                .in_format(formats.input)
                .cheap(),
        );
        let summary = plan.run(
            source,
            &mut Null as &mut dyn crate::sink::Sink,
            &Stop::new(),
        )?;
        (summary.process.frames, summary.trace)
    } else {
        (
            run_alone(plan.make_backend()?, size, plan.ring, frames)?,
            None,
        )
    };
    let t0 = instants
        .first()
        .map(|f| f.0)
        .context("no frame was processed")?;
    let ms = |t: Instant| crate::stats::ms(t - t0);
    let times = instants.iter().map(|(s, d)| (ms(*s), ms(*d))).collect();
    Ok((times, trace))
}

/// The backend alone, driven from this thread over a ring of `ring` slots taken in turn:
/// no capture thread, no consumer, no channels. Per-frame (submitted, done) instants.
pub(crate) fn run_alone(
    mut backend: Box<dyn Backend>,
    size: FrameSize,
    ring: usize,
    frames: u64,
) -> Result<Vec<(Instant, Instant)>> {
    let formats = backend.formats();
    let mut free: VecDeque<Slot> = ring::allocate(ring, size, formats).into();
    for slot in &mut free {
        pattern::draw_in(formats.input, size, 0, &mut slot.input);
        for buf in slot.buffers_mut() {
            backend.attach(buf)?;
        }
    }
    let mut times = Vec::with_capacity(frames as usize);
    let mut next = 0;
    while (times.len() as u64) < frames {
        while next < frames && backend.in_flight() < backend.capacity() {
            let Some(mut slot) = free.pop_front() else {
                break;
            };
            slot.desc.index = next;
            next += 1;
            backend.submit(slot)?;
        }
        let slot = backend
            .complete(true)?
            .context("the backend lost a frame")?;
        times.push((slot.stamps.submitted, slot.stamps.done));
        free.push_back(slot);
    }
    Ok(times)
}
