//! The containers `--output` writes and the codecs that go in them: which codec a container
//! gets by default and which it can hold. One table, read by the output's parsing and by
//! the writer.

/// Container formats `--output` writes as video, by extension.
pub const VIDEO_EXTENSIONS: &[&str] = &["mp4", "mov", "mkv", "avi", "webm", "ts", "flv"];

/// The network outputs `--output` sends to, by URL scheme, and the container each carries.
pub const STREAM_SCHEMES: &[(&str, Container)] = &[
    ("udp", Container::Ts),
    ("srt", Container::Ts),
    ("rtmp", Container::Flv),
    ("rtmps", Container::Flv),
    ("rtsp", Container::Rtsp),
];

/// A video output's container, named by its extension (a file) or its URL's scheme (a
/// stream): what it holds and how it keeps time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// `.mp4` (ISO base media).
    Mp4,
    /// `.mov` (QuickTime).
    Mov,
    /// `.mkv` (Matroska): holds every codec and any audio.
    Mkv,
    /// `.avi`: counts whole frames at one rate.
    Avi,
    /// `.webm`: VP9 only.
    Webm,
    /// `.ts`: an MPEG-TS file (what a broadcast or an NVR records).
    TsFile,
    /// `.flv`: an FLV file (what an RTMP server records).
    FlvFile,
    /// MPEG-TS, sent over `udp://` or `srt://`.
    Ts,
    /// FLV, published over `rtmp://`.
    Flv,
    /// RTP packets, published to an RTSP server (`rtsp://`).
    Rtsp,
    /// HTTP Live Streaming: a playlist (`.m3u8`) and rolling MPEG-TS segments beside it.
    Hls,
}

impl Container {
    /// The container an extension (lower-case, no dot) names; None for anything else.
    pub fn from_extension(extension: &str) -> Option<Self> {
        Some(match extension {
            "mp4" => Container::Mp4,
            "mov" => Container::Mov,
            "mkv" => Container::Mkv,
            "avi" => Container::Avi,
            "webm" => Container::Webm,
            "ts" => Container::TsFile,
            "flv" => Container::FlvFile,
            "m3u8" => Container::Hls,
            _ => return None,
        })
    }

    /// The container of the output `path`: a stream's by its URL's scheme, a file's by its
    /// extension.
    pub fn of_path(path: &str) -> Option<Self> {
        if let Some((scheme, _)) = path.split_once("://") {
            let scheme = scheme.to_ascii_lowercase();
            return STREAM_SCHEMES
                .iter()
                .find(|(s, _)| *s == scheme)
                .map(|(_, c)| *c);
        }
        Self::from_extension(&crate::paths::extension(std::path::Path::new(path)))
    }

    /// Whether it is sent to a network peer or published for players (a stream, HLS):
    /// written from a thread of its own, dropping frames rather than slowing the run.
    pub fn is_stream(self) -> bool {
        matches!(
            self,
            Container::Ts | Container::Flv | Container::Rtsp | Container::Hls
        )
    }

    /// Whether it goes to a network peer (which may go away and come back).
    pub fn is_network(self) -> bool {
        matches!(self, Container::Ts | Container::Flv | Container::Rtsp)
    }

