//! The window's timeline strip (`t`) and the overlay's backdrop: the last few traced frames'
//! spans drawn under the picture, one row per track, in the colours of `--timeline`, with a
//! time axis in milliseconds and how the copies overlapped.
//!
//! Invariants: the strip draws `trace::Layout`, the same rows, bars, colours and ticks the
//! SVG timeline draws; it is drawn only on the window's canvas (never into the frame `s`
//! saves, never into an output); every size is given in screen pixels and divided by the
//! window's scale, so a 4K frame shown scaled down keeps legible text.

use anyhow::Result;
use opencv::core::{Mat, Point, Rect, Scalar};
use opencv::imgproc;
use opencv::prelude::*;

use crate::trace::Layout;

/// Text height in screen pixels (what OpenCV's Hershey font at scale 0.5 gives).
const TEXT_PX: f64 = 13.0;
/// A strip row's height, screen pixels.
const ROW_PX: f64 = 18.0;

/// Sizes on a canvas shown at `scale` (window pixels per canvas pixel).
#[derive(Clone, Copy, Debug)]
pub struct Ink {
    scale: f64,
}

impl Ink {
    /// For a canvas shown at `scale` (clamped to something sensible).
    pub fn new(scale: f64) -> Self {
        Self {
            scale: if scale.is_finite() && scale > 0.05 {
                scale
            } else {
                1.0
            },
        }
    }

    /// `px` screen pixels, in canvas pixels.
    pub fn px(&self, px: f64) -> i32 {
        (px / self.scale).round().max(1.0) as i32
    }

    fn font(&self) -> f64 {
        0.5 / self.scale
    }

    fn thickness(&self) -> i32 {
        self.px(1.0)
    }

    /// Writes `text` with its baseline at `at` in `colour` (BGR).
    pub fn text(&self, canvas: &mut Mat, text: &str, at: Point, colour: Scalar) -> Result<()> {
        imgproc::put_text(
            canvas,
            text,
            at,
            imgproc::FONT_HERSHEY_SIMPLEX,
            self.font(),
            colour,
            self.thickness(),
            imgproc::LINE_AA,
            false,
        )?;
        Ok(())
    }

    /// The width of `text` in canvas pixels.
    pub fn text_width(&self, text: &str) -> Result<i32> {
        let mut base = 0;
        let size = imgproc::get_text_size(
            text,
            imgproc::FONT_HERSHEY_SIMPLEX,
            self.font(),
            self.thickness(),
            &mut base,
        )?;
        Ok(size.width)
    }

    /// Line spacing of overlay text, canvas pixels.
    pub fn line(&self) -> i32 {
        self.px(TEXT_PX + 7.0)
    }
}

/// Darkens `rect` of `canvas` (clipped to it), so that text on it reads on any picture.
pub fn backdrop(canvas: &mut Mat, rect: Rect) -> Result<()> {
    let full = Rect::new(0, 0, canvas.cols(), canvas.rows());
    let r = rect & full;
    if r.width <= 0 || r.height <= 0 {
        return Ok(());
    }
    let mut roi = Mat::roi_mut(canvas, r)?;
    let mut dark = Mat::default();
    roi.convert_to(&mut dark, -1, 0.35, 0.0)?;
    dark.copy_to(&mut roi)?;
    Ok(())
}

/// The strip's height in canvas pixels for `rows` rows.
pub fn height(ink: &Ink, rows: usize) -> i32 {
    ink.px(TEXT_PX + 12.0) + ink.px(ROW_PX) * rows.max(1) as i32 + ink.px(TEXT_PX + 14.0)
}

/// The strip's text and ticks, and its rows' lines.
const LIGHT: Scalar = Scalar::new(235.0, 235.0, 235.0, 0.0);
const GRID: Scalar = Scalar::new(90.0, 90.0, 90.0, 0.0);

/// BGR of a trace colour.
fn bgr([r, g, b]: [u8; 3]) -> Scalar {
    Scalar::new(f64::from(b), f64::from(g), f64::from(r), 0.0)
}

