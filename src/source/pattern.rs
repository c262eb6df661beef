//! The built-in moving test pattern: deterministic, so the same size and frame index always
//! give the same pixels, whichever machine or build made them.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Read, Source};
use crate::frame::FrameSize;

/// The built-in test pattern as a source.
pub struct Pattern {
    size: FrameSize,
    fps: f64,
    next: u64,
    started: Option<Instant>,
    /// Benchmarks: fill each ring buffer once, then only stamp the frame index.
    cheap: bool,
    filled: HashSet<usize>,
}

impl Pattern {
    /// A pattern of `size` paced at `fps` (0: as fast as it is consumed).
    pub fn new(size: FrameSize, fps: f64) -> Self {
        Self {
            size,
            fps,
            next: 0,
            started: None,
            cheap: false,
            filled: HashSet::new(),
        }
    }

    /// Benchmark mode: each buffer is drawn once; later frames only change its first bytes.
    pub fn cheap(mut self) -> Self {
        self.cheap = true;
        self
    }
}

/// Draws frame `index` of the pattern into `out`: a horizontal blue ramp and a vertical
/// green ramp that drift, a red checkerboard with diagonal stripes, and a white bar that
/// sweeps across. Integer arithmetic only, so every machine draws the same bytes. Large
/// frames are drawn in row bands on every core (a 4K frame took 13.5 ms on one), so that
/// the pattern does not limit a GPU measurement.
pub fn draw(size: FrameSize, index: u64, out: &mut [u8]) {
    let rows = size.height;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = cores.min(rows / 128).clamp(1, 32);
    if threads == 1 {
        return draw_rows(size, index, 0, out);
    }
    let per = rows.div_ceil(threads);
    std::thread::scope(|s| {
        for (k, part) in out[..size.bytes()]
            .chunks_mut(per * size.stride())
            .enumerate()
        {
            s.spawn(move || draw_rows(size, index, k * per, part));
        }
    });
}

/// Draws the rows of frame `index` from `first` on into `out` (which holds just those).
fn draw_rows(size: FrameSize, index: u64, first: usize, out: &mut [u8]) {
    let (w, h) = (size.width, size.height);
    let i = index as usize;
    let bar = (i * 8) % w;
    let bar_w = (w / 40).max(1);
    let ramp: Vec<u8> = (0..w).map(|x| (x * 255 / w + 2 * i) as u8).collect();
    for (k, row) in out.chunks_exact_mut(size.stride()).enumerate() {
        let y = first + k;
        if y >= h {
            break;
        }
        let g = (y * 255 / h + i) as u8;
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            let r = ((((x >> 4) ^ (y >> 4)) & 1) * 160 + ((x + y + i) & 63)) as u8;
            px.copy_from_slice(&[ramp[x], g, r]);
        }
        let end = (bar + bar_w).min(w);
        row[bar * 3..end * 3].fill(255);
    }
}

impl Source for Pattern {
    fn describe(&self) -> String {
        let rate = if self.fps > 0.0 {
            format!("{} fps", self.fps)
        } else {
            "unpaced".to_string()
        };
        format!("test pattern ({}, {rate})", self.size)
    }

    fn size(&self) -> FrameSize {
        self.size
    }

    fn fps(&self) -> Option<f64> {
        (self.fps > 0.0).then_some(self.fps)
    }

    fn is_live(&self) -> bool {
        false
    }

    fn due(&mut self) -> Option<Instant> {
        if self.fps <= 0.0 {
            return None;
        }
        let start = *self.started.get_or_insert_with(Instant::now);
        // Capped at 30 years, so that no rate (--fps 1e-300) overflows an Instant.
        let secs = (self.next as f64 / self.fps).min(1e9);
        Some(start + Duration::from_secs_f64(secs))
    }

    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        if self.cheap && !self.filled.insert(frame.as_ptr() as usize) {
            let n = frame.len().min(8);
            frame[..n].copy_from_slice(&self.next.to_le_bytes()[..n]);
        } else {
            draw(self.size, self.next, frame);
        }
        self.next += 1;
        Ok(Read::Frame)
    }

    fn skip(&mut self) -> Result<Read> {
        self.next += 1;
        Ok(Read::Frame)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_deterministic_and_moves() {
        let size = FrameSize::new(33, 17);
        let mut a = vec![0; size.bytes()];
        let mut b = vec![0; size.bytes()];
        draw(size, 5, &mut a);
        draw(size, 5, &mut b);
        assert_eq!(a, b);
        draw(size, 6, &mut b);
        assert_ne!(a, b);
    }

    #[test]
    fn drawing_in_row_bands_gives_the_same_bytes() {
        let size = FrameSize::new(301, 1031);
        let mut whole = vec![0; size.bytes()];
        let mut banded = vec![1; size.bytes()];
        draw_rows(size, 7, 0, &mut whole);
        draw(size, 7, &mut banded);
        assert!(whole == banded);
    }
}