    /// libavformat's muxer for it, where the path alone does not say (a URL).
    pub fn muxer(self) -> Option<&'static str> {
        match self {
            Container::Ts | Container::TsFile => Some("mpegts"),
            Container::Flv | Container::FlvFile => Some("flv"),
            Container::Rtsp => Some("rtsp"),
            Container::Hls => Some("hls"),
            _ => None,
        }
    }

    /// Its extension.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Mp4 => "mp4",
            Container::Mov => "mov",
            Container::Mkv => "mkv",
            Container::Avi => "avi",
            Container::Webm => "webm",
            Container::Ts | Container::TsFile => "ts",
            Container::Flv | Container::FlvFile => "flv",
            Container::Rtsp => "rtsp",
            Container::Hls => "m3u8",
        }
    }

    /// The codec it gets when `--codec` is not given.
    pub fn default_codec(self) -> Codec {
        match self {
            Container::Avi => Codec::Mjpeg,
            Container::Mkv => Codec::H264,
            Container::Webm => Codec::Vp9,
            Container::Mp4
            | Container::Mov
            | Container::Ts
            | Container::TsFile
            | Container::Flv
            | Container::FlvFile
            | Container::Rtsp
            | Container::Hls => Codec::H264,
        }
    }

    /// Whether it can hold `codec`.
    pub fn holds(self, codec: Codec) -> bool {
        match self {
            Container::Mkv => true,
            Container::Webm => codec == Codec::Vp9,
            Container::Mp4 => {
                matches!(codec, Codec::H264 | Codec::Hevc | Codec::Mpeg4 | Codec::Vp9)
            }
            Container::Mov => codec != Codec::Vp9,
            Container::Avi => !matches!(codec, Codec::Vp9 | Codec::Hevc),
            Container::Ts | Container::TsFile | Container::Rtsp => {
                matches!(codec, Codec::H264 | Codec::Hevc | Codec::Mpeg4)
            }
            Container::Flv | Container::FlvFile => codec == Codec::H264,
            Container::Hls => matches!(codec, Codec::H264 | Codec::Hevc),
        }
    }

    /// Frame rates it accepts here: AVI counts whole frames per second of its clock (from 1
    /// fps); FFmpeg's Matroska muxer keeps milliseconds; no file below 0.01.
    pub fn rates(self) -> (f64, f64) {
        match self {
            Container::Avi => (1.0, 1000.0),
            _ => (0.01, 1000.0),
        }
    }

    /// Whether it can be written in fragments that survive a crash (MP4, MOV).
    pub fn fragments(self) -> bool {
        matches!(self, Container::Mp4 | Container::Mov)
    }

    /// Whether it counts frames at one rate instead of keeping each frame's time (AVI).
    pub fn counts_frames(self) -> bool {
        self == Container::Avi
    }
}

/// `--codec`: what a video file's frames are compressed with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// H.264 (libx264 through FFmpeg): the default of .mp4 and .mov.
    H264,
    /// HEVC / H.265 (libx265 through FFmpeg).
    Hevc,
    /// MPEG-4 Part 2: where H.264 is missing, the fallback.
    Mpeg4,
    /// Motion JPEG: the default of .avi (keeps odd sizes).
    Mjpeg,
    /// FFV1, lossless (it stores framepipe's BGR, not YUV): the choice where every pixel
    /// must be kept (`--codec ffv1`, in .mkv, .mov or .avi).
    Ffv1,
    /// VP9: the default and only codec of .webm.
    Vp9,
}

impl Codec {
    /// Whether its writer takes 4:2:0 (I420) as framepipe carries it, so that the backend
    /// hands it I420: the planes go to the encoder unconverted (H.264, HEVC, MPEG-4, VP9),
    /// or widened to JPEG's full range by a table (Motion JPEG). FFV1 stores BGR: it takes
    /// BGR.
    pub fn takes_i420(self) -> bool {
        !matches!(self, Codec::Ffv1)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_extension_names_its_container_and_a_codec_it_holds() {
        for ext in VIDEO_EXTENSIONS {
            let c = Container::from_extension(ext).unwrap();
            assert_eq!(c.extension(), *ext);
            assert!(c.holds(c.default_codec()), "{ext}");
        }
        assert_eq!(Container::of_path("a/b.part.MP4"), Some(Container::Mp4));
        assert_eq!(Container::from_extension("png"), None);
        assert!(Container::Mp4.fragments() && !Container::Mkv.fragments());
        assert!(!Container::Webm.holds(Codec::H264) && Container::Mkv.holds(Codec::Vp9));
        assert_eq!(Container::Avi.rates(), (1.0, 1000.0));
        assert_eq!(
            Container::of_path("UDP://10.0.0.1:5000"),
            Some(Container::Ts)
        );
        assert_eq!(
            Container::of_path("rtmp://h/live/key"),
            Some(Container::Flv)
        );
        assert_eq!(Container::of_path("http://h/x.mp4"), None);
        assert_eq!(Container::of_path("live/index.m3u8"), Some(Container::Hls));
        for (_, c) in STREAM_SCHEMES {
            assert!(c.is_stream() && c.is_network() && c.holds(c.default_codec()));
        }
    }
}
