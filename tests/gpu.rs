//! CUDA backend against the plain-Rust reference, through the real pipeline: every filter,
//! several sizes (odd ones included), band counts and frames in flight, page-locked and
//! pageable. Bit-exact is required. Ignored by a plain `cargo test` (so a machine without a
//! GPU reports them as ignored, not passed); `scripts/gpu.sh run` runs them on the GPU
//! machine with `--include-ignored`.

use crate::common;

use common::{cuda_or_skip, run_case, run_case_in, Case, CHAINS};
use framepipe::backend::{device, BackendKind, IssueOrder, StreamLayout};
use framepipe::frame::FrameSize;
use framepipe::pixel::{Formats, PixelFormat};
use framepipe::plan::{Counts, Plan};

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_matches_reference_bit_for_bit() {
    if !cuda_or_skip("cuda_matches_reference_bit_for_bit") {
        return;
    }
    let full: &[&str] = CHAINS;
    let hd: &[&str] = &[
        "copy",
        "gray",
        "gain:0.5,0.5",
        "gray,gauss:2,sobel",
        "sharpen:1.5",
        "median3",
        "blur:9",
    ];
    let big: &[&str] = &["gray,gain:1.3,-7,invert", "gauss:2"];
    let plan: [(FrameSize, &[&str], &[usize]); 4] = [
        (FrameSize::new(33, 17), full, &[1, 2, 3, 5, 8, 16]),
        (FrameSize::new(641, 479), full, &[1, 3, 8, 16]),
        (FrameSize::new(1920, 1080), hd, &[1, 4, 8]),
        (FrameSize::new(3840, 2160), big, &[8, 16]),
    ];
    let mut runs = 0;
    for (size, chains, band_counts) in plan {
        for chain in chains {
            for &bands in band_counts {
                // Frame 0 is timed, so issued call by call; later frames that find the GPU
                // idle replay graphs where `graphs` is set.
                for (in_flight, pageable, issue, streams, graphs) in [
                    (1, false, IssueOrder::Depth, StreamLayout::PerStage, true),
                    (3, false, IssueOrder::Breadth, StreamLayout::PerStage, true),
                    (2, false, IssueOrder::Depth, StreamLayout::PerBand, true),
                    (2, true, IssueOrder::Depth, StreamLayout::PerStage, false),
                ] {
                    let case = Case {
                        kind: BackendKind::Cuda,
                        chain,
                        size,
                        bands,
                        // Frames behind others use another cut: both plans are checked.
                        busy_bands: [1, bands, 3.min(size.height)][in_flight % 3],
                        in_flight,
                        pageable,
                        issue,
                        streams,
                        graphs,
                        frames: 4,
                        trace_frames: 0,
                    };
                    assert_bit_identical(&case);
                    runs += 1;
                }
            }
        }
    }
    println!("cuda == reference: {runs} configurations x 4 frames, all bit-identical");
}

/// Runs `case` (4 frames) and asserts every frame equals the reference bit for bit.
fn assert_bit_identical(case: &Case) {
    let (seen, bad, max) = run_case(case);
    assert_eq!(seen, 4);
    let Case {
        chain,
        size,
        bands,
        in_flight,
        pageable,
        issue,
        streams,
        graphs,
        ..
    } = case;
    assert_eq!(
        bad, 0,
        "{chain} at {size}, {bands} bands, {in_flight} in flight, pageable={pageable}, {issue:?}, {streams}, graphs={graphs}: {bad} frames differ, max diff {max}"
    );
}

/// Chains that change the size (`common::GEOMETRY_CHAINS`, and larger ones at 1080p): the
/// part before the first geometry filter in the bands, the rest on the whole frame
/// (`backend::reshape`), at every band count and stream layout, bit-identical to the
/// reference; and between pixel formats.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_geometry_matches_reference_bit_for_bit() {
    if !cuda_or_skip("cuda_geometry_matches_reference_bit_for_bit") {
        return;
    }
    let hd: &[&str] = &[
        "scale:1280:720",
        "scale:640:-2:area",
        "gauss:2,scale:1000:700,sobel",
        "transpose:clock,gray",
        "crop:640:360,hflip",
        "pad:2000:1200:40:60:102030",
        "vflip,text:{frame},x=-1,y=-1,size=24",
    ];
    let plan: [(FrameSize, &[&str], &[usize]); 3] = [
        (
            FrameSize::new(33, 17),
            common::GEOMETRY_CHAINS,
            &[1, 2, 3, 5, 8],
        ),
        (FrameSize::new(41, 29), common::GEOMETRY_CHAINS, &[1, 4, 16]),
        (FrameSize::new(1920, 1080), hd, &[1, 4, 8]),
    ];
    let mut runs = 0;
    for (size, chains, band_counts) in plan {
        for chain in chains {
            for &bands in band_counts {
                for (in_flight, issue, streams) in [
                    (1, IssueOrder::Depth, StreamLayout::PerStage),
                    (3, IssueOrder::Breadth, StreamLayout::PerStage),
                    (2, IssueOrder::Depth, StreamLayout::PerBand),
                ] {
                    let case = Case {
                        kind: BackendKind::Cuda,
                        chain,
                        size,
                        bands,
                        busy_bands: [1, bands, 3.min(size.height)][in_flight % 3],
                        in_flight,
                        pageable: false,
                        issue,
                        streams,
                        graphs: true,
                        frames: 4,
                        trace_frames: 0,
                    };
                    assert_bit_identical(&case);
                    runs += 1;
                }
            }
        }
    }
    for formats in ["i420:i420", "nv12:bgr", "bgr:nv12", "i420:gray"] {
        let formats: Formats = formats.parse().unwrap();
        for chain in ["scale:1280:720", "transpose:cclock,blur:3", "crop:642:360"] {
            for bands in [1, 5] {
                check_formats(chain, formats, FrameSize::new(1920, 1080), (bands, 2));
                runs += 1;
            }
        }
    }
    println!("cuda geometry == reference: {runs} configurations x 4 frames, all bit-identical");
}

