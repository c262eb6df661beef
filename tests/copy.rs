//! `--codec copy`: an input's own packets written to a file and sent over UDP, checked
//! against the source with ffmpeg (framemd5 of the decoded video, the audio's AAC frames),
//! and each case a copy can't do refused in one line before anything opens.
#![cfg(feature = "ffmpeg")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common;
use crate::record::{adts, packets};
use common::run::{framepipe, free_port, require, stderr, TempDir};

/// An H.264 clip with B-frames (its first decoding time below zero) and AAC audio.
fn clip(path: &Path) {
    common::run::ffmpeg_made(
        path,
        &["testsrc2=s=320x240:r=25:d=3", "sine=f=440:d=3"],
        &[
            "-c:v",
            "libx264",
            "-bf",
            "2",
            "-g",
            "25",
            "-c:a",
            "aac",
            "-shortest",
        ],
    );
}

/// Each decoded picture of `path` as framemd5 writes it (its time, size and digest where
/// `times`; else its digest alone, for a stream whose clock starts elsewhere).
fn pictures(path: &Path, times: bool) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-map", "0:v:0", "-f", "framemd5", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| match times {
            true => l.to_string(),
            false => l.rsplit(',').next().unwrap_or_default().trim().to_string(),
        })
        .collect()
}

#[test]
fn a_copy_to_a_file_holds_the_source_packets() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("copy-file");
    let (src, out) = (dir.join("src.mp4"), dir.join("copy.mp4"));
    clip(&src);
    let args = ["-i", src.to_str().unwrap(), "--headless", "--codec", "copy"];
    let run = framepipe(
        &[&args[..], &["-o", out.to_str().unwrap()]].concat(),
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    // It says what it writes, and decodes no picture past the first (its size) and those
    // the decoder held then (its delay), as `ffmpeg -c copy` decodes none: a handful of the
    // clip's 75.
    let said = stderr(&run);
    let copying = format!(
        "output: input 0: '{}' (its packets as they came)",
        out.display()
    );
    assert!(said.contains(&copying), "{said}");
    let captured: u64 = said
        .split("frames: ")
        .nth(1)
        .and_then(|t| t.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("the summary's frames");
    assert!(captured <= 8, "{captured} pictures decoded: {said}");
    assert_eq!(pictures(&out, true), pictures(&src, true));
    assert_eq!(packets(&out, "a"), packets(&src, "a"));
    assert_eq!(packets(&out, "v"), packets(&src, "v"));
    // Nothing is replaced without -y; with it, the copy is written again.
    let again = framepipe(
        &[&args[..], &["-o", out.to_str().unwrap()]].concat(),
        Duration::from_secs(60),
    );
    assert!(!again.status.success() && stderr(&again).contains("-y"));
    let mkv = dir.join("copy.mkv");
    let run = framepipe(
        &[&args[..], &["-o", mkv.to_str().unwrap(), "--no-audio"]].concat(),
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    assert_eq!(pictures(&mkv, false), pictures(&src, false));
    let json = common::probe::json(&mkv, &["-show_entries", "stream=codec_type"]);
    assert_eq!(json["streams"].as_array().map(Vec::len), Some(1), "{json}");
}

#[test]
fn a_copy_over_udp_sends_the_source_packets() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("copy-udp");
    let (src, got) = (dir.join("src.mp4"), dir.join("got.ts"));
    clip(&src);
    let port = free_port();
    let mut listener = Command::new("ffmpeg")
        .args(["-v", "error", "-y", "-i"])
        .arg(format!(
            "udp://127.0.0.1:{port}?timeout=4000000&fifo_size=1000000&overrun_nonfatal=1"
        ))
        .args(["-map", "0", "-c", "copy", "-f", "mpegts"])
        .arg(&got)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::run::wait_bound(port, "the udp listener");
    let url = format!("udp://127.0.0.1:{port}");
    let run = framepipe(
        &[
            "-i",
            src.to_str().unwrap(),
            "--headless",
            "--codec",
            "copy",
            "-o",
            &url,
        ],
        Duration::from_secs(60),
    );
    assert!(run.status.success(), "{}", stderr(&run));
    // The listener ends on its time-out once the sender stops.
    assert!(common::run::ends_within(
        &mut listener,
        Duration::from_secs(15)
    ));
    assert_eq!(pictures(&got, false), pictures(&src, false));
    assert_eq!(adts(&got), adts(&src), "the audio's AAC frames");
}

#[test]
fn what_a_copy_cannot_do_is_refused_in_one_line() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("copy-refused");
    let src = dir.join("src.mp4");
    clip(&src);
    let s = src.to_str().unwrap();
    let out = dir.join("o.mp4");
    let o = out.to_str().unwrap();
    let seq = dir.join("f-%03d.png");
    for (args, says) in [
        (
            vec!["-i", s, "-f", "gray", "-o", o],
            "the filter 'gray' changes its pictures",
        ),
        (vec!["-i", s, "--ss", "1", "-o", o], "can't cut at --ss"),
        (
            vec!["-i", s, "--crf", "20", "-o", o],
            "encodes nothing: leave out --crf",
        ),
        (
            vec!["-i", "pattern", "-o", o],
            "input 0 (pattern) gives pictures, not packets",
        ),
        (
            vec!["-i", s, "-o", seq.to_str().unwrap()],
            "is an image sequence, which takes pictures",
        ),
        (
            vec!["-i", s, "-i", s, "-o", o],
            "would hold the mosaic of several inputs",
        ),
    ] {
        let run = framepipe(
            &[&["--headless", "--codec", "copy"][..], &args].concat(),
            Duration::from_secs(20),
        );
        let err = stderr(&run);
        assert_eq!(run.status.code(), Some(1), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(!out.exists());
    }
}
