//! Frame geometry shared by every stage: sizes, rates as fractions, image-sequence names.
//!
//! A frame's size is in pixels; its bytes are laid out by its pixel format
//! (`pixel::PixelFormat`) and described, with its time and where it lives, by its
//! descriptor (`desc::FrameDesc`). BGR (what the filters, a window and a video writer take)
//! is 8-bit B, G, R with rows packed (`stride == width * 3`, `CHANNELS`); the YUV formats a
//! source may give are planar or semi-planar.

use std::fmt;
use std::str::FromStr;

/// Bytes per pixel of a BGR frame (B, G, R).
pub const CHANNELS: usize = 3;

/// The frame rate assumed where nothing says one: the test pattern's, and a video output's
/// when its input gives none.
pub const DEFAULT_FPS: f64 = 30.0;

/// The lowest rate `--fps` and a pattern's rate take besides 0: what every video container
/// here holds.
pub const MIN_FPS: f64 = 0.01;
/// The highest rate `--fps` and a pattern's rate take.
pub const MAX_FPS: f64 = 1000.0;

/// A rate or time base as a fraction, numerator and denominator.
pub type Ratio = (i32, i32);

/// Width and height of a frame in pixels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FrameSize {
    /// Pixels per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

impl FrameSize {
    /// A size of `width` by `height` pixels.
    pub const fn new(width: usize, height: usize) -> Self {
        Self { width, height }
    }

    /// Bytes in one row.
    pub const fn stride(&self) -> usize {
        self.width * CHANNELS
    }

    /// Bytes in one frame.
    pub const fn bytes(&self) -> usize {
        self.stride() * self.height
    }

    /// Pixels in one frame.
    pub const fn pixels(&self) -> usize {
        self.width * self.height
    }
}

impl fmt::Display for FrameSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}x{}", self.width, self.height)
    }
}

/// The largest side accepted anywhere (OpenCV's own limit on image sides is 2^15).
pub const MAX_SIDE: usize = 32768;

/// A size or sequence pattern that does not parse (`{0}`: as given).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    /// Not `WIDTHxHEIGHT`.
    #[error("invalid size '{0}': expected WIDTHxHEIGHT, for example 1920x1080")]
    NotASize(String),
    /// A side of 0.
    #[error("invalid size '{0}': width and height must be at least 1")]
    ZeroSide(String),
    /// A side over `MAX_SIDE`.
    #[error("invalid size '{0}': sides are limited to {MAX_SIDE} pixels")]
    SideTooLarge(String),
    /// `%` not followed by `d` or `0Nd`.
    #[error("invalid sequence pattern '{0}': expected %d or %0Nd, for example frames/%05d.png")]
    NotAPattern(String),
    /// Two `%`.
    #[error("invalid sequence pattern '{0}': only one %d is allowed")]
    TwoNumbers(String),
    /// A number width over 12.
    #[error("invalid sequence pattern '{0}': width too large")]
    WidthTooLarge(String),
}

impl FromStr for FrameSize {
    type Err = ParseError;

    fn from_str(s: &str) -> Result<Self, ParseError> {
        let bad = || ParseError::NotASize(s.into());
        let (w, h) = s.split_once(['x', 'X']).ok_or_else(bad)?;
        let w: usize = w.trim().parse().map_err(|_| bad())?;
        let h: usize = h.trim().parse().map_err(|_| bad())?;
        if w == 0 || h == 0 {
            return Err(ParseError::ZeroSide(s.into()));
        }
        if w > MAX_SIDE || h > MAX_SIDE {
            return Err(ParseError::SideTooLarge(s.into()));
        }
        Ok(Self::new(w, h))
    }
}

/// A printf-style image-sequence pattern such as `frames/%05d.png`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SequencePattern {
    prefix: String,
    width: usize,
    suffix: String,
}

impl SequencePattern {
    /// Parses a pattern holding exactly one `%d` or `%0Nd`; `None` when `s` holds no `%`.
    pub fn parse(s: &str) -> Option<Result<Self, ParseError>> {
        let at = s.find('%')?;
        let (prefix, rest) = s.split_at(at);
        let rest = &rest[1..];
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let after = &rest[digits.len()..];
        let Some(suffix) = after.strip_prefix('d') else {
            return Some(Err(ParseError::NotAPattern(s.into())));
        };
        if suffix.contains('%') {
            return Some(Err(ParseError::TwoNumbers(s.into())));
        }
        let width = if digits.is_empty() {
            0
        } else {
            match digits.parse::<usize>() {
                Ok(w) if w <= 12 => w,
                _ => return Some(Err(ParseError::WidthTooLarge(s.into()))),
            }
        };
        Some(Ok(Self {
            prefix: prefix.to_string(),
            width,
            suffix: suffix.to_string(),
        }))
    }

