//! What an orchestrator asks the browser view's server: `/healthz` (is every input live, or
//! down for less than its budget) and `/metrics` (each input's figures in Prometheus's text
//! format). Pure functions over a `Snapshot` the sink takes of the run's figures.
//!
//! Invariants: `/healthz` says only "ok" or how many inputs are down, never their names or
//! addresses (it is answered without the token, for probes that carry none); an input
//! that failed, or has been down (reconnecting, or not open yet) for at least the budget,
//! makes it unhealthy, as does one whose recording can't write now (`--record` on a full or
//! read-only disk); an input that ended by itself (a file at its end) does not; every
//! label value in `/metrics` is escaped as the format says, and an address's user and
//! password are left out of it.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use super::api::schema::{Deleted, Input, Latency, Recording};
use crate::stats::{InputLive, Live};

/// The figures `/healthz` and `/metrics` are made from, taken by the sink.
#[derive(Clone, Debug, Default)]
pub struct Snapshot {
    /// Each input's figures, by the pipeline's input number.
    pub inputs: Vec<InputLive>,
    /// Each input's name, as `inputs` (its `--input` text or its own name).
    pub labels: Vec<String>,
    /// Inputs that could not be opened at the start: their names.
    pub failed: Vec<String>,
    /// Frames a second, recent.
    pub fps: f64,
    /// Whether the run is paused.
    pub paused: bool,
    /// When it was taken: an input down then has been down that much longer now (the run
    /// may not refresh it while its inputs open).
    pub taken: Option<Instant>,
}

impl Snapshot {
    /// `live`'s figures, with the inputs called `labels` and those that `failed` at the start.
    pub fn of(live: &Live, labels: &[String], failed: &[String]) -> Self {
        Self {
            inputs: live.inputs.clone(),
            labels: labels.to_vec(),
            failed: failed.to_vec(),
            fps: if live.paused { 0.0 } else { live.fps },
            paused: live.paused,
            taken: Some(Instant::now()),
        }
    }

    /// Before the run: every input `labels` names is still opening, down since the process
    /// started.
    pub fn opening(labels: &[String]) -> Self {
        let since = crate::stop::process_start().elapsed();
        let inputs = labels
            .iter()
            .map(|l| InputLive {
                name: l.clone(),
                down: Some(since),
                ..InputLive::default()
            })
            .collect();
        Self {
            inputs,
            labels: labels.to_vec(),
            taken: Some(Instant::now()),
            ..Self::default()
        }
    }

    /// The snapshot's figures as of now: each down input's time down grown by the
    /// snapshot's age.
    pub fn now(mut self) -> Self {
        let age = self.taken.map_or(Duration::ZERO, |t| t.elapsed());
        for i in &mut self.inputs {
            i.down = i.down.map(|d| d + age);
        }
        self.taken = Some(Instant::now());
        self
    }

    /// Input `i`'s label: its name without an address's user and password.
    fn label(&self, i: usize) -> String {
        let name = self.labels.get(i).unwrap_or(&self.inputs[i].name);
        redact(name)
    }
}

/// Whether an input is down in the sense of `/healthz`.
fn down(input: &InputLive, budget: Duration) -> bool {
    let failed = input
        .ended
        .as_deref()
        .is_some_and(|e| e.starts_with("failed"));
    let recording_fails = input
        .recording
        .as_ref()
        .is_some_and(|r| r.failing.is_some());
    failed || recording_fails || input.down.is_some_and(|d| d >= budget)
}

/// `/healthz`: healthy or not, and the one line said.
pub fn verdict(snap: &Snapshot, budget: Duration) -> (bool, String) {
    // Inputs removed from the run (through the API, a camera file) are no longer its.
    let inputs = || {
        snap.inputs
            .iter()
            .filter(|i| i.ended.as_deref() != Some("removed"))
    };
    let count = inputs().count() + snap.failed.len();
    let down = inputs().filter(|i| down(i, budget)).count() + snap.failed.len();
    match down {
        0 => (true, format!("ok: {count} input(s) live\n")),
        d => (
            false,
            format!(
                "down: {d} of {count} input(s) failed or down for {} s or more\n",
                budget.as_secs_f64()
            ),
        ),
    }
}

