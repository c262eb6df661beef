//! Pixel formats: the layout a frame has in the ring and over PCIe (the source's own: BGR,
//! I420, NV12, YUYV, …), where a band's planes lie (`band_planes`), and the conversions to
//! and from the packed BGR every filter is defined on, with the reference arithmetic
//! (`filter::reference::yuv`, which is OpenCV 4.6's `cvtColor`). `apply_reference` defines
//! a chain between two formats; both backends are checked against it. A chain of geometry
//! and text runs on a YUV frame's own planes instead (`planes`). A picture made for a model
//! is resized and placed as OpenCV's `cv2.resize` does (`linear`) and laid out and
//! normalised by a table (`lookup`), on the CPU here and on the device from the same tables.
//!
//! Invariants: 4:2:0 and 4:2:2 frames have even widths (4:2:0 even heights too), as ffmpeg's
//! `yuv420p` pipes do; every format's frame is `bytes(size)` long, planes one after another;
//! a band buffer of a format is laid out as a frame of the band's rows.

use std::fmt;
use std::ops::Range;

use crate::frame::FrameSize;

mod convert;
pub mod linear;
pub mod lookup;
pub mod planes;

use crate::filter::reference::yuv;
pub use convert::{apply_reference, from_bgr, repack_420, to_bgr};
use convert::{i420_rows, i420_to_nv12};

/// A raw frame's layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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

impl PixelFormat {
    /// Its names: its own first (what `Display` writes), then the other names it is read
    /// by (ffmpeg's, FourCCs).
    pub fn names(self) -> &'static [&'static str] {
        match self {
            PixelFormat::Bgr24 => &["bgr24", "bgr"],
            PixelFormat::I420 => &["i420", "yuv420p", "iyuv"],
            PixelFormat::Nv12 => &["nv12"],
            PixelFormat::Yuyv => &["yuyv", "yuyv422", "yuy2"],
            PixelFormat::Yuv422p => &["yuv422p"],
            PixelFormat::Yuv444p => &["yuv444p"],
            PixelFormat::Gray => &["gray", "grey", "mono"],
        }
    }

    /// The format one of its names names (any case).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|f| f.names().iter().any(|n| n.eq_ignore_ascii_case(name)))
    }
}

impl fmt::Display for PixelFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.names()[0])
    }
}

