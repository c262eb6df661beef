//! The plain-Rust reference of every filter, computed band by band the way the CUDA backend
//! does it, so that band-count invariance is tested on every machine.
//!
//! A band buffer holds a band's rows plus the chain's halo rows (clamped to the frame).
//! Filters run over the whole buffer; rows are reflected (`BORDER_REFLECT_101`) in *frame*
//! coordinates, and reads past the buffer are clamped to it. Rows near a buffer edge that is
//! not a frame edge come out wrong, but never farther in than the chain's radius, so the
//! band's own rows are exact — for any band thickness, also thinner than the halo.

use super::{gain_table, gray_value, Chain, Filter};
use crate::band::BandPlan;
use crate::frame::{FrameSize, CHANNELS};

/// A band buffer's place in its frame.
#[derive(Clone, Copy, Debug)]
pub struct View {
    /// Width in pixels.
    pub width: usize,
    /// Rows in the buffer.
    pub rows: usize,
    /// Frame row of the buffer's first row.
    pub row0: usize,
    /// Rows in the frame.
    pub height: usize,
}

/// OpenCV's `BORDER_REFLECT_101`: …, 2, 1 | 0, 1, …, n−1 | n−2, … (repeated as needed).
pub fn reflect101(mut p: isize, n: usize) -> usize {
    let n = n as isize;
    if n == 1 {
        return 0;
    }
    while p < 0 || p >= n {
        p = if p < 0 { -p } else { 2 * n - 2 - p };
    }
    p as usize
}

impl View {
    fn col(&self, x: usize, dx: isize) -> usize {
        reflect101(x as isize + dx, self.width)
    }

    /// The buffer row holding frame row `row0 + y + dy` (reflected, then clamped).
    fn row(&self, y: usize, dy: isize) -> usize {
        let frame_row = reflect101((self.row0 + y) as isize + dy, self.height) as isize;
        (frame_row - self.row0 as isize).clamp(0, self.rows as isize - 1) as usize
    }

    fn at(&self, y: usize, x: usize, c: usize) -> usize {
        (y * self.width + x) * CHANNELS + c
    }
}

/// Gaussian weights for side `k` and `sigma`, in 14-bit fixed point, summing to 2^14.
pub fn gauss_weights(k: u32, sigma: f32) -> Vec<u32> {
    let r = (k / 2) as f64;
    let s = f64::from(sigma);
    let g: Vec<f64> = (0..k)
        .map(|i| (-((i as f64 - r).powi(2)) / (2.0 * s * s)).exp())
        .collect();
    let total: f64 = g.iter().sum();
    let mut w: Vec<u32> = g
        .iter()
        .map(|v| (v / total * 16384.0).round() as u32)
        .collect();
    let sum: u32 = w.iter().sum();
    let centre = (k / 2) as usize;
    w[centre] = w[centre] + 16384 - sum; // exact sum, the error goes to the largest weight
    w
}

/// Gaussian fixed point: row pass keeps 8 fractional bits, column pass rounds half up.
pub const GAUSS_ROW_SHIFT: u32 = 6;
/// Fixed-point shift of the Gaussian's vertical pass.
pub const GAUSS_COL_SHIFT: u32 = 22;

/// Runs `filter` on a band buffer from `src` to `dst`; `tmp` is scratch of the same length.
///
/// A user kernel has no reference: the CPU backends refuse chains that hold one before any
/// frame is read (`backend::cpu`), so it never reaches here.
pub fn apply(filter: &Filter, v: &View, src: &[u8], dst: &mut [u8], tmp: &mut [u16]) {
    let n = v.width * v.rows * CHANNELS;
    let (src, dst, tmp) = (&src[..n], &mut dst[..n], &mut tmp[..n]);
    match *filter {
        Filter::Copy => dst.copy_from_slice(src),
        Filter::Invert => dst.iter_mut().zip(src).for_each(|(d, s)| *d = 255 - s),
        // A chain that changes the size runs on whole frames (`Chain::apply_reference`), each
        // geometry filter alone: never banded.
        // `fps:N` changes no pixel (the plan takes it out of the backend's chain).
        Filter::Geometry(_) | Filter::Rate(_) => dst.copy_from_slice(src),
        Filter::Text(ref t) => {
            let size = FrameSize::new(v.width, v.height);
            let band = super::text::Band {
                width: v.width,
                rows: v.rows,
                row0: v.row0,
            };
            t.place(size).draw(super::text::atlas(), band, src, dst);
        }
        Filter::Gray => {
            for (d, s) in dst.chunks_exact_mut(3).zip(src.chunks_exact(3)) {
                d.fill(gray_value(s[0], s[1], s[2]));
            }
        }
        Filter::Gain { alpha, beta } => {
            let t = gain_table(alpha, beta);
            dst.iter_mut()
                .zip(src)
                .for_each(|(d, s)| *d = t[usize::from(*s)]);
        }
        Filter::Box { k } => box_blur(v, src, dst, tmp, k),
        Filter::Gauss { k, sigma } => gauss(v, src, dst, tmp, k, sigma),
        Filter::Sobel | Filter::Sharpen { .. } | Filter::Median3 => {
            neighbourhood(filter, v, src, dst)
        }
        Filter::Kernel(ref k) => unreachable!(
            "{}: user kernels have no CPU reference; the CPU backends refuse them at start",
            k.function
        ),
    }
}

