//! Counters and timings each stage keeps for itself, merged into the exit summary (the
//! model); how the summary is written for people and machines is `render`.

mod render;

use std::time::{Duration, Instant};

/// Device time one frame spent in each stage, summed over its bands.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    /// Uploads, ms.
    pub h2d_ms: f64,
    /// Kernels, ms.
    pub kernel_ms: f64,
    /// Downloads, ms.
    pub d2h_ms: f64,
    /// First band's first copy start to last band's last copy end.
    pub span_ms: f64,
}

impl StageTimes {
    fn add(&mut self, o: &StageTimes) {
        self.h2d_ms += o.h2d_ms;
        self.kernel_ms += o.kernel_ms;
        self.d2h_ms += o.d2h_ms;
        self.span_ms += o.span_ms;
    }
}

/// One thread's CPU time and context switches (`getrusage(RUSAGE_THREAD)`) and its time
/// runnable but waiting for a CPU (`/proc/thread-self/schedstat`): where a stage's time goes
/// beyond its own timings (the kernel's share of a pipe's copies, the wake-ups, a machine
/// short of cores).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ThreadCpu {
    /// User time, s.
    pub user_s: f64,
    /// System (kernel) time, s.
    pub sys_s: f64,
    /// Times the thread gave the CPU up to wait (voluntary context switches).
    pub waits: i64,
    /// Times it was preempted (involuntary context switches).
    pub preempted: i64,
    /// Time it was ready to run and waited for a CPU, s (0 where the system doesn't say).
    pub queued_s: f64,
}

impl ThreadCpu {
    /// The calling thread's so far; None where the system can't say.
    pub fn now() -> Option<Self> {
        let mut r = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage writes one `rusage` into the pointer it is given, which points
        // to one; RUSAGE_THREAD asks for the calling thread's alone.
        if unsafe { libc::getrusage(libc::RUSAGE_THREAD, r.as_mut_ptr()) } != 0 {
            return None;
        }
        // SAFETY: getrusage succeeded, so it filled the struct (zeroed before anyway).
        let r = unsafe { r.assume_init() };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        Some(Self {
            user_s: secs(r.ru_utime),
            sys_s: secs(r.ru_stime),
            waits: r.ru_nvcsw,
            preempted: r.ru_nivcsw,
            queued_s: queued_ns().map_or(0.0, |ns| ns as f64 / 1e9),
        })
    }

    /// What the thread spent since `earlier` (a reading of the same thread).
    pub fn since(self, earlier: Self) -> Self {
        Self {
            user_s: self.user_s - earlier.user_s,
            sys_s: self.sys_s - earlier.sys_s,
            waits: self.waits - earlier.waits,
            preempted: self.preempted - earlier.preempted,
            queued_s: self.queued_s - earlier.queued_s,
        }
    }
}

/// The calling thread's time spent runnable on a run queue, ns: the second of the three
/// figures in `/proc/thread-self/schedstat` (Linux with schedstats; None elsewhere).
fn queued_ns() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    text.split_whitespace().nth(1)?.parse().ok()
}

impl std::fmt::Display for ThreadCpu {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "user {:.2} s, system {:.2} s, {} waits, {} preempted, {:.3} s waiting for a CPU",
            self.user_s, self.sys_s, self.waits, self.preempted, self.queued_s
        )
    }
}

/// What the capture thread counted.
#[derive(Clone, Debug, Default)]
pub struct CaptureStats {
    /// Frames read into the ring.
    pub captured: u64,
    /// Frames a live source discarded because the ring was full.
    pub dropped: u64,
    /// Time spent reading, ms.
    pub read_ms: f64,
}

/// What the processing thread counted.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    /// Frames the backend finished.
    pub processed: u64,
    /// Submit → output ready in host memory, summed.
    pub latency_ms: f64,
    /// Stage times summed over the sampled frames.
    pub stages: StageTimes,
    /// Frames whose stages were timed.
    pub stage_frames: u64,
    /// Per-frame (submitted, done) instants, kept only when asked (benchmarks).
    pub frames: Vec<(Instant, Instant)>,
    /// Changes applied while running (keys), in order.
    pub controls: Vec<String>,
}