impl PixelFormat {
    /// Every format, in `code` order.
    pub const ALL: [PixelFormat; 7] = [
        PixelFormat::Bgr24,
        PixelFormat::I420,
        PixelFormat::Nv12,
        PixelFormat::Yuyv,
        PixelFormat::Yuv422p,
        PixelFormat::Yuv444p,
        PixelFormat::Gray,
    ];

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
    pub fn check(self, size: FrameSize) -> Result<(), FormatError> {
        let odd_w = size.width % 2 == 1;
        let odd_h = size.height % 2 == 1;
        let bad = match self {
            PixelFormat::I420 | PixelFormat::Nv12 => odd_w || odd_h,
            PixelFormat::Yuyv | PixelFormat::Yuv422p => odd_w,
            _ => false,
        };
        if bad || size.width == 0 || size.height == 0 {
            return Err(FormatError::OddSize {
                format: self,
                size,
                height: if matches!(self, PixelFormat::I420 | PixelFormat::Nv12) {
                    " and height"
                } else {
                    ""
                },
            });
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

    /// Converts one packed BGR `size` frame (`src`) into this format (`dst`): I420 as
    /// OpenCV's `COLOR_BGR2YUV_I420`, NV12 as I420's values interleaved, gray as I420's Y
    /// plane; 4:2:2 and 4:4:4 with the same arithmetic, chroma from each block's left pixel.
    pub fn from_bgr(self, size: FrameSize, src: &[u8], dst: &mut [u8]) {
        let (w, h) = (size.width, size.height);
        match self {
            PixelFormat::I420 => {
                let (luma, chroma) = dst.split_at_mut(w * h);
                let (u, v) = chroma.split_at_mut(w * h / 4);
                i420_rows(size, src, 0..h, luma, u, v);
            }
            PixelFormat::Nv12 => {
                PixelFormat::I420.from_bgr(size, src, dst);
                i420_to_nv12(size, dst);
            }
            PixelFormat::Gray => {
                for (y, p) in dst[..w * h].iter_mut().zip(src.chunks_exact(3)) {
                    *y = yuv::luma(p[0], p[1], p[2]);
                }
            }
            PixelFormat::Yuyv | PixelFormat::Yuv422p | PixelFormat::Yuv444p => {
                // Chroma of each block's left pixel, as 4:2:0's comes from its top-left one.
                let step = if self == PixelFormat::Yuv444p { 1 } else { 2 };
                let (cw, area) = (w / step, w * h);
                for row in 0..h {
                    for x in 0..w {
                        let p = &src[(row * w + x) * 3..][..3];
                        let y = yuv::luma(p[0], p[1], p[2]);
                        let left = &src[(row * w + x / step * step) * 3..][..3];
                        let (u, v) = yuv::chroma(left[0], left[1], left[2]);
                        let c = row * cw + x / step;
                        if self == PixelFormat::Yuyv {
                            let at = (row * w + x) * 2;
                            dst[at] = y;
                            dst[at + 1] = if x % 2 == 0 { u } else { v };
                        } else {
                            dst[row * w + x] = y;
                            dst[area + c] = u;
                            dst[area + cw * h + c] = v;
                        }
                    }
                }
            }
            PixelFormat::Bgr24 => dst.copy_from_slice(&src[..w * h * 3]),
        }
    }

    /// Whether framepipe writes frames in this format (its GPU and CPU backends both
    /// convert into it; `from_bgr` also renders the others, for the test pattern).
    pub fn writable(self) -> bool {
        matches!(
            self,
            PixelFormat::Bgr24 | PixelFormat::I420 | PixelFormat::Nv12 | PixelFormat::Gray
        )
    }

    /// Rows a band of this format starts and ends on a multiple of: 2 for 4:2:0, whose
    /// chroma rows each belong to two luma rows; else 1.
    pub fn row_align(self) -> usize {
        match self {
            PixelFormat::I420 | PixelFormat::Nv12 => 2,
            _ => 1,
        }
    }

    /// The format's number in the GPU's conversion kernels (`kernels/convert.cu`): its place
    /// in `ALL`.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// Where rows `rows` of a `size` frame lie: for each plane, its bytes in the frame and
    /// their place in a band buffer that holds just those rows, laid out as a frame of
    /// `rows.len()` rows of this format (planes one after another). `rows` starts and ends
    /// on multiples of `row_align` (or at the frame's end).
    pub fn band_planes(
        self,
        size: FrameSize,
        rows: Range<usize>,
    ) -> Vec<(Range<usize>, Range<usize>)> {
        let band = FrameSize::new(size.width, rows.len());
        let mut out: Vec<(Range<usize>, Range<usize>)> = Vec::new();
        let (frame, banded) = (Planes::packed(self, size), Planes::packed(self, band));
        for (f, b) in frame.iter().zip(banded.iter()) {
            let (first, last) = (rows.start / f.rows_per, rows.end.div_ceil(f.rows_per));
            let len = (last - first) * f.pitch;
            let at = f.offset + first * f.pitch;
            match out.last_mut() {
                // Planes that follow each other in both (a band of the whole frame) are one
                // range: one copy instead of three.
                Some((fr, br)) if fr.end == at && br.end == b.offset => {
                    fr.end += len;
                    br.end += len;
                }
                _ => out.push((at..at + len, b.offset..b.offset + len)),
            }
        }
        out
    }
}

/// One copy between a frame and a band buffer (`PixelFormat::band_copies`): `height` runs of
/// `width` bytes, run `k` at `src + k·src_pitch` in the frame and at `dst + k·dst_pitch` in
/// the band buffer: a 2D copy, or a plain one where `height` is 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BandCopy {
    /// The first run's offset in the frame.
    pub src: usize,
    /// From one run to the next in the frame.
    pub src_pitch: usize,
    /// The first run's offset in the band buffer.
    pub dst: usize,
    /// From one run to the next in the band buffer.
    pub dst_pitch: usize,
    /// Bytes a run.
    pub width: usize,
    /// Runs.
    pub height: usize,
}

impl PixelFormat {
    /// `band_planes` as the fewest copies: planes of one length whose places step evenly
    /// in the frame and in the band buffer (the chroma planes of 4:2:0 and 4:2:2, all three
    /// of 4:4:4) are one 2D copy; a band of I420 is then two copies each way, not three.
    pub fn band_copies(self, size: FrameSize, rows: Range<usize>) -> Vec<BandCopy> {
        let mut out: Vec<BandCopy> = Vec::new();
        for (f, b) in self.band_planes(size, rows) {
            let len = f.len();
            if let Some(c) = out.last_mut() {
                let (sp, dp) = match c.height {
                    1 => (f.start.wrapping_sub(c.src), b.start.wrapping_sub(c.dst)),
                    _ => (c.src_pitch, c.dst_pitch),
                };
                let steps_on = f.start > c.src
                    && b.start > c.dst
                    && f.start == c.src + c.height * sp
                    && b.start == c.dst + c.height * dp;
                if c.width == len && steps_on && sp >= len && dp >= len {
                    (c.src_pitch, c.dst_pitch) = (sp, dp);
                    c.height += 1;
                    continue;
                }
            }
            out.push(BandCopy {
                src: f.start,
                src_pitch: len,
                dst: b.start,
                dst_pitch: len,
                width: len,
                height: 1,
            });
        }
        out
    }
}

/// One plane of a frame: where it starts in the frame's bytes, the bytes from one of its
/// rows to the next (`pitch`: a packed plane's row bytes, more where a decoder pads rows),
/// and how many of the frame's rows share one of its rows (2 for 4:2:0 chroma).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plane {
    /// Bytes from the frame's start.
    pub offset: usize,
    /// Bytes from one row of the plane to the next.
    pub pitch: usize,
    /// Frame rows per row of this plane.
    pub rows_per: usize,
}

