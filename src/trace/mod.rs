//! Where the time goes: spans of every stage of a run's frames, kept for the first frames
//! and, in a bounded ring, for the most recent ones (`Recent`), written as a Chrome trace
//! (`--trace`, opened by Perfetto and chrome://tracing), drawn as an SVG timeline
//! (`--timeline`) and as the window's strip (`t`), one row per track.
//!
//! GPU spans come from CUDA events, converted to the host clock through a calibration event
//! (`backend::cuda`); capture and output spans are host times. All times are on one clock,
//! in microseconds from the start of the run.
//!
//! With several inputs each input's capture thread has its own track, and every span says
//! which input's frame it belongs to (a frame is its input and its index in that input; the
//! backend's tracks are shared, so its spans of different inputs interleave on them).
//!
//! Invariants: the SVG and the window's strip are drawn from one `Layout` (rows, bars,
//! colours, scale), so they can't disagree; a track is named by its owner (`Track`), the
//! backend numbering its own from 0, so more backends can add tracks without renumbering;
//! the ring holds a bounded number of frames whatever the run's length.

use std::time::Instant;

use serde::Serialize;

mod render;

pub use render::{layouts_svg, nice_step, timeline_svg, Bar, Layout};

/// What a span measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Reading a frame into the ring.
    Capture,
    /// A band's upload.
    H2d,
    /// A band's kernels.
    Kernels,
    /// A band's download.
    D2h,
    /// The CPU backend's processing of a whole frame.
    Process,
    /// The sink's work on a frame.
    Output,
}

impl Kind {
    /// The label drawn for this kind.
    pub fn label(self) -> &'static str {
        match self {
            Kind::Capture => "capture",
            Kind::H2d => "H2D",
            Kind::Kernels => "kernels",
            Kind::D2h => "D2H",
            Kind::Process => "process",
            Kind::Output => "output",
        }
    }

    /// The colour this kind is drawn in, red, green, blue (the SVG and the strip).
    pub fn rgb(self) -> [u8; 3] {
        match self {
            Kind::Capture => [0x8d, 0x99, 0xae],
            Kind::H2d => [0x2b, 0x6c, 0xb0],
            Kind::Kernels => [0x2f, 0x85, 0x5a],
            Kind::D2h => [0xdd, 0x6b, 0x20],
            Kind::Process => [0x6b, 0x46, 0xc1],
            Kind::Output => [0xa0, 0xae, 0xc0],
        }
    }

    pub(crate) fn colour(self) -> String {
        let [r, g, b] = self.rgb();
        format!("#{r:02x}{g:02x}{b:02x}")
    }

    /// Every kind, in the legend's order.
    pub const ALL: [Kind; 6] = [
        Kind::Capture,
        Kind::H2d,
        Kind::Kernels,
        Kind::D2h,
        Kind::Process,
        Kind::Output,
    ];
}

/// Whose timeline a span is on: an input's capture thread, the output thread, or one of the
/// backend's own, numbered by the backend from 0 (its streams, or its worker).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Track {
    /// The capture thread of input `n` (0 in a run of one input).
    Capture(u16),
    /// The sink's thread.
    Output,
    /// The backend's track `n` (`Backend::trace_tracks()[n]`).
    Backend(u16),
}

impl Track {
    /// The thread id a Chrome trace gives it: the first input's capture 0, output 1, the
    /// backend's from 2, the other inputs' captures from 65,536.
    pub(crate) fn tid(self) -> u32 {
        match self {
            Track::Capture(0) => 0,
            Track::Output => 1,
            Track::Backend(n) => 2 + u32::from(n),
            Track::Capture(n) => 0x1_0000 + u32::from(n),
        }
    }
}

/// Which frames carry spans beyond the first `trace_frames` (`BackendConfig::rolling`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Rolling {
    /// None: no timing beyond the first frames (a headless run without `--trace`).
    #[default]
    Off,
    /// `BURST_FRAMES` consecutive frames in every `BURST_PERIOD`: enough for the window's
    /// strip to show the last few frames as they overlap, at a cost within noise.
    Bursts,
    /// Every frame (`--trace-frames last:N`).
    Every,
}