/// Draws `layout` (None: nothing traced yet) into `canvas`'s rows `top..` (the strip's own
/// area, below the picture), `width` canvas pixels wide.
pub fn draw(canvas: &mut Mat, top: i32, ink: &Ink, layout: Option<&Layout>) -> Result<()> {
    let width = canvas.cols();
    let caption = match layout {
        Some(l) => l.caption(),
        None => "timeline: waiting for traced frames".to_string(),
    };
    ink.text(
        canvas,
        &caption,
        Point::new(ink.px(6.0), top + ink.px(TEXT_PX + 4.0)),
        LIGHT,
    )?;
    let Some(layout) = layout else {
        return Ok(());
    };
    let names = layout
        .rows
        .iter()
        .map(|(_, n)| ink.text_width(n))
        .collect::<Result<Vec<_>>>()?;
    let left = names.into_iter().max().unwrap_or(0).min(width / 3) + ink.px(12.0);
    let area = Area {
        left,
        plot: (width - left - ink.px(10.0)).max(1),
        rows_top: top + ink.px(TEXT_PX + 12.0),
        row: ink.px(ROW_PX),
    };
    draw_rows(canvas, ink, layout, &area)?;
    draw_axis(canvas, ink, layout, &area)
}

/// Where the strip's rows and bars go, in canvas pixels.
struct Area {
    /// The plot's left edge (right of the rows' names).
    left: i32,
    /// Its width.
    plot: i32,
    /// The first row's top.
    rows_top: i32,
    /// A row's height.
    row: i32,
}

impl Area {
    /// The column of `f` (0 to 1) of the plot's width.
    fn x(&self, f: f64) -> i32 {
        self.left + (f.clamp(0.0, 1.0) * f64::from(self.plot)).round() as i32
    }
}

/// Each row's name and line, and the spans' bars on them.
fn draw_rows(canvas: &mut Mat, ink: &Ink, layout: &Layout, area: &Area) -> Result<()> {
    let (left, plot, row) = (area.left, area.plot, area.row);
    for (i, (_, name)) in layout.rows.iter().enumerate() {
        let y = area.rows_top + row * i as i32;
        ink.text(
            canvas,
            name,
            Point::new(ink.px(6.0), y + row - ink.px(5.0)),
            LIGHT,
        )?;
        imgproc::line(
            canvas,
            Point::new(left, y + row),
            Point::new(left + plot, y + row),
            GRID,
            1,
            imgproc::LINE_8,
            0,
        )?;
    }
    for b in &layout.bars {
        let y = area.rows_top + row * b.row as i32;
        // At least 3 screen pixels: a 10 µs span in a 100 ms window still shows its colour.
        let (x0, x1) = (area.x(b.x0), area.x(b.x1).max(area.x(b.x0) + ink.px(3.0)));
        imgproc::rectangle(
            canvas,
            Rect::new(x0, y + ink.px(2.0), x1 - x0, row - ink.px(4.0)),
            bgr(b.kind.rgb()),
            imgproc::FILLED,
            imgproc::LINE_8,
            0,
        )?;
    }
    Ok(())
}

/// The time axis under the rows: a tick at each of the layout's, labelled where the label
/// doesn't run into the previous one (its tick stays).
fn draw_axis(canvas: &mut Mat, ink: &Ink, layout: &Layout, area: &Area) -> Result<()> {
    let width = canvas.cols();
    let axis = area.rows_top + area.row * layout.rows.len() as i32 + ink.px(2.0);
    let mut free_from = i32::MIN;
    for t in &layout.ticks_ms {
        let tx = area.x(t / layout.span_ms);
        imgproc::line(
            canvas,
            Point::new(tx, axis),
            Point::new(tx, axis + ink.px(4.0)),
            LIGHT,
            1,
            imgproc::LINE_8,
            0,
        )?;
        let label = format!("{} ms", trim(*t));
        let w = ink.text_width(&label)?;
        let lx = (tx - w / 2).clamp(0, (width - w).max(0));
        if lx >= free_from {
            ink.text(
                canvas,
                &label,
                Point::new(lx, axis + ink.px(TEXT_PX + 5.0)),
                LIGHT,
            )?;
            free_from = lx + w + ink.px(8.0);
        }
    }
    Ok(())
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}
