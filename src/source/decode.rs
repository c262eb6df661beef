//! Video files and network streams decoded with FFmpeg's own libraries (libavformat,
//! libavcodec), frames kept in the decoder's layout: a 4:2:0, 4:2:2, 4:4:4, NV12, gray or
//! BGR picture is copied plane by plane into the ring slot as it came (one copy, no colour
//! conversion on the CPU), and the backend converts it. The decoder decodes into buffers of
//! its own (`pinned.rs`; page-locked with the CUDA backend) and an upright YUV or gray
//! picture is lent to the slot as it lies, not copied (`Source::lent`, `Memory::HostLent`).
//! This is `--decode cpu`, the default for files and for URLs that are not GStreamer
//! pipelines; `--decode opencv` keeps OpenCV's
//! capture (`capture.rs`), which converts every frame to BGR on the CPU; `--decode gpu`
//! gives the decoder NVDEC where it can (`nvdec.rs`), and its pictures then stay in device
//! memory for the CUDA backend (lent to the slot: `Source::lent`). It needs FFmpeg's
//! libraries alone (the `ffmpeg` feature), so the GPU machine's build, which has no OpenCV,
//! decodes files with it too (`ffmpeg-static`, `scripts/gpu.sh bundle`).
//!
//! Invariants:
//! - every decoded frame is handed out, in decoding order, none dropped or repeated for a
//!   file; packets the decoder refuses (a damaged file) are counted and skipped, as ffmpeg
//!   skips them, and the decoder is drained at the end of the input;
//! - a frame's time is its own timestamp (best effort, as ffmpeg's), in the stream's time
//!   base, from the start of the file (where its audio is): exact, never rounded through
//!   milliseconds (`Timestamp`);
//! - every frame has the first frame's size and format; a change is an error naming the frame
//!   (framepipe carries one size per input), never a misread frame;
//! - a picture framepipe can't carry as it is (10-bit, RGB, palette, odd sizes of subsampled
//!   chroma) is converted to BGR with libswscale, and the run says so once;
//! - frames are turned upright by the display matrix, as ffmpeg does (planes turned one by
//!   one, or the BGR picture where the layout can't be turned plane by plane);
//! - a network read never blocks a stop: FFmpeg's interrupt callback reads the process's
//!   stop flag, and a silent server is given up after `media::URL_TIMEOUT_US`, whatever its
//!   protocol (`Silence`), once what the demuxer and decoder hold is handed over;
//! - after a stop, a live input hands over the frames it still holds (`begin_drain`: the
//!   demuxer's last packet, the decoder's delay) without waiting for more; where it was
//!   still sending, what the interrupted demuxer flushes was cut short and is left out
//!   (`Drain`): no output or recording ends on a broken picture;
//! - a file whose packets alone are wanted (`--codec copy` to files, nothing showing or
//!   writing pictures: `Asked::packets_only`) decodes its first picture only (its size),
//!   hands every packet to its taps in one read, and ends there at a stop, as ffmpeg's
//!   `-c copy` reads.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use ffmpeg_next as ff;

use super::Pictures;
use super::{PictureTags, Range, Read, Siting, Source};
use crate::desc::{Planes, Timestamp};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// How a decoded picture becomes the slot's frame.
enum Conversion {
    /// Its planes, copied (and turned by `turns` quarter turns clockwise).
    Planes { turns: u32 },
    /// Converted to BGR by libswscale (then turned).
    Scaled {
        scaler: ff::software::scaling::Context,
        bgr: ff::frame::Video,
        turns: u32,
    },
}

// SAFETY: the scaler context is used only by the source that owns it, on one thread at a
// time (`Source: Send`, moved to the capture thread whole).
unsafe impl Send for Conversion {}

/// A video file or network stream decoded by libavcodec (module doc).
pub struct Decoded {
    /// What the stream is, as it opened (fixed from then on).
    facts: Facts,
    input: ff::format::context::Input,
    decoder: ff::decoder::Video,
    /// The decoded picture, reused.
    picture: ff::frame::Video,
    packet: ff::Packet,
    /// The decoder was told the input ended.
    drained: bool,
    /// The frame as handed out (upright).
    size: FrameSize,
    format: PixelFormat,
    /// The decoder's own picture: size and format, which every frame must keep.
    coded: (u32, u32, ff::format::Pixel),
    conversion: Conversion,
    /// How the frames are timed as they are read.
    clock: Clock,
    /// Packets the decoder refused (a damaged file).
    refused: u64,
    /// NVDEC, where `--decode gpu` and it could be given to the decoder.
    nvdec: Option<super::nvdec::Nvdec>,
    /// The CPU decoder's pictures in buffers of its own pool, where the backend takes them
    /// from there (`Asked::pictures`; declared after the decoder, which calls into it).
    pinned: Option<super::pinned::PinnedPictures>,
    /// The last picture, where it was left in device memory for the slot (`Nvdec::lend`), or
    /// in a buffer of the pool (`PinnedPictures::lend`).
    lent: Option<(crate::desc::Memory, crate::desc::Planes)>,
    /// What a Y4M output says of the pictures, as ffmpeg's `yuv4mpegpipe` says it.
    tags: PictureTags,
    /// Where the packets go as they are read (`--record`).
    tapped: Tapped,
    /// Packets go to the taps alone, none to the decoder (`Asked::packets_only`).
    packets_only: bool,
    /// A network input's wait for data, read by the demuxer's interrupt callback (boxed:
    /// its address is the callback's; declared after `input`, so it outlives it).
    silence: Box<Silence>,
    /// Why the input failed once its last frames are out (it went silent).
    ended_by: Option<String>,
    /// Whether a stop's drain takes the packets the demuxer flushes (`Drain`).
    drain: Drain,
}

/// A live input's drain after a stop: the demuxer, interrupted, flushes the pictures (and
/// sound) it was assembling, one packet a read. Where the input was still sending when the
/// stop came, those were cut short (a corrupt last frame in the recording and the outputs):
/// the input ends at the last packet read before the stop, and the drain only takes the
/// decoder's delayed pictures. Where the sender had gone quiet, the flushed packets are
/// whole (the camera's last picture) and go on.
#[derive(Default)]
struct Drain {
    /// When the last packet was read before the stop.
    last_read: Option<Instant>,
    /// Whether the input was still sending when the stop came (decided at the first packet
    /// read after it, or as the drain begins).
    flowing: Option<bool>,
}

impl Drain {
    /// Whether the input was still sending when the stop came: a packet read within
    /// `STILL_SENDING` of it.
    fn flowing(&mut self) -> bool {
        let last = self.last_read;
        *self
            .flowing
            .get_or_insert_with(|| last.is_some_and(|t| t.elapsed() < STILL_SENDING))
    }
}

/// How recently a packet must have come, at a stop, for the input to count as still sending.
const STILL_SENDING: Duration = Duration::from_millis(500);

/// Where a decoded input's packets go once read (`tap`): to every tap attached, and, while
/// the input opens (until the first frame is read), kept (up to `HELD_PACKETS`), so that
/// each tap attached before the run reads gets the packets of the first picture (a
/// recording starts at it; a file output's audio copy misses none).
struct Tapped {
    taps: Vec<crate::media::tap::Tap>,
    held: Option<Vec<ff::Packet>>,
}

/// The most packets kept while opening for a tap not yet attached.
const HELD_PACKETS: usize = 512;

