//! The promises a video tool must keep (README, "What framepipe promises"): the input is
//! never written over, a frame reported written is in the file, every stop ends the run with
//! a finalized file, and no argument or input makes it panic or allocate without bound.
#![cfg(feature = "opencv")]

use crate::common;
use crate::common::probe::frames_and_seconds;

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{
    bin, framepipe, frames_in, make_clip, require, stderr, wait_with_deadline, SummaryFile, TempDir,
};
use opencv::prelude::*;
use opencv::videoio;

fn assert_refused(args: &[&str], says: &str) -> String {
    let out = framepipe(args, Duration::from_secs(30));
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{args:?} should exit 1:\n{err}");
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(err.contains(says), "{args:?}: expected {says:?} in:\n{err}");
    // Refused before anything ran: the summary (written on failure too) says so.
    if let Some(summary) = &out.summary {
        assert_eq!(summary["ok"], false, "{args:?}: {summary}");
        assert_eq!(summary["frames"]["captured"], 0, "{args:?} ran:\n{err}");
    }
    err
}

pub(crate) fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// A tmpfs of `size` mounted on a fresh folder (root only), unmounted when dropped.
pub(crate) struct Tmpfs(pub(crate) TempDir);

impl Tmpfs {
    pub(crate) fn mount(name: &str, options: &str) -> Option<Self> {
        if !is_root() {
            println!("SKIPPED: {name} needs root to mount a small tmpfs");
            return None;
        }
        let dir = TempDir::new(name);
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", options, "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            println!("SKIPPED: {name}: mount -t tmpfs failed (no permission in this sandbox)");
            return None;
        }
        Some(Self(dir))
    }
    pub(crate) fn file(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0.path()).status();
    }
}

#[test]
fn never_writes_over_the_input() {
    let dir = TempDir::new("same-file");
    let d = |s: &str| dir.join(s).display().to_string();
    for ext in ["avi", "mkv", "mp4"] {
        let clip = d(&format!("clip.{ext}"));
        make_clip(&clip, "320x240", "30");
        let before = std::fs::read(&clip).unwrap();
        let sym = d(&format!("sym.{ext}"));
        let hard = d(&format!("hard.{ext}"));
        std::os::unix::fs::symlink(&clip, &sym).unwrap();
        std::fs::hard_link(&clip, &hard).unwrap();
        for (input, output) in [(&clip, &clip), (&clip, &sym), (&sym, &hard), (&hard, &clip)] {
            assert_refused(
                &["--input", input, "--headless", "--output", output],
                "would destroy the input",
            );
        }
        assert_eq!(std::fs::read(&clip).unwrap(), before, "{clip} was changed");
    }
    // An image sequence over its own first image, and a trace over the input.
    std::fs::create_dir(dir.join("pat")).unwrap();
    let first = d("pat/00000.png");
    make_clip(&d("pat/%05d.png"), "64x48", "3");
    let before = std::fs::read(&first).unwrap();
    assert_refused(
        &[
            "--input",
            &first,
            "--headless",
            "--frames",
            "5",
            "--output",
            &d("pat/%05d.png"),
        ],
        "pat/00000.png' is the input file",
    );
    std::fs::hard_link(&first, d("pat/x7.png")).unwrap();
    assert_refused(
        &[
            "--input",
            &first,
            "--headless",
            "--frames",
            "9",
            "--output",
            &d("pat/x%d.png"),
        ],
        "would destroy the input",
    );
    let json = d("in.json");
    std::fs::copy(&first, &json).unwrap();
    assert_refused(
        &[
            "--input",
            &json,
            "--headless",
            "--frames",
            "2",
            "--trace",
            &json,
        ],
        "would destroy the input",
    );
    assert_eq!(std::fs::read(&first).unwrap(), before);
    println!("refused: same file, symbolic link, hard link, sequence names, trace");
}