    /// The file name of frame `index`.
    pub fn path(&self, index: u64) -> String {
        format!(
            "{}{:0w$}{}",
            self.prefix,
            index,
            self.suffix,
            w = self.width
        )
    }

    /// The frame whose file name (without the folder) is `name`, when the pattern makes it.
    pub fn index_of(&self, name: &str) -> Option<u64> {
        let (_, stem) = self.split_prefix();
        let digits = name
            .strip_prefix(stem)?
            .strip_suffix(self.suffix.as_str())?;
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let index: u64 = digits.parse().ok()?;
        (format!("{index:0w$}", w = self.width) == digits).then_some(index)
    }

    /// The folder the files go to ("." when the pattern names none).
    pub fn folder(&self) -> &std::path::Path {
        let (folder, _) = self.split_prefix();
        std::path::Path::new(if folder.is_empty() { "." } else { folder })
    }

    /// The prefix cut into its folder (with the last '/') and the file name's start.
    fn split_prefix(&self) -> (&str, &str) {
        match self.prefix.rfind('/') {
            Some(i) => self.prefix.split_at(i + 1),
            None => ("", self.prefix.as_str()),
        }
    }

    /// The part after the number, for example `.png`.
    pub fn suffix(&self) -> &str {
        &self.suffix
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_sizes() {
        assert_eq!(
            "641x479".parse::<FrameSize>().unwrap(),
            FrameSize::new(641, 479)
        );
        assert!("0x10".parse::<FrameSize>().is_err());
        assert!("10".parse::<FrameSize>().is_err());
        assert!("axb".parse::<FrameSize>().is_err());
        assert!("40000x10".parse::<FrameSize>().is_err());
    }

    #[test]
    fn formats_sequences() {
        let p = SequencePattern::parse("out/%05d.png").unwrap().unwrap();
        assert_eq!(p.path(7), "out/00007.png");
        assert_eq!(p.suffix(), ".png");
        let p = SequencePattern::parse("f%d.ppm").unwrap().unwrap();
        assert_eq!(p.path(12), "f12.ppm");
        assert!(SequencePattern::parse("plain.mp4").is_none());
        assert!(SequencePattern::parse("a%s.png").unwrap().is_err());
        assert!(SequencePattern::parse("a%d%d.png").unwrap().is_err());
        let p = SequencePattern::parse("out/f%03d.png").unwrap().unwrap();
        assert_eq!(p.folder(), std::path::Path::new("out/"));
        assert_eq!(p.index_of("f007.png"), Some(7));
        assert_eq!(p.index_of("f1234.png"), Some(1234));
        assert_eq!(p.index_of("f07.png"), None);
        assert_eq!(p.index_of("f0007.png"), None);
        assert_eq!(p.index_of("g007.png"), None);
        let p = SequencePattern::parse("%d.ppm").unwrap().unwrap();
        assert_eq!(p.folder(), std::path::Path::new("."));
        assert_eq!(p.index_of("0.ppm"), Some(0));
        assert_eq!(p.index_of("00.ppm"), None);
    }
}

/// A rate as the simplest fraction within a billionth of it (30 → 30/1, 29.97 → 2997/100,
/// 30000/1001 as a float → 30000/1001), by continued fractions; 30/1 for what is not a rate.
pub fn ratio_of(fps: f64) -> Ratio {
    if !(fps.is_finite() && fps > 0.0 && fps < 1e6) {
        return (DEFAULT_FPS as i32, 1);
    }
    let (mut h0, mut h1, mut k0, mut k1) = (0i64, 1i64, 1i64, 0i64);
    let mut x = fps;
    for _ in 0..32 {
        let a = x.floor() as i64;
        let (h2, k2) = (a * h1 + h0, a * k1 + k0);
        if h2 > i64::from(i32::MAX) || k2 > 1_000_000 {
            break;
        }
        (h0, h1, k0, k1) = (h1, h2, k1, k2);
        if (h1 as f64 / k1 as f64 - fps).abs() <= 1e-9 * fps {
            break;
        }
        let frac = x - a as f64;
        if frac < 1e-12 {
            break;
        }
        x = 1.0 / frac;
    }
    (h1.max(1) as i32, k1.max(1) as i32)
}

#[cfg(test)]
mod ratio_tests {
    use super::ratio_of;

    #[test]
    fn rates_come_back_as_their_fractions() {
        assert_eq!(ratio_of(30.0), (30, 1));
        assert_eq!(ratio_of(30000.0 / 1001.0), (30000, 1001));
        assert_eq!(ratio_of(24000.0 / 1001.0), (24000, 1001));
        assert_eq!(ratio_of(29.97), (2997, 100));
        assert_eq!(ratio_of(12.5), (25, 2));
        assert_eq!(ratio_of(0.0), (30, 1));
        assert_eq!(ratio_of(f64::NAN), (30, 1));
    }
}
