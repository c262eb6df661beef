//! A video file encoded and muxed by FFmpeg's own libraries (libavcodec, libavformat,
//! libswscale, through `ffmpeg-next`), so that it keeps what `ffmpeg -i IN -vf … OUT` keeps:
//! the codec asked for, each frame at its own presentation time on the input's time base
//! (30000/1001 stays 30000/1001; a variable rate stays variable), and the input's audio
//! streams copied packet for packet, interleaved with the video.
//!
//! The same writer sends streams (`Container::is_stream`: MPEG-TS over UDP or SRT, FLV over
//! RTMP, RTSP publishing, HLS): the muxer named by the container, live-friendly encoder
//! defaults (`live_defaults`), and an interrupt flag that makes a blocked network write give
//! up (`output::stream` runs it on a thread of its own).
//!
//! Invariants: a frame's timestamp never goes back (one that rounds onto its predecessor's is
//! moved one tick on); audio is cut at the end of the last frame written; the trailer is
//! written once, by `finish` (or by its `stop::at_end` hook in `writer`); a fragmented MP4/MOV
//! (`FRAGMENT_SECONDS`) holds every fragment written before a crash.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::{bail, Context, Result};
use ffmpeg_next as ff;

use super::codec::{Codec, Container};
use crate::frame::FrameSize;
use crate::media::info as media;
use crate::media::timebase::Ratio;
use crate::pixel::PixelFormat;

/// Where a file's frames and audio come from, for the writer's timing.
#[derive(Clone, Debug, Default)]
pub struct Timing {
    /// Frames per second as a fraction (the input's own, else `--fps`).
    pub rate: Option<Ratio>,
    /// The input video's time base; frames carry timestamps on the output's timeline.
    pub time_base: Option<Ratio>,
    /// The input's audio streams that are copied, and where their packets come from.
    pub audio: Option<super::audio::Audio>,
}

pub use crate::frame::ratio_of;

use crate::media::timebase::rational;

/// The encoder's name, pixel format and options for `codec`.
fn encoder_for(codec: Codec) -> (&'static str, ff::format::Pixel, Vec<(&'static str, String)>) {
    use ff::format::Pixel;
    match codec {
        Codec::H264 => ("libx264", Pixel::YUV420P, vec![]),
        Codec::Hevc => (
            "libx265",
            Pixel::YUV420P,
            vec![("x265-params", "log-level=error".into())],
        ),
        Codec::Mpeg4 => ("mpeg4", Pixel::YUV420P, vec![]),
        Codec::Mjpeg => ("mjpeg", Pixel::YUVJ420P, vec![]),
        // BGR stays BGR: lossless for what framepipe produced. Slices let it use every core.
        Codec::Ffv1 => (
            "ffv1",
            Pixel::BGRZ,
            vec![
                ("level", "3".into()),
                ("slices", "16".into()),
                ("slicecrc", "1".into()),
            ],
        ),
        Codec::Vp9 => (
            "libvpx-vp9",
            Pixel::YUV420P,
            vec![
                ("deadline", "realtime".into()),
                ("cpu-used", "8".into()),
                ("row-mt", "1".into()),
            ],
        ),
    }
}

/// The fixed quantiser of the codecs that take one (MPEG-4 Part 2, Motion JPEG): `--quality`
/// 0..100 as 31..1 (lower is finer), else 3 (what `ffmpeg -q:v 3` gives: close to the
/// source, where FFmpeg's own default is a 200 kbit/s rate).
fn qscale(codec: Codec, quality: Option<u8>) -> Option<i32> {
    matches!(codec, Codec::Mpeg4 | Codec::Mjpeg)
        .then(|| quality.map_or(3, |q| 31 - i32::from(q) * 30 / 100))
}

/// Whether `codec` needs even frame sizes (4:2:0 chroma).
pub fn needs_even_size(codec: Codec) -> bool {
    !matches!(codec, Codec::Ffv1 | Codec::Mjpeg)
}

/// The smallest and largest width and height each encoder opens with (measured with this
/// FFmpeg's encoders; after an even-size codec drops an odd last row or column).
fn size_limits(codec: Codec) -> (usize, usize) {
    match codec {
        Codec::H264 => (2, 16_384),
        Codec::Hevc => (16, 8_192),
        Codec::Mpeg4 => (2, 8_191),
        Codec::Vp9 => (2, 16_384),
        Codec::Mjpeg => (1, 65_535),
        Codec::Ffv1 => (1, 65_535),
    }
}

/// Fails, naming the limit, when `codec` can't store frames of `size` (what the encoder
/// would say as "Generic error in an external library" or "Invalid argument").
pub fn check_size(codec: Codec, size: FrameSize) -> Result<(), SizeError> {
    let (w, h) = if needs_even_size(codec) {
        (size.width & !1, size.height & !1)
    } else {
        (size.width, size.height)
    };
    let (low, high) = size_limits(codec);
    let codec_name = codec.name();
    if w < low || h < low {
        let counted = if needs_even_size(codec) {
            ", counted after an odd last row or column is dropped"
        } else {
            ""
        };
        return Err(SizeError::TooSmall {
            codec: codec_name,
            size,
            low,
            counted,
        });
    }
    if w > high || h > high {
        return Err(SizeError::TooLarge {
            codec: codec_name,
            size,
            high,
        });
    }
    Ok(())
}

