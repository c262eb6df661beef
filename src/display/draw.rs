//! Drawing on a packed BGR picture, in every build (no OpenCV): text in an 8×8 bitmap font
//! (`font8x8`'s public-domain glyphs) scaled by whole pixels, a darkened backdrop that text
//! reads on over any picture, and a rectangle's outline. The mosaic's labels are drawn with
//! it, so that the server build (FFmpeg without OpenCV) records and serves the mosaic.
//!
//! Invariants: every stroke is clipped to the picture (text may run past its edge, never
//! past its buffer); a glyph the font lacks is drawn as `?`; the same text, scale and colour
//! give the same bytes on every machine.

use font8x8::UnicodeFonts;

use crate::frame::FrameSize;

/// A glyph's side in font pixels.
const GLYPH: usize = 8;

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

/// Text's size: glyphs of `scale`×8 picture pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ink {
    /// Picture pixels a font pixel.
    pub scale: usize,
}

impl Ink {
    /// Text for a tile of `width` × `height` pixels: a font pixel for every 240 × 135 of the
    /// tile, 1 to 3 (16 pixels high in the 480×270 tiles of a 4×4 wall at 1080p, 24 in the
    /// 960×540 tiles of a 2×2; a 30-character line then fits its tile).
    pub fn for_tile(width: usize, height: usize) -> Self {
        Self {
            scale: (width / 240).min(height / 135).clamp(1, 3),
        }
    }
    /// The width `text` takes, in picture pixels.
    pub fn width(&self, text: &str) -> usize {
        text.chars().count() * GLYPH * self.scale
    }
    /// From one line of text to the next, in picture pixels.
    pub fn line(&self) -> usize {
        (GLYPH + 3) * self.scale
    }
    /// `px` at this ink's scale (margins that grow with the text).
    pub fn px(&self, px: usize) -> usize {
        px * self.scale
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
        let (right, bottom) = (
            (r.x + r.width).saturating_sub(t),
            (r.y + r.height).saturating_sub(t),
        );
        for side in [
            Rect { height: t, ..r },
            Rect {
                y: bottom,
                height: t,
                ..r
            },
            Rect { width: t, ..r },
            Rect {
                x: right,
                width: t,
                ..r
            },
        ] {
            self.fill(side, bgr);
        }
    }

    /// `text` in `ink`, its top left corner at (`x`, `y`), in `bgr`.
    pub fn text(&mut self, x: usize, y: usize, text: &str, ink: Ink, bgr: [u8; 3]) {
        let s = ink.scale;
        for (k, ch) in text.chars().enumerate() {
            let glyph = font8x8::BASIC_FONTS
                .get(ch)
                .or_else(|| font8x8::LATIN_FONTS.get(ch))
                .or_else(|| font8x8::BASIC_FONTS.get('?'))
                .unwrap_or([0; 8]);
            let left = x + k * GLYPH * s;
            if left >= self.size.width {
                break;
            }
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..GLYPH {
                    if bits >> col & 1 == 1 {
                        let dot = Rect {
                            x: left + col * s,
                            y: y + row * s,
                            width: s,
                            height: s,
                        };
                        self.fill(dot, bgr);
                    }
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
        // A 4x4 wall at 1080p: 16-pixel text; a 2x2: 24; small tiles keep 8.
        assert_eq!(Ink::for_tile(480, 270).line(), 22);
        assert_eq!(Ink::for_tile(960, 540).scale, 3);
        assert_eq!(Ink::for_tile(320, 240).scale, 1);
        assert_eq!(
            Ink::for_tile(1920, 200).scale,
            1,
            "as the shorter side allows"
        );
    }

    #[test]
    fn text_is_clipped_and_drawn_where_asked() {
        let size = FrameSize::new(40, 20);
        let mut bytes = vec![0u8; 40 * 20 * 3];
        let mut c = Canvas::new(&mut bytes, size).unwrap();
        // Runs past the right edge and the bottom: clipped, never past the buffer.
        c.text(30, 15, "AAAA", Ink { scale: 2 }, [255, 255, 255]);
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
            (30..40).any(|x| (15..20).any(|y| lit(x, y) == 255)),
            "no text drawn"
        );
        assert!(
            (1..30).all(|x| (1..15).all(|y| lit(x, y) == 0)),
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
