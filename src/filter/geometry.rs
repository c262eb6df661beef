//! Filters that change a frame's geometry: `scale`, `crop`, `pad`, `hflip`, `vflip`,
//! `transpose`. Each maps a packed BGR frame of one size to one of another (`output`), in
//! plain Rust (`apply`), which is what the CPU backend runs in every build.
//!
//! Invariants: `output` is the only place a geometry filter's size is decided, and refuses
//! (with the reason) what does not fit the frame (a crop past its edge, a pad smaller than
//! it); `crop`, `pad`, the flips and `transpose` move pixels untouched, as ffmpeg's filters
//! of those names do on BGR; `scale` samples pixel centres (`bilinear`: 14-bit weights each
//! way, rounded once; `area`: the mean over each output pixel's footprint, rounded).

use std::fmt;

use crate::frame::{FrameSize, CHANNELS, MAX_SIDE};

/// A side of `scale`'s output.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// This many pixels.
    Fixed(usize),
    /// Kept in the input's aspect from the other side (`-1`), rounded to a multiple of
    /// `n` (`-2`: even).
    Aspect(usize),
}

/// How `scale` samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sampling {
    /// Bilinear between the four nearest pixel centres.
    Bilinear,
    /// The mean over each output pixel's footprint (for shrinking).
    Area,
}

/// ffmpeg's `transpose` directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Turn {
    /// A quarter counter-clockwise and flipped vertically (ffmpeg's 0, its default).
    CclockFlip,
    /// A quarter clockwise (1).
    Clock,
    /// A quarter counter-clockwise (2).
    Cclock,
    /// A quarter clockwise and flipped vertically (3).
    ClockFlip,
}

/// A geometry filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Geometry {
    /// `scale:W:H[:bilinear|area]`.
    Scale {
        /// Output width.
        w: Side,
        /// Output height.
        h: Side,
        /// How it samples.
        sampling: Sampling,
    },
    /// `crop:W:H[:X:Y]` (centred where X and Y are left out).
    Crop {
        /// Output size.
        w: usize,
        /// Output height.
        h: usize,
        /// Top-left corner in the input; None: centred.
        at: Option<(usize, usize)>,
    },
    /// `pad:W:H[:X:Y[:RRGGBB]]`: the input placed at X, Y on a W×H frame of the colour.
    Pad {
        /// Output width.
        w: usize,
        /// Output height.
        h: usize,
        /// The input's top-left corner in the output.
        x: usize,
        /// Its top row.
        y: usize,
        /// Blue, green, red.
        color: [u8; 3],
    },
    /// Mirrored left to right.
    HFlip,
    /// Upside down.
    VFlip,
    /// Rows become columns.
    Transpose(Turn),
}

/// Why a geometry filter can't be made, or can't take a frame of some size.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GeometryError {
    /// Its arguments (`scale:W:H`, …).
    #[error("filter '{name}': {why}; expected {shape}")]
    Arguments {
        /// The filter's name.
        name: String,
        /// What is wrong with them.
        why: ArgumentError,
        /// The arguments it takes.
        shape: &'static str,
    },
    /// A crop that reaches past the frame.
    #[error("{filter}: a {crop} crop at {x},{y} reaches past the {size} frame", x = at.0, y = at.1)]
    CropPast {
        /// The filter as written.
        filter: String,
        /// The crop's size.
        crop: FrameSize,
        /// Its top left corner.
        at: (usize, usize),
        /// The frame's size.
        size: FrameSize,
    },
    /// A pad smaller than the frame placed in it.
    #[error("{filter}: the {size} frame at {x},{y} does not fit in {pad}", x = at.0, y = at.1)]
    PadTooSmall {
        /// The filter as written.
        filter: String,
        /// The padded size.
        pad: FrameSize,
        /// Where the frame goes.
        at: (usize, usize),
        /// The frame's size.
        size: FrameSize,
    },
    /// A frame with a side of 0 or over `MAX_SIDE`.
    #[error("{filter}: makes a {out} frame of a {size} one (sides 1 to {MAX_SIDE})")]
    OutOfRange {
        /// The filter as written.
        filter: String,
        /// The size it would make.
        out: FrameSize,
        /// The frame's size.
        size: FrameSize,
    },
    /// A size the arguments can't make.
    #[error(transparent)]
    Size(ArgumentError),
}