/// A frame size a codec can't store.
#[derive(Debug, thiserror::Error)]
pub enum SizeError {
    /// Under its least side.
    #[error("{codec} can't store {size} frames: it needs at least {low}x{low} pixels{counted} (an image sequence, or --codec ffv1 in .mkv, keeps any size)")]
    TooSmall {
        /// The codec.
        codec: &'static str,
        /// The frames' size.
        size: FrameSize,
        /// Its least side.
        low: usize,
        /// How an odd side is counted, where it is.
        counted: &'static str,
    },
    /// Over its greatest side.
    #[error("{codec} can't store {size} frames: at most {high} pixels wide and high (an image sequence, or --codec ffv1 in .mkv, keeps any size)")]
    TooLarge {
        /// The codec.
        codec: &'static str,
        /// The frames' size.
        size: FrameSize,
        /// Its greatest side.
        high: usize,
    },
}

/// Seconds of video in each fragment of a fragmented MP4 or MOV: what a crash may lose.
pub const FRAGMENT_SECONDS: f64 = 0.5;

/// Video packets in the file at `path` (one per frame), read back with libavformat without
/// decoding; None when it can't be opened or has no video stream.
pub fn count_video_packets(path: &str) -> Option<u64> {
    media::init();
    let mut input = ff::format::input(&path).ok()?;
    let video = input.streams().best(ff::media::Type::Video)?.index();
    let mut n = 0;
    for (stream, _) in input.packets() {
        if stream.index() == video {
            n += 1;
        }
    }
    Some(n)
}

/// Whether an encoder for `codec` exists in this FFmpeg.
pub fn available(codec: Codec) -> bool {
    media::init();
    ff::encoder::find_by_name(encoder_for(codec).0).is_some()
}

/// libswscale's colour conversion of one frame size, with its slice threads on (FFmpeg 5's
/// `threads` option, which `sws_getContext` leaves at one): the conversion is the writer's
/// largest cost after the encoder.
struct Scaler(*mut ff::ffi::SwsContext);

// SAFETY: the scaler is owned by one `AvFile`, which is only ever used behind a `Mutex`
// (`writer::Open`), so no two threads touch it at once.
unsafe impl Send for Scaler {}

impl Scaler {
    fn new(w: u32, h: u32, from: ff::format::Pixel, to: ff::format::Pixel) -> Result<Self> {
        let threads = crate::host::cores() as i64;
        let (from, to): (ff::ffi::AVPixelFormat, ff::ffi::AVPixelFormat) = (from.into(), to.into());
        // SAFETY: a freshly allocated context gets its options by name, as libswscale
        // documents, then is initialised once; it is freed in `Drop` (or here on failure).
        unsafe {
            let ctx = ff::ffi::sws_alloc_context();
            anyhow::ensure!(!ctx.is_null(), "allocating a colour converter");
            let obj = ctx.cast::<std::ffi::c_void>();
            let set =
                |name: &std::ffi::CStr, v: i64| ff::ffi::av_opt_set_int(obj, name.as_ptr(), v, 0);
            let ok = [
                set(c"srcw", i64::from(w)),
                set(c"srch", i64::from(h)),
                set(c"src_format", from as i64),
                set(c"dstw", i64::from(w)),
                set(c"dsth", i64::from(h)),
                set(c"dst_format", to as i64),
                set(c"sws_flags", ff::ffi::SWS_BILINEAR as i64),
                set(c"threads", threads),
            ]
            .iter()
            .all(|r| *r >= 0);
            if !ok || ff::ffi::sws_init_context(ctx, std::ptr::null_mut(), std::ptr::null_mut()) < 0
            {
                ff::ffi::sws_freeContext(ctx);
                bail!("setting up the colour conversion for {w}x{h} frames");
            }
            Ok(Self(ctx))
        }
    }

    fn run(&mut self, from: &ff::frame::Video, to: &mut ff::frame::Video) -> Result<()> {
        // SAFETY: both frames are allocated with the size and formats this context was made
        // for; `sws_scale_frame` writes into `to`'s existing buffers.
        let r = unsafe { ff::ffi::sws_scale_frame(self.0, to.as_mut_ptr(), from.as_ptr()) };
        anyhow::ensure!(r >= 0, "converting a frame ({})", ff::Error::from(r));
        Ok(())
    }
}

impl Drop for Scaler {
    fn drop(&mut self) {
        // SAFETY: made by `sws_alloc_context` and initialised; freed once.
        unsafe { ff::ffi::sws_freeContext(self.0) }
    }
}

