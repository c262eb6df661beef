//! CUDA backend against the plain-Rust reference, through the real pipeline: every filter,
//! several sizes (odd ones included), band counts and frames in flight, page-locked and
//! pageable. Bit-exact is required. Runs on the GPU machine (`scripts/gpu.sh`); elsewhere
//! it says it skipped.

mod common;

use common::{run_case, Case, CHAINS};
use framepipe::backend::{cuda, BackendKind, IssueOrder, StreamLayout};
use framepipe::frame::FrameSize;

fn cuda_or_skip(test: &str) -> bool {
    match cuda::probe() {
        Ok(()) => true,
        Err(why) => {
            println!("SKIPPED {test}: no CUDA here ({why})");
            false
        }
    }
}

#[test]
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
                    let (seen, bad, max) = run_case(&case);
                    assert_eq!(seen, 4);
                    assert_eq!(
                        bad, 0,
                        "{chain} at {size}, {bands} bands, {in_flight} in flight, pageable={pageable}, {issue:?}, {streams}, graphs={graphs}: {bad} frames differ, max diff {max}"
                    );
                    runs += 1;
                }
            }
        }
    }
    println!("cuda == reference: {runs} configurations x 4 frames, all bit-identical");
}

/// A traced CUDA run: every band's H2D, kernels and D2H, one track per stream, spans in
/// order and never overlapping on one stream.
#[test]
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
        let mut tracks: Vec<u16> = gpu.iter().map(|s| s.track).collect();
        tracks.sort_unstable();
        tracks.dedup();
        for t in &tracks {
            let mut on: Vec<_> = gpu.iter().filter(|s| s.track == *t).collect();
            on.sort_by_key(|s| s.start);
            for w in on.windows(2) {
                assert!(
                    w[0].end <= w[1].start + std::time::Duration::from_micros(2),
                    "{streams}: spans overlap on track {t}"
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
