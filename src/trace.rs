//! Where the time goes: spans of every stage of the first frames of a run, written as a
//! Chrome trace (`--trace`, opened by Perfetto and chrome://tracing) and drawn as an SVG
//! timeline (`--timeline`), one row per track.
//!
//! GPU spans come from CUDA events, converted to the host clock through a calibration event
//! (`backend::cuda`); capture and output spans are host times. All times are on one clock,
//! in microseconds from the start of the run.

use std::fmt::Write as _;
use std::time::Instant;

use serde::Serialize;

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

    fn colour(self) -> &'static str {
        match self {
            Kind::Capture => "#8d99ae",
            Kind::H2d => "#2b6cb0",
            Kind::Kernels => "#2f855a",
            Kind::D2h => "#dd6b20",
            Kind::Process => "#6b46c1",
            Kind::Output => "#4a5568",
        }
    }
}

/// One timed piece of work on one track.
#[derive(Clone, Debug)]
pub struct Span {
    /// Index into the trace's track names.
    pub track: u16,
    /// What the span measures.
    pub kind: Kind,
    /// The frame it belongs to.
    pub frame: u64,
    /// The band, for per-band spans.
    pub band: Option<u16>,
    /// Start, host clock.
    pub start: Instant,
    /// End, host clock.
    pub end: Instant,
}

/// Tracks every run has; a backend's own tracks follow.
pub const TRACK_CAPTURE: u16 = 0;
/// The sink thread's track.
pub const TRACK_OUTPUT: u16 = 1;
/// The first track number a backend's tracks use.
pub const FIRST_BACKEND_TRACK: u16 = 2;

/// The spans of a run's first frames.
#[derive(Clone, Debug)]
pub struct Trace {
    /// Time zero of the trace.
    pub origin: Instant,
    /// Track names, by number.
    pub tracks: Vec<String>,
    /// Every span recorded.
    pub spans: Vec<Span>,
}

#[derive(Serialize)]
struct Event<'a> {
    name: &'a str,
    cat: &'a str,
    ph: &'a str,
    ts: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    dur: Option<f64>,
    pid: u32,
    tid: u16,
    args: serde_json::Value,
}

impl Trace {
    /// An empty trace starting at `origin`, with the backend's track names after the fixed ones.
    pub fn new(origin: Instant, backend_tracks: Vec<String>) -> Self {
        let mut tracks = vec!["capture thread".to_string(), "output thread".to_string()];
        tracks.extend(backend_tracks);
        Self {
            origin,
            tracks,
            spans: Vec::new(),
        }
    }

