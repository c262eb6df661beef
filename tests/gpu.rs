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
                for (in_flight, pageable, issue, streams) in [
                    (1, false, IssueOrder::Depth, StreamLayout::PerStage),
                    (3, false, IssueOrder::Breadth, StreamLayout::PerStage),
                    (2, false, IssueOrder::Depth, StreamLayout::PerBand),
                    (2, true, IssueOrder::Depth, StreamLayout::PerStage),
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
                        frames: 4,
                    };
                    let (seen, bad, max) = run_case(&case);
                    assert_eq!(seen, 4);
                    assert_eq!(
                        bad, 0,
                        "{chain} at {size}, {bands} bands, {in_flight} in flight, pageable={pageable}, {issue:?}, {streams}: {bad} frames differ, max diff {max}"
                    );
                    runs += 1;
                }
            }
        }
    }
    println!("cuda == reference: {runs} configurations x 4 frames, all bit-identical");
}
