//! Fitting a frame to the size a model takes (the Python package's `size=` and `fit=`):
//! where the scaled picture lies, the geometry filters that make it (`scale`, `pad`, `crop`:
//! the same pixels as `--filter` with that chain, on the CPU or the GPU), and the map back
//! from the fitted frame to the original (a model's boxes drawn on the original frames).
//!
//! Invariants: a fit keeps the aspect to the nearest pixel (letterbox, crop), centres the
//! picture as `pad` and `crop` centre, and its chain always holds a geometry filter (a
//! `scale`, even to the same size), so the CUDA backend runs it on whole frames.

use crate::frame::FrameSize;

use super::Chain;

/// How a frame is resized to the size a model takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fit {
    /// Scaled whole into the size, keeping its aspect, centred on black.
    Letterbox,
    /// Scaled to cover the size, keeping its aspect, its middle cut out.
    Crop,
    /// Scaled to the size, aspect not kept.
    Stretch,
}

/// Where a fitted frame's picture lies in the size it was fitted to: the input scaled to
/// `scaled`, its top-left corner at `at` (negative where a crop cut it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Placement {
    scaled: FrameSize,
    at: (i64, i64),
}

/// How a `size` frame is placed in `to` as `fit` says (aspects kept to the nearest pixel).
fn placement(size: FrameSize, to: FrameSize, fit: Fit) -> Placement {
    let (w, h, tw, th) = (size.width, size.height, to.width, to.height);
    // Rounded to the nearest: the side `b` of a `a`x`b` frame whose side `a` becomes `ta`.
    let other = |a: usize, b: usize, ta: usize| (2 * b * ta + a) / (2 * a.max(1));
    let wide = tw * h <= th * w; // the frame is at least as wide as the target, for its height
    let (sw, sh) = match (fit, wide) {
        (Fit::Stretch, _) => (tw, th),
        (Fit::Letterbox, true) => (tw, other(w, h, tw).clamp(1, th)),
        (Fit::Letterbox, false) => (other(h, w, th).clamp(1, tw), th),
        (Fit::Crop, true) => (other(h, w, th).max(tw), th),
        (Fit::Crop, false) => (tw, other(w, h, tw).max(th)),
    };
    // Centred: a letterbox's picture by whole pixels down and right, a crop as `crop`
    // centres (`filter::geometry`).
    let centre = |a: usize, b: usize| (a as i64 - b as i64) / 2;
    let at = match fit {
        Fit::Stretch => (0, 0),
        Fit::Letterbox => (centre(tw, sw), centre(th, sh)),
        Fit::Crop => {
            let (x, y) = super::geometry::centred(FrameSize::new(sw, sh), tw, th);
            (-(x as i64), -(y as i64))
        }
    };
    Placement {
        scaled: FrameSize::new(sw, sh),
        at,
    }
}

/// The geometry chain that fits a `size` frame to `to` as `fit` says (the same filters,
/// and so the same pixels, as `--filter` with this chain).
pub fn fitting(size: FrameSize, to: FrameSize, fit: Fit) -> Chain {
    let p = placement(size, to, fit);
    let (sw, sh, tw, th) = (p.scaled.width, p.scaled.height, to.width, to.height);
    let text = match fit {
        Fit::Stretch => format!("scale:{tw}:{th}"),
        Fit::Letterbox => format!("scale:{sw}:{sh},pad:{tw}:{th}:{}:{}", p.at.0, p.at.1),
        Fit::Crop => format!("scale:{sw}:{sh},crop:{tw}:{th}"),
    };
    text.parse().expect("a fitting chain parses")
}

/// A point of a frame fitted from `size` to `to` as `fit` says, back in the `size`
/// frame's pixels: `(x, y)` there is `((x - ox) · sx, (y - oy) · sy)` for the
/// `(sx, sy, ox, oy)` returned (a model's boxes, drawn on the frames it was given).
pub fn unfitting(size: FrameSize, to: FrameSize, fit: Fit) -> (f64, f64, f64, f64) {
    let p = placement(size, to, fit);
    (
        size.width as f64 / p.scaled.width as f64,
        size.height as f64 / p.scaled.height as f64,
        p.at.0 as f64,
        p.at.1 as f64,
    )
}
