//! Live behaviour with real parts: a real window under Xvfb with real key presses, real
//! signals, and GStreamer's videotestsrc through OpenCV as a live source.
#![cfg(feature = "opencv")]

use crate::common;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{
    bin, ends_within, framepipe, frames_in, make_clip, stderr, wait_with_deadline, SummaryFile,
    TempDir,
};
use common::x::Xvfb;
use opencv::imgcodecs;
use opencv::prelude::*;

/// Starts framepipe on the test pattern in a window on `x`, working in `dir` (its summary
/// goes to `dir/summary.json`); returns the process and the window's id once it is visible.
fn open_window(x: &Xvfb, dir: &TempDir, extra: &[&str]) -> (Child, String) {
    let mut args = vec!["--input", "pattern", "--size", "320x240"];
    args.extend(extra);
    open_window_with(x, dir, &args)
}

/// `open_window` with every argument given (another input).
fn open_window_with(x: &Xvfb, dir: &TempDir, args: &[&str]) -> (Child, String) {
    let child = Command::new(bin())
        .args(["--summary-json", "summary.json"])
        .args(args)
        .current_dir(dir.path())
        .env("DISPLAY", &x.display)
        .env("XDG_RUNTIME_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let found = x.cmd(
        "xdotool",
        &["search", "--sync", "--onlyvisible", "--name", "^framepipe$"],
    );
    let id = String::from_utf8_lossy(&found.stdout)
        .lines()
        .next()
        .unwrap_or("")
        .to_string();
    assert!(!id.is_empty(), "no framepipe window appeared");
    (child, id)
}

