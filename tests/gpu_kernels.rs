//! User kernels on the GPU (ignored without CUDA; `scripts/gpu.sh run` runs them there):
//! the examples written against framepipe.cuh equal the built-in filters bit for bit for
//! every band count and frames in flight; a radius declared too small is caught by
//! `check-kernel` and at start; a reload swaps kernels exactly at a frame boundary and a
//! broken file keeps the last good kernel; a faulting kernel ends the run with its name and
//! a finalized output.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::run::{framepipe, stderr, TempDir};
use common::{cuda_or_skip, reference, run_case_against, Case};
use framepipe::backend::{check, BackendKind, IssueOrder, StreamLayout};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pipeline;
use framepipe::pixel::Formats;
use framepipe::plan::{Counts, Plan};
use framepipe::reload::Reloader;
use framepipe::sink::{Flow, Sink};
use framepipe::source::pattern::Pattern;
use framepipe::stop::Stop;

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_user_kernels_equal_the_builtin_filters() {
    if !cuda_or_skip("cuda_user_kernels_equal_the_builtin_filters") {
        return;
    }
    let pairs = [
        ("kernel:examples/invert.cu", "invert"),
        ("kernel:examples/box3.cu,radius=1", "blur:3"),
        (
            "gray,kernel:examples/box3.cu,radius=1,kernel:examples/invert.cu,sobel",
            "gray,blur:3,invert,sobel",
        ),
    ];
    let sizes = [
        FrameSize::new(33, 17),
        FrameSize::new(641, 479),
        FrameSize::new(1920, 1080),
    ];
    // Band counts that cut each size unevenly, and one band alone (every count from 2 to 16
    // is `check::BANDS`'s job: `cuda_a_radius_declared_too_small_is_caught`).
    let band_counts = [1, 2, 3, 7, 16];
    let mut runs = 0;
    for (chain, builtin) in pairs {
        for size in sizes {
            for bands in band_counts {
                for in_flight in 1..=3 {
                    let case = Case {
                        kind: BackendKind::Cuda,
                        chain,
                        size,
                        bands,
                        busy_bands: [bands, 1, 3][in_flight - 1],
                        in_flight,
                        pageable: false,
                        issue: IssueOrder::Depth,
                        streams: StreamLayout::PerStage,
                        graphs: in_flight != 2,
                        frames: 3,
                        trace_frames: 0,
                    };
                    let (seen, bad, max, _) = run_case_against(&case, builtin);
                    assert_eq!(seen, 3);
                    assert_eq!(
                        bad, 0,
                        "{chain} vs {builtin} at {size}, {bands} bands, {in_flight} in flight: max diff {max}"
                    );
                    runs += 1;
                }
            }
        }
    }
    println!(
        "user kernels == built-in filters: {runs} configurations x 3 frames, all bit-identical"
    );
}

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_a_radius_declared_too_small_is_caught() {
    if !cuda_or_skip("cuda_a_radius_declared_too_small_is_caught") {
        return;
    }
    let sizes = check::SIZES;
    let wrong: Chain = "kernel:examples/box3.cu".parse().unwrap();
    let m = check::band_invariance(&wrong, &sizes, &check::BANDS, 0)
        .unwrap()
        .expect("radius 0 is not enough for a 3x3 box");
    assert_eq!(m.suggested_radius, Some(1), "{m:?}");
    assert!(m.from_edge <= 1, "{m:?}");
    println!("check: {}", check::explain(&wrong, &m));
    let right: Chain = "kernel:examples/box3.cu,radius=1".parse().unwrap();
    assert_eq!(
        check::band_invariance(&right, &sizes, &check::BANDS, 0).unwrap(),
        None
    );

    // The command.
    let out = framepipe(
        &["check-kernel", "examples/box3.cu"],
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("not band-invariant") && err.contains("radius=1"),
        "{err}"
    );
    let out = framepipe(
        &["check-kernel", "examples/box3.cu", "--radius", "1"],
        Duration::from_secs(120),
    );
    assert!(out.status.success(), "{}", stderr(&out));
    println!(
        "check-kernel --radius 1: {}",
        String::from_utf8_lossy(&out.stdout).trim()
    );

    // At the start of a run: refused before any frame, nothing written.
    let dir = TempDir::new("radius");
    let pattern = dir.join("%05d.ppm").display().to_string();
    let out = framepipe(
        &[
            "--input",
            "pattern",
            "--size",
            "640x360",
            "--frames",
            "10",
            "--headless",
            "--backend",
            "cuda",
            "--bands",
            "4",
            "--filter",
            "kernel:examples/box3.cu",
            "--output",
            &pattern,
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("not band-invariant"), "{err}");
    let written = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(written, 0, "frames were written before the check");
}

const COPY_KERNEL: &str = "#include \"framepipe.cuh\"\n\
FP_KERNEL k(fp_band band) {\n\
    FP_PIXEL(band, x, y);\n\
    fp_bgr v = fp_get(band, x, y);\n\
    fp_put(band, x, y, v);\n\
}\n";

/// Checks each frame against invert, then copy; at frame `save_at` it saves the copy
/// kernel over the file, at `break_at` a broken version.
struct ReloadSink {
    file: std::path::PathBuf,
    size: FrameSize,
    seen: u64,
    switched_at: Option<u64>,
    mismatches: u64,
}

impl Sink for ReloadSink {
    fn verb(&self) -> &'static str {
        "checked"
    }
    fn describe(&self) -> String {
        "reload check".into()
    }
    fn consume(&mut self, frame: &framepipe::desc::Frame) -> anyhow::Result<Flow> {
        let (frame, size) = (frame.bytes, frame.size());
        let seq = self.seen;
        self.seen += 1;
        let want = |c: &str| reference(&c.parse().unwrap(), size, seq);
        match self.switched_at {
            None if frame == want("invert").as_slice() => {}
            None if frame == want("copy").as_slice() => self.switched_at = Some(seq),
            Some(_) if frame == want("copy").as_slice() => {}
            _ => self.mismatches += 1,
        }
        if seq == 20 {
            std::fs::write(&self.file, COPY_KERNEL)?;
        }
        if seq == 150 {
            // Line 4 loses its semicolon.
            let broken = COPY_KERNEL.replacen("fp_get(band, x, y);", "fp_get(band, x, y)", 1);
            assert_ne!(broken, COPY_KERNEL);
            std::fs::write(&self.file, broken)?;
        }
        assert_eq!(size, self.size);
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_a_reload_swaps_kernels_at_a_frame_boundary() {
    if !cuda_or_skip("cuda_a_reload_swaps_kernels_at_a_frame_boundary") {
        return;
    }
    let dir = TempDir::new("gpu-reload");
    let file = dir.join("k.cu");
    std::fs::write(
        &file,
        COPY_KERNEL.replace(
            "fp_put(band, x, y, v)",
            "fp_put(band, x, y, fp_make(255 - v.b, 255 - v.g, 255 - v.r))",
        ),
    )
    .unwrap();
    let size = FrameSize::new(640, 360);
    let chain: Chain = format!("kernel:{}", file.display()).parse().unwrap();
    let mut plan = Plan::new(
        BackendKind::Cuda,
        size,
        Formats::BGR,
        chain.clone(),
        Counts::spare(4, 3),
    )
    .unwrap();
    plan.ring = 6;
    plan.frames = Some(300);
    let reloader = Arc::new(Reloader::new(
        chain,
        Box::new(move |c: &Chain| Ok(check::before_run(c, size, &[4, 1], 0)?)),
        true,
    ));
    let opts = plan.options(Some(reloader.clone()));
    let backend = plan.make_backend().unwrap();
    let mut sink = ReloadSink {
        file: file.clone(),
        size,
        seen: 0,
        switched_at: None,
        mismatches: 0,
    };
    // 100 frames a second: the saves at frames 20 and 150 land well inside the run.
    let summary = pipeline::run(
        Box::new(Pattern::new(size, 100.0)),
        backend,
        &mut sink,
        &opts,
        &Stop::new(),
    )
    .unwrap();
    println!("{}", summary.render());
    assert_eq!(sink.seen, 300);
    assert_eq!(
        sink.mismatches, 0,
        "a frame was neither invert nor copy, or switched back"
    );
    let switched = sink.switched_at.expect("the reload never took effect");
    assert!(switched > 20, "{switched}");
    assert_eq!(
        summary.process.controls,
        [format!(
            "filter kernel:{} from frame {switched}",
            file.display()
        )]
    );
    let log = reloader.log();
    assert_eq!(log.len(), 2, "{log:?}");
    assert!(log[0].error.is_none(), "{log:?}");
    let error = log[1].error.as_deref().expect("the broken file failed");
    assert!(
        error.contains("k.cu(") && error.contains("error"),
        "{error}"
    );
    println!(
        "reload: swapped at frame {switched} (the save was at frame 20); the broken save kept the copy kernel running:\n{error}"
    );
}

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_a_faulting_kernel_ends_the_run_with_its_name() {
    if !cuda_or_skip("cuda_a_faulting_kernel_ends_the_run_with_its_name") {
        return;
    }
    let dir = TempDir::new("fault");
    let kernel = dir.join("fault.cu");
    std::fs::write(
        &kernel,
        "#include \"framepipe.cuh\"\n\
         __device__ unsigned launches;\n\
         // Copies, until `after` launches of this module; then writes to address 0.\n\
         FP_KERNEL fault_later(fp_band band, int after) {\n\
             FP_PIXEL(band, x, y);\n\
             if (x == 0 && y == band.row0 && atomicAdd(&launches, 1u) >= (unsigned)after)\n\
                 *(volatile int*)0 = 1;\n\
             fp_put(band, x, y, fp_get(band, x, y));\n\
         }\n",
    )
    .unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let pattern = dir.join("out/%05d.ppm").display().to_string();
    let filter = format!("kernel:{},after=40", kernel.display());
    let out = framepipe(
        &[
            "--input",
            "pattern",
            "--size",
            "640x360",
            "--fps",
            "0",
            "--frames",
            "500",
            "--headless",
            "--backend",
            "cuda",
            "--bands",
            "1",
            "--busy-bands",
            "1",
            "--filter",
            &filter,
            "--output",
            &pattern,
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    println!("{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(err.contains("'fault_later'"), "{err}");
    let [_, _, written, _] = out.counts().expect("a summary");
    let files: Vec<_> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(files.len() as u64, written, "{err}");
    assert!(written > 0 && written <= 40, "{written}");
    let full = "P6\n640 360\n255\n".len() as u64 + 640 * 360 * 3;
    for f in &files {
        assert_eq!(
            f.metadata().unwrap().len(),
            full,
            "{:?} is not whole",
            f.path()
        );
    }
    println!("fault: exit 1 after {written} frames, each written whole");

    // A kernel that faults on its first launch is refused by the check, before any frame.
    std::fs::remove_dir_all(dir.join("out")).unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let filter = format!("kernel:{},after=0", kernel.display());
    let out = framepipe(
        &[
            "--input",
            "pattern",
            "--size",
            "640x360",
            "--frames",
            "10",
            "--headless",
            "--backend",
            "cuda",
            "--filter",
            &filter,
            "--output",
            &pattern,
        ],
        Duration::from_secs(60),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(std::fs::read_dir(dir.join("out")).unwrap().count(), 0);
    println!(
        "fault at the first launch: {}",
        err.lines().last().unwrap_or("")
    );
}
