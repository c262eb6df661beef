//! The mosaic's geometry, shared by whoever composes it (the CUDA backend's kernel, or the
//! mosaic sink on the CPU): the grid, the tiles' and the picture's sizes, where each input's
//! picture goes in its tile, and the nearest-neighbour maps that scale it there.
//!
//! As inputs join and leave a running wall the grid is made again (`Regrid`): the picture
//! keeps its size (its outputs opened at it), the tiles are as many as the inputs shown, and
//! every holder of the `Compose` takes the new grid before its next frame (`refresh`).
//!
//! Invariants: tiles are row-major in input order, all of one size (the largest input's
//! shape, scaled down, never up, to fit; after a regrid, the picture's size shared out); a
//! picture keeps its input's aspect in its tile
//! (letterboxed, centred); destination pixel `i` of a scaled axis of `m` pixels samples source
//! pixel `min(((2i + 1)·n) / 2m, n - 1)` of `n` (pixel centres), the one formula
//! `kernels/compose.cu` computes too, so both composers give the same bytes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// The mosaic's largest size: a 1080p screen.
pub const MAX_MOSAIC: FrameSize = FrameSize {
    width: 1920,
    height: 1080,
};

/// The shortest time between two pictures of the mosaic a backend hands on.
pub const PICTURE_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether a picture is due, the last having been made at `last` (None: none yet).
pub fn picture_due(last: Option<std::time::Instant>) -> bool {
    last.is_none_or(|t| t.elapsed() >= PICTURE_EVERY)
}

/// A rectangle of pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Area {
    /// Its left column.
    pub x: usize,
    /// Its top row.
    pub y: usize,
    /// Its width in pixels.
    pub width: usize,
    /// Its height in rows.
    pub height: usize,
}

/// The grid for `n` tiles where none is asked for: as square as possible, wider than tall.
pub fn auto_grid(n: usize) -> (usize, usize) {
    let cols = (1..=n.max(1)).find(|c| c * c >= n).unwrap_or(1);
    (cols, n.max(1).div_ceil(cols))
}

/// A mosaic's layout: a grid of `cols` columns of `tile`-sized tiles making a `canvas`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Columns of the grid.
    pub cols: usize,
    /// Rows of the grid.
    pub rows: usize,
    /// Every tile's size.
    pub tile: FrameSize,
    /// The whole picture's size.
    pub canvas: FrameSize,
}

impl Layout {
    /// The layout of `cols` × `rows` tiles for inputs of `sizes`: tiles of the widest and
    /// tallest input's size, or scaled down (keeping that shape) so that the mosaic fits
    /// `within` (the screen's unscaled area, at most `MAX_MOSAIC`).
    pub fn new(cols: usize, rows: usize, sizes: &[FrameSize], within: FrameSize) -> Self {
        let widest = sizes.iter().map(|s| s.width).max().unwrap_or(640);
        let tallest = sizes.iter().map(|s| s.height).max().unwrap_or(360);
        let within = FrameSize {
            width: within.width.min(MAX_MOSAIC.width),
            height: within.height.min(MAX_MOSAIC.height),
        };
        // The largest input's shape, scaled down (never up) until the grid fits.
        let scale = (within.width as f64 / (cols * widest) as f64)
            .min(within.height as f64 / (rows * tallest) as f64)
            .min(1.0);
        let tile = FrameSize {
            width: ((widest as f64 * scale) as usize).max(2) & !1,
            height: ((tallest as f64 * scale) as usize).max(2) & !1,
        };
        let canvas = FrameSize {
            width: tile.width * cols,
            height: tile.height * rows,
        };
        Self {
            cols,
            rows,
            tile,
            canvas,
        }
    }

    /// Tile `t`'s rectangle in the picture (row-major).
    pub fn tile_area(&self, t: usize) -> Area {
        Area {
            x: (t % self.cols) * self.tile.width,
            y: (t / self.cols) * self.tile.height,
            width: self.tile.width,
            height: self.tile.height,
        }
    }

    /// Where a `from` frame goes in the picture when it fills tile `t`.
    pub fn picture_area(&self, t: usize, from: FrameSize) -> Area {
        let tile = self.tile_area(t);
        let inner = fit_in(from, self.tile);
        Area {
            x: tile.x + inner.x,
            y: tile.y + inner.y,
            ..inner
        }
    }

    /// The tile under picture point (`x`, `y`), if any.
    pub fn tile_at(&self, x: usize, y: usize, tiles: usize) -> Option<usize> {
        let (col, row) = (x / self.tile.width, y / self.tile.height);
        let t = row * self.cols + col;
        (col < self.cols && t < tiles).then_some(t)
    }
}