/// `name` without the secrets of an address (`crate::secret`: its user and password, its
/// secret query parameters).
pub fn redact(name: &str) -> String {
    crate::secret::redact(name).into_owned()
}

/// A label value as the text format writes it: `\`, `"` and line feeds escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// One metric family: its help, type and one sample per input.
fn family(
    out: &mut String,
    (name, kind, help): (&str, &str, &str),
    samples: impl Iterator<Item = (String, f64)>,
) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
    for (labels, value) in samples {
        let _ = writeln!(out, "{name}{labels} {value}");
    }
}

/// One figure of an input; None where the input has none (a recording's, without
/// `--record`).
type Figure = fn(&InputLive) -> Option<f64>;

/// The per-input families of `/metrics`: name, type, help, and the figure. A family no
/// input has a figure of (the recording's, where nothing records) is left out.
const FAMILIES: [(&str, &str, &str, Figure); 17] = [
    (
        "framepipe_frames_captured_total",
        "counter",
        "Frames read from the input.",
        |i| Some(i.captured as f64),
    ),
    (
        "framepipe_frames_processed_total",
        "counter",
        "Frames of the input that went out to its outputs and displays.",
        |i| Some(i.processed as f64),
    ),
    (
        "framepipe_frames_dropped_total",
        "counter",
        "Frames of a live input dropped because the pipeline was behind.",
        |i| Some(i.dropped as f64),
    ),
    (
        "framepipe_reconnects_total",
        "counter",
        "Times the input's stream was lost and came back.",
        |i| Some(i.reconnects as f64),
    ),
    (
        "framepipe_input_up",
        "gauge",
        "1 while frames come from the input, 0 while it is down or ended.",
        |i| Some(f64::from(u8::from(i.down.is_none() && i.ended.is_none()))),
    ),
    (
        "framepipe_input_down_seconds",
        "gauge",
        "How long the input has been down (reconnecting or not open yet); 0 while it runs.",
        |i| Some(i.down.map_or(0.0, |d| d.as_secs_f64())),
    ),
    (
        "framepipe_recording_segments_total",
        "counter",
        "Recorded segments closed whole.",
        |i| Some(i.recording.as_ref()?.segments as f64),
    ),
    (
        "framepipe_recording_bytes_total",
        "counter",
        "Bytes in the recorded segments closed.",
        |i| Some(i.recording.as_ref()?.bytes as f64),
    ),
    (
        "framepipe_recording_failures_total",
        "counter",
        "Recorded segments that could not be written (a full or read-only disk).",
        |i| Some(i.recording.as_ref()?.failures as f64),
    ),
    (
        "framepipe_recording_failing",
        "gauge",
        "1 while the input's recording can't write, 0 while it writes.",
        |i| Some(f64::from(u8::from(i.recording.as_ref()?.failing.is_some()))),
    ),
    (
        "framepipe_retention_deleted_segments_total",
        "counter",
        "Recorded segments retention deleted (--retain, --retain-size, --retain-free).",
        |i| Some(i.recording.as_ref()?.deleted[0] as f64),
    ),
    (
        "framepipe_retention_deleted_files_total",
        "counter",
        "Files retention deleted: the segments and their detections sidecars.",
        |i| Some(i.recording.as_ref()?.deleted[1] as f64),
    ),
    (
        "framepipe_retention_deleted_bytes_total",
        "counter",
        "Bytes retention freed.",
        |i| Some(i.recording.as_ref()?.deleted[2] as f64),
    ),
    (
        "framepipe_detect_frames_total",
        "counter",
        "Frames of the input the detector ran on (--detect).",
        |i| Some(i.detection.as_ref()?.detected as f64),
    ),
    (
        "framepipe_detect_skipped_total",
        "counter",
        "Due detection frames of the input skipped because the detector was busy.",
        |i| Some(i.detection.as_ref()?.skipped as f64),
    ),
    (
        "framepipe_detect_inference_seconds",
        "gauge",
        "How long the detector's last inference took (the batch it was part of).",
        |i| Some(i.detection.as_ref()?.inference_seconds),
    ),
    (
        "framepipe_detect_batch_size",
        "gauge",
        "How many frames the detector's last inference took at once.",
        |i| Some(i.detection.as_ref()?.batch as f64),
    ),
];

