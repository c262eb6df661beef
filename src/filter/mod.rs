//! Filter chains: parsing `--filter`, and (in `reference`) the plain-Rust definition of
//! every filter.
//!
//! The reference is what both backends are tested against: the CUDA kernels in `kernels/`
//! reproduce it bit for bit; OpenCV's functions in the CPU backend do too, except `gauss`
//! and `sharpen` (within ±1, see README). Every filter but the geometry ones (`geometry`:
//! scale, crop, pad, flips, transpose) maps a BGR frame to a BGR frame of the same size
//! (`gray` writes B = G = R); a chain with a geometry filter runs part by part (`segments`)
//! on whole frames from its first geometry filter on (the CUDA backend runs the part before
//! it in the bands, `banded`), and `output_size` says what it makes. `text`'s filters draw what each
//! frame says of itself (`bound`); `fps:N` changes no pixel and is taken out of the chain
//! for the outputs (`without_rate`). Neighbourhood filters read `radius()` rows above and
//! below; borders are OpenCV's default, `BORDER_REFLECT_101`.

mod ffmpeg;
pub mod fit;
pub mod geometry;
pub mod reference;
pub mod text;
pub mod user;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::frame::FrameSize;

/// One filter of a chain.
#[derive(Clone, Debug, PartialEq)]
pub enum Filter {
    /// The original question's per-pixel copy kernel.
    Copy,
    /// `255 - v` on every channel.
    Invert,
    /// BT.601 luma with OpenCV's fixed-point weights, written to all three channels.
    Gray,
    /// `saturate(round_half_even(v * alpha + beta))` on every channel, in f32.
    Gain {
        /// Multiplier.
        alpha: f32,
        /// Offset.
        beta: f32,
    },
    /// K×K box blur (K odd): the rounded mean, in integers.
    Box {
        /// Side of the square, odd.
        k: u32,
    },
    /// K×K Gaussian blur, separable, with 14-bit integer weights.
    Gauss {
        /// Side of the kernel, odd.
        k: u32,
        /// Standard deviation, pixels.
        sigma: f32,
    },
    /// Sobel edge magnitude: round_half_even((sat|dx| + sat|dy|) / 2) per channel.
    Sobel,
    /// Unsharp mask: src·(1+A) − gauss3x3(src)·A, rounded half to even.
    Sharpen {
        /// How much of the detail is added.
        amount: f32,
    },
    /// 3×3 median per channel.
    Median3,
    /// A user's kernel from a `.cu` file (CUDA only; see `user`).
    Kernel(Arc<user::UserKernel>),
    /// Text drawn on the picture, what it shows put in from each frame (`text`).
    Text(Arc<text::Text>),
    /// A change of the frame's size or orientation (`geometry`): scale, crop, pad, flips,
    /// transpose.
    Geometry(geometry::Geometry),
    /// `fps:N`: the outputs' frames at N a second, dropped or repeated by their times
    /// (`sink::rate`); no pixel changes, so the plan takes it out of the backend's chain
    /// (`Chain::without_rate`).
    Rate(f64),
}

/// The window's keys 1…9.
pub const PRESETS: [&str; 9] = [
    "copy",
    "invert",
    "gray",
    "gain:1.5,10",
    "blur:5",
    "gauss:2",
    "sobel",
    "sharpen:1",
    "median3",
];

