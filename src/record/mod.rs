//! `--record`: each input's own packets written as they arrived, video and audio, without
//! decoding or encoding (what an NVR keeps of a camera), beside whatever the run makes of
//! its frames. `--segment` cuts the recording into files of about that length, each
//! starting on a video keyframe.
//!
//! The input hands every packet to a `Recording` (a `media::tap::PacketTap`) through a
//! bounded channel; a thread of the recording's own remuxes them, so a slow disk never
//! holds the input.
//!
//! Invariants: a file starts on a video keyframe, its timestamps counted from it (audio
//! that came after the keyframe but is timed just before it goes in too: every packet
//! after the first keyframe is in exactly one file, but one with no time at all, which no
//! muxer can place: an RTSP camera's parameter sets before its first picture); it is
//! written under a hidden `.NAME.part` name made with `create_new` (nothing is ever
//! replaced), fragmented where it is MP4 or MOV (so a crash loses at most the open
//! segment), and renamed to its own name, never over another file, once its trailer is
//! written; an input that reopens (a reconnect) starts a new file.
//!
//! Timestamps that jump (back, or forward by more than 10 s, in any stream: a looping or
//! joined file, a camera that restarted) drop nothing: the stream's later packets are offset
//! to go on from its last one (`timebase::Timeline`), the jump is counted and said, and with
//! `--segment` the video's next keyframe (the very packet, where the jump comes on one)
//! starts a new file timed from there, as ffmpeg's segment muxer does; a decoding time that
//! still does not rise in the file's time base is nudged past the last one, as ffmpeg's
//! muxing does.
//!
//! A file that can't be written (a full disk, a folder made read-only or removed) loses
//! its segment, never the recording: its `.part` is removed, the failure is counted, said
//! once while it lasts and shown by the browser view (`stats::RecordLive`: `/healthz`
//! turns 503), and the next keyframe at least `RETRY_EVERY` later opens a new file, so a
//! freed disk resumes the recording; the run then ends as failed. Packets the channel
//! can't take at once are counted as lost and said.
//!
//! With `--detect`, each segment has its detections beside it (`sidecar`):
//! `NAME.detections.jsonl`, renamed with the segment, given up with it.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use ff::Rescale;
use ffmpeg_next as ff;

use crate::media::remux::{InStream, Remux};
use archive::Archive;
use index::Mark;

pub mod archive;
pub mod clip;
pub mod index;
mod sidecar;
pub mod snapshot;
pub use sidecar::When;
use sidecar::{Began, Sidecars};

/// Packets waiting for the recording's thread: about 8 s of a 1080p30 camera.
const QUEUE: usize = 2048;
/// How often a recording's idle thread looks whether it was told to end.
const END_POLL: Duration = Duration::from_millis(50);
/// How long after a failed segment the next one is tried, at the next keyframe.
const RETRY_EVERY: Duration = Duration::from_secs(1);
/// How far the camera's clock may drift from the wall clock before a segment's wall-clock
/// start is taken from the clock again (`Writer::wall_start`).
const DRIFT_US: i64 = 1_000_000;

/// `--record`'s setting for one input: the name (its `{n}` put in), the segment length,
/// the input's name in the index, the recordings' root and how long they are kept.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordSpec {
    /// The file's name, or each segment's pattern (`{seg}`, `%Y%m%d-%H%M%S`).
    pub name: String,
    /// `--segment`: a new file from the first keyframe this long after the last began.
    pub segment: Option<Duration>,
    /// The input's name (its label), as the index lists it.
    pub input: String,
    /// The recordings' root (`index::root_of` the `--record` name every input shares).
    pub root: PathBuf,
    /// `--retain`, `--retain-size`, `--retain-free`.
    pub keep: archive::Keep,
}

/// The containers a recording is written in, by the extension of its name.
pub fn muxer_of(name: &str) -> Option<&'static str> {
    let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "mp4" => "mp4",
        "mov" => "mov",
        "mkv" => "matroska",
        "ts" => "mpegts",
        _ => return None,
    })
}

