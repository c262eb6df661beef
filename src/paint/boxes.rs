//! The detector's boxes drawn into a picture (`--draw boxes|labels`): each box's outline in
//! its label's colour, and with `labels` the label, the track's id and the score on a tab
//! of that colour above it. Drawn into the frames of every pixel format the pipeline hands its consumers (packed
//! BGR, YUYV, planar and semi-planar YUV, gray), so an I420 output gets its boxes without a
//! trip through BGR, and into a tile of the mosaic (boxes scaled from the frame they were
//! found on to the area the frame fills).
//!
//! Invariants: every stroke is clipped to the picture and to the area given; the same boxes
//! give the same bytes (integer blending, the compiled-in font); a label's colour is the
//! same on every camera and every run (it is made from the label's text).

use super::draw::{blend, coverage, Ink, Rect};
use crate::desc::Planes;
use crate::detect::{Detection, Draw};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// A picture of any format to draw on.
pub struct Paint<'a> {
    bytes: &'a mut [u8],
    format: PixelFormat,
    size: FrameSize,
    planes: Vec<crate::desc::Plane>,
}

impl<'a> Paint<'a> {
    /// `bytes` as a picture of `format` and `size` laid out as `planes` say; None where
    /// they are too short for it.
    pub fn new(
        bytes: &'a mut [u8],
        format: PixelFormat,
        size: FrameSize,
        planes: Planes,
    ) -> Option<Self> {
        (bytes.len() >= planes.extent(format, size)).then_some(Self {
            bytes,
            format,
            size,
            planes: planes.iter().copied().collect(),
        })
    }

    /// The whole picture as an area.
    pub fn all(&self) -> Rect {
        Rect {
            x: 0,
            y: 0,
            width: self.size.width,
            height: self.size.height,
        }
    }

    /// Blends `bgr` at coverage `a` into pixel (`x`, `y`) (inside the picture).
    fn put(&mut self, x: usize, y: usize, bgr: [u8; 3], a: u8) {
        let (p, b) = (&self.planes, &mut *self.bytes);
        match self.format {
            PixelFormat::Bgr24 => {
                let at = p[0].offset + y * p[0].pitch + x * 3;
                for (c, ink) in b[at..at + 3].iter_mut().zip(bgr) {
                    *c = blend(*c, ink, a);
                }
            }
            PixelFormat::Yuyv => {
                let yuv = yuv_of(bgr);
                let row = p[0].offset + y * p[0].pitch;
                let at = row + x * 2;
                b[at] = blend(b[at], yuv[0], a);
                if x.is_multiple_of(2) {
                    let pair = row + x / 2 * 4;
                    b[pair + 1] = blend(b[pair + 1], yuv[1], a);
                    b[pair + 3] = blend(b[pair + 3], yuv[2], a);
                }
            }
            format => {
                let yuv = yuv_of(bgr);
                let at = p[0].offset + y * p[0].pitch + x;
                b[at] = blend(b[at], yuv[0], a);
                let across = match format {
                    PixelFormat::Yuv444p => 1,
                    _ => 2,
                };
                if p.len() < 2 || !x.is_multiple_of(across) || !y.is_multiple_of(p[1].rows_per) {
                    return;
                }
                let (cx, cy) = (x / across, y / p[1].rows_per);
                match format {
                    PixelFormat::Nv12 => {
                        let at = p[1].offset + cy * p[1].pitch + cx * 2;
                        b[at] = blend(b[at], yuv[1], a);
                        b[at + 1] = blend(b[at + 1], yuv[2], a);
                    }
                    _ => {
                        for (plane, v) in p[1..].iter().zip(&yuv[1..]) {
                            let at = plane.offset + cy * plane.pitch + cx;
                            b[at] = blend(b[at], *v, a);
                        }
                    }
                }
            }
        }
    }