/// How long, in all, a live stream may wait for the pipeline before it drops frames
/// (`Source::burst_budget`): a burst of a second (the frames buffered while a camera of a
/// large wall was probed, decoded at once as it joins) passes whole; FFmpeg's buffers
/// keep the packets that arrive meanwhile (a UDP input's fifo, TCP's window, SRT's own).
const BURST_BUDGET: Duration = Duration::from_secs(1);

/// The same for RTSP and RTP, whose packets may come over UDP with no fifo of FFmpeg's: a
/// socket's receive buffer holds a few tenths of a second of a camera's stream.
const SOCKET_BURST_BUDGET: Duration = Duration::from_millis(250);

/// A live stream's patience (`BURST_BUDGET`), by its protocol; none for a file.
fn burst_budget_of(url: &str, live: bool) -> Duration {
    let scheme = url
        .split("://")
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match (live, scheme.as_str()) {
        (false, _) => Duration::ZERO,
        (true, "rtsp" | "rtsps" | "rtp") => SOCKET_BURST_BUDGET,
        (true, _) => BURST_BUDGET,
    }
}

impl Tapped {
    fn new() -> Self {
        Self {
            taps: Vec::new(),
            held: Some(Vec::new()),
        }
    }

    fn take(&mut self, packet: ff::Packet) {
        let held = self.held.as_mut().filter(|h| h.len() < HELD_PACKETS);
        let Some((last, others)) = self.taps.split_last() else {
            // No tap yet: the packet itself is kept, no copy.
            if let Some(held) = held {
                held.push(packet);
            }
            return;
        };
        if let Some(held) = held {
            held.push(packet.clone());
        }
        others.iter().for_each(|t| t.packet(packet.clone()));
        last.packet(packet);
    }

    /// `tap` from now on, given first what was held while opening.
    fn attach(
        &mut self,
        input: &ff::format::context::Input,
        video: usize,
        from: f64,
        tap: crate::media::tap::Tap,
    ) {
        tap.open(input, video, from);
        for p in self.held.iter().flatten() {
            tap.packet(p.clone());
        }
        self.taps.push(tap);
    }

    /// Frames are read: the packets held while opening are let go.
    fn stop_holding(&mut self) {
        self.held = None;
    }
}

/// What an opened stream is, read from its header once (the source's settings: reading
/// frames never changes them).
struct Facts {
    /// "video file 'clip.mp4'", "stream 'udp://…'".
    what: String,
    /// The video stream's index.
    stream: usize,
    time_base: ff::Rational,
    /// The file's start, in ticks of `time_base`: frame times count from there.
    start: i64,
    /// `--ss` and the end of `--to`/`-t`, ticks from `start`: frames before the first are
    /// dropped, the read ends at the second; the frames' times count from the first.
    trim: (i64, Option<i64>),
    /// The stream's rate was absurd: its timestamps are not taken (`MediaInfo::untimed`).
    untimed: bool,
    fps: Option<f64>,
    frame_count: Option<u64>,
    live: bool,
    /// How long, in all, it may wait for the pipeline past a frame's time (live streams).
    patience: Duration,
    /// What the demuxer read of a file's header (None for a live stream).
    media: Option<crate::media::info::MediaInfo>,
}

/// How a stream's frames are timed as they are read (run-time state).
struct Clock {
    /// Times kept going forward across a jump back (joined files).
    continuity: super::continuity::Continuity,
    /// A live stream's clock (its frames are timed by arrival, as the OpenCV path does).
    live_start: Option<Instant>,
    /// Playing a file at its own times (a window run).
    pace: Option<super::Pace>,
    /// The last frame's time, and the one before it (seconds, for pacing).
    pts: Option<Timestamp>,
    prev_seconds: Option<f64>,
    /// Frames handed out.
    frames: u64,
    /// The end of `--to`/`-t` was reached.
    past_end: bool,
}

impl Clock {
    /// A clock at the start: nothing handed out, times kept by `continuity`, paced where
    /// `pace` says.
    fn new(continuity: super::continuity::Continuity, pace: Option<super::Pace>) -> Self {
        Self {
            continuity,
            live_start: None,
            pace,
            pts: None,
            prev_seconds: None,
            frames: 0,
            past_end: false,
        }
    }
}

/// The first picture's aspect ratio (the stream's where it gives one, as ffmpeg takes it;
/// 0:0 unknown), interlacing, chroma siting and range, for a Y4M output; a picture turned a
/// quarter has its aspect ratio turned too.
fn tags_of(p: &ff::frame::Video, stream_sar: (i32, i32), rotation: u32) -> PictureTags {
    use ff::util::chroma::Location;
    let frame_sar = p.aspect_ratio();
    let (n, d) = match stream_sar {
        (n, d) if n > 0 && d > 0 => (n, d),
        _ => (frame_sar.numerator(), frame_sar.denominator()),
    };
    let aspect = match (u32::try_from(n), u32::try_from(d)) {
        (Ok(n), Ok(d)) if n > 0 && d > 0 => (n, d),
        _ => (0, 0),
    };
    PictureTags {
        aspect: if rotation % 180 == 90 {
            (aspect.1, aspect.0)
        } else {
            aspect
        },
        interlace: match (p.is_interlaced(), p.is_top_first()) {
            (false, _) => 'p',
            (true, true) => 't',
            (true, false) => 'b',
        },
        chroma: match p.chroma_location() {
            Location::Left => Siting::Left,
            Location::TopLeft => Siting::TopLeft,
            _ => Siting::Center,
        },
        range: match p.color_range() {
            ff::util::color::Range::MPEG => Some(Range::Limited),
            ff::util::color::Range::JPEG => Some(Range::Full),
            _ => None,
        },
    }
}

/// Whether a decoder is given NVDEC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum WithNvdec {
    /// No: the CPU decodes (`--decode cpu`).
    #[default]
    No,
    /// Where it can (`--decode gpu`).
    Yes,
    /// Where it can and decodes faster than this machine's cores would, with the CUDA
    /// backend (`--decode auto`; `nvdec::prefers`).
    WhereFaster,
}

/// What opening asks for.
#[derive(Clone, Copy, Debug, Default)]
pub struct Asked {
    /// Hand a file's frames out at its own rate (window runs).
    pub pace: bool,
    /// The frames pass untouched to an output of their own format (`--filter copy` to a
    /// raw pipe): full-range (JPEG) YUV is then carried as decoded, bit for bit, since
    /// nothing converts it.
    pub untouched: bool,
    /// Whether the decoder is given NVDEC (`nvdec.rs`).
    pub nvdec: WithNvdec,
    /// NVDEC's pictures may stay in device memory, lent to the slot (the run's backend is
    /// CUDA's, which copies its bands from there).
    pub on_device: bool,
    /// Where the CPU decoder's pictures are decoded: into a pool of its own and lent to the
    /// slot as they are (`pinned.rs`; page-locked where the run's backend may be CUDA's,
    /// which copies its bands up from there), or into FFmpeg's buffers and copied.
    pub pictures: Pictures,
    /// The part of the input read (`--ss`, `--to`, `-t`).
    pub trim: super::Trim,
    /// Only the packets are wanted (`--codec copy` to files alone): past the first picture
    /// (its size), packets go to the taps and none to the decoder.
    pub packets_only: bool,
}

/// FFmpeg's interrupt callback: a blocked open or read gives up once a stop was asked for,
/// or, for a network input, once it has waited `URL_TIMEOUT_US` for its data (`Silence`).
unsafe extern "C" fn interrupted(silence: *mut std::ffi::c_void) -> std::ffi::c_int {
    if crate::stop::Stop::process().is_requested() {
        return 1;
    }
    // SAFETY: a non-null opaque is the input's `Silence`, boxed by its `Decoded` (or by
    // `open_demuxer` while it opens), which outlives the demuxer that calls this.
    let silence = unsafe { (silence as *const Silence).as_ref() };
    let give_up = silence.is_some_and(|s| s.draining.load(Ordering::Relaxed) || s.passed());
    std::ffi::c_int::from(give_up)
}

