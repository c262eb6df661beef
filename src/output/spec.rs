//! What `--output` names, checked before anything opens: a video file (its container and
//! codec), a stream (`udp://`, `srt://`, `rtmp://`, `rtsp://`, or an HLS playlist `.m3u8`:
//! a video output whose container is a stream's), an image sequence, or standard output;
//! and the rates a container holds.
//!
//! Invariants: parsing opens nothing and creates nothing; every refusal names the output and
//! says what would work.

use std::path::Path;

use super::codec::{Codec, Container, VIDEO_EXTENSIONS};
use crate::frame::SequencePattern;

/// Image formats `--output` writes as numbered sequences.
pub const SEQUENCE_EXTENSIONS: &[&str] = &["png", "ppm", "bmp", "tif", "tiff", "jpg", "jpeg"];

/// Why an `--output` can't be written as named (each names the output and what would work).
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A folder, not a file.
    #[error("--output '{0}' is a folder; name a file in it")]
    Folder(String),
    /// No file name.
    #[error("--output '{0}' does not name a file")]
    NoFileName(String),
    /// `%` in the folder part.
    #[error("--output '{0}': the number pattern must be in the file name")]
    PatternInFolder(String),
    /// An extension framepipe writes nothing as.
    #[error("--output '{output}': cannot write {what}; use a video ({}) or an image sequence such as frames/%05d.png ({})", VIDEO_EXTENSIONS.join(", "), SEQUENCE_EXTENSIONS.join(", "))]
    Unsupported {
        /// The output.
        output: String,
        /// "'.x' files", or "files without an extension".
        what: String,
    },
    /// A frame number in a video file's name.
    #[error("--output '{output}': %d numbers the files of an image sequence, and .{extension} is a video container holding every frame in one file: name one file, or use an image extension (.png, …) for a sequence")]
    NumberedVideo {
        /// The output.
        output: String,
        /// Its container's extension.
        extension: String,
    },
    /// A sequence's number pattern that does not parse.
    #[error("--output: {0}")]
    Pattern(String),
    /// An image sequence without a frame number.
    #[error("--output '{output}': an image output needs a frame number, for example frames/%05d.{extension}")]
    NoFrameNumber {
        /// The output.
        output: String,
        /// The image format's extension.
        extension: String,
    },
    /// An extension that is not a video container.
    #[error("--output '{output}': '.{extension}' is not a video container")]
    NotAContainer {
        /// The output.
        output: String,
        /// The extension.
        extension: String,
    },
    /// A scheme framepipe sends nothing to.
    #[error("--output '{output}': framepipe sends network outputs to {schemes} (or writes HLS: a .m3u8 playlist); this scheme is none of them")]
    Scheme {
        /// The output.
        output: String,
        /// The schemes it sends to.
        schemes: String,
    },
    /// A stream's URL without an address.
    #[error("--output '{0}': the address is missing")]
    NoAddress(String),
    /// What this build's libraries can't write.
    #[error("--output '{output}': this build has no FFmpeg libraries{what}")]
    NotBuilt {
        /// The output.
        output: String,
        /// What they would do, and what this build writes.
        what: &'static str,
    },
    /// A codec a stream can't carry.
    #[error("--codec {codec}: a {muxer} stream can't carry it (h264 goes everywhere)")]
    StreamCodec {
        /// The codec.
        codec: &'static str,
        /// The stream's muxer.
        muxer: &'static str,
    },
    /// A codec a container can't hold.
    #[error("--codec {codec}: a .{extension} file can't hold it (.mkv holds every codec)")]
    FileCodec {
        /// The codec.
        codec: &'static str,
        /// The container's extension.
        extension: &'static str,
    },
    /// `--codec` for an image sequence or standard output.
    #[error("--codec applies to video files, not to image sequences or standard output")]
    CodecNotVideo,
    /// Encoder flags the codec can't take.
    #[error("--output '{output}': {why}")]
    Encoding {
        /// The output.
        output: String,
        /// The encoder's refusal.
        why: super::encode::EncodingError,
    },
    /// Encoder flags for an output that is not a video.
    #[error("--crf, --bitrate, --maxrate, --bufsize, --preset, --tune, --gop, --pix-fmt and --codec-opt apply to a video --output")]
    EncodingNotVideo,
    /// `--quality` for a codec without a fixed quantiser.
    #[error("--quality applies to Motion JPEG and MPEG-4 Part 2 (a fixed quantiser); H.264, HEVC and VP9 keep their encoders' defaults, and FFV1 is lossless")]
    QualityNotFixed,
    /// A rate the container can't hold.
    #[error("--output '{output}': a .{extension} file holds {low} to {high} frames per second, not {fps} (the rate comes from the input, or from --fps for the test pattern)")]
    Rate {
        /// The output.
        output: String,
        /// Its container's extension.
        extension: &'static str,
        /// The least rate it holds.
        low: f64,
        /// The greatest.
        high: f64,
        /// The rate asked.
        fps: f64,
    },
    /// Its folder is missing.
    #[error(transparent)]
    Path(#[from] crate::paths::PathError),
}

