//! `--detect`'s place in the run: a sink in front of the others that hands each input's due
//! frames (every frame of a file, or `--detect-fps` a second, or the inputs file's own rate;
//! 5 a second of a live input; only while there is motion with `--motion`) to a detector
//! thread of its own through one slot an input (`slots`: every waiting input's frame goes
//! into one batch), tracks and turns the boxes into events (`events::Engine`), writes each
//! detected frame's boxes as one JSON line (`--detections FILE.jsonl`, and beside the
//! input's recorded segments), keeps each input's newest boxes and figures (`detect::seen`,
//! read by the mosaic, the hand-over to Python and `/metrics`), and draws the boxes into
//! the frames it hands on (`--draw`, `paint::boxes`). An input that joins the run while it
//! goes gets its slot with its first frame and is detected on once whoever added it told its
//! name and own settings (`JoinedOwn`); its objects are tracked, and its zones and lines (its
//! own, and the command line's that name it or every input) make events, as a starting
//! input's. Each input's own filters (`events::camera`) drop boxes before anything sees them. Without a detector
//! (`--motion` or `--events` alone) it is the same sink with no detector's thread: each
//! input's motion, and the inputs' own states, still make events (and clips).
//!
//! Invariants: a video frame is never held for a live input nor dropped: a live input's due
//! frame replaces the one still waiting in its slot (that one is skipped, counted per
//! input, said at the end), and its frames carry the newest boxes found; a file's due frame
//! waits for its slot (a file is read at its slowest consumer's pace), and where boxes are
//! drawn or handed over with the frame, for its own boxes, so a file's frame shows what was
//! found on it; every frame the detector ran on has its line, written whole and flushed;
//! the JSON file is created new (replaced only with `-y`); the frames are drawn on in a copy
//! (the pipeline's own bytes are never written); finishing (the detector's last inference,
//! the event destinations' drain) counts as an output being finalized for the stop.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender};

mod slots;
use slots::Slots;

/// How long the run's end leaves the detector to finish the batch under way before it is
/// halted (a stop ends within about a second, whatever the model).
const HALT_AFTER: std::time::Duration = std::time::Duration::from_millis(300);

use super::{Flow, Frame, Sink, SinkReport};
use crate::detect::seen::{Found, Seen};
use crate::detect::{Detection, Draw, Model};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// Detections a second of a live input where `--detect-fps` is not given.
pub const LIVE_FPS: f64 = 5.0;

/// One frame for the detector: a copy of its bytes, as the pipeline had them (the
/// detector's thread converts them).
struct Job {
    index: u64,
    seconds: Option<f64>,
    size: FrameSize,
    format: PixelFormat,
    bytes: Vec<u8>,
    /// Whether the sink waits for it to be done.
    waited: bool,
    /// When it reached the detecting sink (a recording's sidecar places it by this).
    seen_at: std::time::Instant,
    /// Its input's name, and whether the input is live.
    name: String,
    live: bool,
    /// Its input's own events settings.
    events: Arc<crate::events::camera::Own>,
}

/// Where a detected frame's line goes besides `--detections`: the input's recording, into
/// the sidecar of the segment its frame is in (`record::sidecar`), given when the frame
/// was seen and, for a file's frame, its time in the run.
pub type Beside = Arc<dyn Fn(String, std::time::Instant, Option<f64>) + Send + Sync>;

/// Each input's: its name, whether it is live, when its last frame was sent, whether it
/// is detected on and at what rate (the inputs file's own settings).
struct Input {
    name: String,
    live: bool,
    last: Option<f64>,
    on: bool,
    fps: Option<f64>,
    /// Its own events settings (zones, lines, labels, stay, filters).
    events: Arc<crate::events::camera::Own>,
    /// It joined the run while it goes, and its name and own settings were told
    /// (`joined_own`: it is detected on only once they were).
    told: bool,
}

/// An input's own detection settings (an inputs or camera file's, or the API's): whether it
/// is detected on, its rate where it has one, and its own events settings.
#[derive(Clone, Debug)]
pub struct OwnSettings {
    /// It is detected on.
    pub on: bool,
    /// Its detections a second, where its own.
    pub fps: Option<f64>,
    /// Its zones, lines, labels, stay and filters (`events::camera`).
    pub events: Arc<crate::events::camera::Own>,
}