impl ProcessStats {
    /// Counts one finished frame (and keeps its instants when `keep`).
    pub fn record(
        &mut self,
        submitted: Instant,
        done: Instant,
        stages: Option<&StageTimes>,
        keep: bool,
    ) {
        self.processed += 1;
        self.latency_ms += ms(done - submitted);
        if let Some(s) = stages {
            self.stages.add(s);
            self.stage_frames += 1;
        }
        if keep {
            self.frames.push((submitted, done));
        }
    }
}

/// What the sink thread counted.
#[derive(Clone, Debug, Default)]
pub struct SinkStats {
    /// Frames the sink took.
    pub consumed: u64,
    /// Time the sink spent, ms.
    pub sink_ms: f64,
    /// Times the user paused (space).
    pub pauses: u64,
    /// Frames the output really holds, where the sink checked (a video file after it was
    /// finalized); None where every consumed frame is stored.
    pub stored: Option<u64>,
    /// What each stream out sent and dropped.
    pub streams: Vec<StreamStats>,
    /// What the mosaic's recording holds, where the mosaic is recorded to a file.
    pub mosaic: Option<MosaicRecorded>,
    /// What the detector did (`--detect`): frames, inferences, events by kind.
    pub detection: Option<serde_json::Value>,
}

/// A recording of the mosaic (a run of several inputs, an `--output` without `{n}`): its
/// file and the pictures in it, counted like any file's (read back once finalized).
#[derive(Clone, Debug, serde::Serialize)]
pub struct MosaicRecorded {
    /// The output, described.
    pub to: String,
    /// Pictures the file holds (one a tick of the recording's rate, by the run's clock).
    pub pictures: u64,
}

/// What a stream out (network or HLS) did.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct StreamStats {
    /// Where it went.
    pub url: String,
    /// Frames handed to it.
    pub taken: u64,
    /// Frames encoded and sent.
    pub sent: u64,
    /// Frames dropped: the peer (or the encoder) was slower than the run, or away.
    pub dropped: u64,
    /// Times it connected again after losing the peer.
    pub reconnects: u64,
}

/// Latency of a stream of frames: in 10 µs steps below 1 ms, then in steps of 1 % up to
/// `Latency::TOP_MS` (later ones are counted there): fixed memory however long the run, 3 KB
/// an input (a wall of a thousand cameras keeps one for each).
#[derive(Clone, Debug)]
pub struct Latency {
    steps: Vec<u32>,
    frames: u64,
    total_ms: f64,
    max_ms: f64,
}

impl Default for Latency {
    fn default() -> Self {
        Self {
            steps: vec![0; Self::step_of(Self::TOP_MS) + 1],
            frames: 0,
            total_ms: 0.0,
            max_ms: 0.0,
        }
    }
}

impl Latency {
    /// The highest latency told apart.
    pub const TOP_MS: f64 = 1000.0;
    /// The steps below 1 ms.
    const FINE_MS: f64 = 0.01;
    const FINE_STEPS: usize = 100;
    /// The ratio of one step's top to its bottom, from 1 ms.
    const GROWTH: f64 = 1.01;

    /// The step `ms` falls in.
    fn step_of(ms: f64) -> usize {
        let ms = ms.clamp(0.0, Self::TOP_MS);
        match ms < 1.0 {
            true => (ms / Self::FINE_MS) as usize,
            false => Self::FINE_STEPS + (ms.ln() / Self::GROWTH.ln()) as usize,
        }
    }

    /// The top of step `i`, ms.
    fn top_of(i: usize) -> f64 {
        match i < Self::FINE_STEPS {
            true => (i + 1) as f64 * Self::FINE_MS,
            false => Self::GROWTH.powi((i - Self::FINE_STEPS + 1) as i32),
        }
    }