    /// Fills `r` clipped to `within` (and the picture) with `bgr`.
    fn fill(&mut self, r: Rect, within: Rect, bgr: [u8; 3]) {
        let (x0, y0) = (r.x.max(within.x), r.y.max(within.y));
        let x1 = (r.x + r.width)
            .min(within.x + within.width)
            .min(self.size.width);
        let y1 = (r.y + r.height)
            .min(within.y + within.height)
            .min(self.size.height);
        for y in y0..y1 {
            for x in x0..x1 {
                self.put(x, y, bgr, 255);
            }
        }
    }

    /// `text` in `ink` and `bgr`, its top left at (`x`, `y`), clipped to `within`.
    fn text(&mut self, (x, y): (usize, usize), text: &str, ink: Ink, bgr: [u8; 3], within: Rect) {
        let (x1, y1) = (
            (within.x + within.width).min(self.size.width),
            (within.y + within.height).min(self.size.height),
        );
        coverage(text, (x, y), ink, |px, py, a| {
            if (within.x..x1).contains(&px) && (within.y..y1).contains(&py) {
                self.put(px, py, bgr, a);
            }
        });
    }
}

/// Studio-range Y, U, V of a BGR colour (BT.601, as the pipeline's conversions).
fn yuv_of([b, g, r]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let y = ((66 * r + 129 * g + 25 * b + 128) >> 8) + 16;
    let u = ((-38 * r - 74 * g + 112 * b + 128) >> 8) + 128;
    let v = ((112 * r - 94 * g - 18 * b + 128) >> 8) + 128;
    [y, u, v].map(|c| c.clamp(0, 255) as u8)
}

/// A bright colour for `label`, the same on every run.
pub fn colour_of(label: &str) -> [u8; 3] {
    const PALETTE: [[u8; 3]; 10] = [
        [56, 56, 255],
        [151, 157, 255],
        [31, 112, 255],
        [29, 178, 255],
        [49, 210, 207],
        [10, 249, 72],
        [23, 204, 146],
        [134, 219, 61],
        [211, 188, 0],
        [255, 115, 100],
    ];
    let hash = label.bytes().fold(2_166_136_261_u32, |h, c| {
        (h ^ u32::from(c)).wrapping_mul(16_777_619)
    });
    PALETTE[hash as usize % PALETTE.len()]
}

/// Draws `boxes`, found on a frame of `from`, into `area` of `paint` (the area that frame
/// fills), as `draw` says.
pub fn draw_boxes(paint: &mut Paint, area: Rect, from: FrameSize, boxes: &[Detection], draw: Draw) {
    if draw == Draw::None || from.width == 0 || from.height == 0 {
        return;
    }
    let sx = area.width as f32 / from.width as f32;
    let sy = area.height as f32 / from.height as f32;
    let thick = (area.height / 300 + 1).min(4);
    let ink = Ink {
        size: (area.height / 32).clamp(10, 28),
    };
    for d in boxes {
        let colour = colour_of(&d.label);
        let at = |v: f32, s: f32, origin: usize| origin + (v * s).round().max(0.0) as usize;
        let (x0, y0) = (at(d.rect[0], sx, area.x), at(d.rect[1], sy, area.y));
        let (x1, y1) = (at(d.rect[2], sx, area.x), at(d.rect[3], sy, area.y));
        let r = Rect {
            x: x0,
            y: y0,
            width: x1.saturating_sub(x0).max(1),
            height: y1.saturating_sub(y0).max(1),
        };
        outline(paint, r, thick, colour, area);
        if draw == Draw::Labels {
            label(paint, r, d, ink, colour, area);
        }
    }
}

/// A frame `thick` wide just inside `r`, clipped to `within`.
fn outline(paint: &mut Paint, r: Rect, thick: usize, colour: [u8; 3], within: Rect) {
    for side in r.sides(thick.min(r.width).min(r.height)) {
        paint.fill(side, within, colour);
    }
}