impl Default for OwnSettings {
    fn default() -> Self {
        Self {
            on: true,
            fps: None,
            events: Arc::default(),
        }
    }
}

impl Input {
    /// Input `at`, which joins while the run goes: detected on once its adder told its name
    /// and settings (`joined_own`).
    fn joining(at: usize) -> Self {
        Self {
            name: format!("input {at}"),
            live: true,
            last: None,
            on: false,
            fps: None,
            events: Arc::default(),
            told: false,
        }
    }
}

/// Inputs that join the run while it goes, by `InputId`: each one's name, whether it is
/// detected on and at what rate, told by whoever adds it (none is detected on before).
pub type JoinedOwn = Arc<std::sync::Mutex<std::collections::HashMap<usize, (String, OwnSettings)>>>;

/// The detecting sink (module doc).
pub struct Detecting {
    /// The own settings of inputs that join while the run goes.
    joined_own: JoinedOwn,
    inner: Box<dyn Sink>,
    slots: Arc<Slots<Job>>,
    /// Each job's (input, frame) once the detector is done with it.
    done: Receiver<(usize, u64)>,
    thread: Option<std::thread::JoinHandle<Result<Ended>>>,
    /// What halts the detector's inference under way at the end.
    halt: Option<Arc<crate::detect::Halt>>,
    /// Without a detector (`--motion` or `--events` alone): the events' end, kept here.
    idle: Option<Detector>,
    inputs: Vec<Input>,
    fps: Option<f64>,
    started: std::time::Instant,
    seen: Seen,
    draw: Draw,
    /// A file's frame waits for its own boxes (they are drawn, or handed with it).
    exact: bool,
    /// What the detector did, once it ended.
    ended: Option<Ended>,
    /// The events of the inputs' own states (a camera down, a recording failing, motion),
    /// where events are asked for.
    states: Option<crate::events::States>,
    /// Each input's motion detector (`--motion`): the detector runs only while it sees
    /// motion.
    motion: Option<Vec<crate::events::motion::Motion>>,
    /// The copy of a frame the boxes are drawn into.
    drawn: Vec<u8>,
}

/// What the run tells the detecting sink about its inputs (by the run's input number:
/// `FrameDesc::input`) and what it does with the boxes.
pub struct Inputs {
    /// Names, by input.
    pub names: Vec<String>,
    /// Live, by input.
    pub live: Vec<bool>,
    /// Where each input's newest boxes and figures are kept.
    pub seen: Seen,
    /// What of the boxes is drawn into the frames.
    pub draw: Draw,
    /// Each input's recording's sidecars, where it records.
    pub beside: Vec<Option<Beside>>,
    /// A file's frame waits for its own boxes even where none are drawn (an embedding
    /// program reads them with the frame).
    pub exact: bool,
    /// The tracks, zones and events made of the boxes, where asked.
    pub events: Option<crate::events::Engine>,
    /// `--motion`.
    pub motion: bool,
    /// Each input's own settings (the inputs or camera file's).
    pub own: Vec<OwnSettings>,
}

impl Detecting {
    /// `inner` with `model` run on its inputs' due frames (`fps` a second, or as the module
    /// says), each detected frame's line written to `jsonl` (created new, or replaced where
    /// `replace`).
    pub fn new(
        inner: Box<dyn Sink>,
        model: Option<Model>,
        inputs: Inputs,
        fps: Option<f64>,
        jsonl: Option<(PathBuf, bool)>,
    ) -> Result<Self> {
        let file = jsonl.as_ref().map(open_jsonl).transpose()?;
        let most = model
            .as_ref()
            .map_or(crate::detect::CPU_BATCH, Model::batch_most);
        let slots = Arc::new(Slots::new(inputs.names.len(), most));
        let (done_tx, done) = crossbeam_channel::unbounded();
        let mut inputs = inputs;
        let states = inputs
            .events
            .as_ref()
            .filter(|e| e.counts().is_some() || inputs.motion)
            .map(|e| crate::events::States::new(e.outputs(), inputs.names.len(), e.clips()));
        let motion = inputs
            .motion
            .then(|| inputs.names.iter().map(|_| Default::default()).collect());
        let to = Detector {
            events: inputs.events.take(),
            started: std::time::Instant::now(),
            seen: inputs.seen.clone(),
            done: done_tx,
            beside: inputs.beside.clone(),
            lag: Default::default(),
        };
        let taken = slots.clone();
        let halt = model.as_ref().map(Model::halt);
        let (thread, idle) = match model {
            Some(model) => {
                let thread =
                    std::thread::Builder::new()
                        .name("detector".into())
                        .spawn(move || {
                            let ran = detect_loop(model, &taken, file, to);
                            taken.close(); // a file waiting for its slot goes on
                            ran
                        })?;
                (Some(thread), None)
            }
            None => (None, Some(to)),
        };
        let Inputs {
            names,
            live,
            seen,
            draw,
            exact,
            ..
        } = inputs;
        let inputs = each_input(names, live, &inputs.own);
        Ok(Self {
            joined_own: JoinedOwn::default(),
            inner,
            slots,
            done,
            thread,
            halt,
            idle,
            inputs,
            fps,
            started: std::time::Instant::now(),
            seen,
            draw,
            exact: exact || draw != Draw::None,
            ended: None,
            states,
            motion,
            drawn: Vec::new(),
        })
    }

