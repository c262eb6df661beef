//! From boxes to events: each input's tracker gives every object an id across frames
//! (`track`); its zones and lines (`zones`) turn the tracks' steps into events (entered,
//! left, stayed in a zone; crossed a line, which way); the events go out as JSON (`out`:
//! a file, webhooks, MQTT), start or extend a clip of the input's own packets with the
//! seconds before (`--clip`, `record::clip`: with a JPEG snapshot of the event's frame and
//! its box, both named in the event), are kept for the browser view (`recent`), are counted
//! for the summary, and each zone's count is kept for `/metrics` and MQTT's retained topics.
//! `--motion` and the inputs' own states (a camera down, a recording failing) make events
//! too (`States`), with or without a detector.
//!
//! Runs on the detector's thread, after each detected frame (`Engine::detected`): events
//! are as fresh as the detections, one detection interval at most after the step.
//!
//! Invariants: every event has an `id` unique in the run and its `time`; an event names
//! its input, its track and the frame it was seen on; only the
//! labels asked for (`--event-labels`; every label where not given) make events; every
//! enter has its leave by the end (a track ending in a zone leaves it); the counts by kind
//! are those that went to the destinations.

pub mod camera;
mod discovery;
mod message;
pub mod motion;
mod mqtt;
pub mod out;
pub mod recent;
pub mod track;
mod webhook;
pub mod zones;

use std::collections::BTreeMap;

use crate::detect::Detection;
use crate::frame::FrameSize;
use zones::{Did, Rules, Shape};

/// What `--zone`, `--line`, `--events`, `--event-labels` and `--stay` ask for, checked by the
/// plan.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Settings {
    /// The zones and lines.
    pub shapes: Vec<Shape>,
    /// Where events go.
    pub to: Vec<out::Destination>,
    /// The labels that make events (every one where empty).
    pub labels: Vec<String>,
    /// Seconds in a zone after which a stay is said.
    pub stay: Option<f64>,
    /// `--clip`: the clips' pattern, and the seconds before and after an event.
    pub clip: Option<(String, f64, f64)>,
    /// `--motion`: motion events, and the detector run only while there is motion.
    pub motion: bool,
}

/// Where an input's events start or extend a clip (`record::clip`), and write their
/// snapshot beside it: the clip's file and the snapshot's, where there are.
pub type ClipHook = std::sync::Arc<dyn Fn(ClipAsk) -> Option<Told> + Send + Sync>;

/// Makes an event's picture a JPEG with its boxes drawn (`record::snapshot::jpeg`, handed
/// down by the app): None where it can't.
pub type JpegMaker = fn(&Picture) -> Option<Vec<u8>>;

/// An event, as its clip and snapshot need it.
pub struct ClipAsk {
    /// When the event's frame was seen.
    pub seen_at: std::time::Instant,
    /// Its time in the run where it is a file's (None for a live input's).
    pub seconds: Option<f64>,
    /// The fields the clip's name takes (`event`, `track`).
    pub fields: Vec<(&'static str, String)>,
    /// The frame, for the snapshot.
    pub picture: Option<Picture>,
}

/// An event's frame, packed, with the boxes its snapshot shows.
pub struct Picture {
    /// Its pixel format.
    pub format: crate::pixel::PixelFormat,
    /// Its size.
    pub size: FrameSize,
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// The boxes drawn into the snapshot.
    pub boxes: Vec<Detection>,
}

impl std::fmt::Debug for Picture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Picture")
            .field("format", &self.format)
            .field("size", &self.size)
            .field("boxes", &self.boxes.len())
            .finish_non_exhaustive()
    }
}

/// Where an event's clip and snapshot are written.
#[derive(Clone, Debug, PartialEq)]
pub struct Told {
    /// The clip it starts or extends.
    pub clip: std::path::PathBuf,
    /// Its snapshot, where its frame was given.
    pub snapshot: Option<std::path::PathBuf>,
}

