//! The Python package (`python/`, issue 40), installed as the README says into
//! `target/pyvenv` (`scripts/test.sh`), driven by real Python scripts: its frames (through
//! NumPy's array interface and DLPack) equal the
//! command line's standard output (YUV4MPEG2, or headerless BGR) byte for byte, several inputs are told apart, a slow
//! loop makes a file wait (no frame lost), bad options and inputs raise one-line errors,
//! Ctrl-C and `close()` end a run within a second with its video file finalized, and a
//! thousand runs opened and closed leave the memory where it was.
#![cfg(feature = "opencv")]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::run::{bin, require, wait_with_deadline, TempDir};

/// The virtual environment's Python, with the package and NumPy installed.
fn python() -> PathBuf {
    let py = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/pyvenv/bin/python");
    assert!(
        py.exists(),
        "{} is missing: scripts/test.sh installs the Python package there (README, From Python)",
        py.display()
    );
    py
}

/// Runs `script` with `args` in `dir`; its stdout, asserting it succeeded.
fn run_script(dir: &TempDir, script: &str, args: &[&str], limit: Duration) -> String {
    // Each run's summary goes to stderr: into a file, which never fills as a pipe would.
    let log = dir.join("stderr.txt");
    let child = Command::new(python())
        .arg("-c")
        .arg(script)
        .args(args)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let out = wait_with_deadline(child, limit, "a Python script");
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    stdout
}

/// A Python function the scripts share: `refuses(call, what)` asserts that `call()` raises a
/// one-line ValueError, and prints it.
const REFUSES: &str = r#"
def refuses(call, what):
    try:
        call()
    except ValueError as e:
        assert "\n" not in str(e), e
        print("refused:", e)
        return
    raise SystemExit(f"{what}: accepted")
"#;

/// Runs `script` (after `REFUSES`) with the framepipe binary and `clip.mp4` (the camera clip, `seconds`
/// long) as its arguments, in a directory of its own; its stdout, asserting each of
/// `wants` is in it.
fn on_a_clip(tag: &str, script: &str, seconds: u32, wants: &[&str]) -> String {
    require(&["ffmpeg"]);
    let dir = TempDir::new(tag);
    crate::record::camera_clip(&dir.join("clip.mp4"), seconds);
    let out = run_script(
        &dir,
        &format!("{REFUSES}{script}"),
        &[&bin(), "clip.mp4"],
        Duration::from_secs(180),
    );
    for want in wants {
        assert!(out.contains(want), "{want:?} not in: {out}");
    }
    out
}

const EQUAL_TO_Y4M: &str = r#"
import subprocess, sys
import numpy as np
import framepipe

