//! The CPU backend (OpenCV's functions, or the reference itself without OpenCV) against the
//! plain-Rust reference, through the real pipeline: bit-exact wherever the arithmetic is
//! integer, within ±1 for `gauss` and `sharpen` (see `opencv_tolerance`).

mod common;

use common::{opencv_tolerance, run_case, Case, CHAINS};
use framepipe::backend::BackendKind;
use framepipe::frame::FrameSize;

#[test]
fn cpu_matches_reference_bit_for_bit() {
    for size in [
        FrameSize::new(33, 17),
        FrameSize::new(641, 479),
        FrameSize::new(1280, 720),
    ] {
        for chain in CHAINS {
            let case = Case {
                kind: BackendKind::Cpu,
                chain,
                size,
                bands: 1,
                busy_bands: 1,
                in_flight: 2,
                pageable: true,
                issue: Default::default(),
                streams: Default::default(),
                graphs: false,
                frames: 4,
                trace_frames: 0,
            };
            let (seen, _bad, max) = run_case(&case);
            assert_eq!(seen, 4);
            let allowed = if cfg!(feature = "opencv") {
                opencv_tolerance(chain)
            } else {
                0
            };
            assert!(
                max <= allowed,
                "{chain} at {size}: max diff {max}, allowed {allowed}"
            );
            println!("cpu {chain} at {size}: max diff {max} (allowed {allowed})");
        }
    }
}

/// Filter changes while running (the window's keys) take effect between two frames, in order.
#[test]
fn cpu_controls_switch_between_frames() {
    let sink = common::run_with_controls(BackendKind::Cpu);
    assert_eq!(sink.mismatches, 0);
    assert_eq!(sink.switched_at.len(), 2, "{:?}", sink.switched_at);
    assert!(
        sink.switched_at[0] > 3 && sink.switched_at[1] > 22,
        "{:?}",
        sink.switched_at
    );
}