impl Settings {
    /// Whether anything is asked for.
    pub fn any(&self) -> bool {
        !self.shapes.is_empty() || !self.to.is_empty() || self.motion
    }
}

/// One detected frame, as events name it.
pub struct Seen<'a> {
    /// The run's input number.
    pub input: usize,
    /// Its name.
    pub name: &'a str,
    /// The frame's index.
    pub frame: u64,
    /// Its time in the run, seconds (the run's clock for a live input).
    pub seconds: f64,
    /// Its size.
    pub size: FrameSize,
    /// When it reached the detector.
    pub seen_at: std::time::Instant,
    /// Its input is live (its clips are placed by `seen_at`, a file's by `seconds`).
    pub live: bool,
    /// Its picture as packed BGR, for a snapshot.
    pub bgr: Option<&'a [u8]>,
}

/// One input's tracker and rules, made for the camera called `name` with its own settings
/// (a place another camera takes again starts anew).
struct Camera {
    name: String,
    tracker: track::Tracker,
    rules: Rules,
    /// The labels that make its events (every one where empty).
    labels: Vec<String>,
}

/// Every input's tracker and rules, the destinations, and the counts (module doc).
pub struct Engine {
    /// Each input's, made as its first detections come (those that join too).
    cameras: Vec<Option<Camera>>,
    /// The command line's zones and lines (`@INPUT` or every input's), stay and labels.
    shapes: Vec<Shape>,
    stay: Option<f64>,
    labels: Vec<String>,
    out: std::sync::Arc<out::Outputs>,
    /// Events by kind.
    counts: BTreeMap<String, u64>,
    /// Each input's zones' counts last sent.
    zone_counts: Vec<BTreeMap<String, u64>>,
    /// Each input's clip maker, where `--clip` asks.
    clips: Vec<Option<ClipHook>>,
    /// When each input's last picture went to the destinations that show it.
    pictured: Vec<Option<std::time::Instant>>,
}

/// The shortest time between two of an input's pictures sent out (MQTT's snapshot).
const PICTURE_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

impl Engine {
    /// The engine for `names` (the run's inputs, in order), as `settings` asks; its
    /// destinations started (`replace`: `-y`).
    pub fn start(
        settings: &Settings,
        names: &[String],
        replace: bool,
        (clips, recent, jpeg): (
            Vec<Option<ClipHook>>,
            Option<std::sync::Arc<recent::Recent>>,
            Option<JpegMaker>,
        ),
    ) -> anyhow::Result<Self> {
        Ok(Self {
            cameras: names.iter().map(|_| None).collect(),
            shapes: settings.shapes.clone(),
            stay: settings.stay,
            labels: settings.labels.clone(),
            out: std::sync::Arc::new(out::Outputs::start(&settings.to, replace, (recent, jpeg))?),
            counts: BTreeMap::new(),
            zone_counts: vec![BTreeMap::new(); names.len()],
            clips,
            pictured: Vec::new(),
        })
    }

    /// Input `seen.input`'s tracker and rules, made (again) for the camera `seen.name` with
    /// its `own` settings where it has none yet or another camera had its place.
    fn camera(&mut self, seen: &Seen, own: &camera::Own) -> &mut Camera {
        let at = seen.input;
        if self.cameras.len() <= at {
            self.cameras.resize_with(at + 1, || None);
            self.zone_counts.resize(at + 1, BTreeMap::new());
        }
        let slot = &mut self.cameras[at];
        if slot.as_ref().is_none_or(|c| c.name != seen.name) {
            let mut shapes: Vec<Shape> = self
                .shapes
                .iter()
                .filter(|s| s.on(at, seen.name))
                .cloned()
                .collect();
            shapes.retain(|s| !own.shapes.iter().any(|o| o.name == s.name));
            shapes.extend(own.shapes.iter().cloned());
            let stay = own.stay.or(self.stay);
            let names = |line: bool| {
                shapes
                    .iter()
                    .filter(|s| s.line == line)
                    .map(|s| s.name.clone())
                    .collect()
            };
            let watched = out::Watched {
                zones: names(false),
                lines: names(true),
                stay: stay.is_some(),
            };
            let m = out::Message::Camera(seen.name.to_string(), std::sync::Arc::new(watched));
            self.out.send(&m);
            *slot = Some(Camera {
                name: seen.name.to_string(),
                tracker: track::Tracker::default(),
                rules: Rules::new(shapes, stay),
                labels: own.labels.clone().unwrap_or_else(|| self.labels.clone()),
            });
            self.zone_counts[at] = BTreeMap::new();
        }
        slot.as_mut().expect("made above")
    }