#[test]
fn a_full_disk_is_an_error_with_the_frames_really_stored() {
    let Some(fs) = Tmpfs::mount("full-disk", "size=2m") else {
        return;
    };
    // MPEG-4 Part 2 in .mp4: H.264 could compress the pattern into the 2 MB.
    for (ext, size, codec) in [
        ("mkv", "320x240", "ffv1"),
        ("avi", "320x240", "mjpeg"),
        ("mp4", "480x360", "mpeg4"),
    ] {
        let path = fs.file(&format!("out.{ext}"));
        let out = framepipe(
            &[
                "-i",
                "pattern",
                "--size",
                size,
                "--fps",
                "0",
                "--frames",
                "300",
                "--headless",
                "-o",
                &path,
                "--codec",
                codec,
            ],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert_eq!(
            out.status.code(),
            Some(1),
            "{ext}: a full disk must fail:\n{err}"
        );
        assert!(
            err.contains(&format!("writing '{path}': no space left")),
            "{ext}:\n{err}"
        );
        let [_, _, written, _] = out.counts().expect("the summary is written on failure too");
        assert_eq!(out.summary.as_ref().unwrap()["ok"], false);
        let held = frames_in(&path);
        assert!(held > 0, "{ext}: the file must stay playable:\n{err}");
        assert_eq!(
            held, written,
            "{ext}: the summary says {written}, the file holds {held}"
        );
        println!("{ext}: stopped on a full disk, file finalized with {held} frames");
        std::fs::remove_file(&path).unwrap();
    }
    // Too little space for even the first frames: refused before capture, no file left.
    let path = fs.file("big.mkv");
    assert_refused(
        &[
            "-i",
            "pattern",
            "--size",
            "1920x1080",
            "--headless",
            "-o",
            &path,
        ],
        "no space left",
    );
    assert!(!Path::new(&path).exists());
}

#[test]
fn an_unwritable_output_is_refused_before_capture_with_the_reason() {
    let Some(fs) = Tmpfs::mount("read-only", "ro,size=1m") else {
        return;
    };
    for (flag, name) in [
        ("--output", "out.mkv"),
        ("--output", "f%04d.png"),
        ("--trace", "t.json"),
        ("--timeline", "t.svg"),
    ] {
        let path = fs.file(name);
        let err = assert_refused(
            &[
                "-i",
                "pattern",
                "--size",
                "64x48",
                "--frames",
                "2",
                "--headless",
                flag,
                &path,
            ],
            "Read-only file system",
        );
        assert!(
            err.contains(&fs.file("")),
            "the message names the file:\n{err}"
        );
    }
}

#[test]
fn video_output_rates_are_checked() {
    let dir = TempDir::new("rates");
    for (fps, ext) in [("1e12", "mkv"), ("0.0001", "mp4"), ("0.5", "avi")] {
        let path = dir.join(&format!("o.{ext}")).display().to_string();
        assert_refused(
            &[
                "-i",
                "pattern",
                "--fps",
                fps,
                "--frames",
                "2",
                "--headless",
                "-o",
                &path,
            ],
            "frames per second",
        );
    }
}

/// Starts framepipe with `args`, standard error read by the test (or closed when `close_err`).
fn spawn(args: &[&str], close_err: bool) -> Child {
    Command::new(bin())
        .args(args)
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map(|mut c| {
            if close_err {
                drop(c.stderr.take()); // the reading end closes: like `2>&1 | head -1`
            }
            c
        })
        .unwrap()
}

fn interrupt(child: &Child) {
    common::run::signal(child, libc::SIGINT);
}

#[test]
fn a_stop_with_standard_error_closed_still_finalizes() {
    let dir = TempDir::new("stderr-closed");
    let path = dir.join("out.mkv").display().to_string();
    let json = dir.join("summary.json").display().to_string();
    let child = spawn(
        &[
            "-i",
            "pattern",
            "--size",
            "320x240",
            "--headless",
            "-o",
            &path,
            "--summary-json",
            &json,
        ],
        true,
    );
    std::thread::sleep(Duration::from_millis(1500));
    interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(5), "SIGINT with stderr closed");
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    // Standard error is gone: the machine-readable summary says what was written.
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let written = summary["frames"]["written"].as_u64().unwrap();
    assert_eq!(summary["ok"], true);
    assert!(written > 10, "{summary}");
    assert_eq!(
        frames_in(&path),
        written,
        "the file holds what the summary says"
    );

    // A file input that runs to its end prints the summary into the closed pipe.
    let clip = dir.join("clip.avi").display().to_string();
    make_clip(&clip, "320x240", "20");
    let child = spawn(&["-i", &clip, "--headless", "-y", "-o", &path], true);
    let out = wait_with_deadline(child, Duration::from_secs(20), "file run, stderr closed");
    assert_eq!(out.status.code(), Some(0), "{:?}", out.status);
    assert_eq!(frames_in(&path), 20);
}