/// What is wrong with a geometry filter's arguments.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentError {
    /// Not as many as it takes.
    #[error("{0} argument(s) given")]
    Count(usize),
    /// A side or a position that is no number of pixels (or over the largest side).
    #[error("'{0}' is not a number of pixels")]
    NotPixels(String),
    /// A side of 0.
    #[error("a side of 0")]
    ZeroSide,
    /// Both sides kept in the aspect.
    #[error("only one side may keep the aspect")]
    BothAspect,
    /// A sampling other than bilinear or area.
    #[error("'{0}' is no sampling")]
    Sampling(String),
    /// A colour that is not RRGGBB.
    #[error("'{0}' is not a colour RRGGBB")]
    Colour(String),
    /// A transpose direction it doesn't know.
    #[error("'{0}' is no direction")]
    Direction(String),
}

impl Geometry {
    /// Parses `name`'s arguments (`scale:1280:720`, `crop:640,360,0,0`: colons or commas).
    pub fn parse(name: &str, args: &[String]) -> Option<Result<Self, GeometryError>> {
        let args: Vec<&str> = args.iter().flat_map(|a| a.split(':')).collect();
        let shape = match name {
            "scale" => "scale:W:H[:bilinear|area] (-1 keeps the aspect, -2 keeps it even)",
            "crop" => "crop:W:H[:X:Y]",
            "pad" => "pad:W:H[:X:Y[:RRGGBB]]",
            "hflip" => "hflip",
            "vflip" => "vflip",
            "transpose" => "transpose[:clock|cclock|clock_flip|cclock_flip or 0-3]",
            _ => return None,
        };
        Some(
            parse_args(name, &args).map_err(|why| GeometryError::Arguments {
                name: name.to_string(),
                why,
                shape,
            }),
        )
    }

    /// The size of the frame it makes of one of `size`; why it can't, where it can't.
    pub fn output(&self, size: FrameSize) -> Result<FrameSize, GeometryError> {
        let out = match *self {
            Geometry::Scale { w, h, .. } => scaled(size, w, h).map_err(GeometryError::Size)?,
            Geometry::Crop { w, h, at } => {
                let (x, y) = at.unwrap_or_else(|| centred(size, w, h));
                if x + w > size.width || y + h > size.height {
                    return Err(GeometryError::CropPast {
                        filter: self.to_string(),
                        crop: FrameSize::new(w, h),
                        at: (x, y),
                        size,
                    });
                }
                FrameSize::new(w, h)
            }
            Geometry::Pad { w, h, x, y, .. } => {
                if x + size.width > w || y + size.height > h {
                    return Err(GeometryError::PadTooSmall {
                        filter: self.to_string(),
                        pad: FrameSize::new(w, h),
                        at: (x, y),
                        size,
                    });
                }
                FrameSize::new(w, h)
            }
            Geometry::HFlip | Geometry::VFlip => size,
            Geometry::Transpose(_) => FrameSize::new(size.height, size.width),
        };
        if out.width == 0 || out.height == 0 || out.width > MAX_SIDE || out.height > MAX_SIDE {
            return Err(GeometryError::OutOfRange {
                filter: self.to_string(),
                out,
                size,
            });
        }
        Ok(out)
    }

    /// Makes `dst` (of `out`, which `output(size)` gave) from `src` (of `size`), packed BGR.
    pub fn apply(&self, size: FrameSize, src: &[u8], out: FrameSize, dst: &mut [u8]) {
        let fill = match *self {
            Geometry::Pad { color, .. } => color,
            _ => [0; 3],
        };
        self.apply_px(size, (src, CHANNELS), out, dst, &fill);
    }

