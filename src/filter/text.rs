//! Text on the picture: the `text:` and `timestamp` filters (a camera's name, its clock, a
//! frame's time burned in).
//!
//! A text filter holds a template (`{time}`, `{pts}`, `{name}`, `{input}` and `{frame}` are
//! put in from each frame: `Facts`) and a style (where, how large, what colour, over a
//! darkened box or not). Its glyphs are `font8x8`'s public-domain 8×8 bitmaps (printable
//! ASCII: `ATLAS`, made once; the CUDA backend uploads it once), each font pixel drawn as a
//! `scale`×`scale` square. `Placed` is one frame's text at its place; `shade` is the whole
//! arithmetic of one pixel, and `kernels/text.cu` repeats it, so both backends give the same
//! bytes.
//!
//! Invariants: the filter is pointwise (radius 0: a band draws the rows of the text it
//! holds); a pixel outside the box is passed untouched; a character outside printable
//! ASCII is drawn as `?`; at most `MAX_CHARS` characters are drawn, the rest cut; text that
//! runs past the frame is clipped.

use std::fmt;
use std::time::SystemTime;

use font8x8::UnicodeFonts;

use crate::frame::{FrameSize, CHANNELS};

/// The most characters a text draws.
pub const MAX_CHARS: usize = 96;
/// Glyphs in the atlas: printable ASCII, ' ' to '~'.
pub const GLYPHS: usize = 95;
/// How much the box darkens what is under it, of 256 (the rest of the pixel is kept).
pub const BOX_DARKEN: u32 = 160;

/// The atlas: glyph `g` (character `' ' + g`) is bytes `8g..8g+8`, one a row, bit `i` the
/// row's `i`-th pixel from the left (font8x8's layout). Made once.
pub fn atlas() -> &'static [u8; GLYPHS * 8] {
    static ATLAS: std::sync::OnceLock<[u8; GLYPHS * 8]> = std::sync::OnceLock::new();
    ATLAS.get_or_init(|| {
        let mut atlas = [0u8; GLYPHS * 8];
        for (g, rows) in atlas.chunks_exact_mut(8).enumerate() {
            let c = char::from(b' ' + g as u8);
            rows.copy_from_slice(&font8x8::BASIC_FONTS.get(c).unwrap_or([0; 8]));
        }
        atlas
    })
}

/// Where and how a text is drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Style {
    /// Left edge, pixels; negative: the right edge, from the frame's right.
    pub x: i32,
    /// Top edge, pixels; negative: the bottom edge, from the frame's bottom.
    pub y: i32,
    /// Glyph height in pixels (a multiple of 8); None: the frame's height / 34, at least 8.
    pub size: Option<u32>,
    /// Blue, green, red.
    pub color: [u8; 3],
    /// Over a darkened box.
    pub boxed: bool,
}

impl Default for Style {
    fn default() -> Self {
        Self {
            x: 16,
            y: 16,
            size: None,
            color: [255, 255, 255],
            boxed: true,
        }
    }
}

/// A text filter: its template and style, and what it shows for the frame it was bound to.
#[derive(Clone, Debug, PartialEq)]
pub struct Text {
    template: String,
    style: Style,
    /// Glyph indices of what is drawn (the template as bound to a frame's facts).
    shown: Vec<u8>,
}

/// What a frame says of itself, for a template's placeholders.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    /// Its presentation time, seconds.
    pub pts: Option<f64>,
    /// When it was captured.
    pub wall: SystemTime,
    /// Its input's name.
    pub name: &'a str,
    /// Its input's number.
    pub input: usize,
    /// Its index in its input.
    pub frame: u64,
}

/// Why a text filter can't be made.
#[derive(Debug, thiserror::Error)]
pub enum TextError {
    /// A setting that is not one, and the nearest ("; did you mean…", or nothing).
    #[error(
        "filter '{filter}': unknown setting '{0}'{1} (x=, y=, size=, color=, box=)",
        filter = "text"
    )]
    Setting(String, String),
    /// A value a setting can't take.
    #[error("filter 'text': {0}")]
    Value(String),
    /// `{…}` that is no placeholder.
    #[error("filter 'text': unknown placeholder '{{{0}}}' (known: {{time}}, {{pts}}, {{name}}, {{input}}, {{frame}})")]
    Placeholder(String),
}

