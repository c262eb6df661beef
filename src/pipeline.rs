//! The threads and the channels between them: capture → backend → sink, and back to the
//! free list; one capture thread and one ring per input, one backend thread for all.
//!
//! ```text
//! free 0 ──> capture 0 ──┐
//! free 1 ──> capture 1 ──┼─filled─> backend thread ──done──> sink (calling thread) ──┐
//!  ^  ^                  │              ^ controls (keys) └─pictures─┘ (the mosaic)   │
//!  └──┴──────────── slot returned to its input's free list ───────────────────────────┘
//! ```
//!
//! Where the run has a mosaic the backend composes it, and its pictures go to the sink on a
//! channel of their own (a short queue that never waits: when it is full the oldest picture
//! makes way for the newest, and the sink takes the newest before each frame); when the GPU
//! goes idle, and at the end, what the last frames composed is brought down too, so the
//! picture shown last holds every input's last frame.
//!
//! Invariants: the rings' slots are the only host frame buffers (allocated before the first
//! frame, each slot tagged with its input; an input that joins late, `Arrival::Late`, has
//! its ring made by its capture thread once it opens), and the ring bounds the frames in
//! flight also where a source lends its frames from device memory (`Source::lent`: the
//! capture thread describes each slot anew, lent or packed in its buffer); the backend
//! attaches each slot (page-locks it, for CUDA) as a copy first goes through it, so that
//! the run starts without waiting for a whole ring to be locked, a short run locks only the
//! slots it uses, and a camera decoded on the GPU and only composed locks none; the filled channel holds every slot of every ring, so a capture thread
//! never waits on another input, and the backend takes frames in the order they were
//! captured across inputs; each input's frames reach the sink in its capture order; a live
//! source waits for a slot one frame's time (`LIVE_GRACE` at most), longer while its
//! patience lasts (`Patience`: a network stream's second in all, RTSP's quarter, for a
//! burst), then discards the frame and counts it dropped, any other source waits for its own
//! ring only; an input that ends or fails ends alone (the others
//! go on; the run ends when every input has ended, or on a stop); a control reaches the
//! backend only once it holds no frame; on any stop the capture threads end first, then the
//! backend finishes what it holds, then the sink drains and is finished. A stop never waits
//! on the source: frames captured before it are finished and written, and a capture thread
//! still blocked inside a read (a stalled camera or stream) after `CAPTURE_GRACE` is left
//! behind, so that the output is finalized within a second of the stop. The backend thread
//! is joined (the reloader's compile threads are detached: a late result is dropped). While
//! it runs, the sink loop is the stop watchdog's sign of progress (`stop::beat`). A traced
//! frame's spans (capture, backend, output) go to the first frames' trace and to a ring of
//! the latest (`trace::Recent`), whose memory is fixed. Each thread's CPU over the run
//! (user, system, waits, time waiting for a CPU) is noted as it ends, for `-v`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{
    bounded, unbounded, Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError,
};

use crate::backend::{Backend, Control, Fetch, Picture};
use crate::desc::Frame;
use crate::desc::InputId;
use crate::frame::FrameSize;
use crate::pixel::Formats;
use crate::reload::{self, Reloader};
use crate::ring::{self, Slot};
use crate::sink::{Flow, Sink};
use crate::source::{Read, Source};
use crate::stats::{
    ms, slow, CaptureStats, InputLive, InputStats, Latency, LatencyNow, Live, ProcessStats,
    SinkStats, Summary, ThreadCpu,
};
use crate::stop::Stop;
use crate::trace::{Kind, Recent, Span, Trace, Track, STRIP_FRAMES};

/// A running pipeline's counts (captured, processed, consumed, dropped), readable from
/// outside while it runs: the run that made it hands it to whatever must report the counts
/// when the process ends from outside (an abort, an exit from inside a library).
#[derive(Debug, Default)]
pub struct Progress([AtomicU64; 4]);

impl Progress {
    /// The counts now: captured, processed (reached the sink), consumed, dropped.
    pub fn counts(&self) -> [u64; 4] {
        self.0.each_ref().map(|c| c.load(Ordering::Relaxed))
    }
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
    /// Where the run's counts are kept while it runs (`Progress`).
    pub progress: Arc<Progress>,
}

/// One input's counts, kept where a capture thread left behind still counts.
struct Counters {
    /// The input's description.
    name: String,
    /// Frames its capture thread read, and the microseconds its reads took.
    captured: AtomicU64,
    read_us: AtomicU64,
    /// Frames a live input discarded because its ring was full.
    dropped: AtomicU64,
    /// Why its capture thread ended (None while it runs).
    ended: Mutex<Option<String>>,
    /// A reconnecting input's state and reconnects (set once it is open: at the start, or
    /// when a late input joins).
    health: std::sync::OnceLock<Arc<crate::source::reconnect::Health>>,
    /// Whether it is open (a late input: once it joined).
    open: AtomicBool,
    /// Whether it is live (its frames are dropped rather than waited for; said by its
    /// capture thread as it starts).
    live: AtomicBool,
    /// Its recording's figures, where it is recorded.
    recording: Option<Arc<crate::stats::RecordLive>>,
}

/// What the threads share besides the slots.
struct Shared {
    stop: Stop,
    paused: AtomicBool,
    /// While paused: let one frame through (the `.` key).
    step: AtomicBool,
    /// Times the user paused.
    pauses: AtomicU64,
    /// The backend's description, updated when a control changes it.
    backend: Mutex<String>,
    /// Each input's counts, by `InputId`.
    inputs: Vec<Counters>,
    /// Each thread's CPU over the run, as it ended (`-v` prints them).
    cpu: Mutex<Vec<(String, ThreadCpu)>>,
    /// The run's counts, as `Options::progress` shares them.
    progress: Arc<Progress>,
    /// The size the backend makes of each frame size (a late input's ring is made for it).
    resize: crate::backend::Resizer,
}