    /// `apply` on a plane of `px` bytes a pixel (`src`: the plane and `px`): packed BGR's 3,
    /// a Y, U or V plane's 1, NV12's interleaved chroma's 2; a pad fills with `fill` (one
    /// pixel's `px` bytes).
    pub fn apply_px(
        &self,
        size: FrameSize,
        (src, px): (&[u8], usize),
        out: FrameSize,
        dst: &mut [u8],
        fill: &[u8],
    ) {
        match *self {
            Geometry::Scale { .. } => {
                let whole = Window {
                    x: 0,
                    y: 0,
                    w: out.width,
                    h: out.height,
                };
                self.scale_window(size, (src, px), out, whole, dst)
            }
            Geometry::Crop { w, h, at } => {
                let (x, y) = at.unwrap_or_else(|| centred(size, w, h));
                for (r, row) in dst.chunks_exact_mut(w * px).take(h).enumerate() {
                    let from = ((y + r) * size.width + x) * px;
                    row.copy_from_slice(&src[from..from + w * px]);
                }
            }
            Geometry::Pad { w, h, x, y, .. } => {
                dst[..w * h * px]
                    .chunks_exact_mut(px)
                    .for_each(|p| p.copy_from_slice(&fill[..px]));
                let stride = size.width * px;
                for (r, row) in src[..stride * size.height].chunks_exact(stride).enumerate() {
                    let to = ((y + r) * w + x) * px;
                    dst[to..to + row.len()].copy_from_slice(row);
                }
            }
            Geometry::HFlip | Geometry::VFlip | Geometry::Transpose(_) => {
                self.move_pixels(size, out, (src, px), dst)
            }
        }
    }

    /// A scale to `out` of which only `window` is made (a crop after the scale, in one
    /// pass: the same bytes as scaling whole and cropping, without the pixels the crop
    /// leaves out); `dst` is the window's. Any other filter does nothing.
    pub fn scale_window(
        &self,
        size: FrameSize,
        (src, px): (&[u8], usize),
        out: FrameSize,
        window: Window,
        dst: &mut [u8],
    ) {
        match *self {
            Geometry::Scale {
                sampling: Sampling::Bilinear,
                ..
            } => bilinear(size, (src, px), out, window, dst),
            Geometry::Scale {
                sampling: Sampling::Area,
                ..
            } => area(size, (src, px), out, window, dst),
            _ => {}
        }
    }

    /// The flips and turns: each output pixel from the input pixel it names.
    fn move_pixels(
        &self,
        size: FrameSize,
        out: FrameSize,
        (src, px): (&[u8], usize),
        dst: &mut [u8],
    ) {
        let (w, h) = (size.width, size.height);
        for oy in 0..out.height {
            for ox in 0..out.width {
                let (x, y) = match *self {
                    Geometry::HFlip => (w - 1 - ox, oy),
                    Geometry::VFlip => (ox, h - 1 - oy),
                    Geometry::Transpose(Turn::CclockFlip) => (oy, ox),
                    Geometry::Transpose(Turn::Clock) => (oy, h - 1 - ox),
                    Geometry::Transpose(Turn::Cclock) => (w - 1 - oy, ox),
                    Geometry::Transpose(Turn::ClockFlip) => (w - 1 - oy, h - 1 - ox),
                    _ => (ox, oy),
                };
                let (to, from) = ((oy * out.width + ox) * px, (y * w + x) * px);
                dst[to..to + px].copy_from_slice(&src[from..from + px]);
            }
        }
    }
}

impl fmt::Display for Geometry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = |s: Side| match s {
            Side::Fixed(n) => n.to_string(),
            Side::Aspect(1) => "-1".into(),
            Side::Aspect(n) => format!("-{n}"),
        };
        match *self {
            Geometry::Scale { w, h, sampling } => {
                let how = match sampling {
                    Sampling::Bilinear => "bilinear",
                    Sampling::Area => "area",
                };
                write!(f, "scale:{}:{}:{how}", side(w), side(h))
            }
            Geometry::Crop { w, h, at: None } => write!(f, "crop:{w}:{h}"),
            Geometry::Crop {
                w,
                h,
                at: Some((x, y)),
            } => write!(f, "crop:{w}:{h}:{x}:{y}"),
            Geometry::Pad {
                w,
                h,
                x,
                y,
                color: [b, g, r],
            } => {
                write!(f, "pad:{w}:{h}:{x}:{y}:{r:02x}{g:02x}{b:02x}")
            }
            Geometry::HFlip => write!(f, "hflip"),
            Geometry::VFlip => write!(f, "vflip"),
            Geometry::Transpose(t) => write!(
                f,
                "transpose:{}",
                match t {
                    Turn::CclockFlip => "cclock_flip",
                    Turn::Clock => "clock",
                    Turn::Cclock => "cclock",
                    Turn::ClockFlip => "clock_flip",
                }
            ),
        }
    }
}

