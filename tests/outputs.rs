//! Video outputs: each container's default codec, `--codec`, combinations refused, image
//! sequences' folders made, unknown network schemes refused. Codecs are read back with OpenCV
//! (`CAP_PROP_FOURCC`) and frame counts by decoding.
#![cfg(feature = "opencv")]

use crate::common;

use std::time::Duration;

use common::run::{framepipe, frames_in, make_clip, stderr, TempDir};
use opencv::prelude::*;
use opencv::videoio;

/// The codec tag OpenCV reads back, and the frames it decodes.
fn probe(path: &str) -> (String, u64) {
    let cap = videoio::VideoCapture::from_file(path, videoio::CAP_FFMPEG).unwrap();
    assert!(cap.is_opened().unwrap(), "{path} does not open");
    let tag = cap.get(videoio::CAP_PROP_FOURCC).unwrap() as u32;
    let tag: String = tag.to_le_bytes().iter().map(|&b| b as char).collect();
    (tag.to_ascii_lowercase(), frames_in(path))
}

#[test]
fn containers_get_their_codecs() {
    let dir = TempDir::new("codecs");
    for (name, codec, want) in [
        ("a.mp4", None, ["avc1", "h264"]),
        ("b.mov", None, ["avc1", "h264"]),
        ("c.mkv", None, ["h264", "avc1"]),
        ("d.avi", None, ["mjpg", "mjpg"]),
        ("e.mp4", Some("hevc"), ["hev1", "hevc"]),
        ("f.mp4", Some("mpeg4"), ["mp4v", "fmp4"]),
        ("g.mkv", Some("h264"), ["h264", "avc1"]),
    ] {
        let path = dir.join(name).display().to_string();
        let mut args = vec![
            "-i", "pattern", "--size", "320x240", "--fps", "0", "--frames", "12",
        ];
        args.extend(["--headless", "-o", &path]);
        if let Some(c) = codec {
            args.extend(["--codec", c]);
        }
        let out = framepipe(&args, Duration::from_secs(60));
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let (tag, frames) = probe(&path);
        assert!(
            want.contains(&tag.as_str()),
            "{name}: codec tag {tag}, want {want:?}"
        );
        assert_eq!(frames, 12, "{name}");
        assert_eq!(out.counts().map(|c| c[2]), Some(12), "{name}");
    }
}

#[test]
fn impossible_outputs_are_refused_and_sequence_folders_made() {
    let dir = TempDir::new("outputs");
    let d = |s: &str| dir.join(s).display().to_string();
    for (args, says) in [
        (
            vec!["-o", "x.webm", "--codec", "h264"],
            "a .webm file can't hold it",
        ),
        (
            vec!["-o", "x.mp4", "--codec", "ffv1"],
            "a .mp4 file can't hold it",
        ),
        (vec!["--codec", "h264"], "there is none"),
        (
            vec!["-o", "gopher://239.0.0.1:5000"],
            "framepipe sends network outputs to udp://",
        ),
        (
            vec!["-o", "x.mp4", "--quality", "50"],
            "--quality applies to Motion JPEG",
        ),
        (vec!["-o", "x.avi", "--quality", "0"], "--quality"),
    ] {
        let mut all = vec!["-i", "pattern", "--frames", "2", "--headless"];
        all.extend(args.iter().copied());
        let out = framepipe(&all, Duration::from_secs(30));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains(says), "{all:?}: {err}");
    }
    make_clip(&d("new/deeper/%03d.png"), "64x48", "3");
    assert!(dir.join("new/deeper/002.png").exists());
}

#[test]
fn quality_sets_the_motion_jpeg_size() {
    let dir = TempDir::new("quality");
    let size_at = |q: &str| {
        let path = dir.join(&format!("q{q}.avi")).display().to_string();
        let out = framepipe(
            &[
                "-i",
                "pattern",
                "--size",
                "640x480",
                "--fps",
                "0",
                "--frames",
                "20",
                "--headless",
                "-o",
                &path,
                "--quality",
                q,
            ],
            Duration::from_secs(60),
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(probe(&path).1, 20);
        std::fs::metadata(&path).unwrap().len()
    };
    let (low, high) = (size_at("10"), size_at("95"));
    assert!(
        low * 2 < high,
        "quality 10 gave {low} bytes, 95 gave {high}"
    );
}

/// Every frame of a video output is the frame that was given, in its place: each decoded
/// frame is nearer the pattern frame of its own index than its neighbours'. (Encoders with
/// frame threads keep a reference to a frame after taking it; writing the next picture into
/// the same buffers once gave duplicated frames.)
#[test]
fn every_frame_written_is_the_one_given() {
    use framepipe::frame::FrameSize;
    use framepipe::source::pattern;
    let dir = TempDir::new("exact-frames");
    let size = FrameSize::new(320, 240);
    let want: Vec<Vec<u8>> = (0..60)
        .map(|i| {
            let mut f = vec![0; size.bytes()];
            pattern::draw(size, i, &mut f);
            f
        })
        .collect();
    let distance = |a: &[u8], b: &[u8]| -> u64 {
        a.iter()
            .zip(b)
            .map(|(x, y)| u64::from(x.abs_diff(*y)))
            .sum()
    };
    for (name, codec) in [
        ("o.avi", "mjpeg"),
        ("o.mp4", "h264"),
        ("m.mp4", "mpeg4"),
        ("o.mkv", "ffv1"),
        ("o.webm", "vp9"),
    ] {
        let path = dir.join(name).display().to_string();
        let out = framepipe(
            &[
                "-i",
                "pattern",
                "--size",
                "320x240",
                "--fps",
                "0",
                "--frames",
                "60",
                "--headless",
                "--codec",
                codec,
                "-o",
                &path,
            ],
            Duration::from_secs(120),
        );
        assert!(out.status.success(), "{name}: {}", stderr(&out));
        let mut cap = videoio::VideoCapture::from_file(&path, videoio::CAP_FFMPEG).unwrap();
        let mut frame = opencv::core::Mat::default();
        let mut i = 0usize;
        while cap.read(&mut frame).unwrap() && !frame.empty() {
            let got = frame.data_bytes().unwrap();
            let own = distance(got, &want[i]);
            for j in [i.wrapping_sub(1), i + 1]
                .into_iter()
                .filter(|j| *j < want.len())
            {
                assert!(
                    own < distance(got, &want[j]),
                    "{name}: frame {i} looks like frame {j}"
                );
            }
            if codec == "ffv1" {
                assert_eq!(own, 0, "{name}: frame {i} is not exact");
            }
            i += 1;
        }
        assert_eq!(i, 60, "{name}");
    }
}