/// Where a `from` picture goes in a `tile`: the largest rectangle of its aspect, centred
/// (relative to the tile).
pub fn fit_in(from: FrameSize, tile: FrameSize) -> Area {
    let (fw, fh) = (from.width as f64, from.height as f64);
    let scale = (tile.width as f64 / fw).min(tile.height as f64 / fh);
    let w = ((fw * scale).round() as usize).clamp(1, tile.width);
    let h = ((fh * scale).round() as usize).clamp(1, tile.height);
    Area {
        x: (tile.width - w) / 2,
        y: (tile.height - h) / 2,
        width: w,
        height: h,
    }
}

/// The source pixel each of `m` destination pixels samples, scaling `n` pixels to `m`
/// (module doc).
pub fn nearest(n: usize, m: usize) -> Vec<usize> {
    (0..m)
        .map(|i| (((2 * i + 1) * n) / (2 * m)).min(n - 1))
        .collect()
}

/// A scaler from one frame size into one area of a picture: the source column and row of
/// each destination column and row.
pub struct Scaler {
    /// The frames' size.
    pub from: FrameSize,
    /// Where in the picture they go.
    pub to: Area,
    cols: Vec<usize>,
    rows: Vec<usize>,
}

impl Scaler {
    /// The scaler of `from` frames into `to`.
    pub fn new(from: FrameSize, to: Area) -> Self {
        Self {
            from,
            to,
            cols: nearest(from.width, to.width),
            rows: nearest(from.height, to.height),
        }
    }

    /// The destination rows (relative to `to`) whose source rows lie in `rows`: the rows a
    /// band of those frame rows fills.
    pub fn rows_from(&self, rows: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let lo = self.rows.partition_point(|&r| r < rows.start);
        let hi = self.rows.partition_point(|&r| r < rows.end);
        lo..hi
    }

    /// Draws the packed BGR `frame` into `picture` (packed BGR, `stride` bytes a row).
    pub fn draw(&self, frame: &[u8], picture: &mut [u8], stride: usize) {
        let src_stride = self.from.width * 3;
        for (y, &sy) in self.rows.iter().enumerate() {
            let src = &frame[sy * src_stride..(sy + 1) * src_stride];
            let start = (self.to.y + y) * stride + self.to.x * 3;
            let dst = &mut picture[start..start + self.cols.len() * 3];
            for (d, &sx) in dst.chunks_exact_mut(3).zip(&self.cols) {
                d.copy_from_slice(&src[sx * 3..sx * 3 + 3]);
            }
        }
    }
}

/// Clears tile `area` of `picture` (packed BGR, `stride` bytes a row) to black.
pub fn clear(picture: &mut [u8], stride: usize, area: Area) {
    for y in area.y..area.y + area.height {
        picture[y * stride + area.x * 3..y * stride + (area.x + area.width) * 3].fill(0);
    }
}

/// Whose full frames a backend that composes the mosaic still downloads, besides the
/// picture: every input's (they have outputs of their own), one input's (the one shown
/// alone), or none. Shared by the mosaic (which says which input is shown alone) and the
/// backend (which reads it for each frame).
#[derive(Clone, Debug)]
pub struct FullFrames(Arc<AtomicUsize>);

impl FullFrames {
    const ALL: usize = usize::MAX;
    const NONE: usize = usize::MAX - 1;

    /// Every input's frames are downloaded (for good).
    pub fn all() -> Self {
        Self(Arc::new(AtomicUsize::new(Self::ALL)))
    }

    /// Only the input shown alone has its frames downloaded (none until one is).
    pub fn shown() -> Self {
        Self(Arc::new(AtomicUsize::new(Self::NONE)))
    }

    /// Whether input `input`'s frames are downloaded.
    pub fn wants(&self, input: usize) -> bool {
        let v = self.0.load(Ordering::Relaxed);
        v == Self::ALL || v == input
    }

    /// Input `input` is shown alone (None: the mosaic is shown); no change where every
    /// input's frames are downloaded anyway.
    pub fn show_alone(&self, input: Option<usize>) {
        let v = input.unwrap_or(Self::NONE).min(Self::NONE);
        let _ = self
            .0
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
                (old != Self::ALL).then_some(v)
            });
    }
}