/// `d`'s label and score on a tab of `colour` above `r` (inside its top where there is no
/// room above), clipped to `within`.
fn label(paint: &mut Paint, r: Rect, d: &Detection, ink: Ink, colour: [u8; 3], within: Rect) {
    let text = match d.track {
        Some(id) => format!("{} #{id} {:.2}", d.label, d.score),
        None => format!("{} {:.2}", d.label, d.score),
    };
    let (w, h) = (ink.width(&text) + ink.px(6), ink.line());
    let y = match r.y >= within.y + h {
        true => r.y - h,
        false => r.y,
    };
    let tab = Rect {
        x: r.x,
        y,
        width: w,
        height: h,
    };
    paint.fill(tab, within, colour);
    let [b, g, rr] = colour;
    let light = u32::from(b) * 29 + u32::from(g) * 150 + u32::from(rr) * 77 > 128 * 256;
    let ink_colour = if light { [0, 0, 0] } else { [255, 255, 255] };
    paint.text((r.x + ink.px(3), y), &text, ink, ink_colour, within);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn person() -> Detection {
        Detection {
            label: "person".into(),
            score: 0.9,
            rect: [10.0, 20.0, 50.0, 60.0],
            track: None,
        }
    }

    #[test]
    fn a_box_is_drawn_where_it_was_found_in_every_format() {
        let size = FrameSize::new(64, 64);
        for format in [
            PixelFormat::Bgr24,
            PixelFormat::I420,
            PixelFormat::Nv12,
            PixelFormat::Gray,
            PixelFormat::Yuyv,
            PixelFormat::Yuv422p,
            PixelFormat::Yuv444p,
        ] {
            let planes = Planes::packed(format, size);
            let mut bytes = vec![0u8; format.bytes(size)];
            let mut p = Paint::new(&mut bytes, format, size, planes).unwrap();
            let all = p.all();
            draw_boxes(&mut p, all, size, &[person()], Draw::Boxes);
            let luma = |x: usize, y: usize| match format {
                PixelFormat::Bgr24 => bytes[(y * 64 + x) * 3..][..3]
                    .iter()
                    .max()
                    .copied()
                    .unwrap_or(0),
                PixelFormat::Yuyv => bytes[y * 128 + x * 2],
                _ => bytes[y * 64 + x],
            };
            assert_ne!(luma(10, 40), 0, "{format:?}: the left edge");
            assert_ne!(luma(30, 20), 0, "{format:?}: the top edge");
            assert_eq!(luma(30, 40), 0, "{format:?}: inside stays");
            assert_eq!(luma(5, 5), 0, "{format:?}: outside stays");
        }
    }

    #[test]
    fn boxes_are_scaled_into_a_tile_and_clipped_to_it() {
        let size = FrameSize::new(100, 50);
        let mut bytes = vec![0u8; 100 * 50 * 3];
        let planes = Planes::packed(PixelFormat::Bgr24, size);
        let mut p = Paint::new(&mut bytes, PixelFormat::Bgr24, size, planes).unwrap();
        let tile = Rect {
            x: 50,
            y: 0,
            width: 50,
            height: 25,
        };
        let wide = Detection {
            rect: [0.0, 0.0, 400.0, 200.0],
            ..person()
        };
        draw_boxes(
            &mut p,
            tile,
            FrameSize::new(200, 100),
            &[wide],
            Draw::Labels,
        );
        let lit = |x: usize, y: usize| bytes[(y * 100 + x) * 3..][..3] != [0, 0, 0];
        assert!(lit(50, 10), "the box's left edge at the tile's");
        assert!(!lit(49, 10), "nothing left of the tile");
        assert!(!lit(75, 40), "nothing below the tile");
    }

    #[test]
    fn a_label_keeps_its_colour() {
        assert_eq!(colour_of("person"), colour_of("person"));
        assert_ne!(colour_of("person"), colour_of("car"));
    }
}
