//! Boxes and labels that an embedding program asks to be drawn into an input's frames
//! (Python's `run.write(frame, overlay=…)`: a model's detections), on their way to the
//! input's window, outputs and browser view, and to the mosaic where it is composed on the
//! CPU. Each input's marks stay until the program replaces them, so they are drawn on the
//! frames that follow the one the model saw (a model's answer comes a few frames late).
//!
//! Invariants: the frame the pipeline made is never changed: marks are drawn into a copy
//! (`Drawn`), and the sink that hands frames over takes the frame before that; a mark is
//! drawn in the frame's own format, each pixel it covers set to the mark's colour in that
//! format (BGR, gray, I420 and NV12; other formats are passed on unmarked, said once); a
//! mark that reaches past the frame is clipped to it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::Frame;
use crate::frame::FrameSize;
use crate::pixel::{PixelFormat, Planes};

/// One box and its label, in the pipeline's frame's pixels.
#[derive(Clone, Debug, PartialEq)]
pub struct Mark {
    /// Its left column and top row (may be negative: clipped).
    pub x: i32,
    /// Its top row.
    pub y: i32,
    /// Its width and height in pixels.
    pub w: i32,
    /// Its height.
    pub h: i32,
    /// Written above the box, on a black band (empty: none).
    pub label: String,
    /// Blue, green, red.
    pub color: [u8; 3],
}

/// Each input's marks, shared between the program that sets them and the sink that draws.
#[derive(Clone, Debug, Default)]
pub struct Marks(Arc<Mutex<HashMap<usize, Arc<Vec<Mark>>>>>);

impl Marks {
    /// Input `input`'s marks from now on (none: clears them).
    pub fn set(&self, input: usize, marks: Vec<Mark>) {
        if let Ok(mut all) = self.0.lock() {
            all.insert(input, Arc::new(marks));
        }
    }

    /// Input `input`'s marks now, where it has any.
    pub fn of(&self, input: usize) -> Option<Arc<Vec<Mark>>> {
        let all = self.0.lock().ok()?;
        all.get(&input).filter(|m| !m.is_empty()).cloned()
    }
}

/// Draws marks into copies of frames (module doc).
#[derive(Default)]
pub struct Drawn {
    /// The copy.
    bytes: Vec<u8>,
    /// A format it can't draw in was met and said.
    said: bool,
}

impl Drawn {
    /// `frame` with `marks` drawn, in this drawer's copy; None where its format has no
    /// drawing here (the frame then goes on unmarked).
    pub fn draw<'a>(&'a mut self, frame: &Frame<'a>, marks: &[Mark]) -> Option<Frame<'a>> {
        let (format, size) = (frame.format(), frame.size());
        if frame.bytes.len() < format.bytes(size) {
            return None; // not brought down: only the mosaic composed on the device has it
        }
        let Some(paint) = Painter::new(format, size) else {
            if !std::mem::replace(&mut self.said, true) {
                crate::warn!(
                    "marks are not drawn on {format} frames (BGR, gray, I420 and NV12 are)"
                );
            }
            return None;
        };
        self.bytes.clear();
        self.bytes.extend_from_slice(frame.bytes);
        for mark in marks {
            paint.mark(&mut self.bytes, mark);
        }
        Some(Frame {
            desc: frame.desc,
            bytes: &self.bytes,
        })
    }
}

/// How one pixel is set to a colour in a frame of one format and size.
struct Painter {
    format: PixelFormat,
    size: FrameSize,
    planes: Planes,
}

impl Painter {
    fn new(format: PixelFormat, size: FrameSize) -> Option<Self> {
        let drawn = matches!(
            format,
            PixelFormat::Bgr24 | PixelFormat::Gray | PixelFormat::I420 | PixelFormat::Nv12
        );
        drawn.then(|| Self {
            format,
            size,
            planes: Planes::packed(format, size),
        })
    }