enum Quit {
    Key(&'static str),
    Signal,
    CloseWindow,
}

fn window_quits(quit: Quit, name: &str) {
    let x = Xvfb::start();
    let dir = TempDir::new(name);
    let (mut child, id) = open_window(&x, &dir, &["--filter", "invert"]);
    std::thread::sleep(Duration::from_millis(700));

    // The window shows frames: the screenshot of the screen is not blank.
    let shot = dir.join("screen.png").display().to_string();
    let grabbed = x.cmd("import", &["-window", "root", &shot]);
    assert!(
        grabbed.status.success(),
        "import failed: {}",
        String::from_utf8_lossy(&grabbed.stderr)
    );
    let img = imgcodecs::imread(&shot, imgcodecs::IMREAD_COLOR).unwrap();
    let lit = img
        .data_bytes()
        .unwrap()
        .chunks_exact(3)
        .filter(|p| p.iter().any(|&v| v > 40))
        .count();
    assert!(
        lit > 320 * 240 / 2,
        "{name}: the window looks blank ({lit} lit pixels)"
    );

    let asked = Instant::now();
    match quit {
        Quit::Key(key) => {
            x.cmd("xdotool", &["windowfocus", "--sync", &id]);
            let sent = x.cmd("xdotool", &["key", key]);
            assert!(sent.status.success());
        }
        Quit::Signal => common::run::interrupt(&child),
        Quit::CloseWindow => {
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/close_window.py");
            let sent = x.cmd("/usr/bin/python3", &[script, &id]);
            assert!(
                sent.status.success(),
                "{}",
                String::from_utf8_lossy(&sent.stderr)
            );
        }
    }
    // Where the run outlives the request, what the X server then holds under the window's
    // name goes into the failure: whether the window was closed and shown again, is still
    // up untouched, or is another one.
    if !ends_within(&mut child, Duration::from_secs(4)) {
        let list = |visible: bool| {
            let mut args = vec!["search"];
            if visible {
                args.push("--onlyvisible");
            }
            args.extend(["--name", "^framepipe$"]);
            String::from_utf8_lossy(&x.cmd("xdotool", &args).stdout).replace('\n', " ")
        };
        println!(
            "{name}: still running 4 s after asking; the window asked was {id}; windows named framepipe: [{}], visible: [{}]",
            list(false),
            list(true)
        );
    }
    let out = wait_with_deadline(child, Duration::from_secs(1), name);
    let err = stderr(&out);
    assert!(out.status.success(), "{name}: exit {:?}\n{err}", out.status);
    let summary = std::fs::read_to_string(dir.join("summary.json")).expect("summary written");
    let [captured, processed, shown, _] =
        common::run::counts_of(&serde_json::from_str(&summary).unwrap()).expect("counts");
    assert!(
        shown > 0 && shown == processed && processed == captured,
        "{name}: {err}"
    );
    println!(
        "{name}: quit {:?} after asking, {shown} frames shown",
        asked.elapsed()
    );
}

/// An X server that freezes mid-run (SIGSTOP: it keeps its socket, answers nothing): a
/// SIGTERM still ends the run within about a second, with the video file finalized first.
#[test]
fn a_frozen_display_does_not_hold_the_stop_or_lose_the_file() {
    let x = Xvfb::start();
    let dir = TempDir::new("frozen-x");
    let (child, _id) = open_window(&x, &dir, &["-o", "w.mp4"]);
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: kill with our children's pids has no memory preconditions.
    unsafe { libc::kill(x.child.id() as i32, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_millis(300));
    common::run::signal(&child, libc::SIGTERM);
    let asked = Instant::now();
    let out = wait_with_deadline(child, Duration::from_secs(10), "frozen display");
    let took = asked.elapsed();
    // SAFETY: as above.
    unsafe { libc::kill(x.child.id() as i32, libc::SIGCONT) };
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(took < Duration::from_secs(3), "took {took:?}:\n{err}");
    let held = frames_in(dir.join("w.mp4").to_str().unwrap());
    assert!(held > 10, "{held} frames:\n{err}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        summary["frames"]["written"].as_u64(),
        Some(held),
        "{summary}"
    );
    println!("frozen display: ended {took:?} after SIGTERM, {held} frames finalized");
}

#[test]
fn window_quits_on_q() {
    window_quits(Quit::Key("q"), "key-q");
}

#[test]
fn window_quits_on_escape() {
    window_quits(Quit::Key("Escape"), "key-esc");
}

#[test]
fn window_quits_when_closed() {
    window_quits(Quit::CloseWindow, "close-window");
}

#[test]
fn window_quits_on_sigint() {
    window_quits(Quit::Signal, "sigint-window");
}

/// SIGINT during a headless file → file run: exit 0, and the output file holds exactly the
/// frames the summary reports written.
#[test]
fn sigint_finalizes_the_output_file() {
    let dir = TempDir::new("sigint-file");
    let input = dir.join("in.avi").display().to_string();
    // A long input: the pattern, written through framepipe itself (OpenCV's MJPEG writer).
    make_clip(&input, "640x480", "400");
    let output = dir.join("out.mkv").display().to_string();
    let summary = SummaryFile::new();
    let child = summary
        .add_to(&mut Command::new(bin()))
        .args(["-i", &input, "--headless", "-o", &output, "-f", "gray"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "sigint file run");
    let err = stderr(&out);
    assert!(out.status.success(), "exit {:?}\n{err}", out.status);
    let [captured, processed, written, dropped] = summary.counts().expect("summary written");
    assert_eq!(
        (captured, processed, dropped),
        (written, written, 0),
        "{err}"
    );
    assert!(
        written > 0 && written < 400,
        "the run was interrupted midway: {err}"
    );
    let n = frames_in(&output);
    assert_eq!(n, written, "frames in the file vs frames reported written");
    println!("interrupted after {written} of 400 frames; file holds {n}");
}

/// The X server dies during a window run with --output: the file is still finalized and
/// playable, holding the frames the exit message reports, and the exit is not a success.
#[test]
fn the_output_is_finalized_when_the_display_dies() {
    let x = Xvfb::start();
    let dir = TempDir::new("display-dies");
    let (child, _id) = open_window(&x, &dir, &["--output", "out.mp4"]);
    std::thread::sleep(Duration::from_secs(2));
    drop(x); // kills the X server under the window
    let out = wait_with_deadline(child, Duration::from_secs(10), "display death");
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let said: u64 = err
        .split("'out.mp4' was finalized with the ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no finalize message:\n{err}"));
    let path = dir.join("out.mp4").display().to_string();
    let n = frames_in(&path);
    assert!(
        said > 10 && n == said,
        "message says {said}, file holds {n}:\n{err}"
    );
    println!(
        "display died: exit {:?}, {n} frames finalized",
        out.status.code()
    );
}

fn summary_in(dir: &TempDir) -> [u64; 4] {
    let text = std::fs::read_to_string(dir.join("summary.json")).expect("summary written");
    common::run::counts_of(&serde_json::from_str(&text).unwrap()).expect("counts")
}

/// A 2 s file in the window plays at its own rate (at least 1.9 s), like a player.
#[test]
fn a_file_in_the_window_plays_at_its_speed() {
    let x = Xvfb::start();
    let dir = TempDir::new("paced");
    let clip = make_clip(&dir.join("clip.avi").display().to_string(), "320x240", "60");
    let start = Instant::now();
    let (child, _id) = open_window_with(&x, &dir, &["--input", &clip, "--exit-at-end"]);
    let out = wait_with_deadline(child, Duration::from_secs(20), "paced file");
    let took = start.elapsed();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        took >= Duration::from_millis(1900),
        "60 frames at 30 fps took {took:?}"
    );
    assert_eq!(summary_in(&dir)[2], 60);
    println!("a 2 s file took {took:?} in the window");
}

/// At the end of a file the last frame stays up until q.
#[test]
fn the_last_frame_stays_up_until_q() {
    let x = Xvfb::start();
    let dir = TempDir::new("hold");
    let clip = make_clip(&dir.join("clip.avi").display().to_string(), "320x240", "9");
    let (mut child, id) = open_window_with(&x, &dir, &["--input", &clip]);
    std::thread::sleep(Duration::from_millis(1500)); // the clip lasts 0.3 s
    assert!(
        child.try_wait().unwrap().is_none(),
        "the window closed at the end of the file"
    );
    let sent = x.cmd("xdotool", &["key", "--window", &id, "q"]);
    assert!(sent.status.success());
    let out = wait_with_deadline(child, Duration::from_secs(5), "q after the end");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("the last frame stays up"));
    assert_eq!(summary_in(&dir)[2], 9);
}