/// Why a filter chain can't be parsed (each names the filter and what it takes).
#[derive(Debug, thiserror::Error)]
pub enum FilterError {
    /// The wrong number of arguments.
    #[error("filter '{name}' takes {want} argument(s), got {got} in '{whole}': expected {shape}")]
    Arguments {
        /// The filter.
        name: String,
        /// The counts it takes ("1 or 2").
        want: String,
        /// The count given.
        got: usize,
        /// The whole chain.
        whole: String,
        /// Its form.
        shape: String,
    },
    /// An argument that is not a number.
    #[error("filter '{name}': '{arg}' is not a number")]
    NotANumber {
        /// The filter.
        name: String,
        /// As given.
        arg: String,
    },
    /// `gauss`'s sigma out of range.
    #[error("filter 'gauss': sigma {0} must be above 0 and at most 10")]
    Sigma(f32),
    /// `sharpen`'s amount out of range.
    #[error("filter 'sharpen': amount {0} must be between 0 and 20")]
    Amount(f32),
    /// A kernel side that is not odd, or out of range.
    #[error("filter '{name}': kernel size {k} must be an odd whole number from 1 to {MAX_KERNEL}")]
    KernelSide {
        /// The filter.
        name: String,
        /// As given.
        k: f32,
    },
    /// `kernel` without a file.
    #[error("filter 'kernel' needs a file: kernel:FILE.cu[,radius=R][,fn=NAME][,PARAM=VALUE…]")]
    KernelWithoutFile,
    /// A name that is no filter, and the nearest names ("; did you mean…", or nothing).
    #[error("unknown filter '{0}'{1} (every filter: framepipe --help, docs/filters.md)")]
    Unknown(String, String),
    /// An empty filter between commas.
    #[error("empty filter in '{0}' (two commas together, or one at an end)")]
    Empty(String),
    /// ffmpeg's form of a filter with what framepipe's does not take (`ffmpeg::translate`).
    #[error("filter '{filter}' (ffmpeg's form): {why}")]
    Ffmpeg {
        /// ffmpeg's name of the filter.
        filter: String,
        /// What is not taken.
        why: String,
    },
    /// A `name=value` setting that follows no `kernel:`.
    #[error("'{token}' in '{whole}' is a kernel setting, but it does not follow a kernel:FILE")]
    StraySetting {
        /// The setting.
        token: String,
        /// The whole chain.
        whole: String,
    },
    /// `name:` with nothing after the colon.
    #[error("filter '{0}': missing argument after ':'")]
    MissingArgument(String),
    /// A token that is neither a filter nor an argument.
    #[error("'{token}' in '{whole}' is not a filter (a filter's name starts with a letter; every filter: framepipe --help)")]
    NotAFilter {
        /// The token.
        token: String,
        /// The whole chain.
        whole: String,
    },
    /// Nothing given.
    #[error("no filter given (e.g. gray,blur:3; every filter: framepipe --help, docs/filters.md)")]
    Nothing,
    /// A user kernel's spec or file.
    #[error(transparent)]
    Kernel(#[from] user::KernelError),
    /// A text filter's template or settings.
    #[error(transparent)]
    Text(#[from] text::TextError),
    /// A geometry filter's arguments.
    #[error(transparent)]
    Geometry(#[from] geometry::GeometryError),
    /// `fps:N` out of range.
    #[error("filter 'fps': {0} is not a rate from {min} to {max}", min = crate::frame::MIN_FPS, max = crate::frame::MAX_FPS)]
    Rate(f64),
}

/// The largest kernel side accepted by `blur` and `gauss`.
pub const MAX_KERNEL: u32 = 31;

/// OpenCV's kernel side for a Gaussian of `sigma` on 8-bit images: round(6σ + 1), made odd.
pub fn gauss_side(sigma: f32) -> u32 {
    ((f64::from(sigma) * 6.0 + 1.0).round() as u32) | 1
}

/// The filters' names, for "did you mean".
const NAMES: &[&str] = &[
    "copy",
    "invert",
    "gray",
    "gain",
    "blur",
    "gauss",
    "sobel",
    "sharpen",
    "median3",
    "scale",
    "crop",
    "pad",
    "hflip",
    "vflip",
    "transpose",
    "fps",
    "text",
    "timestamp",
    "kernel",
];

/// OpenCV's `cvtColor(BGR2GRAY)` weights for 8-bit images (`BY15`, `GY15`, `RY15`,
/// `gray_shift` = 15); checked equal to OpenCV 4.6 on all 2^24 colours.
pub const GRAY_B: u32 = 3735;
/// Green's weight in `gray` (OpenCV 4.6's 15-bit fixed point).
pub const GRAY_G: u32 = 19235;
/// Red's weight in `gray`.
pub const GRAY_R: u32 = 9798;
/// The fixed-point shift of the gray weights.
pub const GRAY_SHIFT: u32 = 15;

impl Filter {
    /// Rows this filter reads above and below each output row (0 for pointwise filters).
    pub fn radius(&self) -> usize {
        match self {
            Filter::Box { k } | Filter::Gauss { k, .. } => (*k as usize) / 2,
            Filter::Sobel | Filter::Sharpen { .. } | Filter::Median3 => 1,
            Filter::Kernel(k) => k.spec.radius,
            _ => 0,
        }
    }

    fn parse_one(name: &str, args: &[String], whole: &str) -> Result<Filter, FilterError> {
        let nums = |want: &[usize]| numbers(name, args, whole, want);
        if let Some(g) = geometry::Geometry::parse(name, args) {
            return g.map(Filter::Geometry).map_err(FilterError::Geometry);
        }
        match name {
            "copy" => nums(&[0]).map(|_| Filter::Copy),
            "invert" => nums(&[0]).map(|_| Filter::Invert),
            "gray" | "grey" => nums(&[0]).map(|_| Filter::Gray),
            "gain" => {
                let v = nums(&[1, 2])?;
                Ok(Filter::Gain {
                    alpha: v[0],
                    beta: v.get(1).copied().unwrap_or(0.0),
                })
            }
            "blur" => {
                let k = nums(&[1])?[0];
                Ok(Filter::Box {
                    k: kernel_side(name, k)?,
                })
            }
            "gauss" => {
                let v = nums(&[1, 2])?;
                let sigma = *v.last().expect("one or two numbers");
                if !(sigma > 0.0 && sigma <= 10.0) {
                    return Err(FilterError::Sigma(sigma));
                }
                let k = match v.len() {
                    2 => kernel_side(name, v[0])?,
                    _ => gauss_side(sigma).min(MAX_KERNEL),
                };
                Ok(Filter::Gauss { k, sigma })
            }
            "sobel" => nums(&[0]).map(|_| Filter::Sobel),
            "sharpen" => {
                let amount = nums(&[1])?[0];
                if !(0.0..=20.0).contains(&amount) {
                    return Err(FilterError::Amount(amount));
                }
                Ok(Filter::Sharpen { amount })
            }
            "median3" => nums(&[0]).map(|_| Filter::Median3),
            "fps" => rate(nums(&[1])?[0]),
            "text" | "timestamp" => parse_text(name, args),
            "kernel" => {
                let (file, settings) = args.split_first().ok_or(FilterError::KernelWithoutFile)?;
                Ok(Filter::Kernel(Arc::new(user::UserKernel::parse(
                    file, settings,
                )?)))
            }
            _ => Err(FilterError::Unknown(
                name.into(),
                crate::spelling::did_you_mean(name, NAMES),
            )),
        }
    }
}

/// `name`'s arguments as numbers, of one of the counts in `want`.
fn numbers(
    name: &str,
    args: &[String],
    whole: &str,
    want: &[usize],
) -> Result<Vec<f32>, FilterError> {
    if !want.contains(&args.len()) {
        let shape = match name {
            "gain" => "gain:ALPHA,BETA (or gain:ALPHA)",
            "blur" => "blur:K (K odd)",
            "gauss" => "gauss:SIGMA or gauss:K,SIGMA",
            "sharpen" => "sharpen:AMOUNT",
            other => other,
        };
        return Err(FilterError::Arguments {
            name: name.into(),
            want: want
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(" or "),
            got: args.len(),
            whole: whole.into(),
            shape: shape.into(),
        });
    }
    args.iter()
        .map(|a| {
            a.parse::<f32>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| FilterError::NotANumber {
                    name: name.into(),
                    arg: a.clone(),
                })
        })
        .collect()
}

/// `fps:N`, N a rate from `MIN_FPS` to `MAX_FPS`.
fn rate(rate: f32) -> Result<Filter, FilterError> {
    let rate = f64::from(rate);
    if !(crate::frame::MIN_FPS..=crate::frame::MAX_FPS).contains(&rate) {
        return Err(FilterError::Rate(rate));
    }
    Ok(Filter::Rate(rate))
}

/// `text:TEMPLATE[,settings]`, or `timestamp[:pts|wall][,settings]` (a text of `{pts}` or
/// `{time}`).
fn parse_text(name: &str, args: &[String]) -> Result<Filter, FilterError> {
    let (template, settings) = match (name, args.split_first()) {
        ("text", Some((template, settings))) => (template.as_str(), settings),
        ("text", None) => return Err(FilterError::MissingArgument(name.into())),
        (_, Some((kind, rest))) if !kind.contains('=') => {
            let template = match kind.as_str() {
                "pts" => "{pts}",
                "wall" | "time" => "{time}",
                other => {
                    return Err(FilterError::Text(text::TextError::Value(format!(
                        "timestamp:{other}: 'pts' (the frame's time) or 'wall' (the clock)"
                    ))))
                }
            };
            (template, rest)
        }
        _ => ("{time}", args),
    };
    Ok(Filter::Text(Arc::new(text::Text::parse(
        template, settings,
    )?)))
}

/// A kernel side given as a number: odd, 1 to `MAX_KERNEL`.
fn kernel_side(name: &str, k: f32) -> Result<u32, FilterError> {
    if k.fract() != 0.0 || k < 1.0 || k > MAX_KERNEL as f32 || (k as u32).is_multiple_of(2) {
        return Err(FilterError::KernelSide {
            name: name.into(),
            k,
        });
    }
    Ok(k as u32)
}

impl fmt::Display for Filter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Filter::Box { k } => write!(f, "blur:{k}"),
            Filter::Gauss { k, sigma } => write!(f, "gauss:{k},{sigma}"),
            Filter::Sobel => write!(f, "sobel"),
            Filter::Sharpen { amount } => write!(f, "sharpen:{amount}"),
            Filter::Median3 => write!(f, "median3"),
            Filter::Copy => write!(f, "copy"),
            Filter::Invert => write!(f, "invert"),
            Filter::Gray => write!(f, "gray"),
            Filter::Gain { alpha, beta } => write!(f, "gain:{alpha},{beta}"),
            Filter::Kernel(k) => write!(f, "{k}"),
            Filter::Text(t) => write!(f, "{t}"),
            Filter::Geometry(g) => write!(f, "{g}"),
            Filter::Rate(r) => write!(f, "fps:{r}"),
        }
    }
}