/// Checks a `--record` name before the run: a container it is written in, a folder that
/// exists (made where it lies below `root`, the recordings' root: `make_folder`), and (with
/// `--segment`) a name that changes from one segment to the next.
pub fn check(name: &str, root: &Path, segment: Option<Duration>) -> Result<(), RecordError> {
    let name_of = || name.to_string();
    if muxer_of(name).is_none() {
        return Err(RecordError::Container { name: name_of() });
    }
    let fixed = fixed_folder(name);
    let dir = Some(fixed.as_path()).filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        if let Err(why) = make_folder(root, dir) {
            return Err(RecordError::NoFolder {
                name: name_of(),
                dir: dir.to_path_buf(),
                why,
            });
        }
    }
    let dir = dir.unwrap_or(Path::new("."));
    let probe = dir.join(format!(".framepipe-{}.record-probe", std::process::id()));
    if let Err(e) = crate::paths::check_writable("--record", &probe.to_string_lossy()) {
        let why = match e {
            crate::paths::PathError::NotWritable { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        return Err(RecordError::Unwritable {
            name: name_of(),
            dir: dir.to_path_buf(),
            why,
        });
    }
    let varies = ["{seg}", "%Y", "%m", "%d", "%H", "%M", "%S"]
        .iter()
        .any(|t| name.contains(t));
    if segment.is_some() && !varies {
        return Err(RecordError::SegmentsShareName { name: name_of() });
    }
    Ok(())
}

/// The folder a name's files share, whatever their number or time: its folders before the
/// first that holds a `{…}` or a `%`.
pub fn fixed_folder(name: &str) -> PathBuf {
    Path::new(name)
        .parent()
        .into_iter()
        .flat_map(Path::components)
        .take_while(|c| {
            let text = c.as_os_str().to_string_lossy();
            !text.contains('{') && !text.contains('%')
        })
        .collect()
}

/// Makes folder `dir` and those above it that are missing, where it lies below `root` (the
/// recordings' root, which must be there: a share that isn't mounted is never replaced by
/// a folder on the local disk), through no symbolic link and no `..`; Err saying why not.
pub fn make_folder(root: &Path, dir: &Path) -> Result<(), FolderError> {
    let below = dir
        .strip_prefix(root)
        .map_err(|_| FolderError::Outside(root.to_path_buf()))?;
    if !root.as_os_str().is_empty() && !root.is_dir() {
        return Err(FolderError::NoRoot(root.to_path_buf()));
    }
    let mut at = root.to_path_buf();
    for part in below.components() {
        let std::path::Component::Normal(part) = part else {
            return Err(FolderError::Dots);
        };
        at.push(part);
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_dir() => {}
            Ok(_) => return Err(FolderError::NotAFolder(at)),
            Err(_) => match std::fs::create_dir(&at) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && at.is_dir() => {}
                Err(e) => return Err(FolderError::Io(e)),
            },
        }
    }
    Ok(())
}

/// Why a folder of the recordings can't be made (`make_folder`).
#[derive(Debug, thiserror::Error)]
pub enum FolderError {
    /// It lies outside the recordings' root.
    #[error("it is not inside the recordings' folder '{}', where framepipe makes folders", .0.display())]
    Outside(PathBuf),
    /// The root is not there.
    #[error("the recordings' folder '{}' is not there; framepipe makes the folders inside it", .0.display())]
    NoRoot(PathBuf),
    /// A `..` or `.` in the way.
    #[error("a folder named '..' or '.' is not made")]
    Dots,
    /// Something other than a folder where one goes.
    #[error("'{}' is not a folder (a link or a file)", .0.display())]
    NotAFolder(PathBuf),
    /// The system refused.
    #[error("{0}")]
    Io(std::io::Error),
}