fp, clip = sys.argv[1:3]
for fmt, chain in [("i420", "gauss:2"), ("bgr24", "invert,blur:3"), ("gray", "copy")]:
    y4m = subprocess.run([fp, "-q", "-i", clip, "--headless", "--filter", chain,
                          "--output-format", fmt, "-o", "-"], capture_output=True, check=True).stdout
    n = {"i420": 320 * 240 * 3 // 2, "bgr24": 320 * 240 * 3, "gray": 320 * 240}[fmt]
    frames = []
    if y4m.startswith(b"YUV4MPEG2"):
        header, rest = y4m.split(b"\n", 1)
        while rest:
            tag, rest = rest.split(b"\n", 1)
            assert tag.startswith(b"FRAME"), tag
            frames.append(rest[:n])
            rest = rest[n:]
    else:  # BGR goes out as headerless frames (YUV4MPEG2 can't hold it)
        frames = [y4m[i:i + n] for i in range(0, len(y4m), n)]
    seen, last = 0, -1.0
    with framepipe.open(clip, filter=chain, format=fmt, quiet=True) as run:
        for f in run:
            a = np.asarray(f)
            assert a.dtype == np.uint8 and a.shape == f.shape, (a.dtype, a.shape, f.shape)
            assert (np.from_dlpack(f) == a).all()   # DLPack: the same pixels
            assert f.index == seen and f.input == 0 and f.name == clip and f.format == fmt
            assert a.tobytes() == frames[seen], f"{fmt} {chain}: frame {seen} differs"
            assert f.seconds > last and float(f.pts) == f.seconds
            last = f.seconds
            seen += 1
    assert seen == len(frames) == 60, (seen, len(frames))
    print(f"{fmt} {chain}: {seen} frames equal")
"#;

#[test]
fn frames_equal_the_command_lines_y4m() {
    let wants = [
        "i420 gauss:2: 60",
        "bgr24 invert,blur:3: 60",
        "gray copy: 60",
    ];
    on_a_clip("python-y4m", EQUAL_TO_Y4M, 2, &wants);
}

const MODEL_INPUTS: &str = r#"
import subprocess, sys
import numpy as np
import framepipe

fp, clip = sys.argv[1:3]
MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
m32, s32 = np.float32(MEAN).reshape(3, 1, 1), np.float32(STD).reshape(3, 1, 1)
# The 320x240 clip fitted to each size: the geometry filters the command line would run.
cases = [("letterbox", (224, 224), "scale:224:168,pad:224:224:0:28"),
         ("letterbox", (100, 200), "scale:100:75,pad:100:200:0:62"),
         ("letterbox", (90, 30), "scale:40:30,pad:90:30:25:0"),
         ("crop", (100, 100), "scale:133:100,crop:100:100"),
         ("stretch", (64, 48), "scale:64:48")]
for fit, (w, h), chain in cases:
    bgr = subprocess.run([fp, "-q", "-i", clip, "--headless", "--filter", chain, "--output-format",
                          "bgr24", "-o", "-"], capture_output=True, check=True).stdout
    n = w * h * 3
    want = [np.frombuffer(bgr[i:i + n], np.uint8).reshape(h, w, 3) for i in range(0, len(bgr), n)]
    for fmt in ["rgb24", "rgbf32", "rgbf16", "bgr24"]:
        norm = dict(mean=MEAN, std=STD) if fmt.startswith("rgbf") else {}
        seen = 0
        with framepipe.open(clip, size=(w, h), fit=fit, format=fmt, quiet=True, **norm) as run:
            for f in run:
                a = np.asarray(f)
                rgb = want[f.index][..., ::-1]
                if fmt == "rgb24":
                    exp = rgb
                elif fmt == "bgr24":
                    exp = want[f.index]
                else:
                    exp = (rgb.transpose(2, 0, 1).astype(np.float32) / np.float32(255) - m32) / s32
                    if fmt == "rgbf16":
                        exp = exp.astype(np.float16)
                assert a.dtype == exp.dtype and a.shape == exp.shape == f.shape, (a.dtype, a.shape, f.shape)
                assert f.dtype == str(a.dtype) and (f.width, f.height) == (w, h) and f.format == fmt
                assert a.tobytes() == exp.tobytes(), f"{fit} {w}x{h} {fmt}: frame {f.index} differs"
                d = np.from_dlpack(f)
                assert d.dtype == a.dtype and d.tobytes() == a.tobytes()
                seen += 1
        assert seen == len(want) == 30, (seen, len(want))
    print(f"{fit} {w}x{h}: {seen} frames equal in 4 formats")

# Several inputs in one batch: (N, 3, H, W) floats, each frame as above.
with framepipe.open(clip, clip, batch=2, batch_timeout=1.0, size=(64, 48), fit="stretch",
                    format="rgbf32", quiet=True, realtime=True) as run:
    b = next(iter(run))
    a = np.asarray(b)
    assert a.shape == (2, 3, 48, 64) and a.dtype == np.float32, (a.shape, a.dtype)
    assert (a[0] == np.asarray(b.frames[0])).all()
print("batch", a.shape, a.dtype)

for bad in [dict(format="rgbf32", std=(0, 1, 1)), dict(mean=(0, 0, 0)), dict(fit="crop"),
            dict(size=(0, 10)), dict(size=(10,)), dict(format="rgbf32", mean=(1, 2)),
            dict(size=(10, 10), fit="zoom"), dict(format="yuv444")]:
    refuses(lambda: framepipe.open(clip, quiet=True, **bad).close(), bad)
"#;

/// `size=`, `fit=` and the model formats: frames equal the command line's run of the
/// geometry filters a fit stands for, laid out as RGB bytes or as RGB planes normalised
/// as NumPy computes them (float32 bit for bit, float16 as NumPy rounds it).
#[test]
fn model_inputs_equal_the_command_lines_resize_and_numpys_normalisation() {
    let wants = [
        "letterbox 224x224: 30 frames equal",
        "letterbox 100x200: 30",
        "letterbox 90x30: 30",
        "crop 100x100: 30",
        "stretch 64x48: 30",
        "batch (2, 3, 48, 64) float32",
    ];
    let out = on_a_clip("python-model", MODEL_INPUTS, 1, &wants);
    assert_eq!(out.matches("refused:").count(), 8, "{out}");
}

const OVERLAY: &str = r#"
import os, subprocess, sys
import numpy as np
import framepipe

fp, clip = sys.argv[1:3]
os.makedirs("s", exist_ok=True)
MAGENTA = [255, 0, 255]   # the same bytes in BGR and RGB
with framepipe.open(clip, output="s/%03d.png", size=(160, 120), fit="stretch", quiet=True) as run:
    for f in run:
        a = np.asarray(f)
        # The frames handed to the loop are never drawn on.
        assert not (a[10, 5:55] == MAGENTA).all(), f"frame {f.index} was handed with the box"
        if f.index == 3:   # a box at (5, 10), 50x25 in the 160x120 frames handed over
            run.write(f, overlay=[(5, 10, 50, 25, "cat 0.9")], color=(255, 0, 255))
        if f.index == 20:
            run.write(f, overlay=[])
raw = subprocess.run(["ffmpeg", "-v", "error", "-i", "s/%03d.png", "-f", "rawvideo", "-pix_fmt",
                      "bgr24", "-"], capture_output=True, check=True).stdout
frames = np.frombuffer(raw, np.uint8).reshape(-1, 240, 320, 3)
assert len(frames) == 30, len(frames)
def boxed(p):   # the box's edges in the 320x240 frames written: (10, 20), 100x50
    return ((p[20:22, 10:110] == MAGENTA).all() and (p[68:70, 10:110] == MAGENTA).all()
            and (p[20:70, 10:12] == MAGENTA).all() and (p[20:70, 108:110] == MAGENTA).all())
marked = [i for i, p in enumerate(frames) if boxed(p)]
print("marked frames", marked[0], "to", marked[-1], "of", len(marked))
# Marks apply from the frames the sinks take after the write: the frame written about may
# already be past them, or not (the loop and the run race for it), and up to the queue's two
# and the one being made more.
assert all(not boxed(p) for p in frames[:3]), "a frame before the write was drawn on"
assert marked == list(range(marked[0], marked[-1] + 1)), marked
assert 3 <= marked[0] <= 7 and 19 <= marked[-1] <= 24, marked
band = frames[marked[0]][20 - 12:20, 10:60]   # the label, on its black band above the box
assert (band == MAGENTA).all(axis=2).any() and (band == 0).all(axis=2).any()
assert (frames[marked[0]][30:60, 20:100] == frames[0][30:60, 20:100]).any()  # inside: the picture
for bad in [[(1, 2, 3)], [(1, 2, 3, "x")], [(1, 2, 3, 4, "a", (1, 2))], [("a", 2, 3, 4)],
            [(float("nan"), 2, 3, 4)]]:
    def write_one():
        with framepipe.open(clip, quiet=True, frames=1) as run:
            for f in run:
                run.write(f, overlay=bad)
    refuses(write_one, bad)
"#;

/// `run.write(frame, overlay=…)`: a model's boxes and labels, in the coordinates of the
/// frames it was handed (resized), are drawn into the frames written, from a frame or few
/// after the write until the next, and never into the frames handed over.
#[test]
fn a_models_boxes_are_drawn_into_the_outputs_not_the_frames_handed_over() {
    let out = on_a_clip("python-overlay", OVERLAY, 1, &["marked frames"]);
    assert_eq!(out.matches("refused:").count(), 5, "{out}");
}

const SEVERAL: &str = r#"
import time
import numpy as np
import framepipe

counts = {}
with framepipe.open("a.mp4", "b.mp4", quiet=True, backend="cpu") as run:
    for f in run:
        time.sleep(0.005)   # a slow loop: the files wait for it
        counts[(f.input, f.name)] = counts.get((f.input, f.name), 0) + 1
print("counts", sorted(counts.items()))
assert counts == {(0, "a.mp4"): 30, (1, "b.mp4"): 60}, counts

try:
    framepipe.open("a.mp4", filter="nosuch")
    raise SystemExit("a bad filter was taken")
except ValueError as e:
    assert "nosuch" in str(e) and "\n" not in str(e), e
    print("bad filter:", e)
# A one-letter flag is written as one: y=True is -y (it raised "unexpected argument '--y'").
open("replaced.mp4", "wb").write(b"old")
with framepipe.open("a.mp4", output="replaced.mp4", y=True, quiet=True, backend="cpu") as run:
    assert sum(1 for _ in run) == 30
assert open("replaced.mp4", "rb").read(3) != b"old"
print("y=True replaced the file")
try:
    for f in framepipe.open("missing.mp4", quiet=True):
        pass
    raise SystemExit("a missing file gave no error")
except RuntimeError as e:
    assert "missing.mp4" in str(e), e
    print("missing input:", e)
try:
    framepipe.open("a.mp4", format="yuyv")
    raise SystemExit("a bad format was taken")
except ValueError as e:
    print("bad format:", e)
try:
    framepipe.open("a.mp4", batch=2, batch_timeout=1.8e19)
    raise SystemExit("a batch_timeout past a day was taken")
except ValueError as e:
    assert "\n" not in str(e) and "a day" in str(e), e
    print("bad batch_timeout:", e)
"#;

#[test]
fn several_inputs_a_slow_loop_and_bad_options() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("python-several");
    crate::record::camera_clip(&dir.join("a.mp4"), 1);
    crate::record::camera_clip(&dir.join("b.mp4"), 2);
    let out = run_script(&dir, SEVERAL, &[], Duration::from_secs(120));
    for want in [
        "bad filter:",
        "y=True replaced",
        "missing input:",
        "bad format:",
        "bad batch_timeout:",
    ] {
        assert!(out.contains(want), "{out}");
    }
}

