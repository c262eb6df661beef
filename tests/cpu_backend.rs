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

/// The test pattern is periodic (`pattern::period`, 5 frames at 4K) and the source hands
/// out copies of its first period: past the period every frame is still the one the
/// reference draws for its index, in every input format. (The GPU tests count on it: their
/// 60-frame 1080p runs wrap at frame 21.)
#[test]
fn pattern_frames_past_its_period_equal_the_reference() {
    use framepipe::pixel::Formats;
    use framepipe::source::pattern;
    let size = FrameSize::new(3840, 2160);
    let frames = pattern::period(size) * 2 + 1;
    assert!(frames < 20, "4K's period is short: {frames}");
    for formats in ["bgr", "i420:bgr", "nv12:i420"] {
        let formats: Formats = formats.parse().unwrap();
        let case = Case {
            kind: BackendKind::Cpu,
            chain: "invert",
            size,
            bands: 1,
            busy_bands: 1,
            in_flight: 2,
            pageable: true,
            issue: Default::default(),
            streams: Default::default(),
            graphs: false,
            frames,
            trace_frames: 0,
        };
        let (seen, bad, max, _) = common::run_case_in(&case, "invert", formats);
        assert_eq!(seen, frames);
        assert_eq!(bad, 0, "{formats}: {bad} frames differ (max {max})");
    }
}

/// Frames of two sizes and four formats, interleaved, through one CPU backend: each equals a
/// run of its configuration alone, and the reference.
#[test]
fn cpu_serves_interleaved_sizes_and_formats() {
    for chain in [
        "gray,gain:1.3,-7,invert",
        "gauss:2",
        "invert,blur:5,median3,gain:2,-20",
    ] {
        let n = common::mixed::check(BackendKind::Cpu, chain, 1, opencv_tolerance(chain));
        assert_eq!(n, 24);
    }
}

/// The CPU backend composes the mosaic (several inputs of different sizes and formats, each
/// scaled into its tile) exactly as the device does (`tests/gpu.rs` holds the device to the
/// same picture), and hands every frame on whole.
#[test]
fn cpu_composes_the_mosaic() {
    use framepipe::backend::StreamLayout;
    for chain in ["copy", "gray,gain:1.3,-7,invert"] {
        let n = common::composed::check(BackendKind::Cpu, chain, &[(1, 3, StreamLayout::PerStage)]);
        assert_eq!(n, 4);
    }
}
