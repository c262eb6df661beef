//! What of a run only the build with OpenCV does, or does faster: the question a build
//! without OpenCV asks its plan before anything opens, to hand the run to the OpenCV build
//! where one is named (`app::full_build`), so that a run which needs none of OpenCV's 256
//! shared libraries does not wait for the dynamic loader to bind them.
//!
//! Invariants: the answer is made from the plan alone (nothing opened, nothing asked of the
//! machine); it errs towards the OpenCV build, never the other way: a run the answer keeps
//! in a build without OpenCV does the same work with the same code in both builds (the
//! decoders, the encoders, the CUDA backend, the CPU backend's untouched frames), so its
//! frames are the same bytes; a run it hands over would, in the build without OpenCV, be
//! refused (a camera, a still image, a GStreamer pipeline, `--decode opencv`, a window) or
//! run by slower code (the CPU backend's filters and its BGR and YUV conversions, where
//! OpenCV's `cvtColor` and filters are SIMD on every core). Geometry and text are plain Rust
//! in every build (on a 4:2:0 frame's own planes): a chain of them alone stays, unless its
//! frames may be converted.

use std::fmt;

use super::run::{InputPlan, RunPlan};
use crate::backend::BackendKind;
use crate::pixel::PixelFormat;
use crate::source::open::Decode;
use crate::source::InputSpec;

/// Why a run needs the OpenCV build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenCvPart {
    /// A window (`imshow`), where a display is named.
    Window,
    /// No `--input`: the default camera, where there is one.
    DefaultCamera,
    /// A camera by index.
    Camera,
    /// A still image (`imgcodecs`).
    StillImage,
    /// A GStreamer pipeline (OpenCV's `videoio`).
    Gstreamer,
    /// `--decode opencv`.
    DecodeOpencv,
    /// The CPU backend may run a filter (OpenCV's, SIMD on every core).
    CpuFilter,
    /// The CPU backend may convert pixel formats (OpenCV's `cvtColor` turns YUV into BGR and BGR into YUV).
    CpuConversion,
    /// `framepipe doctor` (it reports OpenCV, the display and the cameras).
    Doctor,
}

impl fmt::Display for OpenCvPart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            OpenCvPart::Window => "a window",
            OpenCvPart::DefaultCamera => "the default camera",
            OpenCvPart::Camera => "a camera",
            OpenCvPart::StillImage => "a still image",
            OpenCvPart::Gstreamer => "a GStreamer pipeline",
            OpenCvPart::DecodeOpencv => "--decode opencv",
            OpenCvPart::CpuFilter => "the CPU backend's filters",
            OpenCvPart::CpuConversion => "the CPU backend's pixel format conversions",
            OpenCvPart::Doctor => "the doctor's OpenCV, display and camera checks",
        })
    }
}

impl RunPlan {
    /// The first part of the run that only the OpenCV build does, or does faster (module
    /// doc); none where a build without OpenCV does the same work at the same cost. The
    /// window is not asked here: a build without OpenCV plans none (`app::full_build`).
    pub fn opencv_part(&self) -> Option<OpenCvPart> {
        if let Some(part) = self.inputs().iter().find_map(capture_part) {
            return Some(part);
        }
        let engine = self.engine();
        if engine.kind == BackendKind::Cuda {
            return None;
        }
        // Geometry and text are the same plain Rust in both builds (on a YUV frame's own
        // planes, `pixel::planes`): what may convert is asked below, as for no filter.
        if !engine.chain.is_geometry_and_text() {
            return Some(OpenCvPart::CpuFilter);
        }
        self.inputs()
            .iter()
            .any(may_convert)
            .then_some(OpenCvPart::CpuConversion)
    }
}

/// What of OpenCV's capture an input needs.
fn capture_part(input: &InputPlan) -> Option<OpenCvPart> {
    match &input.spec {
        InputSpec::Default => Some(OpenCvPart::DefaultCamera),
        InputSpec::Camera(_) => Some(OpenCvPart::Camera),
        InputSpec::Image(_) => Some(OpenCvPart::StillImage),
        InputSpec::Stream(s) if s.contains('!') => Some(OpenCvPart::Gstreamer),
        InputSpec::Stream(_) | InputSpec::Video(_) if input.asked.decode == Decode::Opencv => {
            Some(OpenCvPart::DecodeOpencv)
        }
        _ => None,
    }
}