    /// `found` on frame `seen` of a camera with its `own` settings: each box given its
    /// track's id, and the events it makes sent.
    pub fn detected(&mut self, seen: &Seen, found: &mut [Detection], own: &camera::Own) {
        let camera = self.camera(seen, own);
        let ended = camera.tracker.update(found);
        let (rules, labels) = (&mut camera.rules, &camera.labels);
        if rules.is_empty() {
            return;
        }
        let mut events = Vec::new();
        for d in found.iter() {
            let Some(id) = d.track else { continue };
            if !labels.is_empty() && !labels.contains(&d.label) {
                continue;
            }
            let foot = ((d.rect[0] + d.rect[2]) / 2.0, d.rect[3]);
            for did in rules.saw(id, (foot, seen.size), seen.seconds) {
                events.push((event(seen, &did, Some(d), id), Some(d.clone())));
            }
        }
        for id in ended {
            for did in rules.ended(id) {
                events.push((event(seen, &did, None, id), None));
            }
        }
        let now = rules.counts();
        self.picture(seen, &events);
        for (mut e, d) in events {
            let kind = e["type"].as_str().unwrap_or("?").to_string();
            if let Some(clip) = self.clips.get(seen.input).cloned().flatten() {
                let place = e["zone"].as_str().or(e["line"].as_str()).unwrap_or("");
                let fields = vec![
                    ("event", format!("{kind}-{place}")),
                    ("track", e["track"].to_string()),
                ];
                let picture = seen.bgr.map(|bgr| Picture {
                    format: crate::pixel::PixelFormat::Bgr24,
                    size: seen.size,
                    bytes: bgr.to_vec(),
                    boxes: d.into_iter().collect(),
                });
                let ask = ClipAsk {
                    seen_at: seen.seen_at,
                    seconds: (!seen.live).then_some(seen.seconds),
                    fields,
                    picture,
                };
                told_in(&mut e, clip(ask));
            }
            *self.counts.entry(kind).or_default() += 1;
            self.out
                .send(&out::Message::Event(seen.name.to_string(), e));
        }
        for (zone, n) in &now {
            if self.zone_counts[seen.input].get(zone) != Some(n) {
                let m = out::Message::Count(seen.name.to_string(), zone.clone(), *n);
                self.out.send(&m);
            }
        }
        self.zone_counts[seen.input] = now;
    }

    /// Frame `seen` with the boxes of its `events`, to the destinations that show it (MQTT's
    /// camera snapshot), at most one a `PICTURE_EVERY` for each input.
    fn picture(&mut self, seen: &Seen, events: &[(serde_json::Value, Option<Detection>)]) {
        // Asked first: most runs show no picture, and this runs for every detected frame.
        let boxed = events.iter().any(|(_, d)| d.is_some());
        let (true, Some(bgr), true) = (self.out.wants_pictures(), seen.bgr, boxed) else {
            return;
        };
        let last = &mut self.pictured;
        last.resize(last.len().max(seen.input + 1), None);
        if last[seen.input].is_some_and(|t| seen.seen_at.duration_since(t) < PICTURE_EVERY) {
            return;
        }
        let boxes: Vec<Detection> = events.iter().filter_map(|(_, d)| d.clone()).collect();
        last[seen.input] = Some(seen.seen_at);
        let picture = Picture {
            format: crate::pixel::PixelFormat::Bgr24,
            size: seen.size,
            bytes: bgr.to_vec(),
            boxes,
        };
        let m = out::Message::Picture(seen.name.to_string(), std::sync::Arc::new(picture));
        self.out.send(&m);
    }