/// What `--output` names, checked before anything runs.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputSpec {
    /// A video file.
    Video {
        /// Its path.
        path: String,
        /// Its container (from its extension).
        container: Container,
        /// What its frames are compressed with.
        codec: Codec,
        /// JPEG quality (1–100) of OpenCV's Motion JPEG writer, when asked for.
        quality: Option<u8>,
        /// The encoder's flags (`--crf`, `--bitrate`, …), checked against the codec.
        encoding: super::Encoding,
    },
    /// A YUV4MPEG2 stream on standard output (`-`).
    Stdout,
    /// Numbered images.
    Sequence {
        /// The file names.
        pattern: SequencePattern,
        /// The image format's extension, lower-cased.
        extension: String,
    },
}

impl OutputSpec {
    /// Checks `--output` without opening anything.
    pub fn parse(s: &str) -> Result<Self, OutputError> {
        if s == "-" {
            return Ok(OutputSpec::Stdout);
        }
        if s.contains("://") {
            return Self::parse_stream(s);
        }
        let path = Path::new(s);
        if s.ends_with('/') || path.is_dir() {
            return Err(OutputError::Folder(s.into()));
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| OutputError::NoFileName(s.into()))?;
        let extension = crate::paths::extension(Path::new(name));
        if path
            .parent()
            .is_some_and(|dir| dir.to_string_lossy().contains('%'))
        {
            return Err(OutputError::PatternInFolder(s.into()));
        }
        let what = if extension.is_empty() {
            "files without an extension".to_string()
        } else {
            format!("'.{extension}' files")
        };
        let supported = || OutputError::Unsupported {
            output: s.into(),
            what: what.clone(),
        };
        // A video file's name is taken as written ('100%.mkv'); a frame number in it means
        // an image sequence was meant.
        let video = VIDEO_EXTENSIONS.contains(&extension.as_str()) || extension == "m3u8";
        match SequencePattern::parse(name) {
            Some(Ok(_)) if video => Err(OutputError::NumberedVideo {
                output: s.into(),
                extension,
            }),
            Some(Err(_)) if video => Self::parse_video(s, extension),
            Some(Err(e)) => Err(OutputError::Pattern(e.to_string())),
            Some(Ok(_)) => {
                if !SEQUENCE_EXTENSIONS.contains(&extension.as_str()) {
                    return Err(supported());
                }
                let pattern = SequencePattern::parse(s)
                    .expect("has %")
                    .map_err(|e| OutputError::Pattern(e.to_string()))?;
                if !cfg!(feature = "ffmpeg") && extension != "ppm" {
                    return Err(OutputError::NotBuilt {
                        output: s.into(),
                        what: " and writes only .ppm sequences",
                    });
                }
                Ok(OutputSpec::Sequence { pattern, extension })
            }
            None => {
                if SEQUENCE_EXTENSIONS.contains(&extension.as_str()) {
                    return Err(OutputError::NoFrameNumber {
                        output: s.into(),
                        extension,
                    });
                }
                if !video {
                    return Err(supported());
                }
                Self::parse_video(s, extension)
            }
        }
    }

    /// A network output: its container by the URL's scheme (`codec::STREAM_SCHEMES`).
    fn parse_stream(s: &str) -> Result<Self, OutputError> {
        let schemes: Vec<String> = super::codec::STREAM_SCHEMES
            .iter()
            .map(|(s, _)| format!("{s}://"))
            .collect();
        let container = Container::of_path(s).ok_or_else(|| OutputError::Scheme {
            output: s.into(),
            schemes: schemes.join(", "),
        })?;
        if s.split_once("://").is_some_and(|(_, rest)| rest.is_empty()) {
            return Err(OutputError::NoAddress(s.into()));
        }
        if !cfg!(feature = "ffmpeg") {
            return Err(OutputError::NotBuilt {
                output: s.into(),
                what: ", which send streams",
            });
        }
        Ok(Self::video(s, container))
    }

    /// A video output at `path` in `container`, with its default codec and the encoder's
    /// defaults (the flags set the rest: `with_codec`, `with_quality`, `with_encoding`).
    fn video(path: &str, container: Container) -> Self {
        OutputSpec::Video {
            path: path.to_string(),
            container,
            codec: container.default_codec(),
            quality: None,
            encoding: super::Encoding::default(),
        }
    }