impl Text {
    /// `template` drawn with `style`; its settings (`x=`, `y=`, `size=`, `color=`, `box=`)
    /// as given after it.
    pub fn parse(template: &str, settings: &[String]) -> Result<Self, TextError> {
        let mut style = Style::default();
        for s in settings {
            let (key, value) = s.split_once('=').unwrap_or((s, ""));
            let int = || -> Result<i32, TextError> {
                value
                    .parse::<i32>()
                    .ok()
                    .filter(|v| v.unsigned_abs() <= crate::frame::MAX_SIDE as u32)
                    .ok_or_else(|| {
                        TextError::Value(format!("{key}={value} is not a whole number of pixels"))
                    })
            };
            match key.trim() {
                "x" => style.x = int()?,
                "y" => style.y = int()?,
                "size" => style.size = Some(size(value)?),
                "color" | "colour" => style.color = color(value)?,
                "box" => {
                    style.boxed = match value {
                        "1" | "on" | "yes" | "true" => true,
                        "0" | "off" | "no" | "false" => false,
                        _ => return Err(TextError::Value(format!("box={value}: 0 or 1"))),
                    }
                }
                other => {
                    let near =
                        crate::spelling::did_you_mean(other, &["x", "y", "size", "color", "box"]);
                    return Err(TextError::Setting(other.to_string(), near));
                }
            }
        }
        check_placeholders(template)?;
        let mut text = Self {
            template: template.to_string(),
            style,
            shown: Vec::new(),
        };
        text.shown = glyphs(&text.fill(&Facts::none()));
        Ok(text)
    }

    /// Whether what it shows changes from frame to frame (the template has a placeholder).
    pub fn changes(&self) -> bool {
        self.template.contains('{')
    }

    /// The filter shown for a frame with `facts`.
    pub fn bound(&self, facts: &Facts) -> Self {
        Self {
            shown: glyphs(&self.fill(facts)),
            ..self.clone()
        }
    }

    /// The template with `facts` put in.
    fn fill(&self, facts: &Facts) -> String {
        let mut out = String::new();
        let mut rest = self.template.as_str();
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let Some(close) = rest[open..].find('}') else {
                break;
            };
            out.push_str(&facts.value(&rest[open + 1..open + close]));
            rest = &rest[open + close + 1..];
        }
        out.push_str(rest);
        out
    }

    /// This frame's text placed on a frame of `size`.
    pub fn place(&self, size: FrameSize) -> Placed {
        let px = self
            .style
            .size
            .unwrap_or_else(|| ((size.height as u32 / 34) / 8 * 8).max(8));
        let scale = (px / 8).max(1) as i32;
        let cols = self.shown.len() as i32;
        let (w, h) = (cols * 8 * scale, 8 * scale);
        let edge = |at: i32, frame: usize, side: i32| {
            if at < 0 {
                frame as i32 + at + 1 - side
            } else {
                at
            }
        };
        Placed {
            x0: edge(self.style.x, size.width, w),
            y0: edge(self.style.y, size.height, h),
            scale,
            cols,
            color: self.style.color,
            boxed: self.style.boxed,
            chars: self.shown.clone(),
        }
    }
}

impl fmt::Display for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = &self.style;
        write!(f, "text:{},x={},y={}", self.template, s.x, s.y)?;
        if let Some(size) = s.size {
            write!(f, ",size={size}")?;
        }
        let [b, g, r] = s.color;
        write!(f, ",color={r:02x}{g:02x}{b:02x},box={}", u8::from(s.boxed))
    }
}

impl Facts<'_> {
    /// Facts for no frame (what a template shows before its first frame).
    pub fn none() -> Facts<'static> {
        Facts {
            pts: None,
            wall: SystemTime::UNIX_EPOCH,
            name: "",
            input: 0,
            frame: 0,
        }
    }

    fn value(&self, key: &str) -> String {
        match key {
            "time" => local_time(self.wall),
            "pts" => match self.pts {
                Some(t) => format!("{t:.3}"),
                None => "-".into(),
            },
            "name" => self.name.to_string(),
            "input" => self.input.to_string(),
            "frame" => self.frame.to_string(),
            _ => String::new(),
        }
    }
}

/// Every `{…}` of `template` is a placeholder.
fn check_placeholders(template: &str) -> Result<(), TextError> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let Some(close) = rest[open..].find('}') else {
            return Err(TextError::Value(format!(
                "'{{' without '}}' in '{template}'"
            )));
        };
        let key = &rest[open + 1..open + close];
        if !matches!(key, "time" | "pts" | "name" | "input" | "frame") {
            return Err(TextError::Placeholder(key.to_string()));
        }
        rest = &rest[open + close + 1..];
    }
    Ok(())
}