/// `box:K`: the mean of a K×K square, as OpenCV's `blur`.
fn box_blur(v: &View, src: &[u8], dst: &mut [u8], tmp: &mut [u16], k: u32) {
    let weights = Separable {
        r: (k / 2) as isize,
        w: |_| 1,
        row_out: |sum| sum as u16,
        col_out: |sum| {
            let area = k * k;
            ((sum + area / 2) / area) as u8
        },
    };
    separable(v, src, dst, tmp, weights);
}

/// `gauss:K:SIGMA`, in OpenCV's fixed-point arithmetic.
fn gauss(v: &View, src: &[u8], dst: &mut [u8], tmp: &mut [u16], k: u32, sigma: f32) {
    let w = gauss_weights(k, sigma);
    let weights = Separable {
        r: (k / 2) as isize,
        w: |i| w[i],
        row_out: |sum| ((sum + (1 << (GAUSS_ROW_SHIFT - 1))) >> GAUSS_ROW_SHIFT) as u16,
        col_out: |sum| ((sum + (1 << (GAUSS_COL_SHIFT - 1))) >> GAUSS_COL_SHIFT) as u8,
    };
    separable(v, src, dst, tmp, weights);
}

/// The 3×3 filters: `sobel`, `sharpen` and `median3`, each pixel from its neighbours
/// (reflected at the band's edges as at the frame's).
fn neighbourhood(filter: &Filter, v: &View, src: &[u8], dst: &mut [u8]) {
    let p = |y: usize, x: usize, c: usize, dy: isize, dx: isize| {
        src[v.at(v.row(y, dy), v.col(x, dx), c)]
    };
    match *filter {
        Filter::Sobel => each_pixel(v, dst, |y, x, c| {
            let p = |dy: isize, dx: isize| i32::from(p(y, x, c, dy, dx));
            let gx = p(-1, 1) + 2 * p(0, 1) + p(1, 1) - p(-1, -1) - 2 * p(0, -1) - p(1, -1);
            let gy = p(1, -1) + 2 * p(1, 0) + p(1, 1) - p(-1, -1) - 2 * p(-1, 0) - p(-1, 1);
            sobel_value(gx, gy)
        }),
        Filter::Sharpen { amount } => {
            let (keep, take) = (1.0 + amount, -amount);
            each_pixel(v, dst, |y, x, c| {
                let p = |dy: isize, dx: isize| u32::from(p(y, x, c, dy, dx));
                let s = p(-1, -1)
                    + 2 * p(-1, 0)
                    + p(-1, 1)
                    + 2 * (p(0, -1) + 2 * p(0, 0) + p(0, 1))
                    + p(1, -1)
                    + 2 * p(1, 0)
                    + p(1, 1);
                let blur = (s + 8) >> 4;
                sharpen_value(p(0, 0) as u8, blur as u8, keep, take)
            })
        }
        _ => each_pixel(v, dst, |y, x, c| {
            let mut w = [0u8; 9];
            for (i, (dy, dx)) in (-1..=1)
                .flat_map(|dy| (-1..=1).map(move |dx| (dy, dx)))
                .enumerate()
            {
                w[i] = p(y, x, c, dy, dx);
            }
            w.sort_unstable();
            w[4]
        }),
    }
}

/// round_half_even((sat|gx| + sat|gy|) / 2): OpenCV's convertScaleAbs + addWeighted(0.5, 0.5).
pub fn sobel_value(gx: i32, gy: i32) -> u8 {
    let s = gx.unsigned_abs().min(255) + gy.unsigned_abs().min(255);
    let q = s / 2;
    (if s % 2 == 1 && q % 2 == 1 { q + 1 } else { q }) as u8
}

/// saturate(round_half_even(v·keep + blur·take)) with an f32 multiply, multiply, add.
pub fn sharpen_value(v: u8, blur: u8, keep: f32, take: f32) -> u8 {
    let y = f32::from(v) * keep + f32::from(blur) * take;
    y.round_ties_even().clamp(0.0, 255.0) as u8
}