    /// Events by kind: the detections' and the inputs' own states'; None where no event was
    /// asked for.
    fn event_counts(&self) -> Option<std::collections::BTreeMap<String, u64>> {
        let detected = self.ended.as_ref().and_then(|e| e.events.clone());
        let states = self.states.as_ref().map(|s| s.counts().clone());
        match (detected, states) {
            (None, None) => None,
            (a, b) => {
                let mut counts = a.unwrap_or_default();
                for (k, n) in b.unwrap_or_default() {
                    *counts.entry(k).or_default() += n;
                }
                Some(counts)
            }
        }
    }

    /// Whether `frame`'s input shows motion (always, without `--motion`); a change of its
    /// motion is an event.
    fn moving(&mut self, frame: &Frame) -> bool {
        let Some(motion) = &mut self.motion else {
            return true;
        };
        let at = usize::from(frame.desc.input.0);
        if at >= self.inputs.len() {
            return true;
        }
        // An input that joined while the run goes is watched from its first frame.
        if motion.len() <= at {
            motion.resize_with(at + 1, Default::default);
        }
        let m = &mut motion[at];
        let seconds = frame
            .desc
            .seconds()
            .filter(|_| !self.inputs[at].live)
            .unwrap_or_else(|| self.started.elapsed().as_secs_f64());
        if let Some(change) = m.frame(frame, seconds) {
            if let Some(states) = &mut self.states {
                let input = &self.inputs[at];
                let clip = (
                    std::time::Instant::now(),
                    input.live,
                    picture_of(frame, &change),
                );
                let name = input.name.as_str();
                states.motion((at, name), (frame.desc.index, seconds), change, Some(clip));
            }
        }
        m.active()
    }

    /// Where the own settings of inputs that join while the run goes are told.
    pub fn joined_own(&self) -> JoinedOwn {
        self.joined_own.clone()
    }

    /// Makes room for input `at`, where it joined the run while it goes: a live camera,
    /// detected on once its adder told its name and settings (`joined_own`).
    fn joined(&mut self, at: usize) {
        if at < self.inputs.len() {
            return;
        }
        while self.inputs.len() <= at {
            self.inputs.push(Input::joining(self.inputs.len()));
        }
        self.slots.grow(at + 1);
        self.seen.grow(at + 1);
    }

    /// Input `at`, where it joined and is not named yet: its name and own settings, once
    /// its adder told them (its motion and detections are named from then on).
    fn tell(&mut self, at: usize) {
        let Some(input) = self.inputs.get_mut(at).filter(|i| !i.told) else {
            return;
        };
        let told = self
            .joined_own
            .lock()
            .ok()
            .and_then(|o| o.get(&at).cloned());
        if let Some((name, own)) = told {
            (input.name, input.on, input.fps, input.told) = (name, own.on, own.fps, true);
            input.events = own.events;
        }
    }

    /// Input `at` left the run: what is kept of it goes, so that an input that takes its
    /// place starts as one that joined (named and set by its adder).
    /// (An input of the run's start keeps its name for the run's end.)
    fn forget(&mut self, at: usize) {
        let joined = self
            .joined_own
            .lock()
            .is_ok_and(|mut own| own.remove(&at).is_some());
        if let Some(input) = self.inputs.get_mut(at).filter(|_| joined) {
            *input = Input::joining(at);
            self.seen.forget(at);
        }
    }