/// Consecutive frames a burst traces.
pub const BURST_FRAMES: u64 = 4;
/// A burst starts every this many frames.
pub const BURST_PERIOD: u64 = 32;

impl Rolling {
    /// Whether frame `seq` carries spans under this policy (besides the first frames).
    pub fn traces(self, seq: u64) -> bool {
        match self {
            Rolling::Off => false,
            Rolling::Bursts => seq % BURST_PERIOD < BURST_FRAMES,
            Rolling::Every => true,
        }
    }
}

/// `--trace-frames`: the first N frames (`first:N`, or a bare `N`) or the last N of the run
/// (`last:N`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFrames {
    /// Frames 0..N.
    First(u64),
    /// The N frames before the run ended.
    Last(u64),
}

impl TraceFrames {
    /// The number of frames.
    pub fn count(self) -> u64 {
        match self {
            TraceFrames::First(n) | TraceFrames::Last(n) => n,
        }
    }
}

/// A `--trace-frames` value that does not parse (as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceFramesError {
    /// The count is not a whole number.
    #[error("'{0}': expected first:N, last:N or N (a whole number of frames)")]
    NotACount(String),
    /// Neither `first:` nor `last:`.
    #[error("'{0}': expected first:N or last:N")]
    NotFirstOrLast(String),
}

impl std::str::FromStr for TraceFrames {
    type Err = TraceFramesError;
    fn from_str(s: &str) -> Result<Self, TraceFramesError> {
        let (which, n) = match s.split_once(':') {
            Some((w, n)) => (w.trim(), n.trim()),
            None => ("first", s.trim()),
        };
        let n: u64 = n
            .parse()
            .map_err(|_| TraceFramesError::NotACount(s.into()))?;
        match which {
            "first" => Ok(TraceFrames::First(n)),
            "last" => Ok(TraceFrames::Last(n)),
            _ => Err(TraceFramesError::NotFirstOrLast(s.into())),
        }
    }
}

impl std::fmt::Display for TraceFrames {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TraceFrames::First(n) => write!(f, "first:{n}"),
            TraceFrames::Last(n) => write!(f, "last:{n}"),
        }
    }
}

/// One timed piece of work on one track.
#[derive(Clone, Debug)]
pub struct Span {
    /// Whose timeline it is on.
    pub track: Track,
    /// What the span measures.
    pub kind: Kind,
    /// The input of the frame it belongs to (`desc::InputId`; 0 in a run of one input).
    pub input: u16,
    /// The frame it belongs to (its index in its input).
    pub frame: u64,
    /// The band, for per-band spans.
    pub band: Option<u16>,
    /// Start, host clock.
    pub start: Instant,
    /// End, host clock.
    pub end: Instant,
}

/// The spans of some of a run's frames (its first, or its last).
#[derive(Clone, Debug)]
pub struct Trace {
    /// Time zero of the trace.
    pub origin: Instant,
    /// The backend's track names, by its numbers (`Track::Backend`).
    pub backend_tracks: Vec<String>,
    /// The inputs' names, by `InputId`, in a run of several (empty for one).
    pub inputs: Vec<String>,
    /// Every span recorded.
    pub spans: Vec<Span>,
}

impl Trace {
    /// An empty trace starting at `origin`, with the backend's track names.
    pub fn new(origin: Instant, backend_tracks: Vec<String>) -> Self {
        Self {
            origin,
            backend_tracks,
            inputs: Vec::new(),
            spans: Vec::new(),
        }
    }

    /// The same, for a run of several inputs named `inputs` (a capture track each).
    pub fn with_inputs(mut self, inputs: Vec<String>) -> Self {
        if inputs.len() > 1 {
            self.inputs = inputs;
        }
        self
    }

    /// The name of `track`.
    pub fn track_name(&self, track: Track) -> String {
        match track {
            Track::Capture(n) => match self.inputs.get(usize::from(n)) {
                Some(name) => format!("capture {n}: {}", name.chars().take(24).collect::<String>()),
                None => "capture thread".into(),
            },
            Track::Output => "output thread".into(),
            Track::Backend(n) => self
                .backend_tracks
                .get(usize::from(n))
                .cloned()
                .unwrap_or_else(|| format!("backend track {n}")),
        }
    }

