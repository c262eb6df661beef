//! Several inputs in one run, with real parts: the real binary on the CPU backend, the test
//! pattern in two formats, a YUV4MPEG2 stream on a named pipe fed by ffmpeg, a video file,
//! a URL nobody serves, a stalled pipe, real signals, and the mosaic in a real window
//! under Xvfb.
#![cfg(feature = "opencv")]

use crate::common;

use std::process::{Child, Command, Stdio};

use opencv::prelude::*;
use std::time::{Duration, Instant};

use common::run::{
    bin, framepipe_in, have, make_clip, require, stderr, wait_with_deadline, TempDir,
};
use common::x::Xvfb;

/// Each frame's line of ffmpeg's framemd5 of `path` (times and MD5 of the decoded frame).
fn framemd5(path: &std::path::Path) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:v:0", "-f", "framemd5", "-"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "framemd5 of {}: {}",
        path.display(),
        stderr(&out)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

/// A named pipe at `path`, fed by ffmpeg with `frames` frames of testsrc2 at `size` as
/// YUV4MPEG2 (the writer waits until a reader opens the pipe).
fn fed_fifo(path: &std::path::Path, size: &str, frames: u32) -> Child {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success());
    Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={size}:rate=25"))
        .args(["-frames:v", &frames.to_string(), "-pix_fmt", "yuv420p"])
        .args(["-f", "yuv4mpegpipe"])
        .arg(path)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn each_input_gives_what_a_run_of_it_alone_gives() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("several-equal");
    let clip = make_clip(&dir.join("clip.mp4").display().to_string(), "352x288", "24");
    let inputs = [
        "pattern:320x240:bgr24:0".to_string(),
        "pattern:256x144:nv12:0".to_string(),
        dir.join("feed").display().to_string(),
        clip.clone(),
    ];
    let common = [
        "--headless",
        "--backend",
        "cpu",
        "--filter",
        "gauss:2",
        "--frames",
        "40",
        "--codec",
        "ffv1",
        "-q",
    ];
    // Each alone (the pipe fed again for its own run).
    for (n, input) in inputs.iter().enumerate() {
        let feeder = (n == 2).then(|| fed_fifo(&dir.join("feed"), "200x120", 40));
        let out = format!("alone-{n}.mkv");
        let run = framepipe_in(
            dir.path(),
            &[&["--input", input, "--output", &out][..], &common[..]].concat(),
            Duration::from_secs(60),
        );
        assert!(run.status.success(), "alone {n}: {}", stderr(&run));
        if let Some(mut f) = feeder {
            f.wait().unwrap();
            std::fs::remove_file(dir.join("feed")).unwrap();
        }
    }
    // All four at once.
    let mut feeder = fed_fifo(&dir.join("feed"), "200x120", 40);
    let mut args: Vec<&str> = Vec::new();
    for input in &inputs {
        args.extend(["--input", input.as_str()]);
    }
    args.extend(["--output", "together-{n}.mkv"]);
    args.extend(common);
    let run = framepipe_in(dir.path(), &args, Duration::from_secs(60));
    assert!(run.status.success(), "together: {}", stderr(&run));
    feeder.wait().unwrap();
    let summary = run.summary.clone().expect("summary");
    let per = summary["inputs"].as_array().expect("a section per input");
    assert_eq!(per.len(), 4, "{summary}");
    for (n, expected) in [40u64, 40, 40, 24].into_iter().enumerate() {
        let alone = framemd5(&dir.join(&format!("alone-{n}.mkv")));
        let together = framemd5(&dir.join(&format!("together-{n}.mkv")));
        assert_eq!(alone.len() as u64, expected, "input {n} alone");
        assert_eq!(together, alone, "input {n}: frames or times differ");
        assert_eq!(per[n]["written"], expected, "input {n}: {summary}");
        assert_eq!(per[n]["dropped"], 0, "input {n}: {summary}");
    }
    assert_eq!(summary["frames"]["written"], 144, "{summary}");
}