/// A GStreamer `fdsrc` fed by a process that writes `frames` frames and then stalls.
fn stalled_stream(frames: usize) -> (Child, String) {
    let feeder = Command::new("sh")
        .args([
            "-c",
            // exec: killing the feeder kills the sleep, which holds no pipe of the test's.
            &format!(
                "head -c {} /dev/urandom; exec sleep 3600",
                160 * 120 * 3 * frames
            ),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pipeline =
        "fdsrc fd=0 ! rawvideoparse width=160 height=120 format=bgr framerate=30/1 ! appsink"
            .to_string();
    (feeder, pipeline)
}

#[test]
fn the_first_stop_ends_a_run_whose_source_stalled() {
    let dir = TempDir::new("stall");
    let path = dir.join("out.mkv").display().to_string();
    let (mut feeder, pipeline) = stalled_stream(25);
    let summary = SummaryFile::new();
    let child = summary
        .add_to(&mut Command::new(bin()))
        .args(["-i", &pipeline, "--headless", "-o", &path])
        .stdin(feeder.stdout.take().unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    interrupt(&child);
    let stopped = Instant::now();
    let out = wait_with_deadline(child, Duration::from_secs(10), "stalled source");
    let took = stopped.elapsed();
    let _ = feeder.kill();
    let _ = feeder.wait();
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        took < Duration::from_millis(2500),
        "took {took:?} after the stop:\n{err}"
    );
    let [captured, _, written, _] = summary.counts().expect("summary");
    assert_eq!((captured, written), (25, 25), "{err}");
    assert_eq!(frames_in(&path), 25, "{err}");
    println!("stalled source: stopped {took:?} after SIGINT, 25 frames finalized");

    // A paced pattern that is never due again: the pacing wait wakes on the stop.
    let child = spawn(
        &[
            "-i",
            "pattern",
            "--size",
            "64x48",
            "--fps",
            "0.02",
            "--headless",
            "-y",
            "-o",
            &path,
        ],
        false,
    );
    std::thread::sleep(Duration::from_millis(1000));
    interrupt(&child);
    let stopped = Instant::now();
    let out = wait_with_deadline(child, Duration::from_secs(10), "--fps 0.02");
    assert!(stopped.elapsed() < Duration::from_millis(2500));
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(frames_in(&path), 1);
}

#[test]
fn absurd_rings_and_sizes_are_refused_without_a_panic() {
    let pat = ["-i", "pattern", "--headless", "--frames", "2"];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        pat.iter().chain(extra).copied().collect()
    };
    for (extra, says) in [
        (vec!["--ring", "18446744073709551615"], "lower --ring"),
        (vec!["--ring", "1099511627776"], "lower --ring"),
        (
            vec!["--ring", "1000000", "--size", "1920x1080"],
            "lower --ring",
        ),
        (vec!["--ring", "0"], "at least 2 slots"),
        (vec!["--ring", "-1"], "error"),
        (vec!["--size", "32768x32768", "--ring", "8"], "available"),
        (
            vec![
                "--trace-frames",
                "18446744073709551615",
                "--trace",
                "/tmp/x.json",
            ],
            "a trace may hold",
        ),
        (vec!["--in-flight", "0"], "at least 1"),
    ] {
        let start = Instant::now();
        assert_refused(&with(&extra), says);
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{extra:?} took {:?}",
            start.elapsed()
        );
    }
    // Usage errors exit 1 like every other error; --help exits 0.
    assert_refused(&["--no-such-flag"], "unexpected argument");
    let help = framepipe(&["--help"], Duration::from_secs(10));
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit codes"));
}

#[test]
fn a_huge_still_image_gets_a_small_ring() {
    let dir = TempDir::new("huge-image");
    let path = dir.join("huge.png").display().to_string();
    let img = opencv::core::Mat::zeros(10000, 10000, opencv::core::CV_8UC3)
        .unwrap()
        .to_mat()
        .unwrap();
    assert!(opencv::imgcodecs::imwrite(&path, &img, &opencv::core::Vector::new()).unwrap());
    drop(img);
    let out = framepipe(
        &["-i", &path, "--headless", "--frames", "3"],
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("the ring holds 3 of them"), "{err}");
}