/// A crop's corner where none is given: centred, half a pixel rounded to even (ffmpeg's
/// `(in_w-out_w)/2` through lrint).
pub fn centred(size: FrameSize, w: usize, h: usize) -> (usize, usize) {
    let half = |a: usize, b: usize| (a.saturating_sub(b) as f64 / 2.0).round_ties_even() as usize;
    (half(size.width, w), half(size.height, h))
}

fn parse_args(name: &str, args: &[&str]) -> Result<Geometry, ArgumentError> {
    let count = |ok: &[usize]| -> Result<(), ArgumentError> {
        match ok.contains(&args.len()) {
            true => Ok(()),
            false => Err(ArgumentError::Count(args.len())),
        }
    };
    match name {
        "scale" => count(&[2, 3]).and_then(|_| parse_scale(args)),
        "crop" => count(&[2, 4]).and_then(|_| parse_crop(args)),
        "pad" => count(&[2, 4, 5]).and_then(|_| parse_pad(args)),
        "hflip" => count(&[0]).map(|_| Geometry::HFlip),
        "vflip" => count(&[0]).map(|_| Geometry::VFlip),
        _ => count(&[0, 1]).and_then(|_| parse_transpose(args)),
    }
}

/// A number of pixels, at most `MAX_SIDE`.
fn px(s: &str) -> Result<usize, ArgumentError> {
    s.parse::<usize>()
        .ok()
        .filter(|v| *v <= MAX_SIDE)
        .ok_or_else(|| ArgumentError::NotPixels(s.to_string()))
}

/// `scale:W:H[:bilinear|area]`, -1 or -2 for a side kept in the aspect.
fn parse_scale(args: &[&str]) -> Result<Geometry, ArgumentError> {
    let side = |s: &str| match s {
        "-1" => Ok(Side::Aspect(1)),
        "-2" => Ok(Side::Aspect(2)),
        _ => px(s).and_then(|v| match v {
            0 => Err(ArgumentError::ZeroSide),
            v => Ok(Side::Fixed(v)),
        }),
    };
    let (w, h) = (side(args[0])?, side(args[1])?);
    if matches!((w, h), (Side::Aspect(_), Side::Aspect(_))) {
        return Err(ArgumentError::BothAspect);
    }
    let sampling = match args.get(2).copied() {
        None | Some("bilinear") => Sampling::Bilinear,
        Some("area") => Sampling::Area,
        Some(other) => return Err(ArgumentError::Sampling(other.to_string())),
    };
    Ok(Geometry::Scale { w, h, sampling })
}

/// `crop:W:H[:X:Y]`.
fn parse_crop(args: &[&str]) -> Result<Geometry, ArgumentError> {
    let at = match args.len() {
        4 => Some((px(args[2])?, px(args[3])?)),
        _ => None,
    };
    Ok(Geometry::Crop {
        w: px(args[0])?,
        h: px(args[1])?,
        at,
    })
}

/// `pad:W:H[:X:Y[:RRGGBB]]`.
fn parse_pad(args: &[&str]) -> Result<Geometry, ArgumentError> {
    let (x, y) = match args.len() {
        2 => (0, 0),
        _ => (px(args[2])?, px(args[3])?),
    };
    let color = match args.get(4) {
        None => [0, 0, 0],
        Some(c) => {
            let v = u32::from_str_radix(c.trim_start_matches('#'), 16)
                .ok()
                .filter(|_| c.trim_start_matches('#').len() == 6)
                .ok_or_else(|| ArgumentError::Colour(c.to_string()))?;
            [v as u8, (v >> 8) as u8, (v >> 16) as u8]
        }
    };
    Ok(Geometry::Pad {
        w: px(args[0])?,
        h: px(args[1])?,
        x,
        y,
        color,
    })
}

