//! What a video file says about itself beyond its pictures, read with FFmpeg's libavformat
//! (OpenCV 4.6 does not say it, or says it wrongly): the exact frame rate (30000/1001), the
//! time base, the display matrix's rotation, where the video starts on the file's timeline,
//! and its audio streams.
//!
//! Invariant: every figure here is what `ffmpeg -i` reads, so that a file framepipe writes
//! keeps what ffmpeg would keep.

use std::path::{Path, PathBuf};

use ffmpeg_next as ff;

pub use crate::media::timebase::Ratio;
use crate::media::timebase::{file_start, ratio, stream_start};

/// A video file's timing, orientation and audio.
#[derive(Clone, Debug, PartialEq)]
pub struct MediaInfo {
    /// The file.
    pub path: PathBuf,
    /// The video stream's average frame rate (`avg_frame_rate`, else `r_frame_rate`).
    pub rate: Option<Ratio>,
    /// The video stream's time base.
    pub time_base: Ratio,
    /// Degrees to turn each frame clockwise to show it upright (0, 90, 180, 270), as ffmpeg
    /// does on decoding.
    pub rotation: u32,
    /// Seconds from the file's start (its earliest stream) to the video's first frame: a
    /// frame's output time is its time in the video stream plus this.
    pub video_offset: f64,
    /// The audio streams: (index, codec name).
    pub audio: Vec<(usize, String)>,
    /// The stream states an absurd rate, so its timestamps (on the same time base) are not
    /// taken either: frames are timed by the run's rate.
    pub untimed: bool,
}

/// How long a network input may stay silent while its header is read, in microseconds.
pub const URL_TIMEOUT_US: i64 = 10_000_000;

/// The largest single allocation FFmpeg may make (`init`): above an 8K picture's planes and a
/// UDP input's 188 MB receive buffer (`fifo_size=1000000`), far below a hostile server's
/// announced answer.
pub const MAX_ALLOC: usize = 512 << 20;

/// Initialises libav* once (registering nothing; it sets the log level and the largest
/// allocation, `MAX_ALLOC`).
pub fn init() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = ff::init();
        // No one allocation of FFmpeg's may pass `MAX_ALLOC`: a server's answer that says it
        // is 2 GB long (an RTSP DESCRIBE) is refused instead of allocated and filled.
        // SAFETY: sets libavutil's allocation limit, a plain global read by av_malloc.
        unsafe { ff::ffi::av_max_alloc(MAX_ALLOC) };
        ff::util::log::set_level(if crate::msg::enabled(crate::msg::Level::Normal) {
            ff::util::log::Level::Error
        } else {
            ff::util::log::Level::Quiet
        });
    });
}

/// ffmpeg's `get_rotation`: the display matrix's angle turned into clockwise degrees, to the
/// nearest quarter turn.
pub(crate) fn rotation_of(stream: &ff::format::stream::Stream) -> u32 {
    for side in stream.side_data() {
        if side.kind() == ff::codec::packet::side_data::Type::DisplayMatrix
            && side.data().len() >= 36
        {
            let m: Vec<i32> = side
                .data()
                .chunks_exact(4)
                .take(9)
                .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            // av_display_rotation_get gives -atan2(m1, m0) (counter-clockwise degrees);
            // ffmpeg turns the picture by its negation, clockwise.
            let fixed = |v: i32| f64::from(v) / 65536.0;
            let (a, b, c, d) = (fixed(m[0]), fixed(m[1]), fixed(m[3]), fixed(m[4]));
            let scale = ((a * a + c * c).sqrt(), (b * b + d * d).sqrt());
            if scale.0 == 0.0 || scale.1 == 0.0 {
                return 0;
            }
            let cw = (b / scale.1)
                .atan2(a / scale.0)
                .to_degrees()
                .rem_euclid(360.0);
            return ((cw / 90.0).round() as u32 % 4) * 90;
        }
    }
    0
}

/// The frame rate a video stream states, as ffmpeg reads it: `avg_frame_rate`, else
/// `r_frame_rate`, whatever its value.
pub(crate) fn stated_rate(stream: &ff::format::stream::Stream) -> Option<Ratio> {
    ratio(stream.avg_frame_rate()).or_else(|| ratio(stream.rate()))
}

/// Whether a stated rate is one a video can have (`frame::MIN_FPS` to `MAX_FPS`): a damaged
/// header (a flipped AVI's 10/2796203) is not taken.
pub(crate) fn sane_rate((n, d): Ratio) -> bool {
    d > 0
        && (crate::frame::MIN_FPS..=crate::frame::MAX_FPS).contains(&(f64::from(n) / f64::from(d)))
}

/// A video stream's frame rate: the stated one where it is sane, else None (the run's
/// `--fps`, or the default, then times the frames).
pub(crate) fn frame_rate(stream: &ff::format::stream::Stream) -> Option<Ratio> {
    stated_rate(stream).filter(|&r| sane_rate(r))
}

/// Reads `path`'s header; None where libavformat can't open it (OpenCV then says why).
pub fn probe(path: &Path) -> Option<MediaInfo> {
    init();
    let mut options = ff::Dictionary::new();
    if path.to_string_lossy().contains("://") {
        // A network input that never answers must not hold the start forever.
        options.set("rw_timeout", &URL_TIMEOUT_US.to_string());
        options.set("protocol_whitelist", super::PROTOCOLS);
    }
    let ctx = ff::format::input_with_dictionary(&path, options).ok()?;
    info_of(&ctx, path)
}

/// What `ctx` (the demuxer of `path`, its header read) says of the file (`MediaInfo`): the
/// decoder reads it from the demuxer it opened, so a file is not opened again for it.
pub fn info_of(ctx: &ff::format::context::Input, path: &Path) -> Option<MediaInfo> {
    let video = ctx.streams().best(ff::media::Type::Video)?;
    let rate = frame_rate(&video);
    let tb = video.time_base();
    let video_start = stream_start(&video).unwrap_or(0.0);
    let file_start = file_start(ctx).unwrap_or(video_start);
    let audio = ctx
        .streams()
        .filter(|s| s.parameters().medium() == ff::media::Type::Audio)
        .map(|s| (s.index(), s.parameters().id().name().to_string()))
        .collect();
    Some(MediaInfo {
        path: path.to_path_buf(),
        rate,
        time_base: ratio(tb).unwrap_or((1, 90_000)),
        rotation: rotation_of(&video),
        video_offset: (video_start - file_start).max(0.0),
        audio,
        untimed: stated_rate(&video).is_some_and(|r| !sane_rate(r)),
    })
}