/// A video file being written.
pub struct AvFile {
    out: ff::format::context::Output,
    /// Read by the output's interrupt callback (a stream's): set, a blocked write gives up.
    /// Held here so that it outlives the context that points at it.
    _abort: Option<Arc<AtomicBool>>,
    /// An HLS output's files (`hls`): its muxer's callbacks point at them, so they outlive
    /// `out` (declared after it: dropped after it).
    hls: Option<Arc<super::hls::Files>>,
    encoder: ff::encoder::Video,
    stream: usize,
    pictures: Pictures,
    clock: Clock,
    audio: Option<super::audio::AudioCopy>,
    /// Each frame's quality (a fixed quantiser, in lambda units), where the codec takes one.
    quality: Option<i32>,
    /// Audio streams copied as they are (for the log; those encoded again said so).
    pub audio_kept: usize,
    trailer_written: bool,
    /// Seconds spent converting and encoding (and muxing), for `-v`.
    spent: [f64; 2],
}

/// The encoder's input picture, and what a frame's pixels go through to get into it.
struct Pictures {
    scaler: Scaler,
    bgr: ff::frame::Video,
    converted: ff::frame::Video,
    /// Motion JPEG: the frame in video-range YUV, before its range is widened to JPEG's.
    video_range: Option<ff::frame::Video>,
    /// The encoder's frame size (cropped to even where the codec needs it).
    size: FrameSize,
}

impl Pictures {
    /// Pictures of `w`×`h` in the encoder's `pixel`, reached from BGR through `via`.
    fn new(w: usize, h: usize, pixel: ff::format::Pixel, via: ff::format::Pixel) -> Result<Self> {
        let (cw, ch) = (w as u32, h as u32);
        Ok(Self {
            scaler: Scaler::new(cw, ch, ff::format::Pixel::BGR24, via)?,
            bgr: ff::frame::Video::new(ff::format::Pixel::BGR24, cw, ch),
            converted: ff::frame::Video::new(pixel, cw, ch),
            video_range: (via != pixel).then(|| ff::frame::Video::new(via, cw, ch)),
            size: FrameSize::new(w, h),
        })
    }

    /// Fills the encoder's picture from one packed frame of `size` in `format` (BGR,
    /// cropped to even where the codec needs it; or I420, as it is).
    fn fill(&mut self, frame: &[u8], format: PixelFormat, size: FrameSize) -> Result<()> {
        // The encoder may still hold the last frame (frame threads keep a reference to its
        // buffers): give it fresh ones rather than write over a frame being encoded.
        // SAFETY: `converted` is an allocated video frame; make_writable copies its buffers
        // when another reference to them exists, else leaves them.
        let writable = unsafe { ff::ffi::av_frame_make_writable(self.converted.as_mut_ptr()) };
        anyhow::ensure!(writable >= 0, "allocating a frame for the encoder");
        if format == PixelFormat::I420 {
            self.fill_i420(frame, size)
        } else {
            self.fill_bgr(frame, size)
        }
    }

    /// The planes as they are (video range), widened to full range for Motion JPEG.
    fn fill_i420(&mut self, frame: &[u8], size: FrameSize) -> Result<()> {
        let to = match &mut self.video_range {
            Some(mid) => mid,
            None => &mut self.converted,
        };
        crate::ensure_kept!(
            to.format() == ff::format::Pixel::YUV420P && size == self.size,
            "this encoder does not take {size} i420 frames"
        );
        let planes = crate::desc::Planes::packed(PixelFormat::I420, size);
        for (i, p) in planes.iter().enumerate() {
            let rows = size.height / p.rows_per;
            let dst_stride = to.stride(i);
            let data = to.data_mut(i);
            for y in 0..rows {
                let from = p.offset + y * p.pitch;
                data[y * dst_stride..y * dst_stride + p.pitch]
                    .copy_from_slice(&frame[from..from + p.pitch]);
            }
        }
        if let Some(mid) = &self.video_range {
            widen_range(mid, &mut self.converted);
        }
        Ok(())
    }

    /// BGR rows (the encoder's width of them) converted by libswscale.
    fn fill_bgr(&mut self, frame: &[u8], size: FrameSize) -> Result<()> {
        let stride = size.stride();
        let row = self.size.stride();
        let dst_stride = self.bgr.stride(0);
        let data = self.bgr.data_mut(0);
        for y in 0..self.size.height {
            data[y * dst_stride..y * dst_stride + row]
                .copy_from_slice(&frame[y * stride..y * stride + row]);
        }
        match &mut self.video_range {
            Some(mid) => {
                self.scaler.run(&self.bgr, mid)?;
                widen_range(mid, &mut self.converted);
            }
            None => self.scaler.run(&self.bgr, &mut self.converted)?,
        }
        Ok(())
    }
}

/// The video's timeline: each frame's timestamp in the encoder's time base, strictly after
/// the one before.
struct Clock {
    /// The encoder's time base: frames' timestamps count in it.
    tb: ff::Rational,
    /// One frame's duration at the rate, seconds.
    frame_s: f64,
    last_pts: Option<i64>,
    /// Frames stamped.
    index: i64,
    /// End of the last frame stamped, seconds.
    end: f64,
}

impl Clock {
    fn new(tb: ff::Rational, rate: ff::Rational) -> Self {
        let per_frame = rate.invert();
        Self {
            tb,
            frame_s: f64::from(per_frame.numerator()) / f64::from(per_frame.denominator()),
            last_pts: None,
            index: 0,
            end: 0.0,
        }
    }