fn screenshot(x: &Xvfb, dir: &TempDir, name: &str) -> Vec<u8> {
    let shot = dir.join(name).display().to_string();
    let grabbed = x.cmd("import", &["-window", "root", &shot]);
    assert!(grabbed.status.success());
    let img = imgcodecs::imread(&shot, imgcodecs::IMREAD_COLOR).unwrap();
    img.data_bytes().unwrap().to_vec()
}

/// Space pauses a file; `.` shows exactly the next frame and stays paused.
#[test]
fn space_pauses_a_file_and_dot_steps_it() {
    let x = Xvfb::start();
    let dir = TempDir::new("step");
    let clip = make_clip(
        &dir.join("clip.avi").display().to_string(),
        "320x240",
        "300",
    );
    let (child, id) = open_window_with(&x, &dir, &["--input", &clip]);
    let key = |k: &str| {
        assert!(x
            .cmd("xdotool", &["key", "--window", &id, k])
            .status
            .success())
    };
    std::thread::sleep(Duration::from_millis(700));
    key("space");
    std::thread::sleep(Duration::from_millis(600));
    let a = screenshot(&x, &dir, "a.png");
    std::thread::sleep(Duration::from_millis(500));
    let b = screenshot(&x, &dir, "b.png");
    assert!(a == b, "the picture moved while paused");
    key("period");
    // The step's frame goes through the whole pipeline: on a loaded machine (window tests
    // run two at a time) that can take longer than a frame period, so look for up to 3 s.
    let asked = std::time::Instant::now();
    let c = loop {
        std::thread::sleep(Duration::from_millis(300));
        let c = screenshot(&x, &dir, "c.png");
        if c != b || asked.elapsed() > Duration::from_secs(3) {
            break c;
        }
    };
    assert!(c != b, "'.' did not show the next frame within 3 s");
    std::thread::sleep(Duration::from_millis(500));
    let d = screenshot(&x, &dir, "d.png");
    assert!(
        c == d,
        "the picture moved after a step: it should stay paused"
    );
    key("q");
    let out = wait_with_deadline(child, Duration::from_secs(5), "q after stepping");
    assert!(out.status.success(), "{}", stderr(&out));
}