    /// Whether it is a stream (network, or HLS), written from a thread of its own.
    pub fn is_stream(&self) -> bool {
        matches!(self, OutputSpec::Video { container, .. } if container.is_stream())
    }

    /// A video file named `s`, of the container its `extension` names.
    fn parse_video(s: &str, extension: String) -> Result<Self, OutputError> {
        let container =
            Container::from_extension(&extension).ok_or_else(|| OutputError::NotAContainer {
                output: s.into(),
                extension: extension.clone(),
            })?;
        if container != Container::Hls {
            // An HLS playlist's folder is made when missing, as an image sequence's.
            crate::paths::check_folder("--output", s)?;
        }
        if !cfg!(feature = "ffmpeg") {
            return Err(OutputError::NotBuilt {
                output: s.into(),
                what: ", which write video files; write a .ppm sequence such as frames/%05d.ppm",
            });
        }
        Ok(Self::video(s, container))
    }
}

impl OutputSpec {
    /// Uses `codec` for a video output instead of its container's default; fails where the
    /// container can't hold it, or for an image sequence.
    pub fn with_codec(mut self, codec: Option<Codec>) -> Result<Self, OutputError> {
        let Some(codec) = codec else { return Ok(self) };
        match &mut self {
            OutputSpec::Video {
                container,
                codec: chosen,
                ..
            } => {
                if !container.holds(codec) {
                    return Err(match container.is_stream() {
                        true => OutputError::StreamCodec {
                            codec: codec.name(),
                            muxer: container.muxer().unwrap_or_default(),
                        },
                        false => OutputError::FileCodec {
                            codec: codec.name(),
                            extension: container.extension(),
                        },
                    });
                }
                *chosen = codec;
                Ok(self)
            }
            OutputSpec::Sequence { .. } | OutputSpec::Stdout => Err(OutputError::CodecNotVideo),
        }
    }

    /// Sets a video output's encoder flags, checked against its codec; fails for any other
    /// output, or for flags the codec can't take.
    pub fn with_encoding(mut self, encoding: super::Encoding) -> Result<Self, OutputError> {
        if encoding.is_default() {
            return Ok(self);
        }
        match &mut self {
            OutputSpec::Video {
                path,
                codec,
                encoding: set,
                ..
            } => {
                encoding
                    .check(*codec)
                    .map_err(|why| OutputError::Encoding {
                        output: path.clone(),
                        why,
                    })?;
                *set = encoding;
                Ok(self)
            }
            _ => Err(OutputError::EncodingNotVideo),
        }
    }

    /// Sets the quality (0-100, a fixed quantiser) of a Motion JPEG or MPEG-4 Part 2 video;
    /// fails for any other output.
    pub fn with_quality(mut self, quality: Option<u8>) -> Result<Self, OutputError> {
        let Some(q) = quality else { return Ok(self) };
        match &mut self {
            OutputSpec::Video {
                codec: Codec::Mjpeg | Codec::Mpeg4,
                quality,
                ..
            } => {
                *quality = Some(q);
                Ok(self)
            }
            _ => Err(OutputError::QualityNotFixed),
        }
    }
}

/// Fails when a video output's container can't hold `fps` frames per second (image
/// sequences hold any rate).
pub fn check_rate(spec: &OutputSpec, fps: f64) -> Result<(), OutputError> {
    let OutputSpec::Video {
        path, container, ..
    } = spec
    else {
        return Ok(());
    };
    let (low, high) = container.rates();
    if (low..=high).contains(&fps) {
        return Ok(());
    }
    Err(OutputError::Rate {
        output: path.clone(),
        extension: container.extension(),
        low,
        high,
        fps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validates_outputs() {
        let dir = std::env::temp_dir();
        let d = dir.to_str().unwrap();
        assert!(matches!(
            OutputSpec::parse(&format!("{d}/x%04d.ppm")).unwrap(),
            OutputSpec::Sequence { .. }
        ));
        for (bad, says) in [
            ("/no/such/dir/out.mp4".to_string(), "does not exist"),
            (format!("{d}/out.xyz"), "cannot write '.xyz'"),
            (format!("{d}/out.png"), "needs a frame number"),
            (format!("{d}/out%s.png"), "expected %d"),
            (
                format!("{d}/out%d.mp4"),
                "numbers the files of an image sequence",
            ),
            (format!("{d}/"), "is a folder"),
            (format!("{d}/noext"), "without an extension"),
            (
                "ftp://10.0.0.1/x.ts".to_string(),
                "framepipe sends network outputs to udp://",
            ),
            ("udp://".to_string(), "the address is missing"),
        ] {
            let e = OutputSpec::parse(&bad).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