/// How long a network input's open or read may wait for data before it is given up
/// (`URL_TIMEOUT_US`), kept here for every protocol: FFmpeg's own time-outs miss some (a
/// UDP or RTP input with no sender waited for ever).
#[derive(Debug, Default)]
pub(crate) struct Silence {
    /// When the wait under way ends (µs since the process started; 0: no wait).
    deadline_us: std::sync::atomic::AtomicI64,
    /// A wait ended for want of data.
    expired: std::sync::atomic::AtomicBool,
    /// Draining after a stop (`Source::begin_drain`): no read waits for more input.
    draining: std::sync::atomic::AtomicBool,
}

impl Silence {
    fn now_us() -> i64 {
        crate::stop::process_start().elapsed().as_micros() as i64
    }

    /// A wait for data starts now.
    fn start(&self) {
        let deadline = Self::now_us() + crate::media::info::URL_TIMEOUT_US;
        self.deadline_us.store(deadline, Ordering::Relaxed);
    }

    /// Whether the wait under way has lasted too long (noted, for the error's words).
    fn passed(&self) -> bool {
        let deadline = self.deadline_us.load(Ordering::Relaxed);
        let passed = deadline > 0 && Self::now_us() > deadline;
        if passed {
            self.expired.store(true, Ordering::Relaxed);
        }
        passed
    }

    /// Whether a wait was given up for want of data.
    fn expired(&self) -> bool {
        self.expired.load(Ordering::Relaxed)
    }
}

/// The words for a network input that sent nothing for `URL_TIMEOUT_US`.
fn silent_for() -> String {
    format!(
        "timed out: nothing came for {} s (is the server up, and sending?)",
        crate::media::info::URL_TIMEOUT_US / 1_000_000
    )
}

/// Opens `url` (a path or a network address) with `options`, its interrupt callback set
/// before the first byte is read.
fn open_input(
    url: &str,
    options: ff::Dictionary,
    silence: Option<&Silence>,
) -> Result<ff::format::context::Input, ff::Error> {
    let c_url = std::ffi::CString::new(url).map_err(|_| ff::Error::InvalidData)?;
    // SAFETY: the context is allocated here and handed to avformat_open_input, which frees
    // it on failure (and sets the pointer to null); the callback is a plain function that
    // reads an atomic flag and ignores its (null) opaque pointer; the dictionary is owned
    // again after the call, whatever it returned; on success the context is wrapped once,
    // and `Input` closes it when dropped.
    unsafe {
        let mut ps = ff::ffi::avformat_alloc_context();
        if ps.is_null() {
            return Err(ff::Error::Other {
                errno: libc::ENOMEM,
            });
        }
        (*ps).interrupt_callback = ff::ffi::AVIOInterruptCB {
            callback: Some(interrupted),
            opaque: silence.map_or(std::ptr::null_mut(), |s| {
                s as *const Silence as *mut std::ffi::c_void
            }),
        };
        let mut opts = options.disown();
        let res =
            ff::ffi::avformat_open_input(&mut ps, c_url.as_ptr(), std::ptr::null(), &mut opts);
        ff::Dictionary::own(opts);
        if res < 0 {
            return Err(ff::Error::from(res));
        }
        let found = ff::ffi::avformat_find_stream_info(ps, std::ptr::null_mut());
        if found < 0 {
            ff::ffi::avformat_close_input(&mut ps);
            return Err(ff::Error::from(found));
        }
        Ok(ff::format::context::Input::wrap(ps))
    }
}

/// The ring's format for a decoder's picture format; None where framepipe converts it.
fn carried(format: ff::format::Pixel) -> Option<PixelFormat> {
    use ff::format::Pixel as P;
    Some(match format {
        P::YUV420P | P::YUVJ420P => PixelFormat::I420,
        P::NV12 => PixelFormat::Nv12,
        P::YUV422P | P::YUVJ422P => PixelFormat::Yuv422p,
        P::YUV444P | P::YUVJ444P => PixelFormat::Yuv444p,
        P::GRAY8 => PixelFormat::Gray,
        P::YUYV422 => PixelFormat::Yuyv,
        P::BGR24 => PixelFormat::Bgr24,
        _ => return None,
    })
}

/// Bits per component of `format` (8 for what framepipe carries; 10 or more for high bit
/// depth).
fn bit_depth(format: ff::format::Pixel) -> u32 {
    // SAFETY: av_pix_fmt_desc_get returns a pointer into FFmpeg's static table, or null for
    // an unknown format.
    unsafe {
        let d = ff::ffi::av_pix_fmt_desc_get(format.into());
        if d.is_null() {
            8
        } else {
            (*d).comp[0].depth as u32
        }
    }
}

/// Whether `input`'s transfer says how many bytes it holds (an HTTP answer with a
/// Content-Length: a file served, such as an MPEG-TS file, which states no duration), where
/// a live stream's never ends.
fn has_size(input: &ff::format::context::Input) -> bool {
    // SAFETY: the demuxer's I/O context, read while `input` (which owns it) is alive; it
    // may be null (a demuxer that does its own I/O).
    unsafe {
        let pb = (*input.as_ptr()).pb;
        !pb.is_null() && ff::ffi::avio_size(pb) > 0
    }
}

/// Whether a URL names something that serves files (read as a file when it has a duration
/// or a size, `has_size`) rather than a live stream.
fn serves_files(url: &str) -> bool {
    let lower = url.to_ascii_lowercase();
    ["http://", "https://", "ftp://", "file:"]
        .iter()
        .any(|p| lower.starts_with(p))
}

/// How `stream`'s frames are timed: its rate where sane (else None, and said: the run's
/// `--fps` times them), whether its timestamps are left aside with an absurd rate, and the
/// running offset that keeps its times going forward.
fn timing_of(
    input: &ff::format::context::Input,
    stream: &ff::format::stream::Stream,
    what: &str,
) -> (Option<f64>, bool, super::continuity::Continuity) {
    let rate = crate::media::info::frame_rate(stream);
    let fps = rate.map(|(n, d)| f64::from(n) / f64::from(d));
    let stated = crate::media::info::stated_rate(stream);
    let untimed = stated.is_some() && rate.is_none();
    if let Some((n, d)) = stated.filter(|_| untimed) {
        crate::warn!(
            "{what} says {n}/{d} frames per second, which no video has (a damaged header?): its frames are timed by --fps, or {} fps",
            crate::frame::DEFAULT_FPS
        );
    }
    // SAFETY: the input's format struct, read while `input` (which owns it) is alive.
    let discontinuous =
        unsafe { (*(*input.as_ptr()).iformat).flags } & ff::ffi::AVFMT_TS_DISCONT != 0;
    let tick = crate::media::timebase::seconds(1, stream.time_base());
    let continuity = super::continuity::Continuity::new(tick, fps, discontinuous);
    (fps, untimed, continuity)
}