/// Why `--record` can't be written as asked (`check`).
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A name whose container can't take packets as they came.
    #[error("--record '{name}': a recording is written as .mp4, .mov, .mkv or .ts (the packets as they came, not re-encoded)")]
    Container {
        /// The name as given.
        name: String,
    },
    /// A folder that isn't there and can't be made.
    #[error("--record '{name}': the folder '{}' does not exist, and can't be made ({why})", dir.display())]
    NoFolder {
        /// The name as given.
        name: String,
        /// Its folder.
        dir: PathBuf,
        /// Why not.
        why: FolderError,
    },
    /// A folder this process can't write.
    #[error("--record '{name}': the folder '{}' can't be written ({why})", dir.display())]
    Unwritable {
        /// The name as given.
        name: String,
        /// Its folder.
        dir: PathBuf,
        /// The system's reason.
        why: String,
    },
    /// Segments without a number or a time in their name.
    #[error("--record '{name}' with --segment: put {{seg}} (the segment's number) or the time (%Y%m%d-%H%M%S) in the name, so that each segment has its own")]
    SegmentsShareName {
        /// The name as given.
        name: String,
    },
}

/// What went through a recording, for the run's end.
#[derive(Clone, Debug, Default)]
pub struct Recorded {
    /// The files closed, in order.
    pub files: Vec<PathBuf>,
    /// Packets written.
    pub packets: u64,
    /// Video packets written.
    pub video_packets: u64,
    /// Packets the queue could not take (the disk fell behind).
    pub lost: u64,
    /// Packets before the first keyframe (not decodable alone), left out.
    pub before_key: u64,
    /// Packets with no time (no file can place them), left out.
    pub untimed: u64,
    /// Bytes in the files closed.
    pub bytes: u64,
    /// Segments that could not be written (their packets lost).
    pub failures: u64,
    /// Packets lost with them, or while no file could be opened.
    pub failed_packets: u64,
    /// Times a stream's timestamps jumped.
    pub discontinuities: u64,
    /// Why a segment could not be written, the last time one could not.
    pub error: Option<String>,
}

enum Msg {
    /// The input's streams, its video's index, and where the run's time 0 is in the
    /// packets' timeline (seconds).
    Open(Vec<InStream>, usize, f64),
    Packet(ff::Packet),
    /// A detected frame's line, when the frame reached the detector, and its time in the
    /// run (a file's; None for a live input's).
    Detection(String, std::time::Instant, Option<f64>),
    End,
}

/// One input's recording: the tap its source writes to, and the thread that writes files.
pub struct Recording {
    tx: Sender<Msg>,
    live: Arc<crate::stats::RecordLive>,
    lost: Arc<AtomicU64>,
    said_lost: Mutex<bool>,
    what: String,
    thread: Mutex<Option<std::thread::JoinHandle<Recorded>>>,
    /// What it recorded, once finished (a recording finished when its input left the run is
    /// asked again at the run's end).
    finished: Mutex<Option<Recorded>>,
    /// The recording was told to end (`end_soon`): its thread ends once it has written
    /// what its channel holds (where `Msg::End` found no room behind it).
    told_to_end: Arc<std::sync::atomic::AtomicBool>,
}

impl Recording {
    /// Starts the recording of `what` (the input, for messages) to `spec`, each closed
    /// segment listed in `archive` (its root's index, which keeps it within its budget).
    pub fn start(spec: RecordSpec, what: String, archive: Arc<Archive>) -> Result<Arc<Self>> {
        crate::media::info::init();
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let label = what.clone();
        let live = Arc::new(crate::stats::RecordLive::default());
        archive.track(&spec.input, spec.keep.age, live.clone());
        let shared = live.clone();
        let told_to_end = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let told = told_to_end.clone();
        let thread = std::thread::Builder::new()
            .name("record".into())
            .spawn(move || Writer::new(spec, label, (shared, archive)).run(rx, &told))?;
        Ok(Arc::new(Self {
            tx,
            live,
            lost: Arc::new(AtomicU64::new(0)),
            said_lost: Mutex::new(false),
            what,
            thread: Mutex::new(Some(thread)),
            finished: Mutex::new(None),
            told_to_end,
        }))
    }

    /// A frame of this input that reached the detector `at`, of time `seconds` in the run
    /// (a file's frame; None for a live input's), had `line` (`--detect`): it goes into the
    /// sidecar of the segment its frame is in (`sidecar`).
    pub fn detected(&self, line: String, at: std::time::Instant, seconds: Option<f64>) {
        let _ = self.tx.try_send(Msg::Detection(line, at, seconds));
    }

    /// Its figures as it goes.
    pub fn live(&self) -> Arc<crate::stats::RecordLive> {
        self.live.clone()
    }

