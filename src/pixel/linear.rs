//! OpenCV's `INTER_LINEAR` resize of a packed BGR picture, placed on a canvas of its own
//! (the way detectors' own Python code fits a picture to a model: `cv2.resize`, then a
//! letterbox's border). The CPU makes it here (`place`) and the CUDA backend in
//! `fp_fit_linear` (`kernels/geometry.cu`) from the same tap tables (`taps`), so both make
//! the same bytes by construction.
//!
//! Invariants: the arithmetic is OpenCV's for 8-bit pictures: pixel centres mapped, edges
//! clamped, 11-bit integer weights each way, rounded once at the end; the scaled picture
//! lies whole inside the canvas, and every canvas byte outside it is `pad`.

use crate::frame::FrameSize;

/// The fixed-point weights' bits.
pub const BITS: u32 = 11;

/// One output pixel's taps along one side: the two input pixels and the second one's
/// weight (of `1 << BITS`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tap {
    /// The first input pixel.
    pub a: usize,
    /// The second (the first again at the far edge).
    pub b: usize,
    /// The second's weight.
    pub w: i64,
}

/// The taps of each of `n_out` output pixels along a side of `n_in` input pixels.
pub fn taps(n_in: usize, n_out: usize) -> Vec<Tap> {
    let one = (1i64 << BITS) as f64;
    let scale = n_in as f64 / n_out as f64;
    (0..n_out)
        .map(|o| {
            let f = (o as f64 + 0.5) * scale - 0.5;
            let mut s = f.floor() as i64;
            let mut frac = f - s as f64;
            if s < 0 {
                s = 0;
                frac = 0.0;
            }
            if s >= n_in as i64 - 1 {
                s = n_in as i64 - 1;
                frac = 0.0;
            }
            let s = s as usize;
            Tap {
                a: s,
                b: (s + 1).min(n_in - 1),
                w: (frac * one).round() as i64,
            }
        })
        .collect()
}

/// Where a resized picture lies: scaled to `scaled`, its top-left corner at `at` of a
/// `canvas` whose other bytes are `pad`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The whole picture made.
    pub canvas: FrameSize,
    /// The size the input is resized to.
    pub scaled: FrameSize,
    /// Where its top-left corner lies in the canvas.
    pub at: (usize, usize),
    /// The value of every canvas byte outside it.
    pub pad: u8,
}

impl Placed {
    /// The picture scaled to fill the whole canvas.
    pub fn whole(canvas: FrameSize) -> Self {
        Self {
            canvas,
            scaled: canvas,
            at: (0, 0),
            pad: 0,
        }
    }
}

/// A packed BGR picture of `from` resized and placed as `placed` says: the canvas, packed
/// BGR.
pub fn place(src: &[u8], from: FrameSize, placed: &Placed) -> Vec<u8> {
    let one = 1i64 << BITS;
    let (to, canvas) = (placed.scaled, placed.canvas);
    let (xs, ys) = (taps(from.width, to.width), taps(from.height, to.height));
    let stride = from.width * 3;
    // Each input row resized across, once: the rows the output's rows mix.
    let mut rows = vec![0i64; from.height * to.width * 3];
    for y in 0..from.height {
        let line = &src[y * stride..(y + 1) * stride];
        let row = &mut rows[y * to.width * 3..(y + 1) * to.width * 3];
        for (ox, t) in xs.iter().enumerate() {
            for c in 0..3 {
                let (a, b) = (i64::from(line[t.a * 3 + c]), i64::from(line[t.b * 3 + c]));
                row[ox * 3 + c] = a * (one - t.w) + b * t.w;
            }
        }
    }
    let mut out = vec![placed.pad; canvas.width * canvas.height * 3];
    let round = 1i64 << (2 * BITS - 1);
    let (left, top) = placed.at;
    for (oy, t) in ys.iter().enumerate() {
        let line = &mut out[((oy + top) * canvas.width + left) * 3..][..to.width * 3];
        let (a, b) = (&rows[t.a * to.width * 3..], &rows[t.b * to.width * 3..]);
        for (i, o) in line.iter_mut().enumerate() {
            let v = a[i] * (one - t.w) + b[i] * t.w;
            *o = ((v + round) >> (2 * BITS)).clamp(0, 255) as u8;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_placed_picture_is_the_resized_one_on_its_border() {
        let from = FrameSize::new(7, 5);
        let src: Vec<u8> = (0..from.bytes() as u32)
            .map(|v| (v * 37 % 256) as u8)
            .collect();
        let scaled = FrameSize::new(4, 3);
        let resized = place(&src, from, &Placed::whole(scaled));
        let placed = Placed {
            canvas: FrameSize::new(6, 6),
            scaled,
            at: (1, 2),
            pad: 114,
        };
        let canvas = place(&src, from, &placed);
        for y in 0..6 {
            for x in 0..6 {
                let px = &canvas[(y * 6 + x) * 3..][..3];
                match (x.checked_sub(1), y.checked_sub(2)) {
                    (Some(sx), Some(sy)) if sx < 4 && sy < 3 => {
                        assert_eq!(px, &resized[(sy * 4 + sx) * 3..][..3], "at {x},{y}")
                    }
                    _ => assert_eq!(px, [114; 3], "at {x},{y}"),
                }
            }
        }
    }

    #[test]
    fn the_same_size_is_the_same_picture() {
        let from = FrameSize::new(9, 4);
        let src: Vec<u8> = (0..from.bytes() as u32)
            .map(|v| (v * 91 % 256) as u8)
            .collect();
        assert_eq!(place(&src, from, &Placed::whole(from)), src);
    }
}