/// A frame larger than the screen (4K on the 800x600 Xvfb) opens a window scaled to fit,
/// keeping the aspect, instead of showing its top-left corner.
#[test]
fn a_4k_frame_fits_the_screen() {
    let x = Xvfb::start();
    let dir = TempDir::new("fit");
    let (child, id) = open_window_with(
        &x,
        &dir,
        &["--input", "pattern", "--size", "3840x2160", "--fps", "5"],
    );
    std::thread::sleep(Duration::from_millis(1500));
    let geo = x.cmd("xdotool", &["getwindowgeometry", &id]);
    let text = String::from_utf8_lossy(&geo.stdout).to_string();
    let size = text
        .split("Geometry: ")
        .nth(1)
        .and_then(|g| g.split_whitespace().next())
        .and_then(|g| g.split_once('x'))
        .and_then(|(w, h)| Some((w.parse::<u32>().ok()?, h.parse::<u32>().ok()?)))
        .unwrap_or_else(|| panic!("no geometry in {text}"));
    assert!(
        size.0 <= 800 && size.1 <= 600,
        "window {size:?} on an 800x600 screen"
    );
    let aspect = f64::from(size.0) / f64::from(size.1);
    assert!((aspect - 16.0 / 9.0).abs() < 0.05, "aspect {aspect}");
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(5), "4k window");
    assert!(out.status.success(), "{}", stderr(&out));
    println!("4K frames in a {}x{} window", size.0, size.1);
}