    /// Counts one frame's latency.
    pub fn record(&mut self, ms: f64) {
        let step = Self::step_of(ms).min(self.steps.len() - 1);
        self.steps[step] += 1;
        self.frames += 1;
        self.total_ms += ms;
        self.max_ms = self.max_ms.max(ms);
    }

    /// The mean, ms (0 with no frame).
    pub fn mean_ms(&self) -> f64 {
        avg(self.total_ms, self.frames)
    }

    /// The latency `q` (0..1) of the frames are at or below, ms, to the step above (0 with
    /// no frame).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.frames == 0 {
            return 0.0;
        }
        let want = ((q * self.frames as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &n) in self.steps.iter().enumerate() {
            seen += u64::from(n);
            // The last step holds every latency past the top: its figure is the largest.
            if seen >= want && i + 1 < self.steps.len() {
                return Self::top_of(i).min(self.max_ms);
            }
            if seen >= want {
                return self.max_ms;
            }
        }
        self.max_ms
    }
}

/// One input's part of a run (a run of several inputs has one each).
#[derive(Clone, Debug, Default)]
pub struct InputStats {
    /// Its description.
    pub name: String,
    /// Frames read into its ring.
    pub captured: u64,
    /// Frames it discarded because its ring was full (live inputs).
    pub dropped: u64,
    /// Time its reads took, ms.
    pub read_ms: f64,
    /// Its frames the sinks took.
    pub consumed: u64,
    /// Its frames its output holds, where the output checked.
    pub stored: Option<u64>,
    /// Capture → out of the sinks, per frame.
    pub latency: Latency,
    /// How its capture ended: "ended", "stopped", "failed: …" (None: left running).
    pub ended: Option<String>,
    /// Times a lost network stream was opened again.
    pub reconnects: u64,
    /// Its own packets recorded (`--record`).
    pub recorded: Option<Recorded>,
}

/// What an input's recording (`--record`) wrote.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    /// The files closed, in order.
    pub files: Vec<String>,
    /// Video packets written.
    pub video_packets: u64,
    /// Packets written, video and audio.
    pub packets: u64,
    /// Packets lost because the disk fell behind.
    pub lost: u64,
    /// Segments closed whole.
    pub segments: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Times a segment could not be written (each one's packets are lost).
    pub failures: u64,
    /// Times a stream's timestamps jumped (back, or forward beyond reason).
    pub discontinuities: u64,
    /// Why the recording failed, where it did (the last cause).
    pub error: Option<String>,
}

/// A recording's figures while the run goes, shared by its writing thread and the browser
/// view (`/healthz`, `/metrics`, `/stats`).
#[derive(Debug, Default)]
pub struct RecordLive {
    /// Segments closed whole.
    pub segments: std::sync::atomic::AtomicU64,
    /// Bytes in them.
    pub bytes: std::sync::atomic::AtomicU64,
    /// Segments that could not be written.
    pub failures: std::sync::atomic::AtomicU64,
    /// Why it can't write now: Some while it fails (until a segment is written again).
    pub failing: std::sync::Mutex<Option<String>>,
    /// Segments retention deleted.
    pub deleted_segments: std::sync::atomic::AtomicU64,
    /// The files that went with them (their sidecars too).
    pub deleted_files: std::sync::atomic::AtomicU64,
    /// Their bytes.
    pub deleted_bytes: std::sync::atomic::AtomicU64,
}

impl RecordLive {
    /// The figures now.
    pub fn now(&self) -> RecordingNow {
        use std::sync::atomic::Ordering::Relaxed;
        RecordingNow {
            segments: self.segments.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
            failures: self.failures.load(Relaxed),
            failing: self.failing.lock().ok().and_then(|f| f.clone()),
            deleted: [
                self.deleted_segments.load(Relaxed),
                self.deleted_files.load(Relaxed),
                self.deleted_bytes.load(Relaxed),
            ],
        }
    }
}

/// A recording's figures at one moment (`RecordLive::now`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecordingNow {
    /// Segments closed whole.
    pub segments: u64,
    /// Bytes in them.
    pub bytes: u64,
    /// Segments that could not be written.
    pub failures: u64,
    /// Why it can't write now, while it fails.
    pub failing: Option<String>,
    /// What retention deleted: segments, files, bytes.
    pub deleted: [u64; 3],
}