const INTERRUPTED: &str = r#"
import sys, time
import framepipe

run = framepipe.open("pattern:320x240:bgr:30", output="live.mp4", quiet=True)
try:
    for f in run:
        if f.index == 5:
            print("looping", flush=True)
except KeyboardInterrupt:
    t = time.monotonic()
    run.close()
    print(f"interrupted; closed in {time.monotonic() - t:.3f} s", flush=True)

run = framepipe.open("pattern:320x240:bgr:30", output="closed.mp4", quiet=True)
for f in run:
    if f.index == 9:
        t = time.monotonic()
        run.close()
        print(f"closed in {time.monotonic() - t:.3f} s", flush=True)
assert run.closed
"#;

const CLOSED_ELSEWHERE: &str = r#"
import threading, time
import framepipe

run = framepipe.open("pattern:160x120:bgr:30", output="elsewhere.mp4", quiet=True, backend="cpu")
seen = []
def iterate():
    for f in run:
        seen.append(f.index)
    seen.append("ended")
reader = threading.Thread(target=iterate)
reader.start()
time.sleep(1.0)
t = time.monotonic()
run.close()          # raised "Already borrowed" while the other thread iterated
reader.join(5)
took = time.monotonic() - t
assert not reader.is_alive(), "the other thread's iteration did not end"
assert seen[-1] == "ended" and len(seen) > 10, seen[-3:]
assert run.closed
print(f"closed from another thread in {took:.3f} s after {len(seen) - 1} frames", flush=True)
"#;

