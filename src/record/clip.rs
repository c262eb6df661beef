//! Clips of events with the seconds before (`--clip PATTERN --pre S --post S`): each input's
//! packets of the last moments kept as they came (a cache bounded by `CACHE_BYTES` and by
//! time), and on an event a file written from the video keyframe at or before `pre` seconds
//! before it to `post` seconds after it, the camera's own packets untouched, audio with
//! them (DeepStream's Smart Record, Frigate's pre and post capture). An event of the same
//! input while its clip is being written extends that clip instead of starting another;
//! the clip's name is decided when the event is told (`Clips::event`), so the event names
//! it, and each event's snapshot (`snapshot`: its frame and box as a JPEG) is written
//! beside it, `STEM.jpg` for the clip's first event and `STEM-N.jpg` for the next.
//!
//! An event is placed against the packets as sidecars place lines (`sidecar::When`): a
//! file's by its frame's time in the input, a live camera's by when its frame was seen
//! against when each packet arrived.
//!
//! Invariants: a clip starts on a video keyframe, its times counted from it, and ends before
//! the first video packet decoded past `post` (every picture shown before then is in it,
//! and nothing written misses a picture it refers to); it is written
//! under a hidden `.part` name (`create_new`: nothing replaced) and renamed to its own once
//! its trailer is written; a clip's name is one no file had when it began (an earlier
//! run's clip is never replaced); the cache never holds more than `CACHE_BYTES`; a clip that
//! can't be written is said and given up, never the input, and counted: the run that lost
//! one says so at its end and fails (`Made`).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender};
use ff::Rescale;
use ffmpeg_next as ff;

use super::sidecar::When;
use crate::events::{ClipAsk, Picture, Told};
use crate::media::remux::{InStream, Remux};

/// The most bytes of packets one input's cache holds: about 30 s of a 1080p camera at
/// 8 Mbit/s.
pub const CACHE_BYTES: usize = 32 << 20;
/// Packets waiting for the cache's thread.
const QUEUE: usize = 2048;

/// `--clip`'s settings.
#[derive(Clone, Debug, PartialEq)]
pub struct ClipSpec {
    /// The pattern: `{name}` the input's, `{event}` the event's type and zone or line,
    /// `{track}` its track, `{time}` the local time (`%Y%m%d-%H%M%S`).
    pub pattern: String,
    /// Seconds before the event.
    pub pre: f64,
    /// Seconds after the last event.
    pub post: f64,
}

enum Msg {
    Open(Vec<InStream>, usize, f64),
    Packet(ff::Packet, Instant),
    /// A clip begins, for an event at this time, under this name.
    Begin(When, PathBuf),
    /// An event's snapshot, to be written under this name.
    Snapshot(PathBuf, Picture),
    End,
}

/// What the maker and those who tell it events share: the input's time zero (a file's
/// events are placed from it), and the clip being written or about to be (its name, the
/// time past which it ends, and the snapshots of its events so far). Whoever holds it
/// decides, once, whether an event extends the clip or begins another.
#[derive(Default)]
struct Shared {
    zero: f64,
    open: Option<(PathBuf, When, u32)>,
}

/// What one input's clip maker made: the clips written, and those that could not be (how
/// many, and the first one's reason).
#[derive(Debug, Default)]
pub struct Made {
    /// The clips written, under their own names.
    pub written: Vec<PathBuf>,
    /// Clips begun and not written (a folder that can't be written, a full disk).
    pub failed: u64,
    /// Why the first of them failed.
    pub why: Option<String>,
}

/// One input's clip maker: a packet tap, and a thread that keeps the cache and writes.
pub struct Clips {
    tx: Sender<Msg>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<Made>>>,
    spec: ClipSpec,
    file_name: String,
    shared: Arc<Mutex<Shared>>,
}

impl Clips {
    /// Starts the clip maker of input `name` (for messages), called `file_name` in its
    /// clips' names (`{name}`: a name safe in a file's).
    pub fn start(spec: ClipSpec, (name, file_name): (String, String)) -> Result<Arc<Self>> {
        crate::media::info::init();
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let shared = Arc::new(Mutex::new(Shared::default()));
        let maker = Maker::new(spec.clone(), name, shared.clone());
        let thread = std::thread::Builder::new()
            .name("clips".into())
            .spawn(move || maker.run(rx))?;
        Ok(Arc::new(Self {
            tx,
            thread: std::sync::Mutex::new(Some(thread)),
            spec,
            file_name,
            shared,
        }))
    }