    /// Whether `frame` is due for detection, and notes it as sent where it is.
    fn due(&mut self, frame: &Frame) -> bool {
        let clock = self.started.elapsed().as_secs_f64();
        let at = usize::from(frame.desc.input.0);
        let Some(input) = self.inputs.get_mut(at) else {
            return false;
        };
        if !input.on {
            return false;
        }
        let fps = match (input.fps.or(self.fps), input.live) {
            (Some(f), _) => f,
            (None, true) => LIVE_FPS,
            (None, false) => return true,
        };
        let now = match input.live {
            true => clock,
            false => frame.desc.seconds().unwrap_or(clock),
        };
        if input.last.is_some_and(|l| now - l < 1.0 / fps - 1e-6) {
            return false;
        }
        input.last = Some(now);
        true
    }

    /// Hands `frame` to the detector (`slots`): a live input's replaces its waiting one
    /// (that one skipped); a file's waits for its slot, and for its boxes where they are
    /// drawn.
    fn hand(&mut self, frame: &Frame) {
        let size = frame.desc.size;
        let format = frame.desc.format;
        if frame.bytes.len() < format.bytes(size) || !frame.desc.planes.is_packed(format, size) {
            return; // a frame the backend did not bring down
        }
        let at = usize::from(frame.desc.input.0);
        let job = Job {
            index: frame.desc.index,
            seconds: frame.desc.seconds(),
            size,
            format,
            bytes: frame.bytes[..format.bytes(size)].to_vec(),
            waited: !self.inputs[at].live && self.exact,
            seen_at: std::time::Instant::now(),
            name: self.inputs[at].name.clone(),
            live: self.inputs[at].live,
            events: self.inputs[at].events.clone(),
        };
        let (index, waited) = (job.index, job.waited);
        if self.inputs[at].live {
            if self.slots.replace(at, job) {
                self.seen.skipped(at);
            }
            return;
        }
        if self.slots.wait_to_put(at, job) && waited {
            // This input's jobs are done in order: the next one done for it is this one.
            while let Ok((i, n)) = self.done.recv() {
                if (i, n) == (at, index) {
                    break;
                }
            }
        }
    }

    /// `frame` handed on, with its input's newest boxes drawn in a copy where `--draw`
    /// asks and there are any.
    fn hand_on(&mut self, frame: &Frame) -> Result<Flow> {
        let found = match self.draw {
            Draw::None => None,
            _ => self.seen.last(usize::from(frame.desc.input.0)),
        };
        let Some(found) = found.filter(|f| !f.boxes.is_empty()) else {
            return self.inner.consume(frame);
        };
        let d = frame.desc;
        self.drawn.clear();
        self.drawn.extend_from_slice(frame.bytes);
        let Some(mut paint) =
            crate::paint::boxes::Paint::new(&mut self.drawn, d.format, d.size, d.planes)
        else {
            return self.inner.consume(frame); // a frame the backend did not bring down
        };
        let all = paint.all();
        crate::paint::boxes::draw_boxes(&mut paint, all, found.size, &found.boxes, self.draw);
        self.inner.consume(&Frame {
            desc: frame.desc,
            bytes: &self.drawn,
        })
    }

    /// Ends the detector: its error, or what it did (nothing, where there is none: the
    /// events' destinations are ended all the same).
    fn end_detector(&mut self) -> Result<Ended> {
        self.slots.close();
        if let Some(mut idle) = self.idle.take() {
            return Ok(idle.ended(0, 0, None));
        }
        // On a stop, the batch under way may finish within `HALT_AFTER`; a slower one is
        // halted. At an input's own end every due frame is detected, as long as it takes.
        let stopping = crate::stop::Stop::process().is_requested();
        let until = std::time::Instant::now() + HALT_AFTER;
        while stopping
            && self.thread.as_ref().is_some_and(|t| !t.is_finished())
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        if stopping && self.thread.as_ref().is_some_and(|t| !t.is_finished()) {
            if let Some(halt) = &self.halt {
                crate::info!("detection: the inference under way is halted (the run ends)");
                halt.halt();
            }
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => anyhow::bail!("the detector's thread panicked"),
            None => Ok(Ended::default()),
        }
    }
}