/// Attack 21 of issue 58: `close()` from a thread other than the one iterating the run
/// stops it, and that thread's iteration ends within a second, the file finalized.
#[test]
fn close_from_another_thread_ends_the_iteration() {
    require(&["ffprobe"]);
    let dir = TempDir::new("python-close-elsewhere");
    let out = run_script(&dir, CLOSED_ELSEWHERE, &[], Duration::from_secs(60));
    let took: f64 = out
        .split("closed from another thread in ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{out}"));
    assert!(took < 1.5, "{out}");
    assert!(frames_in(&dir.join("elsewhere.mp4")) > 10, "{out}");
}

/// The frames of the video file `path`, counted by ffprobe (it decodes every one).
fn frames_in(path: &Path) -> u64 {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-select_streams", "v:0"])
        .args(["-show_entries", "stream=nb_read_frames", "-of", "csv=p=0"])
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
}

#[test]
fn ctrl_c_and_close_end_a_run_with_its_file_finalized() {
    require(&["ffprobe"]);
    let dir = TempDir::new("python-interrupt");
    let mut child = Command::new(python())
        .arg("-c")
        .arg(INTERRUPTED)
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "looping");
    std::thread::sleep(Duration::from_millis(300));
    let sent = Instant::now();
    // SAFETY: kill(2) on our own child's pid, with a signal number.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let interrupted = lines.next().unwrap().unwrap();
    let took = sent.elapsed();
    assert!(
        interrupted.starts_with("interrupted; closed in"),
        "{interrupted}"
    );
    assert!(took < Duration::from_millis(1500), "Ctrl-C took {took:?}");
    let closed = lines.next().unwrap().unwrap();
    assert!(closed.starts_with("closed in 0."), "{closed}");
    assert!(child.wait().unwrap().success());
    assert!(frames_in(&dir.join("live.mp4")) >= 6);
    assert!(frames_in(&dir.join("closed.mp4")) >= 10);
}