/// Why a network input did not open, in words: a time-out named as one (FFmpeg says
/// "Invalid data" or "Input/output error" when nothing came), and FFmpeg's own line where it
/// says more than its error code ("Failed to resolve hostname …").
fn open_failure(e: &ff::Error, took: Duration, logged: Option<String>) -> String {
    let timeout = Duration::from_micros(crate::media::info::URL_TIMEOUT_US as u64);
    let silent = matches!(e, ff::Error::InvalidData)
        || matches!(e, ff::Error::Other { errno } if *errno == libc::EIO || *errno == libc::ETIMEDOUT);
    if silent && took + Duration::from_millis(500) >= timeout {
        return format!(
            "timed out: nothing came for {} s (is the server up, and sending?)",
            timeout.as_secs()
        );
    }
    match logged {
        Some(line) if line.to_ascii_lowercase().contains("resolve") => {
            format!("unknown host ({line})")
        }
        Some(line) if !line.is_empty() && !line.contains(&e.to_string()) => format!("{e} ({line})"),
        _ => e.to_string(),
    }
}

/// Opens a video file or a network stream (`url`), decoding with libavcodec.
pub fn open(url: &str, asked: Asked) -> Result<Decoded> {
    crate::media::info::init();
    crate::media::log::install();
    let network = url.contains("://") && !url.starts_with("file:");
    let kind = if network { "stream" } else { "video file" };
    let what = format!("{kind} '{url}'");
    let silence = Box::new(Silence::default());
    let input = open_demuxer(url, network, network.then_some(&*silence))?;
    let stream = input
        .streams()
        .best(ff::media::Type::Video)
        .with_context(|| format!("{what} has no video stream"))?;
    let time_base = stream.time_base();
    let (fps, untimed, continuity) = timing_of(&input, &stream, &what);
    let rotation = crate::media::info::rotation_of(&stream);
    // SAFETY: the stream's own struct, read while `input` (which owns it) is alive.
    let stream_sar = unsafe { (*stream.as_ptr()).sample_aspect_ratio };
    let has_duration = input.duration() > 0 || stream.duration() > 0;
    let live = network && !(serves_files(url) && (has_duration || has_size(&input)));
    let codec_name = stream.parameters().id().name().to_string();
    let (decoder, nvdec, pinned) = open_decoder(&stream, live, asked, &what)?;
    let ticks = |s: f64| {
        (s * f64::from(time_base.denominator()) / f64::from(time_base.numerator())).round() as i64
    };
    let start = crate::media::timebase::file_start(&input)
        .map(ticks)
        .unwrap_or(0);
    let frame_count = (!live).then(|| frames_of(&input, &stream, fps)).flatten();
    let frame_count = trimmed_count(frame_count, fps, asked.trim);
    let trim = (ticks(asked.trim.start), asked.trim.end.map(ticks));
    let media = (!live)
        .then(|| crate::media::info::info_of(&input, std::path::Path::new(url)))
        .flatten();
    let stream = stream.index();
    let mut source = Decoded {
        facts: Facts {
            what,
            stream,
            time_base,
            start,
            trim,
            untimed,
            fps,
            frame_count,
            live,
            patience: burst_budget_of(url, live),
            media,
        },
        input,
        decoder,
        picture: ff::frame::Video::empty(),
        packet: ff::Packet::empty(),
        drained: false,
        size: FrameSize::new(1, 1),
        format: PixelFormat::Bgr24,
        coded: (0, 0, ff::format::Pixel::None),
        conversion: Conversion::Planes { turns: 0 },
        clock: Clock::new(
            continuity,
            fps.filter(|_| asked.pace && !live).map(super::Pace::new),
        ),
        refused: 0,
        nvdec,
        pinned,
        lent: None,
        tags: PictureTags::default(),
        tapped: Tapped::new(),
        packets_only: false,
        silence,
        ended_by: None,
        drain: Drain::default(),
    };
    source.read_first(asked.trim)?;
    source.settle(rotation, &codec_name, asked)?;
    source.tags = tags_of(&source.picture, (stream_sar.num, stream_sar.den), rotation);
    if network {
        say_how_read(&source, url);
    }
    Ok(source)
}

impl Decoded {
    /// A packet read: to the decoder where it is the video's, and on to the taps (the
    /// decoder keeps its own reference).
    fn pass_on(&mut self, packet: ff::Packet) {
        // Copying packets alone runs through the file in one read: a stop ends it there, as
        // the end of the file would.
        if self.packets_only && crate::stop::Stop::process().is_requested() {
            self.drained = true;
            let _ = self.decoder.send_eof();
        }
        if packet.stream() == self.facts.stream && !self.packets_only {
            if let Err(e) = self.decoder.send_packet(&packet) {
                match e {
                    ff::Error::Other { errno } if errno == libc::EAGAIN => {}
                    _ => self.refused += 1,
                }
            }
        }
        self.tapped.take(packet);
    }

    /// Decodes the first picture of the part `trim` reads (seeking to its start): it says
    /// the size and format, which the codec parameters may not.
    fn read_first(&mut self, trim: crate::source::Trim) -> Result<()> {
        if trim.start > 0.0 {
            self.seek(trim.start)?;
        }
        if self.decode_kept()? {
            return Ok(());
        }
        if trim.is_set() {
            bail!(
                "{} has no frame in the part --ss/--to/-t asked for (from {} s)",
                self.facts.what,
                trim.start
            );
        }
        bail!("{} opened, but gave no frame", self.facts.what);
    }
}

/// The frames a file of `count` frames at `fps` gives of the part `trim` reads, where known.
fn trimmed_count(count: Option<u64>, fps: Option<f64>, trim: super::Trim) -> Option<u64> {
    if !trim.is_set() {
        return count;
    }
    let (count, fps) = (count?, fps?);
    let seconds = count as f64 / fps;
    let end = trim.end.map_or(seconds, |e| e.min(seconds));
    Some(((end - trim.start).max(0.0) * fps).round() as u64)
}

/// Opens `url`'s demuxer: a network one with time-outs (a server that never answers, or
/// stops answering, must not hold the run), its failure named by its cause.
fn open_demuxer(
    url: &str,
    network: bool,
    silence: Option<&Silence>,
) -> Result<ff::format::context::Input> {
    let mut options = ff::Dictionary::new();
    if network {
        options.set(
            "rw_timeout",
            &crate::media::info::URL_TIMEOUT_US.to_string(),
        );
        if url.to_ascii_lowercase().starts_with("rtsp") {
            options.set("timeout", &crate::media::info::URL_TIMEOUT_US.to_string());
        }
        // What it opens within (a playlist's segments, a nested protocol) stays on the
        // network: never a file of this machine.
        options.set("protocol_whitelist", crate::media::PROTOCOLS);
    }
    let kind = if network { "stream" } else { "video file" };
    let started = std::time::Instant::now();
    let _ = crate::media::log::take_last_error();
    if let Some(s) = silence {
        s.start();
    }
    let kept = crate::media::log::kept_here();
    let opened = open_input(url, options, silence);
    drop(kept);
    if let Some(s) = silence {
        s.deadline_us.store(0, Ordering::Relaxed);
    }
    opened.map_err(|e| match e {
        ff::Error::Exit if silence.is_some_and(Silence::expired) => {
            anyhow::anyhow!("opening {kind} '{url}': {}", silent_for())
        }
        ff::Error::Exit => anyhow::anyhow!("opening {kind} '{url}': stopped"),
        ff::Error::InvalidData if !network => anyhow::anyhow!(
            "'{url}' is not a video FFmpeg can decode ({e}); --decode opencv tries OpenCV's reader"
        ),
        e => anyhow::anyhow!(
            "opening {kind} '{url}': {}",
            open_failure(&e, started.elapsed(), crate::media::log::take_last_error())
        ),
    })
}

