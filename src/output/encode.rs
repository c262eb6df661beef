//! What a video encoder is told beyond its codec, named as ffmpeg names it: `--crf`,
//! `--bitrate` (with `--maxrate` and `--bufsize`), `--preset`, `--tune`, `--gop`, the output's
//! `--pix-fmt`, and `--codec-opt KEY=VALUE` for the rest (handed to libavcodec as ffmpeg
//! hands its encoders' private options).
//!
//! Invariants: checked against the codec before anything opens, every refusal saying why and
//! what would work; nothing set here means the encoder's own defaults (ffmpeg's); an option
//! the encoder does not have is refused by name when it opens (`output::av`), never ignored.

use super::codec::Codec;

/// The pixel format a video output stores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutPixel {
    /// 4:2:0, what players expect (the default).
    Yuv420p,
    /// 4:2:2 (H.264 High 4:2:2, HEVC, VP9 profile 1).
    Yuv422p,
    /// 4:4:4, every pixel's colour (H.264 High 4:4:4, HEVC, VP9 profile 1).
    Yuv444p,
}

impl OutPixel {
    /// ffmpeg's name.
    pub fn name(self) -> &'static str {
        match self {
            OutPixel::Yuv420p => "yuv420p",
            OutPixel::Yuv422p => "yuv422p",
            OutPixel::Yuv444p => "yuv444p",
        }
    }
}

/// The encoder flags of a video output (module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Encoding {
    /// Constant quality (`-crf`): lower is better, 0–51 for H.264/HEVC, 0–63 for VP9.
    pub crf: Option<f32>,
    /// Target bits per second (`-b:v`).
    pub bitrate: Option<u64>,
    /// Most bits per second (`-maxrate`), with `bufsize`.
    pub maxrate: Option<u64>,
    /// The rate control's buffer, bits (`-bufsize`).
    pub bufsize: Option<u64>,
    /// The encoder's speed/size trade (`-preset`: ultrafast … veryslow).
    pub preset: Option<String>,
    /// What the encoder tunes for (`-tune`: zerolatency, film, animation, …).
    pub tune: Option<String>,
    /// Frames from one keyframe to the next, at most (`-g`).
    pub gop: Option<u32>,
    /// The stored pixel format (`-pix_fmt`).
    pub pix_fmt: Option<OutPixel>,
    /// Any other option of the encoder, in the order given (`-KEY VALUE`).
    pub opts: Vec<(String, String)>,
}

/// A value of an encoder flag that does not parse.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Not a number with an optional k, M or G.
    #[error("'{0}' is not a rate: write it as ffmpeg does, e.g. 2M, 800k or 64000")]
    NotARate(String),
    /// A rate outside 1k to 100G.
    #[error("'{0}': a rate is 1k to 100G bits per second")]
    RateRange(String),
    /// Not `KEY=VALUE`.
    #[error("'{0}': write an encoder option as KEY=VALUE, e.g. profile=high")]
    NotKeyValue(String),
    /// A key that is not an option's name.
    #[error("'{given}': '{key}' is not an option name")]
    NotAnOptionName {
        /// As given.
        given: String,
        /// The key.
        key: String,
    },
}

/// Encoder flags a codec can't take, or that contradict each other.
#[derive(Debug, thiserror::Error)]
pub enum EncodingError {
    /// `--crf` for a codec without a constant-quality mode.
    #[error(
        "--crf applies to h264, hevc and vp9; {codec} has no constant-quality mode ({instead})"
    )]
    NoCrf {
        /// The codec.
        codec: &'static str,
        /// What it has instead.
        instead: &'static str,
    },
    /// `--crf` out of the codec's range.
    #[error("--crf {crf}: {codec} takes 0 to {most}")]
    CrfRange {
        /// As given.
        crf: f32,
        /// The codec.
        codec: &'static str,
        /// Its greatest value.
        most: f32,
    },
    /// `--crf` with `--bitrate`.
    #[error(
        "--crf and --bitrate both set the rate: choose one (--maxrate and --bufsize cap a --crf)"
    )]
    CrfAndBitrate,
    /// A rate for FFV1.
    #[error("ffv1 is lossless: it has no bitrate to set")]
    LosslessRate,
    /// `--maxrate` or `--bufsize` alone.
    #[error("--maxrate and --bufsize go together (the rate control needs a buffer to cap the rate over)")]
    MaxrateAlone,
    /// `--preset` or `--tune` for a codec without them.
    #[error(
        "--preset and --tune apply to h264 and hevc (libx264, libx265); {codec} has none{hint}"
    )]
    NoPreset {
        /// The codec.
        codec: &'static str,
        /// What it takes instead, where it has something.
        hint: &'static str,
    },
    /// `--gop 0`.
    #[error("--gop {0}: a keyframe interval is at least 1 frame")]
    GopZero(u32),
    /// `--gop` over 1 for an intra-only codec.
    #[error("--gop {gop}: every {codec} frame is a keyframe")]
    GopIntra {
        /// As given.
        gop: u32,
        /// The codec.
        codec: &'static str,
    },
    /// A stored format the codec is not written in.
    #[error("--pix-fmt {pix}: {codec} is written in {stored} here; 4:2:2 and 4:4:4 are for h264, hevc and vp9")]
    PixFmt {
        /// As given.
        pix: &'static str,
        /// The codec.
        codec: &'static str,
        /// What it stores.
        stored: &'static str,
    },
    /// A preset libx264/libx265 don't have.
    #[error("--preset {preset}: {codec} takes {presets}")]
    Preset {
        /// As given.
        preset: String,
        /// The codec.
        codec: &'static str,
        /// The presets it takes.
        presets: String,
    },
}