/// Geometry and text between one YUV format run on the frame's planes on the device
/// (`backend::reshape`, `pixel::planes`): bit-identical to the CPU backend's planes (which
/// equal ffmpeg's filters: `yuv_geometry`), for I420, NV12 and gray, every band count.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_geometry_on_planes_matches_the_cpu_bit_for_bit() {
    if !cuda_or_skip("cuda_geometry_on_planes_matches_the_cpu_bit_for_bit") {
        return;
    }
    let chains = [
        "crop:320:200:101:61",
        "pad:2000:1200:41:60:102030",
        "hflip,vflip",
        "transpose:clock",
        "transpose:cclock_flip",
        "scale:1280:720",
        "scale:640:-2:area",
        "scale:960:540,crop:480:270,text:{frame},x=-1,y=-1,size=24,box=1",
        "text:Hi,x=7,y=9,size=16,box=1",
    ];
    let mut runs = 0;
    for formats in ["i420:i420", "nv12:nv12", "gray:gray"] {
        let formats: Formats = formats.parse().unwrap();
        for chain in chains {
            for (bands, in_flight) in [(1, 1), (5, 2), (8, 3)] {
                check_formats(
                    chain,
                    formats,
                    FrameSize::new(1920, 1080),
                    (bands, in_flight),
                );
                runs += 1;
            }
        }
        check_formats(
            "crop:20:10:3:5,transpose:clock",
            formats,
            FrameSize::new(66, 38),
            (3, 2),
        );
        runs += 1;
    }
    println!("cuda geometry on planes == cpu: {runs} configurations x 4 frames, all bit-identical");
}

/// Runs 4 frames of `chain` in `formats` at `size`, cut into `bands` with `in_flight` frames
/// in flight, on the CUDA backend, and asserts they equal the reference bit for bit.
fn check_formats(
    chain: &str,
    formats: Formats,
    size: FrameSize,
    (bands, in_flight): (usize, usize),
) {
    let case = Case::cuda(chain, size, (bands, in_flight));
    let (seen, bad, max, _) = run_case_in(&case, chain, formats);
    assert_eq!(seen, 4);
    assert_eq!(
        bad, 0,
        "{chain}, {formats} at {size}, {bands} bands, {in_flight} in flight: {bad} frames differ, max diff {max}"
    );
}

/// `copy` between I420 and NV12 (NVDEC's NV12 written as I420): the samples move, never
/// through BGR, at every band count (`Formats::repacked`).
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_repacks_420_layouts_bit_for_bit() {
    if !cuda_or_skip("cuda_repacks_420_layouts_bit_for_bit") {
        return;
    }
    for formats in ["nv12:i420", "i420:nv12"] {
        let formats: Formats = formats.parse().unwrap();
        for size in [FrameSize::new(66, 38), FrameSize::new(1920, 1080)] {
            for bands in 1..=16 {
                check_formats("copy", formats, size, (bands, bands % 3 + 1));
            }
        }
        println!("copy, {formats}: bit-identical to the repacked reference, bands 1-16");
    }
}

/// Frames carried in their own pixel format: every input format the sources give against
/// every format framepipe writes, bands 1–16 and 1–3 frames in flight, bit-identical to the
/// reference (the input converted to BGR as OpenCV 4.6's `cvtColor` does, the chain, the
/// result converted back); `copy` between one format passes the planes untouched.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_formats_match_reference_bit_for_bit() {
    if !cuda_or_skip("cuda_formats_match_reference_bit_for_bit") {
        return;
    }
    let inputs = PixelFormat::ALL;
    let outputs: Vec<PixelFormat> = inputs.into_iter().filter(|f| f.writable()).collect();
    let every_pair: Vec<Formats> = inputs
        .iter()
        .flat_map(|&input| outputs.iter().map(move |&output| Formats { input, output }))
        .collect();
    let some_pairs: Vec<Formats> = ["i420", "nv12:bgr", "yuyv:nv12", "gray:i420"]
        .iter()
        .map(|f| f.parse().unwrap())
        .collect();
    // Bands 1–16, each with 1, 2 or 3 frames in flight in turn.
    let every_cut: Vec<(usize, usize)> = (1..=16).map(|b| (b, b % 3 + 1)).collect();
    // (size, format pairs, chains, (bands, frames in flight))
    type Sweep<'a> = (FrameSize, &'a [Formats], &'a [&'a str], Vec<(usize, usize)>);
    let same: Vec<Formats> = outputs
        .iter()
        .map(|&f| Formats {
            input: f,
            output: f,
        })
        .collect();
    let plan: [Sweep; 5] = [
        (
            FrameSize::new(66, 38),
            &every_pair,
            &["gray,blur:3,invert"],
            every_cut.clone(),
        ),
        // `copy` between one format: the planes pass untouched.
        (FrameSize::new(66, 38), &same, &["copy"], every_cut),
        (
            FrameSize::new(1920, 1080),
            &every_pair,
            &["invert"],
            vec![(1, 1), (8, 3)],
        ),
        (
            FrameSize::new(1920, 1080),
            &some_pairs,
            &["copy", "gauss:2"],
            vec![(1, 2), (16, 3)],
        ),
        (
            FrameSize::new(3840, 2160),
            &some_pairs,
            &["invert"],
            vec![(8, 2)],
        ),
    ];
    let mut runs = 0;
    for (size, pairs, chains, cuts) in &plan {
        let started = std::time::Instant::now();
        for &formats in *pairs {
            for chain in *chains {
                for &cut in cuts {
                    check_formats(chain, formats, *size, cut);
                    runs += 1;
                }
            }
        }
        println!(
            "{size}: {} format pairs x {chains:?} x {} cuts bit-identical ({:.1} s)",
            pairs.len(),
            cuts.len(),
            started.elapsed().as_secs_f64()
        );
    }
    println!(
        "cuda formats == reference: {runs} configurations ({} input x {} output formats) x 4 frames, all bit-identical",
        inputs.len(),
        outputs.len()
    );
}