/// A mosaic composed by the backend: its layout, the tile of each input (by `InputId`),
/// and whose full frames are still downloaded; laid out again as inputs join and leave the
/// run (`Regrid`), each holder taking the new grid before its next frame (`refresh`).
#[derive(Clone, Debug)]
pub struct Compose {
    /// The grid and the picture's size.
    pub layout: Layout,
    /// `tile_of[k]`: the tile input `k` fills (`NO_TILE`: none).
    pub tile_of: Vec<usize>,
    /// Whose full frames are downloaded besides the picture.
    pub full: FullFrames,
    /// The grid as inputs join and leave.
    pub regrid: Arc<Regrid>,
    /// The `Regrid` generation `layout` and `tile_of` are of.
    seen: u64,
}

/// An input with no tile (`Compose::tile_of`).
pub const NO_TILE: usize = usize::MAX;

impl Compose {
    /// The mosaic of `layout`, input `k` in tile `tile_of[k]`.
    pub fn new(
        layout: Layout,
        tile_of: Vec<usize>,
        full: FullFrames,
        grid: Option<(usize, usize)>,
    ) -> Self {
        let regrid = Arc::new(Regrid {
            generation: std::sync::atomic::AtomicU64::new(0),
            grid: std::sync::Mutex::new((layout, tile_of.clone())),
            canvas: layout.canvas,
            asked: grid,
        });
        Self {
            layout,
            tile_of,
            full,
            regrid,
            seen: 0,
        }
    }

    /// The tile a processed frame of input `input`, in `format`, fills (None: the input has
    /// no tile); refuses a format other than BGR, which the mosaic negotiated.
    pub fn tile(&self, input: u16, format: PixelFormat) -> anyhow::Result<Option<usize>> {
        crate::ensure_kept!(
            format == PixelFormat::Bgr24,
            "the mosaic is composed from BGR frames, not {format}"
        );
        Ok(self
            .tile_of
            .get(usize::from(input))
            .copied()
            .filter(|&t| t != NO_TILE))
    }

    /// Takes the grid the inputs that joined or left made (true where it changed: the
    /// holder clears its picture and its scalers).
    pub fn refresh(&mut self) -> bool {
        let now = self.regrid.generation.load(Ordering::Acquire);
        if now == self.seen {
            return false;
        }
        let grid = self.regrid.grid.lock().unwrap_or_else(|e| e.into_inner());
        (self.layout, self.tile_of) = grid.clone();
        self.seen = now;
        true
    }
}

/// The mosaic's grid as inputs join and leave: the picture keeps its size (the outputs it
/// is written to opened at it), the grid becomes as square as the inputs make it (`--grid`
/// while they fit it), and each input that has a tile fills the next one in input order.
#[derive(Debug)]
pub struct Regrid {
    generation: std::sync::atomic::AtomicU64,
    grid: std::sync::Mutex<(Layout, Vec<usize>)>,
    canvas: FrameSize,
    asked: Option<(usize, usize)>,
}

