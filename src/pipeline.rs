//! The threads and the channels between them: capture → backend → sink, and back to the
//! free list.
//!
//! ```text
//! free ──> capture thread ──filled──> backend thread ──done──> sink (calling thread) ──┐
//!  ^                                        ^ controls (keys)                            │
//!  └─────────────────────────────── slot returned ──────────────────────────────────────┘
//! ```
//!
//! Invariants: the ring's slots are the only frame buffers (allocated and attached to the
//! backend before the first frame); frames reach the sink in capture order; a live source
//! never waits for a slot (it discards the frame and counts it dropped), any other source
//! does; a control reaches the backend only once it holds no frame; on any stop the capture
//! thread ends first, then the backend finishes what it holds, then the sink drains and is
//! finished. A stop never waits on the source: frames captured before it are finished and
//! written, and a capture thread still blocked inside a read (a stalled camera or stream)
//! after `CAPTURE_GRACE` is left behind, so that the output is finalized within a second of
//! the stop. The backend thread is joined (the reloader's compile threads are detached: a
//! late result is dropped). While it runs, the sink loop is the stop watchdog's sign of
//! progress (`stop::beat`). A traced frame's spans (capture, backend, output) go to the
//! first frames' trace and to a ring of the latest (`trace::Recent`), whose memory is fixed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{bounded, unbounded, Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::backend::{Backend, Control};
use crate::desc::Frame;
use crate::frame::FrameSize;
use crate::reload::{self, Reloader};
use crate::ring::{self, Slot};
use crate::sink::{Flow, Sink};
use crate::source::{Read, Source};
use crate::stats::{ms, CaptureStats, Live, ProcessStats, SinkStats, Summary};
use crate::stop::Stop;
use crate::trace::{Kind, Recent, Span, Trace, Track, STRIP_FRAMES};

/// The running pipeline's counts (captured, processed, consumed, dropped), kept where an
/// abort or an exit handler can read them (`progress`).
static PROGRESS: [AtomicU64; 4] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// The counts of the pipeline running now, or of the last one: captured, processed (reached
/// the sink), consumed, dropped.
pub fn progress() -> [u64; 4] {
    PROGRESS.each_ref().map(|c| c.load(Ordering::Relaxed))
}

/// How the pipeline runs, apart from its three stages.
#[derive(Clone, Debug)]
pub struct Options {
    /// Slots in the ring (frames that exist at once).
    pub ring: usize,
    /// Stop after this many captured frames.
    pub frames: Option<u64>,
    /// Keep every frame's submit/done instants (benchmarks).
    pub keep_frame_times: bool,
    /// Record the spans of frames `0..trace_frames` (0: no trace); the backend must have
    /// been made with the same number.
    pub trace_frames: u64,
    /// `--trace-frames last:N`: the summary's trace is the last N traced frames, kept in the
    /// rolling ring (the backend traces every frame then); 0: the first `trace_frames`.
    pub trace_last: u64,
    /// Watches the chain's kernel files and swaps reloaded kernels in (`reload`).
    pub reload: Option<Arc<Reloader>>,
}

/// What the threads share besides the slots.
struct Shared {
    stop: Stop,
    paused: AtomicBool,
    /// While paused: let one frame through (the `.` key).
    step: AtomicBool,
    /// Times the user paused.
    pauses: AtomicU64,
    dropped: AtomicU64,
    /// Frames the capture thread read, and the microseconds its reads took (kept here, so
    /// that a capture thread left behind still counts).
    captured: AtomicU64,
    read_us: AtomicU64,
    /// The backend's description, updated when a control changes it.
    backend: Mutex<String>,
    /// The input's description.
    input: String,
}