/// Whether a consumer of `input` may have its frames converted (by the backend or by
/// itself) from the format they come in: where the input's format is known before it opens
/// (the pattern, raw frames on standard input), a consumer that prefers another; where it
/// is not (a decoder's pictures, a Y4M header's, YUV 4:2:0 as a rule), a consumer that
/// prefers anything but YUV 4:2:0.
fn may_convert(input: &InputPlan) -> bool {
    let known = match &input.spec {
        InputSpec::Pattern(o) => Some(crate::source::open::pattern_format(o, &input.asked)),
        InputSpec::Stdin | InputSpec::Pipe(_) => input.asked.input_format.pixel(),
        _ => None,
    };
    input
        .takes
        .iter()
        .map(|t| t.first())
        .any(|first| match known {
            Some(from) => first != Some(&from),
            None => !matches!(first, Some(PixelFormat::I420 | PixelFormat::Nv12)),
        })
}

#[cfg(all(test, feature = "ffmpeg"))]
mod tests {
    use super::*;
    use crate::cli::Cli;
    use crate::plan::shard::{Environment, Roster};
    use clap::Parser;

    /// The plan's answer for a command line, its files (`a.mp4`, `photo.jpg`, outputs) in a
    /// folder of their own where the inputs exist.
    fn part(line: &[&str]) -> Option<OpenCvPart> {
        let dir = tempfile::tempdir().unwrap();
        for name in ["a.mp4", "photo.jpg"] {
            std::fs::write(dir.path().join(name), b"x").unwrap();
        }
        let placed = |a: &&str| match a.contains('.') && !a.contains(':') && !a.contains('!') {
            true => dir.path().join(a).display().to_string(),
            false => a.to_string(),
        };
        let line: Vec<String> = line.iter().map(placed).collect();
        let line = line.iter().map(String::as_str);
        let cli = Cli::try_parse_from(["framepipe", "--headless"].into_iter().chain(line)).unwrap();
        let args = cli.run;
        let roster =
            Roster::gather(&args.sources.input, None, None, &Environment::default()).unwrap();
        RunPlan::from_args(args, &roster).unwrap().opencv_part()
    }

    #[test]
    fn inputs_only_opencv_reads_are_handed_over() {
        assert_eq!(part(&[]), Some(OpenCvPart::DefaultCamera));
        assert_eq!(part(&["-i", "0"]), Some(OpenCvPart::Camera));
        assert_eq!(part(&["-i", "photo.jpg"]), Some(OpenCvPart::StillImage));
        let gst = "videotestsrc ! videoconvert ! appsink";
        assert_eq!(part(&["-i", gst]), Some(OpenCvPart::Gstreamer));
        let opencv = ["-i", "a.mp4", "--decode", "opencv"];
        assert_eq!(part(&opencv), Some(OpenCvPart::DecodeOpencv));
        // libavcodec's inputs stay, also beside others and over the network.
        assert_eq!(part(&["-i", "a.mp4", "-i", "rtsp://127.0.0.1/cam"]), None);
        assert_eq!(part(&["-i", "-"]), None);
    }

    #[test]
    fn the_cpu_backend_s_filters_and_conversions_are_handed_over() {
        assert_eq!(
            part(&["-i", "a.mp4", "--filter", "gray"]),
            Some(OpenCvPart::CpuFilter)
        );
        let cuda = ["-i", "a.mp4", "--filter", "gauss:2", "--backend", "cuda"];
        assert_eq!(part(&cuda), None);
        // Geometry and text run on the planes, the same code in both builds.
        let chain = "scale:640:-2,crop:480:270,text:cam,timestamp,fps:10";
        assert_eq!(part(&["-i", "a.mp4", "-f", chain, "-o", "out.mp4"]), None);
        // A file's 4:2:0 pictures into a video, or to standard output as Y4M: no conversion.
        assert_eq!(part(&["-i", "a.mp4", "-o", "out.mp4"]), None);
        assert_eq!(part(&["-i", "a.mp4", "-o", "-"]), None);
        let bgr = ["-i", "a.mp4", "--output-format", "bgr24", "-o", "-"];
        assert_eq!(part(&bgr), Some(OpenCvPart::CpuConversion));
        let png = ["-i", "a.mp4", "-o", "frames/%05d.png"];
        assert_eq!(part(&png), Some(OpenCvPart::CpuConversion));
        // The pattern is BGR unless it says otherwise.
        let pattern = ["-i", "pattern", "--output-format", "bgr24", "-o", "-"];
        assert_eq!(part(&pattern), None);
        let pattern_y4m = ["-i", "pattern", "-o", "-"];
        assert_eq!(part(&pattern_y4m), Some(OpenCvPart::CpuConversion));
        assert_eq!(part(&["-i", "pattern:64x64:i420", "-o", "-"]), None);
        let raw = [
            "-i",
            "-",
            "--input-format",
            "bgr24",
            "--size",
            "8x8",
            "-o",
            "-",
        ];
        assert_eq!(part(&raw), Some(OpenCvPart::CpuConversion));
    }
}
