//! How a trace is drawn and written: the Chrome trace JSON (`--trace`), the timeline's
//! `Layout` (rows, bars, ticks) that both the SVG (`--timeline`) and the window's strip draw,
//! and the SVG itself. The spans themselves are `trace`'s.

use std::fmt::Write as _;

use serde::Serialize;

use std::time::Instant;

use super::{Kind, Overlap, Span, Trace, Track};

#[derive(Serialize)]
struct Event<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'a str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u32,
    args: serde_json::Value,
}

impl Trace {
    /// The Chrome trace event format: one thread per track, complete ("X") events.
    pub fn to_chrome_json(&self) -> String {
        let mut events = Vec::new();
        for track in self.tracks() {
            events.push(Event {
                name: "thread_name",
                cat: "__metadata",
                ph: "M",
                ts: 0.0,
                dur: None,
                pid: 1,
                tid: track.tid(),
                args: serde_json::json!({ "name": self.track_name(track) }),
            });
        }
        let mut spans: Vec<&Span> = self.spans.iter().collect();
        spans.sort_by_key(|s| s.start);
        for s in spans {
            events.push(Event {
                name: s.kind.label(),
                cat: s.kind.label(),
                ph: "X",
                ts: self.us(s.start),
                dur: Some((self.us(s.end) - self.us(s.start)).max(0.0)),
                pid: 1,
                tid: s.track.tid(),
                args: match self.inputs.is_empty() {
                    true => serde_json::json!({ "frame": s.frame, "band": s.band }),
                    false => {
                        serde_json::json!({ "input": s.input, "frame": s.frame, "band": s.band })
                    }
                },
            });
        }
        let doc = serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        serde_json::to_string(&doc).expect("trace serializes")
    }
}

/// One bar of a `Layout`: a span placed on its row, `x0..x1` as fractions of the width.
#[derive(Clone, Debug, PartialEq)]
pub struct Bar {
    /// Index into `Layout::rows`.
    pub row: usize,
    /// Start and end, 0 (the layout's start) to 1 (its end).
    pub x0: f64,
    /// End.
    pub x1: f64,
    /// What it measures (its colour).
    pub kind: Kind,
    /// Its frame's input, in a run of several.
    pub input: Option<u16>,
    /// Its frame and band.
    pub frame: u64,
    /// The band, for per-band spans.
    pub band: Option<u16>,
    /// Its length, µs.
    pub us: f64,
}

/// Spans laid out as a timeline: one row per track that has spans (in the trace's track
/// order), bars scaled to the time they cover, ticks at 1-2-5 steps. The SVG timeline and
/// the window's strip both draw this.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    /// The rows' tracks and names, top to bottom.
    pub rows: Vec<(Track, String)>,
    /// Every span, on its row.
    pub bars: Vec<Bar>,
    /// The time covered, ms.
    pub span_ms: f64,
    /// Tick positions, ms from the start.
    pub ticks_ms: Vec<f64>,
    /// The frames shown.
    pub frames: Vec<u64>,
    /// How much uploads and downloads overlapped over these spans (GPU spans only).
    pub overlap: Option<Overlap>,
}

impl Layout {
    /// Lays out `spans` of `trace` (its names, its clock) over the time they cover.
    pub fn of(trace: &Trace, spans: &[&Span]) -> Self {
        let t0 = spans
            .iter()
            .map(|s| trace.us(s.start))
            .fold(f64::MAX, f64::min);
        let t1 = spans
            .iter()
            .map(|s| trace.us(s.end))
            .fold(f64::MIN, f64::max);
        Self::within(trace, spans, (t0, t1))
    }