    /// The timestamp of the next frame, shown at `at` seconds (None: the next frame at the
    /// rate), and that time in seconds.
    fn stamp(&mut self, at: Option<f64>) -> (i64, f64) {
        let t = at.unwrap_or(self.index as f64 * self.frame_s);
        let tick = f64::from(self.tb.numerator()) / f64::from(self.tb.denominator());
        let mut pts = (t / tick).round() as i64;
        if let Some(last) = self.last_pts.filter(|l| pts <= *l) {
            pts = last + 1;
        }
        self.last_pts = Some(pts);
        self.index += 1;
        self.end = pts as f64 * tick + self.frame_s;
        (pts, t)
    }
}

/// The timestamps' unit: the input's own time base, unless the codec or container can't
/// count in it (MPEG-4 Part 2 allows at most 65535 ticks a second; AVI counts frames), then
/// one tick a frame at `rate`.
fn time_base_for(
    timing: &Timing,
    rate: ff::Rational,
    codec: Codec,
    container: Container,
) -> ff::Rational {
    // MPEG-4 Part 2 counts at most 65535 ticks a second.
    let too_fine = |tb: ff::Rational| codec == Codec::Mpeg4 && tb.denominator() > 65_535;
    match timing.time_base.map(rational) {
        Some(tb) if !container.counts_frames() && !too_fine(tb) => tb,
        _ => rate.invert(),
    }
}

/// The encoder's options: `threads=auto` (every core, frame or slice threads, as ffmpeg
/// does), the codec's own (`encoder_for`), and a lookahead of `lookahead` frames for x264
/// and x265 where one is asked for.
/// The rate and keyframe flags of `encoding` on the encoder's context.
fn set_rate_control(ctx: &mut ff::encoder::video::Video, codec: Codec, encoding: &super::Encoding) {
    if let Some(b) = encoding.bitrate {
        ctx.set_bit_rate(b as usize);
    } else if encoding.crf.is_some() && codec == Codec::Vp9 {
        // libvpx is in constant-quality mode only with no target rate (ffmpeg's -b:v 0).
        ctx.set_bit_rate(0);
    }
    if let Some(m) = encoding.maxrate {
        ctx.set_max_bit_rate(m as usize);
    }
    if let Some(b) = encoding.bufsize {
        // SAFETY: the context is allocated and not yet opened; `rc_buffer_size` is a plain
        // int field that the encoder reads when it opens.
        unsafe { (*ctx.as_mut_ptr()).rc_buffer_size = b.min(i32::MAX as u64) as i32 };
    }
    if let Some(g) = encoding.gop {
        ctx.set_gop(g);
    }
}

/// Refuses a `--codec-opt`, `--preset` or `--tune` the encoder `name` does not have (FFmpeg
/// would drop it without a word).
fn refuse_unknown_options(
    ctx: &ff::encoder::video::Video,
    name: &str,
    encoding: &super::Encoding,
) -> Result<()> {
    let keys = encoding
        .opts
        .iter()
        .map(|(k, _)| k.as_str())
        .chain(encoding.preset.as_ref().map(|_| "preset"))
        .chain(encoding.tune.as_ref().map(|_| "tune"));
    for key in keys {
        let c_key = std::ffi::CString::new(key)?;
        // SAFETY: the context was allocated for this encoder (its private options are
        // there); av_opt_find only reads the option tables.
        let found = unsafe {
            ff::ffi::av_opt_find(
                ctx.as_ptr() as *mut std::ffi::c_void,
                c_key.as_ptr(),
                std::ptr::null(),
                0,
                ff::ffi::AV_OPT_SEARCH_CHILDREN,
            )
        };
        anyhow::ensure!(
            !found.is_null(),
            "--codec-opt {key}: the {name} encoder has no option '{key}' (ffmpeg -h encoder={name} lists them)"
        );
    }
    Ok(())
}