/// Runs until the input ends, `opts.frames` are captured, or `stop` is requested; the sink
/// runs on the calling thread and is always finished.
pub fn run(
    source: Box<dyn Source>,
    mut backend: Box<dyn Backend>,
    sink: &mut dyn Sink,
    opts: &Options,
    stop: &Stop,
) -> Result<Summary> {
    PROGRESS.iter().for_each(|c| c.store(0, Ordering::Relaxed));
    // A signalled stop that stops progressing in here is ended by the stop watchdog.
    let _watched = crate::stop::Watched::start();
    let t = Instant::now();
    let slots = attached_ring(backend.as_mut(), opts.ring, source.size())?;
    crate::debug!(
        "start-up: {} ring slots allocated and attached in {:.1} ms",
        opts.ring,
        ms(t.elapsed())
    );
    let shared = Arc::new(Shared {
        stop: stop.clone(),
        paused: AtomicBool::new(false),
        step: AtomicBool::new(false),
        pauses: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
        captured: AtomicU64::new(0),
        read_us: AtomicU64::new(0),
        backend: Mutex::new(backend.describe()),
        input: source.describe(),
    });
    let backend_tracks = backend.tracks();
    let (free_tx, free_rx) = bounded::<Slot>(opts.ring);
    let (filled_tx, filled_rx) = bounded::<Slot>(opts.ring);
    let (done_tx, done_rx) = bounded::<Slot>(opts.ring);
    let (control_tx, control_rx) = unbounded::<Control>();
    for slot in slots {
        free_tx.send(slot).expect("free list has room for the ring");
    }
    let started = Instant::now();
    let reloading = opts
        .reload
        .as_ref()
        .map(|r| r.start(control_tx.clone()))
        .transpose()
        .context("starting the kernel file watcher")?;
    let capture = spawn_capture(source, free_rx, filled_tx, opts.frames, &shared)?;
    let process = spawn_backend(backend, filled_rx, done_tx, control_rx, opts, &shared)?;

    let mut recent = Recent::new(started, backend_tracks.clone(), opts.trace_last as usize);
    let mut trace = (opts.trace_frames > 0).then(|| Trace::new(started, backend_tracks));
    let ends = SinkEnds {
        done: &done_rx,
        free: &free_tx,
        controls: control_tx,
        reload: reloading.as_ref(),
        reloader: opts.reload.as_deref(),
    };
    let mut sink_stats = SinkStats::default();
    let sink_result = sink_loop(
        sink,
        &ends,
        &shared,
        &mut sink_stats,
        Traces {
            first: trace.as_mut(),
            first_frames: opts.trace_frames,
            recent: &mut recent,
        },
    );
    if opts.trace_last > 0 {
        trace = Some(recent.last(opts.trace_last));
    }
    drop(ends);
    drop(reloading);
    if sink_result.is_err() {
        stop.request();
        // Keep slots moving so that the other threads can finish.
        while let Ok(slot) = done_rx.recv() {
            let _ = free_tx.send(slot);
        }
    }
    // The run's time ends here: a window may keep its last frame up in `finish`.
    let elapsed = started.elapsed();
    let finish_result = sink.finish().context("finishing the output");
    drop(free_tx);
    let ended = Ended {
        capture: join_within(capture, CAPTURE_GRACE),
        process: process
            .join()
            .map_err(|_| anyhow!("the backend thread panicked"))?,
        sink: sink_result,
        finish: finish_result,
    };
    sink_stats.pauses = shared.pauses.load(Ordering::SeqCst);
    sink_stats.stored = sink.stored();
    let summary = Summary {
        input: shared.input.clone(),
        backend: shared.backend.lock().map(|b| b.clone()).unwrap_or_default(),
        sink: sink.verb().to_string(),
        elapsed,
        capture: CaptureStats {
            captured: shared.captured.load(Ordering::SeqCst),
            dropped: shared.dropped.load(Ordering::SeqCst),
            read_ms: shared.read_us.load(Ordering::SeqCst) as f64 / 1000.0,
        },
        process: ProcessStats::default(),
        sink_stats,
        trace,
        reloads: opts.reload.as_ref().map(|r| r.log()).unwrap_or_default(),
    };
    ended.into_result(summary)
}

/// The ring's slots for `size` frames in the backend's formats, each buffer attached to
/// the backend (page-locked for CUDA) before the first frame.
fn attached_ring(backend: &mut dyn Backend, ring: usize, size: FrameSize) -> Result<Vec<Slot>> {
    let mut slots = ring::allocate(ring, size, backend.formats());
    for slot in &mut slots {
        for buf in slot.buffers_mut() {
            backend.attach(buf)?;
        }
    }
    Ok(slots)
}

/// Starts the capture thread: free slots in, filled slots out, until the input ends,
/// `frames` are read or a stop.
fn spawn_capture(
    mut source: Box<dyn Source>,
    free: Receiver<Slot>,
    filled: Sender<Slot>,
    frames: Option<u64>,
    shared: &Arc<Shared>,
) -> Result<thread::JoinHandle<Result<()>>> {
    let shared = shared.clone();
    Ok(thread::Builder::new()
        .name("capture".into())
        .spawn(move || capture_loop(source.as_mut(), &free, filled, frames, &shared))?)
}