#[test]
fn what_a_run_of_several_inputs_refuses() {
    let dir = TempDir::new("several-refused");
    for (args, says) in [
        (
            vec![
                "--input",
                "pattern",
                "--input",
                "pattern",
                "--output",
                "one.mkv",
                "--no-mosaic",
            ],
            "records the mosaic, and --no-mosaic turns the mosaic off",
        ),
        (
            vec![
                "--input", "pattern", "--input", "pattern", "--output", "b.mkv", "--output",
                "c.mp4",
            ],
            "a run writes one file",
        ),
        (
            vec!["--input", "-", "--input", "-"],
            "--input - is given more than once",
        ),
        (
            vec!["--input", "pattern", "--input", "pattern", "--grid", "1x1"],
            "--grid 1x1 has 1 tiles for 2 inputs",
        ),
        (
            vec![
                "--input",
                "pattern",
                "--input",
                "pattern",
                "--serve",
                "0",
                "--no-mosaic",
            ],
            "--serve with 2 inputs serves the mosaic, and --no-mosaic turns the mosaic off",
        ),
        (
            vec!["--input", "pattern", "--input", "pattern:9x9:fast"],
            "input 1: --input 'pattern:9x9:fast'",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--headless", "--backend", "cpu", "--frames", "3"]);
        let run = framepipe_in(dir.path(), &all, Duration::from_secs(20));
        let err = stderr(&run);
        assert!(!run.status.success(), "{args:?} was taken");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(left.is_empty(), "a refused run wrote {left:?}");
}

/// `--trace` and `--timeline` with several inputs: a capture track per input, named by it,
/// and every input's frames on the backend's and the output's tracks, each span saying
/// whose frame it is; `--trace-frames N` traces each input's first N frames.
#[test]
fn the_trace_has_a_capture_track_per_input() {
    let dir = TempDir::new("several-trace");
    let run = framepipe_in(
        dir.path(),
        &[
            "--input",
            "pattern:320x240:bgr:0",
            "--input",
            "pattern:160x120:nv12:0",
            "--input",
            "pattern:64x48:i420:0",
            "--headless",
            "--backend",
            "cpu",
            "--frames",
            "12",
            "--trace",
            "t.json",
            "--timeline",
            "t.svg",
            "--trace-frames",
            "5",
        ],
        Duration::from_secs(30),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("t.json")).unwrap()).unwrap();
    let events = v["traceEvents"].as_array().unwrap();
    let names: std::collections::HashMap<u64, String> = events
        .iter()
        .filter(|e| e["ph"] == "M")
        .map(|e| {
            let name = e["args"]["name"].as_str().unwrap().to_string();
            (e["tid"].as_u64().unwrap(), name)
        })
        .collect();
    for i in 0..3 {
        let track = format!("capture {i}: test pattern");
        assert!(
            names.values().any(|n| n.starts_with(&track)),
            "no track '{track}' in {names:?}"
        );
    }
    let spans: Vec<&serde_json::Value> = events.iter().filter(|e| e["ph"] == "X").collect();
    for i in 0..3u64 {
        let mine: Vec<_> = spans.iter().filter(|e| e["args"]["input"] == i).collect();
        // Capture, process and output for each of its first 5 frames.
        assert_eq!(mine.len(), 15, "input {i}'s spans");
        let captures: std::collections::HashSet<String> = mine
            .iter()
            .filter(|e| e["name"] == "capture")
            .map(|e| names[&e["tid"].as_u64().unwrap()].clone())
            .collect();
        assert_eq!(captures.len(), 1, "input {i} is captured on its own track");
        assert!(captures
            .iter()
            .all(|n| n.starts_with(&format!("capture {i}:"))));
        let frames: Vec<u64> = mine
            .iter()
            .map(|e| e["args"]["frame"].as_u64().unwrap())
            .collect();
        assert!(frames.iter().all(|f| *f < 5), "{frames:?}");
    }
    let svg = std::fs::read_to_string(dir.join("t.svg")).unwrap();
    assert!(svg.contains("capture 2: test pattern") && svg.contains(" input 2 frame "));
}

/// An input that is slow to open (a local HTTP server that answers its first request after
/// 4 s) doesn't hold the others up: they start a quarter of a second after the first input opened, and the
/// slow one joins when it opens, with every frame of its file.
#[test]
fn a_slow_input_joins_a_run_already_going() {
    let dir = TempDir::new("several-late");
    let clip = make_clip(&dir.join("clip.mkv").display().to_string(), "320x240", "20");
    let port = common::run::free_port();
    let server = r#"
import http.server, sys, time, threading
first = threading.Event()
class H(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):
        if not first.is_set():
            first.set()
            time.sleep(4)
        super().do_GET()
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"#;
    let mut http = Command::new("/usr/bin/python3")
        .args(["-c", server, &port.to_string()])
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let run = framepipe_in(
        dir.path(),
        &[
            "--input",
            "pattern:320x240:bgr:30",
            "--input",
            &format!("http://127.0.0.1:{port}/clip.mkv"),
            "--headless",
            "--backend",
            "cpu",
            "--frames",
            "180",
            "--summary-json",
            "s.json",
            "--trace",
            "t.json",
            "--trace-frames",
            "1",
        ],
        Duration::from_secs(60),
    );
    let _ = http.kill();
    let _ = http.wait();
    let err = stderr(&run);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("is still opening; the others start"), "{err}");
    assert!(err.contains("opened late and joins the run"), "{err}");
    let _ = clip;
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    let inputs = summary["inputs"].as_array().unwrap();
    assert_eq!(inputs[0]["captured"], 180, "{summary}");
    assert_eq!(
        inputs[1]["captured"], 20,
        "the late input's every frame: {summary}"
    );
    // The first input's first frame was captured well before the slow one's.
    let trace: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("t.json")).unwrap()).unwrap();
    let first_capture = |input: u64| {
        trace["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["name"] == "capture" && e["args"]["input"] == input)
            .map(|e| e["ts"].as_f64().unwrap())
            .fold(f64::MAX, f64::min)
    };
    let (early, late) = (first_capture(0), first_capture(1));
    assert!(
        late - early > 1.0e6,
        "the first input started {:.2} s before the slow one",
        (late - early) / 1e6
    );
}