/// A traced CUDA run: every band's H2D, kernels and D2H, one track per stream, spans in
/// order and never overlapping on one stream.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_trace_has_a_track_per_stream() {
    if !cuda_or_skip("cuda_trace_has_a_track_per_stream") {
        return;
    }
    for (streams, pageable) in [
        (StreamLayout::PerStage, false),
        (StreamLayout::PerStage, true),
        (StreamLayout::PerBand, false),
    ] {
        let case = Case {
            kind: BackendKind::Cuda,
            chain: "gray",
            size: FrameSize::new(1920, 1080),
            bands: 4,
            busy_bands: 4,
            in_flight: 4,
            pageable,
            issue: IssueOrder::Depth,
            streams,
            graphs: true,
            frames: 12,
            trace_frames: 12,
        };
        let (_, bad, _, trace) = common::run_case_traced(&case);
        assert_eq!(bad, 0);
        let trace = trace.expect("trace");
        let gpu: Vec<_> = trace.spans.iter().filter(|s| s.band.is_some()).collect();
        assert_eq!(
            gpu.len(),
            12 * 4 * 3,
            "{streams}: H2D, kernels, D2H per band per frame"
        );
        let mut tracks: Vec<framepipe::trace::Track> = gpu.iter().map(|s| s.track).collect();
        tracks.sort_unstable();
        tracks.dedup();
        for t in &tracks {
            let mut on: Vec<_> = gpu.iter().filter(|s| s.track == *t).collect();
            on.sort_by_key(|s| s.start);
            for w in on.windows(2) {
                assert!(
                    w[0].end <= w[1].start + std::time::Duration::from_micros(2),
                    "{streams}: spans overlap on track {t:?}"
                );
            }
        }
        let o = trace.overlap().unwrap();
        println!(
            "trace {streams} pageable={pageable}: {} tracks, {:.3} ms for 12 frames, uploads {:.0}% busy, downloads {:.0}%, both at once {:.0}%",
            tracks.len(),
            o.window_ms,
            100.0 * o.h2d_busy,
            100.0 * o.d2h_busy,
            100.0 * o.both
        );
    }
}

/// Filter, page-locking and band changes on the running CUDA backend: every frame equals
/// the reference of the chain in force.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_controls_switch_between_frames() {
    if !cuda_or_skip("cuda_controls_switch_between_frames") {
        return;
    }
    let sink = common::run_with_controls(BackendKind::Cuda);
    assert_eq!(sink.mismatches, 0);
    assert_eq!(sink.switched_at.len(), 2, "{:?}", sink.switched_at);
    println!(
        "cuda controls: chain switches at frames {:?}, 40 frames all equal to the reference",
        sink.switched_at
    );
}

/// Resident host memory of this process, in MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kib| kib / 1024)
}