    /// Tells the recording to end without waiting for it (`finish` then waits): a run's
    /// recordings are told together, so that they close their files at once, not one after
    /// another (325 cameras took over 10 s so). Never blocks: where the channel is full (the
    /// disk fell behind), the thread ends once it has written what the channel holds.
    pub fn end_soon(&self) {
        if !self.told_to_end.swap(true, Ordering::SeqCst) {
            let _ = self.tx.try_send(Msg::End);
        }
    }

    /// Ends the recording: the open file is finished and renamed; what was recorded (the
    /// same again when asked again).
    pub fn finish(&self) -> Recorded {
        let mut finished = self.finished.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(done) = finished.as_ref() {
            return done.clone();
        }
        self.end_soon();
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        let mut recorded = thread.and_then(|t| t.join().ok()).unwrap_or_default();
        recorded.lost += self.lost.load(Ordering::SeqCst);
        *finished = Some(recorded.clone());
        recorded
    }
}

impl crate::media::tap::PacketTap for Recording {
    fn open(&self, input: &ff::format::context::Input, video: usize, from: f64) {
        let zero = zero_of(input, video) + from;
        let _ = self
            .tx
            .try_send(Msg::Open(InStream::all_of(input), video, zero));
    }

    fn packet(&self, packet: ff::Packet) {
        // Disconnected: the recording stopped on an error, which it said.
        if let Err(crossbeam_channel::TrySendError::Full(_)) = self.tx.try_send(Msg::Packet(packet))
        {
            self.lost.fetch_add(1, Ordering::SeqCst);
            let mut said = self.said_lost.lock().unwrap_or_else(|e| e.into_inner());
            if !*said {
                *said = true;
                crate::warn!(
                    "recording {}: the disk fell behind and packets are lost (the summary counts them)",
                    self.what
                );
            }
        }
    }
}

/// Where the input's video starts in its packets' timeline, seconds (its stream's start
/// time; 0 without one): a frame's time in the run is this after it (with `--ss`'s `from`).
fn zero_of(input: &ff::format::context::Input, video: usize) -> f64 {
    input.stream(video).map_or(0.0, |s| {
        let tb = s.time_base();
        match s.start_time() {
            t if t == ff::ffi::AV_NOPTS_VALUE => 0.0,
            t => t as f64 * f64::from(tb.numerator()) / f64::from(tb.denominator()),
        }
    })
}

/// The file being written.
struct Segment {
    remux: Remux,
    part: PathBuf,
    name: PathBuf,
    began: Began,
    /// What its container says of it (the index reads it back, `index::probe`).
    mark: Mark,
}

/// The recording's thread: takes packets, writes segments.
struct Writer {
    spec: RecordSpec,
    what: String,
    streams: Vec<InStream>,
    video: usize,
    segment: Option<Segment>,
    next_number: u32,
    recorded: Recorded,
    /// Each input stream's timeline, made continuous.
    times: Vec<crate::media::timebase::Timeline>,
    /// The video's timestamps jumped: its next keyframe starts a new file.
    cut_at_key: bool,
    /// After a failed segment: no new file before this.
    retry_at: Option<std::time::Instant>,
    /// The figures the browser view shows.
    live: Arc<crate::stats::RecordLive>,
    /// The detections beside each segment, once one came.
    sidecars: Option<Sidecars>,
    /// Where the run's time 0 is in the packets' timeline, seconds.
    zero: f64,
    /// The index its segments go into.
    archive: Arc<Archive>,
    /// The wall clock and the media time (µs) of this opening's first segment: each next
    /// segment's wall-clock start is counted from it by its media time, so that segments
    /// that follow each other meet exactly (`wall_start`).
    anchor: Option<(i64, i64)>,
}

impl Writer {
    fn new(
        spec: RecordSpec,
        what: String,
        (live, archive): (Arc<crate::stats::RecordLive>, Arc<Archive>),
    ) -> Self {
        Self {
            spec,
            what,
            streams: Vec::new(),
            video: 0,
            segment: None,
            next_number: 0,
            recorded: Recorded::default(),
            times: Vec::new(),
            cut_at_key: false,
            retry_at: None,
            live,
            sidecars: None,
            zero: 0.0,
            archive,
            anchor: None,
        }
    }