/// A slow input joins the mosaic too: a named pipe whose writer (ffmpeg) starts 3 s after
/// the run, recorded in the mosaic beside a pattern, every one of its frames taken.
#[test]
fn a_slow_input_joins_the_mosaic() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("several-late-mosaic");
    let fifo = dir.join("late.y4m");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let mut writer = Command::new("sh")
        .args([
            "-c",
            "sleep 3 && exec ffmpeg -v error -y -f lavfi -i testsrc2=size=160x120:rate=25 \
             -frames:v 20 -pix_fmt yuv420p -f yuv4mpegpipe \"$0\"",
        ])
        .arg(&fifo)
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let run = framepipe_in(
        dir.path(),
        &[
            "--input",
            "pattern:320x240:bgr:30",
            "--input",
            &fifo.display().to_string(),
            "--headless",
            "--backend",
            "cpu",
            "--frames",
            "150",
            "--output",
            "mosaic.mkv",
            "--summary-json",
            "s.json",
        ],
        Duration::from_secs(60),
    );
    let _ = writer.kill();
    let _ = writer.wait();
    let err = stderr(&run);
    assert!(run.status.success(), "{err}");
    assert!(err.contains("opened late and joins the run"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    let inputs = summary["inputs"].as_array().unwrap();
    assert_eq!(inputs[0]["captured"], 150, "{summary}");
    assert_eq!(
        inputs[1]["captured"], 20,
        "the late input's every frame: {summary}"
    );
    assert!(std::fs::metadata(dir.join("mosaic.mkv")).unwrap().len() > 0);
}

/// An output without `{n}` records the mosaic: one picture a tick of 30 fps of the run's
/// clock, the tiles' size; standard output gets it as YUV4MPEG2.
#[test]
fn the_mosaic_is_recorded_by_an_output_without_n() {
    let dir = TempDir::new("several-recorded");
    let run = framepipe_in(
        dir.path(),
        &[
            "--headless",
            "--backend",
            "cpu",
            "-q",
            "--frames",
            "50",
            "--input",
            "pattern:320x240:25",
            "--input",
            "pattern:160x120:nv12:25",
            "--output",
            "wall.mkv",
            "--output",
            "own-{n}.mkv",
            "--codec",
            "ffv1",
            "--summary-json",
            "s.json",
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    // 50 frames at 25 fps: 2 s of the run, recorded at 30 fps (a tick or two either way).
    let wall = framemd5(&dir.join("wall.mkv"));
    assert!((55..=66).contains(&wall.len()), "{} pictures", wall.len());
    // The summary counts the mosaic's file as it counts any file: what it holds.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    assert_eq!(
        summary["mosaic"]["pictures"].as_u64(),
        Some(wall.len() as u64),
        "{summary}"
    );
    let own: Vec<usize> = (0..2)
        .map(|n| framemd5(&dir.join(&format!("own-{n}.mkv"))).len())
        .collect();
    assert_eq!(own, [50, 50]);
    let probe = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-show_entries",
            "stream=width,height",
            "-of",
            "csv=p=0",
        ])
        .arg(dir.join("wall.mkv"))
        .output()
        .unwrap();
    // Two tiles of the largest input's size, side by side.
    assert_eq!(String::from_utf8_lossy(&probe.stdout).trim(), "640,240");
    // Standard output: the mosaic as YUV4MPEG2.
    let out = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "--backend", "cpu", "-q", "--frames", "10"])
        .args([
            "--input",
            "pattern:320x240:25",
            "--input",
            "pattern:320x240:25",
        ])
        .args(["--output", "-"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let head = String::from_utf8_lossy(&out.stdout[..40]).to_string();
    assert!(head.starts_with("YUV4MPEG2 W640 H240 F30:1"), "{head}");
}

/// An input that ends early, one that can't be opened and one that stalls leave the
/// others running; Ctrl-C then ends the run within a second, every output finalized.
#[test]
fn ended_failed_and_stalled_inputs_leave_the_others_running() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("several-faults");
    let clip = make_clip(
        &dir.join("short.mp4").display().to_string(),
        "160x120",
        "10",
    );
    // A pipe whose writer sends the header and then nothing.
    let stalled = dir.join("stalled");
    assert!(Command::new("mkfifo")
        .arg(&stalled)
        .status()
        .unwrap()
        .success());
    let writer = {
        let stalled = stalled.clone();
        std::thread::spawn(move || {
            use std::io::Write;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .open(stalled)
                .unwrap();
            f.write_all(b"YUV4MPEG2 W160 H120 F25:1 C420jpeg\n")
                .unwrap();
            std::thread::sleep(Duration::from_secs(15));
            drop(f);
        })
    };
    let refused = format!("http://127.0.0.1:{}/none.mp4", common::run::free_port());
    let child = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "--backend", "cpu", "-q"])
        .args(["--input", "pattern:160x120:25"])
        .args(["--input", &clip])
        .args(["--input", &refused])
        .arg("--input")
        .arg(&stalled)
        .args(["--output", "out-{n}.mkv", "--codec", "ffv1"])
        .args(["--summary-json", "summary.json"])
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    let asked = Instant::now();
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(5), "several with faults");
    let took = asked.elapsed();
    let err = stderr(&out);
    assert!(
        took < Duration::from_millis(1500),
        "took {took:?} after Ctrl-C\n{err}"
    );
    assert_eq!(out.status.code(), Some(1), "an input failed to open: {err}");
    assert!(
        err.contains("input 2") && err.contains("could not be opened"),
        "{err}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let per = summary["inputs"].as_array().unwrap();
    assert_eq!(per.len(), 4, "{summary}");
    // The pattern ran at its rate the whole time; the clip ended with all its frames.
    let live = per[0]["written"].as_u64().unwrap();
    assert!(live >= 45, "the pattern went on: {summary}");
    assert_eq!(per[1]["written"], 10, "{summary}");
    assert_eq!(per[1]["ended"], "ended", "{summary}");
    assert!(
        per[2]["ended"].as_str().unwrap().starts_with("failed"),
        "{summary}"
    );
    assert_eq!(per[3]["written"], 0, "{summary}");
    // Every output is finalized and holds what the summary says.
    for (n, want) in [(0, live), (1, 10)] {
        let lines = framemd5(&dir.join(&format!("out-{n}.mkv")));
        assert_eq!(lines.len() as u64, want, "out-{n}.mkv");
    }
    writer.join().unwrap();
}