impl InputStats {
    fn to_json(&self) -> serde_json::Value {
        let recorded = self.recorded.as_ref().map(|r| {
            serde_json::json!({
                "files": r.files,
                "video_packets": r.video_packets,
                "packets": r.packets,
                "lost": r.lost,
                "segments": r.segments,
                "bytes": r.bytes,
                "failures": r.failures,
                "discontinuities": r.discontinuities,
                "error": r.error,
            })
        });
        serde_json::json!({
            "recorded": recorded,
            "input": self.name,
            "captured": self.captured,
            "processed": self.consumed,
            "written": self.stored.unwrap_or(self.consumed),
            "dropped": self.dropped,
            "reconnects": self.reconnects,
            "capture_ms": avg(self.read_ms, self.captured),
            "latency_ms": {
                "mean": self.latency.mean_ms(),
                "p99": self.latency.quantile_ms(0.99),
                "max": self.latency.max_ms,
            },
            "ended": self.ended,
        })
    }
}

/// One input's running figures, for the mosaic's labels, the browser view's health and
/// metrics.
#[derive(Clone, Debug, Default)]
pub struct InputLive {
    /// Its description.
    pub name: String,
    /// Frames captured so far.
    pub captured: u64,
    /// Frames dropped so far.
    pub dropped: u64,
    /// It is live: its frames are dropped rather than waited for (a camera, a stream).
    pub live: bool,
    /// Frames that went out of the sink so far.
    pub processed: u64,
    /// How it ended, once it has ("ended", "failed: …").
    pub ended: Option<String>,
    /// "reconnecting …" while a lost stream is being opened again.
    pub state: Option<String>,
    /// How long it has been down: lost and reconnecting, or not open yet (None while it runs
    /// or once it ended).
    pub down: Option<Duration>,
    /// Times its stream came back.
    pub reconnects: u64,
    /// Capture to out of the sink: mean, p99 and max (ms) and the frames counted, refreshed
    /// at most `LATENCY_EVERY`.
    pub latency: LatencyNow,
    /// Its recording's figures, where it is recorded (`--record`).
    pub recording: Option<RecordingNow>,
    /// Its detector's figures, where it is detected on (`--detect`).
    pub detection: Option<DetectionNow>,
}

/// An input's detection figures at one moment.
#[derive(Clone, Debug, Default)]
pub struct DetectionNow {
    /// Frames the detector ran on.
    pub detected: u64,
    /// Due frames skipped because the detector was busy.
    pub skipped: u64,
    /// Boxes found, by label.
    pub by_label: std::collections::BTreeMap<String, u64>,
    /// The last inference's seconds (the batch it was part of).
    pub inference_seconds: f64,
    /// The last inference's batch size.
    pub batch: usize,
    /// Objects in each of its zones now (`--zone`).
    pub zones: std::collections::BTreeMap<String, u64>,
}

/// An input's latency figures at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatencyNow {
    /// Mean, ms.
    pub mean_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Highest, ms.
    pub max_ms: f64,
    /// Frames counted.
    pub frames: u64,
    /// Their latencies added up, ms.
    pub total_ms: f64,
}

impl LatencyNow {
    /// How often the figures are read anew from the latency's histogram (a quantile walks
    /// it).
    pub const EVERY: Duration = Duration::from_millis(500);

    /// `latency`'s figures now.
    pub fn of(latency: &Latency) -> Self {
        Self {
            mean_ms: latency.mean_ms(),
            p99_ms: latency.quantile_ms(0.99),
            max_ms: latency.max_ms,
            frames: latency.frames,
            total_ms: latency.total_ms,
        }
    }
}