/// SIGTERM is handled the same way as Ctrl-C.
#[test]
fn sigterm_stops_cleanly() {
    let summary = SummaryFile::new();
    let child = summary
        .add_to(&mut Command::new(bin()))
        .args(["-i", "pattern", "--size", "320x240", "--headless"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    common::run::signal(&child, libc::SIGTERM);
    let out = wait_with_deadline(child, Duration::from_secs(5), "sigterm");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(summary.counts().is_some(), "{}", stderr(&out));
}

const GST: &str = "videotestsrc is-live=true num-buffers=45 ! video/x-raw,width=320,height=240,framerate=30/1 ! videoconvert ! video/x-raw,format=BGR ! appsink";

#[test]
fn gstreamer_live_source() {
    let dir = TempDir::new("gst");
    let pat = dir.join("f%03d.png").display().to_string();
    let out = framepipe(
        &["-i", GST, "--headless", "-o", &pat, "-f", "gray"],
        Duration::from_secs(30),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("GStreamer pipeline"), "{err}");
    let [captured, processed, written, dropped] = out.counts().expect("summary");
    assert!(captured >= 30 && captured + dropped <= 45, "{err}");
    assert_eq!((processed, written), (captured, captured));
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count() as u64,
        written
    );
}

/// A live source faster than its sink: frames are dropped (and counted), never queued up.
#[test]
fn live_source_drops_when_the_sink_is_slow() {
    let dir = TempDir::new("gst-drop");
    let src = "videotestsrc is-live=true num-buffers=240 ! video/x-raw,width=1280,height=720,framerate=240/1 ! videoconvert ! video/x-raw,format=BGR ! appsink";
    let output = dir.join("slow.mkv").display().to_string();
    let out = framepipe(
        &["-i", src, "--headless", "-o", &output, "--ring", "3"],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let [captured, processed, written, dropped] = out.counts().expect("summary");
    assert!(
        dropped > 0,
        "a slow sink should make a live source drop: {err}"
    );
    // The warning says what held the run back: the output (an encoder slower than 240 fps).
    assert!(err.contains("the outputs bound it"), "{err}");
    assert_eq!((processed, written), (captured, captured));
    println!("live: {captured} kept, {dropped} dropped");
}

/// The window's keys: a filter preset, page-locking, bands, the overlay, saving and pausing
/// each change what the run reports.
#[test]
fn window_keys_change_the_run() {
    let x = Xvfb::start();
    let dir = TempDir::new("keys");
    let (child, id) = open_window(&x, &dir, &[]);
    std::thread::sleep(Duration::from_millis(500));
    x.cmd("xdotool", &["windowfocus", "--sync", &id]);
    for key in ["2", "p", "equal", "h", "s", "space", "space", "q"] {
        assert!(x.cmd("xdotool", &["key", key]).status.success());
        std::thread::sleep(Duration::from_millis(400));
    }
    let out = wait_with_deadline(child, Duration::from_secs(5), "keys");
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let changes = err
        .lines()
        .find_map(|l| l.strip_prefix("changes while running: "))
        .unwrap_or_default();
    let kinds: Vec<&str> = changes
        .split(", ")
        .map(|c| c.split(" from frame ").next().unwrap_or_default())
        .collect();
    assert_eq!(kinds, ["filter invert", "pageable", "2 bands"], "{err}");
    assert!(err.contains("paused 1 time(s)"), "{err}");
    let saved: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("framepipe-") && n.ends_with(".png"))
        .collect();
    assert_eq!(saved.len(), 1, "one frame saved with s: {saved:?}\n{err}");
    let img = imgcodecs::imread(
        &dir.join(&saved[0]).display().to_string(),
        imgcodecs::IMREAD_COLOR,
    )
    .unwrap();
    assert_eq!((img.cols(), img.rows()), (320, 240));
}

/// Frames that cross the pipeline as YUV (the pattern in NV12 and I420) reach the window as
/// BGR, converted by the backend: the screen shows the same picture as the BGR pattern's,
/// within what the round trip through 4:2:0 changes.
#[test]
fn yuv_frames_are_shown_converted() {
    let x = Xvfb::start();
    let shot_of = |format: &str| {
        let dir = TempDir::new(&format!("yuv-window-{format}"));
        // One frame every 5 s: the screenshot sees frame 0.
        let (child, _) = open_window(&x, &dir, &["--input-format", format, "--fps", "0.2"]);
        std::thread::sleep(Duration::from_millis(1200));
        let shot = screenshot(&x, &dir, "shot.png");
        common::run::interrupt(&child);
        let out = wait_with_deadline(child, Duration::from_secs(5), format);
        assert!(out.status.success(), "{format}: {}", stderr(&out));
        let err = stderr(&out);
        let said = format!("320x240, {format}");
        assert!(format == "bgr24" || err.contains(&said), "{err}");
        shot
    };
    let bgr = shot_of("bgr24");
    for format in ["nv12", "i420"] {
        let yuv = shot_of(format);
        assert_eq!(bgr.len(), yuv.len());
        let diff: u64 = bgr
            .iter()
            .zip(&yuv)
            .map(|(a, b)| u64::from(a.abs_diff(*b)))
            .sum();
        let mean = diff as f64 / bgr.len() as f64;
        let lit = yuv.iter().filter(|&&v| v > 40).count();
        assert!(lit > 320 * 240, "{format}: the window looks blank");
        assert!(
            mean < 4.0,
            "{format}: mean difference {mean:.2} from the BGR pattern"
        );
        println!("{format} in the window: mean difference {mean:.2} from BGR");
    }
}

/// The window's geometry on the root window: x, y, width, height.
fn geometry(x: &Xvfb, id: &str) -> (i32, i32, i32, i32) {
    let out = x.cmd("xdotool", &["getwindowgeometry", "--shell", id]);
    let text = String::from_utf8_lossy(&out.stdout);
    let get = |k: &str| -> i32 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {k} in {text}"))
    };
    (get("X"), get("Y"), get("WIDTH"), get("HEIGHT"))
}

