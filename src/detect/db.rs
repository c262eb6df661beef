//! DB text detection (PaddleOCR's detector, as PyPI's rapidocr runs it): the picture resized
//! so that its shorter side is at least `LIMIT_SIDE` and each side a multiple of 32
//! (bilinear, OpenCV's `INTER_LINEAR` arithmetic), each BGR channel `v / 127.5 - 1`; the
//! model's probability map thresholded at `THRESH`, dilated by 2×2, cut into 8-connected
//! regions; each region's box kept where its mean probability reaches the score, grown by
//! `UNCLIP` (area × ratio / perimeter each way, as pyclipper's offset grows it) and scaled
//! back to the picture.
//!
//! Invariant: the boxes are axis-aligned rectangles (rapidocr's are the regions' smallest
//! rotated rectangles, the same for upright text); corners in picture pixels, clipped to
//! the picture as rapidocr clips them.

use super::Detection;
use crate::frame::FrameSize;
use crate::pixel::lookup::Lookup;

/// The shorter side the picture is brought up to.
pub const LIMIT_SIDE: usize = 736;
/// A map value above this is text.
pub const THRESH: f32 = 0.3;
/// The least mean probability of a kept box (`--detect-score` changes it).
pub const BOX_THRESH: f32 = 0.5;
/// How much a box grows: its area × this / its perimeter, each way.
pub const UNCLIP: f32 = 1.6;
/// Boxes whose shorter side is under this (map pixels) are dropped.
const MIN_SIZE: f32 = 3.0;
/// At most this many regions are looked at.
const MAX_CANDIDATES: usize = 1000;

/// The size the model is fed for a `size` picture (module doc).
pub fn fed_size(size: FrameSize) -> FrameSize {
    let (h, w) = (size.height as f64, size.width as f64);
    let ratio = match h.min(w) < LIMIT_SIDE as f64 {
        true => LIMIT_SIDE as f64 / h.min(w),
        false => 1.0,
    };
    let side = |v: f64| ((((v * ratio) as i64) as f64 / 32.0).round() as usize * 32).max(32);
    FrameSize::new(side(w), side(h))
}

/// How the model is fed its pictures, resized to `fed_size` (`linear::Placed::whole`): B, G,
/// R planes of `v / 127.5 - 1`.
pub fn lookup() -> Lookup {
    Lookup::planes(|_, v| (f32::from(v) / 127.5 - 1.0).to_ne_bytes()).in_bgr()
}

/// The boxes of a `map` (the model's output of `map_size`) in a `picture`'s pixels, kept
/// where their mean probability reaches `score`.
pub fn boxes(map: &[f32], map_size: FrameSize, picture: FrameSize, score: f32) -> Vec<Detection> {
    let (w, h) = (map_size.width, map_size.height);
    let text: Vec<bool> = map.iter().map(|&p| p > THRESH).collect();
    // Dilated by 2x2 (OpenCV's anchor: the pixel and those left of and above it).
    let mask: Vec<bool> = (0..w * h)
        .map(|i| {
            let (x, y) = (i % w, i / w);
            let at = |x: usize, y: usize| text[y * w + x];
            at(x, y)
                || (x > 0 && at(x - 1, y))
                || (y > 0 && at(x, y - 1))
                || (x > 0 && y > 0 && at(x - 1, y - 1))
        })
        .collect();
    let mut found = Vec::new();
    for (x0, y0, x1, y1) in regions(&mask, map_size).into_iter().take(MAX_CANDIDATES) {
        let (bw, bh) = ((x1 - x0) as f32, (y1 - y0) as f32);
        if bw.min(bh) < MIN_SIZE {
            continue;
        }
        let mean = mean_in(map, map_size, (x0, y0, x1, y1));
        if mean < score {
            continue;
        }
        let grow = bw * bh * UNCLIP / (2.0 * (bw + bh));
        if (bw + 2.0 * grow).min(bh + 2.0 * grow) < MIN_SIZE + 2.0 {
            continue;
        }
        let sx = picture.width as f32 / w as f32;
        let sy = picture.height as f32 / h as f32;
        let fit = |v: f32, s: f32, side: usize| (v * s).round().clamp(0.0, (side - 1) as f32);
        let rect = [
            fit(x0 as f32 - grow, sx, picture.width),
            fit(y0 as f32 - grow, sy, picture.height),
            fit(x1 as f32 + grow, sx, picture.width),
            fit(y1 as f32 + grow, sy, picture.height),
        ];
        if rect[2] - rect[0] <= 3.0 || rect[3] - rect[1] <= 3.0 {
            continue;
        }
        found.push(Detection {
            label: "text".into(),
            score: mean,
            rect,
            track: None,
        });
    }
    found
}

/// The 8-connected regions of `mask`: each one's first and last column and row.
fn regions(mask: &[bool], size: FrameSize) -> Vec<(usize, usize, usize, usize)> {
    let (w, h) = (size.width, size.height);
    let mut seen = vec![false; w * h];
    let mut out = Vec::new();
    let mut stack = Vec::new();
    for start in 0..w * h {
        if !mask[start] || seen[start] {
            continue;
        }
        seen[start] = true;
        stack.push(start);
        let (mut x0, mut y0, mut x1, mut y1) = (w, h, 0, 0);
        while let Some(i) = stack.pop() {
            let (x, y) = (i % w, i / w);
            (x0, y0, x1, y1) = (x0.min(x), y0.min(y), x1.max(x), y1.max(y));
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    let (nx, ny) = (x as i64 + dx, y as i64 + dy);
                    if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                        continue;
                    }
                    let j = ny as usize * w + nx as usize;
                    if mask[j] && !seen[j] {
                        seen[j] = true;
                        stack.push(j);
                    }
                }
            }
        }
        out.push((x0, y0, x1, y1));
    }
    out
}

/// The mean of `map` over the rectangle's pixels, ends included.
fn mean_in(map: &[f32], size: FrameSize, (x0, y0, x1, y1): (usize, usize, usize, usize)) -> f32 {
    let mut sum = 0f64;
    for y in y0..=y1.min(size.height - 1) {
        for x in x0..=x1.min(size.width - 1) {
            sum += f64::from(map[y * size.width + x]);
        }
    }
    (sum / ((x1 - x0 + 1) * (y1 - y0 + 1)) as f64) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_picture_is_fed_as_rapidocr_feeds_it() {
        assert_eq!(
            fed_size(FrameSize::new(1280, 720)),
            FrameSize::new(1312, 736)
        );
        assert_eq!(
            fed_size(FrameSize::new(1920, 1080)),
            FrameSize::new(1920, 1088)
        );
        assert_eq!(
            fed_size(FrameSize::new(640, 360)),
            FrameSize::new(1312, 736)
        );
    }

    #[test]
    fn a_region_of_text_becomes_its_grown_box() {
        let size = FrameSize::new(64, 32);
        let mut map = vec![0f32; 64 * 32];
        for y in 10..20 {
            for x in 8..48 {
                map[y * 64 + x] = 0.9;
            }
        }
        let found = boxes(&map, size, FrameSize::new(128, 64), 0.5);
        assert_eq!(found.len(), 1, "{found:?}");
        // The region (dilated one pixel right and down: 8..=48, 10..=20) grown by
        // 40 * 10 * 1.6 / 100 = 6.4 each way, then doubled to the picture.
        assert_eq!(found[0].rect, [3.0, 7.0, 109.0, 53.0]);
    }
}