const OPEN_CLOSE: &str = r#"
import numpy as np
import framepipe

def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 2**20

def runs(n):
    for i in range(n):
        run = framepipe.open("pattern:64x48:bgr", frames=3, no_pace=True, quiet=True, backend="cpu")
        if i % 2:
            # Frames taken through DLPack (and a capsule nobody takes) are given back too.
            assert sum(np.from_dlpack(f).size > 0 and f.__dlpack__() is not None for f in run) == 3
        else:
            run.close()

runs(100)
before = rss_mib()
runs(900)
after = rss_mib()
print(f"rss {before:.1f} MiB after 100 runs, {after:.1f} MiB after 1000")
assert after - before < 16, (before, after)
"#;

#[test]
fn a_thousand_runs_opened_and_closed_leak_nothing() {
    let dir = TempDir::new("python-leak");
    let out = run_script(&dir, OPEN_CLOSE, &[], Duration::from_secs(240));
    assert!(out.contains("after 1000"), "{out}");
}

/// The README's "From Python" example, as written, on a clip of its name.
#[test]
fn the_readmes_python_example_runs() {
    require(&["ffmpeg"]);
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    let example = readme
        .split("```python\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("README.md has a python example");
    assert!(
        example.lines().count() <= 10,
        "the example grew past ten lines"
    );
    let dir = TempDir::new("python-readme");
    crate::record::camera_clip(&dir.join("clip.mp4"), 1);
    let out = run_script(&dir, example, &[], Duration::from_secs(60));
    assert_eq!(out.lines().count(), 30, "{out}");
    assert!(out.starts_with("0 0 0"), "{out}");
}

const BATCHES: &str = r#"
import sys, time
import numpy as np
import framepipe

# Two cameras in step: every batch holds both, stacked as one array.
with framepipe.open("a.mp4", "a.mp4", batch=2, batch_timeout=1.0, quiet=True, realtime=True) as run:
    n = 0
    for b in run:
        a = np.asarray(b)
        assert b.inputs == [0, 1] and len(b) == 2, b.inputs
        assert a.shape == (2, 240, 320, 3), a.shape
        for k, f in enumerate(b.frames):
            assert (a[k] == np.asarray(f)).all()
        n += 1
print("paired batches", n)
assert n == 30, n

# Files as fast as they go: every frame of each comes once, in order (a file's later frame
# waits for the next batch; once one file has ended, the batches go on without it).
seen = {0: [], 1: []}
with framepipe.open("a.mp4", "b.mp4", batch=2, batch_timeout=0.2, quiet=True) as run:
    for b in run:
        assert len(set(b.inputs)) == len(b), b.inputs
        for f in b.frames:
            seen[f.input].append(f.index)
print("files batched whole", len(seen[0]), len(seen[1]))
assert seen[0] == list(range(30)) and seen[1] == list(range(60)), seen

# A camera that never sends: batches come without it, each within its timeout.
port = sys.argv[1]
with framepipe.open("a.mp4", f"udp://127.0.0.1:{port}", batch=2, batch_timeout=0.05,
                    quiet=True, realtime=True) as run:
    waits = []
    t = time.monotonic()
    for b in run:
        assert b.inputs == [0], b.inputs
        waits.append(time.monotonic() - t)
        t = time.monotonic()
        if len(waits) == 10:
            break
print("slowest batch after the first", max(waits[1:]))
assert max(waits[1:]) < 0.5, waits
"#;

#[test]
fn batches_hold_a_frame_of_each_input_keep_every_frame_of_a_file_and_time_out() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("python-batch");
    crate::record::camera_clip(&dir.join("a.mp4"), 1);
    crate::record::camera_clip(&dir.join("b.mp4"), 2);
    let port = crate::common::run::free_port().to_string();
    let out = run_script(&dir, BATCHES, &[&port], Duration::from_secs(60));
    assert!(out.contains("paired batches 30"), "{out}");
    assert!(out.contains("files batched whole 30 60"), "{out}");
}

