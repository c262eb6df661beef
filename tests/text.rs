//! Text on the picture (`text:`, `timestamp`): what is drawn reads back as written (OCR by
//! tesseract of the box, cut from the written frame), and a frame's time put in is the
//! frame's own. (That both backends and the reference draw the same bytes is checked with
//! the other filters: `common::CHAINS`.)
#![cfg(feature = "opencv")]

use std::process::Command;
use std::time::Duration;

use crate::common::run::{framepipe_in, require, stderr, TempDir};

/// Runs framepipe in `dir` with `args`, asserting it succeeds.
fn run(dir: &TempDir, args: &[&str]) {
    let out = framepipe_in(dir.path(), args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn burned_in_text_reads_back_as_written() {
    require(&["tesseract", "convert"]);
    let dir = TempDir::new("text-ocr");
    run(
        &dir,
        &[
            "-i",
            "pattern",
            "--size",
            "960x540",
            "--frames",
            "1",
            "--headless",
            "--filter",
            "text:Lobby camera 42,x=16,y=40,size=32",
            "-o",
            "shot/%03d.png",
        ],
    );
    // The box (the text and 2 font pixels around it), enlarged and made black and white,
    // as OCR likes it.
    let crop = dir.join("crop.png");
    let made = Command::new("convert")
        .arg(dir.join("shot/000.png"))
        .args([
            "-crop",
            "600x60+4+28",
            "-scale",
            "200%",
            "-colorspace",
            "gray",
        ])
        .args(["-threshold", "50%"])
        .arg(&crop)
        .status()
        .unwrap();
    assert!(made.success());
    let read = Command::new("tesseract")
        .arg(&crop)
        .args(["-", "--psm", "7"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&read.stdout).trim().to_string();
    assert_eq!(text, "Lobby camera 42");
}

#[test]
fn a_timestamp_shows_the_frames_own_time() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("text-pts");
    crate::record::camera_clip(&dir.join("clip.mp4"), 2);
    let style = "x=-8,y=-8,size=16,color=yellow";
    let stamped = format!("timestamp:pts,{style}");
    run(
        &dir,
        &[
            "-i",
            "clip.mp4",
            "--headless",
            "--filter",
            &stamped,
            "-o",
            "pts/%03d.png",
        ],
    );
    // Frame 45 of a 30 fps file is at 1.5 s: the same picture as that text written out.
    let fixed = format!("text:1.500,{style}");
    run(
        &dir,
        &[
            "-i",
            "clip.mp4",
            "--headless",
            "--filter",
            &fixed,
            "-o",
            "fixed/%03d.png",
        ],
    );
    let read = |p: &str| std::fs::read(dir.join(p)).unwrap();
    assert_eq!(read("pts/045.png"), read("fixed/045.png"));
    assert_ne!(read("pts/044.png"), read("fixed/044.png"));
}