#[test]
fn a_pipe_as_input_is_read_as_a_stream_and_named_as_such() {
    let dir = TempDir::new("fifo");
    let fifo = dir.join("in.fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // What comes through it is not YUV4MPEG2: the error names the pipe.
    let writer = {
        let fifo = fifo.clone();
        std::thread::spawn(move || {
            let _ = std::fs::write(fifo, b"P6 640 480 255\n");
        })
    };
    assert_refused(
        &["--input", fifo.to_str().unwrap(), "--headless"],
        &format!("pipe '{}' is not a YUV4MPEG2 stream", fifo.display()),
    );
    writer.join().unwrap();
}

#[test]
fn a_size_change_mid_stream_is_never_written_as_stale_frames() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("size-change");
    // MPEG-2 growing (OpenCV repeats the old frame), H.264 shrinking (OpenCV lays the new
    // frame out at the old size): both are stopped at the change.
    for (codec, sizes) in [
        ("mpeg2video", ["640x480", "1280x720", "640x480"]),
        ("libx264", ["1280x720", "640x480", "1280x720"]),
    ] {
        let mut joined = Vec::new();
        for (i, size) in sizes.iter().enumerate() {
            let part = dir.join(&format!("{codec}-{i}.ts"));
            let ok = Command::new("ffmpeg")
                .args(["-v", "error", "-y", "-f", "lavfi", "-i"])
                .arg(format!("testsrc2=size={size}:rate=30"))
                .args([
                    "-frames:v",
                    "30",
                    "-pix_fmt",
                    "yuv420p",
                    "-c:v",
                    codec,
                    "-f",
                    "mpegts",
                ])
                .arg(&part)
                .status()
                .unwrap();
            assert!(ok.success());
            joined.extend(std::fs::read(&part).unwrap());
        }
        let input = dir.join(&format!("{codec}.ts"));
        std::fs::File::create(&input)
            .unwrap()
            .write_all(&joined)
            .unwrap();
        let output = dir.join(&format!("{codec}.mkv")).display().to_string();
        let out = framepipe(
            &["-i", input.to_str().unwrap(), "--headless", "-o", &output],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{codec}: {err}");
        let first = sizes[0];
        assert!(
            err.contains(&format!("has another size than the first frames ({first})")),
            "{codec}: {err}"
        );
        let [_, _, written, _] = out.counts().expect("summary");
        assert!((25..=30).contains(&written), "{codec}: {err}");
        assert_eq!(frames_in(&output), written);
        no_frame_repeats(&output);
    }
}

/// None of the file's frames repeats its predecessor (the stale-frame symptom).
fn no_frame_repeats(output: &str) {
    let mut cap = videoio::VideoCapture::from_file(output, videoio::CAP_FFMPEG).unwrap();
    let (mut a, mut b) = (opencv::core::Mat::default(), opencv::core::Mat::default());
    assert!(cap.read(&mut a).unwrap());
    while cap.read(&mut b).unwrap() && !b.empty() {
        let diff =
            opencv::core::norm2(&a, &b, opencv::core::NORM_INF, &opencv::core::no_array()).unwrap();
        assert!(diff > 0.0, "a stale (repeated) frame was written");
        std::mem::swap(&mut a, &mut b);
    }
}

/// `--output -` redirected onto a full disk: "written" is the frames the file holds whole.
#[test]
fn standard_output_on_a_full_disk_counts_what_the_file_holds() {
    let Some(fs) = Tmpfs::mount("stdout-full", "size=1m") else {
        return;
    };
    let path = fs.file("out.y4m");
    let summary = SummaryFile::new();
    let out = summary
        .add_to(&mut Command::new(bin()))
        .args([
            "-i", "pattern", "--size", "64x48", "--fps", "0", "--frames", "1000",
        ])
        .args(["--headless", "-o", "-"])
        .stdout(std::fs::File::create(&path).unwrap())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let [_, _, written, _] = summary.counts().expect("summary");
    let bytes = std::fs::read(&path).unwrap();
    let header = bytes.iter().position(|&b| b == b'\n').unwrap() + 1;
    let frame = b"FRAME\n".len() + 64 * 48 * 3 / 2;
    let whole = ((bytes.len() - header) / frame) as u64;
    assert_eq!(written, whole, "{} bytes on disk", bytes.len());
    assert!(written > 100, "{written}");
}

/// The segments an HLS playlist lists, as paths beside it.
fn listed_segments(playlist: &Path) -> Vec<std::path::PathBuf> {
    let text = std::fs::read_to_string(playlist).unwrap_or_default();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| playlist.with_file_name(l))
        .collect()
}