fn encoder_options(
    codec: Codec,
    options: &[(&'static str, String)],
    lookahead: Option<i64>,
) -> ff::Dictionary<'static> {
    let mut dict = ff::Dictionary::new();
    dict.set("threads", "auto");
    for (k, v) in options {
        match (codec, lookahead) {
            (Codec::Hevc, Some(n)) if *k == "x265-params" => {
                dict.set(k, &format!("{v}:rc-lookahead={n}"))
            }
            _ => dict.set(k, v),
        }
    }
    if let (Codec::H264, Some(n)) = (codec, lookahead) {
        dict.set("rc-lookahead", &n.to_string());
    }
    dict
}

/// The encoder's pixel format: its codec's, or the 4:2:2 or 4:4:4 `--pix-fmt` asks for.
fn pixel_asked(pixel: ff::format::Pixel, encoding: &super::Encoding) -> ff::format::Pixel {
    match encoding.pix_fmt {
        Some(super::encode::OutPixel::Yuv422p) => ff::format::Pixel::YUV422P,
        Some(super::encode::OutPixel::Yuv444p) => ff::format::Pixel::YUV444P,
        _ => pixel,
    }
}

/// Writes the container's header with its muxer's options: a stream's (which connects to
/// its peer), or a file's (fragmented where asked and the container can).
fn write_header(
    out: &mut ff::format::context::Output,
    container: Container,
    path: &str,
    fragmented: bool,
) -> Result<()> {
    let muxer = match container.is_stream() {
        true => stream_options(container, path)?,
        false => muxer_options(fragmented && container.fragments()),
    };
    out.write_header_with(muxer)
        .with_context(|| match container.is_network() {
            true => format!("connecting to '{path}'"),
            false => format!("writing the header of '{path}'"),
        })?;
    Ok(())
}

/// What a video encoder is opened for (`open_encoder`).
struct EncoderSetup {
    found: ff::Codec,
    name: &'static str,
    codec: Codec,
    pixel: ff::format::Pixel,
    size: (usize, usize),
    tb: ff::Rational,
    rate: ff::Rational,
    /// The container wants the codec's headers out of band.
    global_header: bool,
    /// Written in fragments that survive a crash: a short lookahead.
    fragmented: bool,
    /// A stream out: the live encoder defaults.
    live: bool,
}

/// The encoder picked for a codec: libavcodec's, its name, and the pixel format it is given.
struct Picked {
    found: ff::Codec,
    name: &'static str,
    pixel: ff::format::Pixel,
}

impl EncoderSetup {
    /// The `picked` encoder as `settings` and the opened `out` say: its size (even where the
    /// codec needs it), time base and rate, and how the container holds it.
    fn of(
        settings: &Settings,
        picked: Picked,
        out: &ff::format::context::Output,
        container: Container,
    ) -> Self {
        let (codec, size, timing) = (settings.codec, settings.size, &settings.timing);
        let rate = rational(
            timing
                .rate
                .unwrap_or_else(|| crate::frame::ratio_of(crate::frame::DEFAULT_FPS)),
        );
        let global_header = out
            .format()
            .flags()
            .contains(ff::format::Flags::GLOBAL_HEADER);
        let size = if needs_even_size(codec) {
            (size.width & !1, size.height & !1)
        } else {
            (size.width, size.height)
        };
        Self {
            found: picked.found,
            name: picked.name,
            codec,
            pixel: picked.pixel,
            size,
            tb: time_base_for(timing, rate, codec, container),
            rate,
            global_header,
            // A recording that must survive a crash keeps its encoder's delay short too:
            // the frames inside the lookahead are lost with the process.
            fragmented: settings.fragmented && container.fragments(),
            live: container.is_stream(),
        }
    }
}

/// Opens the encoder `setup` describes with the quality and encoder flags asked for (a
/// flag the encoder does not know is refused); the fixed quantiser's lambda, where one is.
fn open_encoder(
    setup: &EncoderSetup,
    quality: Option<u8>,
    encoding: &super::Encoding,
    options: &[(&'static str, String)],
) -> Result<(ff::encoder::Video, Option<i32>)> {
    let (codec, (w, h)) = (setup.codec, setup.size);
    let mut ctx = ff::codec::context::Context::new_with_codec(setup.found)
        .encoder()
        .video()?;
    ctx.set_width(w as u32);
    ctx.set_height(h as u32);
    ctx.set_format(setup.pixel);
    ctx.set_time_base(setup.tb);
    ctx.set_frame_rate(Some(setup.rate));
    if codec == Codec::Mjpeg {
        ctx.set_color_range(ff::color::Range::JPEG);
    }
    let mut flags = ff::codec::Flags::empty();
    if setup.global_header {
        flags |= ff::codec::Flags::GLOBAL_HEADER;
    }
    let fixed = qscale(codec, quality).map(|q| q * ff::ffi::FF_QP2LAMBDA);
    if let Some(q) = fixed {
        flags |= ff::codec::Flags::QSCALE;
        ctx.set_global_quality(q);
    }
    ctx.set_flags(flags);
    set_rate_control(&mut ctx, codec, encoding);
    refuse_unknown_options(&ctx, setup.name, encoding)?;
    let fps = f64::from(setup.rate.numerator()) / f64::from(setup.rate.denominator());
    let lookahead = setup
        .fragmented
        .then(|| ((fps * FRAGMENT_SECONDS / 2.0).round() as i64).clamp(1, 40));
    let mut dict = encoder_options(codec, options, lookahead);
    if setup.live {
        live_defaults(&mut ctx, &mut dict, codec, encoding, fps);
    }
    if let Some(crf) = encoding.crf {
        dict.set("crf", &crf.to_string());
    }
    for (k, v) in [("preset", &encoding.preset), ("tune", &encoding.tune)] {
        if let Some(v) = v {
            dict.set(k, v);
        }
    }
    for (k, v) in &encoding.opts {
        dict.set(k, v);
    }
    let encoder = ctx
        .open_as_with(setup.found, dict)
        .with_context(|| format!("opening the {} encoder for {w}x{h} frames", setup.name))?;
    Ok((encoder, fixed))
}

/// The muxer's options: an MP4/MOV in fragments of at most `FRAGMENT_SECONDS` where
/// `fragmented`, else none.
pub(super) fn muxer_options(fragmented: bool) -> ff::Dictionary<'static> {
    let mut muxer = ff::Dictionary::new();
    if fragmented {
        // Fragments at every keyframe and at least every FRAGMENT_SECONDS, each one
        // self-contained: a file cut anywhere plays up to its last whole fragment.
        muxer.set("movflags", "frag_keyframe+empty_moov+default_base_moof");
        muxer.set(
            "frag_duration",
            &format!("{}", (FRAGMENT_SECONDS * 1e6) as i64),
        );
        // Each fragment reaches the file when it is cut, not when libavformat's buffer
        // fills (a small frame size would keep seconds of fragments in memory).
        muxer.set("flush_packets", "1");
    }
    muxer
}

/// FFmpeg's interrupt callback of a stream's output: `opaque` is its abort flag.
unsafe extern "C" fn aborted(opaque: *mut std::ffi::c_void) -> std::ffi::c_int {
    // SAFETY: `opaque` is `Arc::as_ptr` of the flag the `AvFile` holds for as long as the
    // context lives (`_abort`).
    let flag = unsafe { &*(opaque as *const AtomicBool) };
    std::ffi::c_int::from(flag.load(Ordering::SeqCst))
}

/// The output context of `path`: its muxer named by `container` where the path alone does
/// not say (a URL), its byte stream opened with `options` unless the muxer opens its own
/// connections or files (RTSP, HLS), and `abort` (where given) read by its interrupt
/// callback.
pub(super) fn open_output(
    path: &str,
    container: Container,
    abort: Option<&Arc<AtomicBool>>,
    options: ff::Dictionary,
) -> Result<ff::format::context::Output> {
    let c_path = std::ffi::CString::new(path).context("the output's name holds a NUL byte")?;
    let muxer = container
        .muxer()
        .map(|m| std::ffi::CString::new(m).expect("muxer names have no NUL"));
    // SAFETY: the context is allocated by avformat_alloc_output_context2 and wrapped at once
    // (`Output` frees it, and closes its byte stream, when dropped, also on the error paths
    // below); the callback reads the flag `abort` points at, which the caller keeps alive
    // as long as the context; the dictionary is owned again after avio_open2, whatever it
    // returned.
    unsafe {
        let mut ps = std::ptr::null_mut();
        let r = ff::ffi::avformat_alloc_output_context2(
            &mut ps,
            std::ptr::null_mut(),
            muxer.as_ref().map_or(std::ptr::null(), |m| m.as_ptr()),
            c_path.as_ptr(),
        );
        if r < 0 || ps.is_null() {
            return Err(anyhow::Error::new(ff::Error::from(r)))
                .with_context(|| format!("'{path}': no muxer for it"));
        }
        if let Some(flag) = abort {
            (*ps).interrupt_callback = ff::ffi::AVIOInterruptCB {
                callback: Some(aborted),
                opaque: Arc::as_ptr(flag) as *mut std::ffi::c_void,
            };
        }
        let out = ff::format::context::Output::wrap(ps);
        if (*(*ps).oformat).flags & ff::ffi::AVFMT_NOFILE == 0 {
            let mut opts = options.disown();
            let r = ff::ffi::avio_open2(
                &mut (*ps).pb,
                c_path.as_ptr(),
                ff::ffi::AVIO_FLAG_WRITE,
                &(*ps).interrupt_callback,
                &mut opts,
            );
            ff::Dictionary::own(opts);
            if r < 0 {
                return Err(anyhow::Error::new(ff::Error::from(r)))
                    .with_context(|| format!("opening '{path}' for writing"));
            }
        }
        Ok(out)
    }
}

/// `open_output`, and for HLS the files its muxer opens through `hls` (kept beside the
/// context in the `AvFile`, which drops them after it).
fn open_output_files(
    path: &str,
    container: Container,
    abort: Option<&Arc<AtomicBool>>,
) -> Result<(ff::format::context::Output, Option<Arc<super::hls::Files>>)> {
    let mut out = open_output(path, container, abort, protocol_options(path))?;
    if container != Container::Hls {
        return Ok((out, None));
    }
    let names = super::hls::Names::new(path)?;
    let files = Arc::new(super::hls::Files::new(names));
    // SAFETY: `out` is live; `files` is returned beside it, and the caller keeps it for as
    // long as the context (the AvFile drops it after `out`).
    unsafe { super::hls::install(out.as_mut_ptr(), Arc::as_ptr(&files)) };
    Ok((out, Some(files)))
}

/// A stream's encoder settings where the flags leave them: a keyframe every second, no
/// B-frames (nothing held back), and for H.264/HEVC the `veryfast` preset with the
/// `zerolatency` tune (what `ffmpeg` users pass for live streaming).
fn live_defaults(
    ctx: &mut ff::encoder::video::Video,
    dict: &mut ff::Dictionary,
    codec: Codec,
    encoding: &super::Encoding,
    fps: f64,
) {
    if encoding.gop.is_none() {
        ctx.set_gop(fps.round().clamp(1.0, 600.0) as u32);
    }
    if !encoding.opts.iter().any(|(k, _)| k == "bf") {
        ctx.set_max_b_frames(0);
    }
    if matches!(codec, Codec::H264 | Codec::Hevc) {
        if encoding.preset.is_none() {
            dict.set("preset", "veryfast");
        }
        if encoding.tune.is_none() {
            dict.set("tune", "zerolatency");
        }
    }
}

/// The muxer's options of a stream: packets sent as they come; HLS's rolling segments
/// (`HLS_SEGMENT_SECONDS` each, named as `hls::Names` says, the last `HLS_SEGMENTS` in the
/// playlist, older ones deleted, every file written under a temporary name and renamed);
/// RTSP over TCP.
pub(super) fn stream_options(container: Container, path: &str) -> Result<ff::Dictionary<'static>> {
    let mut d = ff::Dictionary::new();
    d.set("flush_packets", "1");
    match container {
        Container::Hls => {
            let names = super::hls::Names::new(path)?;
            d.set("hls_segment_filename", &names.segment_pattern());
            d.set("hls_time", &HLS_SEGMENT_SECONDS.to_string());
            d.set("hls_list_size", &HLS_SEGMENTS.to_string());
            d.set(
                "hls_flags",
                "delete_segments+temp_file+independent_segments",
            );
        }
        Container::Rtsp => d.set("rtsp_transport", "tcp"),
        Container::Flv => d.set("flvflags", "no_duration_filesize"),
        _ => {}
    }
    Ok(d)
}

/// The network protocol's options: SRT waits up to a second at the end for what it has not
/// yet delivered (it drops it otherwise); an RTMP peer that takes nothing for
/// `STALLED_PEER_US` is taken as gone. Options in the URL itself win.
pub(super) fn protocol_options(path: &str) -> ff::Dictionary<'static> {
    let mut d = ff::Dictionary::new();
    let lower = path.to_ascii_lowercase();
    if lower.starts_with("srt://") && !lower.contains("linger=") {
        d.set("linger", "1");
    }
    if lower.starts_with("rtmp") {
        d.set("rw_timeout", &STALLED_PEER_US.to_string());
    }
    d
}

