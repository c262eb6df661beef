//! End-to-end runs of the real binary on files the tests write with OpenCV, read back with
//! OpenCV (`--decode opencv`, the fallback path): every frame of the input reaches the
//! output, in order, equal to the reference of the filter chain applied to OpenCV's decode.
//! (The default path, FFmpeg's decoder, is checked against ffmpeg's own decode in
//! tests/decode.rs.)
#![cfg(feature = "opencv")]

use crate::common;

use std::time::Duration;

use common::run::{framepipe, stderr, TempDir};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::source::pattern;
use opencv::core::{Mat, Size, Vec3b, Vector};
use opencv::prelude::*;
use opencv::{imgcodecs, videoio};

const LIMIT: Duration = Duration::from_secs(60);

/// Writes `n` pattern frames as a video; returns the frames as OpenCV decodes them back.
fn write_video(path: &str, api: i32, fourcc: [char; 4], size: FrameSize, n: u64) -> Vec<Vec<u8>> {
    let [a, b, c, d] = fourcc;
    let cc = videoio::VideoWriter::fourcc(a, b, c, d).unwrap();
    let dims = Size::new(size.width as i32, size.height as i32);
    let mut w = videoio::VideoWriter::new_with_backend(path, api, cc, 25.0, dims, true).unwrap();
    assert!(w.is_opened().unwrap(), "could not write {path}");
    let mut px = vec![0u8; size.bytes()];
    for i in 0..n {
        pattern::draw(size, i * 3, &mut px);
        let m = Mat::new_rows_cols_with_bytes::<Vec3b>(dims.height, dims.width, &px).unwrap();
        w.write(&m).unwrap();
    }
    w.release().unwrap();
    read_video(path)
}

pub fn read_video(path: &str) -> Vec<Vec<u8>> {
    let mut cap = videoio::VideoCapture::from_file(path, videoio::CAP_FFMPEG).unwrap();
    assert!(cap.is_opened().unwrap(), "cannot read back {path}");
    let mut frames = Vec::new();
    let mut m = Mat::default();
    while cap.read(&mut m).unwrap() && !m.empty() {
        frames.push(m.data_bytes().unwrap().to_vec());
    }
    frames
}

fn read_png(path: &str) -> Vec<u8> {
    let m = imgcodecs::imread(path, imgcodecs::IMREAD_UNCHANGED).unwrap();
    assert!(!m.empty(), "cannot read {path}");
    m.data_bytes().unwrap().to_vec()
}

