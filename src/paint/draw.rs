//! Drawing on a packed BGR picture, in every build (no OpenCV): text in a real font at any
//! size (DejaVu Sans Mono Bold, compiled into the binary from `assets/fonts`, rasterized by
//! `fontdue` and blended by its coverage), a darkened backdrop that text reads on over any
//! picture, and a rectangle's outline. The mosaic's labels are drawn with it, so that the
//! server build (FFmpeg without OpenCV) records and serves the mosaic.
//!
//! Invariants: every stroke is clipped to the picture (text may run past its edge, never
//! past its buffer); a glyph the font lacks is drawn as `?`; the same text, size and colour
//! give the same bytes on every machine (the rasterizer is pure Rust, the blend integer);
//! each glyph is rasterized once per size and kept.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use crate::frame::FrameSize;

/// The font, compiled in.
const FONT: &[u8] = include_bytes!("../../assets/fonts/DejaVuSansMono-Bold.ttf");

/// The parsed font, made once.
fn font() -> &'static fontdue::Font {
    static FONT_PARSED: OnceLock<fontdue::Font> = OnceLock::new();
    FONT_PARSED.get_or_init(|| {
        fontdue::Font::from_bytes(FONT, fontdue::FontSettings::default())
            .expect("the font compiled into framepipe parses")
    })
}

/// A glyph at one size: where its coverage sits from the pen, and the coverage.
#[derive(Clone)]
struct Glyph {
    left: i32,
    top: i32,
    width: usize,
    coverage: Vec<u8>,
}

/// `ch` at `px` pixels (the font's `?` where it has none), rasterized once and kept.
fn glyph(ch: char, px: usize) -> Glyph {
    static GLYPHS: OnceLock<Mutex<HashMap<(char, usize), Glyph>>> = OnceLock::new();
    let cache = GLYPHS.get_or_init(Default::default);
    let mut cache = cache.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = cache.get(&(ch, px)) {
        return g.clone();
    }
    let font = font();
    let ch = if font.has_glyph(ch) { ch } else { '?' };
    let ascent = font
        .horizontal_line_metrics(px as f32)
        .map_or(px as f32 * 0.8, |m| m.ascent);
    let (m, coverage) = font.rasterize(ch, px as f32);
    let g = Glyph {
        left: m.xmin,
        top: (ascent - (m.height as f32 + m.ymin as f32)).round() as i32,
        width: m.width,
        coverage,
    };
    if cache.len() > 4096 {
        cache.clear();
    }
    cache.insert((ch, px), g.clone());
    g
}

/// A packed BGR picture to draw on.
pub struct Canvas<'a> {
    bytes: &'a mut [u8],
    size: FrameSize,
}

/// A rectangle on a canvas, in picture pixels (it may reach past the picture: drawing clips).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rect {
    /// Left column.
    pub x: usize,
    /// Top row.
    pub y: usize,
    /// Columns.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl Rect {
    /// The four strips `t` wide just inside it: top, bottom, left, right.
    pub fn sides(self, t: usize) -> [Rect; 4] {
        let right = (self.x + self.width).saturating_sub(t);
        let bottom = (self.y + self.height).saturating_sub(t);
        [
            Rect { height: t, ..self },
            Rect {
                y: bottom,
                height: t,
                ..self
            },
            Rect { width: t, ..self },
            Rect {
                x: right,
                width: t,
                ..self
            },
        ]
    }
}

/// Text's size: the font's em in picture pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ink {
    /// Picture pixels of the font's em (about the height of a capital and a descender).
    pub size: usize,
}

/// The em that margins are counted against (`Ink::px`).
const BASE: usize = 12;

impl Ink {
    /// Text for a tile of `width` × `height` pixels: a fifteenth of its height, within a
    /// twenty-sixth of its width, 12 to 48 pixels (18 in the 480×270 tiles of a 4×4 wall at
    /// 1080p, 36 in the 960×540 tiles of a 2×2, 48 for a camera shown alone; a line of 30
    /// characters then fits its tile).
    pub fn for_tile(width: usize, height: usize) -> Self {
        Self {
            size: (height / 15).min(width / 26).clamp(12, 48),
        }
    }
    /// The width `text` takes, in picture pixels (every glyph of the monospaced font is as
    /// wide).
    pub fn width(&self, text: &str) -> usize {
        let advance = font().metrics('0', self.size as f32).advance_width.round() as usize;
        text.chars().count() * advance
    }
    /// From one line of text to the next, in picture pixels.
    pub fn line(&self) -> usize {
        self.size * 5 / 4
    }
    /// `px` of a 12-pixel em, at this ink's size (margins that grow with the text).
    pub fn px(&self, px: usize) -> usize {
        (px * self.size).div_ceil(BASE)
    }
}

impl<'a> Canvas<'a> {
    /// `bytes` as a packed BGR picture of `size`; None where they are not one.
    pub fn new(bytes: &'a mut [u8], size: FrameSize) -> Option<Self> {
        (bytes.len() == size.width * size.height * 3).then_some(Self { bytes, size })
    }

    /// Sets the pixels of `r` (clipped) with `put`, given their bytes.
    fn each(&mut self, r: Rect, mut put: impl FnMut(&mut [u8])) {
        let x1 = r.x.saturating_add(r.width).min(self.size.width);
        let y1 = r.y.saturating_add(r.height).min(self.size.height);
        for y in r.y.min(y1)..y1 {
            let row = y * self.size.width * 3;
            for x in r.x.min(x1)..x1 {
                put(&mut self.bytes[row + x * 3..row + x * 3 + 3]);
            }
        }
    }