/// `--detections`' file, created new (replaced where `replace`).
fn open_jsonl((path, replace): &(PathBuf, bool)) -> Result<std::io::BufWriter<std::fs::File>> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    match replace {
        true => open.create(true).truncate(true),
        false => open.create_new(true),
    };
    let file = open.open(path).with_context(|| {
        format!(
            "--detections '{}' can't be created (-y replaces it)",
            path.display()
        )
    })?;
    Ok(std::io::BufWriter::new(file))
}

/// Each input's state, from its name, whether it is live, and its own settings.
fn each_input(names: Vec<String>, live: Vec<bool>, own: &[OwnSettings]) -> Vec<Input> {
    names
        .into_iter()
        .zip(live)
        .enumerate()
        .map(|(k, (name, live))| {
            let own = own.get(k).cloned().unwrap_or_default();
            Input {
                name,
                live,
                last: None,
                on: own.on,
                fps: own.fps,
                events: own.events,
                told: true,
            }
        })
        .collect()
}

/// Where the detector's thread puts what it found.
struct Detector {
    seen: Seen,
    done: Sender<(usize, u64)>,
    beside: Vec<Option<Beside>>,
    events: Option<crate::events::Engine>,
    /// When the run began (the time of a frame without one).
    started: std::time::Instant,
    /// Each detected frame's lag: from reaching the detecting sink to its boxes found.
    lag: crate::stats::Latency,
}

/// What the detector did, at its end.
#[derive(Debug, Default)]
struct Ended {
    /// Frames it ran on.
    ran: u64,
    /// Inferences.
    batches: u64,
    /// Bytes of pictures fitted on the device brought to the host for the model (None
    /// where the CPU fitted them): none where batches were handed over in device memory.
    fitted_to_host: Option<u64>,
    /// Events by kind.
    events: Option<std::collections::BTreeMap<String, u64>>,
    /// Why events were not delivered, where some were not.
    undelivered: Option<String>,
    /// The detected frames' lag (`Detector::lag`).
    lag: crate::stats::Latency,
}

/// The detector's loop: each batch's boxes, each frame's line, and each input's newest
/// boxes.
fn detect_loop(
    mut model: Model,
    slots: &Slots<Job>,
    mut file: Option<std::io::BufWriter<std::fs::File>>,
    mut to: Detector,
) -> Result<Ended> {
    let (mut ran, mut batches) = (0, 0);
    while let Some(batch) = slots.take() {
        batches += 1;
        let bgr: Vec<Vec<u8>> = batch.iter().map(|(_, job)| bgr_of(job)).collect();
        let pictures: Vec<(&[u8], FrameSize)> = bgr
            .iter()
            .zip(&batch)
            .map(|(b, (_, job))| (&b[..], job.size))
            .collect();
        let began = std::time::Instant::now();
        let found = match model.detect_batch(&pictures) {
            Ok(found) => found,
            // The run ends and would not wait for this batch.
            Err(crate::detect::DetectError::Halted) => break,
            Err(e) => {
                to.ended(ran, batches, model.fitted_to_host());
                return Err(e.into());
            }
        };
        to.seen.inferred(began.elapsed().as_secs_f64(), batch.len());
        for (((input, job), boxes), bgr) in batch.into_iter().zip(found).zip(&bgr) {
            ran += 1;
            to.found((input, job, Some(bgr)), boxes, file.as_mut())?;
        }
    }
    Ok(to.ended(ran, batches, model.fitted_to_host()))
}

impl Detector {
    /// What the detector did, having run on `ran` frames in `batches` (`fitted_to_host`:
    /// `Ended`'s): its events' destinations ended, their counts.
    fn ended(&mut self, ran: u64, batches: u64, fitted_to_host: Option<u64>) -> Ended {
        let mut undelivered = None;
        let events = self.events.as_mut().and_then(|e| {
            undelivered = e.finish().err().map(|u| u.to_string());
            e.counts().cloned()
        });
        Ended {
            ran,
            batches,
            fitted_to_host,
            events,
            undelivered,
            lag: self.lag.clone(),
        }
    }