/// The mosaic under Xvfb: every tile shows its input (a failed input's tile says so),
/// Tab and Enter show one input alone, q quits.
#[test]
fn the_mosaic_shows_every_input_in_its_tile() {
    assert!(
        have("Xvfb") && have("xdotool") && have("import"),
        "scripts/test.sh installs xvfb, xdotool and imagemagick"
    );
    let x = Xvfb::with_screen("1280x1024");
    let dir = TempDir::new("several-mosaic");
    let refused = "http://127.0.0.1:9/none.mp4";
    let child = Command::new(bin())
        .current_dir(dir.path())
        .args(["--backend", "cpu", "--summary-json", "summary.json"])
        // Three patterns of other sizes and formats, and a URL nobody serves.
        .args(["--input", "pattern:320x180:25"])
        .args(["--input", "pattern:320x240:nv12:25"])
        .args(["--input", "pattern:256x144:i420:25"])
        .args(["--input", refused])
        .env("DISPLAY", &x.display)
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = x.window("^framepipe$");
    std::thread::sleep(Duration::from_millis(1200));
    let shot = x.shot(&id, &dir.join("mosaic.png"));
    // 2x2 tiles of 320x240 (the largest input): a 640x480 picture.
    assert_eq!((shot.cols(), shot.rows()), (640, 480), "the mosaic's size");
    let lit = |x0: i32, y0: i32| lit_share(&shot, x0, y0, 320, 240);
    for (t, (x0, y0)) in [(0, 0), (320, 0), (0, 240)].into_iter().enumerate() {
        assert!(
            lit(x0, y0) > 0.3,
            "tile {t} is dark ({:.2} lit)",
            lit(x0, y0)
        );
    }
    assert!(
        lit(320, 240) < 0.1,
        "the failed input's tile shows a picture"
    );
    // The 320x180 input is letterboxed in its 320x240 tile: dark bands above and below.
    assert!(
        lit_share(&shot, 10, 212, 300, 22) < 0.05,
        "no letterbox under tile 0"
    );
    // n (Tab, where the toolkit hands it over) selects tile 1, Enter shows it alone at its
    // own size, Enter goes back.
    x.key(&id, "n");
    x.key(&id, "Return");
    std::thread::sleep(Duration::from_millis(800));
    let alone = x.shot(&id, &dir.join("alone.png"));
    assert_eq!((alone.cols(), alone.rows()), (320, 240), "input 1 alone");
    assert!(
        lit_share(&alone, 0, 0, 320, 240) > 0.5,
        "input 1 alone is dark"
    );
    x.key(&id, "Return");
    std::thread::sleep(Duration::from_millis(800));
    let back = x.shot(&id, &dir.join("back.png"));
    assert_eq!((back.cols(), back.rows()), (640, 480), "the mosaic again");
    // A click on tile 2 selects it: its frame is drawn in yellow.
    x.cmd(
        "xdotool",
        &["mousemove", "--window", &id, "100", "300", "click", "1"],
    );
    std::thread::sleep(Duration::from_millis(600));
    let picked = x.shot(&id, &dir.join("picked.png"));
    let yellow = |img: &opencv::core::Mat, x0: i32, y0: i32| {
        let p = img.at_2d::<opencv::core::Vec3b>(y0, x0).unwrap().0;
        p[0] < 60 && p[1] > 180 && p[2] > 220
    };
    assert!(yellow(&picked, 160, 241), "tile 2's top edge is not yellow");
    assert!(!yellow(&picked, 480, 1), "tile 1 is still framed");
    x.key(&id, "q");
    let out = wait_with_deadline(child, Duration::from_secs(5), "mosaic");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "input 3 failed to open: {err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let per = summary["inputs"].as_array().unwrap();
    for (n, input) in per.iter().take(3).enumerate() {
        assert!(
            input["processed"].as_u64().unwrap() > 10,
            "input {n}: {summary}"
        );
    }
}

