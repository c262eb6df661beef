//! Pixel formats of frames that come in or go out as raw bytes (standard input and output):
//! their layout, and their conversion to and from the pipeline's packed BGR with the
//! reference arithmetic (`filter::reference::yuv`, which is OpenCV 4.6's `cvtColor`).
//!
//! Invariants: 4:2:0 and 4:2:2 frames have even widths (4:2:0 even heights too), as ffmpeg's
//! `yuv420p` pipes do; every format's frame is `bytes(size)` long, planes one after another.

use std::fmt;
use std::ops::Range;

use crate::filter::reference::yuv;
use crate::frame::FrameSize;

/// A raw frame's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PixelFormat {
    /// Packed B, G, R (the pipeline's own).
    Bgr24,
    /// Planar Y, then U and V at half width and height (`yuv420p`).
    I420,
    /// Planar Y, then U and V interleaved at half width and height.
    Nv12,
    /// Packed Y0 U Y1 V at half horizontal chroma (`yuyv422`, YUY2).
    Yuyv,
    /// Planar Y, U, V with half-width chroma (`yuv422p`).
    Yuv422p,
    /// Planar Y, U, V at full size (`yuv444p`).
    Yuv444p,
    /// Luma only (`gray`; a Y4M `Cmono` stream).
    Gray,
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PixelFormat::Bgr24 => "bgr24",
            PixelFormat::I420 => "i420",
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Yuyv => "yuyv",
            PixelFormat::Yuv422p => "yuv422p",
            PixelFormat::Yuv444p => "yuv444p",
            PixelFormat::Gray => "gray",
        })
    }
}

impl PixelFormat {
    /// Bytes of one `size` frame.
    pub fn bytes(self, size: FrameSize) -> usize {
        let (w, h) = (size.width, size.height);
        match self {
            PixelFormat::Bgr24 => w * h * 3,
            PixelFormat::I420 | PixelFormat::Nv12 => w * h * 3 / 2,
            PixelFormat::Yuyv | PixelFormat::Yuv422p => w * h * 2,
            PixelFormat::Yuv444p => w * h * 3,
            PixelFormat::Gray => w * h,
        }
    }

    /// Fails for a size this format can't hold (odd dimensions of subsampled chroma).
    pub fn check(self, size: FrameSize) -> Result<(), String> {
        let odd_w = size.width % 2 == 1;
        let odd_h = size.height % 2 == 1;
        let bad = match self {
            PixelFormat::I420 | PixelFormat::Nv12 => odd_w || odd_h,
            PixelFormat::Yuyv | PixelFormat::Yuv422p => odd_w,
            _ => false,
        };
        if bad || size.width == 0 || size.height == 0 {
            return Err(format!(
                "{self} frames need an even width{} (as ffmpeg's): {size} can't be carried; scale or crop it first (ffmpeg -vf crop=trunc(iw/2)*2:trunc(ih/2)*2)",
                if matches!(self, PixelFormat::I420 | PixelFormat::Nv12) { " and height" } else { "" }
            ));
        }
        Ok(())
    }

    /// Converts one `size` frame in this format (`src`) into packed BGR (`dst`).
    pub fn to_bgr(self, size: FrameSize, src: &[u8], dst: &mut [u8]) {
        self.to_bgr_rows(size, src, 0..size.height, dst);
    }