fn each_pixel(v: &View, dst: &mut [u8], mut f: impl FnMut(usize, usize, usize) -> u8) {
    for y in 0..v.rows {
        for x in 0..v.width {
            for c in 0..CHANNELS {
                dst[v.at(y, x, c)] = f(y, x, c);
            }
        }
    }
}

/// A separable filter's radius, integer weights `w(i)` (i = 0..2r) and the rounding of each
/// pass's sums.
struct Separable<W, R, C> {
    r: isize,
    w: W,
    row_out: R,
    col_out: C,
}

/// A separable filter: a row pass into `tmp` (reflected columns), then a column pass
/// (reflected, clamped rows).
fn separable<W, R, C>(v: &View, src: &[u8], dst: &mut [u8], tmp: &mut [u16], f: Separable<W, R, C>)
where
    W: Fn(usize) -> u32,
    R: Fn(u32) -> u16,
    C: Fn(u32) -> u8,
{
    let Separable {
        r,
        w,
        row_out,
        col_out,
    } = f;
    for y in 0..v.rows {
        for x in 0..v.width {
            for c in 0..CHANNELS {
                let sum: u32 = (-r..=r)
                    .map(|d| w((d + r) as usize) * u32::from(src[v.at(y, v.col(x, d), c)]))
                    .sum();
                tmp[v.at(y, x, c)] = row_out(sum);
            }
        }
    }
    each_pixel(v, dst, |y, x, c| {
        let sum: u32 = (-r..=r)
            .map(|d| w((d + r) as usize) * u32::from(tmp[v.at(v.row(y, d), x, c)]))
            .sum();
        col_out(sum)
    });
}

/// Runs `chain` on one band buffer held in `bufs[0]`; returns the index of the buffer that
/// holds the result (filters ping-pong between the two, as on the GPU).
pub fn apply_chain(chain: &Chain, v: &View, bufs: &mut [Vec<u8>; 2], tmp: &mut [u16]) -> usize {
    let mut cur = 0;
    for filter in chain.filters() {
        let [a, b] = bufs;
        let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
        apply(filter, v, src, dst, tmp);
        cur = 1 - cur;
    }
    cur
}