/// Soak (not in CI; `scripts/gpu.sh soak` runs it): 4K frames through the CUDA backend for
/// FRAMEPIPE_SOAK_SECS (default 540) while the filter chain cycles through every preset and
/// page-locking toggles, as the window's keys do. Host memory, device memory and the
/// number of page-locked ranges must not grow after the first minute.
#[test]
#[ignore = "a soak of minutes: scripts/gpu.sh soak"]
fn cuda_soak_holds_memory_and_registrations_flat() {
    use framepipe::backend::Control;
    use framepipe::filter::{Chain, PRESETS};
    use framepipe::sink::{Flow, Sink};
    use framepipe::source::pattern::Pattern;
    use framepipe::stop::Stop;
    use std::time::{Duration, Instant};

    if !cuda_or_skip("cuda_soak_holds_memory_and_registrations_flat") {
        return;
    }
    let secs: u64 = std::env::var("FRAMEPIPE_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(540);
    struct Cycle {
        n: u64,
        pageable: bool,
    }
    impl Sink for Cycle {
        fn verb(&self) -> &'static str {
            "consumed"
        }
        fn describe(&self) -> String {
            "cycling controls".into()
        }
        fn consume(&mut self, _frame: &framepipe::desc::Frame) -> anyhow::Result<Flow> {
            self.n += 1;
            if self.n.is_multiple_of(500) {
                self.pageable = !self.pageable;
                return Ok(Flow::Control(Control::Pageable(self.pageable)));
            }
            if self.n.is_multiple_of(120) {
                let chain: Chain = PRESETS[(self.n / 120) as usize % PRESETS.len()]
                    .parse()
                    .map_err(anyhow::Error::msg)?;
                return Ok(Flow::Control(Control::Chain(chain)));
            }
            Ok(Flow::Continue)
        }
        fn finish(&mut self) -> anyhow::Result<()> {
            Ok(())
        }
    }
    let size = FrameSize::new(3840, 2160);
    let first: Chain = "copy".parse().unwrap();
    // A chain change rebuilds the plans for the new chain's radius (as the window's keys do).
    let counts = Counts {
        busy_bands: 1,
        ..Counts::spare(8, 4)
    };
    let plan = Plan::new(BackendKind::Cuda, size, Formats::BGR, first, counts).unwrap();
    let stop = Stop::new();
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let ctx = cudarc::driver::CudaContext::new(0).unwrap();
            let start = Instant::now();
            let mut samples = Vec::new();
            while !stop.sleep_until(start + Duration::from_secs(30 * (samples.len() as u64 + 1))) {
                let (free, _) = ctx.mem_get_info().unwrap();
                let s = (
                    start.elapsed().as_secs(),
                    rss_mib(),
                    (free >> 20) as u64,
                    device::live_registrations(),
                );
                println!(
                    "soak t={:>4} s  host RSS {:>5} MiB  device free {:>6} MiB  page-locked ranges {}",
                    s.0, s.1, s.2, s.3
                );
                samples.push(s);
                if start.elapsed() >= Duration::from_secs(secs) {
                    stop.request();
                }
            }
            samples
        })
    };

    let mut sink = Cycle {
        n: 0,
        pageable: false,
    };
    let summary = plan
        .run(Box::new(Pattern::new(size, 0.0)), &mut sink, &stop)
        .unwrap();
    let samples = sampler.join().unwrap();
    println!("{}", summary.render());
    println!("soak: {} controls applied", summary.process.controls.len());
    assert!(samples.len() >= 6, "too short a soak to judge");
    // Device memory in use changes with the chain running at the sample (a chain change
    // rebuilds the backend's buffers and graphs): compare the lowest free figure of the
    // first third with that of the last third, so that a leak shows as a trend.
    let third = samples.len() / 3;
    let low = |s: &[(u64, u64, u64, i64)]| s.iter().map(|s| s.2).min().unwrap_or(0);
    let (early, late) = (
        low(&samples[1..=third]),
        low(&samples[samples.len() - third..]),
    );
    println!("soak: device free, lowest of the first third {early} MiB, of the last {late} MiB");
    assert!(late + 256 >= early, "device memory grew: {samples:?}");
    let (warm, last) = (samples[1], samples[samples.len() - 1]);
    assert!(
        last.1 <= warm.1 + 64,
        "host memory grew: {warm:?} → {last:?}"
    );
    assert!(
        samples.iter().all(|s| s.3 <= 16),
        "page-locked ranges beyond the ring's 16 buffers: {samples:?}"
    );
    assert_eq!(
        device::live_registrations(),
        0,
        "ranges left locked after the run"
    );
}

/// The project's headline claim: with the ring page-locked, an upload and a download are on
/// the copy engines at the same time; with it pageable (the original question's mistake),
/// they are not. Read from the trace of a real pipeline run (CUDA events): the share of the
/// copies' busy time during which both directions ran.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn page_locked_copies_overlap_and_pageable_ones_do_not() {
    use common::run_case_traced;
    if !cuda_or_skip("page_locked_copies_overlap_and_pageable_ones_do_not") {
        return;
    }
    let both = |pageable: bool| {
        let case = Case {
            kind: BackendKind::Cuda,
            chain: "gray",
            size: FrameSize::new(1920, 1080),
            bands: 4,
            busy_bands: 1,
            in_flight: 4,
            pageable,
            issue: IssueOrder::Depth,
            streams: StreamLayout::PerStage,
            graphs: true,
            frames: 60,
            trace_frames: 60,
        };
        let (_, bad, _, trace) = run_case_traced(&case);
        assert_eq!(bad, 0);
        let trace = trace.expect("traced");
        let o = trace.overlap().expect("GPU spans");
        // The window's strip draws the last few frames of the rolling trace: laid out from
        // four frames in the middle of the run, it shows the same thing.
        let mut recent = framepipe::trace::Recent::new(&trace, 4);
        for f in 28..32 {
            recent.push(
                f,
                trace
                    .spans
                    .iter()
                    .filter(|s| s.frame == f)
                    .cloned()
                    .collect(),
            );
        }
        let layout = recent.layout(4).expect("frames 28-31");
        let strip_shared = layout.overlap.expect("GPU bars").shared();
        let name = if pageable { "pageable" } else { "page-locked" };
        println!("strip ({name}): {}", layout.caption());
        if let Ok(dir) = std::env::var("FRAMEPIPE_TEST_OUT") {
            let svg = framepipe::trace::layouts_svg(&[(name, layout.clone())]);
            std::fs::write(format!("{dir}/strip-{name}.svg"), svg).unwrap();
        }
        if pageable {
            assert!(
                strip_shared < 0.02,
                "the pageable strip shows overlap: {strip_shared}"
            );
        } else {
            assert!(
                strip_shared > 0.25,
                "the page-locked strip shows a staircase: {strip_shared}"
            );
        }
        // The share of the rarer copy direction's busy time during which the other
        // direction was busy too (the window itself includes idle time between frames).
        let shared = o.both / o.h2d_busy.min(o.d2h_busy).max(1e-9);
        println!(
            "{}: over {:.2} ms, uploads {:.1}% busy, downloads {:.1}%, both at once {:.2}%: {:.0}% of the copies overlapped",
            if pageable { "pageable" } else { "page-locked" },
            o.window_ms,
            100.0 * o.h2d_busy,
            100.0 * o.d2h_busy,
            100.0 * o.both,
            100.0 * shared
        );
        shared
    };
    let locked = both(false);
    let pageable = both(true);
    assert!(
        locked > 0.25,
        "page-locked uploads and downloads barely overlap: {locked}"
    );
    assert!(
        pageable < 0.02,
        "pageable copies overlap ({pageable}): is the ring pinned?"
    );
}