/// Everything the exit summary reports.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    /// The input's description (which decoder, which format), or how many inputs.
    pub input: String,
    /// Each input's counts (one entry for a run of one input).
    pub inputs: Vec<InputStats>,
    /// The backend's description at the end.
    pub backend: String,
    /// The sink's verb ("written", "shown").
    pub sink: String,
    /// Wall time of the run.
    pub elapsed: Duration,
    /// What the capture thread counted.
    pub capture: CaptureStats,
    /// What the backend thread counted.
    pub process: ProcessStats,
    /// What the sink counted.
    pub sink_stats: SinkStats,
    /// The first frames' spans, when asked for.
    pub trace: Option<crate::trace::Trace>,
    /// Kernel reloads while running.
    pub reloads: Vec<Reload>,
    /// A capture thread was left blocked inside its source after the stop: the process
    /// should end without running exit-time destructors under its feet (`libc::_exit`).
    pub left_behind: bool,
    /// The pipeline's own threads' CPU time over the run's wall time, busiest first: the
    /// sink's, the backend's, and the busiest capture thread's (`what_bound`).
    pub busy: Vec<(String, f64)>,
}

/// A thread busy this share of a run (or more) was the run's bound.
const BOUND_SHARE: f64 = 0.9;

impl Summary {
    /// What held a run that dropped frames back, as far as the run can tell: the outputs
    /// (handing frames to them took nearly all of it), a thread busy all the time, or
    /// neither (the bound is then the decoders, the GPU, or the machine's cores); None
    /// where no thread's time was read.
    pub fn what_bound(&self) -> Option<String> {
        let list = || {
            let each: Vec<String> = self
                .busy
                .iter()
                .map(|(name, share)| format!("{name} {:.0} %", share * 100.0))
                .collect();
            each.join(", ")
        };
        // The time the sink spent handing frames to the outputs, waits for them included.
        let handing = self.sink_stats.sink_ms / 1e3 / self.elapsed.as_secs_f64().max(1e-9);
        match self.busy.first() {
            None => None,
            _ if handing >= BOUND_SHARE => Some(format!(
                "the outputs bound it: handing frames to them took {:.0} % of the run (threads' CPU: {})",
                handing.min(1.0) * 100.0,
                list()
            )),
            Some((name, share)) if *share >= BOUND_SHARE => Some(format!(
                "the {name} thread was busy {:.0} % of the run and bounds it (threads' CPU: {})",
                share * 100.0,
                list()
            )),
            Some(_) => Some(format!(
                "neither the outputs nor a thread of the pipeline was busy all the time (threads' CPU: {}): the bound is the decoders, the GPU or the machine's cores",
                list()
            )),
        }
    }
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A step of the data path slower than this is told with `-v` (`slow`).
const SLOW: Duration = Duration::from_millis(100);

/// Tells (with `-v`) a step of the data path that took `took`, where it took longer than a
/// tenth of a second: what held frames back during a run (a stall while an input joins, an
/// output opening), with when it ended, from the process's start.
pub fn slow(what: std::fmt::Arguments, took: Duration) {
    if took >= SLOW {
        crate::debug!(
            "slow: {what} took {:.0} ms (ended at {:.3} s)",
            ms(took),
            crate::stop::process_start().elapsed().as_secs_f64()
        );
    }
}

fn avg(total: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        total / n as f64
    }
}

impl Summary {
    /// Frames processed per second of the run.
    pub fn fps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.sink_stats.consumed as f64 / s
        } else {
            0.0
        }
    }

    /// Frames the output holds: what the sink checked, else what it took.
    pub fn written(&self) -> u64 {
        self.sink_stats.stored.unwrap_or(self.sink_stats.consumed)
    }
}

