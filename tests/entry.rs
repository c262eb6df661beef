#![cfg(feature = "opencv")]
//! `scripts/run.sh`'s entry: the build without OpenCV, told where the full build is
//! (`FRAMEPIPE_OPENCV_BUILD`), runs what needs none of OpenCV itself (it starts in a fifth of
//! the time) and hands the rest to the full build before anything opens
//! (`app::full_build`). The build without OpenCV is the one `scripts/test.sh` makes for
//! `ffmpeg_only::` (target/ffonly).

use std::path::PathBuf;
use std::process::Command;

use crate::common::run::{bin, TempDir};

/// The build without OpenCV, as `scripts/run.sh` and `scripts/test.sh` make it.
fn headless() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/ffonly/release/framepipe");
    assert!(
        path.exists(),
        "{}: scripts/test.sh builds it (cargo test --release --no-default-features --features ffmpeg --target-dir target/ffonly)",
        path.display()
    );
    path
}

#[test]
fn the_entry_runs_what_needs_no_opencv_and_hands_over_the_rest() {
    let dir = TempDir::new("entry");
    let run = |build: &str, args: &[&str]| {
        let out = Command::new(headless())
            .current_dir(dir.path())
            .env("FRAMEPIPE_OPENCV_BUILD", build)
            .args(["--headless", "--backend", "cpu", "-v"])
            .args(args)
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&out.stderr).to_string();
        (out, said)
    };
    // A pattern to standard output needs no OpenCV: it stays.
    let (out, said) = run(
        &bin(),
        &[
            "--input",
            "pattern:64x48:bgr:30",
            "--frames",
            "2",
            "--output-format",
            "bgr24",
            "-o",
            "-",
        ],
    );
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("handing the run"), "{said}");
    assert!(
        said.contains("built-in reference"),
        "ran in the build without OpenCV: {said}"
    );
    assert_eq!(out.stdout.len(), 2 * 64 * 48 * 3, "{said}");
    // A still image needs OpenCV's imgcodecs: handed to the full build, which writes it.
    let made = Command::new("ffmpeg")
        .current_dir(dir.path())
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=s=160x120",
            "-frames:v",
            "1",
            "still.png",
        ])
        .status()
        .unwrap();
    assert!(made.success());
    let (out, said) = run(
        &bin(),
        &["--input", "still.png", "--frames", "3", "-o", "still.mp4"],
    );
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("handing the run to the OpenCV build"),
        "{said}"
    );
    assert!(said.contains("3 written"), "{said}");
    // A full build that isn't there: said once, and the run goes on in this build, which
    // refuses a still image in one line.
    let (out, said) = run(
        "/nonexistent/framepipe",
        &["--input", "still.png", "--frames", "3", "-o", "again.mp4"],
    );
    assert!(said.contains("going on without OpenCV"), "{said}");
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("framepipe: error:"), "{said}");
}