/// `transpose[:DIR]`, ffmpeg's directions by name or number.
fn parse_transpose(args: &[&str]) -> Result<Geometry, ArgumentError> {
    Ok(Geometry::Transpose(match args.first().copied() {
        None | Some("0") | Some("cclock_flip") => Turn::CclockFlip,
        Some("1") | Some("clock") => Turn::Clock,
        Some("2") | Some("cclock") => Turn::Cclock,
        Some("3") | Some("clock_flip") => Turn::ClockFlip,
        Some(other) => return Err(ArgumentError::Direction(other.to_string())),
    }))
}

/// `scale`'s output size: a side kept in the input's aspect rounds to the nearest multiple
/// of its `n`.
fn scaled(size: FrameSize, w: Side, h: Side) -> Result<FrameSize, ArgumentError> {
    let keep = |other: usize, of: usize, by: usize, n: usize| {
        let exact = other as f64 * of as f64 / by as f64;
        ((exact / n as f64).round() as usize * n).max(n)
    };
    Ok(match (w, h) {
        (Side::Fixed(w), Side::Fixed(h)) => FrameSize::new(w, h),
        (Side::Aspect(n), Side::Fixed(h)) => FrameSize::new(keep(h, size.width, size.height, n), h),
        (Side::Fixed(w), Side::Aspect(n)) => FrameSize::new(w, keep(w, size.height, size.width, n)),
        _ => return Err(ArgumentError::BothAspect),
    })
}

/// A rectangle of a scale's output: its corner and size, in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Left column.
    pub x: usize,
    /// Top row.
    pub y: usize,
    /// Width.
    pub w: usize,
    /// Height.
    pub h: usize,
}

/// Weight bits of `bilinear`, each way (`kernels/geometry.cu` takes them as `FP_SCALE_BITS`).
pub const BITS: u32 = 14;

/// `bilinear`'s taps from `input` to `output` pixels as `kernels/geometry.cu` reads them:
/// for each output coordinate its first input coordinate and then `n` weights (those it
/// has, then zeros), and `n`.
pub fn tap_table(input: usize, output: usize) -> (Vec<i32>, usize) {
    let taps = taps(input, output);
    let n = taps.iter().map(|(_, w)| w.len()).max().unwrap_or(1);
    let mut table = Vec::with_capacity(output * (n + 1));
    for (first, weights) in taps {
        table.push(first as i32);
        table.extend(weights.iter().map(|&w| w as i32));
        table.extend(std::iter::repeat_n(0, n - weights.len()));
    }
    (table, n)
}

/// For each output coordinate: the first input coordinate it reads and the weights (of
/// 2^BITS, summing to it) of those from there. Pixel centres are sampled (`(o + 0.5) * in /
/// out - 0.5`); a tent one input pixel wide each side when growing, as wide as an output
/// pixel's footprint when shrinking (as libswscale's bilinear widens it), so that shrinking
/// averages instead of skipping pixels. Reads past an edge take the edge pixel.
fn taps(input: usize, output: usize) -> Vec<(usize, Vec<u32>)> {
    let ratio = input as f64 / output as f64;
    let reach = ratio.max(1.0);
    (0..output)
        .map(|o| {
            let centre = (o as f64 + 0.5) * ratio - 0.5;
            let first = (centre - reach).floor() as isize + 1;
            let last = (centre + reach).ceil() as isize - 1;
            let mut weights: Vec<(usize, f64)> = Vec::new();
            for i in first..=last {
                let w = (1.0 - (i as f64 - centre).abs() / reach).max(0.0);
                let at = i.clamp(0, input as isize - 1) as usize;
                match weights.last_mut() {
                    Some((prev, pw)) if *prev == at => *pw += w,
                    _ => weights.push((at, w)),
                }
            }
            let total: f64 = weights.iter().map(|(_, w)| w).sum();
            let one = f64::from(1u32 << BITS);
            let mut fixed: Vec<u32> = weights
                .iter()
                .map(|(_, w)| (w / total * one).round() as u32)
                .collect();
            // The rounding error goes to the largest weight: the weights sum to 2^BITS.
            let sum: u32 = fixed.iter().sum();
            let big = (0..fixed.len()).max_by_key(|&k| fixed[k]).unwrap_or(0);
            fixed[big] = (fixed[big] + (1 << BITS)).saturating_sub(sum);
            (weights.first().map_or(0, |w| w.0), fixed)
        })
        .collect()
}