    /// Input `input`'s `job` had `boxes`: tracked, made events of, written as a line (to
    /// `file` and beside the recording), kept as its input's newest, and said done where
    /// the sink waits for it.
    fn found(
        &mut self,
        (input, job, bgr): (usize, Job, Option<&Vec<u8>>),
        mut boxes: Vec<Detection>,
        file: Option<&mut std::io::BufWriter<std::fs::File>>,
    ) -> Result<()> {
        self.lag.record(job.seen_at.elapsed().as_secs_f64() * 1e3);
        let name = job.name.as_str();
        boxes.retain(|d| job.events.keeps(d, job.size));
        if let Some(events) = &mut self.events {
            let seen = crate::events::Seen {
                input,
                name,
                frame: job.index,
                seconds: job
                    .seconds
                    .unwrap_or_else(|| (job.seen_at - self.started).as_secs_f64()),
                size: job.size,
                seen_at: job.seen_at,
                live: job.live,
                bgr: bgr.map(Vec::as_slice),
            };
            events.detected(&seen, &mut boxes, &job.events);
            let zones = events.zone_counts().get(input).cloned().unwrap_or_default();
            self.seen.zones(input, zones);
        }
        let beside = self.beside.get(input).cloned().flatten();
        if file.is_some() || beside.is_some() {
            let line = line_of(input, &job, name, &boxes);
            if let Some(f) = file {
                writeln!(f, "{line}")
                    .and_then(|()| f.flush())
                    .context("writing --detections")?;
            }
            if let Some(beside) = beside {
                let seconds = job.seconds.filter(|_| !job.live);
                beside(line, job.seen_at, seconds);
            }
        }
        let found = Found {
            index: job.index,
            size: job.size,
            boxes,
        };
        self.seen.found(input, found);
        if job.waited {
            let _ = self.done.send((input, job.index));
        }
        Ok(())
    }
}

/// `frame` as a motion event's snapshot shows it (its motion's box), where motion starts
/// on it and the backend brought it down.
fn picture_of(
    frame: &Frame,
    change: &crate::events::motion::Change,
) -> Option<crate::events::Picture> {
    let crate::events::motion::Change::Started(_, rect) = change else {
        return None;
    };
    let (size, format) = (frame.desc.size, frame.desc.format);
    if frame.bytes.len() < format.bytes(size) || !frame.desc.planes.is_packed(format, size) {
        return None;
    }
    Some(crate::events::Picture {
        format,
        size,
        bytes: frame.bytes[..format.bytes(size)].to_vec(),
        boxes: vec![Detection {
            label: "motion".into(),
            score: 1.0,
            rect: *rect,
            track: None,
        }],
    })
}

/// `job`'s picture as packed BGR.
fn bgr_of(job: &Job) -> Vec<u8> {
    match job.format {
        PixelFormat::Bgr24 => job.bytes.clone(),
        f => {
            let mut bgr = vec![0u8; job.size.bytes()];
            crate::pixel::to_bgr(f, job.size, &job.bytes, &mut bgr);
            bgr
        }
    }
}

/// One detected frame's JSON line.
fn line_of(input: usize, job: &Job, name: &str, found: &[Detection]) -> String {
    let boxes: Vec<serde_json::Value> = found
        .iter()
        .map(|d| {
            serde_json::json!({
                "label": d.label,
                "score": (f64::from(d.score) * 1e4).round() / 1e4,
                "box": d.rect,
                "track": d.track,
            })
        })
        .collect();
    serde_json::json!({
        "input": input,
        "name": name,
        "frame": job.index,
        "seconds": job.seconds,
        "width": job.size.width,
        "height": job.size.height,
        "detections": boxes,
    })
    .to_string()
}

