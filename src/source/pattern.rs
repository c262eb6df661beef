//! The built-in moving test pattern: deterministic, so the same size and frame index always
//! give the same pixels, whichever machine or build made them.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use anyhow::Result;

use super::{Read, Source};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// Bytes of BGR frames a pattern's period holds at most (at least `MIN_CYCLE` frames).
const CYCLE_BYTES: usize = 128 << 20;
/// The most memory the kept period may take; past it frames are drawn each time (8K BGR).
const MAX_CACHE: usize = 256 << 20;
/// Frames in the pattern's period: at most this many …
const MAX_CYCLE: usize = 1024;
/// … and at least this many.
const MIN_CYCLE: usize = 4;

/// The built-in test pattern as a source. The pattern is periodic (`period`): the first
/// period's frames are drawn (in BGR, then converted to the pattern's format with the
/// reference arithmetic) and kept, and later frames are copies of them, so that the
/// pattern never limits a GPU measurement.
pub struct Pattern {
    size: FrameSize,
    format: PixelFormat,
    /// The frames drawn so far, in `format`, up to one period (`period`).
    cycle: Vec<Vec<u8>>,
    fps: f64,
    next: u64,
    started: Option<Instant>,
    /// Benchmarks: fill each ring buffer once, then only stamp the frame index.
    cheap: bool,
    /// The first frame is due this share of a frame period after the start.
    phase: f64,
    filled: HashSet<usize>,
}

impl Pattern {
    /// A pattern of `size` paced at `fps` (0: as fast as it is consumed).
    pub fn new(size: FrameSize, fps: f64) -> Self {
        Self {
            size,
            format: PixelFormat::Bgr24,
            cycle: Vec::new(),
            fps,
            next: 0,
            started: None,
            cheap: false,
            phase: 0.0,
            filled: HashSet::new(),
        }
    }

    /// Frames due `phase` (0 to 1) of a frame period later than from the start: several
    /// paced patterns spread over the period as independent cameras are, instead of arriving
    /// all at once.
    pub fn with_phase(mut self, phase: f64) -> Self {
        self.phase = phase.clamp(0.0, 1.0);
        self
    }

    /// Frames in `format` instead of BGR.
    pub fn in_format(mut self, format: PixelFormat) -> Self {
        self.format = format;
        self.cycle.clear();
        self
    }

    /// Benchmark mode: each buffer is drawn once; later frames only change its first bytes.
    pub fn cheap(mut self) -> Self {
        self.cheap = true;
        self
    }
}

/// The pattern's period at `size`, frames: frame `i` is frame `i % period`. As many BGR
/// frames as 128 MiB hold, 4 to 1024 (1080p: 21, 4K: 5, 720p: 48, 320x240: 582).
pub fn period(size: FrameSize) -> u64 {
    (CYCLE_BYTES / size.bytes().max(1)).clamp(MIN_CYCLE, MAX_CYCLE) as u64
}

/// Frame `index` of the pattern in `format` into `out` (`format.bytes(size)` long).
pub fn draw_in(format: PixelFormat, size: FrameSize, index: u64, out: &mut [u8]) {
    if format == PixelFormat::Bgr24 {
        return draw(size, index, out);
    }
    let mut bgr = vec![0; size.bytes()];
    draw(size, index, &mut bgr);
    crate::pixel::from_bgr(format, size, &bgr, out);
}

/// Draws frame `index` of the pattern (periodic: `period`) into `out`: a horizontal blue ramp and a vertical
/// green ramp that drift, a red checkerboard with diagonal stripes, and a white bar that
/// sweeps across. Integer arithmetic only, so every machine draws the same bytes. Large
/// frames are drawn in row bands on every core (a 4K frame took 13.5 ms on one), so that
/// the pattern does not limit a GPU measurement.
pub fn draw(size: FrameSize, index: u64, out: &mut [u8]) {
    let index = index % period(size);
    let rows = size.height;
    let cores = crate::host::cores();
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
        let format = match self.format {
            PixelFormat::Bgr24 => String::new(),
            f => format!(", {f}"),
        };
        let once = match self.cheap {
            true => ", each ring slot filled once",
            false => "",
        };
        format!("test pattern ({}{format}, {rate}{once})", self.size)
    }

    fn format(&self) -> PixelFormat {
        self.format
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
        let secs = ((self.next as f64 + self.phase) / self.fps).min(1e9);
        Some(start + Duration::from_secs_f64(secs))
    }

    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        if self.cheap && !self.filled.insert(frame.as_ptr() as usize) {
            let n = frame.len().min(8);
            frame[..n].copy_from_slice(&self.next.to_le_bytes()[..n]);
        } else if period(self.size) as usize * frame.len() > MAX_CACHE {
            // Too large to keep a period of (a very large frame): drawn each time, the same.
            draw_in(self.format, self.size, self.next, frame);
        } else {
            let k = (self.next % period(self.size)) as usize;
            if k == self.cycle.len() {
                let mut f = vec![0; self.format.bytes(self.size)];
                draw_in(self.format, self.size, self.next, &mut f);
                self.cycle.push(f);
            }
            frame.copy_from_slice(&self.cycle[k]);
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
    fn later_cycles_repeat_the_first() {
        let size = FrameSize::new(64, 48);
        for format in [PixelFormat::Bgr24, PixelFormat::I420, PixelFormat::Yuyv] {
            let mut p = Pattern::new(size, 0.0).in_format(format);
            let n = period(size) as usize;
            assert_eq!(n as u64, period(size));
            assert_eq!(n, MAX_CYCLE);
            let mut frames = Vec::new();
            for _ in 0..n + 2 {
                let mut f = vec![0; format.bytes(size)];
                p.read(&mut f).unwrap();
                frames.push(f);
            }
            let mut first = vec![0; format.bytes(size)];
            draw_in(format, size, 1, &mut first);
            assert!(frames[1] == first, "{format}");
            // What a source gives is what `draw_in` defines, period included.
            draw_in(format, size, n as u64 + 1, &mut first);
            assert!(frames[n + 1] == first, "{format}");
            assert!(frames[n] == frames[0] && frames[n + 1] == frames[1]);
            assert!(frames[0] != frames[1]);
        }
        assert_eq!(period(FrameSize::new(1920, 1080)), 21);
        assert_eq!(period(FrameSize::new(3840, 2160)), 5);
        assert_eq!(period(FrameSize::new(7680, 4320)), MIN_CYCLE as u64);
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