    /// Converts rows `rows` of a `size` frame (`src`, the whole frame) into `dst`, which
    /// holds just those rows of packed BGR.
    pub fn to_bgr_rows(self, size: FrameSize, src: &[u8], rows: Range<usize>, dst: &mut [u8]) {
        let (w, h) = (size.width, size.height);
        let luma = &src[..w * h];
        let r0 = rows.start;
        let px = |dst: &mut [u8], row: usize, x: usize, y: u8, u: u8, v: u8| {
            let i = ((row - r0) * w + x) * 3;
            dst[i..i + 3].copy_from_slice(&yuv::to_bgr(y, u, v));
        };
        match self {
            PixelFormat::Bgr24 => dst.copy_from_slice(&src[r0 * w * 3..rows.end * w * 3]),
            PixelFormat::I420 | PixelFormat::Yuv422p | PixelFormat::Yuv444p => {
                let (cw, ch) = match self {
                    PixelFormat::I420 => (w / 2, h / 2),
                    PixelFormat::Yuv422p => (w / 2, h),
                    _ => (w, h),
                };
                let (u, v) = src[w * h..].split_at(cw * ch);
                let (sx, sy) = (w / cw, h / ch);
                for row in rows {
                    let (yl, cl) = (&luma[row * w..][..w], (row / sy) * cw);
                    for (x, luma) in yl.iter().enumerate() {
                        let c = cl + x / sx;
                        px(dst, row, x, *luma, u[c], v[c]);
                    }
                }
            }
            PixelFormat::Nv12 => {
                let uv = &src[w * h..];
                for row in rows {
                    for x in 0..w {
                        let c = (row / 2) * w + (x & !1);
                        px(dst, row, x, luma[row * w + x], uv[c], uv[c + 1]);
                    }
                }
            }
            PixelFormat::Yuyv => {
                for row in rows {
                    for x in 0..w {
                        let pair = (row * w + (x & !1)) * 2;
                        let y = src[(row * w + x) * 2];
                        px(dst, row, x, y, src[pair + 1], src[pair + 3]);
                    }
                }
            }
            PixelFormat::Gray => {
                for row in rows {
                    for x in 0..w {
                        px(dst, row, x, luma[row * w + x], 128, 128);
                    }
                }
            }
        }
    }

    /// Converts one packed BGR `size` frame (`src`) into this format (`dst`); I420 and
    /// BGR only (the formats framepipe writes).
    pub fn from_bgr(self, size: FrameSize, src: &[u8], dst: &mut [u8]) {
        let (w, h) = (size.width, size.height);
        match self {
            PixelFormat::I420 => {
                let (luma, chroma) = dst.split_at_mut(w * h);
                let (u, v) = chroma.split_at_mut(w * h / 4);
                i420_rows(size, src, 0..h, luma, u, v);
            }
            _ => dst.copy_from_slice(&src[..w * h * 3]),
        }
    }
}

/// Rows `rows` (even bounds) of a BGR `size` frame (`src`, whole) into their parts of the
/// I420 planes (`y`, `u`, `v` hold just those rows).
fn i420_rows(
    size: FrameSize,
    src: &[u8],
    rows: Range<usize>,
    y: &mut [u8],
    u: &mut [u8],
    v: &mut [u8],
) {
    let w = size.width;
    let r0 = rows.start;
    for row in rows.clone() {
        let line = &src[row * w * 3..][..w * 3];
        for (x, p) in line.chunks_exact(3).enumerate() {
            y[(row - r0) * w + x] = yuv::luma(p[0], p[1], p[2]);
        }
    }
    for cy in r0 / 2..rows.end / 2 {
        for cx in 0..w / 2 {
            let at = (2 * cy * w + 2 * cx) * 3;
            let (cu, cv) = yuv::chroma(src[at], src[at + 1], src[at + 2]);
            let i = (cy - r0 / 2) * (w / 2) + cx;
            u[i] = cu;
            v[i] = cv;
        }
    }
}

/// Threads for a conversion of `rows` rows: every core, at most one per 64 rows.
fn threads_for(rows: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores.min(rows / 64).clamp(1, 32)
}

/// Rows per thread: `rows` split in `threads`, rounded up to even (4:2:0 chroma rows).
fn rows_per(rows: usize, threads: usize) -> usize {
    (rows.div_ceil(threads) + 1) & !1
}

/// `format.to_bgr` on every core (the reference arithmetic, row bands in parallel).
fn to_bgr_parallel(format: PixelFormat, size: FrameSize, src: &[u8], dst: &mut [u8]) {
    let per = rows_per(size.height, threads_for(size.height));
    std::thread::scope(|s| {
        for (i, part) in dst.chunks_mut(per * size.width * 3).enumerate() {
            let rows = i * per..((i + 1) * per).min(size.height);
            s.spawn(move || format.to_bgr_rows(size, src, rows, part));
        }
    });
}

/// BGR to I420 on every core.
fn i420_parallel(size: FrameSize, src: &[u8], dst: &mut [u8]) {
    let (w, h) = (size.width, size.height);
    let per = rows_per(h, threads_for(h));
    let (luma, chroma) = dst.split_at_mut(w * h);
    let (u, v) = chroma.split_at_mut(w * h / 4);
    std::thread::scope(|s| {
        let parts = luma
            .chunks_mut(per * w)
            .zip(u.chunks_mut(per / 2 * (w / 2)))
            .zip(v.chunks_mut(per / 2 * (w / 2)));
        for (i, ((y, u), v)) in parts.enumerate() {
            let rows = i * per..((i + 1) * per).min(h);
            s.spawn(move || i420_rows(size, src, rows, y, u, v));
        }
    });
}