/// Rows (y) of the screenshot (800x600 BGR) inside `area` holding at least `min` pixels
/// within 12 of `rgb`.
fn rows_with(shot: &[u8], area: (i32, i32, i32, i32), rgb: [u8; 3], min: usize) -> Vec<i32> {
    let (ax, ay, aw, ah) = area;
    (ay.max(0)..(ay + ah).min(600))
        .filter(|&y| {
            (ax.max(0)..(ax + aw).min(800))
                .filter(|&x| {
                    let i = (y as usize * 800 + x as usize) * 3;
                    let px = [shot[i + 2], shot[i + 1], shot[i]];
                    px.iter().zip(rgb).all(|(a, b)| a.abs_diff(b) <= 12)
                })
                .count()
                >= min
        })
        .collect()
}

/// `t` shows the last traced frames under the picture: one row per track the trace has (on
/// the CPU backend: capture, the backend, output), in the timeline's colours, redrawn as
/// frames come; `t` again hides it; `s` saves the frame without it.
#[test]
fn t_shows_a_timeline_strip_under_the_picture() {
    use framepipe::trace::Kind;
    let x = Xvfb::start();
    let dir = TempDir::new("strip");
    let (child, id) = open_window(&x, &dir, &["--backend", "cpu"]);
    std::thread::sleep(Duration::from_millis(500));
    let (_, _, _, h0) = geometry(&x, &id);
    x.cmd("xdotool", &["windowfocus", "--sync", &id]);
    assert!(x.cmd("xdotool", &["key", "t"]).status.success());
    std::thread::sleep(Duration::from_millis(1500));
    let (wx, wy, ww, wh) = geometry(&x, &id);
    assert!(wh > h0 + 40, "the window grew by the strip: {h0} -> {wh}");
    let strip = (wx, wy + 240, ww, wh - 240);
    let first = screenshot(&x, &dir, "strip1.png");
    let mut rows = Vec::new();
    for kind in [Kind::Capture, Kind::Process, Kind::Output] {
        let r = rows_with(&first, strip, kind.rgb(), 3);
        assert!(!r.is_empty(), "no {kind:?} bar in the strip");
        rows.push((r[0], *r.last().unwrap()));
    }
    // One row per track, top to bottom in the trace's order, none sharing a line.
    for w in rows.windows(2) {
        assert!(w[0].1 < w[1].0, "rows overlap: {rows:?}");
    }
    // It is redrawn as frames come (the caption names the frames, the bars move).
    std::thread::sleep(Duration::from_millis(1500));
    let second = screenshot(&x, &dir, "strip2.png");
    let row_bytes = 800 * 3;
    let (a, b) = (
        (strip.1 as usize) * row_bytes,
        ((strip.1 + strip.3) as usize).min(600) * row_bytes,
    );
    assert_ne!(first[a..b], second[a..b], "the strip did not change");
    // s saves the frame alone.
    assert!(x.cmd("xdotool", &["key", "s"]).status.success());
    std::thread::sleep(Duration::from_millis(500));
    let saved: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("framepipe-")
        })
        .collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
    let img = imgcodecs::imread(saved[0].to_str().unwrap(), imgcodecs::IMREAD_COLOR).unwrap();
    assert_eq!(
        (img.cols(), img.rows()),
        (320, 240),
        "the saved frame holds no strip"
    );
    // t again: the strip goes, the window shrinks back.
    assert!(x.cmd("xdotool", &["key", "t"]).status.success());
    std::thread::sleep(Duration::from_millis(800));
    let (_, _, _, h2) = geometry(&x, &id);
    assert_eq!(h2, h0, "the window is back to the picture's size");
    let third = screenshot(&x, &dir, "strip3.png");
    assert!(rows_with(&third, strip, Kind::Process.rgb(), 3).is_empty());
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "strip window");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