/// `/metrics`: each input's figures, and the run's, in Prometheus's text format (0.0.4).
pub fn metrics(snap: &Snapshot) -> String {
    let mut out = String::new();
    let labels: Vec<String> = (0..snap.inputs.len())
        .map(|i| format!("input=\"{}\"", escape(&snap.label(i))))
        .collect();
    for (name, kind, help, figure) in FAMILIES {
        let samples: Vec<(String, f64)> = snap
            .inputs
            .iter()
            .zip(&labels)
            .filter_map(|(input, l)| Some((format!("{{{l}}}"), figure(input)?)))
            .collect();
        // (With no input yet, every family is named, empty, as before.)
        if !samples.is_empty() || snap.inputs.is_empty() {
            family(&mut out, (name, kind, help), samples.into_iter());
        }
    }
    latency(&mut out, snap, &labels);
    detections(&mut out, snap, &labels);
    let failed = snap
        .failed
        .iter()
        .map(|f| (format!("{{input=\"{}\"}}", escape(&redact(f))), 1.0));
    let help = "1 for each input that could not be opened at the start.";
    family(&mut out, ("framepipe_input_failed", "gauge", help), failed);
    let help = "Frames a second through the pipeline, all inputs, recent.";
    family(
        &mut out,
        ("framepipe_fps", "gauge", help),
        std::iter::once((String::new(), snap.fps)),
    );
    out
}

/// Each input's figures for the page's table (`/stats`' `inputs`), named as `/metrics`
/// names them (no user or password of an address): what it captured and dropped, its
/// latency, and how it stands (running, down and for how long, reconnecting, ended).
pub fn inputs_json(snap: &Snapshot) -> serde_json::Value {
    serde_json::to_value(input_rows(snap)).unwrap_or_default()
}

/// Each input's row of `GET /api/inputs` (without its source).
pub fn input_rows(snap: &Snapshot) -> Vec<Input> {
    let rows = snap.inputs.iter().enumerate().map(|(i, input)| {
        let state = match (&input.ended, &input.state, input.down) {
            (Some(ended), _, _) => ended.clone(),
            (None, Some(state), _) => state.clone(),
            (None, None, Some(d)) => format!("down {:.0} s", d.as_secs_f64()),
            (None, None, None) => "running".to_string(),
        };
        let recording = input.recording.as_ref().map(|r| Recording {
            state: match &r.failing {
                Some(why) => format!("failing: {why}"),
                None => "recording".to_string(),
            },
            segments: r.segments,
            bytes: r.bytes,
            failures: r.failures,
            deleted: Deleted {
                segments: r.deleted[0],
                files: r.deleted[1],
                bytes: r.deleted[2],
            },
        });
        Input {
            input: Some(i),
            name: snap.label(i),
            source: None,
            captured: input.captured,
            processed: input.processed,
            dropped: input.dropped,
            reconnects: input.reconnects,
            latency_ms: Latency {
                mean: input.latency.mean_ms,
                p99: input.latency.p99_ms,
                max: input.latency.max_ms,
            },
            state: redact(&state),
            recording,
        }
    });
    rows.collect()
}

/// The row of input `name`, just added from `source`, before its figures come.
pub fn starting(name: &str, source: &str) -> Input {
    Input {
        input: None,
        name: name.to_string(),
        source: Some(source.to_string()),
        captured: 0,
        processed: 0,
        dropped: 0,
        reconnects: 0,
        latency_ms: Latency {
            mean: 0.0,
            p99: 0.0,
            max: 0.0,
        },
        state: "starting".into(),
        recording: None,
    }
}