/// A rate as ffmpeg writes it: `2M`, `800k`, `1.5M`, `64000` (bits per second).
pub fn parse_rate(s: &str) -> Result<u64, ValueError> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k' | 'K') => (&t[..t.len() - 1], 1e3),
        Some('m' | 'M') => (&t[..t.len() - 1], 1e6),
        Some('g' | 'G') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| ValueError::NotARate(s.into()))?;
    let bits = v * mult;
    if !(bits.is_finite() && (1000.0..=1e11).contains(&bits)) {
        return Err(ValueError::RateRange(s.into()));
    }
    Ok(bits.round() as u64)
}

/// `KEY=VALUE`, as `--codec-opt` takes it.
pub fn parse_opt(s: &str) -> Result<(String, String), ValueError> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| ValueError::NotKeyValue(s.into()))?;
    let k = k.trim();
    if k.is_empty()
        || !k
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_:".contains(c))
    {
        return Err(ValueError::NotAnOptionName {
            given: s.into(),
            key: k.into(),
        });
    }
    Ok((k.to_string(), v.to_string()))
}

impl Encoding {
    /// Whether nothing was asked (the encoder's defaults).
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }

    /// Whether the output stores 4:2:0 (so the writer may take I420 as it is).
    pub fn stores_420(&self) -> bool {
        matches!(self.pix_fmt, None | Some(OutPixel::Yuv420p))
    }

    /// Refuses what `codec` can't do, or what contradicts itself, saying why.
    pub fn check(&self, codec: Codec) -> Result<(), EncodingError> {
        self.check_rate_control(codec)?;
        self.check_tuning(codec)?;
        self.check_pictures(codec)
    }

    /// `--crf`, `--bitrate`, `--maxrate` and `--bufsize`: what the codec takes, and not both
    /// a quality and a rate.
    fn check_rate_control(&self, codec: Codec) -> Result<(), EncodingError> {
        let name = codec.name();
        let x26x = matches!(codec, Codec::H264 | Codec::Hevc);
        let lossless = codec == Codec::Ffv1;
        if let Some(crf) = self.crf {
            let most = if codec == Codec::Vp9 { 63.0 } else { 51.0 };
            if !(x26x || codec == Codec::Vp9) {
                return Err(EncodingError::NoCrf {
                    codec: name,
                    instead: if lossless {
                        "ffv1 is lossless"
                    } else {
                        "--quality sets its fixed quantiser"
                    },
                });
            }
            if !(0.0..=most).contains(&crf) {
                return Err(EncodingError::CrfRange {
                    crf,
                    codec: name,
                    most,
                });
            }
            if self.bitrate.is_some() {
                return Err(EncodingError::CrfAndBitrate);
            }
        }
        if lossless && (self.bitrate.is_some() || self.maxrate.is_some() || self.bufsize.is_some())
        {
            return Err(EncodingError::LosslessRate);
        }
        if self.maxrate.is_some() != self.bufsize.is_some() {
            return Err(EncodingError::MaxrateAlone);
        }
        Ok(())
    }

    /// `--preset` and `--tune`: libx264's and libx265's only, and a preset they have.
    fn check_tuning(&self, codec: Codec) -> Result<(), EncodingError> {
        let name = codec.name();
        if !matches!(codec, Codec::H264 | Codec::Hevc)
            && (self.preset.is_some() || self.tune.is_some())
        {
            return Err(EncodingError::NoPreset {
                codec: name,
                hint: if codec == Codec::Vp9 {
                    " (vp9: --codec-opt deadline=good, --codec-opt cpu-used=4)"
                } else {
                    ""
                },
            });
        }
        const X26X: [&str; 10] = [
            "ultrafast",
            "superfast",
            "veryfast",
            "faster",
            "fast",
            "medium",
            "slow",
            "slower",
            "veryslow",
            "placebo",
        ];
        match &self.preset {
            Some(p) if !X26X.contains(&p.as_str()) => Err(EncodingError::Preset {
                preset: p.clone(),
                codec: name,
                presets: X26X.join(", "),
            }),
            _ => Ok(()),
        }
    }

    /// `--gop` (intra-only codecs take 1) and `--pix-fmt` (4:2:0 only, but for x264, x265
    /// and VP9).
    fn check_pictures(&self, codec: Codec) -> Result<(), EncodingError> {
        let name = codec.name();
        if let Some(g) = self.gop {
            if g == 0 || matches!(codec, Codec::Mjpeg | Codec::Ffv1) && g != 1 {
                return Err(match g {
                    0 => EncodingError::GopZero(g),
                    _ => EncodingError::GopIntra {
                        gop: g,
                        codec: name,
                    },
                });
            }
        }
        if let Some(p) = self.pix_fmt.filter(|p| *p != OutPixel::Yuv420p) {
            if !matches!(codec, Codec::H264 | Codec::Hevc | Codec::Vp9) {
                return Err(EncodingError::PixFmt {
                    pix: p.name(),
                    codec: name,
                    stored: if codec == Codec::Ffv1 {
                        "BGR (lossless)"
                    } else {
                        "4:2:0"
                    },
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_options_parse_as_ffmpeg_writes_them() {
        assert_eq!(parse_rate("2M"), Ok(2_000_000));
        assert_eq!(parse_rate("800k"), Ok(800_000));
        assert_eq!(parse_rate("1.5M"), Ok(1_500_000));
        assert_eq!(parse_rate("64000"), Ok(64_000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("-1M").is_err());
        assert!(parse_rate("12").is_err());
        assert_eq!(
            parse_opt("profile=high"),
            Ok(("profile".into(), "high".into()))
        );
        assert_eq!(
            parse_opt("x264-params=ref=2:bframes=0"),
            Ok(("x264-params".into(), "ref=2:bframes=0".into()))
        );
        assert!(parse_opt("profile").is_err());
        assert!(parse_opt("=high").is_err());
    }

    #[test]
    fn refusals_say_why() {
        let e = |enc: Encoding, codec| enc.check(codec).unwrap_err().to_string();
        let crf = Encoding {
            crf: Some(23.0),
            ..Default::default()
        };
        assert!(crf.check(Codec::H264).is_ok() && crf.check(Codec::Vp9).is_ok());
        assert!(e(crf.clone(), Codec::Mpeg4).contains("--quality"));
        assert!(e(
            Encoding {
                bitrate: Some(1_000_000),
                ..crf.clone()
            },
            Codec::H264
        )
        .contains("choose one"));
        assert!(e(
            Encoding {
                maxrate: Some(1_000_000),
                ..Default::default()
            },
            Codec::H264
        )
        .contains("--bufsize"));
        assert!(e(
            Encoding {
                preset: Some("fast".into()),
                ..Default::default()
            },
            Codec::Vp9
        )
        .contains("deadline"));
        assert!(e(
            Encoding {
                preset: Some("quick".into()),
                ..Default::default()
            },
            Codec::H264
        )
        .contains("ultrafast"));
        assert!(e(
            Encoding {
                gop: Some(10),
                ..Default::default()
            },
            Codec::Mjpeg
        )
        .contains("keyframe"));
        assert!(e(
            Encoding {
                pix_fmt: Some(OutPixel::Yuv444p),
                ..Default::default()
            },
            Codec::Mpeg4
        )
        .contains("4:2:0"));
        assert!(e(
            Encoding {
                bitrate: Some(1_000_000),
                ..Default::default()
            },
            Codec::Ffv1
        )
        .contains("lossless"));
        assert!(e(
            Encoding {
                crf: Some(60.0),
                ..Default::default()
            },
            Codec::H264
        )
        .contains("0 to 51"));
    }
}