/// A frame's planes (one to three), in order, without an allocation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Planes {
    count: usize,
    planes: [Plane; 3],
}

impl Planes {
    /// The planes of a `size` frame of `format` laid out as `PixelFormat::bytes` counts
    /// them: one after another, rows without padding (where each starts, its bytes per row,
    /// and how many of the frame's rows share one of its rows).
    pub fn packed(format: PixelFormat, size: FrameSize) -> Self {
        let (w, h) = (size.width, size.height);
        let plane = |offset, pitch, rows_per| Plane {
            offset,
            pitch,
            rows_per,
        };
        let none = Plane::default();
        let (count, planes) = match format {
            PixelFormat::Bgr24 => (1, [plane(0, w * 3, 1), none, none]),
            PixelFormat::Gray => (1, [plane(0, w, 1), none, none]),
            PixelFormat::Yuyv => (1, [plane(0, w * 2, 1), none, none]),
            PixelFormat::I420 => (
                3,
                [
                    plane(0, w, 1),
                    plane(w * h, w / 2, 2),
                    plane(w * h + w * h / 4, w / 2, 2),
                ],
            ),
            PixelFormat::Nv12 => (2, [plane(0, w, 1), plane(w * h, w, 2), none]),
            PixelFormat::Yuv422p => (
                3,
                [
                    plane(0, w, 1),
                    plane(w * h, w / 2, 1),
                    plane(w * h + w * h / 2, w / 2, 1),
                ],
            ),
            PixelFormat::Yuv444p => (
                3,
                [plane(0, w, 1), plane(w * h, w, 1), plane(2 * w * h, w, 1)],
            ),
        };
        Self { count, planes }
    }

