//! The threads and the channels between them: capture → backend → sink, and back to the
//! free list; one capture thread and one ring per input, one backend thread for all. Each
//! thread's loop is a file (`capture`, `backend`, `sink`) and the run's summary another
//! (`summary`); this file starts them, joins them, and holds what they share (`Shared`).
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
//! Inputs may also join and leave while the run goes (`joining`: a run started with `Joins`
//! keeps places for them; the sink is told of one that left once its last frame was taken,
//! `Sink::leave`, and its place is then vacant for the next input that joins).
//!
//! Invariants: the rings' slots are the only host frame buffers (allocated before the first
//! frame, each slot tagged with its input; an input that joins late, `Arrival::Late`, or
//! while the run goes, has its ring made by its capture thread once it opens), and the ring
//! bounds the frames in
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
//! ring only; an input that ends, fails or is removed ends alone (the others
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
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};

use crate::backend::{Backend, Control, Picture};
use crate::desc::InputId;
use crate::pixel::Formats;
use crate::reload::Reloader;
use crate::ring::Slot;
use crate::sink::Sink;
use crate::source::Source;
use crate::stats::{ms, ProcessStats, Summary, ThreadCpu};
use crate::stop::Stop;

mod backend;
mod capture;
mod joining;
mod sink;
mod summary;

pub use joining::{Joiner, Joins};

use backend::{spawn_backend, BackendEnds, PICTURES_QUEUED};
use capture::{ring_of, spawn_captures};
use sink::{sink_side, SinkEnds};
use summary::summarize;

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
    /// Places for inputs that join while the run goes (`joining`), where it takes them.
    pub joins: Option<Joins>,
}

/// One input's counts, kept where a capture thread left behind still counts. A place
/// whose input left is made vacant again (`vacate`) for the next input that joins.
struct Counters {
    /// The input's description (set as it joins, for a place taken while the run goes).
    name: Mutex<String>,
    /// It was asked to leave the run (`Joiner::remove`): its capture ends as at its end.
    removed: AtomicBool,
    /// Asked when it leaves, or when the run stops: what its opening waits on (a new one
    /// for each input the place takes).
    leave: Mutex<Stop>,
    /// Frames its capture thread read, and the microseconds its reads took.
    captured: AtomicU64,
    read_us: AtomicU64,
    /// Frames a live input discarded because its ring was full.
    dropped: AtomicU64,
    /// Why its capture thread ended (None while it runs).
    ended: Mutex<Option<String>>,
    /// A reconnecting input's state and reconnects (set once it is open: at the start, or
    /// when a late input joins).
    health: Mutex<Option<Arc<crate::source::reconnect::Health>>>,
    /// Whether it is open (a late input: once it joined).
    open: AtomicBool,
    /// Whether it is live (its frames are dropped rather than waited for; said by its
    /// capture thread as it starts).
    live: AtomicBool,
    /// Its recording's figures, where it is recorded.
    recording: Mutex<Option<Arc<crate::stats::RecordLive>>>,
    /// Times the place was taken by an input that joined (`take`).
    taken: AtomicU64,
    /// Its input left and its figures went to the summary's (`Joiner::vacate`): the place
    /// waits for another.
    vacant: AtomicBool,
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
    /// The places of `inputs` taken (the rest wait for inputs that join while the run goes).
    used: std::sync::atomic::AtomicUsize,
    /// `--frames`: each input ends after this many (`give_up_down`).
    frames: Option<u64>,
}

impl Shared {
    /// Files the calling thread's CPU since `start` under `name`.
    fn note_cpu(&self, name: String, start: Option<ThreadCpu>) {
        if let (Some(start), Some(now), Ok(mut cpu)) = (start, ThreadCpu::now(), self.cpu.lock()) {
            cpu.push((name, now.since(start)));
        }
    }

    fn total(&self, of: impl Fn(&Counters) -> &AtomicU64) -> u64 {
        self.in_use()
            .iter()
            .map(|c| of(c).load(Ordering::SeqCst))
            .sum()
    }

    /// The inputs that took a place (those of the start, and those that joined since), by
    /// `InputId`.
    fn in_use(&self) -> &[Counters] {
        &self.inputs[..self.used.load(Ordering::SeqCst).min(self.inputs.len())]
    }