    /// `color` (BGR) as this format stores it: B, G, R; or Y, U, V.
    fn value(&self, color: [u8; 3]) -> [u8; 3] {
        if self.format == PixelFormat::Bgr24 {
            return color;
        }
        let two = FrameSize::new(2, 2);
        let bgr = color.repeat(4);
        let mut out = vec![0; self.format.bytes(two)];
        self.format.from_bgr(two, &bgr, &mut out);
        match self.format {
            PixelFormat::Gray => [out[0], 128, 128],
            _ => [out[0], out[4], out[5]], // I420: Y×4, U, V; NV12: Y×4, UV
        }
    }

    /// Sets pixel (`x`, `y`), inside the frame, to `v` (`value`'s).
    fn set(&self, bytes: &mut [u8], x: usize, y: usize, v: [u8; 3]) {
        let p: Vec<_> = self.planes.iter().collect();
        match self.format {
            PixelFormat::Bgr24 => {
                let at = p[0].offset + y * p[0].pitch + 3 * x;
                bytes[at..at + 3].copy_from_slice(&v);
            }
            PixelFormat::Gray => bytes[p[0].offset + y * p[0].pitch + x] = v[0],
            PixelFormat::I420 => {
                bytes[p[0].offset + y * p[0].pitch + x] = v[0];
                bytes[p[1].offset + (y / 2) * p[1].pitch + x / 2] = v[1];
                bytes[p[2].offset + (y / 2) * p[2].pitch + x / 2] = v[2];
            }
            _ => {
                bytes[p[0].offset + y * p[0].pitch + x] = v[0];
                let at = p[1].offset + (y / 2) * p[1].pitch + (x / 2) * 2;
                bytes[at..at + 2].copy_from_slice(&v[1..]);
            }
        }
    }

    /// Fills the part of the rectangle (`x`, `y`, `w`, `h`) inside the frame with `v`.
    fn fill(&self, bytes: &mut [u8], (x, y, w, h): (i32, i32, i32, i32), v: [u8; 3]) {
        let (fw, fh) = (self.size.width as i32, self.size.height as i32);
        for row in y.max(0)..(y + h).min(fh) {
            for col in x.max(0)..(x + w).min(fw) {
                self.set(bytes, col as usize, row as usize, v);
            }
        }
    }