/// Running figures for the window's overlay, smoothed over the last frames.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Frames per second, recent.
    pub fps: f64,
    /// Capture time per frame, ms.
    pub capture_ms: f64,
    /// Submit → output ready.
    pub latency_ms: f64,
    /// Device time per stage (sampled frames).
    pub gpu: Option<StageTimes>,
    /// Sink time per frame, ms.
    pub output_ms: f64,
    /// Frames dropped so far.
    pub dropped: u64,
    /// Frames handed to the sink so far.
    pub frames: u64,
    /// Whether capture is paused.
    pub paused: bool,
    /// The input's description (which decoder, which format).
    pub input: String,
    /// Each input's figures, in a run of several inputs (empty for one).
    pub inputs: Vec<InputLive>,
    /// The backend's description.
    pub backend: String,
    /// A message to show until it is cleared (a failed kernel reload).
    pub note: Vec<String>,
    /// The last few traced frames laid out as a timeline, for the window's strip (only
    /// while a sink asks for it: `Sink::wants_timeline`).
    pub timeline: Option<std::sync::Arc<crate::trace::Layout>>,
    last_frame: Option<Instant>,
    /// The time between frames, smoothed (ms); `fps` is its inverse.
    period_ms: f64,
    /// When each input's latency figures were last read (`InputLive::latency`).
    latencies_read: Option<Instant>,
}

const SMOOTH: f64 = 0.1;

fn ema(old: &mut f64, new: f64) {
    *old = if *old == 0.0 {
        new
    } else {
        *old + SMOOTH * (new - *old)
    };
}

impl Live {
    /// Folds in one frame's figures.
    pub fn update(
        &mut self,
        capture_ms: f64,
        latency_ms: f64,
        gpu: Option<&StageTimes>,
        output_ms: f64,
    ) {
        let now = Instant::now();
        if let Some(prev) = self.last_frame.replace(now) {
            // The period is smoothed, not the rate: frames that come in bursts (several
            // inputs' at once) would make an average of 1/dt run far above the real rate.
            ema(&mut self.period_ms, ms(now - prev).max(1e-6));
            self.fps = 1e3 / self.period_ms;
        }
        ema(&mut self.capture_ms, capture_ms);
        ema(&mut self.latency_ms, latency_ms);
        ema(&mut self.output_ms, output_ms);
        if let Some(g) = gpu {
            let cur = self.gpu.get_or_insert(*g);
            ema(&mut cur.h2d_ms, g.h2d_ms);
            ema(&mut cur.kernel_ms, g.kernel_ms);
            ema(&mut cur.d2h_ms, g.d2h_ms);
            ema(&mut cur.span_ms, g.span_ms);
        }
    }

    /// Whether each input's latency figures are due to be read again (at most every
    /// `LatencyNow::EVERY`); true marks them read now.
    pub fn latencies_due(&mut self) -> bool {
        let due = self
            .latencies_read
            .is_none_or(|t| t.elapsed() >= LatencyNow::EVERY);
        if due {
            self.latencies_read = Some(Instant::now());
        }
        due
    }

    /// Serial sum of the stage times over the frame period: above 1 means stages overlap.
    pub fn overlap(&self) -> f64 {
        let work = match &self.gpu {
            Some(g) => g.h2d_ms + g.kernel_ms + g.d2h_ms,
            None => self.latency_ms,
        };
        let serial = self.capture_ms + work + self.output_ms;
        if self.fps > 0.0 {
            serial * self.fps / 1e3
        } else {
            0.0
        }
    }

    /// The overlay's lines.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!(
                "{:.1} fps{}",
                self.fps,
                if self.paused { "  PAUSED" } else { "" }
            ),
            format!(
                "capture {:.2} ms  output {:.2} ms",
                self.capture_ms, self.output_ms
            ),
        ];
        match &self.gpu {
            Some(g) => v.push(format!(
                "H2D {:.3}  kernels {:.3}  D2H {:.3} ms (per frame, summed over bands)",
                g.h2d_ms, g.kernel_ms, g.d2h_ms
            )),
            None => v.push(format!("process {:.2} ms", self.latency_ms)),
        }
        v.push(format!(
            "overlap {:.2}x (stage times / frame time: above 1, stages run at once)  dropped {}",
            self.overlap(),
            self.dropped
        ));
        if !self.input.is_empty() {
            v.push(format!("input: {}", self.input));
        }
        v.extend(self.backend.split("; ").map(str::to_string));
        if self.inputs.len() > 1 {
            v.push(format!(
                "{} inputs: the keys act on every input; n (Tab) or a click selects a tile, Enter (z) or a double click shows it alone",
                self.inputs.len()
            ));
        }
        // Page-locking and bands are the GPU pipeline's: the CPU backend has neither.
        v.push(if self.backend.starts_with("cpu") {
            "h overlay  1-9 filters  t timeline  space pause  . step  s save  q quit".into()
        } else {
            "h overlay  1-9 filters  p page-lock  b/B bands  t timeline  space pause  . step  r reload  s save  q quit".into()
        });
        v
    }
}