    /// An event: it extends the clip being written, or begins one; its snapshot is written
    /// beside the clip where its frame is given. The clip's name and the snapshot's; None
    /// where the maker can't take it (its queue full, or ended).
    pub fn event(&self, ask: ClipAsk) -> Option<Told> {
        let mut shared = self.shared.lock().unwrap_or_else(|p| p.into_inner());
        let when = match ask.seconds {
            Some(s) => When::Media(shared.zero + s),
            None => When::Seen(ask.seen_at),
        };
        let until = shifted(when, self.spec.post);
        let (clip, shot) = match &mut shared.open {
            Some((name, ends, shots)) => {
                (*ends, *shots) = (until, *shots + 1); // the clip goes on
                (name.clone(), *shots)
            }
            None => {
                let name = free_name(name_of(&self.spec, &self.file_name, &ask.fields));
                self.tx.try_send(Msg::Begin(when, name.clone())).ok()?;
                shared.open = Some((name.clone(), until, 1));
                (name, 1)
            }
        };
        drop(shared);
        let snapshot = ask.picture.and_then(|p| {
            let name = snapshot_name(&clip, shot);
            self.tx.try_send(Msg::Snapshot(name.clone(), p)).ok()?;
            Some(name)
        });
        Some(Told { clip, snapshot })
    }

    /// Ends the maker: an open clip is finished; what it made.
    pub fn finish(&self) -> Made {
        let _ = self.tx.send_timeout(Msg::End, Duration::from_secs(1));
        let t = self.thread.lock().ok().and_then(|mut t| t.take());
        t.and_then(|t| t.join().ok()).unwrap_or_default()
    }
}

impl crate::media::tap::PacketTap for Clips {
    fn open(&self, input: &ff::format::context::Input, video: usize, from: f64) {
        let zero = super::zero_of(input, video) + from;
        let _ = self
            .tx
            .try_send(Msg::Open(InStream::all_of(input), video, zero));
    }

    fn packet(&self, packet: ff::Packet) {
        let _ = self.tx.try_send(Msg::Packet(packet, Instant::now()));
    }
}

/// A packet kept: it, when it arrived, its time (seconds of its presentation, else its
/// decoding), whether it is a video keyframe, its size.
struct Kept {
    packet: ff::Packet,
    arrived: Instant,
    seconds: f64,
    /// Its decoding time, seconds (its presentation time where it has none).
    decoded: f64,
    key: bool,
    bytes: usize,
}

impl Kept {
    /// Whether it is at or before `when` (a keyframe at the very start counts).
    fn at_or_before(&self, when: When) -> bool {
        match when {
            When::Seen(i) => self.arrived <= i,
            When::Media(t) => self.seconds < t + 1e-6,
        }
    }
}

/// The clip being written.
struct Open {
    remux: Remux,
    part: PathBuf,
    name: PathBuf,
}

/// The clip maker's thread.
struct Maker {
    spec: ClipSpec,
    name: String,
    shared: Arc<Mutex<Shared>>,
    streams: Vec<InStream>,
    video: usize,
    cache: VecDeque<Kept>,
    bytes: usize,
    open: Option<Open>,
    made: Made,
}

impl Maker {
    fn new(spec: ClipSpec, name: String, shared: Arc<Mutex<Shared>>) -> Self {
        Self {
            spec,
            name,
            shared,
            streams: Vec::new(),
            video: 0,
            cache: VecDeque::new(),
            bytes: 0,
            open: None,
            made: Made::default(),
        }
    }

