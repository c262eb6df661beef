//! `--motion`: a cheap frame-difference detector on the frames already in the pipeline, as
//! NVRs run one before their object detectors. Each frame's luma is averaged into a grid of
//! about `COLUMNS` cells across; a cell moved when it differs from the background (a running
//! average of the cells, `ALPHA` of each new frame) by more than `LEVELS`. Motion starts
//! when at least `MIN_CELLS` cells (or `MIN_SHARE` of them, if more) moved, and ends once
//! none did for `HOLD` seconds. While an input has no motion, its frames are not handed to
//! the detector.
//!
//! Invariants: a frame of any pixel format the pipeline hands out is read (its luma, or its
//! BGR made luma), never written; at most `EVERY` seconds apart are frames compared (a
//! camera's every frame is not needed to see motion); the first frame only sets the
//! background; every start has its end (at the latest when the run ends).

use crate::desc::Frame;
use crate::pixel::PixelFormat;

/// About this many cells across.
const COLUMNS: usize = 64;
/// A cell moved when it differs from the background by more than this (of 255).
const LEVELS: f32 = 18.0;
/// How much of each compared frame goes into the background.
const ALPHA: f32 = 0.5;
/// The least cells that make motion.
const MIN_CELLS: usize = 3;
/// The least share of the cells that makes motion, where that is more cells.
const MIN_SHARE: f64 = 0.002;
/// Seconds without motion before it ends.
const HOLD: f64 = 1.0;
/// Frames compared at most this often, seconds.
const EVERY: f64 = 0.1;

/// A change of an input's motion.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// Motion began: the share of the picture that moved, and where ([left, top, right,
    /// bottom] in the frame's pixels).
    Started(f64, [f32; 4]),
    /// It ended, after this many seconds.
    Ended(f64),
}

/// One input's motion detector (module doc).
#[derive(Debug, Default)]
pub struct Motion {
    background: Vec<f32>,
    /// The grid's columns and rows, and a cell's side in pixels.
    grid: (usize, usize, usize),
    last: Option<f64>,
    /// Since when there is motion, and when it was last seen.
    active: Option<(f64, f64)>,
}

impl Motion {
    /// Whether motion is going on.
    pub fn active(&self) -> bool {
        self.active.is_some()
    }

    /// `frame`, at `seconds`: a change of motion, where there is one.
    pub fn frame(&mut self, frame: &Frame, seconds: f64) -> Option<Change> {
        if self
            .last
            .is_some_and(|l| seconds - l < EVERY && seconds >= l)
        {
            return None;
        }
        self.last = Some(seconds);
        let cells = luma_cells(frame)?;
        let (cols, rows, side) = cells.1;
        if self.grid != cells.1 || self.background.len() != cells.0.len() {
            self.grid = cells.1;
            self.background = cells.0;
            return None;
        }
        let mut moved = 0;
        let mut bounds = [usize::MAX, usize::MAX, 0, 0];
        for (k, (&now, bg)) in cells.0.iter().zip(self.background.iter_mut()).enumerate() {
            if (now - *bg).abs() > LEVELS {
                moved += 1;
                let (x, y) = (k % cols, k / cols);
                bounds = [
                    bounds[0].min(x),
                    bounds[1].min(y),
                    bounds[2].max(x + 1),
                    bounds[3].max(y + 1),
                ];
            }
            *bg += ALPHA * (now - *bg);
        }
        let least = MIN_CELLS.max((MIN_SHARE * (cols * rows) as f64).ceil() as usize);
        match (self.active, moved >= least) {
            (None, true) => {
                self.active = Some((seconds, seconds));
                let b = bounds.map(|v| (v * side) as f32);
                Some(Change::Started(moved as f64 / (cols * rows) as f64, b))
            }
            (Some((since, _)), true) => {
                self.active = Some((since, seconds));
                None
            }
            (Some((since, seen)), false) if seconds - seen >= HOLD => {
                self.active = None;
                Some(Change::Ended(seconds - since))
            }
            _ => None,
        }
    }

    /// The run ended: motion going on ends, at `seconds`.
    pub fn end(&mut self, seconds: f64) -> Option<Change> {
        let (since, _) = self.active.take()?;
        Some(Change::Ended((seconds - since).max(0.0)))
    }
}

/// `frame`'s luma averaged over square cells, about `COLUMNS` across: the cells, and the
/// grid's columns, rows and cell side; None for a frame without its bytes.
fn luma_cells(frame: &Frame) -> Option<(Vec<f32>, (usize, usize, usize))> {
    let d = frame.desc;
    let (w, h) = (d.size.width, d.size.height);
    if frame.bytes.len() < d.format.bytes(d.size) || w == 0 || h == 0 {
        return None;
    }
    let side = (w / COLUMNS).max(2);
    let (cols, rows) = (w / side, h / side);
    if cols == 0 || rows == 0 {
        return None;
    }
    let plane = d.planes.iter().next().copied()?;
    let luma = |x: usize, y: usize| -> u32 {
        let row = &frame.bytes[plane.offset + y * plane.pitch..];
        match d.format {
            PixelFormat::Bgr24 => {
                let p = &row[x * 3..x * 3 + 3];
                (u32::from(p[0]) + 2 * u32::from(p[1]) + u32::from(p[2])) / 4
            }
            PixelFormat::Yuyv => u32::from(row[x * 2]),
            _ => u32::from(row[x]),
        }
    };
    // Four samples a cell: its quarters' middles.
    let mut cells = Vec::with_capacity(cols * rows);
    for cy in 0..rows {
        for cx in 0..cols {
            let (x0, y0) = (cx * side, cy * side);
            let q = side / 4;
            let sum = luma(x0 + q, y0 + q)
                + luma(x0 + 3 * q, y0 + q)
                + luma(x0 + q, y0 + 3 * q)
                + luma(x0 + 3 * q, y0 + 3 * q);
            cells.push(sum as f32 / 4.0);
        }
    }
    Some((cells, (cols, rows, side)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::FrameDesc;
    use crate::frame::FrameSize;

    fn gray(size: FrameSize, square: Option<(usize, usize)>) -> Vec<u8> {
        let mut b = vec![40u8; size.width * size.height];
        if let Some((x0, y0)) = square {
            for y in y0..y0 + 40 {
                for x in x0..x0 + 40 {
                    b[y * size.width + x] = 220;
                }
            }
        }
        b
    }

    #[test]
    fn a_moving_square_starts_motion_and_stillness_ends_it() {
        let size = FrameSize::new(320, 240);
        let desc = FrameDesc::host(PixelFormat::Gray, size);
        let mut m = Motion::default();
        let mut changes = Vec::new();
        for k in 0..40 {
            let t = k as f64 * 0.1;
            let square = (10..20).contains(&k).then(|| (k * 10, 100));
            let bytes = gray(size, square);
            let frame = Frame {
                desc: &desc,
                bytes: &bytes,
            };
            if let Some(c) = m.frame(&frame, t) {
                changes.push((k, c));
            }
        }
        assert_eq!(changes.len(), 2, "{changes:?}");
        assert!(
            matches!(changes[0], (10, Change::Started(..))),
            "{changes:?}"
        );
        // The square's last move is at frame 19, its leaving at 20 (the background forgets
        // it within a few frames); motion ends 1 s after.
        assert!(
            matches!(changes[1], (30..=35, Change::Ended(_))),
            "{changes:?}"
        );
        if let (_, Change::Started(_, b)) = &changes[0] {
            assert!(
                b[0] <= 100.0 && b[2] >= 140.0 && b[1] <= 100.0 && b[3] >= 140.0,
                "{b:?}"
            );
        }
    }
}