/// A non-empty sequence of filters applied in order.
#[derive(Clone, Debug, PartialEq)]
pub struct Chain(Vec<Filter>);

impl Chain {
    /// A chain of `filters` (at least one).
    pub fn from_filters(filters: Vec<Filter>) -> Chain {
        assert!(!filters.is_empty(), "a chain holds at least one filter");
        Chain(filters)
    }

    /// The filters, in the order they run.
    pub fn filters(&self) -> &[Filter] {
        &self.0
    }

    /// The user kernels of the chain, in order.
    pub fn user_kernels(&self) -> impl Iterator<Item = &Arc<user::UserKernel>> {
        self.0.iter().filter_map(|f| match f {
            Filter::Kernel(k) => Some(k),
            _ => None,
        })
    }

    /// The chain with every user kernel read again from its file (a reload).
    pub fn reloaded(&self) -> Result<Chain, user::KernelError> {
        self.0
            .iter()
            .map(|f| match f {
                Filter::Kernel(k) => k.reload().map(|k| Filter::Kernel(Arc::new(k))),
                other => Ok(other.clone()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Chain)
    }

    /// Rows the whole chain reads above and below each output row.
    pub fn radius(&self) -> usize {
        self.0.iter().map(Filter::radius).sum()
    }

    /// Whether what the chain draws changes from frame to frame (a text with a placeholder):
    /// each frame then runs the chain `bound` to it.
    pub fn changes_per_frame(&self) -> bool {
        self.0
            .iter()
            .any(|f| matches!(f, Filter::Text(t) if t.changes()))
    }

    /// The chain for a frame with `facts`: each text shows what the frame says.
    pub fn bound(&self, facts: &text::Facts) -> Chain {
        Chain(
            self.0
                .iter()
                .map(|f| match f {
                    Filter::Text(t) if t.changes() => Filter::Text(Arc::new(t.bound(facts))),
                    other => other.clone(),
                })
                .collect(),
        )
    }

    /// The chain without its `fps:N` (its pixels' part: copy where nothing else is left),
    /// and the rate the last one asks for.
    pub fn without_rate(&self) -> (Chain, Option<f64>) {
        let rate = self.0.iter().rev().find_map(|f| match f {
            Filter::Rate(r) => Some(*r),
            _ => None,
        });
        let rest: Vec<Filter> = self
            .0
            .iter()
            .filter(|f| !matches!(f, Filter::Rate(_)))
            .cloned()
            .collect();
        match rest.is_empty() {
            true => (Chain(vec![Filter::Copy]), rate),
            false => (Chain(rest), rate),
        }
    }

    /// Whether a filter changes the frame's size or orientation (`geometry`): the chain's
    /// parts then run on whole frames from the first such filter on.
    pub fn changes_size(&self) -> bool {
        self.0.iter().any(|f| matches!(f, Filter::Geometry(_)))
    }

    /// How many of the chain's filters come before its first geometry filter: those the
    /// CUDA backend runs in the bands (the rest runs on the frame the bands assembled,
    /// `backend::reshape`).
    pub fn banded(&self) -> usize {
        self.0
            .iter()
            .position(|f| matches!(f, Filter::Geometry(_)))
            .unwrap_or(self.0.len())
    }

    /// The rows of halo a band needs for the filters run in the bands (`banded`).
    pub fn banded_radius(&self) -> usize {
        self.0[..self.banded()].iter().map(Filter::radius).sum()
    }

    /// The bytes of the largest packed BGR frame the chain makes of `size` frames, the
    /// input included: what a frame buffer between its steps must hold (the CUDA backend's
    /// lanes, the Python hand-over's fitting).
    pub fn largest_frame(&self, size: FrameSize) -> usize {
        let mut most = size.bytes();
        let _ = self.0.iter().try_fold(size, |at, f| match f {
            Filter::Geometry(g) => g.output(at).inspect(|to| most = most.max(to.bytes())),
            _ => Ok(at),
        });
        most
    }

    /// The size of the frames the chain makes of frames of `size`; why it can't.
    pub fn output_size(&self, size: FrameSize) -> Result<FrameSize, geometry::GeometryError> {
        self.0.iter().try_fold(size, |s, f| match f {
            Filter::Geometry(g) => g.output(s),
            _ => Ok(s),
        })
    }

    /// This chain, with `old`'s geometry filters after it where it has none of its own (a
    /// preset chosen while a scaled run plays keeps the frames' size).
    pub fn keeping_geometry_of(&self, old: &Chain) -> Chain {
        if self.changes_size() {
            return self.clone();
        }
        let kept = old.0.iter().filter(|f| matches!(f, Filter::Geometry(_)));
        Chain(self.0.iter().chain(kept).cloned().collect())
    }

    /// The chain cut where the size changes: runs of filters of one size, and each geometry
    /// filter alone.
    pub fn segments(&self) -> Vec<Chain> {
        let mut out: Vec<Vec<Filter>> = Vec::new();
        for f in &self.0 {
            let alone = matches!(f, Filter::Geometry(_));
            match out.last_mut() {
                Some(run) if !alone && !matches!(run[0], Filter::Geometry(_)) => {
                    run.push(f.clone())
                }
                _ => out.push(vec![f.clone()]),
            }
        }
        out.into_iter().map(Chain).collect()
    }

    /// The chain's geometry filter, where it is one alone (`segments`).
    pub fn as_geometry(&self) -> Option<&geometry::Geometry> {
        match self.0.as_slice() {
            [Filter::Geometry(g)] => Some(g),
            _ => None,
        }
    }

    /// Whether the chain holds only geometry and text (`pixel::planes` runs it on a YUV
    /// frame's own planes; on BGR, `geometry` and `text` are plain Rust in every build).
    pub fn is_geometry_and_text(&self) -> bool {
        self.0
            .iter()
            .all(|f| matches!(f, Filter::Copy | Filter::Geometry(_) | Filter::Text(_)))
    }

    /// Whether the chain changes no pixel (only `copy`).
    pub fn is_identity(&self) -> bool {
        self.0.iter().all(|f| matches!(f, Filter::Copy))
    }

    /// Applies the chain to a whole frame with the plain-Rust reference; `dst` holds a frame
    /// of `output_size(size)`.
    pub fn apply_reference(&self, size: FrameSize, src: &[u8], dst: &mut [u8]) {
        if !self.changes_size() {
            let plan = crate::band::BandPlan::new(size.height, 1, self.radius()).expect("one band");
            reference::apply_banded(self, size, &plan, src, dst);
            return;
        }
        // Sizes are checked when a run is planned (`output_size`): a chain that can't make
        // this size's frames leaves `dst` as it was.
        let reference = |part: &Chain, s: FrameSize, from: &[u8], to: &mut [u8]| {
            part.apply_reference(s, from, to);
            Ok(())
        };
        let _ = self.apply_parts(size, src, dst, &mut Parts::default(), reference);
    }

    /// Runs a chain that changes the size part by part (`segments`): each geometry filter
    /// by `geometry`, the runs between by `same` (from, to, both of one size); the frames
    /// between parts are kept in `parts`, the last part writes `dst` (of `output_size`).
    pub fn apply_parts(
        &self,
        size: FrameSize,
        src: &[u8],
        dst: &mut [u8],
        parts: &mut Parts,
        mut same: impl FnMut(&Chain, FrameSize, &[u8], &mut [u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        let all = self.segments();
        let [a, b] = &mut parts.0;
        let (mut from, mut to) = (a, b);
        let mut s = size;
        for (i, part) in all.iter().enumerate() {
            let out = part.output_size(s)?;
            let input: &[u8] = if i == 0 { src } else { &from[..s.bytes()] };
            let target: &mut [u8] = if i + 1 == all.len() {
                anyhow::ensure!(
                    dst.len() >= out.bytes(),
                    "a {out} frame does not fit the output"
                );
                &mut dst[..out.bytes()]
            } else {
                to.resize(out.bytes(), 0);
                &mut to[..]
            };
            match part.as_geometry() {
                Some(g) => g.apply(s, input, out, target),
                None => same(part, s, input, target)?,
            }
            std::mem::swap(&mut from, &mut to);
            s = out;
        }
        Ok(())
    }
}

/// The frames between the parts of a chain that changes the size (`Chain::apply_parts`),
/// kept from frame to frame so that none is allocated per frame.
#[derive(Default)]
pub struct Parts([Vec<u8>; 2]);

impl Parts {
    /// The two frames, to read one and write the other (`pixel::planes` runs its own
    /// parts in them).
    pub fn pair(&mut self) -> (&mut Vec<u8>, &mut Vec<u8>) {
        let [a, b] = &mut self.0;
        (a, b)
    }
}

impl fmt::Display for Chain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|x| x.to_string()).collect();
        write!(f, "{}", parts.join(","))
    }
}

impl Chain {
    /// The chain as a line of the summary or the log: whole where it is short, cut in the
    /// middle past `BRIEF` characters (a `text:` of 120 KB was echoed whole, twice).
    pub fn brief(&self) -> String {
        const BRIEF: usize = 160;
        let whole = self.to_string();
        let n = whole.chars().count();
        if n <= BRIEF {
            return whole;
        }
        let head: String = whole.chars().take(BRIEF / 2).collect();
        let tail: String = whole.chars().skip(n - BRIEF / 4).collect();
        format!("{head}… ({} characters) …{tail}", n - BRIEF / 2 - BRIEF / 4)
    }
}

impl FromStr for Chain {
    type Err = FilterError;