/// The share of pixels of `img`'s rectangle that are not near black.
fn lit_share(img: &opencv::core::Mat, x0: i32, y0: i32, w: i32, h: i32) -> f64 {
    use opencv::prelude::*;
    let mut lit = 0;
    for y in y0..y0 + h {
        for x in x0..x0 + w {
            let p = img.at_2d::<opencv::core::Vec3b>(y, x).unwrap();
            if p.0.iter().any(|&v| v > 48) {
                lit += 1;
            }
        }
    }
    f64::from(lit) / f64::from(w * h)
}

/// A network input whose server goes away and comes back is reopened while the other
/// input runs on; the summary counts the reconnect, and a stop still ends the run at once.
#[test]
fn a_network_input_reconnects_when_its_server_comes_back() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("several-reconnect");
    let port = common::run::free_port();
    let mut server = crate::common::run::live_server(port);
    let child = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "--backend", "cpu", "-q"])
        .args(["--input", "pattern:160x120:25"])
        .args(["--input", &format!("http://127.0.0.1:{port}/live.ts")])
        .args(["--output", "out-{n}.mkv", "--codec", "ffv1"])
        .args(["--summary-json", "summary.json"])
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    server.kill().unwrap();
    server.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let mut server = crate::common::run::live_server(port);
    std::thread::sleep(Duration::from_millis(3500));
    let asked = Instant::now();
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(5), "reconnect");
    let took = asked.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(took < Duration::from_millis(1500), "took {took:?}\n{err}");
    assert!(err.contains("the stream ended; reconnecting"), "{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let per = summary["inputs"].as_array().unwrap();
    assert!(per[1]["reconnects"].as_u64().unwrap() >= 1, "{summary}");
    // Frames came before the loss and after the return (about 2.5 s + 3 s at 25 fps).
    let stream = per[1]["written"].as_u64().unwrap();
    assert!(stream > 90, "{summary}");
    // The pattern never stopped: about 7.5 s at 25 fps.
    let pattern = per[0]["written"].as_u64().unwrap();
    assert!(pattern > 150, "{summary}");
    for (n, want) in [(0, pattern), (1, stream)] {
        assert_eq!(
            framemd5(&dir.join(&format!("out-{n}.mkv"))).len() as u64,
            want
        );
    }
}
