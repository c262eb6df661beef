//! The CPU backend (OpenCV's functions, or the reference itself without OpenCV) against the
//! plain-Rust reference, through the real pipeline: bit-exact wherever the arithmetic is
//! integer, within ±1 for `gauss` and `sharpen` (see `opencv_tolerance`).

use crate::common;

use common::{opencv_tolerance, run_case, Case, CHAINS};
use framepipe::backend::BackendKind;
use framepipe::frame::FrameSize;

#[test]
fn cpu_matches_reference_bit_for_bit() {
    let sizes = [(33, 17), (641, 479), (1280, 720)];
    within_opencvs_tolerance(CHAINS, &sizes);
}

/// Chains that change the size (`common::GEOMETRY_CHAINS`), through the real pipeline: the
/// outputs get frames of the chain's size, equal to the reference.
#[test]
fn cpu_geometry_matches_reference() {
    within_opencvs_tolerance(common::GEOMETRY_CHAINS, &[(33, 17), (41, 29)]);
}

/// Runs 4 frames of each of `chains` at each of `sizes` on the CPU backend: each equals the
/// reference, within OpenCV's tolerance where OpenCV runs the filter.
fn within_opencvs_tolerance(chains: &[&str], sizes: &[(usize, usize)]) {
    for &(w, h) in sizes {
        let size = FrameSize::new(w, h);
        for chain in chains {
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

/// Frames lent to the embedding program in host memory (`backend::host_lend`: made into a
/// buffer that goes with the frame instead of copied out of the slot) equal the reference,
/// between formats and for chains that keep and change the size; every frame, kept lent
/// until the run ends, is still the frame it was (no buffer is written again while lent).
#[test]
fn cpu_lends_frames_in_host_memory_bit_for_bit() {
    use framepipe::pixel::Formats;
    let (yuv, to_bgr): (Formats, Formats) = ("i420".parse().unwrap(), "i420:bgr".parse().unwrap());
    for (size, chain, formats) in [
        (FrameSize::new(642, 480), "copy", yuv),
        (FrameSize::new(640, 360), "copy", to_bgr),
        (FrameSize::new(640, 480), "invert", Formats::BGR),
        (FrameSize::new(640, 480), "crop:300:200,hflip", yuv),
        (
            FrameSize::new(640, 480),
            "scale:320:200,pad:330:210:5:5",
            Formats::BGR,
        ),
    ] {
        let mut case = Case::cuda(chain, size, (1, 2));
        (case.kind, case.pageable, case.frames) = (BackendKind::Cpu, true, 12);
        let (seen, bad, max, changed) = common::run_case_lent(&case, formats);
        assert_eq!(seen, 12);
        assert_eq!(
            (bad, changed),
            (0, 0),
            "{chain} at {size} ({formats}): {bad} frames differ (max {max}), {changed} changed while lent"
        );
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

/// A frame a source leaves in device memory (as NVDEC's are, for the CUDA backend) is never
/// read as host bytes: the CPU backend refuses it by name, the run ends with that error, and
/// every lease the source lent is given back.
#[test]
fn a_frame_in_device_memory_is_refused_by_the_cpu_backend_and_its_lease_given_back() {
    use framepipe::desc::{Lease, Memory, Planes};
    use framepipe::pixel::{Formats, PixelFormat};
    use framepipe::plan::{Counts, Plan};
    use framepipe::source::{pattern::Pattern, Read, Source};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    static LENT: AtomicUsize = AtomicUsize::new(0);
    static GIVEN_BACK: AtomicUsize = AtomicUsize::new(0);
    #[derive(Debug)]
    struct Counted;
    impl Lease for Counted {}
    impl Drop for Counted {
        fn drop(&mut self) {
            GIVEN_BACK.fetch_add(1, Ordering::SeqCst);
        }
    }
    /// The pattern, each frame also "lent" from device memory.
    struct Lending(Pattern);
    impl Source for Lending {
        fn describe(&self) -> String {
            "a lending pattern".into()
        }
        fn size(&self) -> FrameSize {
            self.0.size()
        }
        fn format(&self) -> PixelFormat {
            self.0.format()
        }
        fn fps(&self) -> Option<f64> {
            None
        }
        fn is_live(&self) -> bool {
            false
        }
        fn read(&mut self, frame: &mut [u8]) -> anyhow::Result<Read> {
            self.0.read(frame)
        }
        fn skip(&mut self) -> anyhow::Result<Read> {
            self.0.skip()
        }
        fn lent(&mut self) -> Option<(Memory, Planes)> {
            LENT.fetch_add(1, Ordering::SeqCst);
            let memory = Memory::Device {
                device: 0,
                ptr: 0x1000,
                lease: Arc::new(Counted),
            };
            Some((memory, Planes::packed(self.format(), self.size())))
        }
    }

    let size = FrameSize::new(64, 48);
    let formats: Formats = "nv12:i420".parse().unwrap();
    let counts = Counts {
        ring: 4,
        in_flight: 2,
        bands: 1,
        busy_bands: 1,
    };
    let mut plan = Plan::new(
        BackendKind::Cpu,
        size,
        formats,
        "copy".parse().unwrap(),
        counts,
    )
    .unwrap();
    plan.frames = Some(8);
    let source = Box::new(Lending(Pattern::new(size, 0.0).in_format(formats.input)));
    let mut sink = common::CheckSink::in_formats("copy".parse().unwrap(), size, formats);
    let err = plan
        .run(source, &mut sink, &framepipe::stop::Stop::new())
        .unwrap_err();
    assert!(
        format!("{err:#}").contains("is in device memory"),
        "{err:#}"
    );
    assert_eq!(sink.seen, 0, "no frame was read as host bytes");
    assert!(LENT.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        GIVEN_BACK.load(Ordering::SeqCst),
        LENT.load(Ordering::SeqCst),
        "every lease given back"
    );
}