const SLOW_LOOP: &str = r#"
import sys, subprocess, time
import framepipe

port = sys.argv[1]
run = framepipe.open(f"udp://127.0.0.1:{port}?fifo_size=1000000&overrun_nonfatal=1", quiet=True)
sender = subprocess.Popen(["ffmpeg", "-v", "error", "-re", "-i", "clip.ts", "-c", "copy",
                           "-f", "mpegts", f"udp://127.0.0.1:{port}?pkt_size=1316"])
got = 0
for f in run:
    got += 1
    time.sleep(0.1)          # a model three times slower than the camera
    if sender.poll() is not None and got > 5:
        break
dropped = run.dropped[0]
run.close()
print("got", got, "dropped", dropped)
# 150 frames sent: the first second of the loop's lag is waited for (a live stream's
# patience, a burst's worth), the rest dropped; those still in the ring and the queue when
# the sender ended are neither.
assert dropped >= 10 and got + dropped >= 60, (got, dropped)
"#;

#[test]
fn a_slow_loop_makes_a_live_input_drop_and_says_how_many() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("python-slow");
    crate::record::camera_clip(&dir.join("clip.ts"), 5);
    let port = crate::common::run::free_port().to_string();
    let out = run_script(&dir, SLOW_LOOP, &[&port], Duration::from_secs(60));
    assert!(out.contains("dropped"), "{out}");
}

const DETECTIONS: &str = r#"
import json, sys
import framepipe
clip, model, jsonl = sys.argv[1], sys.argv[2], sys.argv[3]
seen = {}
with framepipe.open(clip, detect=model, detections=jsonl, y=True, size=(64, 64)) as run:
    for frame in run:
        assert frame.detections_frame == frame.index, (frame.index, frame.detections_frame)
        seen[frame.index] = frame.detections
lines = [json.loads(l) for l in open(jsonl)]
assert len(lines) == len(seen) == 5, (len(lines), len(seen))
for line in lines:
    got = seen[line["frame"]]
    assert got == line["detections"], (got, line["detections"])
print("equal:", len(lines), [d["label"] for d in lines[0]["detections"]])
"#;

