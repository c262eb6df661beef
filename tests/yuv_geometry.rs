//! Geometry on a YUV frame's own planes (`pixel::planes`): `crop`, `pad`, the flips and
//! `transpose` of I420 (an H.264 clip decoded as yuv420p, out as YUV4MPEG2) and NV12 (raw
//! frames in and out) equal ffmpeg's filters on the same frames bit for bit, odd corners
//! rounded to the chroma's grid as ffmpeg rounds them; `scale` within ±1 of
//! `scale=…:flags=bilinear` at whole ratios.
#![cfg(feature = "ffmpeg")]

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::common::run::{bin, require, stderr, TempDir};

/// The cases: framepipe's chain, ffmpeg's, and the largest difference allowed.
const CASES: &[(&str, &str, u8)] = &[
    ("crop:320:200:101:61", "crop=320:200:101:61", 0),
    ("crop:240:160", "crop=240:160", 0),
    ("pad:800:480:41:61:2060a0", "pad=800:480:41:61:0x2060a0", 0),
    ("hflip", "hflip", 0),
    ("vflip", "vflip", 0),
    ("transpose:0", "transpose=0", 0),
    ("transpose:1", "transpose=1", 0),
    ("transpose:2", "transpose=2", 0),
    ("transpose:3", "transpose=3", 0),
    (
        "crop:300:200,transpose:1,hflip",
        "crop=300:200,transpose=1,hflip",
        0,
    ),
    ("scale:320:180", "scale=320:180:flags=bilinear", 1),
    ("scale:1280:720", "scale=1280:720:flags=bilinear", 1),
    // A crop after a scale is made in one pass (only the kept part is scaled).
    (
        "scale:320:180,crop:240:136:41:21",
        "scale=320:180:flags=bilinear,crop=240:136:41:21",
        1,
    ),
];

/// The largest difference between two frames' bytes (None: not of one size).
fn largest(a: &[u8], b: &[u8]) -> Option<u8> {
    (a.len() == b.len() && !a.is_empty()).then(|| {
        a.iter()
            .zip(b)
            .map(|(x, y)| x.abs_diff(*y))
            .max()
            .unwrap_or(0)
    })
}

/// ffmpeg's frames of `input` (with `before`, its options) through `vf`, as raw `pix_fmt`.
fn ffmpeg(before: &[&str], input: &Path, vf: &str, pix_fmt: &str) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error"])
        .args(before)
        .arg("-i")
        .arg(input)
        .args(["-vf", vf, "-f", "rawvideo", "-pix_fmt", pix_fmt, "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out.stdout
}

/// framepipe's frames of `args` (its standard input `stdin`), as written to its standard
/// output.
fn framepipe(args: &[&str], stdin: Option<&[u8]>) -> Vec<u8> {
    let mut child = Command::new(bin())
        .args(args)
        .args(["--headless", "-o", "-"])
        .env_remove("DISPLAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    let bytes = stdin.map(<[u8]>::to_vec);
    let feeder = std::thread::spawn(move || {
        if let Some(bytes) = bytes {
            let _ = input.write_all(&bytes);
        }
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    out.stdout
}

/// Raw 4:2:0 frames out of a YUV4MPEG2 stream (its headers dropped), by ffmpeg.
fn unwrapped(y4m: &[u8], dir: &TempDir) -> Vec<u8> {
    let path = dir.join("ours.y4m");
    std::fs::write(&path, y4m).unwrap();
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&path)
        .args(["-f", "rawvideo", "-pix_fmt", "yuv420p", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out.stdout
}

#[test]
fn geometry_on_i420_and_nv12_planes_equals_ffmpegs() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("yuv-geometry");
    let clip = dir.join("clip.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=640x360:r=25:d=0.4"],
        &["-c:v", "libx264", "-pix_fmt", "yuv420p"],
    );
    let nv12 = ffmpeg(&[], &clip, "null", "nv12");
    let raw = dir.join("in.nv12");
    std::fs::write(&raw, &nv12).unwrap();
    let nv12_in = ["-f", "rawvideo", "-pix_fmt", "nv12", "-s", "640x360"];
    let mut failed = Vec::new();
    for (ours, theirs, allowed) in CASES {
        let clip_arg = clip.to_str().unwrap();
        let i420 = framepipe(
            &["-i", clip_arg, "-f", ours, "--output-format", "i420"],
            None,
        );
        let i420 = largest(
            &unwrapped(&i420, &dir),
            &ffmpeg(&[], &clip, theirs, "yuv420p"),
        );
        let args = [
            "-i",
            "-",
            "--input-format",
            "nv12",
            "--size",
            "640x360",
            "--fps",
            "25",
            "-f",
            ours,
            "--output-format",
            "nv12",
        ];
        let nv12 = largest(
            &framepipe(&args, Some(&nv12)),
            &ffmpeg(&nv12_in, &raw, theirs, "nv12"),
        );
        for (format, got) in [("i420", i420), ("nv12", nv12)] {
            if got.is_none_or(|d| d > *allowed) {
                failed.push(format!("{ours} on {format}: {got:?} (allowed {allowed})"));
            }
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}