    /// The planes, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Plane> {
        self.planes[..self.count].iter()
    }

    /// Whether these are the packed planes of a `size` frame of `format`.
    pub fn is_packed(&self, format: PixelFormat, size: FrameSize) -> bool {
        *self == Self::packed(format, size)
    }

    /// The planes `planes`, in order (a decoder's own layout).
    pub fn with<const N: usize>(planes: [Plane; N]) -> Self {
        assert!((1..=3).contains(&N), "a frame has one to three planes");
        let mut out = Self {
            count: N,
            planes: [Plane::default(); 3],
        };
        out.planes[..N].copy_from_slice(&planes);
        out
    }

    /// A `size` frame of `format` laid out as these planes in `from` (its bytes from the
    /// frame's first on, `extent` of them at least) copied into `to`, packed
    /// (`Planes::packed`): each plane's rows without their padding.
    pub fn pack(&self, format: PixelFormat, size: FrameSize, from: &[u8], to: &mut [u8]) {
        let packed = Self::packed(format, size);
        for (p, k) in self.iter().zip(packed.iter()) {
            for row in 0..size.height.div_ceil(k.rows_per) {
                let (at, into) = (p.offset + row * p.pitch, k.offset + row * k.pitch);
                to[into..into + k.pitch].copy_from_slice(&from[at..at + k.pitch]);
            }
        }
    }

    /// The bytes a `size` frame of `format` laid out as these planes spans, from its first
    /// plane's start to the end of its last row's samples (a decoder's padding after that
    /// is not counted): what every one of `band_copies`' runs lies inside.
    pub fn extent(&self, format: PixelFormat, size: FrameSize) -> usize {
        let packed = Self::packed(format, size);
        self.iter()
            .zip(packed.iter())
            .map(|(p, k)| {
                let rows = size.height.div_ceil(k.rows_per);
                p.offset + (rows.max(1) - 1) * p.pitch + k.pitch
            })
            .max()
            .unwrap_or(0)
    }

    /// The copies that bring rows `rows` of a `size` frame of `format`, laid out as these
    /// planes say (rows at their pitch: a decoder's surface), into a band buffer laid out as
    /// a packed frame of those rows (as `PixelFormat::band_copies` fills it): one 2D copy a
    /// plane. `rows` starts and ends on the format's row multiple.
    pub fn band_copies(
        &self,
        format: PixelFormat,
        size: FrameSize,
        rows: Range<usize>,
    ) -> Vec<BandCopy> {
        let band = FrameSize::new(size.width, rows.len());
        let (packed, banded) = (Self::packed(format, size), Self::packed(format, band));
        self.iter()
            .zip(packed.iter().zip(banded.iter()))
            .map(|(p, (k, b))| {
                let first = rows.start / k.rows_per;
                BandCopy {
                    src: p.offset + first * p.pitch,
                    src_pitch: p.pitch,
                    dst: b.offset,
                    dst_pitch: k.pitch,
                    width: k.pitch,
                    height: rows.end.div_ceil(k.rows_per) - first,
                }
            })
            .collect()
    }
}

/// The formats of a backend's frames: what its input buffers hold (the source's) and what
/// its output buffers must hold (the sink's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Formats {
    /// The source's frames.
    pub input: PixelFormat,
    /// The frames the sink takes.
    pub output: PixelFormat,
}

impl Formats {
    /// Packed BGR in and out (what every filter is defined on).
    pub const BGR: Formats = Formats {
        input: PixelFormat::Bgr24,
        output: PixelFormat::Bgr24,
    };

    /// The row multiple bands must keep for both formats.
    pub fn row_align(self) -> usize {
        self.input.row_align().max(self.output.row_align())
    }

    /// Whether a frame goes through untouched: a chain that changes nothing (`identity`,
    /// `Chain::is_identity`) between one format in and out passes the planes as they are,
    /// bit for bit.
    pub fn passthrough(self, identity: bool) -> bool {
        self.input == self.output && identity
    }