#[test]
fn frame_detections_equal_the_json_lines() {
    require(&["ffmpeg"]);
    let ortpy = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ortvenv/bin/python");
    let maker = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/yolo_model.py");
    let dir = TempDir::new("py-detect");
    let model = dir.join("yolo.onnx");
    let made = Command::new(ortpy)
        .arg(maker)
        .arg(&model)
        .args(["v8", "64"])
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let clip = dir.join("clip.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=128x128:r=25:d=0.2"],
        &["-c:v", "libx264"],
    );
    let out = run_script(
        &dir,
        DETECTIONS,
        &[
            clip.to_str().unwrap(),
            model.to_str().unwrap(),
            dir.join("det.jsonl").to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(out.contains("equal: 5 ['person', 'car']"), "{out}");
}

const TEXT_ALONE: &str = r#"
import sys
import framepipe
clip, model = sys.argv[1], sys.argv[2]
frames = with_boxes = 0
with framepipe.open(clip, detect=model, quiet=True) as run:
    for frame in run:
        frames += 1
        with_boxes += 1 if frame.detections else 0
print("found:", frames, with_boxes)
"#;

/// Issue 77, items 16 and 17: with the loop the only consumer (frames lent where their
/// decoder left them), `detect=` finds the words the command line finds on every frame
/// (it found none); and `quiet=True` prints nothing, not even the summary.
#[test]
fn detect_finds_boxes_when_the_loop_is_the_only_consumer_and_quiet_is_quiet() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("py-detect-alone");
    let clip = crate::events::words(&dir, "words.mp4", 1, &["text=GATE:x=40:y=80"], false);
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ort/ch_PP-OCRv4_det_infer.onnx");
    let out = run_script(
        &dir,
        TEXT_ALONE,
        &[clip.to_str().unwrap(), model.to_str().unwrap()],
        Duration::from_secs(120),
    );
    assert!(out.contains("found: 25 25"), "{out}");
    let said = std::fs::read_to_string(dir.join("stderr.txt")).unwrap();
    assert!(said.trim().is_empty(), "quiet=True printed:\n{said}");
}

const WHEEL_FRAMES: &str = r#"
import subprocess, sys
import framepipe

fp = sys.argv[1]
args = ["-q", "-i", "pattern:96x64:25", "--frames", "12", "--headless", "--filter", "gray,blur:3",
        "--output-format", "bgr24", "-o", "-"]
bgr = subprocess.run([fp] + args, capture_output=True, check=True).stdout
n = 96 * 64 * 3
want = [bgr[i:i + n] for i in range(0, len(bgr), n)]
seen = 0
with framepipe.open("pattern:96x64:25", frames=12, filter="gray,blur:3", format="bgr24",
                    quiet=True) as run:
    for f in run:
        assert f.tobytes() == want[f.index], f"frame {f.index} differs"
        seen += 1
assert seen == len(want) == 12, (seen, len(want))
print("wheel frames equal:", seen, framepipe.__file__)
"#;

/// The wheel `scripts/wheel.sh` builds into `target/wheels/` (issue 80 item 4) installs into
/// a fresh virtual environment with nothing fetched and nothing built (`--no-index`), and
/// its frames equal the command line's.
#[test]
fn the_wheel_installs_offline_into_a_fresh_venv_and_its_frames_equal_the_clis() {
    let wheels = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/wheels");
    let wheel = std::fs::read_dir(&wheels)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"));
    let wheel = wheel.unwrap_or_else(|| {
        panic!(
            "no wheel in {}: scripts/wheel.sh builds it (scripts/test.sh runs it)",
            wheels.display()
        )
    });
    assert!(
        wheel.to_string_lossy().contains("abi3"),
        "{}: one wheel for every Python from 3.8",
        wheel.display()
    );
    let dir = TempDir::new("python-wheel");
    let made = Command::new("/usr/bin/python3")
        .args(["-m", "venv"])
        .arg(dir.join("venv"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let pip = Command::new(dir.join("venv/bin/pip"))
        .args([
            "install",
            "--no-index",
            "--no-build-isolation",
            "--only-binary=:all:",
        ])
        .args(["--disable-pip-version-check", "--find-links"])
        .arg(&wheels)
        .arg("framepipe")
        .output()
        .unwrap();
    let said =
        String::from_utf8_lossy(&pip.stdout).to_string() + &String::from_utf8_lossy(&pip.stderr);
    assert!(pip.status.success(), "{said}");
    assert!(
        !said.to_lowercase().contains("building"),
        "something was built: {said}"
    );
    let out = Command::new(dir.join("venv/bin/python"))
        .arg("-c")
        .arg(WHEEL_FRAMES)
        .arg(bin())
        .current_dir(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("wheel frames equal: 12"), "{stdout}");
    assert!(
        stdout.contains("/venv/"),
        "the venv's own package: {stdout}"
    );
}