/// `format.to_bgr`, through OpenCV's `cvtColor` where it has the conversion (SIMD, every
/// core; `tests/yuv.rs` proves it equal to the reference on every value).
pub fn to_bgr(format: PixelFormat, size: FrameSize, src: &[u8], dst: &mut [u8]) {
    #[cfg(feature = "opencv")]
    {
        use opencv::imgproc;
        let code = match format {
            PixelFormat::I420 => Some(imgproc::COLOR_YUV2BGR_I420),
            PixelFormat::Nv12 => Some(imgproc::COLOR_YUV2BGR_NV12),
            PixelFormat::Yuyv => Some(imgproc::COLOR_YUV2BGR_YUY2),
            _ => None,
        };
        if let Some(code) = code {
            if opencv_convert(format, size, src, dst, code).is_ok() {
                return;
            }
        }
    }
    to_bgr_parallel(format, size, src, dst)
}

/// `format.from_bgr`, through OpenCV's `cvtColor` for I420.
pub fn from_bgr(format: PixelFormat, size: FrameSize, src: &[u8], dst: &mut [u8]) {
    #[cfg(feature = "opencv")]
    if format == PixelFormat::I420
        && opencv_convert(
            PixelFormat::Bgr24,
            size,
            src,
            dst,
            opencv::imgproc::COLOR_BGR2YUV_I420,
        )
        .is_ok()
    {
        return;
    }
    match format {
        PixelFormat::I420 => i420_parallel(size, src, dst),
        _ => format.from_bgr(size, src, dst),
    }
}

/// `cvtColor` from a `from`-format frame into `dst`'s own memory; an error where OpenCV
/// would not write there.
#[cfg(feature = "opencv")]
fn opencv_convert(
    from: PixelFormat,
    size: FrameSize,
    src: &[u8],
    dst: &mut [u8],
    code: i32,
) -> opencv::Result<()> {
    use opencv::core::{Mat, Vec2b, Vec3b};
    use opencv::prelude::*;
    let (w, h) = (size.width as i32, size.height as i32);
    let input = match from {
        PixelFormat::I420 | PixelFormat::Nv12 => {
            Mat::new_rows_cols_with_bytes::<u8>(h * 3 / 2, w, src)?
        }
        PixelFormat::Yuyv => Mat::new_rows_cols_with_bytes::<Vec2b>(h, w, src)?,
        _ => Mat::new_rows_cols_with_bytes::<Vec3b>(h, w, src)?,
    };
    let mut out = if from == PixelFormat::Bgr24 {
        Mat::new_rows_cols_with_bytes_mut::<u8>(h * 3 / 2, w, dst)?
    } else {
        Mat::new_rows_cols_with_bytes_mut::<Vec3b>(h, w, dst)?
    };
    let ptr = out.data();
    opencv::imgproc::cvt_color(&input, &mut out, code, 0)?;
    if out.data() != ptr {
        return Err(opencv::Error::new(opencv::core::StsError, "reallocated"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parallel_conversions_equal_the_serial_ones() {
        let size = FrameSize::new(64, 1000);
        for format in [
            PixelFormat::I420,
            PixelFormat::Nv12,
            PixelFormat::Yuyv,
            PixelFormat::Yuv422p,
            PixelFormat::Yuv444p,
            PixelFormat::Gray,
            PixelFormat::Bgr24,
        ] {
            let src: Vec<u8> = (0..format.bytes(size))
                .map(|i| (i * 31 % 253) as u8)
                .collect();
            let (mut a, mut b) = (vec![0; size.bytes()], vec![1; size.bytes()]);
            format.to_bgr(size, &src, &mut a);
            to_bgr_parallel(format, size, &src, &mut b);
            assert!(a == b, "{format}");
        }
        let bgr: Vec<u8> = (0..size.bytes()).map(|i| (i * 17 % 251) as u8).collect();
        let (mut a, mut b) = (vec![0; 96_000], vec![1; 96_000]);
        PixelFormat::I420.from_bgr(size, &bgr, &mut a);
        i420_parallel(size, &bgr, &mut b);
        assert!(a == b);
    }
}
