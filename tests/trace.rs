//! `--trace` and `--timeline` from the real binary (CPU backend here; the GPU test checks
//! CUDA spans), and the progress bar, shown only on a terminal.

use crate::common;

use std::collections::HashMap;
use std::process::Command;
use std::time::Duration;

use common::run::{bin, framepipe, stderr, TempDir};

#[test]
fn trace_and_timeline_files() {
    let dir = TempDir::new("trace");
    let json = dir.join("t.json").display().to_string();
    let svg = dir.join("t.svg").display().to_string();
    let out = framepipe(
        &[
            "-i",
            "pattern",
            "--size",
            "320x240",
            "--fps",
            "0",
            "--frames",
            "30",
            "--headless",
            "-f",
            "gray,blur:3",
            "--backend",
            "cpu",
            "--trace",
            &json,
            "--timeline",
            &svg,
            "--trace-frames",
            "20",
        ],
        Duration::from_secs(60),
    );
    assert!(out.status.success(), "{}", stderr(&out));

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().expect("traceEvents");
    let names: HashMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| {
            (
                e["tid"].as_u64().unwrap(),
                e["args"]["name"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let spans: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(
        spans.len(),
        20 * 3,
        "capture, process and output for each traced frame"
    );
    let mut per_track: HashMap<u64, Vec<(f64, f64)>> = HashMap::new();
    for e in &spans {
        for key in ["name", "cat", "ts", "dur", "pid", "tid"] {
            assert!(!e[key].is_null(), "{key} missing in {e}");
        }
        let tid = e["tid"].as_u64().unwrap();
        assert!(names.contains_key(&tid), "track {tid} has no name");
        per_track
            .entry(tid)
            .or_default()
            .push((e["ts"].as_f64().unwrap(), e["dur"].as_f64().unwrap()));
    }
    assert_eq!(per_track.len(), 3, "{names:?}");
    for (tid, spans) in &per_track {
        for w in spans.windows(2) {
            assert!(w[0].0 <= w[1].0, "times not monotonic on {}", names[tid]);
            assert!(
                w[0].0 + w[0].1 <= w[1].0 + 1.0,
                "spans overlap on {}",
                names[tid]
            );
        }
    }

    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("the SVG is well-formed XML");
    let rects = doc
        .descendants()
        .filter(|n| n.has_tag_name("rect") && n.children().any(|c| c.has_tag_name("title")))
        .count();
    assert_eq!(rects, 6 * 3, "a rectangle per span of the first 6 frames");
}

#[test]
fn trace_arguments_are_checked() {
    let out = framepipe(
        &["-i", "pattern", "--headless", "--trace", "/tmp/x.txt"],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--trace '/tmp/x.txt' must end in .json"));
    let out = framepipe(
        &["-i", "pattern", "--headless", "--timeline", "/no/dir/t.svg"],
        Duration::from_secs(20),
    );
    assert!(!out.status.success());
    assert!(stderr(&out).contains("folder '/no/dir' does not exist"));
}

#[test]
fn progress_bar_only_on_a_terminal() {
    let args = [
        "-i",
        "pattern",
        "--size",
        "160x120",
        "--fps",
        "200",
        "--frames",
        "60",
        "--headless",
    ];
    let out = framepipe(&args, Duration::from_secs(30));
    assert!(out.status.success());
    let err = stderr(&out);
    assert!(
        !err.contains("/60 frames") && !err.contains('\r'),
        "progress drawn without a terminal:\n{err}"
    );
    // Under a pseudo-terminal (script), the bar is drawn.
    let has_script = Command::new("sh")
        .args(["-c", "command -v script"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !has_script {
        println!("SKIPPED the terminal half: no `script` command");
        return;
    }
    let line = format!("{} {}", bin(), args.join(" "));
    let out = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .output()
        .unwrap();
    let all = String::from_utf8_lossy(&out.stdout);
    assert!(
        all.contains("/60 frames"),
        "no progress bar on a terminal:\n{all}"
    );
}

/// `--trace-frames last:N` writes the N frames before the run ended, and the ring that keeps
/// them holds memory flat over a run as long as ten minutes of 30 fps (18 000 frames): the
/// resident size late in the run is within a few MiB of its size early on.
#[test]
fn the_rolling_trace_keeps_the_last_frames_in_flat_memory() {
    let dir = TempDir::new("rolling");
    let json = dir.join("last.json").display().to_string();
    let frames = 18_000u64;
    let mut child = Command::new(bin())
        .args([
            "-i",
            "pattern",
            "--size",
            "640x360",
            "--fps",
            "0",
            "--headless",
        ])
        .args([
            "--backend",
            "cpu",
            "-f",
            "invert",
            "--frames",
            &frames.to_string(),
        ])
        .args(["--trace", &json, "--trace-frames", "last:50", "-q"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let rss = |pid: u32| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()?
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut samples = Vec::new();
    while child.try_wait().unwrap().is_none() {
        if let Some(kib) = rss(child.id()) {
            samples.push(kib);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        samples.len() >= 8,
        "the run was too short to sample: {samples:?}"
    );
    // After start-up (the ring, the pattern's first period): the second quarter against the
    // last.
    let n = samples.len();
    let early = *samples[n / 4..n / 2].iter().max().unwrap();
    let late = *samples[n * 3 / 4..].iter().max().unwrap();
    assert!(
        late < early + 8 * 1024,
        "resident memory grew from {early} KiB to {late} KiB: {samples:?}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let mut seen: Vec<u64> = v["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["args"]["frame"].as_u64().unwrap())
        .collect();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, (frames - 50..frames).collect::<Vec<_>>());
    println!(
        "rolling trace: {} samples, {early} KiB at a quarter, at most {late} KiB in the last quarter",
        samples.len()
    );
}