/// Starts the backend thread: filled slots in, processed slots out in order, controls
/// applied between frames; an error stops the run.
fn spawn_backend(
    mut backend: Box<dyn Backend>,
    filled: Receiver<Slot>,
    done: Sender<Slot>,
    controls: Receiver<Control>,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<thread::JoinHandle<(ProcessStats, Result<()>)>> {
    let shared = shared.clone();
    let keep = opts.keep_frame_times;
    Ok(thread::Builder::new()
        .name("backend".into())
        .spawn(move || {
            let mut st = ProcessStats::default();
            let r = backend_loop(
                backend.as_mut(),
                filled,
                done,
                controls,
                keep,
                &shared,
                &mut st,
            );
            if r.is_err() {
                shared.stop.request();
            }
            (st, r)
        })?)
}

/// How each part of a run ended, once every thread is joined or left behind.
struct Ended {
    /// The capture thread: joined (its result, or its panic), or None when left blocked.
    capture: Option<thread::Result<Result<()>>>,
    /// The backend thread's counts and result.
    process: (ProcessStats, Result<()>),
    /// The sink loop's result.
    sink: Result<()>,
    /// The sink's `finish`.
    finish: Result<()>,
}

impl Ended {
    /// The summary (with the backend's counts), or the first error in the data path's order
    /// with the summary attached (`Failed`); the output's own error comes before the
    /// finish's.
    fn into_result(self, mut summary: Summary) -> Result<Summary> {
        let capture = match self.capture {
            Some(Ok(r)) => r.context("capture"),
            Some(Err(_)) => Err(anyhow!("the capture thread panicked")),
            None => {
                leave_a_thread_behind();
                crate::info!(
                    "the input was still blocked in a read {} ms after the stop; not waiting for it",
                    CAPTURE_GRACE.as_millis()
                );
                Ok(())
            }
        };
        let (process_stats, process) = self.process;
        summary.process = process_stats;
        let failure = capture
            .and(process.context("processing"))
            .and(self.sink)
            .and(self.finish);
        match failure {
            Ok(()) => Ok(summary),
            Err(error) => Err(Failed {
                summary: Box::new(summary),
                error,
            }
            .into()),
        }
    }
}

/// A run that ended with an error, with what it did up to then (the app prints both).
#[derive(Debug)]
pub struct Failed {
    /// The counts and times up to the error.
    pub summary: Box<Summary>,
    /// What went wrong.
    pub error: anyhow::Error,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)
    }
}

impl std::error::Error for Failed {}

static LEFT_BEHIND: AtomicBool = AtomicBool::new(false);

/// Records that a thread was left blocked inside a source (see `left_a_thread_behind`).
pub fn leave_a_thread_behind() {
    LEFT_BEHIND.store(true, Ordering::SeqCst);
}

/// Whether a run left a capture thread blocked inside its source: the process should then
/// end without running exit-time destructors under that thread's feet (`libc::_exit`).
pub fn left_a_thread_behind() -> bool {
    LEFT_BEHIND.load(Ordering::SeqCst)
}

const POLL: Duration = Duration::from_millis(20);

/// How long a stop waits for a frame the capture thread is still reading, and then for the
/// thread itself, before going on without it.
pub const CAPTURE_GRACE: Duration = Duration::from_millis(500);

/// Joins `thread` if it ends within `limit`; None when it is left running.
fn join_within<T>(thread: thread::JoinHandle<T>, limit: Duration) -> Option<thread::Result<T>> {
    let deadline = Instant::now() + limit;
    while !thread.is_finished() {
        if Instant::now() >= deadline {
            return None; // detached: it ends with the process, or on its own
        }
        thread::sleep(Duration::from_millis(2));
    }
    Some(thread.join())
}