impl Sink for Detecting {
    fn verb(&self) -> &'static str {
        self.inner.verb()
    }
    fn describe(&self) -> String {
        let with = match (self.thread.is_some(), self.motion.is_some()) {
            (true, _) => "detection",
            (false, true) => "motion detection",
            (false, false) => "events",
        };
        format!("{}, with {with}", self.inner.describe())
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        self.joined(usize::from(frame.desc.input.0));
        self.tell(usize::from(frame.desc.input.0));
        if self.moving(frame) && self.thread.is_some() && self.due(frame) {
            self.hand(frame);
        }
        self.hand_on(frame)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.inner.composed(picture)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        if let Some(states) = &mut self.states {
            let names: Vec<String> = self.inputs.iter().map(|i| i.name.clone()).collect();
            states.saw(live, &names);
        }
        // The detector's figures join each input's, for /metrics and the page.
        let mut live = live.clone();
        let (seconds, batch) = self.seen.inference().unwrap_or_default();
        for (at, input) in live.inputs.iter_mut().enumerate() {
            let f = self.seen.figures(at);
            input.detection = Some(crate::stats::DetectionNow {
                detected: f.detected,
                skipped: f.skipped,
                by_label: f.by_label,
                inference_seconds: seconds,
                batch,
                zones: f.zones,
            });
        }
        self.inner.status(&live)
    }
    fn wants_timeline(&self) -> bool {
        self.inner.wants_timeline()
    }
    fn idle(&mut self) -> Result<Flow> {
        self.inner.idle()
    }
    fn begin_finish(&mut self) {
        self.inner.begin_finish()
    }
    fn leave(&mut self, input: usize) -> Result<()> {
        self.forget(input);
        self.inner.leave(input)
    }
    fn finish(&mut self) -> Result<()> {
        // The detector ends its inference and its destinations send what they hold (half
        // a second at most): an output being finished, as the stop's watchdog counts it.
        let _finishing = crate::stop::Finishing::start();
        if let (Some(motion), Some(states)) = (&mut self.motion, &mut self.states) {
            let seconds = self.started.elapsed().as_secs_f64();
            for (at, m) in motion.iter_mut().enumerate() {
                if let Some(change) = m.end(seconds) {
                    let name = self.inputs[at].name.as_str();
                    states.motion((at, name), (0, seconds), change, None);
                }
            }
        }
        let had_model = self.thread.is_some();
        let detected = self.end_detector();
        for (at, input) in self.inputs.iter().enumerate() {
            let skipped = self.seen.figures(at).skipped;
            if skipped > 0 {
                crate::info!(
                    "detection: {} skipped {skipped} due frames (the detector was busy)",
                    input.name
                );
            }
        }
        let finished = self.inner.finish();
        match detected {
            Ok(ended) => {
                let (n, batches) = (ended.ran, ended.batches);
                if had_model {
                    crate::info!(
                        "detection: ran on {n} frames in {batches} inferences ({:.1} frames each)",
                        n as f64 / batches as f64
                    );
                }
                if let Some(bytes) = ended.fitted_to_host.filter(|_| had_model) {
                    crate::info!("detection: {bytes} bytes of pictures fitted on the GPU brought to the host for the model");
                }
                let undelivered = ended.undelivered.clone();
                self.ended = Some(ended);
                if let Some(events) = self.event_counts() {
                    let said: Vec<String> =
                        events.iter().map(|(k, n)| format!("{n} {k}")).collect();
                    crate::info!(
                        "events: {}",
                        match said.is_empty() {
                            true => "none".to_string(),
                            false => said.join(", "),
                        }
                    );
                }
                if let Some(why) = undelivered {
                    // Outputs first: their own failure is the one to say.
                    finished?;
                    return Err(anyhow::anyhow!("{why}"));
                }
            }
            Err(e) => return Err(e.context("detection")),
        }
        finished
    }
    fn report(&self) -> SinkReport {
        let mut report = self.inner.report();
        let inputs: Vec<serde_json::Value> = self
            .inputs
            .iter()
            .enumerate()
            .map(|(at, input)| {
                let f = self.seen.figures(at);
                serde_json::json!({
                    "name": input.name,
                    "detected": f.detected,
                    "skipped": f.skipped,
                    "boxes": f.by_label,
                })
            })
            .collect();
        report.detection = Some(serde_json::json!({
            "frames": self.ended.as_ref().map_or(0, |e| e.ran),
            "inferences": self.ended.as_ref().map_or(0, |e| e.batches),
            "fitted_bytes_to_host": self.ended.as_ref().and_then(|e| e.fitted_to_host),
            "lag_ms": self.ended.as_ref().map(|e| {
                let now = crate::stats::LatencyNow::of(&e.lag);
                serde_json::json!({"mean": now.mean_ms, "p99": now.p99_ms, "max": now.max_ms})
            }),
            "inputs": inputs,
            "events": self.event_counts(),
        }));
        report
    }
}