    /// Draws `mark`: its box's four edges, and its label on a black band above the box (in
    /// it, where the box touches the frame's top).
    fn mark(&self, bytes: &mut [u8], mark: &Mark) {
        let v = self.value(mark.color);
        let t = (self.size.height as i32 / 360).max(2); // the lines' width
        let (x, y, w, h) = (mark.x, mark.y, mark.w.max(1), mark.h.max(1));
        for edge in [
            (x, y, w, t),
            (x, y + h - t, w, t),
            (x, y, t, h),
            (x + w - t, y, t, h),
        ] {
            self.fill(bytes, edge, v);
        }
        if mark.label.is_empty() {
            return;
        }
        // Braces would be the text filter's placeholders: shown as parentheses.
        let label = mark.label.replace('{', "(").replace('}', ")");
        let Ok(text) = crate::filter::text::Text::parse(&label, &[]) else {
            return;
        };
        let px = (self.size.height / 45 / 8 * 8).max(8);
        let placed = text.place(self.size);
        let scale = (px / 8) as i32;
        let band = 8 * scale + 4 * scale;
        let top = if y - band >= 0 { y - band } else { y };
        let placed = crate::filter::text::Placed {
            x0: x + 2 * scale,
            y0: top + 2 * scale,
            scale,
            ..placed
        };
        let (cx, cy, cw, ch) = placed.covers();
        let black = self.value([0, 0, 0]);
        let atlas = crate::filter::text::atlas();
        let (fw, fh) = (self.size.width as i32, self.size.height as i32);
        for row in cy.max(0)..(cy + ch).min(fh) {
            for col in cx.max(0)..(cx + cw).min(fw) {
                let ink = placed.ink(atlas, col, row);
                self.set(
                    bytes,
                    col as usize,
                    row as usize,
                    if ink { v } else { black },
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc::FrameDesc;

    fn frame_of(format: PixelFormat, size: FrameSize, bytes: &[u8]) -> (FrameDesc, Vec<u8>) {
        (FrameDesc::host(format, size), bytes.to_vec())
    }

    #[test]
    fn a_box_is_drawn_in_each_format_and_the_frame_itself_is_left_alone() {
        let size = FrameSize::new(64, 48);
        let red = Mark {
            x: 8,
            y: 30,
            w: 20,
            h: 10,
            label: "cat".into(),
            color: [0, 0, 255],
        };
        for format in [
            PixelFormat::Bgr24,
            PixelFormat::Gray,
            PixelFormat::I420,
            PixelFormat::Nv12,
        ] {
            let (desc, bytes) = frame_of(format, size, &vec![90; format.bytes(size)]);
            let frame = Frame {
                desc: &desc,
                bytes: &bytes,
            };
            let mut drawn = Drawn::default();
            let out = drawn
                .draw(&frame, std::slice::from_ref(&red))
                .expect("drawn");
            assert!(
                bytes.iter().all(|&b| b == 90),
                "{format}: the frame changed"
            );
            let (mut bgr, mut plain) = (vec![0; size.bytes()], vec![0; size.bytes()]);
            format.to_bgr(size, out.bytes, &mut bgr);
            format.to_bgr(size, &bytes, &mut plain);
            let at = |x: usize, y: usize| &bgr[(y * 64 + x) * 3..(y * 64 + x) * 3 + 3];
            let was = |x: usize, y: usize| &plain[(y * 64 + x) * 3..(y * 64 + x) * 3 + 3];
            // On the box's top edge, inside it, and above it (the label's band).
            let edge = at(18, 30);
            match format {
                PixelFormat::Gray => assert!(edge[0] < 86 && edge == [edge[0]; 3], "{edge:?}"),
                _ => assert!(edge[2] > 200 && edge[1] < 40, "{format}: {edge:?}"),
            }
            assert_eq!(at(18, 35), was(18, 35), "{format}: inside the box");
            assert!(at(9, 19)[0] < 40, "{format}: the label's band");
            assert_eq!(at(60, 5), was(60, 5), "{format}: far from it");
        }
    }

    #[test]
    fn marks_past_the_edges_are_clipped_and_other_formats_pass() {
        let size = FrameSize::new(16, 16);
        let m = Mark {
            x: -50,
            y: 10,
            w: 500,
            h: 500,
            label: "a long label that runs off the frame".into(),
            color: [255, 255, 255],
        };
        let (desc, bytes) = frame_of(PixelFormat::Bgr24, size, &vec![0; size.bytes()]);
        let frame = Frame {
            desc: &desc,
            bytes: &bytes,
        };
        let mut drawn = Drawn::default();
        assert!(drawn.draw(&frame, std::slice::from_ref(&m)).is_some());
        let yuyv = PixelFormat::Yuyv;
        let (desc, bytes) = frame_of(yuyv, size, &vec![0; yuyv.bytes(size)]);
        let frame = Frame {
            desc: &desc,
            bytes: &bytes,
        };
        assert!(drawn.draw(&frame, &[m]).is_none());
    }

    #[test]
    fn marks_are_kept_by_input_until_replaced() {
        let marks = Marks::default();
        assert!(marks.of(0).is_none());
        let m = Mark {
            x: 0,
            y: 0,
            w: 1,
            h: 1,
            label: String::new(),
            color: [0; 3],
        };
        marks.set(1, vec![m.clone()]);
        assert!(marks.of(0).is_none());
        assert_eq!(marks.of(1).as_deref(), Some(&vec![m]));
        marks.set(1, Vec::new());
        assert!(marks.of(1).is_none());
    }
}