/// A glyph size in pixels: a multiple of 8 from 8 to 256.
fn size(value: &str) -> Result<u32, TextError> {
    value
        .parse::<u32>()
        .ok()
        .filter(|v| (8..=256).contains(v) && v % 8 == 0)
        .ok_or_else(|| {
            TextError::Value(format!(
                "size={value}: a multiple of 8 from 8 to 256 (pixels)"
            ))
        })
}

/// A colour by name or as `RRGGBB`, returned as B, G, R.
fn color(value: &str) -> Result<[u8; 3], TextError> {
    let hex = match value.to_ascii_lowercase().as_str() {
        "white" => "ffffff".to_string(),
        "black" => "000000".to_string(),
        "red" => "ff0000".to_string(),
        "green" => "00ff00".to_string(),
        "blue" => "0000ff".to_string(),
        "yellow" => "ffff00".to_string(),
        other => other.trim_start_matches('#').to_string(),
    };
    let rgb = (hex.len() == 6)
        .then(|| u32::from_str_radix(&hex, 16).ok())
        .flatten()
        .ok_or_else(|| {
            TextError::Value(format!(
                "color={value}: a name (white, black, red, green, blue, yellow) or RRGGBB"
            ))
        })?;
    Ok([rgb as u8, (rgb >> 8) as u8, (rgb >> 16) as u8])
}

/// Glyph indices of `s`: printable ASCII as itself, anything else as `?`; at most
/// `MAX_CHARS`.
fn glyphs(s: &str) -> Vec<u8> {
    s.chars()
        .take(MAX_CHARS)
        .map(|c| match c {
            ' '..='~' => c as u8 - b' ',
            _ => b'?' - b' ',
        })
        .collect()
}

/// `t` as the local clock reads it: `YYYY-MM-DD HH:MM:SS` (the time zone as `localtime`
/// finds it: `TZ`, else `/etc/localtime`).
fn local_time(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Local>::from(t)
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

/// A band buffer's place in its frame, as the text needs it: its width in pixels, its rows,
/// and the frame row of its first.
#[derive(Clone, Copy, Debug)]
pub struct Band {
    /// Pixels a row.
    pub width: usize,
    /// Rows in the buffer.
    pub rows: usize,
    /// Frame row of the buffer's first row.
    pub row0: usize,
}

/// One frame's text at its place on the frame (what `kernels/text.cu` takes, as `fp_text`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placed {
    /// The text's top-left pixel (the box reaches `scale` * 2 pixels farther each way).
    pub x0: i32,
    /// Its top row.
    pub y0: i32,
    /// Picture pixels a font pixel.
    pub scale: i32,
    /// Characters.
    pub cols: i32,
    /// Blue, green, red.
    pub color: [u8; 3],
    /// Over a darkened box.
    pub boxed: bool,
    /// Glyph indices.
    pub chars: Vec<u8>,
}

impl Placed {
    /// Pixel (`x`, `y`) (frame coordinates), `v` before, after the text is drawn.
    pub fn shade(&self, atlas: &[u8], x: i32, y: i32, v: [u8; 3]) -> [u8; 3] {
        let (cx, cy, cw, ch) = self.covers();
        if x < cx || y < cy || x >= cx + cw || y >= cy + ch {
            return v;
        }
        if self.ink(atlas, x, y) {
            return self.color;
        }
        if !self.boxed {
            return v;
        }
        v.map(|c| ((u32::from(c) * (256 - BOX_DARKEN) + 128) >> 8) as u8)
    }

    /// Whether pixel (`x`, `y`) (frame coordinates) is a stroke of a glyph.
    pub fn ink(&self, atlas: &[u8], x: i32, y: i32) -> bool {
        let (w, h) = (self.cols * 8 * self.scale, 8 * self.scale);
        let (dx, dy) = (x - self.x0, y - self.y0);
        if dx < 0 || dy < 0 || dx >= w || dy >= h {
            return false;
        }
        let glyph = usize::from(self.chars[(dx / (8 * self.scale)) as usize]);
        let gx = (dx % (8 * self.scale)) / self.scale;
        let row = atlas[glyph * 8 + (dy / self.scale) as usize];
        (row >> gx) & 1 == 1
    }

    /// The area the text and its box cover: x, y, width, height (it may reach past the
    /// frame's edges).
    pub fn covers(&self) -> (i32, i32, i32, i32) {
        let pad = 2 * self.scale;
        let (w, h) = (self.cols * 8 * self.scale, 8 * self.scale);
        (self.x0 - pad, self.y0 - pad, w + 2 * pad, h + 2 * pad)
    }