impl Shared {
    /// Files the calling thread's CPU since `start` under `name`.
    fn note_cpu(&self, name: String, start: Option<ThreadCpu>) {
        if let (Some(start), Some(now), Ok(mut cpu)) = (start, ThreadCpu::now(), self.cpu.lock()) {
            cpu.push((name, now.since(start)));
        }
    }

    fn total(&self, of: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.inputs
            .iter()
            .map(|c| of(c).load(Ordering::SeqCst))
            .sum()
    }

    /// The run's input, for the summary and the overlay: the one input's description, or
    /// how many there are.
    fn input(&self) -> String {
        match &self.inputs[..] {
            [one] => one.name.clone(),
            many => format!("{} inputs", many.len()),
        }
    }
}

/// One input of a run: its source, and the ring it is captured into.
pub struct Input {
    /// Where its frames come from.
    pub source: Arrival,
    /// Slots in its ring.
    pub ring: usize,
    /// Its recording's figures, where it is recorded (shown by the browser view).
    pub recording: Option<Arc<crate::stats::RecordLive>>,
}

/// An input's source: open before the run, or still opening (it joins the run when open).
pub enum Arrival {
    /// Open, with its frames' format and the format its sinks take (its slots are made for
    /// them before the first frame).
    Open {
        /// The source.
        source: Box<dyn Source>,
        /// Its formats in and out.
        formats: Formats,
    },
    /// Still opening when the run starts: its capture thread waits for `open`, then makes
    /// its ring (page-locked by the backend as each slot first passes) and captures.
    Late {
        /// What it is, until it has opened (the `--input` text).
        name: String,
        /// Waits until the source has opened (Some, with its formats), failed (the error) or
        /// a stop came (None), answering a stop within a poll.
        open: Opener,
    },
}

/// How a late input's capture thread waits for its source (`Arrival::Late`).
pub type Opener = Box<dyn FnOnce(&Stop) -> Result<Option<(Box<dyn Source>, Formats)>> + Send>;

/// Runs `source` until it ends, `opts.frames` are captured, or `stop` is requested; the
/// sink runs on the calling thread and is always finished.
pub fn run(
    source: Box<dyn Source>,
    backend: Box<dyn Backend>,
    sink: &mut dyn Sink,
    opts: &Options,
    stop: &Stop,
) -> Result<Summary> {
    let input = Input {
        source: Arrival::Open {
            source,
            formats: backend.formats(),
        },
        ring: opts.ring,
        recording: None,
    };
    run_inputs(vec![input], backend, sink, opts, stop)
}

/// Runs every input until each has ended (or reached `opts.frames`), or `stop` is
/// requested; their frames (tagged with their `InputId`, in the order of `inputs`) go to the
/// one sink, which runs on the calling thread and is always finished.
pub fn run_inputs(
    inputs: Vec<Input>,
    backend: Box<dyn Backend>,
    sink: &mut dyn Sink,
    opts: &Options,
    stop: &Stop,
) -> Result<Summary> {
    crate::ensure_kept!(
        !inputs.is_empty() && inputs.len() <= MAX_INPUTS,
        "a run has 1 to {MAX_INPUTS} inputs, not {}",
        inputs.len()
    );
    // A signalled stop that stops progressing in here is ended by the stop watchdog.
    let _watched = crate::stop::Watched::start();
    let several = inputs.len() > 1;
    let resize = backend.resizer();
    let (free_txs, free_rxs) = free_lists(&inputs, &resize);
    let shared = Arc::new(Shared::new(
        stop,
        backend.describe(),
        &inputs,
        (opts.progress.clone(), resize.clone()),
    ));
    let backend_tracks = backend.tracks();
    // Every slot of every ring fits in the filled and done channels: sending never waits.
    let slots_total: usize = inputs.iter().map(|i| i.ring).sum();
    let (filled_tx, filled_rx) = bounded::<Slot>(slots_total);
    let (done_tx, done_rx) = bounded::<Slot>(slots_total);
    let (control_tx, control_rx) = unbounded::<Control>();
    let (picture_tx, picture_rx) = bounded::<Picture>(PICTURES_QUEUED);
    let started = Instant::now();
    let reloading = opts
        .reload
        .as_ref()
        .map(|r| r.start(control_tx.clone()))
        .transpose()
        .context("starting the kernel file watcher")?;
    let captures = spawn_captures(inputs, (free_rxs, &free_txs), filled_tx, opts, &shared)?;
    let process = spawn_backend(
        backend,
        filled_rx,
        (done_tx, (picture_tx, picture_rx.clone())),
        control_rx,
        opts,
        &shared,
    )?;
    let ends = SinkEnds {
        done: &done_rx,
        pictures: &picture_rx,
        free: &free_txs,
        controls: control_tx,
        reload: reloading.as_ref(),
        reloader: opts.reload.as_deref(),
    };
    let mut sunk = sink_side(sink, ends, &shared, (started, backend_tracks), opts);
    drop(reloading);
    if sunk.result.is_err() {
        stop.request();
        // Keep slots moving so that the other threads can finish.
        while let Ok(slot) = done_rx.recv() {
            let _ = free_txs[slot.desc.input.0 as usize].send(slot);
        }
    }
    // The run's time ends here: a window may keep its last frame up in `finish`.
    let elapsed = started.elapsed();
    let finish = sink.finish().context("finishing the output");
    let finished = Instant::now();
    shared.note_cpu("sink".into(), sunk.cpu);
    drop(free_txs);
    let sunk_result = std::mem::replace(&mut sunk.result, Ok(()));
    let ended = join_all(captures, process, several, (sunk_result, finish))?;
    crate::debug!(
        "threads joined {:.1} ms after the outputs finished",
        crate::stats::ms(finished.elapsed())
    );
    shared.log_cpu();
    let summary = summarize(&shared, sink, sunk, elapsed, opts);
    ended.into_result(summary)
}