    /// Lays out `spans` zoomed on the backend's most recent stretch of GPU work: the last
    /// frame's copies and kernels, and the frames before it whose GPU work runs into it (a
    /// steady stream's frames overlap; a live source's are a frame period apart, and then
    /// the last frame's bands are what shows whether copies overlap). Without GPU spans (the
    /// CPU backend), the whole of `spans`. Rows stay one per track; bars are clipped.
    pub fn focused(trace: &Trace, spans: &[&Span]) -> Self {
        let gpu = |s: &&&Span| matches!(s.kind, Kind::H2d | Kind::Kernels | Kind::D2h);
        // A frame is its input and its index; the last is the one whose GPU work ended last.
        let mut frames: Vec<(u16, u64)> = spans
            .iter()
            .filter(gpu)
            .map(|s| (s.input, s.frame))
            .collect();
        frames.sort_unstable();
        frames.dedup();
        let extent = |f: (u16, u64)| {
            spans
                .iter()
                .filter(gpu)
                .filter(|s| (s.input, s.frame) == f)
                .fold((f64::MAX, f64::MIN), |(a, b), s| {
                    (a.min(trace.us(s.start)), b.max(trace.us(s.end)))
                })
        };
        frames.sort_by(|a, b| extent(*a).1.total_cmp(&extent(*b).1));
        let Some(&last) = frames.last() else {
            return Self::of(trace, spans);
        };
        let (mut t0, mut t1) = extent(last);
        for &f in frames.iter().rev().skip(1) {
            let (a, b) = extent(f);
            if b < t0 - (t1 - t0) {
                break;
            }
            (t0, t1) = (t0.min(a), t1.max(b));
        }
        let pad = (t1 - t0) * 0.04;
        Self::within(trace, spans, (t0 - pad, t1 + pad))
    }

    /// Lays out the parts of `spans` inside `t0..t1` (µs on the trace's clock).
    fn within(trace: &Trace, spans: &[&Span], (t0, t1): (f64, f64)) -> Self {
        let us = |t: Instant| trace.us(t);
        let span_us = if spans.is_empty() {
            1.0
        } else {
            (t1 - t0).max(1.0)
        };
        let rows: Vec<(Track, String)> = trace
            .tracks()
            .into_iter()
            .filter(|t| spans.iter().any(|s| s.track == *t))
            .map(|t| (t, trace.track_name(t)))
            .collect();
        let inside: Vec<&Span> = spans
            .iter()
            .copied()
            .filter(|s| us(s.end) >= t0 && us(s.start) <= t0 + span_us)
            .collect();
        let bars = inside
            .iter()
            .filter_map(|s| {
                let row = rows.iter().position(|(t, _)| *t == s.track)?;
                Some(Bar {
                    row,
                    x0: ((us(s.start) - t0) / span_us).max(0.0),
                    x1: ((us(s.end) - t0) / span_us).min(1.0),
                    kind: s.kind,
                    input: (!trace.inputs.is_empty()).then_some(s.input),
                    frame: s.frame,
                    band: s.band,
                    us: us(s.end) - us(s.start),
                })
            })
            .collect();
        let step = nice_step(span_us / 1e3 / 8.0);
        let ticks_ms = (0..)
            .map(|i| f64::from(i) * step)
            .take_while(|t| *t <= span_us / 1e3 + 1e-9)
            .collect();
        let mut frames: Vec<u64> = inside.iter().map(|s| s.frame).collect();
        frames.sort_unstable();
        frames.dedup();
        let overlap = Trace {
            origin: trace.origin,
            backend_tracks: Vec::new(),
            inputs: Vec::new(),
            spans: inside.iter().map(|s| (*s).clone()).collect(),
        }
        .overlap();
        Self {
            rows,
            bars,
            span_ms: span_us / 1e3,
            ticks_ms,
            frames,
            overlap,
        }
    }

    /// One line saying what the layout shows, and how the copies overlapped.
    pub fn caption(&self) -> String {
        let frames = match (self.frames.first(), self.frames.last()) {
            (Some(a), Some(b)) if a != b => format!("frames {a}-{b}"),
            (Some(a), _) => format!("frame {a}"),
            _ => "no frame".into(),
        };
        match self.overlap {
            Some(o) => format!(
                "{frames}, {:.3} ms, copies overlapped {:.0}%",
                self.span_ms,
                100.0 * o.shared()
            ),
            None => format!("{frames}, {:.3} ms", self.span_ms),
        }
    }
}