    /// Whether a frame's samples go through untouched in another layout: a chain that
    /// changes nothing between the two 4:2:0 layouts (I420 and NV12) only moves the chroma
    /// samples (`repack_420`), never through BGR, so NVDEC's NV12 written as I420 is the
    /// decoder's picture bit for bit.
    pub fn repacked(self, identity: bool) -> bool {
        use PixelFormat::{Nv12, I420};
        identity && matches!((self.input, self.output), (I420, Nv12) | (Nv12, I420))
    }

    /// Fails for formats no backend can carry or a size they can't hold.
    pub fn check(self, size: FrameSize) -> Result<(), FormatError> {
        self.check_resized(size, size)
    }

    /// `check` for `size` frames in that the backend makes into `out` frames.
    pub fn check_resized(self, size: FrameSize, out: FrameSize) -> Result<(), FormatError> {
        if !self.output.writable() {
            return Err(FormatError::NotWritten(self.output));
        }
        self.input.check(size)?;
        self.output.check(out)
    }
}

/// Pixel formats that can't be named, written or hold a size.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FormatError {
    /// A name that is no format.
    #[error("unknown pixel format '{0}' (bgr, i420, nv12, yuyv, yuv422p, yuv444p, gray)")]
    Unknown(String),
    /// A format read, never written.
    #[error("{0} can't be written (bgr24, i420, nv12 and gray can)")]
    NotWritten(PixelFormat),
    /// A size subsampled chroma can't hold.
    #[error("{format} frames need an even width{height} (as ffmpeg's): {size} can't be carried; scale or crop it first (ffmpeg -vf crop=trunc(iw/2)*2:trunc(ih/2)*2)")]
    OddSize {
        /// The format.
        format: PixelFormat,
        /// The size.
        size: FrameSize,
        /// " and height" where the height must be even too.
        height: &'static str,
    },
}

impl std::str::FromStr for Formats {
    type Err = FormatError;

    /// `i420` (in and out), or `i420:bgr` (in, then out; also `i420->bgr`, `i420>bgr`,
    /// `i420/bgr`); ffmpeg's names work too (`yuv420p`, `bgr`, `yuyv422`, `grey`).
    fn from_str(s: &str) -> Result<Self, FormatError> {
        let one = |t: &str| {
            let t = t.trim().to_ascii_lowercase();
            PixelFormat::from_name(&t).ok_or(FormatError::Unknown(t))
        };
        let split = ["->", ":", ">", "/"]
            .iter()
            .find_map(|sep| s.split_once(sep));
        let (input, output) = match split {
            Some((a, b)) => (one(a)?, one(b)?),
            None => (one(s)?, one(s)?),
        };
        let f = Formats { input, output };
        if !output.writable() {
            return Err(FormatError::NotWritten(output));
        }
        Ok(f)
    }
}