impl Shared {
    /// The shared state of a run of `inputs` on a backend described as `backend`.
    fn new(
        stop: &Stop,
        backend: String,
        inputs: &[Input],
        (progress, resize): (Arc<Progress>, crate::backend::Resizer),
    ) -> Self {
        Self {
            resize,
            stop: stop.clone(),
            paused: AtomicBool::new(false),
            step: AtomicBool::new(false),
            pauses: AtomicU64::new(0),
            backend: Mutex::new(backend),
            inputs: inputs.iter().map(Counters::of).collect(),
            cpu: Mutex::new(Vec::new()),
            progress,
        }
    }

    /// `-v`: each thread's CPU over the run.
    fn log_cpu(&self) {
        if let Ok(cpu) = self.cpu.lock() {
            for (name, used) in cpu.iter() {
                crate::debug!("CPU of the {name} thread over the run: {used}");
            }
        }
    }
}

impl Counters {
    /// An input's counts at the start: its name, and its health where it is open (a late
    /// input's is set when it joins, `arrive`).
    fn of(input: &Input) -> Self {
        let (name, health, open) = match &input.source {
            Arrival::Open { source, .. } => (source.describe(), source.health(), true),
            Arrival::Late { name, .. } => (name.clone(), None, false),
        };
        Self {
            name,
            captured: AtomicU64::new(0),
            read_us: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            ended: Mutex::new(None),
            health: health.map_or_else(std::sync::OnceLock::new, std::sync::OnceLock::from),
            open: AtomicBool::new(open),
            live: AtomicBool::new(false),
            recording: input.recording.clone(),
        }
    }
}

/// Each input's free list, holding its ring's slots (an input open at the start: its ring
/// is allocated here, page-locked by the backend as each slot first passes; a late input's
/// thread fills its own once it knows its frames).
fn free_lists(
    inputs: &[Input],
    resize: &crate::backend::Resizer,
) -> (Vec<Sender<Slot>>, Vec<Receiver<Slot>>) {
    let t = Instant::now();
    let (mut txs, mut rxs) = (Vec::new(), Vec::new());
    for (i, input) in inputs.iter().enumerate() {
        let (tx, rx) = bounded::<Slot>(input.ring);
        if let Arrival::Open { source, formats } = &input.source {
            let size = source.size();
            for slot in ring_of(
                InputId(i as u16),
                input.ring,
                (size, resize(size)),
                *formats,
            ) {
                tx.send(slot).expect("free list has room for the ring");
            }
        }
        txs.push(tx);
        rxs.push(rx);
    }
    let slots: usize = inputs.iter().map(|i| i.ring).sum();
    crate::debug!(
        "start-up: {slots} ring slots allocated in {:.1} ms (each is page-locked as a copy first goes through it)",
        ms(t.elapsed())
    );
    (txs, rxs)
}