    /// Events by kind, so far; None where no zone, line or destination was asked for (the
    /// engine then only tracks).
    pub fn counts(&self) -> Option<&BTreeMap<String, u64>> {
        let ruled = self.cameras.iter().flatten().any(|c| !c.rules.is_empty());
        (!self.out.is_empty() || !self.shapes.is_empty() || ruled).then_some(&self.counts)
    }

    /// Each input's zones' counts now.
    pub fn zone_counts(&self) -> &[BTreeMap<String, u64>] {
        &self.zone_counts
    }

    /// Ends the destinations (module doc of `out`): Err naming the events not delivered.
    pub fn finish(&mut self) -> Result<(), out::Undelivered> {
        self.out.finish()
    }

    /// The destinations, for the events of the run's own states (`States`).
    pub fn outputs(&self) -> std::sync::Arc<out::Outputs> {
        self.out.clone()
    }

    /// Each input's clip maker, for the events of the run's own states (`States`).
    pub fn clips(&self) -> Vec<Option<ClipHook>> {
        self.clips.clone()
    }
}

/// `e` names the clip and snapshot its maker `told`, where there are.
fn told_in(e: &mut serde_json::Value, told: Option<Told>) {
    let Some(told) = told else { return };
    e["clip"] = told.clip.to_string_lossy().into_owned().into();
    if let Some(s) = told.snapshot {
        e["snapshot"] = s.to_string_lossy().into_owned().into();
    }
}

/// `e` with its `time` (now) and its `id`: the time in milliseconds and a number unique in
/// the run.
fn stamped(mut e: serde_json::Value) -> serde_json::Value {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = chrono::Utc::now();
    let k = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    e["id"] = format!("{}-{k}", now.timestamp_millis()).into();
    e["time"] = now
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
        .into();
    e
}

/// The events of the inputs' own states, sent to the same destinations: a camera went down
/// (lost, reconnecting) or came back, its recording could not write or writes again; its
/// motion started or ended (`--motion`).
pub struct States {
    out: std::sync::Arc<out::Outputs>,
    /// Each input's: down, and its recording failing.
    last: Vec<(bool, bool)>,
    counts: BTreeMap<String, u64>,
    /// Each input's clip maker: motion starts or extends a clip.
    clips: Vec<Option<ClipHook>>,
}

impl States {
    /// The states' events of `inputs` inputs, to `out`, motion clipped by `clips`.
    pub fn new(
        out: std::sync::Arc<out::Outputs>,
        inputs: usize,
        clips: Vec<Option<ClipHook>>,
    ) -> Self {
        Self {
            out,
            last: vec![(false, false); inputs],
            counts: BTreeMap::new(),
            clips,
        }
    }

    /// The run's figures now: an event for each input whose state changed.
    pub fn saw(&mut self, live: &crate::stats::Live, names: &[String]) {
        // Inputs that joined while the run goes are watched too.
        if self.last.len() < live.inputs.len() {
            self.last.resize(live.inputs.len(), (false, false));
        }
        for (k, input) in live.inputs.iter().enumerate() {
            let last = &mut self.last[k];
            let down = input.down.is_some() && input.ended.is_none();
            let failing = input.recording.as_ref().and_then(|r| r.failing.clone());
            let mut made = Vec::new();
            if down != last.0 {
                let state = input.state.clone().unwrap_or_else(|| "not open".into());
                made.push(match down {
                    true => serde_json::json!({"type": "camera-down", "state": crate::secret::redact(&state)}),
                    false => serde_json::json!({"type": "camera-up"}),
                });
            }
            if failing.is_some() != last.1 {
                made.push(match &failing {
                    Some(why) => serde_json::json!({"type": "recording-failed", "error": why}),
                    None => serde_json::json!({"type": "recording-resumed"}),
                });
            }
            *last = (down, failing.is_some());
            let name = names.get(k).map_or("", String::as_str);
            for mut e in made {
                e["input"] = k.into();
                e["name"] = name.into();
                let e = stamped(e);
                let kind = e["type"].as_str().unwrap_or("?").to_string();
                *self.counts.entry(kind).or_default() += 1;
                self.out.send(&out::Message::Event(name.to_string(), e));
            }
        }
    }