impl fmt::Display for Formats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.input == self.output {
            write!(f, "{}", self.input)
        } else {
            write!(f, "{} in, {} out", self.input, self.output)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::convert::{i420_parallel, to_bgr_parallel};
    use super::*;

    #[test]
    fn band_planes_cover_each_plane_once() {
        let size = FrameSize::new(8, 6);
        for format in [PixelFormat::I420, PixelFormat::Nv12, PixelFormat::Yuv422p] {
            let mut seen = vec![0u8; format.bytes(size)];
            for rows in [0..2, 2..6] {
                let mut band_bytes = 0;
                for (frame, band) in format.band_planes(size, rows.clone()) {
                    assert_eq!(frame.len(), band.len());
                    assert_eq!(band.start, band_bytes, "{format} planes follow each other");
                    band_bytes = band.end;
                    seen[frame].iter_mut().for_each(|v| *v += 1);
                }
                assert_eq!(band_bytes, format.bytes(FrameSize::new(8, rows.len())));
            }
            assert!(seen.iter().all(|&v| v == 1), "{format}");
        }
        assert_eq!(
            PixelFormat::I420.band_planes(size, 2..4),
            vec![(16..32, 0..16), (52..56, 16..20), (64..68, 20..24)]
        );
        // A band of the whole frame is one copy.
        assert_eq!(
            PixelFormat::I420.band_planes(size, 0..6),
            vec![(0..72, 0..72)]
        );
    }

    #[test]
    fn band_copies_move_the_bytes_band_planes_name() {
        // Every format, odd and even cuts: the copies, run by run, move exactly what
        // band_planes names, and a band of I420 or 4:2:2 is two copies, of 4:4:4 one.
        for format in PixelFormat::ALL {
            for size in [
                FrameSize::new(8, 6),
                FrameSize::new(10, 12),
                FrameSize::new(64, 36),
            ] {
                if format.check(size).is_err() {
                    continue;
                }
                let align = format.row_align();
                let cut = [0, align * 2, size.height / 2 / align * align, size.height];
                for rows in cut.windows(2).map(|w| w[0]..w[1]).filter(|r| !r.is_empty()) {
                    let frame: Vec<u8> = (0..format.bytes(size))
                        .map(|i| (i * 7 % 251) as u8)
                        .collect();
                    let n = format.bytes(FrameSize::new(size.width, rows.len()));
                    let (mut want, mut got) = (vec![0u8; n], vec![0u8; n]);
                    for (f, b) in format.band_planes(size, rows.clone()) {
                        want[b].copy_from_slice(&frame[f]);
                    }
                    let copies = format.band_copies(size, rows.clone());
                    for c in &copies {
                        assert!(c.src_pitch >= c.width && c.dst_pitch >= c.width);
                        for k in 0..c.height {
                            let (s, d) = (c.src + k * c.src_pitch, c.dst + k * c.dst_pitch);
                            got[d..d + c.width].copy_from_slice(&frame[s..s + c.width]);
                        }
                    }
                    assert_eq!(got, want, "{format} {size} rows {rows:?}");
                    let whole = rows.len() == size.height;
                    let most = match format {
                        _ if whole => 1,
                        PixelFormat::I420 | PixelFormat::Yuv422p | PixelFormat::Nv12 => 2,
                        _ => 1,
                    };
                    assert!(copies.len() <= most, "{format} {rows:?}: {copies:?}");
                }
            }
        }
    }

    #[test]
    fn codes_are_places_in_all() {
        for (i, f) in PixelFormat::ALL.iter().enumerate() {
            assert_eq!(f.code(), i as i32);
        }
    }

    #[test]
    fn formats_parse_as_bench_takes_them() {
        let f: Formats = "i420:bgr".parse().unwrap();
        assert_eq!((f.input, f.output), (PixelFormat::I420, PixelFormat::Bgr24));
        assert_eq!("nv12".parse::<Formats>().unwrap().to_string(), "nv12");
        let f: Formats = "yuv420p->bgr".parse().unwrap();
        assert_eq!((f.input, f.output), (PixelFormat::I420, PixelFormat::Bgr24));
        assert!("yuyv"
            .parse::<Formats>()
            .unwrap_err()
            .to_string()
            .contains("can't be written"));
        assert!("rgb"
            .parse::<Formats>()
            .unwrap_err()
            .to_string()
            .contains("unknown pixel format"));
    }

    #[test]
    fn gray_pixels_have_neutral_chroma_exactly() {
        // `gray` makes B = G = R; their chroma is 128 for every value, so a YUV output of
        // a gray frame could set its chroma planes to 128 directly.
        for v in 0..=255u8 {
            assert_eq!(yuv::chroma(v, v, v), (128, 128), "{v}");
        }
    }

    #[test]
    fn pitched_planes_fill_a_band_as_a_packed_frame_does() {
        // An NV12 picture as NVDEC leaves it: rows padded to a pitch of 16, the chroma plane
        // after a gap. Its bands, copied run by run, hold what the packed frame's do.
        let (size, pitch, chroma) = (FrameSize::new(10, 8), 16, 16 * 8 + 32);
        let packed: Vec<u8> = (0..PixelFormat::Nv12.bytes(size))
            .map(|i| (i * 7 % 251) as u8)
            .collect();
        let mut surface = vec![0u8; chroma + pitch * 4];
        for r in 0..8 {
            surface[r * pitch..r * pitch + 10].copy_from_slice(&packed[r * 10..r * 10 + 10]);
        }
        for r in 0..4 {
            let from = 80 + r * 10;
            surface[chroma + r * pitch..chroma + r * pitch + 10]
                .copy_from_slice(&packed[from..from + 10]);
        }
        let planes = Planes::with([
            Plane {
                offset: 0,
                pitch,
                rows_per: 1,
            },
            Plane {
                offset: chroma,
                pitch,
                rows_per: 2,
            },
        ]);
        for rows in [0..8, 0..2, 2..6, 6..8] {
            let run = |copies: Vec<BandCopy>, from: &[u8]| {
                let mut band = vec![0u8; PixelFormat::Nv12.bytes(FrameSize::new(10, rows.len()))];
                for c in copies {
                    for k in 0..c.height {
                        let (s, d) = (c.src + k * c.src_pitch, c.dst + k * c.dst_pitch);
                        band[d..d + c.width].copy_from_slice(&from[s..s + c.width]);
                    }
                }
                band
            };
            let want = run(PixelFormat::Nv12.band_copies(size, rows.clone()), &packed);
            let got = run(
                planes.band_copies(PixelFormat::Nv12, size, rows.clone()),
                &surface,
            );
            assert_eq!(got, want, "rows {rows:?}");
        }
        // The runs of every band reach the end of the last chroma row's samples, no further.
        let extent = planes.extent(PixelFormat::Nv12, size);
        assert_eq!(extent, chroma + 3 * pitch + 10);
        let reach = |rows: Range<usize>| {
            planes
                .band_copies(PixelFormat::Nv12, size, rows)
                .iter()
                .map(|c| c.src + (c.height - 1) * c.src_pitch + c.width)
                .max()
                .unwrap()
        };
        assert_eq!(reach(0..8), extent);
        assert!(reach(0..2) <= extent && reach(2..6) <= extent);
        assert_eq!(
            Planes::packed(PixelFormat::I420, size).extent(PixelFormat::I420, size),
            PixelFormat::I420.bytes(size)
        );
    }

    #[test]
    fn copy_between_i420_and_nv12_moves_the_samples_untouched() {
        // A 4x2 frame: luma 0..8; I420's U plane 100, 101 and V plane 200, 201.
        let size = FrameSize::new(4, 2);
        let i420: Vec<u8> = (0..8).chain([100, 101, 200, 201]).collect();
        let nv12: Vec<u8> = (0..8).chain([100, 200, 101, 201]).collect();
        let there: Formats = "i420:nv12".parse().unwrap();
        let back: Formats = "nv12:i420".parse().unwrap();
        let copy: crate::filter::Chain = "copy".parse().unwrap();
        assert!(there.repacked(copy.is_identity()) && back.repacked(copy.is_identity()));
        assert!(!there.repacked(!copy.is_identity()));
        let mut out = vec![0; 12];
        apply_reference(&copy, size, there, &i420, &mut out);
        assert_eq!(out, nv12);
        apply_reference(&copy, size, back, &nv12, &mut out);
        assert_eq!(out, i420);
    }

    #[test]
    fn parallel_conversions_equal_the_serial_ones() {
        let size = FrameSize::new(64, 1000);
        for format in PixelFormat::ALL {
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
        for format in [PixelFormat::I420, PixelFormat::Nv12, PixelFormat::Gray] {
            let (mut a, mut b) = (vec![0; format.bytes(size)], vec![1; format.bytes(size)]);
            format.from_bgr(size, &bgr, &mut a);
            from_bgr(format, size, &bgr, &mut b);
            assert!(a == b, "{format}");
        }
    }
}