/// Frames of two sizes and four formats, interleaved, through one CUDA backend (one device,
/// a lane set per configuration): each is bit-identical to a run of its configuration
/// alone and to the reference, for 1 to 16 bands.
/// Frames lent on the device (the embedding program's hand-over, `backend::lend`) equal the
/// reference bit for bit, for chains that keep and change the size, between formats, at
/// several band counts and frames in flight; and every frame, kept lent until the run
/// ends, is still the frame it was (no buffer is written again while lent).
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_lends_frames_on_the_device_bit_for_bit() {
    if !cuda_or_skip("cuda_lends_frames_on_the_device_bit_for_bit") {
        return;
    }
    let yuv = Formats {
        input: PixelFormat::I420,
        output: PixelFormat::I420,
    };
    let nv12 = Formats {
        input: PixelFormat::I420,
        output: PixelFormat::Nv12,
    };
    let mut frames = 0;
    for (size, chain, formats) in [
        (FrameSize::new(641, 479), "gauss:2", Formats::BGR),
        (FrameSize::new(642, 480), "copy", yuv),
        (FrameSize::new(1920, 1080), "gray,gauss:2,sobel", yuv),
        (FrameSize::new(1920, 1080), "invert", nv12),
        (
            FrameSize::new(640, 480),
            "gauss:1,scale:320:200,pad:330:210:5:5",
            Formats::BGR,
        ),
        (FrameSize::new(640, 480), "crop:300:200,invert", yuv),
    ] {
        for (bands, in_flight) in [(1, 1), (4, 3), (16, 2)] {
            let mut case = Case::cuda(chain, size, (bands, in_flight));
            case.frames = 12;
            let (seen, bad, max, changed) = common::run_case_lent(&case, formats);
            assert_eq!(seen, 12);
            assert_eq!(
                (bad, changed),
                (0, 0),
                "{chain} at {size} ({formats}), {bands} bands, {in_flight} in flight: {bad} frames differ (max {max}), {changed} changed while lent"
            );
            frames += seen;
        }
    }
    println!("lent on the device: {frames} frames equal to the reference, none changed while held");
}

/// Frames shaped for a model on the device (the fit after the chain, then the layout's
/// lookup: RGB bytes, float planes of 32 and 16 bits) equal the CPU's shaping of the
/// reference bit for bit, for each fit, sizes up and down, at several band counts.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_shapes_frames_for_a_model_as_the_cpu_does() {
    use framepipe::filter::fit::Fit;
    use framepipe::sink::handover::Layout;
    if !cuda_or_skip("cuda_shapes_frames_for_a_model_as_the_cpu_does") {
        return;
    }
    let planar = |half| Layout::Planar {
        half,
        mean: [0.485, 0.456, 0.406],
        std: [0.229, 0.224, 0.225],
    };
    let mut frames = 0;
    for (size, chain, to, fit, layout) in [
        (
            FrameSize::new(640, 480),
            "copy",
            FrameSize::new(224, 224),
            Fit::Letterbox,
            planar(false),
        ),
        (
            FrameSize::new(1920, 1080),
            "gauss:1",
            FrameSize::new(640, 640),
            Fit::Letterbox,
            planar(true),
        ),
        (
            FrameSize::new(641, 479),
            "invert",
            FrameSize::new(300, 300),
            Fit::Crop,
            Layout::Rgb24,
        ),
        (
            FrameSize::new(320, 240),
            "copy",
            FrameSize::new(500, 200),
            Fit::Stretch,
            planar(false),
        ),
        (
            FrameSize::new(640, 480),
            "crop:600:400",
            FrameSize::new(224, 224),
            Fit::Crop,
            planar(true),
        ),
    ] {
        for (bands, in_flight) in [(1, 1), (4, 3)] {
            let mut case = Case::cuda(chain, size, (bands, in_flight));
            case.frames = 6;
            let shape = framepipe::backend::Shape {
                size: to,
                fit,
                lookup: layout.lookup().expect("a model layout"),
            };
            let (seen, bad) = common::run_case_shaped(&case, shape);
            assert_eq!(
                (seen, bad),
                (6, 0),
                "{chain} at {size} to {to} ({fit:?}, {}), {bands} bands",
                layout.name()
            );
            frames += seen;
        }
    }
    println!("shaped on the device: {frames} frames equal to the CPU's fit and layout");
}

#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_serves_interleaved_sizes_and_formats() {
    if !cuda_or_skip("cuda_serves_interleaved_sizes_and_formats") {
        return;
    }
    let mut frames = 0;
    for chain in [
        "copy",
        "gray,gain:1.3,-7,invert",
        "gauss:2",
        "gray,gauss:2,sobel",
    ] {
        for bands in [1, 3, 16] {
            frames += common::mixed::check(BackendKind::Cuda, chain, bands, 0);
        }
    }
    println!("interleaved: {frames} frames bit-identical to separate runs and the reference");
}

