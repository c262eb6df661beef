//! The conversions between pixel formats (the reference arithmetic of
//! `filter::reference::yuv`, which is OpenCV 4.6's `cvtColor`, or OpenCV's own where it is
//! built in), on several threads for large frames, and `apply_reference`, a chain between
//! two formats by definition. The formats themselves are `pixel`'s.

use super::*;
use crate::filter::reference::yuv;

/// `chain` between two pixel formats, by definition: the input converted to BGR, the chain,
/// the result converted to the output format (all with the reference arithmetic of
/// `filter::reference`); a chain that changes nothing between one format passes it
/// untouched, and between I420 and NV12 moves the chroma samples (`Formats::repacked`);
/// geometry and text between one YUV format run on its planes (`planes::fits`).
/// Both backends are checked against it.
pub fn apply_reference(
    chain: &crate::filter::Chain,
    size: FrameSize,
    formats: Formats,
    src: &[u8],
    dst: &mut [u8],
) {
    use PixelFormat::Bgr24;
    if formats.passthrough(chain.is_identity()) {
        return dst.copy_from_slice(src);
    }
    if formats.repacked(chain.is_identity()) {
        return repack_420(formats, size, src, dst);
    }
    if formats.input == formats.output && super::planes::fits(chain, formats.input, size) {
        let mut parts = crate::filter::Parts::default();
        return super::planes::apply(chain, formats.input, size, src, dst, &mut parts);
    }
    let mut bgr_in = vec![0; size.bytes()];
    formats.input.to_bgr(size, src, &mut bgr_in);
    if formats.output == Bgr24 {
        return chain.apply_reference(size, &bgr_in, dst);
    }
    // A chain that changes the size makes a frame of its output size.
    let out = chain.output_size(size).unwrap_or(size);
    let mut bgr_out = vec![0; out.bytes()];
    chain.apply_reference(size, &bgr_in, &mut bgr_out);
    formats.output.from_bgr(out, &bgr_out, dst);
}

/// A 4:2:0 frame of `size` from one layout to the other (`formats`: I420 to NV12 or back):
/// the luma plane as it is, the chroma samples moved between planar and interleaved.
pub fn repack_420(formats: Formats, size: FrameSize, src: &[u8], dst: &mut [u8]) {
    use PixelFormat::{Nv12, I420};
    let area = size.width * size.height;
    let (ys, cs) = src.split_at(area);
    let (yd, cd) = dst.split_at_mut(area);
    yd.copy_from_slice(ys);
    let quarter = area / 4;
    match (formats.input, formats.output) {
        (I420, Nv12) => {
            let (u, v) = cs.split_at(quarter);
            for (pair, (u, v)) in cd.chunks_exact_mut(2).zip(u.iter().zip(&v[..quarter])) {
                pair[0] = *u;
                pair[1] = *v;
            }
        }
        (Nv12, I420) => {
            let (u, v) = cd.split_at_mut(quarter);
            for (pair, (u, v)) in cs.chunks_exact(2).zip(u.iter_mut().zip(&mut v[..quarter])) {
                *u = pair[0];
                *v = pair[1];
            }
        }
        _ => unreachable!("repack_420 takes I420 and NV12 ({formats:?})"),
    }
}

/// Turns an I420 `size` frame into NV12 in place: its two chroma planes interleaved.
pub(super) fn i420_to_nv12(size: FrameSize, frame: &mut [u8]) {
    let area = size.width * size.height;
    let planar = frame[area..].to_vec();
    let (u, v) = planar.split_at(area / 4);
    for ((pair, u), v) in frame[area..].chunks_exact_mut(2).zip(u).zip(v) {
        pair[0] = *u;
        pair[1] = *v;
    }
}

/// Rows `rows` (even bounds) of a BGR `size` frame (`src`, whole) into their parts of the
/// I420 planes (`y`, `u`, `v` hold just those rows).
pub(super) fn i420_rows(
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
    let cores = crate::host::cores();
    cores.min(rows / 64).clamp(1, 32)
}

/// Rows per thread: `rows` split in `threads`, rounded up to even (4:2:0 chroma rows).
fn rows_per(rows: usize, threads: usize) -> usize {
    (rows.div_ceil(threads) + 1) & !1
}

/// `format.to_bgr` on every core (the reference arithmetic, row bands in parallel).
pub(super) fn to_bgr_parallel(format: PixelFormat, size: FrameSize, src: &[u8], dst: &mut [u8]) {
    let per = rows_per(size.height, threads_for(size.height));
    std::thread::scope(|s| {
        for (i, part) in dst.chunks_mut(per * size.width * 3).enumerate() {
            let rows = i * per..((i + 1) * per).min(size.height);
            s.spawn(move || format.to_bgr_rows(size, src, rows, part));
        }
    });
}

/// BGR to I420 on every core.
pub(super) fn i420_parallel(size: FrameSize, src: &[u8], dst: &mut [u8]) {
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
        PixelFormat::Nv12 => {
            from_bgr(PixelFormat::I420, size, src, dst);
            i420_to_nv12(size, dst);
        }
        PixelFormat::Gray => {
            let rows = size.height.div_ceil(threads_for(size.height));
            std::thread::scope(|s| {
                let parts = dst[..size.width * size.height]
                    .chunks_mut(rows * size.width)
                    .zip(src.chunks(rows * size.width * 3));
                for (y, bgr) in parts {
                    s.spawn(move || {
                        for (y, p) in y.iter_mut().zip(bgr.chunks_exact(3)) {
                            *y = yuv::luma(p[0], p[1], p[2]);
                        }
                    });
                }
            });
        }
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