#[test]
fn hls_follows_no_planted_link_and_never_writes_the_input() {
    let dir = TempDir::new("hls-links");
    let precious = dir.join("precious.txt");
    std::fs::write(&precious, "precious\n").unwrap();
    let live = dir.join("live");
    std::fs::create_dir_all(&live).unwrap();
    for name in ["index0.ts.tmp", "index.m3u8.tmp", "index1.ts"] {
        std::os::unix::fs::symlink(&precious, live.join(name)).unwrap();
    }
    let playlist = live.join("index.m3u8").display().to_string();
    let args = |more: &[&str]| {
        let mut a = vec!["-i", "pattern", "--size", "160x120", "--fps", "30"];
        a.extend_from_slice(&["--frames", "150", "--headless", "-o", &playlist]);
        a.extend_from_slice(more);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let refused: Vec<String> = args(&[]);
    let refused: Vec<&str> = refused.iter().map(String::as_str).collect();
    assert_refused(&refused, "one of the files this HLS output writes");
    // With -y, links planted before and during the run are replaced, never followed.
    let planting = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let planter = {
        let (planting, live, precious) = (planting.clone(), live.clone(), precious.clone());
        std::thread::spawn(move || {
            while planting.load(std::sync::atomic::Ordering::SeqCst) {
                for n in 0..6 {
                    let _ = std::os::unix::fs::symlink(
                        &precious,
                        live.join(format!("index{n}.ts.tmp")),
                    );
                }
                let _ = std::os::unix::fs::symlink(&precious, live.join("index.m3u8.tmp"));
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let yes = args(&["-y"]);
    let yes: Vec<&str> = yes.iter().map(String::as_str).collect();
    let out = framepipe(&yes, Duration::from_secs(60));
    planting.store(false, std::sync::atomic::Ordering::SeqCst);
    planter.join().unwrap();
    let err = stderr(&out);
    assert_eq!(
        std::fs::read_to_string(&precious).unwrap(),
        "precious\n",
        "{err}"
    );
    let meta = std::fs::symlink_metadata(&playlist).unwrap();
    assert!(
        meta.file_type().is_file(),
        "the playlist is a file of its own"
    );
    let segments = listed_segments(Path::new(&playlist));
    assert!(!segments.is_empty(), "{err}");
    for s in &segments {
        let m = std::fs::symlink_metadata(s).unwrap();
        assert!(
            m.file_type().is_file(),
            "{} is not a plain file",
            s.display()
        );
    }
    // A playlist whose segments would have the input's name is refused, even with -y.
    let input = live.join("i0.ts");
    std::fs::copy(&segments[0], &input).unwrap();
    let before = std::fs::read(&input).unwrap();
    let list = live.join("i.m3u8").display().to_string();
    let input = input.display().to_string();
    assert_refused(
        &["-i", &input, "--headless", "-o", &list, "-y"],
        "which is the input file",
    );
    assert_eq!(
        std::fs::read(&input).unwrap(),
        before,
        "the input was written"
    );
    // Two playlists whose segments share names.
    let (x, big_x) = (live.join("x.m3u8"), live.join("x.M3U8"));
    let (x, big_x) = (x.display().to_string(), big_x.display().to_string());
    assert_refused(
        &[
            "-i",
            "pattern",
            "--frames",
            "5",
            "--headless",
            "-o",
            &x,
            "-o",
            &big_x,
        ],
        "would write segments of the same names",
    );
}

#[test]
fn hls_on_a_full_disk_is_an_error_and_keeps_only_whole_files() {
    let Some(fs) = Tmpfs::mount("hls-full", "size=300k") else {
        return;
    };
    let playlist = fs.file("i.m3u8");
    let out = framepipe(
        &[
            "-i",
            "pattern",
            "--size",
            "640x480",
            "--fps",
            "0",
            "--frames",
            "400",
            "--headless",
            "-o",
            &playlist,
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "a full disk must fail:\n{err}");
    assert!(err.contains("No space left on device"), "{err}");
    let summary = out
        .summary
        .as_ref()
        .expect("the summary is written on failure too");
    assert_eq!(summary["ok"], false, "{err}");
    assert!(!err.contains("400 sent"), "{err}");
    for s in listed_segments(Path::new(&playlist)) {
        assert!(
            s.exists(),
            "the playlist lists {} which is gone:\n{err}",
            s.display()
        );
        assert!(
            frames_in(&s.display().to_string()) > 0,
            "{} is not playable",
            s.display()
        );
    }
}

#[test]
fn a_segment_removed_during_the_run_is_said() {
    let dir = TempDir::new("hls-removed");
    let playlist = dir.join("index.m3u8").display().to_string();
    let mut child = spawn(
        &[
            "-i",
            "pattern",
            "--size",
            "160x120",
            "--fps",
            "30",
            "--frames",
            "240",
            "--headless",
            "-o",
            &playlist,
        ],
        false,
    );
    let first = dir.join("index0.ts");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !first.exists() {
        assert!(Instant::now() < deadline, "no first segment");
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(&first).unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(30), "hls removed");
    let err = stderr(&out);
    assert!(
        err.contains("index0.ts' was removed by something else"),
        "{err}"
    );
    assert_eq!(out.status.code(), Some(1), "{err}");
}

/// A TCP listener on loopback that accepts every connection and never reads or answers.
fn black_hole() -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let handle = std::thread::spawn(move || {
        listener.set_nonblocking(true).unwrap();
        let mut held = Vec::new();
        let end = Instant::now() + Duration::from_secs(30);
        while Instant::now() < end {
            if let Ok((c, _)) = listener.accept() {
                held.push(c);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    (port, handle)
}

#[test]
fn a_stop_ends_within_a_second_with_several_streams_blocked() {
    let dir = TempDir::new("blocked-streams");
    let holes: Vec<(u16, _)> = (0..3).map(|_| black_hole()).collect();
    for round in 0..3 {
        let file = dir.join(&format!("a{round}.mkv")).display().to_string();
        let summary = dir.join(&format!("s{round}.json")).display().to_string();
        let mut args = vec![
            "-i".to_string(),
            "pattern".into(),
            "--size".into(),
            "160x120".into(),
            "--fps".into(),
            "30".into(),
            "--headless".into(),
            "-o".into(),
            file.clone(),
            "--summary-json".into(),
            summary.clone(),
        ];
        for (port, _) in &holes {
            args.extend(["-o".to_string(), format!("rtmp://127.0.0.1:{port}/live/s")]);
        }
        let mut child = spawn(&args.iter().map(String::as_str).collect::<Vec<_>>(), false);
        std::thread::sleep(Duration::from_millis(2500));
        let asked = Instant::now();
        interrupt(&child);
        let ended = common::run::ends_within(&mut child, Duration::from_secs(5));
        let took = asked.elapsed();
        let out = wait_with_deadline(child, Duration::from_secs(5), "blocked streams");
        let err = stderr(&out);
        assert!(ended, "{err}");
        assert!(
            took < Duration::from_millis(1300),
            "round {round}: {took:?}:\n{err}"
        );
        // Peers that never answered the handshake were never connected: the run fails
        // for them, after a stop as quick as ever.
        assert_eq!(out.status.code(), Some(1), "round {round}:\n{err}");
        assert!(err.contains("never connected"), "{err}");
        assert!(!err.contains("did not end within"), "{err}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        assert_eq!(json["ok"], false, "{err}");
        assert_eq!(json["streams"].as_array().map(Vec::len), Some(3), "{json}");
        assert!(frames_in(&file) > 30, "the file is finalized:\n{err}");
        println!("round {round}: stopped in {took:?} with three blocked streams");
    }
}

#[test]
fn a_stop_before_the_first_frame_is_clean_and_leaves_nothing() {
    let dir = TempDir::new("early-stop");
    let clip = make_clip(&dir.join("in.mp4").display().to_string(), "320x240", "300");
    let (mut clean, mut before_code) = (0, 0);
    for k in 0..20u64 {
        let out_path = dir.join(&format!("o{k}.mp4"));
        let summary = dir.join(&format!("s{k}.json"));
        let (o, s) = (
            out_path.display().to_string(),
            summary.display().to_string(),
        );
        let child = spawn(
            &["-i", &clip, "--headless", "-o", &o, "--summary-json", &s],
            false,
        );
        if k % 2 == 0 {
            // From the moment framepipe's own handler catches SIGTERM, k ms on.
            common::run::wait_until_it_catches(child.id(), libc::SIGTERM);
            std::thread::sleep(Duration::from_millis(k * 4));
        } else {
            // The attack as it came: 100-130 ms after exec.
            std::thread::sleep(Duration::from_millis(100 + k * 3 / 2));
        }
        // SAFETY: kill with a child's pid and SIGTERM has no memory preconditions.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let out = wait_with_deadline(child, Duration::from_secs(10), "early stop");
        let err = stderr(&out);
        assert!(!err.contains("no frame was written"), "run {k}:\n{err}");
        match out.status.code() {
            Some(0) => {
                clean += 1;
                let json: serde_json::Value =
                    serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
                assert_eq!(json["ok"], true, "run {k}: {json}\n{err}");
                let written = json["frames"]["written"].as_u64().unwrap();
                match written {
                    0 => assert!(!out_path.exists(), "run {k}: an empty output was left"),
                    n => assert_eq!(frames_in(&out_path.display().to_string()), n, "run {k}"),
                }
            }
            // Killed while the dynamic loader was still mapping the libraries: no code of
            // framepipe had run, nothing was opened (RELIABILITY.md).
            None => {
                before_code += 1;
                assert!(!out_path.exists(), "run {k}");
            }
            Some(c) => panic!("run {k}: exit {c}:\n{err}"),
        }
    }
    println!("20 early stops: {clean} clean exits, {before_code} before any code ran");
}

/// `seconds` of ffmpeg's 160x120 test source at 30 fps, encoded as `codec` says, in `dir`.
fn ffmpeg_clip(dir: &TempDir, name: &str, seconds: &str, codec: &[&str]) -> std::path::PathBuf {
    let path = dir.join(name);
    let source = "testsrc2=size=160x120:rate=30";
    let made = Command::new("ffmpeg")
        .args([
            "-loglevel",
            "error",
            "-f",
            "lavfi",
            "-i",
            source,
            "-t",
            seconds,
        ])
        .args(codec)
        .arg(&path)
        .status()
        .unwrap();
    assert!(made.success(), "ffmpeg made no {name}");
    path
}

#[test]
fn joined_files_keep_their_time_going_forward() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("joined-ts");
    let one = ffmpeg_clip(&dir, "a.ts", "2", &["-c:v", "libx264", "-g", "30"]);
    let bytes = std::fs::read(&one).unwrap();
    let joined = dir.join("aaa.ts");
    std::fs::write(&joined, [&bytes[..], &bytes[..], &bytes[..]].concat()).unwrap();
    let joined = joined.display().to_string();
    for ext in ["mkv", "mp4"] {
        let out_path = dir.join(&format!("out.{ext}")).display().to_string();
        let out = framepipe(
            &["-i", &joined, "--headless", "-o", &out_path],
            Duration::from_secs(60),
        );
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert_eq!(err.matches("timestamps jump back").count(), 2, "{err}");
        let (frames, seconds) = frames_and_seconds(std::path::Path::new(&out_path));
        assert_eq!(frames, 180, "{ext}");
        assert!(
            (seconds - 6.0).abs() < 0.1,
            "{ext}: {seconds} s where ffmpeg writes 6 s"
        );
    }
}

#[test]
fn an_absurd_rate_in_a_header_falls_back_to_fps() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("flipped-avi");
    let avi = ffmpeg_clip(&dir, "in.avi", "5", &["-c:v", "mjpeg"]);
    // The stream header's scale and rate flipped: 10/2796203 frames a second.
    let mut bytes = std::fs::read(&avi).unwrap();
    let at = bytes.windows(4).position(|w| w == b"strh").unwrap() + 8 + 16 + 4;
    bytes[at..at + 4].copy_from_slice(&2_796_203u32.to_le_bytes());
    bytes[at + 4..at + 8].copy_from_slice(&10u32.to_le_bytes());
    std::fs::write(&avi, &bytes).unwrap();
    let avi = avi.display().to_string();
    for (fps, rate) in [(None, 30.0), (Some("25"), 25.0)] {
        let out_path = dir.join("out.mp4").display().to_string();
        let mut args = vec!["-i", avi.as_str(), "--headless", "-y", "-o", &out_path];
        if let Some(f) = fps {
            args.extend(["--fps", f]);
        }
        let out = framepipe(&args, Duration::from_secs(60));
        let err = stderr(&out);
        assert!(out.status.success(), "{err}");
        assert!(err.contains("which no video has"), "{err}");
        let (frames, seconds) = frames_and_seconds(std::path::Path::new(&out_path));
        assert_eq!(frames, 150, "{err}");
        assert!(
            (seconds - 150.0 / rate).abs() < 0.1,
            "{seconds} s at {rate} fps"
        );
    }
}

/// The most memory process `child` held (VmHWM) once it has ended, polled from /proc.
fn peak_rss_kb(mut child: Child) -> (u64, std::process::Output) {
    let mut peak = 0;
    let status = format!("/proc/{}/status", child.id());
    while child.try_wait().unwrap().is_none() {
        let text = std::fs::read_to_string(&status).unwrap_or_default();
        let hwm = text
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0);
        peak = peak.max(hwm);
        std::thread::sleep(Duration::from_millis(5));
    }
    (peak, child.wait_with_output().unwrap())
}

#[test]
fn reading_a_file_keeps_none_of_its_packets() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("packets-kept");
    let made = |name: &str, seconds: &str| {
        let path = dir.join(name);
        let ok = Command::new("ffmpeg")
            .args([
                "-loglevel",
                "error",
                "-f",
                "lavfi",
                "-i",
                "testsrc2=size=640x480:rate=30",
            ])
            .args([
                "-t",
                seconds,
                "-c:v",
                "libx264",
                "-qp",
                "0",
                "-preset",
                "ultrafast",
            ])
            .arg(&path)
            .status()
            .unwrap();
        assert!(ok.success());
        path
    };
    let (short, long) = (made("short.mp4", "1"), made("long.mp4", "30"));
    let peak = |path: &Path| {
        let input = path.display().to_string();
        let child = spawn(
            &["--headless", "-q", "--backend", "cpu", "-i", &input],
            false,
        );
        let (kb, out) = peak_rss_kb(child);
        assert!(out.status.success(), "{}", stderr(&out));
        kb
    };
    let size_kb = std::fs::metadata(&long).unwrap().len() / 1024;
    let (alone, whole) = (peak(&short), peak(&long));
    println!("peak RSS {alone} kB for 1 s, {whole} kB for 30 s of a {size_kb} kB file");
    assert!(
        whole < alone + size_kb / 2,
        "decoding a {size_kb} kB file peaked at {whole} kB, against {alone} kB for a short one: its packets were kept"
    );
}

#[test]
fn a_file_sent_to_hls_counts_what_reached_the_playlist() {
    let dir = TempDir::new("hls-counts");
    let clip = make_clip(&dir.join("in.mp4").display().to_string(), "320x240", "150");
    let playlist = dir.join("live/index.m3u8").display().to_string();
    let out = framepipe(
        &["-i", &clip, "--headless", "-o", &playlist],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("is read at its own rate"), "{err}");
    let (in_playlist, _) = frames_and_seconds(std::path::Path::new(&playlist));
    let [_, _, written, _] = out.counts().unwrap();
    assert_eq!(in_playlist, 150, "a paced file reaches HLS whole:\n{err}");
    assert_eq!(written, in_playlist, "{err}");
    // Unpaced (--no-pace), what the summary says is what the playlist holds.
    let fast = dir.join("fast/index.m3u8").display().to_string();
    let out = framepipe(
        &["-i", &clip, "--headless", "--no-pace", "-o", &fast],
        Duration::from_secs(60),
    );
    let [_, _, written, _] = out.counts().unwrap();
    assert_eq!(
        written,
        frames_and_seconds(std::path::Path::new(&fast)).0,
        "{}",
        stderr(&out)
    );
}

#[test]
fn standard_output_counts_what_its_reader_took() {
    let frame = 320 * 240 * 3 / 2 + "FRAME\n".len();
    for (bytes, whole) in [(1000, 0), (2 * frame + 400, 2), (6 * frame + 300, 6)] {
        let dir = TempDir::new(&format!("stdout-head-{bytes}"));
        let summary = dir.join("s.json").display().to_string();
        let out = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "{} -i pattern --size 320x240 --fps 0 --frames 300 --headless -q -o - --summary-json {summary} | head -c {bytes} > /dev/null",
                bin()
            ))
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
        // The header's bytes come first: the reader took `whole` frames, the next only in part.
        assert_eq!(json["frames"]["written"], whole, "head -c {bytes}: {json}");
    }
}