/// A picture of the first `frames` frames of each trace, one panel per trace, one row per
/// track, coloured by stage, with a time axis: what a profiler's timeline shows. Drawn from
/// `Layout`, as the window's strip is.
pub fn timeline_svg(panels: &[(&str, &Trace)], frames: u64) -> String {
    let layouts: Vec<(&str, Layout)> = panels
        .iter()
        .map(|(title, trace)| (*title, Layout::of(trace, &trace.first_frames(frames))))
        .collect();
    layouts_svg(&layouts)
}

/// Layouts drawn as an SVG, one panel each: the timeline's picture, and the window's strip
/// drawn the same way (for the GPU machine, which has no display).
pub fn layouts_svg(panels: &[(&str, Layout)]) -> String {
    let mut body = String::new();
    let mut y = 40.0;
    for (title, layout) in panels {
        y = svg_panel(&mut body, title, layout, y);
    }
    let mut legend = String::new();
    for (i, k) in Kind::ALL.iter().enumerate() {
        let lx = SVG_LEFT + i as f64 * 110.0;
        let _ = write!(
            legend,
            r#"<g class="legend"><rect x="{lx}" y="8" width="12" height="12" fill="{}"/><text x="{}" y="18" font-size="12">{}</text></g>"#,
            k.colour(),
            lx + 16.0,
            k.label()
        );
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{:.0}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>{legend}
{body}</svg>
"#,
        y
    )
}

/// The SVG's width, its column of row names, and a row's height.
const SVG_WIDTH: f64 = 1200.0;
const SVG_LEFT: f64 = 190.0;
const SVG_ROW: f64 = 22.0;

/// One panel of `layouts_svg` drawn into `body` from `y` down: its title, its rows, its
/// bars and its axis; returns where the next panel starts.
fn svg_panel(body: &mut String, title: &str, layout: &Layout, mut y: f64) -> f64 {
    let (left, row) = (SVG_LEFT, SVG_ROW);
    let plot = SVG_WIDTH - left - 20.0;
    let x = |f: f64| left + f * plot;
    let _ = writeln!(
        body,
        r#"<text x="10" y="{:.1}" font-size="14" font-weight="bold">{} — {}</text>"#,
        y,
        xml_escape(title),
        xml_escape(&layout.caption())
    );
    y += 10.0;
    for (i, (_, name)) in layout.rows.iter().enumerate() {
        let ry = y + i as f64 * row;
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.1}" font-size="12">{}</text>"#,
            ry + row * 0.7,
            xml_escape(name)
        );
        let _ = writeln!(
            body,
            r##"<line x1="{left}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e2e8f0"/>"##,
            ry + row,
            left + plot,
            ry + row
        );
    }
    for b in &layout.bars {
        let ry = y + b.row as f64 * row;
        let band = b.band.map(|n| format!(" band {n}")).unwrap_or_default();
        let input = b.input.map(|n| format!(" input {n}")).unwrap_or_default();
        let _ = writeln!(
            body,
            r#"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{}{input} frame {}{} {:.1} µs</title></rect>"#,
            x(b.x0),
            ry + 2.0,
            ((b.x1 - b.x0) * plot).max(0.5),
            row - 4.0,
            b.kind.colour(),
            b.kind.label(),
            b.frame,
            band,
            b.us
        );
    }
    y += layout.rows.len() as f64 * row + 6.0;
    for t in &layout.ticks_ms {
        let tx = x(t / layout.span_ms);
        let _ = writeln!(
            body,
            r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#718096"/><text x="{tx:.1}" y="{:.1}" font-size="10" text-anchor="middle">{} ms</text>"##,
            y,
            y + 4.0,
            y + 15.0,
            trim_float(*t)
        );
    }
    y + 40.0
}

/// The 1-2-5 step nearest above `raw_ms`.
pub fn nice_step(raw_ms: f64) -> f64 {
    let p = 10f64.powf(raw_ms.max(1e-6).log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * p)
        .find(|s| *s >= raw_ms)
        .unwrap_or(10.0 * p)
}

fn trim_float(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