/// How long a network peer may take nothing before it is taken as gone, microseconds.
const STALLED_PEER_US: i64 = 5_000_000;

/// Seconds of video in each HLS segment.
pub const HLS_SEGMENT_SECONDS: u32 = 2;
/// Segments an HLS playlist lists (older ones are deleted).
pub const HLS_SEGMENTS: u32 = 6;

/// What a video output is asked to write, decided before it opens and never changed by
/// writing (gst-plugins-rs's `Settings`); `AvFile` is the run-time state opened from it.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The file's path, or the stream's URL: its container from its extension or scheme.
    pub path: String,
    /// What its frames are compressed with.
    pub codec: Codec,
    /// Motion JPEG's quality (1–100), where asked for.
    pub quality: Option<u8>,
    /// The encoder's flags (`--crf`, `--bitrate`, …).
    pub encoding: super::Encoding,
    /// The frames' size.
    pub size: FrameSize,
    /// Their rate and time base, and the input's audio to copy.
    pub timing: Timing,
    /// An MP4/MOV is written in fragments.
    pub fragmented: bool,
}

impl AvFile {
    /// Opens the stream `settings` names (its container from its URL); its blocked writes
    /// give up once `abort` is set.
    pub fn open_stream(settings: &Settings, abort: Arc<AtomicBool>) -> Result<Self> {
        Self::open_with(settings, Some(abort))
    }

