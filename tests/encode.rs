//! Encoder control, as ffmpeg names it: each flag changes what ffprobe reports of the file
//! written, and combinations the codec can't take are refused with the reason.
#![cfg(feature = "opencv")]

use crate::common;

use std::process::Command;
use std::time::Duration;

use common::run::{framepipe, require, stderr, TempDir};

/// Writes `frames` pattern frames (320x240, unpaced at 30 fps) to `out` with `flags`.
fn write(out: &str, frames: &str, flags: &[&str]) -> String {
    let mut args = vec![
        "-i",
        "pattern",
        "--size",
        "320x240",
        "--fps",
        "30",
        "--frames",
        frames,
        "--headless",
        "--no-pace",
        "-q",
        "-y",
        "-o",
        out,
    ];
    args.extend_from_slice(flags);
    let run = framepipe(&args, Duration::from_secs(120));
    assert!(run.status.success(), "{flags:?}: {}", stderr(&run));
    stderr(&run)
}

/// ffprobe's `-show_entries` for the video stream (or its frames), as text.
fn probe(path: &str, entries: &str, frames: bool) -> String {
    let mut cmd = Command::new("ffprobe");
    cmd.args([
        "-v",
        "error",
        "-select_streams",
        "v:0",
        "-show_entries",
        entries,
    ]);
    if frames {
        cmd.arg("-count_frames");
    }
    let out = cmd.args(["-of", "default=nw=1", path]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn encoder_flags_change_what_ffprobe_reports() {
    require(&["ffprobe"]);
    let dir = TempDir::new("encode");
    let p = |n: &str| dir.join(n).display().to_string();

    // Keyframe interval: 60 frames, a keyframe every 10.
    let g = p("gop.mp4");
    write(&g, "60", &["--gop", "10"]);
    let keys = probe(&g, "frame=key_frame", false);
    assert_eq!(keys.matches("key_frame=1").count(), 6, "{keys}");

    // Low latency: no B-frames.
    let z = p("zero.mp4");
    write(
        &z,
        "30",
        &["--preset", "ultrafast", "--tune", "zerolatency"],
    );
    assert!(probe(&z, "stream=has_b_frames", false).contains("has_b_frames=0"));

    // Pixel format and profile.
    let f = p("444.mp4");
    write(&f, "10", &["--pix-fmt", "yuv444p"]);
    let s = probe(&f, "stream=pix_fmt,profile", false);
    assert!(s.contains("pix_fmt=yuv444p") && s.contains("4:4:4"), "{s}");
    let b = p("base.mp4");
    write(&b, "10", &["--codec-opt", "profile=baseline"]);
    assert!(probe(&b, "stream=profile", false).contains("Baseline"));

    // Constant quality: a higher CRF makes a smaller file.
    let (lo, hi) = (p("crf15.mp4"), p("crf40.mp4"));
    write(&lo, "30", &["--crf", "15"]);
    write(&hi, "30", &["--crf", "40"]);
    let size = |f: &str| std::fs::metadata(f).unwrap().len();
    assert!(size(&hi) * 3 < size(&lo), "{} vs {}", size(&hi), size(&lo));

    // A target bit rate, within 10 % over 10 seconds.
    let r = p("rate.mkv");
    write(&r, "300", &["--codec", "h264", "--bitrate", "400k"]);
    let bytes = size(&r) as f64;
    let rate = bytes * 8.0 / 10.0;
    assert!(
        (rate / 400_000.0 - 1.0).abs() < 0.10,
        "{rate:.0} bits per second for a 400k target"
    );

    // VP9 in constant-quality mode.
    let v = p("vp9.webm");
    write(&v, "10", &["--crf", "30"]);
    assert!(probe(&v, "stream=codec_name", false).contains("vp9"));
}

#[test]
fn encoder_flags_the_codec_cannot_take_are_refused_with_the_reason() {
    let dir = TempDir::new("encode-refused");
    let out = dir.join("x.mp4").display().to_string();
    let base = ["-i", "pattern", "--frames", "2", "--headless", "-o", &out];
    for (flags, says) in [
        (
            &["--codec", "mpeg4", "--crf", "20"][..],
            "no constant-quality mode",
        ),
        (&["--crf", "20", "--bitrate", "1M"][..], "choose one"),
        (&["--maxrate", "1M"][..], "--bufsize"),
        (&["--preset", "quick"][..], "ultrafast"),
        (&["--codec", "mpeg4", "--pix-fmt", "yuv444p"][..], "4:2:0"),
        (&["--bitrate", "fast"][..], "is not a rate"),
        (&["--codec-opt", "profile"][..], "KEY=VALUE"),
        (&["--codec-opt", "nosuch=1"][..], "has no option 'nosuch'"),
    ] {
        let mut args = base.to_vec();
        args.extend_from_slice(flags);
        let run = framepipe(&args, Duration::from_secs(30));
        let err = stderr(&run);
        assert!(!run.status.success(), "{flags:?} was taken");
        assert!(err.contains(says), "{flags:?}: {err}");
        assert!(
            !std::path::Path::new(&out).exists(),
            "{flags:?} left a file"
        );
    }
    // Without a video output the flags are refused too.
    let run = framepipe(
        &[
            "-i",
            "pattern",
            "--frames",
            "2",
            "--headless",
            "--crf",
            "20",
        ],
        Duration::from_secs(30),
    );
    assert!(stderr(&run).contains("apply to a video --output"));
}