impl Regrid {
    /// Lays the mosaic out again for the inputs `shown` (by `InputId`: whether each has a
    /// tile).
    pub fn set(&self, shown: &[bool]) {
        let n = shown.iter().filter(|s| **s).count();
        let (cols, rows) = match self.asked {
            Some((c, r)) if c * r >= n => (c, r),
            _ => auto_grid(n),
        };
        let tile = FrameSize {
            width: (self.canvas.width / cols).max(2) & !1,
            height: (self.canvas.height / rows).max(2) & !1,
        };
        let layout = Layout {
            cols,
            rows,
            tile,
            canvas: self.canvas,
        };
        let mut next = 0;
        let tile_of = shown
            .iter()
            .map(|&s| match s {
                true => {
                    next += 1;
                    next - 1
                }
                false => NO_TILE,
            })
            .collect();
        *self.grid.lock().unwrap_or_else(|e| e.into_inner()) = (layout, tile_of);
        self.generation.fetch_add(1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_regrid_keeps_the_picture_and_packs_the_inputs_shown() {
        let layout = Layout::new(2, 1, &[FrameSize::new(640, 360); 2], MAX_MOSAIC);
        let mut c = Compose::new(layout, vec![0, 1], FullFrames::shown(), None);
        assert!(!c.refresh());
        c.regrid.set(&[true, false, true, true, true]);
        assert!(c.refresh());
        assert_eq!((c.layout.cols, c.layout.rows), (2, 2));
        assert_eq!(c.layout.canvas, layout.canvas);
        assert_eq!(c.layout.tile, FrameSize::new(640, 180));
        assert_eq!(c.tile_of, [0, NO_TILE, 1, 2, 3]);
        assert_eq!(c.tile(1, PixelFormat::Bgr24).unwrap(), None);
        assert_eq!(c.tile(4, PixelFormat::Bgr24).unwrap(), Some(3));
        assert!(!c.refresh());
    }

    #[test]
    fn grids_are_square_or_wider() {
        assert_eq!(auto_grid(1), (1, 1));
        assert_eq!(auto_grid(2), (2, 1));
        assert_eq!(auto_grid(3), (2, 2));
        assert_eq!(auto_grid(4), (2, 2));
        assert_eq!(auto_grid(5), (3, 2));
        assert_eq!(auto_grid(16), (4, 4));
        assert_eq!(auto_grid(17), (5, 4));
        assert_eq!(auto_grid(64), (8, 8));
    }

    #[test]
    fn tiles_fit_the_largest_input_and_the_screen() {
        let hd = FrameSize::new(1920, 1080);
        let small = FrameSize::new(640, 360);
        let l = Layout::new(2, 2, &[hd, small, small], MAX_MOSAIC);
        assert_eq!((l.tile, l.canvas), (FrameSize::new(960, 540), hd));
        // On a 1280x1024 screen (90 %: 1152x921).
        let l = Layout::new(2, 2, &[hd, small], FrameSize::new(1152, 921));
        assert_eq!(
            (l.tile, l.canvas),
            (FrameSize::new(576, 324), FrameSize::new(1152, 648))
        );
        let l = Layout::new(2, 2, &[small; 4], MAX_MOSAIC);
        assert_eq!(
            (l.tile, l.canvas),
            (small, FrameSize::new(1280, 720)),
            "small inputs are not scaled up"
        );
        // A 4:3 picture in a 16:9 tile is pillarboxed, centred.
        let a = |x, y, width, height| Area {
            x,
            y,
            width,
            height,
        };
        assert_eq!(
            fit_in(FrameSize::new(640, 480), FrameSize::new(960, 540)),
            a(120, 0, 720, 540)
        );
        let l = Layout::new(2, 2, &[hd], MAX_MOSAIC);
        assert_eq!(
            l.picture_area(3, FrameSize::new(640, 480)),
            a(960 + 120, 540, 720, 540)
        );
        assert_eq!(l.tile_at(961, 10, 4), Some(1));
        assert_eq!(l.tile_at(10, 541, 3), Some(2));
        assert_eq!(l.tile_at(961, 541, 3), None);
    }

    #[test]
    fn nearest_neighbour_scaling_samples_pixel_centres() {
        // A 4x2 frame whose pixel (x, y) is (x, y, 7) into a 2x1 area at (1, 0) of a 3x1
        // picture: columns 1 and 3 of row 1 (the centres of each half).
        let from = FrameSize::new(4, 2);
        let frame: Vec<u8> = (0..2)
            .flat_map(|y| (0..4).flat_map(move |x| [x as u8, y as u8, 7]))
            .collect();
        let to = Area {
            x: 1,
            y: 0,
            width: 2,
            height: 1,
        };
        let s = Scaler::new(from, to);
        let mut picture = vec![0u8; 9];
        s.draw(&frame, &mut picture, 9);
        assert_eq!(picture, [0, 0, 0, 1, 1, 7, 3, 1, 7]);
    }

    #[test]
    fn a_band_fills_the_rows_that_sample_it() {
        // 1080 rows into 540: destination row i samples source row 2i + 1.
        let s = Scaler::new(
            FrameSize::new(8, 1080),
            Area {
                x: 0,
                y: 0,
                width: 4,
                height: 540,
            },
        );
        assert_eq!(s.rows_from(0..270), 0..135);
        assert_eq!(s.rows_from(270..540), 135..270);
        assert_eq!(s.rows_from(1079..1080), 539..540);
        // Every destination row is filled by exactly one of a cut's bands.
        let cut = [0, 7, 301, 302, 900, 1080];
        let covered: usize = cut.windows(2).map(|w| s.rows_from(w[0]..w[1]).len()).sum();
        assert_eq!(covered, 540);
    }

    #[test]
    fn full_frames_follow_the_input_shown_alone_unless_all_are_wanted() {
        let f = FullFrames::shown();
        assert!(!f.wants(0) && !f.wants(3));
        f.show_alone(Some(3));
        assert!(f.wants(3) && !f.wants(0));
        f.show_alone(None);
        assert!(!f.wants(3));
        let all = FullFrames::all();
        all.show_alone(Some(1));
        assert!(all.wants(0) && all.wants(1));
    }
}