    /// Parses `gray,gain:1.5,10,invert`: a comma starts a new filter unless the token is a
    /// further number of the filter before it, or a `name=value` setting of the `kernel:`
    /// before it.
    fn from_str(s: &str) -> Result<Self, FilterError> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for token in s.split(',').map(str::trim) {
            if token.is_empty() {
                return Err(FilterError::Empty(s.into()));
            }
            let starts_filter = token
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic());
            let kernel_setting = token.contains('=')
                && !token.contains(':')
                && groups.last().is_some_and(|(name, _)| {
                    matches!(name.as_str(), "kernel" | "text" | "timestamp")
                });
            if kernel_setting {
                let (_, args) = groups.last_mut().expect("checked above");
                args.push(token.to_string());
            } else if let Some(taken) = ffmpeg::translate(token) {
                groups.push(taken?);
            } else if token.contains('=') && !token.contains(':') {
                return Err(FilterError::StraySetting {
                    token: token.into(),
                    whole: s.into(),
                });
            } else if starts_filter {
                let (name, arg) = match token.split_once(':') {
                    Some((n, a)) => (n, Some(a)),
                    None => (token, None),
                };
                let mut args = Vec::new();
                if let Some(a) = arg {
                    if a.is_empty() {
                        return Err(FilterError::MissingArgument(name.into()));
                    }
                    args.push(a.to_string());
                }
                groups.push((name.to_ascii_lowercase(), args));
            } else if let Some((_, args)) = groups.last_mut().filter(|(_, a)| !a.is_empty()) {
                args.push(token.to_string());
            } else {
                return Err(FilterError::NotAFilter {
                    token: token.into(),
                    whole: s.into(),
                });
            }
        }
        if groups.is_empty() {
            return Err(FilterError::Nothing);
        }
        groups
            .iter()
            .map(|(name, args)| Filter::parse_one(name, args, s))
            .collect::<Result<Vec<_>, _>>()
            .map(Chain)
    }
}