/// Applies `chain` to a frame band by band, as `plan` cuts it.
pub fn apply_banded(chain: &Chain, size: FrameSize, plan: &BandPlan, src: &[u8], dst: &mut [u8]) {
    assert_eq!(src.len(), size.bytes());
    assert_eq!(dst.len(), size.bytes());
    let stride = size.stride();
    let cap = plan.max_input_rows() * stride;
    let mut bufs = [vec![0u8; cap], vec![0u8; cap]];
    let mut tmp = vec![0u16; cap];
    for band in plan.bands() {
        let rows = &band.input_rows;
        bufs[0][..rows.len() * stride]
            .copy_from_slice(&src[rows.start * stride..rows.end * stride]);
        let view = View {
            width: size.width,
            rows: rows.len(),
            row0: rows.start,
            height: size.height,
        };
        let r = apply_chain(chain, &view, &mut bufs, &mut tmp);
        let off = band.offset_in_input() * stride;
        let len = band.rows.len() * stride;
        dst[band.rows.start * stride..][..len].copy_from_slice(&bufs[r][off..off + len]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pattern;

    #[test]
    fn reflects_like_opencv() {
        let r: Vec<usize> = (-3..8).map(|p| reflect101(p, 5)).collect();
        assert_eq!(r, [3, 2, 1, 0, 1, 2, 3, 4, 3, 2, 1]);
        assert_eq!(reflect101(-7, 3), 1); // reflected more than once
        assert_eq!(reflect101(5, 1), 0);
    }

    #[test]
    fn gauss_weights_sum_exactly_and_are_symmetric() {
        for (k, s) in [(3, 0.8), (13, 2.0), (31, 10.0), (5, 0.3)] {
            let w = gauss_weights(k, s);
            assert_eq!(w.iter().sum::<u32>(), 16384);
            for i in 0..w.len() {
                assert_eq!(w[i], w[w.len() - 1 - i]);
            }
        }
    }

    #[test]
    fn sobel_rounds_half_to_even() {
        assert_eq!(sobel_value(3, 0), 2); // 1.5 -> 2
        assert_eq!(sobel_value(5, 0), 2); // 2.5 -> 2
        assert_eq!(sobel_value(-400, 300), 255);
    }

    #[test]
    fn flat_images_stay_flat() {
        let size = FrameSize::new(9, 7);
        let src = vec![77u8; size.bytes()];
        let mut dst = vec![0u8; size.bytes()];
        for chain in ["blur:5", "gauss:1.5", "median3", "sharpen:2", "gauss:31,10"] {
            let c: Chain = chain.parse().unwrap();
            c.apply_reference(size, &src, &mut dst);
            assert!(dst.iter().all(|&v| v == 77), "{chain}");
        }
        let c: Chain = "sobel".parse().unwrap();
        c.apply_reference(size, &src, &mut dst);
        assert!(dst.iter().all(|&v| v == 0));
    }

    /// Output is bit-identical for every band count, including bands thinner than the halo
    /// and halos taller than the frame.
    #[test]
    fn banding_is_invisible() {
        let chains = [
            "blur:3",
            "blur:7",
            "gauss:2",
            "gauss:5,1.1",
            "sobel",
            "sharpen:1.5",
            "median3",
            "gray,gauss:2,sobel",
            "invert,blur:31",
            "gauss:31,10,median3",
        ];
        for size in [
            FrameSize::new(33, 17),
            FrameSize::new(64, 5),
            FrameSize::new(13, 1),
        ] {
            let mut src = vec![0u8; size.bytes()];
            pattern::draw(size, 3, &mut src);
            for chain in chains {
                let c: Chain = chain.parse().unwrap();
                let mut whole = vec![0u8; size.bytes()];
                c.apply_reference(size, &src, &mut whole);
                for bands in 2..=16.min(size.height) {
                    let plan = BandPlan::new(size.height, bands, c.radius()).unwrap();
                    let mut banded = vec![0u8; size.bytes()];
                    apply_banded(&c, size, &plan, &src, &mut banded);
                    assert!(banded == whole, "{chain} at {size} with {bands} bands");
                }
            }
        }
    }
}

/// YUV ⇄ BGR, exactly as OpenCV 4.6's `cvtColor` does it for 4:2:0 (`COLOR_YUV2BGR_I420`,
/// `_NV12`, `COLOR_YUV2BGR_YUY2`, `COLOR_BGR2YUV_I420`): BT.601, video range, 20-bit fixed
/// point; each chroma sample serves the pixels it covers (no interpolation), and a 2×2
/// block's chroma is computed from its top-left pixel. `tests/yuv.rs` checks every (Y, U, V)
/// triple against OpenCV.
pub mod yuv {
    /// Fixed-point shift of every coefficient below.
    pub const SHIFT: u32 = 20;
    /// 1.164 · 2^20: luma's scale.
    pub const CY: i32 = 1_220_542;
    /// 2.018 · 2^20: U into blue.
    pub const CUB: i32 = 2_116_026;
    /// −0.391 · 2^20: U into green.
    pub const CUG: i32 = -409_993;
    /// −0.813 · 2^20: V into green.
    pub const CVG: i32 = -852_492;
    /// 1.596 · 2^20: V into red.
    pub const CVR: i32 = 1_673_527;
    /// BGR to Y: red, green, blue weights.
    pub const CRY: i32 = 269_484;
    /// Green's weight in Y.
    pub const CGY: i32 = 528_482;
    /// Blue's weight in Y.
    pub const CBY: i32 = 102_760;
    /// BGR to U: red's weight.
    pub const CRU: i32 = -155_188;
    /// Green's weight in U.
    pub const CGU: i32 = -305_135;
    /// Blue's weight in U (and red's in V).
    pub const CBU: i32 = 460_324;
    /// Green's weight in V.
    pub const CGV: i32 = -385_875;
    /// Blue's weight in V.
    pub const CBV: i32 = -74_448;

    fn sat(v: i32) -> u8 {
        v.clamp(0, 255) as u8
    }

    /// One pixel: (Y, U, V) to [B, G, R].
    pub fn to_bgr(y: u8, u: u8, v: u8) -> [u8; 3] {
        let half = 1 << (SHIFT - 1);
        let (uu, vv) = (i32::from(u) - 128, i32::from(v) - 128);
        let yy = (i32::from(y) - 16).max(0) * CY;
        [
            sat((yy + half + CUB * uu) >> SHIFT),
            sat((yy + half + CVG * vv + CUG * uu) >> SHIFT),
            sat((yy + half + CVR * vv) >> SHIFT),
        ]
    }

    /// One pixel's Y.
    pub fn luma(b: u8, g: u8, r: u8) -> u8 {
        let yy = CRY * i32::from(r) + CGY * i32::from(g) + CBY * i32::from(b);
        sat((yy + (1 << (SHIFT - 1)) + (16 << SHIFT)) >> SHIFT)
    }

    /// One pixel's (U, V).
    pub fn chroma(b: u8, g: u8, r: u8) -> (u8, u8) {
        let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
        let add = (1 << (SHIFT - 1)) + (128 << SHIFT);
        let u = CRU * r + CGU * g + CBU * b + add;
        let v = CBU * r + CGV * g + CBV * b + add;
        (sat(u >> SHIFT), sat(v >> SHIFT))
    }
}