fn bilinear(
    size: FrameSize,
    (src, px): (&[u8], usize),
    out: FrameSize,
    win: Window,
    dst: &mut [u8],
) {
    // The taps as flat tables (first input coordinate, then `n` weights, zeros last), of
    // the window's rows and columns only. Columns first, over the part of each row the
    // window's columns read (contiguous, so the compiler vectorizes it), kept to 2^BITS
    // times their value; then rows, rounded once. The sums are exact integers, so the
    // order is free: the result is the same as rows first.
    let (xt, xn) = tap_table(size.width, out.width);
    let (yt, yn) = tap_table(size.height, out.height);
    let xt = &xt[win.x * (xn + 1)..(win.x + win.w) * (xn + 1)];
    let yt = &yt[win.y * (yn + 1)..(win.y + win.h) * (yn + 1)];
    // The input columns the window reads: from its first tap to its last one's end.
    let lo = xt.first().map_or(0, |&f| f as usize);
    let hi = xt
        .chunks_exact(xn + 1)
        .map(|t| t[0] as usize + xn)
        .max()
        .unwrap_or(0)
        .min(size.width);
    let (stride, ow) = (size.width * px, win.w * px);
    // Zeros past the read part, for the zero weights that pad a tap list at an edge.
    let mut column = vec![0u32; (hi - lo + xn) * px];
    let read = (hi - lo) * px;
    for (t, line) in yt.chunks_exact(yn + 1).zip(dst.chunks_exact_mut(ow)) {
        let y0 = t[0] as usize;
        column[..read].fill(0);
        for (k, &w) in t[1..].iter().enumerate() {
            if w == 0 {
                continue;
            }
            let at = (y0 + k) * stride + lo * px;
            for (a, &v) in column[..read].iter_mut().zip(&src[at..at + read]) {
                *a += u32::from(v) * w as u32;
            }
        }
        match (px, xn) {
            (1, 2) => rows_of::<1, 2>(&column, xt, lo, line),
            (1, 4) => rows_of::<1, 4>(&column, xt, lo, line),
            (2, 2) => rows_of::<2, 2>(&column, xt, lo, line),
            (2, 4) => rows_of::<2, 4>(&column, xt, lo, line),
            (3, 2) => rows_of::<3, 2>(&column, xt, lo, line),
            (3, 4) => rows_of::<3, 4>(&column, xt, lo, line),
            _ => row_of(&column, (xt, xn), (lo, px), line),
        }
    }
}

/// One output row from the columns' sums: `N` taps of `PX` bytes a pixel, unrolled (the
/// common shapes: halving and doubling, any ratio between).
fn rows_of<const PX: usize, const N: usize>(
    column: &[u32],
    xt: &[i32],
    lo: usize,
    line: &mut [u8],
) {
    let round = 1u64 << (2 * BITS - 1);
    for (t, pixel) in xt.chunks_exact(N + 1).zip(line.chunks_exact_mut(PX)) {
        let at = (t[0] as usize - lo) * PX;
        let taps = &column[at..at + N * PX];
        for (c, v) in pixel.iter_mut().enumerate() {
            let mut sum = round;
            for k in 0..N {
                sum += u64::from(taps[k * PX + c]) * t[1 + k] as u64;
            }
            *v = (sum >> (2 * BITS)).min(255) as u8;
        }
    }
}