fn capture_loop(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: Sender<Slot>,
    frames: Option<u64>,
    shared: &Shared,
) -> Result<()> {
    let live = source.is_live();
    let mut captured = 0;
    while !shared.stop.is_requested() {
        if frames.is_some_and(|n| captured >= n) {
            shared.stop.request(); // --frames reached: a stop, not the end of the input
            return Ok(());
        }
        // Paused: one frame goes through when a step was asked for.
        if shared.paused.load(Ordering::SeqCst) && !shared.step.swap(false, Ordering::SeqCst) {
            // Paused: a live source keeps being drained so that it resumes with fresh frames.
            if live && source.skip()? == Read::End {
                return Ok(());
            }
            if !live {
                thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let mut slot = match free.try_recv() {
            Ok(slot) => slot,
            Err(TryRecvError::Disconnected) => return Ok(()),
            Err(TryRecvError::Empty) if live => {
                // Ring full: a live source drops this frame so that what is shown stays fresh.
                if source.skip()? == Read::End {
                    return Ok(());
                }
                shared.dropped.fetch_add(1, Ordering::SeqCst);
                continue;
            }
            Err(TryRecvError::Empty) => match free.recv_timeout(POLL) {
                Ok(slot) => slot,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            },
        };
        if let Some(due) = source.due() {
            if shared.stop.sleep_until(due) {
                return Ok(());
            }
        }
        let t = Instant::now();
        slot.stamps.read_start = t;
        if source.read(&mut slot.input)? == Read::End {
            return Ok(());
        }
        slot.stamps.captured = Instant::now();
        let took = slot.stamps.captured - t;
        slot.stamps.capture_ms = ms(took);
        shared
            .read_us
            .fetch_add(took.as_micros() as u64, Ordering::SeqCst);
        slot.desc.index = captured;
        slot.desc.pts = source.pts();
        captured += 1;
        shared.captured.store(captured, Ordering::SeqCst);
        if filled.send(slot).is_err() {
            return Ok(()); // the backend stopped (its error is reported by it)
        }
    }
    Ok(())
}

fn backend_loop(
    backend: &mut dyn Backend,
    filled: Receiver<Slot>,
    done: Sender<Slot>,
    controls: Receiver<Control>,
    keep: bool,
    shared: &Shared,
    st: &mut ProcessStats,
) -> Result<()> {
    let forward = |slot: Slot, st: &mut ProcessStats| {
        st.record(
            slot.stamps.submitted,
            slot.stamps.done,
            slot.gpu.as_ref(),
            keep,
        );
        // A closed sink only happens on shutdown; the slot is then simply freed.
        let _ = done.send(slot);
    };
    let mut input_open = true;
    let mut stop_seen: Option<Instant> = None;
    loop {
        if input_open && shared.stop.is_requested() {
            // Take what was captured before the stop; don't wait long for the rest.
            let since = *stop_seen.get_or_insert_with(Instant::now);
            if filled.is_empty() && since.elapsed() >= CAPTURE_GRACE {
                input_open = false;
            }
        }
        while let Some(slot) = backend.complete(false)? {
            forward(slot, st);
        }
        if let Ok(control) = controls.try_recv() {
            // Finish what is in flight, then change the backend between two frames.
            while let Some(slot) = backend.complete(true)? {
                forward(slot, st);
            }
            backend
                .control(&control)
                .with_context(|| format!("applying {control:?}"))?;
            st.controls.push(format!(
                "{} from frame {}",
                describe_control(&control),
                st.processed
            ));
            if let Ok(mut b) = shared.backend.lock() {
                *b = backend.describe();
            }
        }
        let busy = backend.in_flight();
        if !input_open || busy >= backend.capacity() {
            match backend.complete(true)? {
                Some(slot) => forward(slot, st),
                None if !input_open => return Ok(()),
                None => {}
            }
            continue;
        }
        if busy > 0 {
            // Frames on the GPU: poll for input and completion without sleeping, so that a
            // finished frame is handed on at once (a timed sleep costs its timer slack,
            // tens of microseconds, on every frame of a live source).
            match filled.try_recv() {
                Ok(slot) => backend.submit(slot)?,
                Err(TryRecvError::Empty) => thread::yield_now(),
                Err(TryRecvError::Disconnected) => input_open = false,
            }
            continue;
        }
        match filled.recv_timeout(POLL) {
            Ok(slot) => backend.submit(slot)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => input_open = false,
        }
    }
}

fn describe_control(c: &Control) -> String {
    match c {
        Control::Chain(chain) => format!("filter {chain}"),
        Control::Pageable(true) => "pageable".into(),
        Control::Pageable(false) => "page-locked".into(),
        Control::Bands(n) => format!("{n} bands"),
    }
}

/// The sink thread's channel ends.
struct SinkEnds<'a> {
    done: &'a Receiver<Slot>,
    free: &'a Sender<Slot>,
    controls: Sender<Control>,
    /// The kernel file watcher, for `r`.
    reload: Option<&'a reload::Running>,
    /// Its messages, for the overlay.
    reloader: Option<&'a Reloader>,
}

/// Where the sink loop files traced frames' spans.
struct Traces<'a> {
    /// The first frames' trace, where asked for.
    first: Option<&'a mut Trace>,
    first_frames: u64,
    /// The most recent traced frames.
    recent: &'a mut Recent,
}