    fn us(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.origin).as_secs_f64() * 1e6
    }

    /// The Chrome trace event format: one thread per track, complete ("X") events.
    pub fn to_chrome_json(&self) -> String {
        let mut events = Vec::new();
        for (tid, name) in self.tracks.iter().enumerate() {
            events.push(Event {
                name: "thread_name",
                cat: "__metadata",
                ph: "M",
                ts: 0.0,
                dur: None,
                pid: 1,
                tid: tid as u16,
                args: serde_json::json!({ "name": name }),
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
                tid: s.track,
                args: serde_json::json!({ "frame": s.frame, "band": s.band }),
            });
        }
        let doc = serde_json::json!({ "traceEvents": events, "displayTimeUnit": "ms" });
        serde_json::to_string(&doc).expect("trace serializes")
    }

    /// The spans of frames `< frames`, and the time window they cover (µs).
    fn window(&self, frames: u64) -> (Vec<&Span>, f64, f64) {
        let spans: Vec<&Span> = self.spans.iter().filter(|s| s.frame < frames).collect();
        let t0 = spans
            .iter()
            .map(|s| self.us(s.start))
            .fold(f64::MAX, f64::min);
        let t1 = spans
            .iter()
            .map(|s| self.us(s.end))
            .fold(f64::MIN, f64::max);
        (spans, t0, t1)
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

/// A picture of the first `frames` frames of each trace, one panel per trace, one row per
/// track, coloured by stage, with a time axis: what a profiler's timeline shows.
pub fn timeline_svg(panels: &[(&str, &Trace)], frames: u64) -> String {
    const W: f64 = 1200.0;
    const LEFT: f64 = 190.0;
    const ROW: f64 = 22.0;
    let plot = W - LEFT - 20.0;
    let mut body = String::new();
    let mut y = 40.0;
    for (title, trace) in panels {
        let (spans, t0, t1) = trace.window(frames);
        let rows: Vec<u16> = {
            let mut r: Vec<u16> = spans.iter().map(|s| s.track).collect();
            r.sort_unstable();
            r.dedup();
            r
        };
        let span_us = (t1 - t0).max(1.0);
        let x = |t: f64| LEFT + (t - t0) / span_us * plot;
        let _ = writeln!(
            body,
            r#"<text x="10" y="{:.1}" font-size="14" font-weight="bold">{} — first {} frames, {:.3} ms</text>"#,
            y,
            xml_escape(title),
            frames,
            span_us / 1e3
        );
        y += 10.0;
        for (i, track) in rows.iter().enumerate() {
            let ry = y + i as f64 * ROW;
            let name = trace
                .tracks
                .get(usize::from(*track))
                .map_or("?", String::as_str);
            let _ = writeln!(
                body,
                r#"<text x="10" y="{:.1}" font-size="12">{}</text>"#,
                ry + ROW * 0.7,
                xml_escape(name)
            );
            let _ = writeln!(
                body,
                r##"<line x1="{LEFT}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="#e2e8f0"/>"##,
                ry + ROW,
                LEFT + plot,
                ry + ROW
            );
            for s in spans.iter().filter(|s| s.track == *track) {
                let (a, b) = (x(trace.us(s.start)), x(trace.us(s.end)));
                let band = s.band.map(|b| format!(" band {b}")).unwrap_or_default();
                let _ = writeln!(
                    body,
                    r#"<rect x="{:.2}" y="{:.1}" width="{:.2}" height="{:.1}" fill="{}"><title>{} frame {}{} {:.1} µs</title></rect>"#,
                    a,
                    ry + 2.0,
                    (b - a).max(0.5),
                    ROW - 4.0,
                    s.kind.colour(),
                    s.kind.label(),
                    s.frame,
                    band,
                    trace.us(s.end) - trace.us(s.start)
                );
            }
        }
        y += rows.len() as f64 * ROW + 6.0;
        // Time axis with 1-2-5 ticks.
        let step = nice_step(span_us / 1e3 / 8.0);
        let mut t = 0.0;
        while t <= span_us / 1e3 + 1e-9 {
            let tx = x(t0 + t * 1e3);
            let _ = writeln!(
                body,
                r##"<line x1="{tx:.1}" y1="{:.1}" x2="{tx:.1}" y2="{:.1}" stroke="#718096"/><text x="{tx:.1}" y="{:.1}" font-size="10" text-anchor="middle">{} ms</text>"##,
                y,
                y + 4.0,
                y + 15.0,
                trim_float(t)
            );
            t += step;
        }
        y += 40.0;
    }
    let mut legend = String::new();
    for (i, k) in [
        Kind::Capture,
        Kind::H2d,
        Kind::Kernels,
        Kind::D2h,
        Kind::Process,
        Kind::Output,
    ]
    .iter()
    .enumerate()
    {
        let lx = LEFT + i as f64 * 110.0;
        let _ = write!(
            legend,
            r#"<g class="legend"><rect x="{lx}" y="8" width="12" height="12" fill="{}"/><text x="{}" y="18" font-size="12">{}</text></g>"#,
            k.colour(),
            lx + 16.0,
            k.label()
        );
    }
    format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{:.0}" font-family="sans-serif"><rect width="100%" height="100%" fill="white"/>{legend}
{body}</svg>
"#,
        y
    )
}

fn nice_step(raw_ms: f64) -> f64 {
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
                track: TRACK_CAPTURE,
                kind: Kind::Capture,
                frame: f,
                band: None,
                start: at(b),
                end: at(b + 20),
            });
            t.spans.push(Span {
                track: 2,
                kind: Kind::H2d,
                frame: f,
                band: Some(0),
                start: at(b + 30),
                end: at(b + 60),
            });
            t.spans.push(Span {
                track: 3,
                kind: Kind::D2h,
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
}