    /// Opens the file `settings` names (its container from its extension).
    pub fn open(settings: &Settings) -> Result<Self> {
        Self::open_with(settings, None)
    }

    fn open_with(settings: &Settings, abort: Option<Arc<AtomicBool>>) -> Result<Self> {
        let (path, codec) = (settings.path.as_str(), settings.codec);
        media::init();
        let (name, pixel, options) = encoder_for(codec);
        let pixel = pixel_asked(pixel, &settings.encoding);
        let found = ff::encoder::find_by_name(name)
            .with_context(|| format!("this FFmpeg has no {name} encoder for {}", codec.name()))?;
        let container = Container::of_path(path)
            .with_context(|| format!("'{path}' does not end in a video container's extension"))?;
        let (mut out, hls) = open_output_files(path, container, abort.as_ref())?;
        let picked = Picked { found, name, pixel };
        let setup = EncoderSetup::of(settings, picked, &out, container);
        let (encoder, fixed) =
            open_encoder(&setup, settings.quality, &settings.encoding, &options)?;
        let stream = {
            let mut st = out.add_stream(found)?;
            st.set_parameters(&encoder);
            st.set_time_base(setup.tb);
            st.set_avg_frame_rate(setup.rate);
            st.index()
        };
        let (audio, audio_kept) = match &settings.timing.audio {
            Some(audio) => super::audio::copy(&mut out, audio, container, path)?,
            None => (None, 0),
        };
        write_header(&mut out, container, path, settings.fragmented)?;
        // JPEG's full-range YUV has no fast conversion from BGR in libswscale (9 ms a 1080p
        // frame, against 1.8 for video range): Motion JPEG goes through video range and a
        // table, the way ffmpeg itself gets there from a decoder's YUV.
        let via = if pixel == ff::format::Pixel::YUVJ420P {
            ff::format::Pixel::YUV420P
        } else {
            pixel
        };
        let (w, h) = setup.size;
        Ok(Self {
            out,
            _abort: abort,
            hls,
            encoder,
            stream,
            pictures: Pictures::new(w, h, pixel, via)?,
            clock: Clock::new(setup.tb, setup.rate),
            audio,
            quality: fixed,
            audio_kept,
            trailer_written: false,
            spent: [0.0; 2],
        })
    }