    /// Events by kind, so far.
    pub fn counts(&self) -> &BTreeMap<String, u64> {
        &self.counts
    }

    /// Input `k` (called `name`) had `change` of its motion on `frame` at `seconds`; a
    /// start (seen at `seen_at`, a live input's, or at `seconds` in a file) starts or
    /// extends the input's clip, its `picture` the snapshot.
    pub fn motion(
        &mut self,
        (k, name): (usize, &str),
        (frame, seconds): (u64, f64),
        change: motion::Change,
        clip: Option<(std::time::Instant, bool, Option<Picture>)>,
    ) {
        let started = matches!(change, motion::Change::Started(..));
        let mut e = match change {
            motion::Change::Started(area, b) => serde_json::json!({
                "type": "motion-start",
                "area": (area * 1e4).round() / 1e4,
                "box": b,
            }),
            motion::Change::Ended(lasted) => serde_json::json!({
                "type": "motion-end",
                "lasted_s": (lasted * 1e3).round() / 1e3,
            }),
        };
        e["input"] = k.into();
        e["name"] = name.into();
        e["frame"] = frame.into();
        e["seconds"] = ((seconds * 1e3).round() / 1e3).into();
        let mut e = stamped(e);
        let hook = self.clips.get(k).cloned().flatten();
        if let (true, Some(hook), Some((seen_at, live, picture))) = (started, hook, clip) {
            let ask = ClipAsk {
                seen_at,
                seconds: (!live).then_some(seconds),
                fields: vec![("event", "motion".into()), ("track", String::new())],
                picture,
            };
            told_in(&mut e, hook(ask));
        }
        let kind = e["type"].as_str().unwrap_or("?").to_string();
        *self.counts.entry(kind).or_default() += 1;
        self.out.send(&out::Message::Event(name.to_string(), e));
    }
}

/// The JSON of what track `id` did on frame `seen` (`d`: its box there, where it was seen).
fn event(seen: &Seen, did: &Did, d: Option<&Detection>, id: u64) -> serde_json::Value {
    let mut e = stamped(serde_json::json!({
        "input": seen.input,
        "name": seen.name,
        "track": id,
        "frame": seen.frame,
        "seconds": (seen.seconds * 1e3).round() / 1e3,
    }));
    if let Some(d) = d {
        e["label"] = d.label.clone().into();
        e["score"] = ((f64::from(d.score) * 1e4).round() / 1e4).into();
        e["box"] = serde_json::json!(d.rect);
    }
    match did {
        Did::Entered(z) => {
            e["type"] = "enter".into();
            e["zone"] = z.clone().into();
        }
        Did::Left(z) => {
            e["type"] = "leave".into();
            e["zone"] = z.clone().into();
        }
        Did::Stayed(z, s) => {
            e["type"] = "stay".into();
            e["zone"] = z.clone().into();
            e["stayed_s"] = ((s * 1e3).round() / 1e3).into();
        }
        Did::Crossed(l, ltr) => {
            e["type"] = "cross".into();
            e["line"] = l.clone().into();
            e["direction"] = if *ltr {
                "left-to-right"
            } else {
                "right-to-left"
            }
            .into();
        }
    }
    e
}