/// Each input's boxes found, by label (`--detect`): one counter, labelled by input and
/// label (named only where an input is detected on).
fn detections(out: &mut String, snap: &Snapshot, labels: &[String]) {
    let samples: Vec<(String, f64)> = snap
        .inputs
        .iter()
        .zip(labels)
        .filter_map(|(input, l)| Some((l, input.detection.as_ref()?)))
        .flat_map(|(l, d)| {
            d.by_label
                .iter()
                .map(move |(label, n)| (format!("{{{l},label=\"{}\"}}", escape(label)), *n as f64))
        })
        .collect();
    if snap.inputs.iter().any(|i| i.detection.is_some()) {
        let help = "Boxes the detector found on the input, by label.";
        family(
            out,
            ("framepipe_detections_total", "counter", help),
            samples.into_iter(),
        );
    }
    let zones: Vec<(String, f64)> = snap
        .inputs
        .iter()
        .zip(labels)
        .filter_map(|(input, l)| Some((l, input.detection.as_ref()?)))
        .flat_map(|(l, d)| {
            d.zones
                .iter()
                .map(move |(zone, n)| (format!("{{{l},zone=\"{}\"}}", escape(zone)), *n as f64))
        })
        .collect();
    if !zones.is_empty() {
        let help = "Tracked objects in the zone now (--zone).";
        family(
            out,
            ("framepipe_zone_objects", "gauge", help),
            zones.into_iter(),
        );
    }
}

/// Each input's latency (capture to out of the sink) as a summary: the 0.99 quantile, the
/// sum and the count.
fn latency(out: &mut String, snap: &Snapshot, labels: &[String]) {
    let name = "framepipe_latency_seconds";
    let _ = writeln!(out, "# HELP {name} Capture to out of the sink, per frame.");
    let _ = writeln!(out, "# TYPE {name} summary");
    for (input, l) in snap.inputs.iter().zip(labels) {
        let lat = &input.latency;
        let _ = writeln!(out, "{name}{{{l},quantile=\"0.99\"}} {}", lat.p99_ms / 1e3);
        let _ = writeln!(out, "{name}_sum{{{l}}} {}", lat.total_ms / 1e3);
        let _ = writeln!(out, "{name}_count{{{l}}} {}", lat.frames);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(down: Option<u64>, ended: Option<&str>) -> InputLive {
        InputLive {
            down: down.map(Duration::from_secs),
            ended: ended.map(str::to_string),
            ..InputLive::default()
        }
    }

    #[test]
    fn health_turns_on_failed_inputs_and_those_down_past_the_budget() {
        let budget = Duration::from_secs(30);
        let mut snap = Snapshot {
            inputs: vec![
                input(None, None),
                input(Some(29), None),
                input(None, Some("ended")),
            ],
            ..Snapshot::default()
        };
        assert!(verdict(&snap, budget).0);
        snap.inputs[1].down = Some(Duration::from_secs(30));
        let (ok, said) = verdict(&snap, budget);
        assert!(!ok && said.contains("1 of 3"), "{said}");
        snap.inputs[1].down = None;
        snap.failed = vec!["rtsp://u:p@cam/1".into()];
        let (ok, said) = verdict(&snap, budget);
        assert!(!ok && !said.contains("cam"), "{said}");
    }

    #[test]
    fn inputs_removed_from_the_run_are_not_counted() {
        let mut inputs = vec![input(None, Some("removed")); 1000];
        inputs.extend([input(None, None), input(None, None)]);
        let snap = Snapshot {
            inputs,
            ..Snapshot::default()
        };
        let (ok, said) = verdict(&snap, Duration::from_secs(30));
        assert!(ok && said == "ok: 2 input(s) live\n", "{said}");
    }

    #[test]
    fn addresses_lose_their_passwords_and_labels_are_escaped() {
        assert_eq!(
            redact("rtsp://admin:secret@10.0.0.5:554/s?x=@"),
            "rtsp://***@10.0.0.5:554/s?x=@"
        );
        assert_eq!(redact("udp://239.0.0.1:5000"), "udp://239.0.0.1:5000");
        assert_eq!(redact("lobby"), "lobby");
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let snap = Snapshot {
            inputs: vec![input(None, None)],
            labels: vec!["x\"y".into()],
            ..Snapshot::default()
        };
        let text = metrics(&snap);
        assert!(
            text.contains("framepipe_frames_captured_total{input=\"x\\\"y\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("framepipe_input_up{input=\"x\\\"y\"} 1"),
            "{text}"
        );
    }
}