fn sink_loop(
    sink: &mut dyn Sink,
    ends: &SinkEnds,
    shared: &Shared,
    st: &mut SinkStats,
    mut traces: Traces,
) -> Result<()> {
    let mut live = Live::default();
    live.input.clone_from(&shared.input);
    let act = |flow: Flow| match flow {
        Flow::Continue => {}
        Flow::Quit => shared.stop.request(),
        Flow::Step => {
            // A step pauses first, so that exactly one frame goes through.
            if !shared.paused.swap(true, Ordering::SeqCst) {
                shared.pauses.fetch_add(1, Ordering::SeqCst);
            }
            shared.step.store(true, Ordering::SeqCst);
        }
        Flow::TogglePause => {
            if !shared.paused.fetch_xor(true, Ordering::SeqCst) {
                shared.pauses.fetch_add(1, Ordering::SeqCst);
            }
        }
        Flow::Control(c) => {
            let _ = ends.controls.send(c);
        }
        Flow::Reload => match ends.reload {
            Some(r) => r.request(reload::Why::Key),
            None => crate::info!("r: the chain has no kernel file to reload"),
        },
    };
    loop {
        // The watchdog of a signalled stop sees this loop turn (a sink call that blocks
        // stops it).
        crate::stop::beat();
        match ends.done.recv_timeout(POLL) {
            Ok(mut slot) => {
                live.dropped = shared.dropped.load(Ordering::SeqCst);
                live.paused = shared.paused.load(Ordering::SeqCst);
                if let Ok(b) = shared.backend.lock() {
                    live.backend.clone_from(&b);
                }
                if let Some(r) = ends.reloader {
                    live.note = r.note();
                }
                sink.status(&live);
                let t = Instant::now();
                PROGRESS[0].store(shared.captured.load(Ordering::Relaxed), Ordering::Relaxed);
                PROGRESS[1].fetch_add(1, Ordering::Relaxed);
                PROGRESS[3].store(live.dropped, Ordering::Relaxed);
                let desc = slot.output_desc();
                let flow = sink.consume(&Frame {
                    desc: &desc,
                    bytes: &slot.output,
                })?;
                let end = Instant::now();
                st.sink_ms += ms(end - t);
                st.consumed += 1;
                PROGRESS[2].fetch_add(1, Ordering::Relaxed);
                let s = &slot.stamps;
                live.update(
                    s.capture_ms,
                    ms(s.done - s.submitted),
                    slot.gpu.as_ref(),
                    ms(end - t),
                );
                if !slot.spans.is_empty() {
                    // A traced frame (its backend spans are there): its capture and output
                    // spans join them, in the first frames' trace and in the ring.
                    let seq = slot.seq();
                    let span = |track, kind, start, end| Span {
                        track,
                        kind,
                        frame: seq,
                        band: None,
                        start,
                        end,
                    };
                    let mut spans = std::mem::take(&mut slot.spans);
                    spans.push(span(
                        Track::Capture,
                        Kind::Capture,
                        s.read_start,
                        s.captured,
                    ));
                    spans.push(span(Track::Output, Kind::Output, t, end));
                    if let Some(first) = traces
                        .first
                        .as_deref_mut()
                        .filter(|_| slot.seq() < traces.first_frames)
                    {
                        first.spans.extend(spans.iter().cloned());
                    }
                    traces.recent.push(slot.seq(), spans);
                    live.timeline = sink
                        .wants_timeline()
                        .then(|| traces.recent.layout(STRIP_FRAMES).map(Arc::new))
                        .flatten();
                }
                let _ = ends.free.send(slot);
                act(flow);
            }
            Err(RecvTimeoutError::Timeout) => {
                live.paused = shared.paused.load(Ordering::SeqCst);
                sink.status(&live);
                act(sink.idle()?);
            }
            Err(RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}