/// The 256-entry table of `gain`, shared by the reference and the CPU backend's `LUT`.
pub fn gain_table(alpha: f32, beta: f32) -> [u8; 256] {
    let mut t = [0u8; 256];
    for (v, out) in t.iter_mut().enumerate() {
        *out = gain_value(v as u8, alpha, beta);
    }
    t
}

/// One channel through `gain`: f32 multiply, then f32 add (two roundings, no FMA), then
/// round half to even and saturate, as the CUDA kernel does with `__fmul_rn`/`__fadd_rn`.
pub fn gain_value(v: u8, alpha: f32, beta: f32) -> u8 {
    let x = f32::from(v) * alpha;
    let y = x + beta;
    y.round_ties_even().clamp(0.0, 255.0) as u8
}

/// One pixel through `gray`.
pub fn gray_value(b: u8, g: u8, r: u8) -> u8 {
    let y = u32::from(b) * GRAY_B + u32::from(g) * GRAY_G + u32::from(r) * GRAY_R;
    ((y + (1 << (GRAY_SHIFT - 1))) >> GRAY_SHIFT) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chain(s: &str) -> Chain {
        s.parse().unwrap()
    }

    #[test]
    fn parses_chains() {
        assert_eq!(chain("copy").filters(), &[Filter::Copy]);
        assert_eq!(
            chain("gray,gain:1.5,10,invert").filters(),
            &[
                Filter::Gray,
                Filter::Gain {
                    alpha: 1.5,
                    beta: 10.0
                },
                Filter::Invert
            ]
        );
        assert_eq!(
            chain("gain:2").filters(),
            &[Filter::Gain {
                alpha: 2.0,
                beta: 0.0
            }]
        );
        assert_eq!(chain("Invert, gray").to_string(), "invert,gray");
        assert_eq!(
            chain("gray,gauss:2,sobel").filters(),
            &[
                Filter::Gray,
                Filter::Gauss { k: 13, sigma: 2.0 },
                Filter::Sobel
            ]
        );
        assert_eq!(chain("gauss:5,1.2,blur:3").radius(), 3);
        assert_eq!(chain("sharpen:1.5,median3").radius(), 2);
    }

    #[test]
    fn rejects_bad_chains() {
        for (bad, says) in [
            ("", "empty filter"),
            ("blurry", "unknown filter 'blurry'"),
            ("gain", "takes 1 or 2 argument(s), got 0"),
            ("gain:x,1", "'x' is not a number"),
            ("gain:1,2,3", "got 3"),
            ("invert:3", "takes 0 argument(s)"),
            ("blur:4", "must be an odd whole number"),
            ("blur:33", "must be an odd whole number"),
            ("gauss:0", "must be above 0"),
            ("gauss:2,1.5", "must be an odd whole number"),
            ("sharpen:-1", "between 0 and 20"),
            ("median3:3", "takes 0 argument(s)"),
            ("copy,,invert", "empty filter"),
            ("5,copy", "is not a filter"),
            ("copy,5", "is not a filter"),
            ("gain:", "missing argument"),
            ("gain:inf", "not a number"),
        ] {
            let err = bad.parse::<Chain>().unwrap_err().to_string();
            assert!(err.contains(says), "{bad:?}: {err}");
        }
    }

    #[test]
    fn gain_rounds_half_to_even_and_saturates() {
        assert_eq!(gain_value(1, 0.5, 0.0), 0); // 0.5 -> 0
        assert_eq!(gain_value(3, 0.5, 0.0), 2); // 1.5 -> 2
        assert_eq!(gain_value(200, 2.0, 0.0), 255);
        assert_eq!(gain_value(10, 1.0, -20.0), 0);
    }

    #[test]
    fn gray_matches_known_values() {
        assert_eq!(gray_value(255, 255, 255), 255);
        assert_eq!(gray_value(0, 0, 0), 0);
        assert_eq!(gray_value(0, 0, 255), 76); // red
        assert_eq!(gray_value(0, 255, 0), 150); // green
        assert_eq!(gray_value(255, 0, 0), 29); // blue
    }
}
