//! The YUV conversions of `filter::reference::yuv` (through `pixel::PixelFormat`) against
//! OpenCV 4.6's own `cvtColor`, on every value that matters: all 2^24 (Y, U, V) triples for
//! I420, NV12 and YUYV to BGR, and all 2^24 colours for BGR to I420 (its chroma from each
//! 2×2 block's top-left pixel, so the colours are laid out twice, shifted by one pixel).
#![cfg(feature = "opencv")]

use framepipe::frame::FrameSize;
use framepipe::pixel::PixelFormat;
use opencv::core::Mat;
use opencv::imgproc;
use opencv::prelude::*;

/// OpenCV's conversion of `src` (a `rows`×`cols` Mat of `channels` bytes a pixel) with `code`.
fn opencv(src: &[u8], rows: i32, cols: i32, channels: i32, code: i32) -> Vec<u8> {
    use opencv::core::{Vec2b, Vec3b};
    let m = match channels {
        1 => Mat::new_rows_cols_with_bytes::<u8>(rows, cols, src),
        2 => Mat::new_rows_cols_with_bytes::<Vec2b>(rows, cols, src),
        _ => Mat::new_rows_cols_with_bytes::<Vec3b>(rows, cols, src),
    }
    .unwrap();
    let mut out = Mat::default();
    imgproc::cvt_color(&m, &mut out, code, 0).unwrap();
    out.data_bytes().unwrap().to_vec()
}

fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).position(|(x, y)| x != y)
}

/// A 4096×4096 4:2:0 frame holding every triple: block (u, v) of 16×16 pixels has Y = 0..255.
fn every_triple_420(nv12: bool) -> Vec<u8> {
    let (w, h) = (4096usize, 4096usize);
    let mut f = vec![0u8; w * h * 3 / 2];
    for y in 0..h {
        for x in 0..w {
            f[y * w + x] = ((y % 16) * 16 + x % 16) as u8;
        }
    }
    let (cw, ch) = (w / 2, h / 2);
    for cy in 0..ch {
        for cx in 0..cw {
            let (u, v) = ((cx / 8) as u8, (cy / 8) as u8);
            if nv12 {
                let at = w * h + cy * w + 2 * cx;
                f[at] = u;
                f[at + 1] = v;
            } else {
                f[w * h + cy * cw + cx] = u;
                f[w * h + cw * ch + cy * cw + cx] = v;
            }
        }
    }
    f
}

#[test]
fn yuv_420_to_bgr_equals_opencv_on_every_triple() {
    let size = FrameSize::new(4096, 4096);
    for (format, code) in [
        (PixelFormat::I420, imgproc::COLOR_YUV2BGR_I420),
        (PixelFormat::Nv12, imgproc::COLOR_YUV2BGR_NV12),
    ] {
        let src = every_triple_420(format == PixelFormat::Nv12);
        let mut ours = vec![0u8; size.bytes()];
        format.to_bgr(size, &src, &mut ours);
        let theirs = opencv(&src, 4096 * 3 / 2, 4096, 1, code);
        assert_eq!(first_difference(&ours, &theirs), None, "{format}");
    }
}

#[test]
fn yuyv_to_bgr_equals_opencv_on_every_triple() {
    // 256 pixels (128 pairs) a (u, v): Y = 0..255 over the row, 65536 rows.
    let (w, h) = (256usize, 65536usize);
    let mut src = vec![0u8; w * h * 2];
    for row in 0..h {
        let (u, v) = ((row % 256) as u8, (row / 256) as u8);
        for x in 0..w {
            let at = (row * w + x) * 2;
            src[at] = x as u8;
            src[at + 1] = if x % 2 == 0 { u } else { v };
        }
    }
    let size = FrameSize::new(w, h);
    let mut ours = vec![0u8; size.bytes()];
    PixelFormat::Yuyv.to_bgr(size, &src, &mut ours);
    let theirs = opencv(&src, h as i32, w as i32, 2, imgproc::COLOR_YUV2BGR_YUY2);
    assert_eq!(first_difference(&ours, &theirs), None);
}

#[test]
fn bgr_to_i420_equals_opencv_on_every_colour() {
    let size = FrameSize::new(4096, 4096);
    for shift in [0usize, 1] {
        // Every colour once; shifted by a pixel so that each is a block's top-left once.
        let mut src = vec![0u8; size.bytes()];
        for i in 0..(1usize << 24) {
            let at = ((i + shift) % (1 << 24)) * 3;
            src[at] = (i & 255) as u8;
            src[at + 1] = ((i >> 8) & 255) as u8;
            src[at + 2] = (i >> 16) as u8;
        }
        let mut ours = vec![0u8; PixelFormat::I420.bytes(size)];
        PixelFormat::I420.from_bgr(size, &src, &mut ours);
        let theirs = opencv(&src, 4096, 4096, 3, imgproc::COLOR_BGR2YUV_I420);
        assert_eq!(first_difference(&ours, &theirs), None, "shift {shift}");
    }
}
