//! Every `scripts/run.sh` example in README.md runs as written: each is taken from the
//! README, run headless (a window example gets `--headless`, an endless one `--frames`) in
//! a folder holding the media it names (`clip.mp4`, `photo.jpg`, made here), and must exit 0.
//! Examples that need hardware or a network this machine lacks (a camera index, an rtsp://
//! URL) are reported as not run.
#![cfg(feature = "opencv")]

mod common;

use std::time::Duration;

use common::run::{framepipe_in, make_clip, TempDir};

/// The README's `scripts/run.sh` example lines, split into arguments like a shell would
/// (single quotes only, which is what the README uses), comments dropped.
fn examples() -> Vec<Vec<String>> {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"))
        .expect("README.md");
    readme
        .lines()
        .filter(|l| l.starts_with("scripts/run.sh"))
        .map(|l| {
            let code = l.split(" # ").next().unwrap_or(l);
            let mut args = Vec::new();
            let mut cur = String::new();
            let (mut quoted, mut any) = (false, false);
            for c in code.trim_start_matches("scripts/run.sh").chars() {
                match c {
                    '\'' => {
                        quoted = !quoted;
                        any = true;
                    }
                    ' ' if !quoted => {
                        if any {
                            args.push(std::mem::take(&mut cur));
                            any = false;
                        }
                    }
                    c => {
                        cur.push(c);
                        any = true;
                    }
                }
            }
            if any {
                args.push(cur);
            }
            args
        })
        .collect()
}

fn run(dir: &TempDir, args: &[String]) -> common::run::Run {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    framepipe_in(dir.path(), &args, Duration::from_secs(120))
}

#[test]
fn every_run_example_in_the_readme_runs() {
    let dir = TempDir::new("readme");
    // The media the examples name, made by framepipe itself.
    make_clip(dir.join("clip.mp4").to_str().unwrap(), "640x360", "20");
    make_clip(dir.join("photo%d.png").to_str().unwrap(), "320x240", "1");
    let png = opencv::imgcodecs::imread(
        dir.join("photo0.png").to_str().unwrap(),
        opencv::imgcodecs::IMREAD_COLOR,
    )
    .unwrap();
    let jpg = dir.join("photo.jpg").display().to_string();
    assert!(opencv::imgcodecs::imwrite(&jpg, &png, &opencv::core::Vector::new()).unwrap());

    let examples = examples();
    assert!(
        examples.len() >= 8,
        "README examples not found: {examples:?}"
    );
    let (mut ran, mut skipped) = (0, Vec::new());
    for mut args in examples {
        let input = args
            .iter()
            .position(|a| a == "--input")
            .and_then(|i| args.get(i + 1))
            .cloned();
        if let Some(i) = input.as_deref() {
            if i.parse::<u32>().is_ok() || i.contains("://") {
                skipped.push(args.join(" "));
                continue; // a camera or a network stream: not on this machine
            }
        }
        if !args.iter().any(|a| a == "--headless") {
            args.push("--headless".into());
        }
        if !args.iter().any(|a| a == "--frames") {
            args.extend(["--frames".into(), "5".into()]);
        }
        // The examples' kernel files are the repository's.
        let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/");
        let user_kernel = args.iter().any(|a| a.contains("kernel:"));
        for a in &mut args {
            *a = a.replace("kernel:examples/", &format!("kernel:{examples}"));
        }
        let out = run(&dir, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        if user_kernel && framepipe::backend::device::probe().is_err() {
            // Without CUDA a kernel file is refused, as documented, with the reason.
            assert_eq!(out.status.code(), Some(1), "{args:?}:\n{err}");
            assert!(err.contains("needs the CUDA backend"), "{args:?}:\n{err}");
            skipped.push(format!("{} (refused: no CUDA)", args.join(" ")));
            continue;
        }
        assert!(
            out.status.success(),
            "README example {args:?} failed:\n{err}"
        );
        ran += 1;
    }
    println!("README: {ran} examples ran; not run here (camera, network, or a kernel without CUDA): {skipped:?}");
    assert!(
        dir.join("frames/00000.png").exists(),
        "the frames/ example wrote nothing"
    );
}