/// Starts every input's capture thread, each on its own free list (`free`: the receivers,
/// and the senders a late input refills).
fn spawn_captures(
    inputs: Vec<Input>,
    (free_rxs, free_txs): (Vec<Receiver<Slot>>, &[Sender<Slot>]),
    filled: Sender<Slot>,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<Vec<thread::JoinHandle<Result<()>>>> {
    let several = inputs.len() > 1;
    let mut captures = Vec::with_capacity(inputs.len());
    for (i, (input, free_rx)) in inputs.into_iter().zip(free_rxs).enumerate() {
        let how = Capturing {
            input: i,
            frames: opts.frames,
            several,
        };
        let refill = (free_txs[i].clone(), input.ring);
        captures.push(spawn_capture(
            input.source,
            (free_rx, refill),
            filled.clone(),
            how,
            shared,
        )?);
    }
    Ok(captures)
}

/// What the sink side of a run gives back: how its loop ended, its counts, each input's,
/// the trace, and the CPU its thread had at the start.
struct Sunk {
    result: Result<()>,
    stats: SinkStats,
    per_input: Vec<PerInput>,
    trace: Option<Trace>,
    cpu: Option<ThreadCpu>,
}

/// Runs the sink loop on the calling thread over `ends`, tracing as `opts` asks (the first
/// frames, or the last ones).
fn sink_side(
    sink: &mut dyn Sink,
    ends: SinkEnds,
    shared: &Shared,
    (started, backend_tracks): (Instant, Vec<String>),
    opts: &Options,
) -> Sunk {
    let names = shared.inputs.iter().map(|c| c.name.clone()).collect();
    let tracks = Trace::new(started, backend_tracks).with_inputs(names);
    let mut recent = Recent::new(&tracks, opts.trace_last as usize);
    let mut trace = (opts.trace_frames > 0).then_some(tracks);
    let mut stats = SinkStats::default();
    let mut per_input = vec![PerInput::default(); shared.inputs.len()];
    let cpu = ThreadCpu::now();
    let result = sink_loop(
        sink,
        &ends,
        shared,
        (&mut stats, &mut per_input),
        Traces {
            first: trace.as_mut(),
            first_frames: opts.trace_frames,
            recent: &mut recent,
        },
    );
    if opts.trace_last > 0 {
        trace = Some(recent.last(opts.trace_last));
    }
    Sunk {
        result,
        stats,
        per_input,
        trace,
        cpu,
    }
}

/// Joins the capture threads within one shared grace (a thread left blocked in its source
/// is left behind) and the backend thread; with the sink's results, how each part ended.
fn join_all(
    captures: Vec<thread::JoinHandle<Result<()>>>,
    process: thread::JoinHandle<(ProcessStats, Result<()>)>,
    several: bool,
    (sink, finish): (Result<()>, Result<()>),
) -> Result<Ended> {
    let grace = Instant::now() + CAPTURE_GRACE;
    Ok(Ended {
        captures: captures
            .into_iter()
            .map(|c| join_within(c, grace.saturating_duration_since(Instant::now())))
            .collect(),
        several,
        process: process
            .join()
            .map_err(|_| anyhow!("the backend thread panicked"))?,
        sink,
        finish,
    })
}

/// The run's summary: every input's counts (capture side and sink side), the sink's, the
/// trace and the reloads.
fn summarize(
    shared: &Shared,
    sink: &mut dyn Sink,
    sunk: Sunk,
    elapsed: Duration,
    opts: &Options,
) -> Summary {
    let Sunk {
        mut stats,
        per_input,
        trace,
        ..
    } = sunk;
    stats.pauses = shared.pauses.load(Ordering::SeqCst);
    let report = sink.report();
    stats.stored = report.stored;
    stats.streams = report.streams.clone();
    stats.mosaic = report.mosaic.clone();
    let inputs = shared
        .inputs
        .iter()
        .zip(per_input)
        .enumerate()
        .map(|(i, (c, mine))| InputStats {
            name: c.name.clone(),
            captured: c.captured.load(Ordering::SeqCst),
            dropped: c.dropped.load(Ordering::SeqCst),
            read_ms: c.read_us.load(Ordering::SeqCst) as f64 / 1000.0,
            consumed: mine.consumed,
            stored: report.of_input(i),
            latency: mine.latency,
            ended: c.ended.lock().ok().and_then(|e| e.clone()),
            reconnects: c.health.get().map_or(0, |h| h.reconnects()),
            recorded: None,
        })
        .collect();
    Summary {
        input: shared.input(),
        inputs,
        backend: shared.backend.lock().map(|b| b.clone()).unwrap_or_default(),
        sink: sink.verb().to_string(),
        elapsed,
        capture: CaptureStats {
            captured: shared.total(|c| &c.captured),
            dropped: shared.total(|c| &c.dropped),
            read_ms: shared.total(|c| &c.read_us) as f64 / 1000.0,
        },
        process: ProcessStats::default(),
        sink_stats: stats,
        trace,
        reloads: opts.reload.as_ref().map(|r| r.log()).unwrap_or_default(),
        left_behind: false,
        busy: busy_threads(shared, elapsed),
    }
}

/// The sink's, the backend's and the busiest capture thread's CPU time over `elapsed`,
/// busiest first (`Summary::busy`).
fn busy_threads(shared: &Shared, elapsed: Duration) -> Vec<(String, f64)> {
    let Ok(cpu) = shared.cpu.lock() else {
        return Vec::new();
    };
    let wall = elapsed.as_secs_f64().max(1e-9);
    let share = |c: &ThreadCpu| (c.user_s + c.sys_s) / wall;
    let mut busy: Vec<(String, f64)> = cpu
        .iter()
        .filter(|(name, _)| !name.starts_with("capture"))
        .map(|(name, c)| (name.clone(), share(c)))
        .collect();
    let capture = cpu
        .iter()
        .filter(|(name, _)| name.starts_with("capture"))
        .map(|(name, c)| (name.clone(), share(c)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    busy.extend(capture);
    busy.sort_by(|a, b| b.1.total_cmp(&a.1));
    busy
}

/// The most inputs one run takes: past the 64 of the first walls, bounded in practice by
/// memory (every input's ring is added up: `budget::check_rings`) and file descriptors
/// (`budget::make_room_for_fds`); this only keeps an absurd command line from starting.
pub const MAX_INPUTS: usize = 1024;

/// Input `input`'s ring: slots for `size` frames in `formats`, tagged with the input (the
/// backend attaches each as it first passes `submit`).
fn ring_of(
    input: InputId,
    ring: usize,
    (size, out): (FrameSize, FrameSize),
    formats: Formats,
) -> Vec<Slot> {
    let mut slots = ring::allocate_resized(ring, size, out, formats);
    for slot in &mut slots {
        slot.desc.input = input;
    }
    slots
}

/// What a capture thread needs to know of its run.
#[derive(Clone, Copy)]
struct Capturing {
    /// Its input's index (`InputId`).
    input: usize,
    /// Stop after this many frames.
    frames: Option<u64>,
    /// Other inputs run beside it: reaching `frames` ends this input, not the run.
    several: bool,
}

/// Starts an input's capture thread: free slots in, filled slots out, until the input ends,
/// `frames` are read or a stop; why it ended is kept in the input's counters.
fn spawn_capture(
    source: Arrival,
    (free, refill): (Receiver<Slot>, (Sender<Slot>, usize)),
    filled: Sender<Slot>,
    how: Capturing,
    shared: &Arc<Shared>,
) -> Result<thread::JoinHandle<Result<()>>> {
    let shared = shared.clone();
    Ok(thread::Builder::new()
        .name(format!("capture {}", how.input))
        .spawn(move || {
            let cpu = ThreadCpu::now();
            let r = match arrive(source, refill, how.input, &shared) {
                Ok(Some(mut source)) => capture_loop(source.as_mut(), &free, filled, how, &shared),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            let why = match &r {
                Ok(()) if shared.stop.is_requested() => "stopped".to_string(),
                Ok(()) => "ended".to_string(),
                Err(e) => format!("failed: {e:#}"),
            };
            if let Ok(mut ended) = shared.inputs[how.input].ended.lock() {
                *ended = Some(why);
            }
            shared.note_cpu(format!("capture {}", how.input), cpu);
            // The ring's slots (page-locked) go with the process where it leaves them.
            crate::backend::teardown::keep_or_drop(free);
            r
        })?)
}

/// The input's source once it is open (None: a stop came first); a late input's ring is
/// made here, its slots tagged with `input` and put in its free list (`refill`).
fn arrive(
    source: Arrival,
    (refill, ring): (Sender<Slot>, usize),
    input: usize,
    shared: &Shared,
) -> Result<Option<Box<dyn Source>>> {
    match source {
        Arrival::Open { source, .. } => Ok(Some(source)),
        Arrival::Late { name, open } => {
            let Some((source, formats)) = open(&shared.stop)? else {
                return Ok(None);
            };
            // Its reconnects count from now on, as an input open at the start's do.
            if let Some(health) = source.health() {
                let _ = shared.inputs[input].health.set(health);
            }
            shared.inputs[input].open.store(true, Ordering::SeqCst);
            crate::info!(
                "{name} opened late and joins the run: {}",
                source.describe()
            );
            let (t, size) = (Instant::now(), source.size());
            let out = (shared.resize)(size);
            for slot in ring_of(InputId(input as u16), ring, (size, out), formats) {
                refill
                    .send(slot)
                    .expect("its free list has room for its ring");
            }
            slow(format_args!("input {input}: making its ring"), t.elapsed());
            Ok(Some(source))
        }
    }
}

/// Starts the backend thread: filled slots in, processed slots out in order, controls
/// applied between frames; an error stops the run.
fn spawn_backend(
    mut backend: Box<dyn Backend>,
    filled: Receiver<Slot>,
    done: (Sender<Slot>, Pictures),
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
            let cpu = ThreadCpu::now();
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
            shared.note_cpu("backend".into(), cpu);
            crate::backend::teardown::keep_or_drop(backend);
            (st, r)
        })?)
}

/// How each part of a run ended, once every thread is joined or left behind.
struct Ended {
    /// Each capture thread: joined (its result, or its panic), or None when left blocked.
    captures: Vec<Option<thread::Result<Result<()>>>>,
    /// There were several inputs (an input's error then names it).
    several: bool,
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
        let mut capture = Ok(());
        for (i, joined) in self.captures.into_iter().enumerate() {
            let which = match self.several {
                true => format!("input {i} ({})", summary.inputs[i].name),
                false => "capture".to_string(),
            };
            let r = match joined {
                Some(Ok(r)) => r.context(which),
                Some(Err(_)) => Err(anyhow!("{which}: the capture thread panicked")),
                None => {
                    summary.left_behind = true;
                    let what = match self.several {
                        true => which,
                        false => "the input".into(),
                    };
                    crate::info!(
                        "{what} was still blocked in a read {} ms after the stop; not waiting for it",
                        CAPTURE_GRACE.as_millis()
                    );
                    Ok(())
                }
            };
            capture = capture.and(r);
        }
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

const POLL: Duration = Duration::from_millis(20);

/// Pictures of the mosaic queued between the backend and the sink thread.
const PICTURES_QUEUED: usize = 2;

/// The backend thread's ends of the pictures' queue: where it sends, and a receiver of its
/// own to drop the oldest picture when the queue is full.
type Pictures = (Sender<Picture>, Receiver<Picture>);

/// How long a stop waits for a frame the capture thread is still reading, and then for the
/// thread itself, before going on without it.
pub const CAPTURE_GRACE: Duration = Duration::from_millis(500);

/// Joins `thread` if it ends within `limit` (after each earlier thread's wait: all of a
/// run's capture threads share one grace); None when it is left running.
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

/// The longest a live source waits for a free slot before it drops a frame, once its
/// patience is spent.
const LIVE_GRACE: Duration = Duration::from_millis(50);

/// A live source's patience: how long it may still wait for a free slot, in all, past a
/// frame's time (`Source::burst_budget`). A burst (the frames a camera buffered while it
/// was probed, decoded at once as a large wall joins) spends it and passes whole; it comes
/// back at a tenth of real time, so a pipeline that stays behind soon drops frames after a
/// frame's wait, and what comes out stays current.
struct Patience {
    budget: Duration,
    left: Duration,
    since: Instant,
}

impl Patience {
    fn new(budget: Duration) -> Self {
        Self {
            budget,
            left: budget,
            since: Instant::now(),
        }
    }

    /// How long to wait for the next free slot: `frame` (a frame's time), or longer while
    /// patience is left.
    fn wait(&mut self, frame: Duration) -> Duration {
        let now = Instant::now();
        self.left = (self.left + (now - self.since) / 10).min(self.budget);
        self.since = now;
        frame.max(self.left)
    }

    /// `waited` was spent waiting for a slot, of which a frame's time (`frame`) is free.
    fn spend(&mut self, waited: Duration, frame: Duration) {
        self.left = self.left.saturating_sub(waited.saturating_sub(frame));
    }
}

fn capture_loop(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: Sender<Slot>,
    how: Capturing,
    shared: &Shared,
) -> Result<()> {
    let captured = capture_frames(source, free, &filled, &how, shared)?;
    if shared.stop.is_requested() && source.is_live() && source.begin_drain() {
        drain(source, free, &filled, (&how, captured), shared)?;
    }
    Ok(())
}

/// The most frames read out of a live source after a stop (`drain`): a decoder's delay and
/// a demuxer's last packet are a few frames.
const DRAIN_MOST: u64 = 64;

/// After a stop: the frames still inside a live source (`Source::begin_drain`) are read and
/// sent on as any other, so that a camera's last frame and packet are not lost; each waits
/// at most `POLL` for a slot, and at most `DRAIN_MOST` are read.
fn drain(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: &Sender<Slot>,
    (how, mut captured): (&Capturing, u64),
    shared: &Shared,
) -> Result<()> {
    let mine = &shared.inputs[how.input];
    for _ in 0..DRAIN_MOST {
        if how.frames.is_some_and(|n| captured >= n) {
            return Ok(());
        }
        let Ok(mut slot) = free.recv_timeout(POLL) else {
            return Ok(());
        };
        if read_frame(source, &mut slot, (how.input, captured), true, mine)? == Read::End {
            return Ok(());
        }
        if !pass_on(slot, source, &mut captured, (mine, shared), filled) {
            return Ok(());
        }
    }
    Ok(())
}

/// Numbers a frame just read and sends it to the backend, counted; false where the backend
/// stopped (its error is reported by it).
fn pass_on(
    mut slot: Slot,
    source: &mut dyn Source,
    captured: &mut u64,
    (mine, shared): (&Counters, &Shared),
    filled: &Sender<Slot>,
) -> bool {
    slot.desc.index = *captured;
    slot.desc.pts = source.pts();
    *captured += 1;
    mine.captured.store(*captured, Ordering::SeqCst);
    // The run's count, kept here rather than summed over every input for each frame the
    // sink takes (`Progress`).
    shared.progress.0[0].fetch_add(1, Ordering::Relaxed);
    filled.send(slot).is_ok()
}

/// Reads `source` into free slots and sends them on until it ends, `how.frames` are read,
/// or a stop; the frames read.
fn capture_frames(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: &Sender<Slot>,
    how: &Capturing,
    shared: &Shared,
) -> Result<u64> {
    let live = source.is_live();
    shared.inputs[how.input].live.store(live, Ordering::Relaxed);
    // How long a live source waits for a free slot before it drops a frame: one frame's
    // time, so that a frame never waits longer than the next one would come, and longer
    // while its patience lasts (a source that buffers what arrives meanwhile): a burst (the
    // frames an input decoded while it was probed, a stall of the network) then goes
    // through at the pipeline's pace instead of being dropped.
    let grace = Duration::from_secs_f64(1.0 / source.fps().filter(|f| *f >= 1.0).unwrap_or(30.0))
        .min(LIVE_GRACE);
    let mut patience = Patience::new(source.burst_budget());
    let mine = &shared.inputs[how.input];
    let mut captured = 0;
    while !shared.stop.is_requested() {
        if how.frames.is_some_and(|n| captured >= n) {
            if !how.several {
                shared.stop.request(); // --frames reached: a stop, not the end of the input
            }
            return Ok(captured);
        }
        // Paused: one frame goes through when a step was asked for.
        if shared.paused.load(Ordering::SeqCst) && !shared.step.swap(false, Ordering::SeqCst) {
            // Paused: a live source keeps being drained so that it resumes with fresh frames.
            if live && source.skip()? == Read::End {
                return Ok(captured);
            }
            if !live {
                thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let mut slot = match free.try_recv() {
            Ok(slot) => slot,
            Err(TryRecvError::Disconnected) => return Ok(captured),
            Err(TryRecvError::Empty) if live => {
                match wait_live(free, grace, &mut patience, &shared.stop) {
                    Ok(slot) => slot,
                    Err(RecvTimeoutError::Disconnected) => return Ok(captured),
                    Err(RecvTimeoutError::Timeout) => {
                        // Ring full for a frame's time, patience spent: the pipeline is behind,
                        // and a live source drops this frame so that what is shown stays fresh.
                        if source.skip()? == Read::End {
                            return Ok(captured);
                        }
                        mine.dropped.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                }
            }
            Err(TryRecvError::Empty) => match free.recv_timeout(POLL) {
                Ok(slot) => slot,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(captured),
            },
        };
        if let Some(due) = source.due() {
            if shared.stop.sleep_until(due) {
                return Ok(captured);
            }
        }
        if read_frame(source, &mut slot, (how.input, captured), live, mine)? == Read::End {
            return Ok(captured);
        }
        if !pass_on(slot, source, &mut captured, (mine, shared), filled) {
            return Ok(captured);
        }
    }
    Ok(captured)
}

/// Reads `source`'s next frame into `slot` (frame `at.1` of input `at.0`), timing it: into
/// the slot's buffer, or described where it was left (a frame lent in device or page-locked
/// memory, whose lease is dropped once the backend has copied it).
fn read_frame(
    source: &mut dyn Source,
    slot: &mut Slot,
    at: (usize, u64),
    live: bool,
    mine: &Counters,
) -> Result<Read> {
    let t = Instant::now();
    slot.stamps.read_start = t;
    if source.read(&mut slot.input)? == Read::End {
        return Ok(Read::End);
    }
    slot.stamps.captured = Instant::now();
    let took = slot.stamps.captured - t;
    slot.stamps.capture_ms = ms(took);
    if !live {
        // (A live source's read waits for the network: its pace, not a stall.)
        slow(format_args!("input {}: reading frame {}", at.0, at.1), took);
    }
    mine.read_us
        .fetch_add(took.as_micros() as u64, Ordering::SeqCst);
    (slot.desc.memory, slot.desc.planes) = source.lent().unwrap_or_else(|| {
        (
            crate::desc::Memory::Host,
            crate::desc::Planes::packed(slot.desc.format, slot.desc.size),
        )
    });
    Ok(Read::Frame)
}

/// A free slot for a live source: waits a frame's time, or longer while `patience` lasts;
/// a stop ends the wait as a closed ring does (`Disconnected`), within `POLL`.
fn wait_live(
    free: &Receiver<Slot>,
    frame: Duration,
    patience: &mut Patience,
    stop: &Stop,
) -> Result<Slot, RecvTimeoutError> {
    let t = Instant::now();
    let limit = patience.wait(frame);
    let got = loop {
        let left = limit.saturating_sub(t.elapsed());
        match free.recv_timeout(left.min(POLL)) {
            Err(RecvTimeoutError::Timeout) if stop.is_requested() => {
                break Err(RecvTimeoutError::Disconnected)
            }
            Err(RecvTimeoutError::Timeout) if t.elapsed() < limit => continue,
            got => break got,
        }
    };
    patience.spend(t.elapsed(), frame);
    got
}

fn backend_loop(
    backend: &mut dyn Backend,
    filled: Receiver<Slot>,
    (done, (pictures, older)): (Sender<Slot>, Pictures),
    controls: Receiver<Control>,
    keep: bool,
    shared: &Shared,
    st: &mut ProcessStats,
) -> Result<()> {
    // The mosaic's pictures the backend composed (where it does): those come down are
    // passed on; `Fetch::Idle` and `Fetch::Last` bring down what the last frames composed.
    // The newest picture always gets in: where the queue is full, its oldest is dropped
    // (the sink shows only the newest anyway), so the run's last picture is never lost.
    let pass_pictures = |backend: &mut dyn Backend, fetch: Fetch| -> Result<()> {
        while let Some(p) = backend.picture(fetch)? {
            if let Err(TrySendError::Full(p)) = pictures.try_send(p) {
                let _ = older.try_recv();
                let _ = pictures.try_send(p);
            }
        }
        Ok(())
    };
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
        pass_pictures(backend, Fetch::Ready)?;
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
            let t = Instant::now();
            let completed = backend.complete(true)?;
            slow(
                format_args!("backend: waiting for a frame on the GPU"),
                t.elapsed(),
            );
            match completed {
                Some(slot) => forward(slot, st),
                None if !input_open => return pass_pictures(backend, Fetch::Last),
                None => {}
            }
            continue;
        }
        if busy > 0 {
            // Frames on the GPU: poll for input and completion without sleeping, so that a
            // finished frame is handed on at once (a timed sleep costs its timer slack,
            // tens of microseconds, on every frame of a live source).
            match filled.try_recv() {
                Ok(slot) => submit(backend, slot)?,
                Err(TryRecvError::Empty) => thread::yield_now(),
                Err(TryRecvError::Disconnected) => input_open = false,
            }
            continue;
        }
        // The GPU is idle: the last frames' tiles come down before the thread waits.
        pass_pictures(backend, Fetch::Idle)?;
        match filled.recv_timeout(POLL) {
            Ok(slot) => submit(backend, slot)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => input_open = false,
        }
    }
}

/// Hands `slot` to the backend (told with `-v` where that was slow).
fn submit(backend: &mut dyn Backend, slot: Slot) -> Result<()> {
    let (t, input) = (Instant::now(), slot.desc.input.0);
    backend.submit(slot)?;
    slow(
        format_args!("backend: taking a frame of input {input}"),
        t.elapsed(),
    );
    Ok(())
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
    /// The mosaic as the backend composes it (where it does), newest last.
    pictures: &'a Receiver<Picture>,
    /// Each input's free list, by `InputId`.
    free: &'a [Sender<Slot>],
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

/// What the sink loop counts of one input.
#[derive(Clone, Default)]
struct PerInput {
    /// Its frames the sink took.
    consumed: u64,
    /// Capture → out of the sink, per frame.
    latency: Latency,
}

fn sink_loop(
    sink: &mut dyn Sink,
    ends: &SinkEnds,
    shared: &Shared,
    (st, per_input): (&mut SinkStats, &mut [PerInput]),
    mut traces: Traces,
) -> Result<()> {
    let mut live = live_of(shared);
    let mut told: Option<Instant> = None;
    let take_pictures = |sink: &mut dyn Sink| -> Result<()> {
        match ends.pictures.try_iter().last() {
            Some(p) => sink.composed(&p),
            None => Ok(()),
        }
    };
    loop {
        // The watchdog of a signalled stop sees this loop turn (a sink call that blocks
        // stops it).
        crate::stop::beat();
        take_pictures(sink)?;
        match ends.done.recv_timeout(POLL) {
            Ok(mut slot) => {
                if status_due(&mut told, per_input.len()) {
                    refresh(&mut live, shared, per_input);
                    if let Ok(b) = shared.backend.lock() {
                        live.backend.clone_from(&b);
                    }
                    if let Some(r) = ends.reloader {
                        live.note = r.note();
                    }
                    sink.status(&live);
                }
                let (flow, t, end) = consume(sink, &slot, &mut live, shared)?;
                // A frame lent on the device is the sink's now (or given back).
                slot.output_memory = crate::desc::Memory::Host;
                st.sink_ms += ms(end - t);
                st.consumed += 1;
                let mine = &mut per_input[slot.desc.input.0 as usize];
                mine.consumed += 1;
                mine.latency.record(ms(end - slot.stamps.captured));
                if !slot.spans.is_empty() {
                    trace_output(&mut slot, (t, end), &mut traces);
                    live.timeline = sink
                        .wants_timeline()
                        .then(|| traces.recent.layout(STRIP_FRAMES).map(Arc::new))
                        .flatten();
                }
                let _ = ends.free[slot.desc.input.0 as usize].send(slot);
                act(flow, shared, ends);
            }
            Err(RecvTimeoutError::Timeout) => {
                refresh(&mut live, shared, per_input);
                sink.status(&live);
                act(sink.idle()?, shared, ends);
            }
            // The backend is done: the picture it brought down last goes to the sink.
            Err(RecvTimeoutError::Disconnected) => return take_pictures(sink),
        }
    }
}

/// How often the sink is told a run's figures with several inputs (`status_due`).
const STATUS_EVERY: Duration = Duration::from_millis(10);

/// Whether the sink is told the figures before this frame: before every frame of a run of
/// one input; with several, at most every `STATUS_EVERY` (`told`: when it last was), since
/// reading every input's figures, and the mosaic's and the browser view's use of them, cost
/// in proportion to the inputs, and their frames come as many times as often (at 150
/// cameras the sink thread spent 0.3 ms a frame and was the run's bound).
fn status_due(told: &mut Option<Instant>, inputs: usize) -> bool {
    let due = inputs <= 1 || told.is_none_or(|t| t.elapsed() >= STATUS_EVERY);
    if due {
        *told = Some(Instant::now());
    }
    due
}

/// The figures the sink shows as the run goes (the overlay, the browser view), at the start:
/// the run's, and each input's (one entry for a run of one input).
fn live_of(shared: &Shared) -> Live {
    let mut live = Live::default();
    live.input = shared.input();
    live.inputs = shared
        .inputs
        .iter()
        .map(|c| InputLive {
            name: c.name.clone(),
            ..InputLive::default()
        })
        .collect();
    live
}

/// `live`'s counts as the threads have them now (each input's latency figures at most every
/// `LatencyNow::EVERY`: a quantile walks its histogram).
fn refresh(live: &mut Live, shared: &Shared, per_input: &[PerInput]) {
    live.dropped = shared.total(|c| &c.dropped);
    live.frames = shared.progress.0[1].load(Ordering::Relaxed);
    live.paused = shared.paused.load(Ordering::SeqCst);
    let latencies = live.latencies_due();
    for ((l, c), mine) in live.inputs.iter_mut().zip(&shared.inputs).zip(per_input) {
        l.captured = c.captured.load(Ordering::Relaxed);
        l.dropped = c.dropped.load(Ordering::Relaxed);
        l.live = c.live.load(Ordering::Relaxed);
        l.processed = mine.consumed;
        if l.ended.is_none() {
            l.ended = c.ended.lock().ok().and_then(|e| e.clone());
        }
        let health = c.health.get();
        l.state = health.and_then(|h| h.state());
        l.reconnects = health.map_or(0, |h| h.reconnects());
        l.down = match (&l.ended, c.open.load(Ordering::SeqCst)) {
            (Some(_), _) => None,
            // Not open yet: down since the process began opening it.
            (None, false) => Some(crate::stop::process_start().elapsed()),
            (None, true) => health.and_then(|h| h.down_for()),
        };
        if latencies {
            l.latency = LatencyNow::of(&mine.latency);
        }
        l.recording = c.recording.as_ref().map(|r| r.now());
    }
}

/// Hands `slot`'s processed frame to the sink (without its bytes where none were brought
/// down), counting it in the progress and `live`; what the sink asked for, and when its
/// call began and ended.
fn consume(
    sink: &mut dyn Sink,
    slot: &Slot,
    live: &mut Live,
    shared: &Shared,
) -> Result<(Flow, Instant, Instant)> {
    let t = Instant::now();
    let progress = &shared.progress.0;
    progress[1].fetch_add(1, Ordering::Relaxed);
    progress[3].store(live.dropped, Ordering::Relaxed);
    let desc = slot.output_desc();
    let bytes: &[u8] = match slot.output_skipped {
        true => &[],
        false => &slot.output,
    };
    let flow = sink.consume(&Frame { desc: &desc, bytes })?;
    let end = Instant::now();
    slow(format_args!("output: taking a frame"), end - t);
    progress[2].fetch_add(1, Ordering::Relaxed);
    let s = &slot.stamps;
    live.update(
        s.capture_ms,
        ms(s.done - s.submitted),
        slot.gpu.as_ref(),
        ms(end - t),
    );
    Ok((flow, t, end))
}

/// A traced frame (its backend spans are there): its capture and output (`t`..`end`) spans
/// join them, in the first frames' trace and in the ring.
fn trace_output(slot: &mut Slot, (t, end): (Instant, Instant), traces: &mut Traces) {
    let (seq, input) = (slot.seq(), slot.desc.input.0);
    let span = |track, kind, start, end| Span {
        track,
        kind,
        input,
        frame: seq,
        band: None,
        start,
        end,
    };
    let s = &slot.stamps;
    let mut spans = std::mem::take(&mut slot.spans);
    spans.push(span(
        Track::Capture(input),
        Kind::Capture,
        s.read_start,
        s.captured,
    ));
    spans.push(span(Track::Output, Kind::Output, t, end));
    if let Some(first) = traces
        .first
        .as_deref_mut()
        .filter(|_| seq < traces.first_frames)
    {
        first.spans.extend(spans.iter().cloned());
    }
    traces.recent.push(seq, spans);
}

/// Does what the sink asked for: quit, pause, step, a control for the backend, a reload.
fn act(flow: Flow, shared: &Shared, ends: &SinkEnds) {
    match flow {
        // The mosaic's own keys reach here only without a mosaic.
        Flow::Continue | Flow::NextTile | Flow::Alone | Flow::Pick { .. } => {}
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patience_lets_a_burst_through_then_drops_after_a_frame() {
        let frame = Duration::from_millis(33);
        let mut p = Patience::new(Duration::from_secs(1));
        // A burst: a wait of 0.6 s is patient, and spends 0.6 s less a frame's time.
        assert!(p.wait(frame) >= Duration::from_millis(999));
        p.spend(Duration::from_millis(600), frame);
        let left = p.wait(frame);
        assert!(left > Duration::from_millis(420) && left < Duration::from_millis(450));
        // Spent: a frame's wait, no more.
        p.spend(Duration::from_secs(2), frame);
        assert_eq!(p.wait(frame), frame);
        // A frame's wait or less spends nothing.
        let mut q = Patience::new(Duration::from_millis(500));
        q.spend(frame, frame);
        assert!(q.wait(frame) >= Duration::from_millis(499));
        // None to start with (a camera): a frame's wait.
        assert_eq!(Patience::new(Duration::ZERO).wait(frame), frame);
    }

    #[test]
    fn the_sink_is_told_the_figures_of_several_inputs_at_most_every_10_ms() {
        let mut told = None;
        // One input: before every frame.
        assert!((0..3).all(|_| status_due(&mut told, 1)));
        // Several: the first frame, then not again within STATUS_EVERY.
        let mut told = None;
        assert!(status_due(&mut told, 150));
        assert!(!status_due(&mut told, 150));
        told = told.map(|t| t - STATUS_EVERY);
        assert!(status_due(&mut told, 150));
    }

    #[test]
    fn patience_comes_back_at_a_tenth_of_real_time() {
        let frame = Duration::from_millis(20);
        let mut p = Patience::new(Duration::from_secs(1));
        p.spend(Duration::from_secs(5), frame);
        p.since -= Duration::from_secs(3); // three seconds later
        let w = p.wait(frame);
        assert!(
            w >= Duration::from_millis(300) && w < Duration::from_millis(320),
            "{w:?}"
        );
        p.since -= Duration::from_secs(60); // and never more than the budget
        assert!(p.wait(frame) <= Duration::from_secs(1));
    }
}