/// The decoder libavcodec opens, with NVDEC where it was given it, else its pictures in
/// buffers of its own pool where they may be lent (`Asked::pictures`).
type Opened = (
    ff::decoder::Video,
    Option<super::nvdec::Nvdec>,
    Option<super::pinned::PinnedPictures>,
);

/// `stream`'s decoder, with frame threads (slice threads for a live stream, whose frames
/// must not wait for others), and NVDEC attached where `asked` wants it and it can.
fn open_decoder(
    stream: &ff::format::stream::Stream,
    live: bool,
    asked: Asked,
    what: &str,
) -> Result<Opened> {
    let mut ctx = ff::codec::context::Context::from_parameters(stream.parameters())
        .with_context(|| format!("{what}: reading its codec parameters"))?;
    let id = stream.parameters().id();
    let given = match asked.nvdec {
        WithNvdec::No => false,
        WithNvdec::Yes => true,
        WithNvdec::WhereFaster if !asked.on_device => {
            crate::info!(
                "{what}: --decode auto: no CUDA backend to take NVDEC's frames; the CPU decodes it"
            );
            false
        }
        WithNvdec::WhereFaster => super::nvdec::prefers(id, what),
    };
    let nvdec = given
        .then(|| {
            super::nvdec::attach(&mut ctx, id, asked.on_device)
                .map_err(|why| match asked.nvdec {
                    WithNvdec::Yes => {
                        crate::warn!("{what}: --decode gpu: {why}; the CPU decodes it")
                    }
                    _ => crate::info!("{what}: --decode auto: {why}; the CPU decodes it"),
                })
                .ok()
        })
        .flatten();
    ctx.set_threading(ff::codec::threading::Config {
        kind: if live {
            ff::codec::threading::Type::Slice
        } else {
            ff::codec::threading::Type::Frame
        },
        // A file keeps its frame threads (FFmpeg's count: a core's worth), which keep
        // several frames in NVDEC at once; a live stream has `live_threads`.
        count: match live {
            true => live_threads(stream, nvdec.is_some()),
            false => 0,
        },
        ..Default::default()
    });
    // SAFETY: the context is live and not opened yet; the pool is kept in `Decoded` after
    // the decoder (declared after it), so it outlives every call the decoder makes into it.
    let lock = match asked.pictures {
        Pictures::Copied => None,
        Pictures::Lent => Some(false),
        Pictures::Locked => Some(true),
    };
    let pinned = lock
        .filter(|_| nvdec.is_none())
        .map(|lock| unsafe { super::pinned::PinnedPictures::install(ctx.as_mut_ptr(), lock) });
    let decoder = ctx.decoder().video().with_context(|| {
        format!(
            "{what}: no decoder for its video ({}) in this FFmpeg",
            id.name()
        )
    })?;
    Ok((decoder, nvdec, pinned))
}

/// A live stream's slice threads: one on NVDEC (the slices go to the decoder whole) and
/// below 1280x720 (a camera's slice threads would idle: they cost a thread and FFmpeg's
/// slice contexts each, 6 threads a camera of 16x16 on 4 cores), else one for each 1280x720
/// of its picture, up to `LIVE_THREADS` and the cores. A camera holds this many decoding
/// threads beside its capture thread (docs/service.md).
fn live_threads(stream: &ff::format::stream::Stream, nvdec: bool) -> usize {
    // SAFETY: the stream's own parameters, read while its input (which owns them) is alive.
    let (w, h) = unsafe {
        let p = (*stream.as_ptr()).codecpar;
        ((*p).width.max(0) as usize, (*p).height.max(0) as usize)
    };
    match nvdec {
        true => 1,
        false => (w * h / (1280 * 720))
            .clamp(1, LIVE_THREADS)
            .min(crate::host::cores()),
    }
}

/// The most slice threads a live stream decoded on the CPU has (`live_threads`).
pub const LIVE_THREADS: usize = 4;

/// The frames a file's stream holds: as its header says, else its duration times `fps`.
fn frames_of(
    input: &ff::format::context::Input,
    stream: &ff::format::stream::Stream,
    fps: Option<f64>,
) -> Option<u64> {
    if stream.frames() > 0 {
        return Some(stream.frames() as u64);
    }
    let seconds = if stream.duration() > 0 {
        crate::media::timebase::seconds(stream.duration(), stream.time_base())
    } else {
        input.duration() as f64 / f64::from(ff::ffi::AV_TIME_BASE)
    };
    fps.map(|f| (seconds * f).round() as u64).filter(|&n| n > 0)
}

/// Says how a network input is read: live (drops when behind), or as a file.
fn say_how_read(source: &Decoded, url: &str) {
    if source.facts.live {
        crate::info!(
            "{} is read live: when the pipeline falls behind, frames are dropped (counted at the end) so that what comes out stays current; its audio, if any, goes to --record only (the outputs carry the frames)",
            source.facts.what
        );
    } else {
        crate::info!(
            "'{url}' is a file (it has a duration or a size): read as one, every frame kept in order"
        );
    }
}

impl Decoded {
    /// Decides the frame's format, size and conversion from the first picture, and whether
    /// the packets past it go to the taps alone (`Asked::packets_only`).
    fn settle(&mut self, rotation: u32, codec: &str, asked: Asked) -> Result<()> {
        // Past the first picture, a file copied alone goes to the taps only.
        self.packets_only = asked.packets_only && !self.facts.live;
        let untouched = asked.untouched;
        let p = &self.picture;
        let (w, h, f) = (p.width(), p.height(), p.format());
        // framepipe's YUV arithmetic is the limited (video) range; full-range (JPEG) YUV is
        // converted by libswscale, which knows its range, unless nothing converts it.
        let full_range = matches!(
            f,
            ff::format::Pixel::YUVJ420P | ff::format::Pixel::YUVJ422P | ff::format::Pixel::YUVJ444P
        ) || p.color_range() == ff::util::color::Range::JPEG;
        self.coded = (w, h, f);
        let turns = rotation / 90 % 4;
        let coded = FrameSize::new(w as usize, h as usize);
        let upright = if turns % 2 == 1 {
            FrameSize::new(coded.height, coded.width)
        } else {
            coded
        };
        let planes_turn = |pf: PixelFormat| {
            turns == 0
                || matches!(
                    pf,
                    PixelFormat::I420
                        | PixelFormat::Yuv444p
                        | PixelFormat::Gray
                        | PixelFormat::Bgr24
                )
        };
        let as_is = carried(f).filter(|&pf| {
            pf.check(coded).is_ok()
                && planes_turn(pf)
                && (!full_range
                    || untouched
                    || matches!(pf, PixelFormat::Bgr24 | PixelFormat::Gray))
        });
        match as_is {
            Some(pf) => {
                self.format = pf;
                self.conversion = Conversion::Planes { turns };
            }
            None => {
                self.format = PixelFormat::Bgr24;
                self.conversion = self.to_bgr(f, coded, full_range, turns)?;
            }
        }
        self.size = upright;
        // NVDEC's pictures that need nothing done go straight into the slot.
        if let Some(n) = &mut self.nvdec {
            n.direct = n.decoding()
                && self.format == PixelFormat::Nv12
                && matches!(self.conversion, Conversion::Planes { turns: 0 });
        }
        let by = match &self.nvdec {
            Some(n) if n.decoding() => "NVDEC through libavcodec",
            _ => "libavcodec",
        };
        self.facts.what = format!(
            "{} (decoded by {by}: {codec}, {})",
            self.facts.what,
            match &self.conversion {
                Conversion::Planes { .. } => format!("{} as decoded", self.format),
                Conversion::Scaled { .. } => "converted to bgr24".to_string(),
            }
        );
        Ok(())
    }