    /// Every track, in the order they are drawn.
    pub fn tracks(&self) -> Vec<Track> {
        let inputs = self.inputs.len().max(1) as u16;
        let mut t: Vec<Track> = (0..inputs).map(Track::Capture).collect();
        t.extend((0..self.backend_tracks.len() as u16).map(Track::Backend));
        t.push(Track::Output);
        t
    }

    pub(crate) fn us(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.origin).as_secs_f64() * 1e6
    }

    /// The spans of the trace's first `frames` frames (by frame number).
    pub(crate) fn first_frames(&self, frames: u64) -> Vec<&Span> {
        let mut numbers: Vec<u64> = self.spans.iter().map(|s| s.frame).collect();
        numbers.sort_unstable();
        numbers.dedup();
        let Some(&last) = numbers
            .get(frames.saturating_sub(1) as usize)
            .or(numbers.last())
        else {
            return Vec::new();
        };
        self.spans.iter().filter(|s| s.frame <= last).collect()
    }
}

/// The frames the ring keeps beyond `--trace-frames last:N`: the window's strip shows the
/// last few of them.
pub const STRIP_FRAMES: usize = 4;

/// The spans of a run's most recent traced frames, in a ring of a fixed number of frames:
/// memory stays flat however long the run.
#[derive(Debug)]
pub struct Recent {
    trace: Trace,
    /// Per frame: its number and its spans, oldest first.
    frames: std::collections::VecDeque<(u64, Vec<Span>)>,
    keep: usize,
}

impl Recent {
    /// A ring of `keep` frames (at least `STRIP_FRAMES`), on the clock and tracks of `trace`
    /// (its spans are not kept).
    pub fn new(trace: &Trace, keep: usize) -> Self {
        Self {
            trace: Trace {
                spans: Vec::new(),
                ..trace.clone()
            },
            frames: std::collections::VecDeque::new(),
            keep: keep.max(STRIP_FRAMES),
        }
    }

    /// Adds frame `frame`'s spans, dropping the oldest frame when full.
    pub fn push(&mut self, frame: u64, spans: Vec<Span>) {
        if self.frames.len() == self.keep {
            self.frames.pop_front();
        }
        self.frames.push_back((frame, spans));
    }

    /// Frames held now.
    pub fn len(&self) -> usize {
        self.frames.len()
    }

    /// Whether no frame was traced yet.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
    }

    /// The layout of the last `n` frames held, zoomed on their GPU work (`Layout::focused`),
    /// for the strip; None before any.
    pub fn layout(&self, n: usize) -> Option<Layout> {
        let spans: Vec<&Span> = self
            .frames
            .iter()
            .rev()
            .take(n)
            .flat_map(|(_, s)| s.iter())
            .collect();
        (!spans.is_empty()).then(|| Layout::focused(&self.trace, &spans))
    }

    /// The last `n` frames held, as a trace (`--trace-frames last:N`).
    pub fn last(&self, n: u64) -> Trace {
        let skip = self.frames.len().saturating_sub(n as usize);
        Trace {
            origin: self.trace.origin,
            backend_tracks: self.trace.backend_tracks.clone(),
            inputs: self.trace.inputs.clone(),
            spans: self
                .frames
                .iter()
                .skip(skip)
                .flat_map(|(_, s)| s.iter().cloned())
                .collect(),
        }
    }
}

/// How much the copies overlapped, over the window covered by the backend's spans.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Overlap {
    /// The GPU work's extent, ms.
    pub window_ms: f64,
    /// Fraction of the window with an upload in progress.
    pub h2d_busy: f64,
    /// Share of it with a download running.
    pub d2h_busy: f64,
    /// Fraction of the window with an upload and a download in progress at once.
    pub both: f64,
}

impl Overlap {
    /// The share of the rarer copy direction's busy time during which the other direction
    /// was busy too: near 0 when copies run one after another (pageable memory), well above
    /// when they overlap.
    pub fn shared(&self) -> f64 {
        self.both / self.h2d_busy.min(self.d2h_busy).max(1e-9)
    }
}