fn check_file_run(
    name: &str,
    ext: &str,
    api: i32,
    fourcc: [char; 4],
    size: FrameSize,
    chain: &str,
) {
    let dir = TempDir::new(name);
    let input = dir.join(&format!("in.{ext}")).display().to_string();
    let frames = write_video(&input, api, fourcc, size, 24);
    assert_eq!(frames.len(), 24, "the test's own input file");
    std::fs::create_dir(dir.join("out")).unwrap();
    let pattern = dir.join("out/%05d.png").display().to_string();
    let out = framepipe(
        &[
            "--input",
            &input,
            "--headless",
            "--output",
            &pattern,
            "--filter",
            chain,
            "--ring",
            "4",
            "--decode",
            "opencv",
        ],
        LIMIT,
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{name}: {err}");
    assert_eq!(out.counts(), Some([24, 24, 24, 0]), "{err}");
    let written = std::fs::read_dir(dir.join("out")).unwrap().count();
    assert_eq!(written, 24, "{name}: every input frame is written once");
    let chain: Chain = chain.parse().unwrap();
    let mut want = vec![0u8; size.bytes()];
    for (i, input) in frames.iter().enumerate() {
        chain.apply_reference(size, input, &mut want);
        let got = read_png(&dir.join(&format!("out/{i:05}.png")).display().to_string());
        assert!(
            got == want,
            "{name}: frame {i} differs from the reference (order or content)"
        );
    }
}

#[test]
fn odd_size_avi_to_png_sequence() {
    let fourcc = ['M', 'J', 'P', 'G'];
    check_file_run(
        "odd-avi",
        "avi",
        videoio::CAP_OPENCV_MJPEG,
        fourcc,
        FrameSize::new(641, 479),
        "gray,gain:1.5,10",
    );
}

#[test]
fn lossless_mkv_to_png_sequence() {
    let fourcc = ['F', 'F', 'V', '1'];
    check_file_run(
        "mkv",
        "mkv",
        videoio::CAP_FFMPEG,
        fourcc,
        FrameSize::new(1280, 720),
        "invert",
    );
}

#[test]
fn mp4_to_png_sequence() {
    let fourcc = ['m', 'p', '4', 'v'];
    check_file_run(
        "mp4",
        "mp4",
        videoio::CAP_FFMPEG,
        fourcc,
        FrameSize::new(320, 240),
        "copy",
    );
}

#[test]
fn tiny_odd_frames() {
    let fourcc = ['M', 'J', 'P', 'G'];
    check_file_run(
        "tiny",
        "avi",
        videoio::CAP_OPENCV_MJPEG,
        fourcc,
        FrameSize::new(33, 17),
        "gain:0.5,0.5",
    );
}

#[test]
fn video_outputs_are_finalized_and_complete() {
    let dir = TempDir::new("outputs");
    let size = FrameSize::new(640, 480);
    let input = dir.join("in.avi").display().to_string();
    write_video(
        &input,
        videoio::CAP_OPENCV_MJPEG,
        ['M', 'J', 'P', 'G'],
        size,
        30,
    );
    // .mkv twice: its default (H.264), and FFV1, the lossless choice.
    for (ext, codec) in [
        ("mp4", None),
        ("avi", None),
        ("mkv", None),
        ("mkv", Some("ffv1")),
    ] {
        let name = codec.map_or(format!("out.{ext}"), |c| format!("out-{c}.{ext}"));
        let output = dir.join(&name).display().to_string();
        let mut args = vec![
            "-i",
            &input,
            "--headless",
            "-o",
            &output,
            "-f",
            "invert",
            "--decode",
            "opencv",
        ];
        args.extend(codec.iter().flat_map(|c| ["--codec", *c]));
        let out = framepipe(&args, LIMIT);
        assert!(out.status.success(), "{ext}: {}", stderr(&out));
        let back = read_video(&output);
        assert_eq!(back.len(), 30, "{ext}: frames in the output file");
        assert_eq!(back[0].len(), size.bytes(), "{ext}: frame size");
    }
    // Lossless: the FFV1 .mkv holds exactly the inverted input.
    let frames = read_video(&input);
    let back = read_video(&dir.join("out-ffv1.mkv").display().to_string());
    let chain: Chain = "invert".parse().unwrap();
    let mut want = vec![0u8; size.bytes()];
    for (i, f) in frames.iter().enumerate() {
        chain.apply_reference(size, f, &mut want);
        assert!(back[i] == want, ".mkv frame {i} is not lossless");
    }
}

#[test]
fn still_image_is_processed_in_a_loop() {
    let dir = TempDir::new("still");
    let size = FrameSize::new(97, 61);
    let mut px = vec![0u8; size.bytes()];
    pattern::draw(size, 7, &mut px);
    let img = dir.join("photo.png").display().to_string();
    let m = Mat::new_rows_cols_with_bytes::<Vec3b>(61, 97, &px).unwrap();
    assert!(imgcodecs::imwrite(&img, &m, &Vector::new()).unwrap());
    let out_pat = dir.join("f%02d.png").display().to_string();
    let out = framepipe(
        &[
            "-i",
            &img,
            "--headless",
            "--frames",
            "5",
            "-o",
            &out_pat,
            "-f",
            "gray",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let chain: Chain = "gray".parse().unwrap();
    let mut want = vec![0u8; size.bytes()];
    chain.apply_reference(size, &px, &mut want);
    for i in 0..5 {
        assert!(read_png(&dir.join(&format!("f{i:02}.png")).display().to_string()) == want);
    }
    assert!(!dir.join("f05.png").exists());
}

#[test]
fn pattern_output_matches_reference() {
    let dir = TempDir::new("pattern");
    let out_pat = dir.join("p%03d.ppm").display().to_string();
    let out = framepipe(
        &[
            "-i",
            "pattern",
            "--size",
            "64x48",
            "--fps",
            "0",
            "--frames",
            "3",
            "--headless",
            "-o",
            &out_pat,
            "-f",
            "invert",
            // Accepted on any backend; only CUDA frames that find the GPU idle use graphs.
            "--no-graphs",
        ],
        LIMIT,
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let size = FrameSize::new(64, 48);
    let chain: Chain = "invert".parse().unwrap();
    let (mut src, mut want) = (vec![0u8; size.bytes()], vec![0u8; size.bytes()]);
    for i in 0..3u64 {
        pattern::draw(size, i, &mut src);
        chain.apply_reference(size, &src, &mut want);
        let ppm = std::fs::read(dir.join(&format!("p{i:03}.ppm"))).unwrap();
        let header = b"P6\n64 48\n255\n";
        assert_eq!(&ppm[..header.len()], header);
        let rgb = &ppm[header.len()..];
        let bgr: Vec<u8> = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[2], p[1], p[0]])
            .collect();
        assert!(bgr == want, "ppm frame {i}");
    }
}
