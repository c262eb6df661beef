//! Filters that change the frame's size or orientation (`scale`, `crop`, `pad`, `hflip`,
//! `vflip`, `transpose`), against ffmpeg's filters of those names on the same BGR picture
//! (a PNG both read exactly): the moves bit for bit, `scale` within ±1 of libswscale's
//! bilinear (at full chroma resolution) growing and shrinking, by whole ratios too; the
//! outputs take the chain's size.
#![cfg(feature = "opencv")]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::run::{framepipe_in, require, stderr, TempDir};

/// `png`'s pixels as packed BGR, decoded by ffmpeg.
fn bgr(png: &Path) -> Vec<u8> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(png)
        .args(["-f", "rawvideo", "-pix_fmt", "bgr24", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    out.stdout
}

/// The largest difference between framepipe's `ours` and ffmpeg's `theirs` on `in.png`.
fn largest_difference(dir: &TempDir, ours: &str, theirs: &str) -> u8 {
    let out = framepipe_in(
        dir.path(),
        &[
            "-i",
            "in.png",
            "--frames",
            "1",
            "--headless",
            "-y",
            "--filter",
            ours,
            "-o",
            "o%d.png",
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{ours}: {}", stderr(&out));
    let made = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-i"])
        .arg(dir.join("in.png"))
        .args(["-vf", theirs])
        .arg(dir.join("t.png"))
        .status()
        .unwrap();
    assert!(made.success());
    let (a, b) = (bgr(&dir.join("o0.png")), bgr(&dir.join("t.png")));
    assert_eq!(
        a.len(),
        b.len(),
        "{ours}: sizes differ from ffmpeg's {theirs}"
    );
    a.iter()
        .zip(&b)
        .map(|(x, y)| x.abs_diff(*y))
        .max()
        .unwrap_or(0)
}

#[test]
fn geometry_filters_equal_ffmpegs() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("geometry-ffmpeg");
    let out = framepipe_in(
        dir.path(),
        &[
            "-i",
            "pattern:320x240",
            "--frames",
            "1",
            "--headless",
            "-o",
            "in%d.png",
        ],
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::rename(dir.join("in0.png"), dir.join("in.png")).unwrap();
    for (ours, theirs) in [
        ("crop:200:100:10:20", "crop=200:100:10:20"),
        ("crop:101:51", "crop=101:51"),
        ("pad:400:300:30:40", "pad=400:300:30:40"),
        ("pad:330:250:3:4:ff8000", "pad=330:250:3:4:0xff8000"),
        ("hflip", "hflip"),
        ("vflip", "vflip"),
        ("transpose:clock", "transpose=clock"),
        ("transpose:cclock", "transpose=cclock"),
        ("transpose:clock_flip", "transpose=clock_flip"),
        ("transpose", "transpose"),
    ] {
        assert_eq!(largest_difference(&dir, ours, theirs), 0, "{ours}");
    }
    // libswscale's bilinear at full chroma resolution: by default it halves the chroma of
    // an RGB picture it scales (RGB through YUV 4:2:2), which framepipe, scaling BGR as it
    // is, does not (up to 66 apart on this pattern's finest colour at exactly half size).
    for size in [
        "640:480", "1280:720", "333:250", "200:150", "160:120", "107:80", "160:60",
    ] {
        let d = largest_difference(
            &dir,
            &format!("scale:{size}"),
            &format!("scale={size}:flags=bilinear+full_chroma_int+full_chroma_inp"),
        );
        assert!(d <= 1, "scale:{size}: {d} from libswscale's bilinear");
    }
}

#[test]
fn outputs_take_the_chains_size() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("geometry-outputs");
    crate::record::camera_clip(&dir.join("clip.mp4"), 2);
    let out = framepipe_in(
        dir.path(),
        &[
            "-i",
            "clip.mp4",
            "--headless",
            "--filter",
            "gray,scale:-2:180,transpose:clock",
            "-o",
            "small.mp4",
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let probe = Command::new("ffprobe")
        .args(["-v", "error", "-count_frames", "-show_entries"])
        .args([
            "stream=codec_type,width,height,nb_read_frames",
            "-of",
            "csv=p=0",
        ])
        .arg(dir.join("small.mp4"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&probe.stdout);
    assert!(said.contains("video,180,240,60"), "{said}");
    assert!(said.contains("audio"), "{said}");
    // What can't be made is said before a frame is read.
    for (args, says) in [
        (
            &["-i", "clip.mp4", "--filter", "crop:400:10", "--headless"][..],
            "reaches past the 320x240 frame",
        ),
        (
            &["-i", "clip.mp4", "--filter", "scale:-1:-1", "--headless"],
            "only one side may keep the aspect",
        ),
        (
            &[
                "-i",
                "clip.mp4",
                "-i",
                "clip.mp4",
                "--filter",
                "vflip",
                "--headless",
            ],
            "takes one input in this version",
        ),
    ] {
        let out = framepipe_in(dir.path(), args, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}