    /// The conversion of `f` pictures of `coded` size to BGR on the CPU (libswscale, which
    /// knows a full range), `turns` quarter turns after; said, with why.
    fn to_bgr(
        &self,
        f: ff::format::Pixel,
        coded: FrameSize,
        full_range: bool,
        turns: u32,
    ) -> Result<Conversion> {
        let why = if bit_depth(f) > 8 {
            format!(
                "its pictures are {}-bit ({f:?}) and framepipe carries 8-bit frames: each is converted to 8-bit BGR on the CPU",
                bit_depth(f)
            )
        } else if full_range {
            format!(
                "its pictures are full-range (JPEG) YUV ({f:?}) and framepipe's YUV arithmetic is the video range: each is converted to BGR on the CPU"
            )
        } else {
            format!(
                "its pictures ({f:?}, {coded}) are converted to BGR on the CPU (framepipe carries them as BGR)"
            )
        };
        crate::warn!("{}: {why}", self.facts.what);
        let (w, h) = (coded.width as u32, coded.height as u32);
        let scaler = ff::software::scaling::Context::get(
            f,
            w,
            h,
            ff::format::Pixel::BGR24,
            w,
            h,
            ff::software::scaling::Flags::BICUBIC
                | ff::software::scaling::Flags::ACCURATE_RND
                | ff::software::scaling::Flags::FULL_CHR_H_INT,
        )
        .with_context(|| format!("{}: converting {f:?} pictures to BGR", self.facts.what))?;
        if full_range {
            set_full_range_input(&scaler);
        }
        Ok(Conversion::Scaled {
            scaler,
            bgr: ff::frame::Video::empty(),
            turns,
        })
    }

    /// Decodes the next picture into `self.picture`; false at the end of the input.
    /// Seeks to the keyframe at or before `at` seconds from the file's start (as ffmpeg's
    /// -ss before -i); `decode_kept` then drops the frames before it.
    fn seek(&mut self, at: f64) -> Result<()> {
        if self.facts.live {
            bail!("--ss: {} is live and can't be seeked", self.facts.what);
        }
        let start = crate::media::timebase::file_start(&self.input).unwrap_or(0.0);
        let target = ((start + at) * f64::from(ff::ffi::AV_TIME_BASE)).round() as i64;
        self.input
            .seek(target, ..target)
            .with_context(|| format!("--ss {at}: seeking in {}", self.facts.what))
    }

    /// The next picture of the part read (`--ss`, `--to`, `-t`): those before its start are
    /// decoded and dropped (accurate seek), and the read ends at its end.
    fn decode_kept(&mut self) -> Result<bool> {
        loop {
            if self.clock.past_end || !self.decode_next()? {
                return Ok(false);
            }
            let Some(at) = self.picture.timestamp().or(self.picture.pts()) else {
                return Ok(true);
            };
            let at = at - self.facts.start;
            if at < self.facts.trim.0 {
                continue;
            }
            if self.facts.trim.1.is_some_and(|end| at >= end) {
                self.clock.past_end = true;
                return Ok(false);
            }
            return Ok(true);
        }
    }

    fn decode_next(&mut self) -> Result<bool> {
        loop {
            match self.decoder.receive_frame(&mut self.picture) {
                Ok(()) => {
                    if let Some(nvdec) = &mut self.nvdec {
                        nvdec.download(&mut self.picture, &self.facts.what)?;
                    }
                    return Ok(true);
                }
                Err(ff::Error::Eof) => return Ok(false),
                Err(ff::Error::Other { errno }) if errno == libc::EAGAIN => {}
                Err(e) => {
                    // A picture the decoder could not finish (a damaged file): go on with
                    // the next packet, as ffmpeg does.
                    self.refused += 1;
                    crate::info!(
                        "{}: a picture failed to decode ({e}); going on",
                        self.facts.what
                    );
                }
            }
            if self.drained {
                return Ok(false);
            }
            // av_read_frame fills a blank packet: the last one's buffer is given back first
            // (reading into it again leaked every packet of the input).
            self.packet = ff::Packet::empty();
            self.silence.start();
            let read = self.packet.read(&mut self.input);
            self.silence.deadline_us.store(0, Ordering::Relaxed);
            let draining = self.silence.draining.load(Ordering::Relaxed);
            match read {
                // Draining after a stop: the demuxer, told to give up, has handed over what
                // it held (a read that fails flushes its last packet and its parser); the
                // decoder's delayed pictures come next.
                Err(_) if draining => {
                    self.drained = true;
                    let _ = self.decoder.send_eof();
                }
                Ok(()) => {
                    // After a stop the demuxer is interrupted: what it flushes of an input
                    // still sending was cut short, and is left out (`Drain`).
                    let stopped = self.facts.live
                        && (draining || crate::stop::Stop::process().is_requested());
                    let packet = std::mem::replace(&mut self.packet, ff::Packet::empty());
                    if !stopped {
                        self.drain.last_read = Some(Instant::now());
                        self.pass_on(packet);
                    } else if !self.drain.flowing() {
                        self.pass_on(packet);
                    }
                }
                Err(ff::Error::Eof) => {
                    self.drained = true;
                    let _ = self.decoder.send_eof();
                }
                Err(ff::Error::Exit) if self.silence.expired() => {
                    // Nothing came for too long: what the demuxer and the decoder hold is
                    // read out first, then the input fails (`read`), as a lost one does.
                    self.ended_by = Some(format!("reading {}: {}", self.facts.what, silent_for()));
                    self.silence.draining.store(true, Ordering::Relaxed);
                }
                Err(ff::Error::Exit) => return Ok(false), // a stop interrupted the read
                Err(e) if self.facts.live || self.clock.frames == 0 => {
                    bail!("reading {}: {e}", self.facts.what)
                }
                Err(e) => {
                    // A read error inside a file (truncated, damaged): what was decoded
                    // is kept, as ffmpeg keeps it.
                    crate::warn!("reading {}: {e}; ending the input here", self.facts.what);
                    self.drained = true;
                    let _ = self.decoder.send_eof();
                }
            }
        }
    }

    /// The picture's time, from the file's start, in the stream's time base, kept going
    /// forward across a discontinuity (`continuity`, said once each); None where the
    /// stream's times are not taken.
    fn picture_time(&mut self) -> Option<Timestamp> {
        if self.facts.untimed {
            return None;
        }
        let ticks =
            self.picture.timestamp().or(self.picture.pts())? - self.facts.start - self.facts.trim.0;
        let (ticks, jump) = self.clock.continuity.next(ticks);
        if let Some(step) = jump {
            let way = if step < 0.0 { "back" } else { "forward" };
            crate::warn!(
                "{}: its timestamps jump {way} {:.3} s at frame {} (joined files, or a clock reset): the frames after it follow on from the one before, as ffmpeg keeps them",
                self.facts.what,
                step.abs(),
                self.clock.frames + 1
            );
        }
        Some(Timestamp {
            ticks,
            base: (
                self.facts.time_base.numerator(),
                self.facts.time_base.denominator(),
            ),
        })
    }

