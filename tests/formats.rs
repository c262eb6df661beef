//! Frames that keep their pixel format through the pipeline (CPU backend here; the GPU's
//! conversion kernels are proven in `tests/gpu.rs`): the test pattern in every input
//! format, out through standard output in every written format, exact to the reference
//! (`pixel::apply_reference`: the input to BGR, the chain, BGR to the output, all
//! with OpenCV 4.6's arithmetic); `copy` passing planes through untouched; `gray` giving
//! neutral chroma; odd 4:2:0 sizes and impossible format requests refused with a message;
//! and GStreamer NV12/I420 appsinks carried as they come.

use crate::common;

use std::time::Duration;

use common::run::{framepipe, stderr};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pixel::{Formats, PixelFormat};
use framepipe::source::pattern;

const INPUTS: [&str; 5] = ["bgr24", "i420", "nv12", "yuyv", "gray"];
const OUTPUTS: [&str; 4] = ["i420", "gray", "nv12", "bgr24"];

fn pixel(name: &str) -> PixelFormat {
    <PixelFormat as clap::ValueEnum>::from_str(name, true).unwrap()
}

/// The frames of standard output: a Y4M stream's (i420, gray) or headerless ones.
fn frames_of(out: &[u8], format: PixelFormat, size: FrameSize) -> Vec<Vec<u8>> {
    let n = format.bytes(size);
    if !matches!(format, PixelFormat::I420 | PixelFormat::Gray) {
        assert_eq!(out.len() % n, 0, "{format}: a whole number of frames");
        return out.chunks(n).map(<[u8]>::to_vec).collect();
    }
    let end = out.iter().position(|b| *b == b'\n').expect("a Y4M header");
    let header = String::from_utf8_lossy(&out[..end]);
    let tag = if format == PixelFormat::Gray {
        "Cmono"
    } else {
        "C420jpeg"
    };
    assert!(header.contains(tag), "{format}: {header}");
    out[end + 1..]
        .chunks(6 + n)
        .map(|f| {
            assert_eq!(&f[..6], b"FRAME\n");
            f[6..].to_vec()
        })
        .collect()
}

/// `--frames 3` of the pattern in `input`, through `chain`, written as `output`.
fn run(input: &str, output: &str, chain: &str, size: &str) -> common::run::Run {
    framepipe(
        &[
            "--input",
            "pattern",
            "--input-format",
            input,
            "--size",
            size,
            "--fps",
            "0",
            "--frames",
            "3",
            "--backend",
            "cpu",
            "--filter",
            chain,
            "--headless",
            "--quiet",
            "--output",
            "-",
            "--output-format",
            output,
        ],
        Duration::from_secs(60),
    )
}

#[test]
fn every_format_pair_equals_the_reference() {
    let size = FrameSize::new(66, 38);
    for chain in ["copy", "blur:3,invert"] {
        let parsed: Chain = chain.parse().unwrap();
        for input in INPUTS {
            for output in OUTPUTS {
                let out = run(input, output, chain, "66x38");
                let err = stderr(&out);
                assert!(out.status.success(), "{input} → {output}: {err}");
                let formats = Formats {
                    input: pixel(input),
                    output: pixel(output),
                };
                let frames = frames_of(&out.stdout, formats.output, size);
                assert_eq!(frames.len(), 3, "{input} → {output}");
                for (i, got) in frames.iter().enumerate() {
                    let mut src = vec![0; formats.input.bytes(size)];
                    pattern::draw_in(formats.input, size, i as u64, &mut src);
                    let mut want = vec![0; formats.output.bytes(size)];
                    framepipe::pixel::apply_reference(&parsed, size, formats, &src, &mut want);
                    assert!(
                        got == &want,
                        "{chain}: {input} → {output}, frame {i} differs from the reference"
                    );
                    if chain == "copy" && input == output {
                        assert!(got == &src, "{input}: copy must pass the planes untouched");
                    }
                }
            }
        }
    }
}