/// One reload, as the summary lists it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Reload {
    /// Seconds since the reloader started.
    pub at_s: f64,
    /// What asked for it: the file saved, or the key.
    pub cause: String,
    /// The chain swapped in, or None where the reload failed.
    pub chain: Option<String>,
    /// Why it failed (the compiler's or the check's message).
    pub error: Option<String>,
}

#[cfg(test)]
mod cpu_tests {
    use super::*;

    #[test]
    fn what_bound_a_run_names_the_outputs_a_busy_thread_or_neither() {
        let mut s = Summary {
            elapsed: Duration::from_secs(10),
            busy: vec![("sink".into(), 1.02), ("backend".into(), 0.58)],
            ..Summary::default()
        };
        let b = s.what_bound().unwrap();
        assert!(b.starts_with("the sink thread was busy 102 %"), "{b}");
        s.sink_stats.sink_ms = 9_500.0;
        assert!(s
            .what_bound()
            .unwrap()
            .starts_with("the outputs bound it: handing frames to them took 95 %"));
        s.sink_stats.sink_ms = 1_000.0;
        s.busy = vec![("backend".into(), 0.5), ("sink".into(), 0.3)];
        let b = s.what_bound().unwrap();
        assert!(
            b.starts_with("neither the outputs nor a thread")
                && b.contains("backend 50 %, sink 30 %"),
            "{b}"
        );
        s.busy.clear();
        assert_eq!(s.what_bound(), None);
    }

    #[test]
    fn a_thread_sees_its_own_cpu_time_grow() {
        let start = ThreadCpu::now().expect("getrusage on Linux");
        // Busy for a while, in user space and in the kernel (the page faults of a fresh
        // allocation touched once).
        let spin = std::time::Instant::now();
        let mut x = 0u64;
        while spin.elapsed() < std::time::Duration::from_millis(50) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let v = std::hint::black_box(vec![1u8; 64 << 20]);
        assert_eq!(v[v.len() - 1], 1);
        let used = ThreadCpu::now().unwrap().since(start);
        assert!(used.user_s + used.sys_s >= 0.03, "{used}");
        assert!(used.waits >= 0 && used.preempted >= 0, "{used}");
        let shown = used.to_string();
        assert!(
            shown.starts_with("user ") && shown.contains(" waits, "),
            "{shown}"
        );
    }
}

#[cfg(test)]
mod latency_tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_step_and_the_memory_is_a_few_kilobytes() {
        let mut l = Latency::default();
        assert!(l.steps.len() * 4 < 4096, "{} steps", l.steps.len());
        for ms in [
            0.004, 0.25, 0.5, 2.0, 40.0, 40.0, 40.0, 300.0, 999.0, 5000.0,
        ] {
            l.record(ms);
        }
        // Below 1 ms to the 10 µs step above; above it, within 1 %; past the top, the max.
        assert!(
            (l.quantile_ms(0.2) - 0.26).abs() < 1e-9,
            "{}",
            l.quantile_ms(0.2)
        );
        let p50 = l.quantile_ms(0.5);
        assert!((40.0..=40.4).contains(&p50), "{p50}");
        assert_eq!(l.quantile_ms(1.0), 5000.0);
        assert_eq!(Latency::default().quantile_ms(0.99), 0.0);
        for ms in [1.0, 1.5, 10.0, 99.9, 999.9] {
            let top = Latency::top_of(Latency::step_of(ms));
            assert!(top >= ms && top <= ms * 1.0101, "{ms}: {top}");
        }
    }
}