/// Sorted, merged intervals.
fn union(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::new();
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

fn length(v: &[(f64, f64)]) -> f64 {
    v.iter().map(|(a, b)| b - a).sum()
}

fn intersection(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let mut total = 0.0;
    for (x0, x1) in a {
        for (y0, y1) in b {
            total += (x1.min(*y1) - x0.max(*y0)).max(0.0);
        }
    }
    total
}

impl Trace {
    /// Upload/download overlap over the GPU spans; `None` without GPU spans.
    pub fn overlap(&self) -> Option<Overlap> {
        let of = |k: Kind| -> Vec<(f64, f64)> {
            union(
                self.spans
                    .iter()
                    .filter(|s| s.kind == k)
                    .map(|s| (self.us(s.start), self.us(s.end)))
                    .collect(),
            )
        };
        let (up, down) = (of(Kind::H2d), of(Kind::D2h));
        let gpu: Vec<&Span> = self
            .spans
            .iter()
            .filter(|s| matches!(s.kind, Kind::H2d | Kind::Kernels | Kind::D2h))
            .collect();
        let t0 = gpu.iter().map(|s| self.us(s.start)).reduce(f64::min)?;
        let t1 = gpu.iter().map(|s| self.us(s.end)).reduce(f64::max)?;
        let w = (t1 - t0).max(1e-9);
        Some(Overlap {
            window_ms: w / 1e3,
            h2d_busy: length(&up) / w,
            d2h_busy: length(&down) / w,
            both: intersection(&up, &down) / w,
        })
    }
}

/// Frames drawn in a timeline picture.
pub const TIMELINE_FRAMES: u64 = 6;

/// The most frames `--trace-frames` records (each holds a few spans per band: a bound on the
/// trace's memory, whatever the run's length).
pub const MAX_TRACE_FRAMES: u64 = 100_000;

/// Writes `--trace` (Chrome JSON) and `--timeline` (SVG) from a run's trace.
pub fn write_files(
    trace: &Trace,
    json: Option<&str>,
    svg: Option<&str>,
    title: &str,
) -> anyhow::Result<()> {
    use anyhow::Context;
    if let Some(o) = trace.overlap() {
        crate::info!(
            "trace: over {:.3} ms of GPU work, uploads {:.0}% busy, downloads {:.0}%, both at once {:.0}%",
            o.window_ms,
            100.0 * o.h2d_busy,
            100.0 * o.d2h_busy,
            100.0 * o.both
        );
    }
    if let Some(path) = json {
        crate::paths::write_atomically(
            std::path::Path::new(path),
            trace.to_chrome_json().as_bytes(),
        )
        .with_context(|| format!("writing {path}"))?;
        crate::info!("trace of {} spans written to {path}", trace.spans.len());
    }
    if let Some(path) = svg {
        let picture = timeline_svg(&[(title, trace)], TIMELINE_FRAMES);
        crate::paths::write_atomically(std::path::Path::new(path), picture.as_bytes())
            .with_context(|| format!("writing {path}"))?;
        crate::info!("timeline written to {path}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn sample() -> Trace {
        let o = Instant::now();
        let at = |us: u64| o + Duration::from_micros(us);
        let mut t = Trace::new(o, vec!["copy-in stream".into(), "copy-out stream".into()]);
        for f in 0..3u64 {
            let b = f * 100;
            t.spans.push(Span {
                track: Track::Capture(0),
                kind: Kind::Capture,
                input: 0,
                frame: f,
                band: None,
                start: at(b),
                end: at(b + 20),
            });
            t.spans.push(Span {
                track: Track::Backend(0),
                kind: Kind::H2d,
                input: 0,
                frame: f,
                band: Some(0),
                start: at(b + 30),
                end: at(b + 60),
            });
            t.spans.push(Span {
                track: Track::Backend(1),
                kind: Kind::D2h,
                input: 0,
                frame: f,
                band: Some(0),
                start: at(b + 70),
                end: at(b + 95),
            });
        }
        t
    }

    #[test]
    fn chrome_trace_has_the_required_fields() {
        let v: serde_json::Value = serde_json::from_str(&sample().to_chrome_json()).unwrap();
        let events = v["traceEvents"].as_array().unwrap();
        let spans: Vec<_> = events.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(spans.len(), 9);
        for e in &spans {
            for k in ["name", "ts", "dur", "pid", "tid"] {
                assert!(!e[k].is_null(), "{k} missing in {e}");
            }
        }
        let names = events.iter().filter(|e| e["ph"] == "M").count();
        assert_eq!(names, 4);
        let ts: Vec<f64> = spans.iter().map(|e| e["ts"].as_f64().unwrap()).collect();
        assert!(ts.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn overlap_of_copies() {
        let o = sample().overlap().unwrap();
        // Window 30..295 µs; H2D 3 x 30, D2H 3 x 25, never at once.
        assert!((o.window_ms - 0.265).abs() < 1e-9);
        assert!((o.h2d_busy - 90.0 / 265.0).abs() < 1e-9);
        assert_eq!(o.both, 0.0);
        assert_eq!(
            union(vec![(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]),
            vec![(0.0, 3.0), (5.0, 6.0)]
        );
        assert_eq!(intersection(&[(0.0, 3.0)], &[(2.0, 5.0)]), 1.0);
    }

    #[test]
    fn timeline_draws_a_rect_per_span() {
        let svg = timeline_svg(&[("test", &sample())], 2);
        assert!(svg.starts_with("<svg"));
        let titled = svg.matches("<rect x=").count() - svg.matches(r#"class="legend""#).count();
        assert_eq!(titled, 6); // frames 0 and 1, three spans each
        assert!(svg.contains("copy-in stream"));
        assert_eq!(nice_step(0.07), 0.1);
        assert_eq!(nice_step(3.0), 5.0);
    }

    #[test]
    fn the_recent_ring_keeps_a_fixed_number_of_frames_and_lays_out_the_last() {
        let t = sample();
        let mut ring = Recent::new(&t, 2);
        assert_eq!(ring.keep, STRIP_FRAMES);
        for f in 0..1000u64 {
            let spans: Vec<Span> = t
                .spans
                .iter()
                .filter(|s| s.frame == f % 3)
                .cloned()
                .collect();
            ring.push(f, spans);
            assert!(ring.len() <= STRIP_FRAMES);
        }
        // The strip zooms on the last frame's GPU work (the frames before are a frame period
        // away): its upload and download, every track keeping its row.
        let layout = ring.layout(2).unwrap();
        assert_eq!(layout.rows.len(), 3);
        assert_eq!(layout.rows[0].0, Track::Capture(0));
        let kinds: Vec<Kind> = layout.bars.iter().map(|b| b.kind).collect();
        assert_eq!(kinds.len(), 2, "{kinds:?}");
        assert!(kinds.contains(&Kind::H2d) && kinds.contains(&Kind::D2h));
        assert!(layout
            .bars
            .iter()
            .all(|b| (0.0..=1.0).contains(&b.x0) && b.x1 <= 1.0));
        // Unzoomed, the same spans give every bar.
        let all: Vec<&Span> = t.spans.iter().filter(|s| s.frame < 2).collect();
        assert_eq!(Layout::of(&t, &all).bars.len(), 6);
        assert_eq!(ring.last(3).spans.len(), 9);
        // The SVG draws the same layout: one rect per bar, in the kind's colour.
        let svg = timeline_svg(&[("t", &t)], 3);
        for k in [Kind::Capture, Kind::H2d, Kind::D2h] {
            assert!(svg.contains(&k.colour()), "{k:?}");
        }
    }

    #[test]
    fn trace_frames_and_bursts() {
        assert_eq!(
            "100".parse::<TraceFrames>().unwrap(),
            TraceFrames::First(100)
        );
        assert_eq!(
            "last:50".parse::<TraceFrames>().unwrap(),
            TraceFrames::Last(50)
        );
        assert_eq!(
            "first:7".parse::<TraceFrames>().unwrap(),
            TraceFrames::First(7)
        );
        assert!("middle:3".parse::<TraceFrames>().is_err());
        assert!("last:x".parse::<TraceFrames>().is_err());
        let traced = (0..320).filter(|&f| Rolling::Bursts.traces(f)).count() as u64;
        assert_eq!(traced, 10 * BURST_FRAMES);
        assert!(!Rolling::Off.traces(0) && Rolling::Every.traces(12345));
    }
}