    /// Writes what comes until `Msg::End`, or until `told` (told to end, `Msg::End` found
    /// no room) once the channel is empty, or until every sender is gone.
    fn run(mut self, rx: Receiver<Msg>, told: &std::sync::atomic::AtomicBool) -> Recorded {
        loop {
            let msg = match rx.recv_timeout(END_POLL) {
                Ok(msg) => msg,
                Err(RecvTimeoutError::Timeout) if told.load(Ordering::SeqCst) => break,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match msg {
                Msg::Open(streams, video, zero) => {
                    self.zero = zero;
                    self.close_or_fail();
                    self.anchor = None;
                    self.times = vec![Default::default(); streams.len()];
                    self.cut_at_key = false;
                    self.streams = streams;
                    self.video = video;
                }
                Msg::Packet(p) => self.packet(p),
                Msg::Detection(line, at, seconds) => {
                    let when = match seconds {
                        Some(s) => When::Media(self.zero + s),
                        None => When::Seen(at),
                    };
                    self.detection(&line, when);
                }
                Msg::End => break,
            }
        }
        self.close_or_fail();
        if let Some(lost) = self.sidecars.as_ref().map(|s| s.lost).filter(|&n| n > 0) {
            crate::warn!(
                "recording {}: {lost} detection line(s) could not be written beside the segments",
                self.what
            );
        }
        self.recorded
    }

    /// A detected frame's line: into the sidecar of the segment written when its frame was
    /// seen (the first line makes the open segment's).
    fn detection(&mut self, line: &str, when: When) {
        let sidecars = match &mut self.sidecars {
            Some(s) => s,
            None => {
                let s = self.sidecars.insert(Sidecars::default());
                if let Some(seg) = &self.segment {
                    s.open(&seg.part, seg.began);
                }
                s
            }
        };
        sidecars.line(line, when);
    }

    /// Finishes the open file; where that fails, the failure is taken as any other.
    fn close_or_fail(&mut self) {
        if let Err(e) = self.close() {
            self.fail(e);
        }
    }

    /// A segment could not be written: it is given up (its `.part` removed), counted and
    /// said once while the cause lasts; a new one is tried after `RETRY_EVERY`.
    fn fail(&mut self, e: anyhow::Error) {
        let why = format!("{e:#}");
        if let Some(seg) = self.segment.take() {
            seg.abandon();
            if let Some(s) = &mut self.sidecars {
                s.abandon();
            }
        }
        self.recorded.failures += 1;
        self.live.failures.fetch_add(1, Ordering::SeqCst);
        let mut failing = self.live.failing.lock().unwrap_or_else(|e| e.into_inner());
        if failing.is_none() {
            crate::warn!(
                "recording {}: {why}; its packets are lost until a file can be written again (tried every {} s, at a keyframe)",
                self.what,
                RETRY_EVERY.as_secs()
            );
        }
        *failing = Some(why.clone());
        self.recorded.error = Some(why);
        self.retry_at = Some(std::time::Instant::now() + RETRY_EVERY);
    }

    /// Makes `p`'s stream's timeline continuous (module doc): a jump is offset away and
    /// counted, and a jump of the video cuts the file at its next keyframe.
    fn continuous(&mut self, p: &mut ff::Packet) {
        let s = p.stream();
        let tb = self.streams[s].time_base;
        let Some(jump) = self.times.get_mut(s).and_then(|t| t.carry(p, tb)) else {
            return;
        };
        self.recorded.discontinuities += 1;
        // A segmented recording starts its next file there; one file goes on.
        if s == self.video && self.spec.segment.is_some() {
            self.cut_at_key = true;
        }
        let said = self.recorded.discontinuities;
        if said <= 3 || said.is_power_of_two() {
            crate::info!(
                "recording {}: stream {s}'s timestamps jumped by {:+.3} s (jump {said}); its packets go on from its last one{}",
                self.what,
                crate::media::timebase::seconds(jump, tb),
                match self.spec.segment {
                    Some(_) => ", and a new segment starts at the next keyframe",
                    None => "",
                }
            );
        }
    }

    /// Whether a new file may be opened now (not within `RETRY_EVERY` of a failure).
    fn may_open(&self) -> bool {
        self.retry_at.is_none_or(|t| std::time::Instant::now() >= t)
    }

    /// A packet's time in µs (its decoding time, else its presentation time).
    fn time_us(&self, p: &ff::Packet) -> Option<i64> {
        let tb = self.streams.get(p.stream())?.time_base;
        let t = p.dts().or(p.pts())?;
        Some(t.rescale(tb, ff::Rational::new(1, 1_000_000)))
    }

    /// A packet's presentation time in µs.
    fn pts_us(&self, p: &ff::Packet) -> Option<i64> {
        let tb = self.streams.get(p.stream())?.time_base;
        Some(p.pts()?.rescale(tb, ff::Rational::new(1, 1_000_000)))
    }

    fn packet(&mut self, mut p: ff::Packet) {
        if p.stream() >= self.streams.len() {
            return;
        }
        // A packet with no time can't be placed in a file (its muxer refuses it, and the
        // recording would stop): an RTSP camera's parameter sets sent before its first
        // timed picture are one. The pictures after them carry what they need.
        if p.dts().is_none() && p.pts().is_none() {
            self.recorded.untimed += 1;
            return;
        }
        self.continuous(&mut p);
        let key = p.stream() == self.video && p.is_key();
        if key {
            let due = match (&self.segment, self.spec.segment, self.time_us(&p)) {
                (Some(seg), Some(len), Some(t)) => {
                    t - seg.remux.origin_us >= len.as_micros() as i64
                }
                _ => false,
            };
            if due || std::mem::take(&mut self.cut_at_key) {
                self.close_or_fail();
            }
            if self.segment.is_none() && self.may_open() {
                let origin = self.time_us(&p).unwrap_or(0);
                // Frames are timed by presentation: the keyframe's, not its decoding time
                // (earlier by the pictures reordered around it).
                let shown = self.pts_us(&p).unwrap_or(origin);
                match self.open(origin, shown) {
                    Ok(seg) => {
                        if let Some(s) = &mut self.sidecars {
                            s.open(&seg.part, seg.began);
                        }
                        self.segment = Some(seg);
                    }
                    Err(e) => self.fail(e),
                }
            }
        }
        let Some(seg) = &mut self.segment else {
            match self.recorded.failures {
                0 => self.recorded.before_key += 1,
                _ => self.recorded.failed_packets += 1,
            }
            return;
        };
        let video = p.stream() == self.video;
        match seg.remux.write(p, &self.streams) {
            Ok(true) => {
                self.recorded.packets += 1;
                self.recorded.video_packets += u64::from(video);
            }
            Ok(false) => {}
            Err(e) => {
                self.recorded.failed_packets += seg.remux.packets + 1;
                self.fail(e);
            }
        }
    }

    /// The wall-clock start (µs since the epoch) of a segment whose first picture is at
    /// `media_us`: counted from the anchor while the two clocks agree within `DRIFT`, else
    /// the clock now (and the anchor set again).
    fn wall_start(&mut self, media_us: i64) -> i64 {
        let now = archive::now_us();
        match self.anchor {
            Some((wall, media)) if (wall + media_us - media - now).abs() < DRIFT_US => {
                wall + media_us - media
            }
            _ => {
                self.anchor = Some((now, media_us));
                now
            }
        }
    }

    /// Opens the next file, its zero at `origin_us`, its first picture shown at `shown_us`.
    fn open(&mut self, origin_us: i64, shown_us: i64) -> Result<Segment> {
        let name = PathBuf::from(expand(&self.spec.name, self.next_number));
        self.next_number += 1;
        if let Some(dir) = name
            .parent()
            .filter(|d| !d.as_os_str().is_empty() && !d.is_dir())
        {
            // A folder of its time (`%Y-%m-%d/`), made below the root only.
            make_folder(&self.spec.root, dir)
                .map_err(|why| anyhow::anyhow!("making the folder '{}': {why}", dir.display()))?;
        }
        let part = claim_part(&name)?;
        let muxer = muxer_of(&self.spec.name).unwrap_or("matroska");
        let mut out = ff::format::output_as(&part, muxer)
            .with_context(|| format!("opening '{}'", part.display()))?;
        let mark = Mark {
            input: self.spec.input.clone(),
            start_us: self.wall_start(shown_us),
            media_us: shown_us,
        };
        let mut tags = ff::Dictionary::new();
        tags.set(index::mark_key(muxer), &mark.text());
        out.set_metadata(tags);
        let mut options = ff::Dictionary::new();
        if matches!(muxer, "mp4" | "mov") {
            // delay_moov: the header waits for the first fragment, so that what a stream
            // only says in its packets (AAC's configuration from MPEG-TS) is in it.
            options.set(
                "movflags",
                "+frag_keyframe+empty_moov+delay_moov+default_base_moof",
            );
        }
        let streams = (self.streams.as_slice(), self.video, true);
        let what = name.display().to_string();
        match Remux::start(out, what, streams, origin_us, options) {
            Ok(remux) => Ok(Segment {
                remux,
                part,
                name,
                began: Began {
                    at: std::time::Instant::now(),
                    media: shown_us as f64 / 1e6,
                },
                mark,
            }),
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                Err(e)
            }
        }
    }