#[test]
fn gray_frames_have_neutral_chroma() {
    let size = FrameSize::new(64, 48);
    let out = run("nv12", "i420", "gray", "64x48");
    assert!(out.status.success(), "{}", stderr(&out));
    let area = size.width * size.height;
    for frame in frames_of(&out.stdout, PixelFormat::I420, size) {
        assert!(frame[area..].iter().all(|&c| c == 128));
        assert!(frame[..area].iter().any(|&y| y != frame[0]), "luma moves");
    }
}

#[test]
fn impossible_formats_are_refused_with_a_message() {
    for (args, says) in [
        (
            vec![
                "--input",
                "pattern",
                "--input-format",
                "i420",
                "--size",
                "33x18",
            ],
            "i420 frames need an even width and height",
        ),
        (
            vec![
                "--input",
                "pattern",
                "--input-format",
                "yuyv",
                "--size",
                "33x18",
            ],
            "yuyv frames need an even width",
        ),
        (
            vec!["--input", "pattern", "--output-format", "i420"],
            "--output-format i420 applies to --output -",
        ),
        (
            vec![
                "--input",
                "pattern",
                "--output",
                "-",
                "--output-format",
                "yuyv",
            ],
            "framepipe writes i420, gray, nv12 or bgr24 frames",
        ),
        (
            vec!["--input", "pattern", "--size", "64x47", "--output", "-"],
            "need an even width and height",
        ),
    ] {
        let mut all = args.clone();
        all.extend(["--headless", "--frames", "2"]);
        let out = framepipe(&all, Duration::from_secs(30));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains(says) && !err.contains("panicked"),
            "{args:?}: {err}"
        );
    }
}

/// GStreamer's NV12 and I420 appsinks are carried as they come (no conversion on the
/// CPU): `copy` to the same format gives GStreamer's planes back; the two layouts hold
/// the same values; and a filter between them equals the reference on those planes.
#[cfg(feature = "opencv")]
#[test]
fn gstreamer_yuv_is_carried_as_it_comes() {
    // Small frames: the test reads standard output once the run ended (a pipe's 64 KiB).
    let size = FrameSize::new(96, 64);
    let gst = |format: &str, chain: &str, out: &str| {
        let pipeline = format!(
            "videotestsrc num-buffers=3 pattern=smpte ! video/x-raw,format={},width=96,height=64 ! appsink",
            format.to_uppercase()
        );
        let run = framepipe(
            &[
                "--input",
                &pipeline,
                "--backend",
                "cpu",
                "--filter",
                chain,
                "--headless",
                "--output",
                "-",
                "--output-format",
                out,
            ],
            Duration::from_secs(60),
        );
        let err = stderr(&run);
        assert!(run.status.success(), "{format}: {err}");
        assert!(
            err.contains(&format!("carried as {format}")),
            "{format}: {err}"
        );
        frames_of(&run.stdout, pixel(out), size)
    };
    let nv12 = gst("nv12", "copy", "nv12");
    let i420 = gst("i420", "copy", "i420");
    let area = size.width * size.height;
    for (n, i) in nv12.iter().zip(&i420) {
        assert_eq!(n[..area], i[..area], "the same luma");
        let (u, v) = i[area..].split_at(area / 4);
        for (k, pair) in n[area..].chunks(2).enumerate() {
            assert_eq!((pair[0], pair[1]), (u[k], v[k]), "the same chroma");
        }
    }
    let chain: Chain = "median3,invert".parse().unwrap();
    let filtered = gst("nv12", "median3,invert", "i420");
    let formats = Formats {
        input: PixelFormat::Nv12,
        output: PixelFormat::I420,
    };
    for (k, got) in filtered.iter().enumerate() {
        let mut want = vec![0; PixelFormat::I420.bytes(size)];
        framepipe::pixel::apply_reference(&chain, size, formats, &nv12[k], &mut want);
        assert!(got == &want, "frame {k} differs from the reference");
    }
}
