//! Bad input: a clear message naming the problem, a non-zero exit, no panic, no hang.

use crate::common;

use std::time::Duration;

use common::run::{framepipe, stderr, TempDir};

fn expect_error(args: &[&str], says: &str) {
    let out = framepipe(args, Duration::from_secs(30));
    let err = stderr(&out);
    assert!(
        !out.status.success(),
        "{args:?} should fail; stderr:\n{err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked:\n{err}");
    assert!(err.contains(says), "{args:?}: expected {says:?} in:\n{err}");
}

const PAT: [&str; 6] = [
    "--input",
    "pattern",
    "--size",
    "320x240",
    "--headless",
    "--frames=2",
];

fn with_pattern<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut v: Vec<&str> = PAT.to_vec();
    v.extend_from_slice(extra);
    v
}

#[test]
fn bad_inputs() {
    let dir = TempDir::new("errors");
    let d = dir.path().display().to_string();
    let text = dir.join("notes.mp4");
    std::fs::write(&text, "this is not a video\n".repeat(100)).unwrap();
    let empty = dir.join("empty.avi");
    std::fs::write(&empty, b"").unwrap();
    let bad_png = dir.join("broken.png");
    std::fs::write(&bad_png, b"\x89PNG but not really").unwrap();
    let (text, empty, bad_png) = (
        text.display().to_string(),
        empty.display().to_string(),
        bad_png.display().to_string(),
    );

    expect_error(
        &["--headless", "-i", "/no/such/clip.mp4"],
        "input '/no/such/clip.mp4' does not exist",
    );
    expect_error(&["--headless", "-i", &d], "is a directory");
    expect_error(&["--headless", "-i", &empty], "is an empty file");
    if cfg!(feature = "opencv") {
        expect_error(
            &["--headless", "-i", &text],
            "is not a video FFmpeg can decode",
        );
        expect_error(
            &["--headless", "-i", &bad_png],
            "is not an image OpenCV can decode",
        );
        expect_error(&["--headless", "-i", "57"], "could not open camera 57");
    } else {
        expect_error(&["--headless", "-i", &text], "this build has no OpenCV");
    }
    expect_error(
        &with_pattern(&["--filter", "sparkle"]),
        "unknown filter 'sparkle'",
    );
    expect_error(
        &with_pattern(&["--filter", "gain:abc"]),
        "'abc' is not a number",
    );
    expect_error(&with_pattern(&["--filter", "gray,gain:1,2,3"]), "got 3");
    expect_error(
        &with_pattern(&["--bands", "0"]),
        "--bands 0: must be at least 1",
    );
    expect_error(
        &with_pattern(&["--bands", "241"]),
        "more than the frame's 240 rows",
    );
    expect_error(
        &with_pattern(&["--ring", "1"]),
        "the ring needs at least 2 slots",
    );
    expect_error(
        &["-i", "pattern", "--size", "0x10", "--headless"],
        "width and height must be at least 1",
    );
    expect_error(
        &with_pattern(&["-o", "/no/such/dir/out.mp4"]),
        "folder '/no/such/dir' does not exist",
    );
    expect_error(
        &with_pattern(&["-o", &format!("{d}/out.xyz")]),
        "cannot write '.xyz' files",
    );
    expect_error(
        &with_pattern(&["-o", &format!("{d}/out.png")]),
        "needs a frame number",
    );
    expect_error(
        &with_pattern(&["--fps=-3"]),
        "--fps -3 must be 0 or a positive number",
    );
    expect_error(&["--frobnicate"], "unexpected argument");
}

/// Without a display (or a window in the build) a run that did not say --headless goes on
/// headless, in one line, instead of refusing (Qt would abort the process with no display).
#[test]
fn no_display_means_headless_said_once() {
    let out = framepipe(&["-i", "pattern", "--frames", "3"], Duration::from_secs(30));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    // Either build names the first reason: no display is named (a build without OpenCV
    // says it has no window only where a display is named).
    assert!(
        err.contains("no display to show a window on (DISPLAY is not set): running headless"),
        "{err}"
    );
    assert!(err.contains("frames: 3 captured"), "{err}");
}

#[test]
fn cuda_without_a_gpu_is_an_error() {
    if framepipe::backend::device::probe().is_ok() {
        println!("SKIPPED cuda_without_a_gpu_is_an_error: this machine has a GPU");
        return;
    }
    expect_error(&with_pattern(&["--backend", "cuda"]), "--backend cuda:");
    // auto falls back to the CPU and says so in one line.
    let out = framepipe(
        &with_pattern(&["--backend", "auto"]),
        Duration::from_secs(30),
    );
    assert!(out.status.success());
    let err = stderr(&out);
    assert_eq!(
        err.lines()
            .filter(|l| l.contains("using the CPU backend"))
            .count(),
        1,
        "{err}"
    );
}