    fn run(mut self, rx: Receiver<Msg>) -> Made {
        while let Ok(m) = rx.recv() {
            match m {
                Msg::Open(streams, video, zero) => {
                    self.ended();
                    self.cache.clear();
                    self.bytes = 0;
                    (self.streams, self.video) = (streams, video);
                    self.lock().zero = zero;
                }
                Msg::Packet(p, arrived) => self.packet(p, arrived),
                Msg::Begin(when, name) => self.event(when, name),
                Msg::Snapshot(name, picture) => self.snapshot(&name, picture),
                Msg::End => break,
            }
        }
        self.ended();
        self.made
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The open clip ends here: no event extends it any more, and it is finished.
    fn ended(&mut self) {
        self.lock().open = None;
        self.close();
    }

    fn snapshot(&self, name: &Path, picture: Picture) {
        if let Some(dir) = name.parent().filter(|d| !d.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(dir);
        }
        match super::snapshot::write(name, picture) {
            Ok(name) => crate::debug!("snapshot of {}: '{}'", self.name, name.display()),
            Err(e) => crate::warn!("snapshot of {}: {e:#}", self.name),
        }
    }

    fn packet(&mut self, p: ff::Packet, arrived: Instant) {
        let Some(stream) = self.streams.get(p.stream()) else {
            return;
        };
        let Some(t) = p.pts().or(p.dts()) else { return };
        let us = |t: i64| t.rescale(stream.time_base, ff::Rational::new(1, 1_000_000)) as f64 / 1e6;
        let seconds = us(t);
        let decoded = p.dts().map_or(seconds, us);
        let key = p.stream() == self.video && p.is_key();
        let kept = Kept {
            bytes: p.size(),
            packet: p,
            arrived,
            seconds,
            decoded,
            key,
        };
        // The clip ends before the first video packet decoded past its time: every picture
        // shown before then is in it, with what it refers to.
        if self.open.is_some() && kept.packet.stream() == self.video {
            let mut shared = self.lock();
            let past = match shared.open.as_ref().map(|o| o.1) {
                Some(When::Seen(i)) => kept.arrived >= i,
                Some(When::Media(t)) => kept.decoded >= t,
                None => true,
            };
            if past {
                shared.open = None; // the next event begins another
                drop(shared);
                self.close();
            }
        }
        if let Some(open) = &mut self.open {
            if let Err(e) = open.remux.write(kept.packet.clone(), &self.streams) {
                self.failed(&e);
                self.abandon();
            }
        }
        self.keep(kept);
    }

    /// Keeps `k`, dropping the oldest past the cache's bounds (bytes, and `pre` plus a
    /// group of pictures' worth of time before the newest).
    fn keep(&mut self, k: Kept) {
        self.bytes += k.bytes;
        let horizon = self.spec.pre + 10.0;
        let (newest_s, newest_at) = (k.seconds, k.arrived);
        self.cache.push_back(k);
        while let Some(old) = self.cache.front() {
            let stale = newest_s - old.seconds > horizon
                && newest_at.duration_since(old.arrived).as_secs_f64() > horizon;
            if self.bytes <= CACHE_BYTES && !stale {
                break;
            }
            self.bytes -= old.bytes;
            self.cache.pop_front();
        }
    }

    /// Begins clip `name` for an event at `when` (its extension by later events is
    /// `shared`'s): from the keyframe at or before `pre` seconds before it.
    fn event(&mut self, when: When, name: PathBuf) {
        let from = shifted(when, -self.spec.pre);
        let start = self
            .cache
            .iter()
            .rposition(|k| k.key && k.at_or_before(from))
            .or_else(|| self.cache.iter().position(|k| k.key));
        let Some(start) = start else {
            crate::warn!("clip of {}: no keyframe kept yet; no clip", self.name);
            self.lock().open = None;
            return;
        };
        if let Err(e) = self.begin(start, name) {
            self.failed(&e);
            self.lock().open = None;
        }
    }

    /// Opens a clip from cache entry `start` (a keyframe) and writes the cache from there.
    fn begin(&mut self, start: usize, name: PathBuf) -> Result<()> {
        if let Some(dir) = name.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating '{}'", dir.display()))?;
        }
        let part = super::claim_part(&name)?;
        let muxer = super::muxer_of(&self.spec.pattern).unwrap_or("mp4");
        let out = ff::format::output_as(&part, muxer)
            .with_context(|| format!("opening '{}'", part.display()))?;
        let key = &self.cache[start].packet;
        let tb = self.streams[key.stream()].time_base;
        let origin = key
            .dts()
            .or(key.pts())
            .unwrap_or(0)
            .rescale(tb, ff::Rational::new(1, 1_000_000));
        let streams = (self.streams.as_slice(), self.video, true);
        let what = name.display().to_string();
        let remux = match Remux::start(out, what, streams, origin, ff::Dictionary::new()) {
            Ok(r) => r,
            Err(e) => {
                let _ = std::fs::remove_file(&part);
                return Err(e);
            }
        };
        self.open = Some(Open { remux, part, name });
        let cached: Vec<ff::Packet> = self
            .cache
            .iter()
            .skip(start)
            .map(|k| k.packet.clone())
            .collect();
        for p in cached {
            let Some(open) = &mut self.open else { break };
            if let Err(e) = open.remux.write(p, &self.streams) {
                self.abandon();
                return Err(e);
            }
        }
        Ok(())
    }