    /// Encodes one packed frame of `size` in `format` (BGR, cropped to even where the codec
    /// needs it; or I420, handed to a 4:2:0 encoder as it is, with no conversion), shown at
    /// `at` seconds on the output's timeline (None: the next frame at the rate).
    pub fn write(
        &mut self,
        frame: &[u8],
        format: PixelFormat,
        size: FrameSize,
        at: Option<f64>,
    ) -> Result<()> {
        let t0 = std::time::Instant::now();
        self.pictures.fill(frame, format, size)?;
        self.spent[0] += t0.elapsed().as_secs_f64();
        let (pts, t) = self.clock.stamp(at);
        let converted = &mut self.pictures.converted;
        converted.set_pts(Some(pts));
        if let Some(q) = self.quality {
            // SAFETY: `converted` is an allocated frame; `quality` is a plain field that the
            // MPEG-family encoders read as the frame's quantiser (as `ffmpeg -q:v` sets it).
            unsafe { (*converted.as_mut_ptr()).quality = q };
        }
        let t1 = std::time::Instant::now();
        self.encoder
            .send_frame(&self.pictures.converted)
            .context("encoding a frame")?;
        self.drain()?;
        self.spent[1] += t1.elapsed().as_secs_f64();
        if let Some(a) = &mut self.audio {
            a.pump(&mut self.out, t)?;
        }
        Ok(())
    }

    fn drain(&mut self) -> Result<()> {
        let mut packet = ff::Packet::empty();
        let out_tb = self
            .out
            .stream(self.stream)
            .context("video stream")?
            .time_base();
        while self.encoder.receive_packet(&mut packet).is_ok() {
            packet.set_stream(self.stream);
            packet.rescale_ts(self.clock.tb, out_tb);
            packet
                .write_interleaved(&mut self.out)
                .context("writing a video packet")?;
        }
        Ok(())
    }

    /// Lets go of the input's audio before `t` seconds (output timeline): a stream
    /// connected again starts its sound with its first frame.
    pub fn skip_audio_before(&mut self, t: f64) {
        if let Some(a) = &mut self.audio {
            a.skip_before(t);
        }
    }

    /// An HLS output's files, where this is one.
    pub fn hls(&self) -> Option<Arc<super::hls::Files>> {
        self.hls.clone()
    }

    /// Flushes the encoder, writes the audio up to the last frame's end, and the trailer.
    pub fn finish(&mut self) -> Result<()> {
        if self.trailer_written {
            return Ok(());
        }
        self.trailer_written = true;
        self.encoder.send_eof().context("flushing the encoder")?;
        self.drain()?;
        if let Some(a) = &mut self.audio {
            a.pump(&mut self.out, self.clock.end)?;
            a.finish(&mut self.out)?;
        }
        let per = |s: f64| 1e3 * s / self.clock.index.max(1) as f64;
        crate::debug!(
            "writer: per frame {:.2} ms converting BGR to {:?}, {:.2} ms encoding and muxing",
            per(self.spent[0]),
            self.pictures.converted.format(),
            per(self.spent[1])
        );
        // ffmpeg-next calls any non-zero result an error, but a fragmented MP4's trailer
        // (its `mfra` index) returns the bytes it wrote: only a negative one is an error.
        // SAFETY: `out` is an open output context whose header was written; the trailer is
        // written once (`trailer_written`).
        let r = unsafe { ff::ffi::av_write_trailer(self.out.as_mut_ptr()) };
        if r < 0 {
            return Err(anyhow::Error::new(ff::Error::from(r)).context("writing the file's index"));
        }
        Ok(())
    }
}

/// Widens a 4:2:0 frame from video range (Y 16-235, chroma 16-240) to JPEG's full range,
/// plane by plane through a table (what libswscale does for ffmpeg's own Motion JPEG).
fn widen_range(from: &ff::frame::Video, to: &mut ff::frame::Video) {
    fn table(lo: f64, span: f64, mid: Option<f64>) -> [u8; 256] {
        let mut t = [0u8; 256];
        for (v, out) in t.iter_mut().enumerate() {
            let x = match mid {
                Some(m) => (v as f64 - m) * 255.0 / span + m,
                None => (v as f64 - lo) * 255.0 / span,
            };
            *out = x.round().clamp(0.0, 255.0) as u8;
        }
        t
    }
    let luma = table(16.0, 219.0, None);
    let chroma = table(16.0, 224.0, Some(128.0));
    for plane in 0..3 {
        let t = if plane == 0 { &luma } else { &chroma };
        let (w, h) = (
            from.plane_width(plane) as usize,
            from.plane_height(plane) as usize,
        );
        let (si, di) = (from.stride(plane), to.stride(plane));
        let src = from.data(plane);
        let dst = to.data_mut(plane);
        for y in 0..h {
            let (s, d) = (&src[y * si..y * si + w], &mut dst[y * di..y * di + w]);
            d.iter_mut()
                .zip(s)
                .for_each(|(d, s)| *d = t[usize::from(*s)]);
        }
    }
}