/// The mosaic composed on the device (several inputs of different sizes and formats, each
/// scaled into its tile by its bands) is byte for byte the one the CPU composes from the
/// reference's frames, for every band count, both stream layouts, frames alone (graphs) or
/// several in flight; frames only the mosaic needs are not downloaded, and those that are
/// equal the reference.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_composes_the_mosaic_as_the_cpu_does() {
    if !cuda_or_skip("cuda_composes_the_mosaic_as_the_cpu_does") {
        return;
    }
    let settings = [
        (1, 3, StreamLayout::PerStage),
        (4, 1, StreamLayout::PerStage),
        (16, 3, StreamLayout::PerStage),
        (3, 3, StreamLayout::PerBand),
        (5, 1, StreamLayout::PerBand),
    ];
    let mut pictures = 0;
    for chain in ["copy", "gauss:2", "gray,gauss:2,sobel"] {
        pictures += common::composed::check(BackendKind::Cuda, chain, &settings);
    }
    println!("mosaic: {pictures} pictures composed on the GPU equal the CPU's");
}

/// A measurement, not a check of speed: 16 unpaced 1080p inputs through one CUDA backend,
/// every frame brought down (no mosaic) against the mosaic composed on the device and only
/// its pictures brought down, in the same run. Prints both rates and their ratio.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_mosaic_rate_against_every_frame_brought_down() {
    if !cuda_or_skip("cuda_mosaic_rate_against_every_frame_brought_down") {
        return;
    }
    use common::composed::throughput;
    let size = FrameSize::new(1920, 1080);
    for round in 0..3 {
        let whole = throughput(BackendKind::Cuda, 16, size, 300, false);
        let mosaic = throughput(BackendKind::Cuda, 16, size, 300, true);
        println!(
            "round {round}: 16 inputs of 1080p BGR, copy: every frame down {whole:.0} fps, mosaic on the GPU {mosaic:.0} fps ({:.2}x)",
            mosaic / whole
        );
    }
}

/// A frame a CPU decoder lends in page-locked host memory (`Memory::HostLent`, as
/// `source/pinned.rs` does) is uploaded from there, bit-exact, and the slot's own input
/// buffer, which no copy goes through, is never page-locked: only the outputs are.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_uploads_frames_lent_in_page_locked_memory_and_locks_no_input_buffer() {
    use framepipe::desc::{Lease, Memory, Planes};
    use framepipe::ring::HostBuffer;
    use framepipe::source::{pattern::Pattern, Read, Source};
    use std::sync::atomic::{AtomicI64, Ordering};
    use std::sync::Arc;

    if !cuda_or_skip("cuda_uploads_frames_lent_in_page_locked_memory_and_locks_no_input_buffer") {
        return;
    }
    const FRAMES: usize = 12;
    // Registrations the backend made: all of them less the test's own buffers still alive
    // (read first, so that a buffer freed in between can only make the count lower).
    static MOST: AtomicI64 = AtomicI64::new(0);
    static ALIVE: AtomicI64 = AtomicI64::new(0);
    let others = device::live_registrations();
    let backends = move || {
        let alive = ALIVE.load(Ordering::SeqCst);
        device::live_registrations() - alive - others
    };
    /// A lent frame's buffer, held until the backend has copied it (as a decoder's frame
    /// reference holds its picture).
    struct Held {
        _buffer: HostBuffer,
    }
    impl std::fmt::Debug for Held {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a page-locked test frame")
        }
    }
    impl Lease for Held {}
    impl Drop for Held {
        fn drop(&mut self) {
            ALIVE.fetch_sub(1, Ordering::SeqCst);
        }
    }
    /// The pattern, each frame drawn into a page-locked buffer of its own and lent from there.
    struct Lending<F> {
        pattern: Pattern,
        buffers: Vec<Option<HostBuffer>>,
        next: usize,
        backends: F,
    }
    impl<F: Fn() -> i64 + Send> Source for Lending<F> {
        fn describe(&self) -> String {
            "a pattern lent in page-locked memory".into()
        }
        fn size(&self) -> FrameSize {
            self.pattern.size()
        }
        fn format(&self) -> PixelFormat {
            self.pattern.format()
        }
        fn fps(&self) -> Option<f64> {
            None
        }
        fn is_live(&self) -> bool {
            false
        }
        fn read(&mut self, _slot: &mut [u8]) -> anyhow::Result<Read> {
            MOST.fetch_max((self.backends)(), Ordering::SeqCst);
            let Some(Some(buffer)) = self.buffers.get_mut(self.next) else {
                return Ok(Read::End);
            };
            let len = self.pattern.format().bytes(self.pattern.size());
            self.pattern.read(&mut buffer[..len])
        }
        fn skip(&mut self) -> anyhow::Result<Read> {
            self.pattern.skip()
        }
        fn lent(&mut self) -> Option<(Memory, Planes)> {
            let buffer = self.buffers.get_mut(self.next)?.take()?;
            self.next += 1;
            let memory = Memory::HostLent {
                ptr: buffer.as_ptr() as u64,
                lease: Arc::new(Held { _buffer: buffer }),
            };
            Some((memory, Planes::packed(self.format(), self.size())))
        }
    }

    let ctx = device::open_device(device::DEFAULT_DEVICE).unwrap();
    let (size, formats): (FrameSize, Formats) = (FrameSize::new(320, 240), "i420".parse().unwrap());
    let buffers: Vec<Option<HostBuffer>> = (0..FRAMES)
        .map(|_| {
            let mut b = HostBuffer::new(formats.input.bytes(size));
            device::PinnedRange::lock(&ctx, &mut b).unwrap();
            Some(b)
        })
        .collect();
    ALIVE.store(FRAMES as i64, Ordering::SeqCst);
    let ring = 4;
    let counts = Counts {
        ring,
        in_flight: 2,
        bands: 3,
        busy_bands: 2,
    };
    let chain: framepipe::filter::Chain = "gauss:1".parse().unwrap();
    let mut plan = Plan::new(BackendKind::Cuda, size, formats, chain.clone(), counts).unwrap();
    plan.frames = Some(FRAMES as u64);
    let source = Box::new(Lending {
        pattern: Pattern::new(size, 0.0).in_format(formats.input),
        buffers,
        next: 0,
        backends,
    });
    let mut sink = common::CheckSink::in_formats(chain, size, formats);
    plan.run(source, &mut sink, &framepipe::stop::Stop::new())
        .unwrap();
    assert_eq!(
        (sink.seen, sink.bad_frames),
        (FRAMES as u64, 0),
        "frames equal the reference"
    );
    let locked = MOST.load(Ordering::SeqCst).max(backends());
    assert!(
        (0..=ring as i64).contains(&locked),
        "{locked} ring buffers page-locked: the outputs only (at most {ring}), no input"
    );
    println!("lent in page-locked memory: {FRAMES} frames equal, {locked} ring buffers locked");
}