    /// Draws over a band buffer (`v`: its place), from `src` into `dst`.
    pub fn draw(&self, atlas: &[u8], v: Band, src: &[u8], dst: &mut [u8]) {
        let n = v.width * v.rows * CHANNELS;
        dst[..n].copy_from_slice(&src[..n]);
        self.draw_in_place(atlas, v, &mut dst[..n]);
    }

    /// Draws over a band buffer in place.
    pub fn draw_in_place(&self, atlas: &[u8], v: Band, buf: &mut [u8]) {
        let (left, top, w, h) = self.covers();
        let rows = (top.max(v.row0 as i32))..(top + h).min((v.row0 + v.rows) as i32);
        let cols = left.max(0)..(left + w).min(v.width as i32);
        for y in rows {
            let line = (y as usize - v.row0) * v.width * CHANNELS;
            for x in cols.clone() {
                let at = line + x as usize * CHANNELS;
                let px = [buf[at], buf[at + 1], buf[at + 2]];
                buf[at..at + 3].copy_from_slice(&self.shade(atlas, x, y, px));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(pts: f64) -> Facts<'static> {
        Facts {
            pts: Some(pts),
            name: "cam 1",
            input: 2,
            frame: 7,
            ..Facts::none()
        }
    }

    #[test]
    fn placeholders_are_put_in_and_unknown_ones_refused() {
        let t = Text::parse("{name} #{input} f{frame} at {pts}s", &[]).unwrap();
        assert!(t.changes());
        let b = t.bound(&facts(1.5));
        let shown: String = b.shown.iter().map(|g| char::from(g + b' ')).collect();
        assert_eq!(shown, "cam 1 #2 f7 at 1.500s");
        assert!(Text::parse("{nope}", &[]).is_err());
        assert!(Text::parse("a{b", &[]).is_err());
        assert!(!Text::parse("fixed", &[]).unwrap().changes());
    }

    #[test]
    fn settings_are_checked() {
        let s = |v: &[&str]| Text::parse("x", &v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(s(&["color=ff8000"]).unwrap().style.color, [0, 128, 255]);
        assert_eq!(
            s(&["x=-10", "y=5", "size=24", "box=0"]).unwrap().style.x,
            -10
        );
        for bad in ["size=7", "size=300", "color=zz", "box=2", "x=a", "font=1"] {
            assert!(s(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn glyph_pixels_take_the_colour_and_the_box_darkens() {
        let t = Text::parse("A", &["size=16".into()]).unwrap();
        let p = t.place(FrameSize::new(64, 64));
        let atlas = atlas();
        assert_eq!((p.x0, p.y0, p.scale), (16, 16, 2));
        // 'A' row 0 is 0x0C: pixels 2 and 3 lit.
        assert_eq!(p.shade(atlas, 16 + 2 * 2, 16, [9, 9, 9]), [255, 255, 255]);
        assert_eq!(p.shade(atlas, 16, 16, [100, 100, 100]), [38, 38, 38]);
        assert_eq!(p.shade(atlas, 0, 0, [100, 100, 100]), [100, 100, 100]);
        // From the right and bottom edges.
        let t = Text::parse("AB", &["x=-1".into(), "y=-1".into(), "size=8".into()]).unwrap();
        let p = t.place(FrameSize::new(64, 64));
        assert_eq!((p.x0, p.y0), (64 - 16, 64 - 8));
    }

    #[test]
    fn a_band_draws_the_rows_it_holds() {
        let size = FrameSize::new(40, 30);
        let t = Text::parse("Hi!", &["x=3".into(), "y=9".into(), "size=8".into()]).unwrap();
        let p = t.place(size);
        let atlas = atlas();
        let src: Vec<u8> = (0..size.bytes()).map(|i| (i * 7) as u8).collect();
        let whole = Band {
            width: 40,
            rows: 30,
            row0: 0,
        };
        let mut want = vec![0; size.bytes()];
        p.draw(atlas, whole, &src, &mut want);
        assert_ne!(want, src);
        for (row0, rows) in [(0, 12), (12, 5), (17, 13)] {
            let v = Band {
                width: 40,
                rows,
                row0,
            };
            let band = &src[row0 * 120..(row0 + rows) * 120];
            let mut got = vec![0; band.len()];
            p.draw(atlas, v, band, &mut got);
            assert_eq!(got, want[row0 * 120..(row0 + rows) * 120]);
        }
    }
}