    /// The run's input, for the summary and the overlay: the one input's description, or
    /// how many there are.
    fn input(&self) -> String {
        let inputs = self.in_use();
        match inputs.len() {
            1 => inputs[0].name(),
            _ => format!(
                "{} inputs",
                inputs
                    .iter()
                    .filter(|c| !c.vacant.load(Ordering::SeqCst))
                    .count()
            ),
        }
    }

    /// Asks every input's opening to give up (a stop).
    fn leave_all(&self) {
        for c in &self.inputs {
            c.leave().request();
        }
    }

    /// With `--frames`, once every input that is up has ended (reached its count, or its
    /// end), those that are down (reconnecting, or not open yet) are given up: they would
    /// never reach the count, and the run would never end.
    fn give_up_down(&self) {
        if self.frames.is_none() {
            return;
        }
        let inputs = self.in_use();
        let ended = Counters::has_ended;
        let down = |c: &Counters| {
            !c.open.load(Ordering::SeqCst) || c.health().is_some_and(|h| h.down_for().is_some())
        };
        let settled = inputs.iter().all(|c| ended(c) || down(c));
        if !settled || !inputs.iter().any(&ended) {
            return;
        }
        for c in inputs.iter().filter(|c| !ended(c)) {
            if let Some(h) = c.health() {
                h.give_up();
            }
            c.leave().request();
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

/// How a late input's capture thread waits for its source (`Arrival::Late`), giving up when
/// the `Stop` it is handed is asked (a stop of the run, or the input's leaving).
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
    let spare = places_for(&inputs, opts)?;
    // A signalled stop that stops progressing in here is ended by the stop watchdog.
    let _watched = crate::stop::Watched::start();
    let several = inputs.len() > 1;
    let resize = backend.resizer();
    let (mut free_txs, mut free_rxs) = free_lists(&inputs, &resize);
    let shared = Arc::new(Shared::new(
        stop,
        backend.describe(),
        &inputs,
        (opts.progress.clone(), resize.clone(), spare),
        opts.frames,
    ));
    let backend_tracks = backend.tracks();
    let slots_total: usize = inputs.iter().map(|i| i.ring).sum();
    let ((filled_tx, filled_rx), (done_tx, done_rx)) = slot_channels(slots_total, spare);
    let joiner = joiner_of(&shared, (&mut free_txs, &filled_tx), opts);
    free_rxs.truncate(inputs.len());
    let (control_tx, control_rx) = unbounded::<Control>();
    let (picture_tx, picture_rx) = bounded::<Picture>(PICTURES_QUEUED);
    let started = Instant::now();
    let reloading = start_reloading(opts, &control_tx)?;
    let captures = spawn_captures(inputs, (free_rxs, &free_txs), filled_tx, opts, &shared)?;
    let channels = BackendEnds {
        filled: filled_rx,
        done: done_tx,
        pictures: picture_tx,
        older: picture_rx.clone(),
        controls: control_rx,
    };
    let process = spawn_backend(backend, channels, opts, &shared)?;
    let ends = SinkEnds {
        done: &done_rx,
        pictures: &picture_rx,
        free: &free_txs,
        controls: control_tx,
        reload: reloading.as_ref(),
        reloader: opts.reload.as_deref(),
    };
    let mut sunk = sink_side(
        sink,
        ends,
        &shared,
        (started, backend_tracks),
        (opts, joiner.as_deref()),
    );
    drop(reloading);
    if sunk.result.is_err() {
        stop.request();
        // Keep slots moving so that the other threads can finish.
        drain(&done_rx, &free_txs);
    }
    // The run's time ends here: a window may keep its last frame up in `finish`.
    let elapsed = started.elapsed();
    let finish = sink.finish().context("finishing the output");
    let finished = Instant::now();
    shared.note_cpu("sink".into(), sunk.cpu);
    drop(free_txs);
    let sunk_result = std::mem::replace(&mut sunk.result, Ok(()));
    shared.leave_all();
    let (captures, left_failed, names) = every_capture(captures, joiner.as_deref(), &shared);
    let several = several || captures.len() > 1;
    let mut ended = join_all(captures, process, several, (sunk_result, finish))?;
    ended.left_failed = left_failed;
    ended.names = names;
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
        (progress, resize, spare): (Arc<Progress>, crate::backend::Resizer, usize),
        frames: Option<u64>,
    ) -> Self {
        Self {
            frames,
            resize,
            stop: stop.clone(),
            paused: AtomicBool::new(false),
            step: AtomicBool::new(false),
            pauses: AtomicU64::new(0),
            backend: Mutex::new(backend),
            inputs: inputs
                .iter()
                .map(Counters::of)
                .chain((0..spare).map(|_| Counters::vacant()))
                .collect(),
            cpu: Mutex::new(Vec::new()),
            progress,
            used: std::sync::atomic::AtomicUsize::new(inputs.len()),
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
    /// A place for an input that joins while the run goes (`joining`).
    fn vacant() -> Self {
        Self {
            name: Mutex::new(String::new()),
            removed: AtomicBool::new(false),
            leave: Mutex::new(Stop::new()),
            captured: AtomicU64::new(0),
            read_us: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            ended: Mutex::new(None),
            health: Mutex::new(None),
            open: AtomicBool::new(false),
            live: AtomicBool::new(false),
            recording: Mutex::new(None),
            taken: AtomicU64::new(0),
            vacant: AtomicBool::new(false),
        }
    }

    /// Its description (empty for a place no input took yet).
    fn name(&self) -> String {
        self.name.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// What its opening waits on, and its capture ends at.
    fn leave(&self) -> Stop {
        self.leave.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Its reconnects and state, where it reconnects.
    fn health(&self) -> Option<Arc<crate::source::reconnect::Health>> {
        self.health.lock().ok()?.clone()
    }

    /// Its recording's figures, where it is recorded.
    fn recording(&self) -> Option<Arc<crate::stats::RecordLive>> {
        self.recording.lock().ok()?.clone()
    }

    /// Whether its capture thread has ended (or never started).
    fn has_ended(&self) -> bool {
        self.ended.lock().map(|e| e.is_some()).unwrap_or(true)
    }

    /// Takes the place for input `name` (recorded where `recording` is given), its counts
    /// from zero: the place is new, or its last input left and was drained (`vacate`).
    fn take(&self, name: String, recording: Option<Arc<crate::stats::RecordLive>>) {
        if let Ok(mut n) = self.name.lock() {
            *n = name;
        }
        if let Ok(mut r) = self.recording.lock() {
            *r = recording;
        }
        if let Ok(mut h) = self.health.lock() {
            *h = None;
        }
        if let Ok(mut l) = self.leave.lock() {
            *l = Stop::new();
        }
        if let Ok(mut e) = self.ended.lock() {
            *e = None;
        }
        for n in [&self.captured, &self.read_us, &self.dropped] {
            n.store(0, Ordering::SeqCst);
        }
        for b in [&self.removed, &self.open, &self.live, &self.vacant] {
            b.store(false, Ordering::SeqCst);
        }
        self.taken.fetch_add(1, Ordering::SeqCst);
    }

    /// An input's counts at the start: its name, and its health where it is open (a late
    /// input's is set when it joins, `arrive`).
    fn of(input: &Input) -> Self {
        let (name, health, open) = match &input.source {
            Arrival::Open { source, .. } => (source.describe(), source.health(), true),
            Arrival::Late { name, .. } => (name.clone(), None, false),
        };
        Self {
            open: AtomicBool::new(open),
            name: Mutex::new(name),
            health: Mutex::new(health),
            recording: Mutex::new(input.recording.clone()),
            ..Self::vacant()
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

/// The places a run keeps for inputs that join while it goes (`Options::joins`), checked
/// with its `inputs` against `MAX_INPUTS`.
fn places_for(inputs: &[Input], opts: &Options) -> Result<usize> {
    let spare = opts.joins.as_ref().map_or(0, |j| j.spare);
    crate::ensure_kept!(
        !inputs.is_empty() && inputs.len() + spare <= MAX_INPUTS,
        "a run has 1 to {MAX_INPUTS} inputs, not {} and {spare} places for more",
        inputs.len()
    );
    Ok(spare)
}

/// The joiner of a run that keeps places (`Options::joins`): each place's free list is made
/// and added to `free_txs`, and the joiner holds a sender of the `filled` channel.
fn joiner_of(
    shared: &Arc<Shared>,
    (free_txs, filled): (&mut Vec<Sender<Slot>>, &Sender<Slot>),
    opts: &Options,
) -> Option<Arc<Joiner>> {
    let joins = opts.joins.as_ref()?;
    let vacant = joining::vacant(joins.spare);
    free_txs.extend(vacant.iter().map(|(tx, _)| tx.clone()));
    let rxs = vacant.into_iter().map(|(_, rx)| rx).collect();
    Some(joins.start(shared, (free_txs.clone(), rxs), filled.clone(), opts))
}

/// Every capture thread of the run by its input's place (those of the start, and those of
/// the inputs that joined and are still in their places), the failures of the inputs that
/// left, and each thread's input's name; no input joins after.
fn every_capture(
    started: Vec<thread::JoinHandle<Result<()>>>,
    joiner: Option<&Joiner>,
    shared: &Shared,
) -> (Vec<joining::Capture>, Vec<anyhow::Error>, Vec<String>) {
    let mut captures: Vec<_> = started.into_iter().enumerate().collect();
    let mut left_failed = Vec::new();
    if let Some((threads, failed)) = joiner.map(Joiner::finish) {
        captures.extend(threads);
        left_failed = failed;
    }
    let names = captures
        .iter()
        .map(|(at, _)| shared.inputs[*at].name())
        .collect();
    (captures, left_failed, names)
}

/// Hands every slot the backend still gives back to its free list, until it ends.
fn drain(done: &Receiver<Slot>, free: &[Sender<Slot>]) {
    while let Ok(slot) = done.recv() {
        let _ = free[slot.desc.input.0 as usize].send(slot);
    }
}

/// The kernel file watcher, where the chain has files to watch; its swaps go to `controls`.
fn start_reloading(
    opts: &Options,
    controls: &Sender<Control>,
) -> Result<Option<crate::reload::Running>> {
    opts.reload
        .as_ref()
        .map(|r| r.start(controls.clone()))
        .transpose()
        .context("starting the kernel file watcher")
}

/// A channel of slots, both ends.
type SlotChannel = (Sender<Slot>, Receiver<Slot>);

/// The filled and done channels of a run of `slots` ring slots: every slot fits in each, so
/// that sending never waits (with `spare` places for inputs that join, they take however
/// many the rings hold).
fn slot_channels(slots: usize, spare: usize) -> (SlotChannel, SlotChannel) {
    let channel = || match spare {
        0 => bounded::<Slot>(slots),
        _ => unbounded::<Slot>(),
    };
    (channel(), channel())
}

/// Joins the capture threads within one shared grace (a thread left blocked in its source
/// is left behind) and the backend thread; with the sink's results, how each part ended.
fn join_all(
    captures: Vec<(usize, thread::JoinHandle<Result<()>>)>,
    process: thread::JoinHandle<(ProcessStats, Result<()>)>,
    several: bool,
    (sink, finish): (Result<()>, Result<()>),
) -> Result<Ended> {
    let grace = Instant::now() + CAPTURE_GRACE;
    Ok(Ended {
        captures: captures
            .into_iter()
            .map(|(at, c)| {
                (
                    at,
                    join_within(c, grace.saturating_duration_since(Instant::now())),
                )
            })
            .collect(),
        left_failed: Vec::new(),
        names: Vec::new(),
        several,
        process: process
            .join()
            .map_err(|_| anyhow!("the backend thread panicked"))?,
        sink,
        finish,
    })
}

/// The most inputs one run takes: past the 64 of the first walls, bounded in practice by
/// memory (every input's ring is added up: `budget::check_rings`) and file descriptors
/// (`budget::make_room_for_fds`); this only keeps an absurd command line from starting.
pub const MAX_INPUTS: usize = 1024;

/// How each part of a run ended, once every thread is joined or left behind.
struct Ended {
    /// Each capture thread, by its input's place: joined (its result, or its panic), or
    /// None when left blocked.
    captures: Vec<(usize, Option<thread::Result<Result<()>>>)>,
    /// The failures of inputs that left while the run went (their places taken again).
    left_failed: Vec<anyhow::Error>,
    /// The name of each capture thread's input, in the order of `captures`.
    names: Vec<String>,
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
        for ((i, joined), name) in self.captures.into_iter().zip(self.names) {
            let which = match self.several {
                true => format!("input {i} ({name})"),
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
        for e in self.left_failed {
            capture = capture.and(Err(e));
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