/// The CUDA composer laid out again as inputs join and leave a running wall (the browser
/// view's API): the run goes on, the picture is served after each change, the summary says
/// who left.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_mosaic_is_laid_out_again_as_inputs_join_and_leave() {
    use common::run::{free_port, http, stderr, wait_with_deadline, TempDir};
    use std::time::{Duration, Instant};
    if !cuda_or_skip("cuda_mosaic_is_laid_out_again_as_inputs_join_and_leave") {
        return;
    }
    let dir = TempDir::new("gpu-joins");
    let list = "a = pattern:640x360:25\nb = pattern:320x240:25\n";
    std::fs::write(dir.join("wall.txt"), list).unwrap();
    let port = free_port();
    let args = ["--backend", "cuda", "--inputs", "wall.txt"];
    let child = common::run::served(dir.path(), port, &args);
    let deadline = Instant::now() + Duration::from_secs(30);
    while http_status(port, "/frame.jpg") != 200 {
        assert!(Instant::now() < deadline, "no picture was served");
        std::thread::sleep(Duration::from_millis(100));
    }
    for k in 0..20 {
        let body = format!(
            "{{\"name\": \"x{k}\", \"source\": \"pattern:{}x240:25\"}}",
            160 + 32 * k
        );
        let (status, said) = common::run::http_post(port, "/api/inputs", &body);
        assert_eq!(status, 201, "{}", String::from_utf8_lossy(&said));
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(http_status(port, "/frame.jpg"), 200);
        if k % 2 == 0 {
            assert_eq!(
                http(port, "DELETE", &format!("/api/inputs/x{k}"), "").0,
                200
            );
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(http_status(port, "/frame.jpg"), 200);
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "gpu joins");
    assert!(out.status.success(), "{}", stderr(&out));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap();
    let inputs = summary["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 22, "{summary}");
    let removed = inputs.iter().filter(|i| i["ended"] == "removed").count();
    assert_eq!(removed, 10, "{summary}");
    assert!(
        inputs[..2]
            .iter()
            .all(|i| i["dropped"] == 0 && i["ended"] == "stopped"),
        "{summary}"
    );

    fn http_status(port: u16, path: &str) -> u16 {
        common::run::try_http(port, "GET", path, "").map_or(0, |(s, _)| s)
    }
}

/// A packed BGR picture of `size` with edges, gradients and noise (every byte value).
fn busy_picture(size: FrameSize) -> Vec<u8> {
    let mut seed = 0x9e37_79b9u32;
    (0..size.bytes())
        .map(|i| {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            let (x, y) = ((i / 3) % size.width, (i / 3) / size.width);
            match (x / 16 + y / 16) % 3 {
                0 => (seed >> 24) as u8,
                1 => ((x * 255) / size.width.max(1)) as u8,
                _ => {
                    if (x / 7 + y / 5) % 2 == 0 {
                        250
                    } else {
                        3
                    }
                }
            }
        })
        .collect()
}

/// `--detect`'s pictures fitted to a model on the device (`backend::fit`): the same floats,
/// bit for bit, as the CPU makes (`pixel::linear::place`, `Lookup::apply_f32`), for each
/// family's fitting (YOLO's letterbox into square and oblong inputs, DB's resize to
/// multiples of 32 in B, G, R, SSD's stretch in planes or pixels, floats or bytes) and
/// pictures wide, tall, odd and smaller than the model's input.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_fits_pictures_to_models_bit_for_bit() {
    use framepipe::detect::{db, ssd, yolo};
    use framepipe::pixel::linear::{self, Placed};
    if !cuda_or_skip("cuda_fits_pictures_to_models_bit_for_bit") {
        return;
    }
    let ctx = device::open_device(device::DEFAULT_DEVICE).expect("the device");
    let mut fit = framepipe::backend::fit::ModelFit::new(&ctx).expect("the model's fitting");
    let mut runs = 0;
    for (w, h) in [(1920, 1080), (1280, 720), (641, 479), (33, 17), (480, 1920)] {
        let size = FrameSize::new(w, h);
        let bgr = busy_picture(size);
        let cases = [
            (
                yolo::letterbox(size, FrameSize::new(640, 640)).0,
                yolo::lookup(),
            ),
            (
                yolo::letterbox(size, FrameSize::new(320, 256)).0,
                yolo::lookup(),
            ),
            (Placed::whole(db::fed_size(size)), db::lookup()),
            (
                Placed::whole(FrameSize::new(300, 300)),
                ssd::lookup(false, true),
            ),
            (
                Placed::whole(FrameSize::new(320, 320)),
                ssd::lookup(true, false),
            ),
        ];
        for (placed, lookup) in cases {
            let cpu = lookup.apply_f32(placed.canvas, &linear::place(&bgr, size, &placed));
            let gpu = fit
                .fit(&bgr, size, &placed, &lookup)
                .expect("fitted on the device");
            assert_eq!(cpu.len(), gpu.len());
            let differ = cpu
                .iter()
                .zip(&gpu)
                .filter(|(a, b)| a.to_bits() != b.to_bits())
                .count();
            assert_eq!(
                differ, 0,
                "{size} fitted as {placed:?}: {differ} floats differ"
            );
            runs += 1;
        }
    }
    println!("model fitting on the device == the CPU's: {runs} pictures, every float the same");
    // What it takes (a figure, not a check): a 1080p picture letterboxed into 640×640.
    let size = FrameSize::new(1920, 1080);
    let (bgr, placed) = (
        busy_picture(size),
        yolo::letterbox(size, FrameSize::new(640, 640)).0,
    );
    let lookup = yolo::lookup();
    let time = |f: &mut dyn FnMut()| {
        let t = std::time::Instant::now();
        for _ in 0..20 {
            f();
        }
        t.elapsed().as_secs_f64() * 1e3 / 20.0
    };
    let cpu = time(&mut || {
        std::hint::black_box(lookup.apply_f32(placed.canvas, &linear::place(&bgr, size, &placed)));
    });
    let gpu = time(&mut || {
        std::hint::black_box(fit.fit(&bgr, size, &placed, &lookup).unwrap());
    });
    println!("1080p into 640x640: CPU {cpu:.2} ms, GPU (up, fit, down) {gpu:.2} ms a picture");
}