    /// Finishes the open file (trailer, rename), if one is open.
    fn close(&mut self) -> Result<()> {
        let Some(mut seg) = self.segment.take() else {
            return Ok(());
        };
        if let Err(e) = seg.remux.finish() {
            seg.abandon();
            if let Some(s) = &mut self.sidecars {
                s.abandon();
            }
            return Err(e);
        }
        let Segment {
            remux,
            part,
            name,
            mark,
            ..
        } = seg;
        drop(remux);
        let name = match rename_without_replacing(&part, &name) {
            Ok(name) => name,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                if let Some(s) = &mut self.sidecars {
                    s.abandon();
                }
                return Err(e);
            }
        };
        let sidecar = self.sidecars.as_mut().and_then(|s| s.close(&name));
        crate::debug!("recording {}: '{}' closed", self.what, name.display());
        // Its length as the index reads it again from the file (`Index::open`).
        match index::probe(&name) {
            Some((_, duration)) => self
                .archive
                .closed(&name, &mark, duration, sidecar.as_deref()),
            None => crate::warn!(
                "recording {}: '{}' was closed but does not read back; it is not indexed",
                self.what,
                name.display()
            ),
        }
        let bytes = std::fs::metadata(&name).map_or(0, |m| m.len());
        self.recorded.bytes += bytes;
        self.live.bytes.fetch_add(bytes, Ordering::SeqCst);
        self.live.segments.fetch_add(1, Ordering::SeqCst);
        let mut failing = self.live.failing.lock().unwrap_or_else(|e| e.into_inner());
        if failing.take().is_some() {
            crate::info!(
                "recording {}: writing again ('{}')",
                self.what,
                name.display()
            );
        }
        self.recorded.files.push(name);
        Ok(())
    }
}