/// `rows_of` for any tap count and pixel size.
fn row_of(column: &[u32], (xt, xn): (&[i32], usize), (lo, px): (usize, usize), line: &mut [u8]) {
    let round = 1u64 << (2 * BITS - 1);
    for (t, pixel) in xt.chunks_exact(xn + 1).zip(line.chunks_exact_mut(px)) {
        let at = (t[0] as usize - lo) * px;
        for (c, v) in pixel.iter_mut().enumerate() {
            let sum = t[1..].iter().enumerate().fold(round, |sum, (k, &w)| {
                sum + u64::from(column[at + k * px + c]) * w as u64
            });
            *v = (sum >> (2 * BITS)).min(255) as u8;
        }
    }
}

/// For each output coordinate: the input coordinates its footprint covers and how much of
/// each (in 1/256 of a pixel of the output's footprint scaled by `output`).
fn spans(input: usize, output: usize) -> Vec<Vec<(usize, u64)>> {
    (0..output)
        .map(|o| {
            // The footprint is [o * input, (o + 1) * input) in units of 1/output input pixel.
            let (lo, hi) = ((o * input) as u64, ((o + 1) * input) as u64);
            let out = output as u64;
            (lo / out..hi.div_ceil(out))
                .map(|i| {
                    let (a, b) = ((i * out).max(lo), ((i + 1) * out).min(hi));
                    (i as usize, b - a)
                })
                .collect()
        })
        .collect()
}