/// The text detector (PP-OCRv4, as tests/detect.rs runs it) on a clip of burned-in words,
/// with the CUDA backend (the pictures fitted on the device) and with the CPU backend:
/// the same boxes on every frame. ONNX Runtime's library and the model are those
/// `ORT_DYLIB_PATH` names and the model beside it (`scripts/gpu.sh pack` carries both), or
/// the project's copy.
#[test]
#[ignore = "needs CUDA: scripts/gpu.sh run"]
fn cuda_detection_finds_what_the_cpu_finds() {
    use common::run::{framepipe, stderr, TempDir};
    use std::time::Duration;
    if !cuda_or_skip("cuda_detection_finds_what_the_cpu_finds") {
        return;
    }
    let name = "ch_PP-OCRv4_det_infer.onnx";
    let model = std::env::var_os("ORT_DYLIB_PATH")
        .and_then(|l| std::path::Path::new(&l).parent().map(|d| d.join(name)))
        .filter(|m| m.is_file())
        .unwrap_or_else(|| {
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("target/ort")
                .join(name)
        });
    assert!(model.is_file(), "{} is missing", model.display());
    let dir = TempDir::new("cuda-detect");
    let clip = dir.join("words.mp4");
    let made = framepipe(
        &[
            "-i",
            "pattern:1280x720:25",
            "--frames",
            "12",
            "--backend",
            "cpu",
            "-f",
            "text:FRAMEPIPE,x=80,y=90,size=56,text:CAMERA,x=640,y=330,size=48,text:GATE,x=240,y=560,size=64",
            "-o",
            clip.to_str().unwrap(),
        ],
        Duration::from_secs(120),
    );
    assert!(made.status.success(), "{}", stderr(&made));
    let detect = |backend: &str| {
        let jsonl = dir.join(&format!("{backend}.jsonl"));
        let run = framepipe(
            &[
                "-i",
                clip.to_str().unwrap(),
                "--decode",
                "cpu",
                "--backend",
                backend,
                "--detect",
                model.to_str().unwrap(),
                "--detect-provider",
                "cpu",
                "--detections",
                jsonl.to_str().unwrap(),
            ],
            Duration::from_secs(300),
        );
        assert!(run.status.success(), "{backend}: {}", stderr(&run));
        let text = std::fs::read_to_string(&jsonl).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        (lines, stderr(&run))
    };
    let (cpu, _) = detect("cpu");
    let (cuda, said) = detect("cuda");
    assert!(
        said.contains("pictures fitted to the model on the GPU"),
        "the CUDA run did not fit on the GPU:\n{said}"
    );
    assert_eq!(cpu.len(), 12, "one line a frame");
    assert_eq!(cuda.len(), cpu.len());
    for (a, b) in cpu.iter().zip(&cuda) {
        assert_eq!(a["pts"], b["pts"]);
        assert_eq!(
            a["detections"], b["detections"],
            "frame at pts {}",
            a["pts"]
        );
        assert!(a["detections"].as_array().is_some_and(|d| d.len() >= 3));
    }
    println!(
        "detection with the CUDA backend == the CPU's: {} frames",
        cpu.len()
    );
}