    /// Fills `r` with `bgr`.
    pub fn fill(&mut self, r: Rect, bgr: [u8; 3]) {
        self.each(r, |p| p.copy_from_slice(&bgr));
    }

    /// Darkens `r` to about a third, so that text on it reads on any picture.
    pub fn backdrop(&mut self, r: Rect) {
        self.each(r, |p| {
            p.iter_mut()
                .for_each(|c| *c = (u16::from(*c) * 89 / 256) as u8)
        });
    }

    /// A frame `thickness` pixels wide just inside `r`, in `bgr`.
    pub fn outline(&mut self, r: Rect, thickness: usize, bgr: [u8; 3]) {
        let t = thickness.min(r.width / 2).min(r.height / 2);
        for side in r.sides(t) {
            self.fill(side, bgr);
        }
    }

    /// `text` in `ink`, its top left corner at (`x`, `y`), in `bgr`: each pixel blended
    /// with the glyph's coverage.
    pub fn text(&mut self, x: usize, y: usize, text: &str, ink: Ink, bgr: [u8; 3]) {
        let size = self.size;
        coverage(text, (x, y), ink, |px, py, a| {
            if px >= size.width || py >= size.height {
                return;
            }
            let at = (py * size.width + px) * 3;
            for (c, ink) in self.bytes[at..at + 3].iter_mut().zip(bgr) {
                *c = blend(*c, ink, a);
            }
        });
    }
}

/// `ink` over `under` at coverage `a` (0 to 255), rounded.
pub fn blend(under: u8, ink: u8, a: u8) -> u8 {
    let (a, under) = (u16::from(a), u16::from(under));
    ((u16::from(ink) * a + under * (255 - a) + 127) / 255) as u8
}

/// Each pixel `text` in `ink` covers with its top left corner at `at`: `each(x, y,
/// coverage)`, for pixels right of and below the picture's origin only (the caller clips
/// the far edges).
pub fn coverage(text: &str, at: (usize, usize), ink: Ink, mut each: impl FnMut(usize, usize, u8)) {
    let advance = ink.width("0");
    for (k, ch) in text.chars().enumerate() {
        if ch == ' ' {
            continue;
        }
        let pen = at.0 + k * advance;
        let g = glyph(ch, ink.size);
        if g.width == 0 {
            continue;
        }
        for (row, line) in g.coverage.chunks_exact(g.width).enumerate() {
            let py = at.1 as i64 + i64::from(g.top) + row as i64;
            for (col, &a) in line.iter().enumerate() {
                let px = pen as i64 + i64::from(g.left) + col as i64;
                if a != 0 && px >= 0 && py >= 0 {
                    each(px as usize, py as usize, a);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_grow_with_their_tiles() {
        // A 4x4 wall at 1080p: 18-pixel text; a 2x2: 36; alone: 48; small tiles keep 12.
        assert_eq!(Ink::for_tile(480, 270).size, 18);
        assert_eq!(Ink::for_tile(960, 540).size, 36);
        assert_eq!(Ink::for_tile(1920, 1080).size, 48);
        assert_eq!(Ink::for_tile(160, 120).size, 12);
        assert_eq!(
            Ink::for_tile(1920, 200).size,
            13,
            "as the shorter side allows"
        );
        // 30 characters fit a tile.
        for (w, h) in [(480, 270), (960, 540), (1920, 1080), (320, 240)] {
            let ink = Ink::for_tile(w, h);
            assert!(ink.width(&"x".repeat(30)) + ink.px(12) <= w, "{w}x{h}");
        }
    }

    #[test]
    fn glyphs_are_the_font_s_at_any_size() {
        for size in [12, 18, 36, 48] {
            let g = glyph('H', size);
            let lit = g.coverage.iter().filter(|&&a| a > 128).count();
            assert!(lit > size, "an H of {size} px has {lit} pixels");
            assert!(g.top >= 0 && (g.top as usize) < size, "{}", g.top);
        }
        assert_eq!(glyph('\u{10ffff}', 12).coverage, glyph('?', 12).coverage);
    }

    #[test]
    fn text_is_clipped_and_drawn_where_asked() {
        let size = FrameSize::new(40, 20);
        let mut bytes = vec![0u8; 40 * 20 * 3];
        let mut c = Canvas::new(&mut bytes, size).unwrap();
        // Runs past the right edge and the bottom: clipped, never past the buffer.
        c.text(30, 8, "AAAA", Ink { size: 16 }, [255, 255, 255]);
        c.outline(
            Rect {
                x: 0,
                y: 0,
                width: 40,
                height: 20,
            },
            1,
            [0, 0, 255],
        );
        let lit = |x: usize, y: usize| bytes[(y * 40 + x) * 3];
        assert_eq!(bytes[2], 255, "the outline's top left corner is red");
        assert!(
            (30..40).any(|x| (9..20).any(|y| lit(x, y) > 200)),
            "no text drawn"
        );
        assert!(
            (1..29).all(|x| (1..8).all(|y| lit(x, y) == 0)),
            "text outside its place"
        );
    }

    #[test]
    fn a_backdrop_darkens_and_a_wrong_buffer_is_refused() {
        let size = FrameSize::new(4, 4);
        let mut bytes = vec![200u8; 48];
        Canvas::new(&mut bytes, size).unwrap().backdrop(Rect {
            x: 0,
            y: 0,
            width: 2,
            height: 4,
        });
        assert_eq!((bytes[0], bytes[9]), (69, 200));
        assert!(Canvas::new(&mut [0u8; 47], size).is_none());
    }
}