fn area(size: FrameSize, (src, px): (&[u8], usize), out: FrameSize, win: Window, dst: &mut [u8]) {
    let (xs, ys) = (spans(size.width, out.width), spans(size.height, out.height));
    let (xs, ys) = (&xs[win.x..win.x + win.w], &ys[win.y..win.y + win.h]);
    // Each footprint's weights sum to `input` each way.
    let total = (size.width * size.height) as u64;
    for (oy, ry) in ys.iter().enumerate() {
        for (ox, rx) in xs.iter().enumerate() {
            for c in 0..px {
                let mut sum = 0u64;
                for &(y, wy) in ry {
                    for &(x, wx) in rx {
                        sum += u64::from(src[(y * size.width + x) * px + c]) * wx * wy;
                    }
                }
                dst[(oy * win.w + ox) * px + c] = ((sum + total / 2) / total) as u8;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scales_window_is_the_same_bytes_as_scaling_whole_and_cropping() {
        let size = FrameSize::new(37, 23);
        for px in 1..=3 {
            let src: Vec<u8> = (0..size.width * size.height * px)
                .map(|i| (i * 7919 % 251) as u8)
                .collect();
            for (out, sampling) in [
                (FrameSize::new(18, 11), Sampling::Bilinear),
                (FrameSize::new(50, 40), Sampling::Bilinear),
                (FrameSize::new(12, 7), Sampling::Bilinear),
                (FrameSize::new(18, 11), Sampling::Area),
            ] {
                let g = Geometry::Scale {
                    w: Side::Fixed(out.width),
                    h: Side::Fixed(out.height),
                    sampling,
                };
                let mut whole = vec![0; out.width * out.height * px];
                g.apply_px(size, (&src, px), out, &mut whole, &[0; 3]);
                let win = Window {
                    x: 3,
                    y: 2,
                    w: out.width - 5,
                    h: out.height - 4,
                };
                let mut part = vec![0; win.w * win.h * px];
                g.scale_window(size, (&src, px), out, win, &mut part);
                let cropped: Vec<u8> = whole
                    .chunks_exact(out.width * px)
                    .skip(win.y)
                    .take(win.h)
                    .flat_map(|row| &row[win.x * px..(win.x + win.w) * px])
                    .copied()
                    .collect();
                assert_eq!(part, cropped, "{px} bytes a pixel, {out:?}, {sampling:?}");
            }
        }
    }

    fn g(s: &str) -> Geometry {
        let (name, args) = s
            .split_once(':')
            .map_or((s, vec![]), |(n, a)| (n, vec![a.to_string()]));
        Geometry::parse(name, &args).unwrap().unwrap()
    }

    /// `src` (of `size`) through the filter `s`.
    fn applied(s: &str, size: FrameSize, src: &[u8]) -> Vec<u8> {
        let f = g(s);
        let out = f.output(size).unwrap();
        let mut dst = vec![0; out.bytes()];
        f.apply(size, src, out, &mut dst);
        dst
    }

    /// Each pixel's first byte.
    fn blue(frame: &[u8]) -> Vec<u8> {
        frame.chunks(3).map(|p| p[0]).collect()
    }

    #[test]
    fn sizes_follow_ffmpegs_rules() {
        let hd = FrameSize::new(1920, 1080);
        assert_eq!(
            g("scale:1280:-1").output(hd).unwrap(),
            FrameSize::new(1280, 720)
        );
        assert_eq!(
            g("scale:-2:361").output(hd).unwrap(),
            FrameSize::new(642, 361)
        );
        assert_eq!(
            g("crop:640:360").output(hd).unwrap(),
            FrameSize::new(640, 360)
        );
        assert!(g("crop:640:360:1300:0").output(hd).is_err());
        assert!(g("pad:1920:1000").output(hd).is_err());
        assert_eq!(
            g("transpose:clock").output(hd).unwrap(),
            FrameSize::new(1080, 1920)
        );
        for bad in [
            "scale:-1:-1",
            "scale:0:10",
            "crop:1:2:3",
            "transpose:9",
            "pad:1:2:3:4:zz",
        ] {
            let (n, a) = bad.split_once(':').unwrap();
            assert!(
                Geometry::parse(n, &[a.to_string()]).unwrap().is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn pixels_move_where_ffmpeg_moves_them() {
        // 3x2: pixel value = its index.
        let size = FrameSize::new(3, 2);
        let src: Vec<u8> = (0..6u8).flat_map(|i| [i; 3]).collect();
        let run = |s: &str| blue(&applied(s, size, &src));
        assert_eq!(run("hflip"), [2, 1, 0, 5, 4, 3]);
        assert_eq!(run("vflip"), [3, 4, 5, 0, 1, 2]);
        assert_eq!(run("transpose:clock"), [3, 0, 4, 1, 5, 2]);
        assert_eq!(run("transpose:cclock"), [2, 5, 1, 4, 0, 3]);
        assert_eq!(run("transpose:cclock_flip"), [0, 3, 1, 4, 2, 5]);
        assert_eq!(run("transpose:clock_flip"), [5, 2, 4, 1, 3, 0]);
        assert_eq!(run("crop:2:1:1:1"), [4, 5]);
        assert_eq!(run("pad:4:3:1:1"), [0, 0, 0, 0, 0, 0, 1, 2, 0, 3, 4, 5]);
    }

    #[test]
    fn a_flat_colour_stays_flat_at_any_size() {
        let size = FrameSize::new(7, 5);
        let src = vec![77u8; size.bytes()];
        for s in ["scale:3:2", "scale:16:9", "scale:5:5:area", "scale:1:1"] {
            assert!(applied(s, size, &src).iter().all(|&v| v == 77), "{s}");
        }
    }

    #[test]
    fn scaling_keeps_flat_colours_and_halves_by_the_mean() {
        let size = FrameSize::new(4, 2);
        let src: Vec<u8> = [10u8, 20, 30, 40, 50, 60, 70, 80]
            .iter()
            .flat_map(|&v| [v; 3])
            .collect();
        let run = |s: &str| blue(&applied(s, size, &src));
        assert_eq!(run("scale:2:1:area"), [35, 55]);
        // Shrinking by 2 reads a tent 2 pixels wide each side (edge pixels repeated); the
        // two rows weigh the same, and the bottom row is the top's + 40.
        let top = [
            (10.0 + 0.75 * 20.0 + 0.25 * 30.0) / 2.0,
            (0.25 * 20.0 + 0.75 * 30.0 + 40.0) / 2.0,
        ];
        let want: Vec<u8> = top.iter().map(|t| (t + 20.0_f64).round() as u8).collect();
        assert_eq!(run("scale:2:1"), want);
        assert_eq!(run("scale:4:2"), [10, 20, 30, 40, 50, 60, 70, 80]);
    }
}