    /// Checks the picture against the first and writes it into `frame`.
    fn hand_out(&mut self, frame: &mut [u8]) -> Result<()> {
        let p = &self.picture;
        // An NVDEC picture left on the device is checked by its pixels' format.
        if (p.width(), p.height(), super::nvdec::sw_format(p)) != self.coded {
            let (what, first, now) = if (p.width(), p.height()) != (self.coded.0, self.coded.1) {
                (
                    "size",
                    format!("{}x{}", self.coded.0, self.coded.1),
                    format!("{}x{}", p.width(), p.height()),
                )
            } else {
                (
                    "pixel format",
                    format!("{:?}", self.coded.2),
                    format!("{:?}", p.format()),
                )
            };
            bail!(
                "frame {} of {} has another {what} than the first frames ({first}): it is {now}. framepipe carries one size and format per input, so it stops here instead of writing wrong frames (the {} frames before were processed). Split the input where it changes, or scale it to one size first (ffmpeg -i IN -vf scale={}:{} OUT)",
                self.clock.frames,
                self.facts.what,
                self.clock.frames,
                self.coded.0,
                self.coded.1
            );
        }
        let coded = FrameSize::new(self.coded.0 as usize, self.coded.1 as usize);
        if p.format() == ff::format::Pixel::CUDA {
            let nvdec = self
                .nvdec
                .as_ref()
                .ok_or_else(|| crate::bug!("a CUDA picture without NVDEC"))?;
            if nvdec.keep {
                self.lent = Some(nvdec.lend(p, coded)?);
                return Ok(());
            }
            return nvdec.bring_into_slot(p, coded, frame);
        }
        // A picture decoded into a page-locked buffer, as it is carried, is lent as it lies.
        if let (Some(pinned), Conversion::Planes { turns: 0 }) =
            (&mut self.pinned, &self.conversion)
        {
            if let Some(lent) = pinned.lend(p, self.format, coded)? {
                self.lent = Some(lent);
                return Ok(());
            }
        }
        // A decoder that hands rows bottom-up (a negative pitch) gets its picture copied the
        // right way up first: the plane copies below read rows at positive pitches.
        let copied;
        let p = if positive_pitches(p) {
            p
        } else {
            copied = upright_copy(p)?;
            &copied
        };
        match &mut self.conversion {
            Conversion::Planes { turns } => copy_planes(p, self.format, coded, *turns, frame),
            Conversion::Scaled { scaler, bgr, turns } => {
                scaler
                    .run(p, bgr)
                    .with_context(|| format!("{}: converting a picture to BGR", self.facts.what))?;
                copy_planes(bgr, PixelFormat::Bgr24, coded, *turns, frame);
            }
        }
        Ok(())
    }
}

/// Whether every plane of `p` has a positive pitch (rows top-down).
fn positive_pitches(p: &ff::frame::Video) -> bool {
    // SAFETY: reads the frame's plane count of linesize fields, plain ints.
    (0..p.planes()).all(|i| unsafe { (*p.as_ptr()).linesize[i] } > 0)
}

/// `p` copied into a frame of its own with top-down rows.
fn upright_copy(p: &ff::frame::Video) -> Result<ff::frame::Video> {
    let mut copy = ff::frame::Video::new(p.format(), p.width(), p.height());
    // SAFETY: both frames are allocated with the same format and size; av_frame_copy
    // copies the planes row by row, whatever the pitches' signs.
    let r = unsafe { ff::ffi::av_frame_copy(copy.as_mut_ptr(), p.as_ptr()) };
    anyhow::ensure!(r >= 0, "copying a decoded picture: {}", ff::Error::from(r));
    Ok(copy)
}

/// Tells `scaler` its input is full-range YUV (a picture flagged full-range in a format
/// libswscale takes as video range, such as yuv420p with `color_range=pc`).
fn set_full_range_input(scaler: &ff::software::scaling::Context) {
    // SAFETY: the context is live; the get call fills the five ints and two table pointers
    // from the context, and the set call writes them back with only the source range
    // changed. A context that refuses colour details (returns -1) is left as it was.
    unsafe {
        let ctx = scaler.as_ptr() as *mut ff::ffi::SwsContext;
        let (mut inv, mut table) = (std::ptr::null_mut(), std::ptr::null_mut());
        let (mut src_range, mut dst_range, mut brightness, mut contrast, mut saturation) =
            (0, 0, 0, 0, 0);
        if ff::ffi::sws_getColorspaceDetails(
            ctx,
            &mut inv,
            &mut src_range,
            &mut table,
            &mut dst_range,
            &mut brightness,
            &mut contrast,
            &mut saturation,
        ) < 0
        {
            return;
        }
        let _ = ff::ffi::sws_setColorspaceDetails(
            ctx, inv, 1, table, dst_range, brightness, contrast, saturation,
        );
    }
}

/// Copies `picture`'s planes (rows `pitch` apart, as the decoder laid them out) into
/// `frame`, packed, each plane turned `turns` quarter turns clockwise.
fn copy_planes(
    picture: &ff::frame::Video,
    format: PixelFormat,
    coded: FrameSize,
    turns: u32,
    frame: &mut [u8],
) {
    let elem = if format == PixelFormat::Bgr24 { 3 } else { 1 };
    let upright = if turns % 2 == 1 {
        FrameSize::new(coded.height, coded.width)
    } else {
        coded
    };
    let from = Planes::packed(format, coded);
    let to = Planes::packed(format, upright);
    for (i, (src, dst)) in from.iter().zip(to.iter()).enumerate() {
        let rows = coded.height / src.rows_per;
        let row_bytes = src.pitch; // packed: a row's own bytes
        let data = picture.data(i);
        let stride = picture.stride(i);
        let out = &mut frame[dst.offset..dst.offset + dst.pitch * (upright.height / dst.rows_per)];
        if turns == 0 {
            for r in 0..rows {
                out[r * row_bytes..(r + 1) * row_bytes]
                    .copy_from_slice(&data[r * stride..r * stride + row_bytes]);
            }
        } else {
            let cols = row_bytes / elem;
            let plane = Plane {
                data,
                stride,
                cols,
                rows,
                elem,
            };
            turn_plane(&plane, turns, out, dst.pitch);
        }
    }
}

/// A plane of a decoded picture as it lies: `cols` × `rows` elements of `elem` bytes, rows
/// `stride` apart.
struct Plane<'a> {
    data: &'a [u8],
    stride: usize,
    cols: usize,
    rows: usize,
    elem: usize,
}

/// Turns `plane` by `turns` quarter turns clockwise into `out` (rows `out_pitch` apart).
fn turn_plane(plane: &Plane, turns: u32, out: &mut [u8], out_pitch: usize) {
    let Plane {
        data,
        stride,
        cols,
        rows,
        elem,
    } = *plane;
    for y in 0..rows {
        for x in 0..cols {
            let (ox, oy) = match turns {
                1 => (rows - 1 - y, x),
                2 => (cols - 1 - x, rows - 1 - y),
                _ => (y, cols - 1 - x),
            };
            let s = y * stride + x * elem;
            let d = oy * out_pitch + ox * elem;
            out[d..d + elem].copy_from_slice(&data[s..s + elem]);
        }
    }
}