#[test]
fn bench_and_doctor_without_a_gpu() {
    if framepipe::backend::device::probe().is_ok() {
        println!("SKIPPED bench_and_doctor_without_a_gpu: this machine has a GPU");
        return;
    }
    expect_error(
        &["bench"],
        "bench measures the CUDA pipeline and needs a GPU",
    );
    expect_error(
        &["bench", "--size", "0x5"],
        "width and height must be at least 1",
    );
    expect_error(&["bench", "--filter", "nope"], "unknown filter 'nope'");
    // The comparison flags parse; the missing GPU is what stops the run.
    expect_error(
        &[
            "bench",
            "--compare-graphs",
            "--compare-priorities",
            "--compare-threads",
        ],
        "needs a GPU",
    );
    let out = framepipe(&["doctor"], Duration::from_secs(30));
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("GPU:        none"), "{text}");
    assert!(text.contains("CPU:"), "{text}");
    // What decodes files, and what --decode auto would pick with CUDA.
    assert!(text.contains("decoding:   "), "{text}");
    if cfg!(feature = "ffmpeg") {
        assert!(
            text.contains("--decode") || text.contains("no NVDEC"),
            "{text}"
        );
    }
    // No GPU here: NVDEC is picked for nothing; and whether GStreamer pipelines are read.
    assert!(!text.contains("on NVDEC"), "{text}");
    assert!(text.contains("GStreamer:  "), "{text}");
}

#[test]
fn usage_errors_are_one_framepipe_line() {
    for (args, says) in [
        (
            vec!["--no-such-flag"],
            "unexpected argument '--no-such-flag'",
        ),
        (
            vec!["--decode", "nosuch"],
            "possible values: cpu, opencv, gpu, auto",
        ),
        (vec!["--fps", "abc"], "invalid value 'abc'"),
    ] {
        let out = framepipe(&args, Duration::from_secs(30));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}:\n{err}");
        let lines: Vec<&str> = err.lines().collect();
        assert_eq!(lines.len(), 1, "{args:?} said more than one line:\n{err}");
        assert!(lines[0].starts_with("framepipe: error: "), "{err}");
        assert!(
            lines[0].contains(says),
            "{args:?}: expected {says:?} in:\n{err}"
        );
    }
}

/// A server that takes the connection and never sends a byte: named a time-out.
#[cfg(feature = "ffmpeg")]
#[test]
fn a_server_that_never_answers_is_named_a_time_out() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let holder = std::thread::spawn(move || {
        let held: Vec<_> = listener.incoming().take(1).collect();
        std::thread::sleep(Duration::from_secs(12));
        drop(held);
    });
    let url = format!("tcp://127.0.0.1:{port}");
    expect_error(
        &["-i", &url, "--headless"],
        "timed out: nothing came for 10 s",
    );
    holder.join().unwrap();
}

/// The memory check adds up every input's ring: a ring each input's plan allows alone (three
/// quarters of what a run may take) is refused for two inputs, before anything is allocated.
#[test]
fn every_inputs_ring_counts_against_the_memory() {
    use framepipe::budget::{slot_bytes, HOST_SHARE};
    use framepipe::frame::FrameSize;
    use framepipe::host::memory_available;
    let Some(available) = memory_available() else {
        println!("SKIPPED: the kernel says no MemAvailable");
        return;
    };
    let size = FrameSize::new(3840, 2160);
    let allowed = (available as f64 * HOST_SHARE) as u64;
    let ring = (allowed * 3 / 4 / slot_bytes(size).unwrap())
        .max(2)
        .to_string();
    let input = "pattern:3840x2160:30";
    let alone = framepipe(
        &["-i", input, "--ring", &ring, "--headless", "--frames", "2"],
        Duration::from_secs(30),
    );
    assert!(alone.status.success(), "one input: {}", stderr(&alone));
    expect_error(
        &[
            "-i",
            input,
            "-i",
            input,
            "--ring",
            &ring,
            "--headless",
            "--frames",
            "2",
        ],
        "the 2 inputs' rings need",
    );
}

/// An unknown filter's error offers the nearest names, not every one (issue 80 item 6), and
/// ffmpeg's forms of framepipe's filters run as framepipe's own.
#[test]
fn an_unknown_filter_offers_the_nearest_and_ffmpegs_forms_run() {
    let chain = |filter: &str| {
        framepipe(
            &[
                "-i",
                "pattern:64x48:25",
                "--frames",
                "3",
                "--headless",
                "-q",
                "-f",
                filter,
                "-o",
                "-",
            ],
            Duration::from_secs(30),
        )
    };
    let out = chain("gray,blurr:3");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("unknown filter 'blurr'; did you mean 'blur'?"),
        "{err}"
    );
    assert!(!err.contains("timestamp"), "not every filter: {err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = chain("scale=w=32:hieght=24");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("did you mean 'height'"), "{err}");
    for (ffmpegs, ours) in [
        ("scale=32:24,hflip", "scale:32:24,hflip"),
        ("crop=w=32:h=16:x=4:y=2,negate", "crop:32:16:4:2,invert"),
        ("transpose=1,format=gray", "transpose:1,gray"),
    ] {
        let (theirs, mine) = (chain(ffmpegs), chain(ours));
        assert!(theirs.status.success(), "{ffmpegs}: {}", stderr(&theirs));
        assert!(mine.status.success(), "{ours}: {}", stderr(&mine));
        assert!(!theirs.stdout.is_empty());
        assert!(theirs.stdout == mine.stdout, "{ffmpegs} against {ours}");
    }
}
