//! The containers `--output` writes and the codecs that go in them: which codec a container
//! gets by default and which it can hold. One table, read by the output's parsing and by
//! the writer.

/// Container formats `--output` writes as video.
pub const VIDEO_EXTENSIONS: &[&str] = &["mp4", "mov", "mkv", "avi", "webm"];

/// `--codec`: what a video file's frames are compressed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Codec {
    /// H.264 (libx264 through FFmpeg): the default of .mp4 and .mov.
    H264,
    /// HEVC / H.265 (libx265 through FFmpeg).
    Hevc,
    /// MPEG-4 Part 2: where H.264 is missing, the fallback.
    Mpeg4,
    /// Motion JPEG: the default of .avi (keeps odd sizes).
    Mjpeg,
    /// FFV1, lossless: the default of .mkv (it stores framepipe's BGR, not YUV).
    Ffv1,
    /// VP9: the default and only codec of .webm.
    Vp9,
}

impl Codec {
    /// The codec a container gets when `--codec` is not given.
    pub fn default_for(extension: &str) -> Codec {
        match extension {
            "avi" => Codec::Mjpeg,
            "mkv" => Codec::Ffv1,
            "webm" => Codec::Vp9,
            _ => Codec::H264,
        }
    }

    /// Whether the container `extension` can hold it.
    pub fn fits(self, extension: &str) -> bool {
        match extension {
            "mkv" => true,
            "webm" => self == Codec::Vp9,
            "mp4" => matches!(self, Codec::H264 | Codec::Hevc | Codec::Mpeg4 | Codec::Vp9),
            "mov" => !matches!(self, Codec::Vp9),
            "avi" => !matches!(self, Codec::Vp9 | Codec::Hevc),
            _ => false,
        }
    }

    /// Its `--codec` name.
    pub fn name(self) -> &'static str {
        match self {
            Codec::H264 => "h264",
            Codec::Hevc => "hevc",
            Codec::Mpeg4 => "mpeg4",
            Codec::Mjpeg => "mjpeg",
            Codec::Ffv1 => "ffv1",
            Codec::Vp9 => "vp9",
        }
    }
}

/// Frame rates each container accepts here: AVI counts whole frames per second of its
/// clock (from 1 fps); FFmpeg's Matroska muxer keeps milliseconds; no file below 0.01.
pub fn rate_range(extension: &str) -> (f64, f64) {
    match extension {
        "avi" => (1.0, 1000.0),
        _ => (0.01, 1000.0),
    }
}