impl Segment {
    /// Gives the file up: closed without its trailer, its `.part` removed.
    fn abandon(self) {
        let Segment { remux, part, .. } = self;
        drop(remux);
        let _ = std::fs::remove_file(&part);
    }
}

/// The name of segment `number`: `{seg}` as five digits, and the local time's `%Y %m %d %H
/// %M %S` (and `%%`) as strftime writes them; any other `%` stays as it is.
fn expand(pattern: &str, number: u32) -> String {
    use chrono::{Datelike, Timelike};
    let now = chrono::Local::now();
    let mut out = String::new();
    let numbered = pattern.replace("{seg}", &format!("{number:05}"));
    let mut chars = numbered.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('Y') => out.push_str(&format!("{:04}", now.year())),
            Some('m') => out.push_str(&format!("{:02}", now.month())),
            Some('d') => out.push_str(&format!("{:02}", now.day())),
            Some('H') => out.push_str(&format!("{:02}", now.hour())),
            Some('M') => out.push_str(&format!("{:02}", now.minute())),
            Some('S') => out.push_str(&format!("{:02}", now.second())),
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// A new hidden file beside `name` to write it under (`.NAME.part`, or `.NAME.K.part` where
/// that is taken), made with `create_new` so that nothing is replaced.
fn claim_part(name: &Path) -> Result<PathBuf> {
    let dir = name.parent().unwrap_or(Path::new(""));
    let file = name
        .file_name()
        .context("a recording needs a file name")?
        .to_string_lossy();
    for k in 0..1000 {
        let part = match k {
            0 => dir.join(format!(".{file}.part")),
            k => dir.join(format!(".{file}.{k}.part")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&part)
        {
            Ok(_) => return Ok(part),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating '{}'", part.display())),
        }
    }
    bail!(
        "'{}': a thousand unfinished recordings are in the way",
        name.display()
    )
}

/// Renames `part` to `name`, or to `NAME-K.EXT` where `name` is taken (never over a file);
/// the name it got.
fn rename_without_replacing(part: &Path, name: &Path) -> Result<PathBuf> {
    let stem = name
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ext = name
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    for k in 0..1000 {
        let to = match k {
            0 => name.to_path_buf(),
            k => name.with_file_name(format!("{stem}-{k}{ext}")),
        };
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            part,
            rustix::fs::CWD,
            &to,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => return Ok(to),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => {
                return Err(std::io::Error::from(e)).with_context(|| {
                    format!("renaming '{}' to '{}'", part.display(), to.display())
                })
            }
        }
    }
    bail!(
        "'{}': a thousand files of that name are in the way",
        name.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_name_takes_its_number_and_the_time() {
        let name = expand("cam-0-{seg}.mp4", 7);
        assert_eq!(name, "cam-0-00007.mp4");
        let name = expand("cam-%Y%m%d-%H%M%S-%%.ts", 0);
        assert_eq!(name.len(), "cam-20261202-061500-%.ts".len(), "{name}");
        assert!(
            name.starts_with("cam-20") && name.ends_with("-%.ts"),
            "{name}"
        );
    }

    #[test]
    fn a_name_that_does_not_change_is_refused_with_segments() {
        let seg = Some(Duration::from_secs(60));
        let here = Path::new("");
        assert!(check("cam.mp4", here, seg).is_err());
        assert!(check("cam-{seg}.mp4", here, seg).is_ok());
        assert!(check("cam-%H%M%S.mkv", here, seg).is_ok());
        assert!(check("cam.mp4", here, None).is_ok());
        assert!(check("cam.avi", here, None).is_err());
    }

    #[test]
    fn folders_are_made_below_the_root_only_and_through_no_link() {
        let top = std::env::temp_dir().join(format!("fp-make-folder-{}", std::process::id()));
        let root = top.join("rec");
        let _ = std::fs::remove_dir_all(&top);
        // The root itself is never made (a share that is not mounted).
        assert!(make_folder(&root, &root.join("cam")).is_err());
        std::fs::create_dir_all(&root).unwrap();
        make_folder(&root, &root.join("cam/2026-12-07")).unwrap();
        assert!(root.join("cam/2026-12-07").is_dir());
        assert_eq!(fixed_folder("rec/{name}/%Y/x-{seg}.mp4"), Path::new("rec"));
        assert_eq!(
            fixed_folder("rec/front/x-{seg}.mp4"),
            Path::new("rec/front")
        );
        // Outside the root, through `..` or a link: refused, nothing made.
        assert!(make_folder(&root, &top.join("elsewhere")).is_err());
        assert!(make_folder(&root, &root.join("../out")).is_err());
        std::fs::create_dir(top.join("outside")).unwrap();
        std::os::unix::fs::symlink(top.join("outside"), root.join("link")).unwrap();
        assert!(make_folder(&root, &root.join("link/cam")).is_err());
        assert!(!top.join("outside/cam").exists() && !top.join("out").exists());
        std::fs::remove_dir_all(&top).unwrap();
    }

    #[test]
    fn nothing_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("a.mp4");
        std::fs::write(&name, b"keep").unwrap();
        let part = claim_part(&name).unwrap();
        let again = claim_part(&name).unwrap();
        assert_ne!(part, again);
        let got = rename_without_replacing(&part, &name).unwrap();
        assert_eq!(got, dir.path().join("a-1.mp4"));
        assert_eq!(std::fs::read(&name).unwrap(), b"keep");
    }
}