    /// Finishes the open clip: trailer, then its own name.
    fn close(&mut self) {
        let Some(mut open) = self.open.take() else {
            return;
        };
        if let Err(e) = open.remux.finish() {
            self.failed(&e);
            let _ = std::fs::remove_file(&open.part);
            return;
        }
        let Open {
            remux, part, name, ..
        } = open;
        drop(remux);
        match super::rename_without_replacing(&part, &name) {
            Ok(name) => {
                crate::info!("clip of {}: '{}'", self.name, name.display());
                self.made.written.push(name);
            }
            Err(e) => {
                self.failed(&e);
                let _ = std::fs::remove_file(&part);
            }
        }
    }

    /// A clip that could not be written: said, and counted.
    fn failed(&mut self, e: &anyhow::Error) {
        crate::warn!("clip of {}: {e:#}; given up", self.name);
        self.made.failed += 1;
        self.made.why.get_or_insert_with(|| format!("{e:#}"));
    }

    /// Gives the open clip up.
    fn abandon(&mut self) {
        if let Some(open) = self.open.take() {
            drop(open.remux);
            let _ = std::fs::remove_file(&open.part);
        }
    }
}

/// Checks before the run that clips of `pattern` can be written: the folder that holds them
/// all (before a `{…}` or a `%`), or the nearest one above it that is there (the rest is
/// made as clips are written), takes a file; Err with the system's reason.
pub fn check_folder(pattern: &str) -> Result<(), ClipFolderError> {
    let fixed = super::fixed_folder(pattern);
    let mut at = fixed.as_path();
    while !at.as_os_str().is_empty() && !at.is_dir() {
        at = at.parent().unwrap_or(Path::new(""));
    }
    let at = if at.as_os_str().is_empty() {
        Path::new(".")
    } else {
        at
    };
    let probe = at.join(format!(".framepipe-{}.clip-probe", std::process::id()));
    crate::paths::check_writable("--clip", &probe.to_string_lossy()).map_err(|e| match e {
        crate::paths::PathError::NotWritable { source, .. } => ClipFolderError::Unwritable {
            dir: at.to_path_buf(),
            source,
        },
        other => ClipFolderError::Path(other),
    })
}

/// Why clips can't be written where `--clip` says (`check_folder`).
#[derive(Debug, thiserror::Error)]
pub enum ClipFolderError {
    /// The folder takes no file.
    #[error("the folder '{}' can't be written ({source})", dir.display())]
    Unwritable {
        /// The folder.
        dir: PathBuf,
        /// The system's reason.
        source: std::io::Error,
    },
    /// Another reason the path can't be used.
    #[error(transparent)]
    Path(crate::paths::PathError),
}

/// A clip's file name: `spec`'s pattern with the input's `file_name`, the local time and
/// the event's `fields`.
fn name_of(spec: &ClipSpec, file_name: &str, fields: &[(&'static str, String)]) -> PathBuf {
    let time = chrono::Local::now().format("%Y%m%d-%H%M%S").to_string();
    let mut name = spec
        .pattern
        .replace("{name}", file_name)
        .replace("{time}", &time);
    // An event's names are a zone's or a line's (letters, digits, '-', '_'), a track's
    // a number: none leaves the folder.
    for (k, v) in fields {
        name = name.replace(&format!("{{{k}}}"), &v.replace(['/', '\\', '.'], "_"));
    }
    PathBuf::from(name)
}

/// `name`, or where a file has it (an earlier run's clip), the first of `STEM-2.EXT`,
/// `STEM-3.EXT`, … that none has.
fn free_name(name: PathBuf) -> PathBuf {
    if !name.exists() {
        return name;
    }
    let stem = name.file_stem().unwrap_or_default().to_string_lossy();
    let ext = name
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    (2..1000)
        .map(|k| name.with_file_name(format!("{stem}-{k}{ext}")))
        .find(|n| !n.exists())
        .unwrap_or(name)
}

/// The snapshot of a clip's `shot`th event: `STEM.jpg` for its first, `STEM-N.jpg` after.
fn snapshot_name(clip: &Path, shot: u32) -> PathBuf {
    let stem = clip.file_stem().unwrap_or_default().to_string_lossy();
    match shot {
        1 => clip.with_file_name(format!("{stem}.jpg")),
        n => clip.with_file_name(format!("{stem}-{n}.jpg")),
    }
}

/// `seconds` (negative: before) from `when`; an instant before the clock's start is its
/// start.
fn shifted(when: When, seconds: f64) -> When {
    let by = Duration::from_secs_f64(seconds.abs());
    match when {
        When::Media(t) => When::Media(t + seconds),
        When::Seen(i) if seconds >= 0.0 => When::Seen(i + by),
        When::Seen(i) => When::Seen(i.checked_sub(by).unwrap_or(i)),
    }
}