impl Source for Decoded {
    fn describe(&self) -> String {
        super::described(&self.facts.what, self.size, self.facts.fps)
    }
    fn size(&self) -> FrameSize {
        self.size
    }
    fn format(&self) -> PixelFormat {
        self.format
    }
    fn fps(&self) -> Option<f64> {
        self.facts.fps
    }
    fn is_live(&self) -> bool {
        self.facts.live
    }
    fn burst_budget(&self) -> Duration {
        self.facts.patience
    }
    fn frame_count(&self) -> Option<u64> {
        self.facts.frame_count
    }

    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        self.lent = None;
        self.tapped.stop_holding();
        // The first picture was decoded while opening.
        if self.clock.frames > 0 && !self.decode_kept()? {
            if let Some(why) = self.ended_by.take() {
                bail!(why);
            }
            if self.refused > 0 {
                crate::info!(
                    "{}: {} packet(s) or picture(s) could not be decoded and were skipped, as ffmpeg skips them",
                    self.facts.what,
                    self.refused
                );
            }
            return Ok(Read::End);
        }
        self.hand_out(frame)?;
        self.clock.prev_seconds = self.clock.pts.map(Timestamp::seconds);
        self.clock.pts = if self.facts.live {
            let start = *self.clock.live_start.get_or_insert_with(Instant::now);
            Timestamp::from_seconds(start.elapsed().as_secs_f64())
        } else {
            self.picture_time()
        };
        self.clock.frames += 1;
        Ok(Read::Frame)
    }

    fn begin_drain(&mut self) -> bool {
        if !self.facts.live || self.drained {
            return false;
        }
        self.drain.flowing();
        self.silence.draining.store(true, Ordering::Relaxed);
        true
    }

    fn skip(&mut self) -> Result<Read> {
        self.tapped.stop_holding();
        if self.clock.frames > 0 && !self.decode_kept()? {
            return Ok(Read::End);
        }
        self.clock.frames += 1;
        Ok(Read::Frame)
    }

    fn timestamp(&self) -> Option<f64> {
        self.clock.pts.map(Timestamp::seconds)
    }

    fn pts(&self) -> Option<Timestamp> {
        self.clock.pts
    }

    fn lent(&mut self) -> Option<(crate::desc::Memory, crate::desc::Planes)> {
        self.lent.take()
    }

    fn picture_tags(&self) -> Option<PictureTags> {
        Some(self.tags)
    }

    fn media(&self) -> Option<crate::media::info::MediaInfo> {
        self.facts.media.clone()
    }

    fn tap(
        &mut self,
        tap: crate::media::tap::Tap,
    ) -> std::result::Result<(), crate::media::tap::Tap> {
        let from = self.facts.trim.0 as f64 * f64::from(self.facts.time_base.numerator())
            / f64::from(self.facts.time_base.denominator());
        self.tapped
            .attach(&self.input, self.facts.stream, from, tap);
        Ok(())
    }

    fn due(&mut self) -> Option<Instant> {
        let (frames, last, before) = (
            self.clock.frames,
            self.clock.pts.map(Timestamp::seconds),
            self.clock.prev_seconds,
        );
        Some(self.clock.pace.as_mut()?.due(frames, last, before))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_stream_is_patient_by_how_its_packets_wait() {
        let second = Duration::from_secs(1);
        assert_eq!(
            burst_budget_of("udp://127.0.0.1:30000?fifo_size=1000000", true),
            second
        );
        assert_eq!(burst_budget_of("srt://cam:9000", true), second);
        assert_eq!(
            burst_budget_of("RTSP://cam/live", true),
            SOCKET_BURST_BUDGET
        );
        assert_eq!(
            burst_budget_of("rtp://239.0.0.1:5004", true),
            SOCKET_BURST_BUDGET
        );
        assert_eq!(burst_budget_of("clip.mp4", false), Duration::ZERO);
        assert_eq!(
            burst_budget_of("http://host/clip.mp4", false),
            Duration::ZERO
        );
    }

    #[test]
    fn an_open_that_failed_is_named_by_its_cause() {
        let eio = ff::Error::Other { errno: libc::EIO };
        let quick = Duration::from_millis(30);
        let resolve =
            Some("Failed to resolve hostname cam.invalid: Name or service not known".into());
        let said = open_failure(&eio, quick, resolve);
        assert!(
            said.starts_with("unknown host (Failed to resolve hostname cam.invalid"),
            "{said}"
        );
        let slow = Duration::from_secs(10);
        let said = open_failure(&ff::Error::InvalidData, slow, None);
        assert!(
            said.starts_with("timed out: nothing came for 10 s"),
            "{said}"
        );
        let refused = ff::Error::Other {
            errno: libc::ECONNREFUSED,
        };
        assert_eq!(open_failure(&refused, quick, None), refused.to_string());
    }

    /// Every frame of `clip` packed, as the ring reads it: from the slot, or from where the
    /// source lent it (a picture of its pool); and how many were lent.
    fn frames_of(clip: &str, pictures: Pictures) -> (Vec<Vec<u8>>, usize) {
        let mut source = open(
            clip,
            Asked {
                pictures,
                ..Asked::default()
            },
        )
        .unwrap();
        let (size, format) = (source.size(), source.format());
        let mut slot = vec![0u8; format.bytes(size)];
        let (mut frames, mut lent) = (Vec::new(), 0);
        while source.read(&mut slot).unwrap() == Read::Frame {
            let Some((memory, planes)) = source.lent() else {
                frames.push(slot.clone());
                continue;
            };
            let mut packed = vec![0u8; slot.len()];
            let from = memory.host_frame().expect("a picture lent in host memory");
            planes.pack(format, size, from, &mut packed);
            frames.push(packed);
            lent += 1;
        }
        (frames, lent)
    }

    #[test]
    fn pictures_lent_from_the_decoders_pool_are_the_decoder_s_own() {
        // Every picture is lent from the pool (plain memory for the CPU backend, and for a
        // locked pool where CUDA is missing), and every frame is the one decoded the usual
        // way, B-frames and frame threads included, for a size whose coded height is padded
        // (360: 368 coded).
        if std::process::Command::new("ffmpeg")
            .arg("-version")
            .output()
            .is_err()
        {
            return println!("no ffmpeg here: skipped");
        }
        let dir = std::env::temp_dir().join(format!("fp-pinned-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for (name, pix) in [("a.mp4", "yuv420p"), ("b.mkv", "yuv444p")] {
            let clip = dir.join(name).display().to_string();
            let made = std::process::Command::new("ffmpeg")
                .args([
                    "-v",
                    "error",
                    "-y",
                    "-f",
                    "lavfi",
                    "-i",
                    "testsrc2=size=640x360:rate=30",
                ])
                .args([
                    "-frames:v",
                    "40",
                    "-c:v",
                    "libx264",
                    "-bf",
                    "3",
                    "-pix_fmt",
                    pix,
                    &clip,
                ])
                .status()
                .unwrap();
            assert!(made.success());
            let (want, _) = frames_of(&clip, Pictures::Copied);
            assert_eq!(want.len(), 40);
            for pictures in [Pictures::Lent, Pictures::Locked] {
                let (got, lent) = frames_of(&clip, pictures);
                assert!(
                    got == want,
                    "{pix}: frames differ ({lent} lent, {pictures:?})"
                );
                assert_eq!(lent, want.len(), "{pix}: every picture lent ({pictures:?})");
                println!("{pix}: 40 frames equal, {lent} lent ({pictures:?})");
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn planes_turn_a_quarter_clockwise() {
        // 3 wide, 2 high: a b c / d e f → turned clockwise: d a / e b / f c.
        let plane = Plane {
            data: b"abc.def.",
            stride: 4,
            cols: 3,
            rows: 2,
            elem: 1,
        };
        let mut out = vec![0u8; 6];
        turn_plane(&plane, 1, &mut out, 2);
        assert_eq!(&out, b"daebfc");
        turn_plane(&plane, 2, &mut out, 3);
        assert_eq!(&out, b"fedcba");
        turn_plane(&plane, 3, &mut out, 2);
        assert_eq!(&out, b"cfbead");
    }
}
