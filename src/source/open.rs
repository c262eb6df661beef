//! Opening what `--input` names: the right source for it (the pattern, standard input or a
//! named pipe, a file or stream decoded by libavcodec, or OpenCV's capture; a live network
//! stream wrapped to reconnect where asked: `reconnect`), asked for what the flags say,
//! on a helper thread that a stop never waits for, with what libavformat reads of a file's
//! header (its exact rate, rotation, start and audio) for the outputs.
//!
//! Invariants: a stop asked for while the input opens is answered at once (the waiting
//! thread is woken by it, the opener is left behind, and the caller records it); a camera
//! that is down sleeps between tries until its next one or a stop; `--size` and `--fps` that can't apply to an
//! input are said not to, never silently dropped.

use anyhow::Result;

use super::{pattern::Pattern, InputSpec, Source};
use crate::frame::{FrameSize, DEFAULT_FPS};
use crate::info;
use crate::pixel::PixelFormat;
use crate::stop::Stop;

/// Size of the test pattern.
const DEFAULT_SIZE: FrameSize = FrameSize::new(1280, 720);

/// `--decode`: who decodes files and network streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decode {
    /// FFmpeg's libavcodec on the CPU, frames kept in its YUV layout.
    Cpu,
    /// OpenCV's capture (frames converted to BGR on the CPU).
    Opencv,
    /// NVDEC, the GPU's decoder, through libavcodec's CUDA hwaccel (H.264 and HEVC where
    /// the GPU and the build have it); where it can't decode the stream, the CPU does, and
    /// the run says why.
    Gpu,
    /// NVDEC where it decodes faster than this machine's cores would (from the H200's
    /// figures: `framepipe doctor` says what it picks here), with the CUDA backend; else
    /// libavcodec on the CPU.
    Auto,
}

/// What the flags ask of the input: `--size` and `--fps` when given, what standard input
/// carries, and how a file is played and decoded (how a file is played is read only where
/// files are: with FFmpeg's libraries).
#[derive(Clone, Copy, Debug)]
#[cfg_attr(not(feature = "ffmpeg"), allow(dead_code))]
pub struct Asked {
    /// What standard input carries (`--input -`).
    pub input_format: crate::source::stdin::InputFormat,
    /// `--size`: the pattern's size, and what a camera is asked for.
    pub size: Option<FrameSize>,
    /// `--fps`: the pattern's rate, and what a camera is asked for (0: unpaced).
    pub fps: Option<f64>,
    /// The run shows a window (a file then plays at its rate). Files need FFmpeg's libraries.
    pub window: bool,
    /// `--no-pace`.
    pub no_pace: bool,
    /// A file is read at its own rate though no window shows it: `--realtime`, or every
    /// output is live (`plan::RunPlan`).
    pub realtime: bool,
    /// `--decode`: who decodes files and network streams.
    pub decode: Decode,
    /// NVDEC's pictures may stay in device memory: the run's backend is CUDA's.
    pub on_device: bool,
    /// Where a CPU decoder's pictures are decoded: lent from a pool of its own (page-locked
    /// where the run's backend may be CUDA's), or copied into the slots.
    pub pictures: super::Pictures,
    /// A live network stream is opened again when lost (`reconnect`): several inputs, or
    /// `--reconnect`.
    pub reconnect: bool,
    /// Frames pass untouched to standard output alone (`--filter copy`, headless).
    pub untouched: bool,
    /// Only the input's packets are wanted (`--codec copy` to files alone): a file's
    /// pictures past its first are not decoded.
    pub packets_only: bool,
    /// `--ss`, `--to`, `-t`: the part of a file that is read.
    pub trim: super::Trim,
    /// A file's rotation and video start (`media::MediaInfo`).
    #[cfg(feature = "opencv")]
    pub rotation: u32,
    /// Where a file's video starts on its timeline (`media::MediaInfo::video_offset`).
    #[cfg(feature = "opencv")]
    pub offset: f64,
}

/// What libavformat reads from a video file's header (rate, rotation, audio); nothing for
/// other inputs, or without FFmpeg's libraries.
#[cfg(feature = "ffmpeg")]
pub type Media = crate::media::info::MediaInfo;
/// Without FFmpeg's libraries there is no libavformat to read a header with.
#[cfg(not(feature = "ffmpeg"))]
pub type Media = ();

/// A video file's header, read before OpenCV's capture opens it (`--decode opencv`: it
/// needs the rotation and the video's start, which it can't read itself); every other input
/// is opened once, and libavcodec's decoder says what it read (`Source::media`).
#[cfg(feature = "opencv")]
fn probe_for_capture(input: &InputSpec, asked: Asked) -> (Asked, Option<Media>) {
    let media = match input {
        InputSpec::Video(path) if asked.decode == Decode::Opencv => crate::media::info::probe(path),
        _ => None,
    };
    match &media {
        Some(m) => (
            Asked {
                rotation: m.rotation,
                offset: m.video_offset,
                ..asked
            },
            media,
        ),
        None => (asked, None),
    }
}

/// An opened input and what libavformat read of it.
pub type Opened = (Box<dyn Source>, Option<Media>);

/// Reads the input's header (where libavformat reads it) and opens it, on a helper thread,
/// so that a stop asked for while it opens (a stalled stream or camera) is answered at once:
/// None then, and the helper is left behind (the caller says so: the app's run ends with
/// `Ran::left_behind`).
pub fn interruptibly(stop: &Stop, input: InputSpec, asked: Asked) -> Result<Option<Opened>> {
    wait(stop, &start(input, asked)?)
}

/// An opening under way on its helper thread (`start`): its answer comes on this channel.
pub type Opening = crossbeam_channel::Receiver<Result<Opened>>;

/// Starts opening the input on a helper thread (`interruptibly`'s first half: several
/// inputs open side by side, and the caller polls or `wait`s).
pub fn start(input: InputSpec, asked: Asked) -> Result<Opening> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("open input".into())
        .spawn(move || {
            let _ = tx.send(open_once(&input, asked));
        })?;
    Ok(rx)
}

/// As `start`, but a network stream that can't be opened is tried again, with the pauses
/// of a reconnect (jittered, so that a wall of cameras down at once does not come back in
/// step), until it opens, the process stops or `until` is asked (the input left the run): a
/// camera that is down at the start joins the run when it comes up. `down` is told the first
/// failure.
pub fn start_until_open(
    input: InputSpec,
    asked: Asked,
    down: Box<dyn FnOnce(&anyhow::Error) + Send>,
    until: Stop,
) -> Result<Opening> {
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("open input".into())
        .spawn(move || {
            let stop = Stop::process();
            let mut down = Some(down);
            let mut wait = super::reconnect::FIRST_WAIT;
            let opened = loop {
                match open_once(&input, asked) {
                    Err(e) if !stop.is_requested() && !until.is_requested() => {
                        if let Some(say) = down.take() {
                            say(&e);
                            #[cfg(feature = "ffmpeg")]
                            crate::media::log::quiet_errors_here();
                        }
                        crate::debug!("{input:?}: {e:#}; trying again");
                        // Asleep until the next try, or woken by either stop.
                        let next = std::time::Instant::now() + jittered(wait);
                        if Stop::watch_all(&[&stop, &until]).sleep_until(next) {
                            break Err(e);
                        }
                        wait = (wait * 2).min(super::reconnect::LONGEST_WAIT);
                    }
                    other => break other,
                }
            };
            let _ = tx.send(opened);
        })?;
    Ok(rx)
}

/// `wait` give or take a quarter, from the clock's nanoseconds.
fn jittered(wait: std::time::Duration) -> std::time::Duration {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    wait.mul_f64(0.75 + f64::from(nanos % 1000) / 2000.0)
}

/// Opens `input` once: the source (wrapped to reconnect where asked) and what its header says.
fn open_once(input: &InputSpec, asked: Asked) -> Result<Opened> {
    #[cfg(feature = "opencv")]
    let (asked, probed) = probe_for_capture(input, asked);
    #[cfg(not(feature = "opencv"))]
    let probed = None;
    open_source(input, asked).map(|source| {
        let source = reconnecting(source, input, asked);
        // A file, or a file at a URL: its rate, time base and audio.
        let media = source.media().or(probed);
        (source, media)
    })
}

/// The pattern's pixel format: `pattern:…`'s, else `--input-format`'s, else BGR.
pub fn pattern_format(o: &super::PatternOpts, asked: &Asked) -> PixelFormat {
    o.format
        .or(asked.input_format.pixel())
        .unwrap_or(PixelFormat::Bgr24)
}

/// Why an opening gave no answer: its thread ended without one.
fn no_answer() -> anyhow::Error {
    anyhow::anyhow!("opening the input failed without a reason (the opening thread ended)")
}

/// An opening's answer where it has come, without waiting (an opening thread that ended
/// without one is an error).
pub fn answer(rx: &Opening) -> Option<Result<Opened>> {
    match rx.try_recv() {
        Ok(result) => Some(result),
        Err(crossbeam_channel::TryRecvError::Empty) => None,
        Err(crossbeam_channel::TryRecvError::Disconnected) => Some(Err(no_answer())),
    }
}

/// Waits for an opening's answer (`interruptibly`'s second half): None where a stop came
/// first (an open that gave up because of the stop is a stop too).
/// It sleeps until one of the two comes (a camera that is down costs its waiting thread no
/// wake-up but `BEAT_EVERY`'s).
pub fn wait(stop: &Stop, rx: &Opening) -> Result<Option<Opened>> {
    let watch = stop.watch();
    loop {
        crate::stop::beat();
        if stop.is_requested() {
            return Ok(None);
        }
        crossbeam_channel::select! {
            recv(rx) -> answer => return match answer {
                // An open that gave up because of the stop (FFmpeg's interrupt callback) is
                // a stop, not an error.
                Ok(Err(_)) if stop.is_requested() => Ok(None),
                Ok(result) => result.map(Some),
                Err(_) => Err(no_answer()),
            },
            recv(watch.woken) -> _ => return Ok(None),
            default(BEAT_EVERY) => {}
        }
    }
}

/// How often a wait for an opening shows the stop watchdog it is alive.
const BEAT_EVERY: std::time::Duration = std::time::Duration::from_millis(500);

/// `source`, reopened when lost where it is a live network stream and `asked.reconnect`.
fn reconnecting(source: Box<dyn Source>, input: &InputSpec, asked: Asked) -> Box<dyn Source> {
    match input {
        InputSpec::Stream(url)
            if asked.reconnect
                && source.is_live()
                && url.contains("://")
                && !url.starts_with("file:") =>
        {
            let again = input.clone();
            Box::new(super::reconnect::Reconnecting::new(
                source,
                Box::new(move || open_source(&again, asked)),
                url.clone(),
                Stop::process(),
            ))
        }
        _ => source,
    }
}

fn open_source(input: &InputSpec, asked: Asked) -> Result<Box<dyn Source>> {
    if asked.trim.is_set() && !trimmable(input, asked) {
        let what = match input {
            InputSpec::Default | InputSpec::Pattern(_) => "the test pattern",
            InputSpec::Camera(_) => "a camera",
            InputSpec::Stdin | InputSpec::Pipe(_) => "standard input or a pipe",
            InputSpec::Image(_) => "a still image",
            InputSpec::Stream(_) | InputSpec::Video(_) if asked.decode == Decode::Opencv => {
                "an input OpenCV decodes (--decode opencv)"
            }
            _ => "a GStreamer pipeline",
        };
        anyhow::bail!(
            "--ss, --to and -t apply to files and streams decoded by FFmpeg's libavcodec, not to {what}"
        );
    }
    let pattern = |o: super::PatternOpts| -> Result<Box<dyn Source>> {
        let size = o.size.or(asked.size).unwrap_or(DEFAULT_SIZE);
        let format = pattern_format(&o, &asked);
        format.check(size).map_err(|e| match o.format {
            Some(_) => anyhow::anyhow!("--input pattern: {format} at {size}: {e}"),
            None => anyhow::anyhow!("--input-format {format}: {e}"),
        })?;
        let pattern = Pattern::new(size, o.fps.or(asked.fps).unwrap_or(DEFAULT_FPS))
            .in_format(format)
            .with_phase(o.phase.unwrap_or(0.0));
        Ok(Box::new(match o.fill_once {
            true => pattern.cheap(),
            false => pattern,
        }))
    };
    match input {
        InputSpec::Pattern(o) => pattern(*o),
        InputSpec::Pipe(path) => Ok(Box::new(super::stdin::Stdin::open_pipe(
            path,
            asked.input_format,
            asked.size,
            asked.fps,
        )?)),
        InputSpec::Stdin => Ok(Box::new(super::stdin::Stdin::open(
            asked.input_format,
            asked.size,
            asked.fps,
        )?)),
        InputSpec::Default => {
            #[cfg(feature = "opencv")]
            if super::capture::default_camera_present() {
                match open_capture(&InputSpec::Camera(0), asked) {
                    Ok(cam) => return Ok(cam),
                    Err(e) => info!("{e:#}; showing the test pattern instead"),
                }
            } else {
                info!("no camera found; showing the test pattern (--input chooses a source)");
            }
            #[cfg(not(feature = "opencv"))]
            info!("built without OpenCV; showing the test pattern");
            pattern(super::PatternOpts::default())
        }
        #[cfg(feature = "opencv")]
        other => open_capture(other, asked),
        #[cfg(all(feature = "ffmpeg", not(feature = "opencv")))]
        other => match by_libav(other, asked)? {
            Some(source) => Ok(source),
            None if asked.decode == Decode::Opencv => {
                anyhow::bail!("--decode opencv: this build has no OpenCV (files and network streams are decoded by FFmpeg's libavcodec: --decode cpu)")
            }
            None => anyhow::bail!("this build has no OpenCV: cameras, still images and GStreamer pipelines need it (files and network streams, standard input, named pipes and the pattern don't)"),
        },
        #[cfg(not(feature = "ffmpeg"))]
        _ => anyhow::bail!("this build has no OpenCV: only --input pattern, standard input (-) and named pipes are available (nor FFmpeg's libraries: files need the ffmpeg feature)"),
    }
}

/// A file or a network stream (not a GStreamer pipeline) decoded by libavcodec (`--decode
/// cpu`, or `gpu`: with NVDEC where it can); None for any other input, or `--decode opencv`.
#[cfg(feature = "ffmpeg")]
fn by_libav(input: &InputSpec, asked: Asked) -> Result<Option<Box<dyn Source>>> {
    let Some(url) = libav_url(input).filter(|_| asked.decode != Decode::Opencv) else {
        return Ok(None);
    };
    let decode = super::decode::Asked {
        pace: paced(asked),
        untouched: asked.untouched,
        packets_only: asked.packets_only,
        nvdec: match asked.decode {
            Decode::Gpu => super::decode::WithNvdec::Yes,
            Decode::Auto => super::decode::WithNvdec::WhereFaster,
            Decode::Cpu | Decode::Opencv => super::decode::WithNvdec::No,
        },
        on_device: asked.on_device,
        pictures: asked.pictures,
        trim: asked.trim,
    };
    let source = super::decode::open(&url, decode)?;
    say_size_and_fps_dont_apply(&source, asked);
    if decode.pace && !asked.window && !source.is_live() {
        info!(
            "{} is read at its own rate, as ffmpeg's -re (--realtime, or every output is live); --no-pace reads it as fast as it decodes",
            source.describe()
        );
    }
    Ok(Some(Box::new(source)))
}

/// Whether `input` is decoded by libavcodec, which `Trim` applies to.
#[cfg(feature = "ffmpeg")]
fn trimmable(input: &InputSpec, asked: Asked) -> bool {
    libav_url(input).is_some() && asked.decode != Decode::Opencv
}

#[cfg(not(feature = "ffmpeg"))]
fn trimmable(_: &InputSpec, _: Asked) -> bool {
    false
}

/// What libavformat opens for `input`: a video file's path, or a URL that is not a GStreamer
/// pipeline; None for what only OpenCV reads (cameras, still images, GStreamer).
#[cfg(feature = "ffmpeg")]
fn libav_url(input: &InputSpec) -> Option<String> {
    match input {
        InputSpec::Video(path) => Some(path.display().to_string()),
        InputSpec::Stream(url) if !url.contains('!') => Some(url.clone()),
        _ => None,
    }
}

/// In a window, or in real time (`Asked::realtime`), a file plays at its own rate, unless
/// `--no-pace` or `--fps 0`.
#[cfg(feature = "ffmpeg")]
fn paced(asked: Asked) -> bool {
    (asked.window || asked.realtime) && !asked.no_pace && asked.fps != Some(0.0)
}

/// `--size` and `--fps` set the pattern and ask a camera; any other source keeps its own,
/// and is said to.
#[cfg(feature = "ffmpeg")]
fn say_size_and_fps_dont_apply(source: &dyn Source, asked: Asked) {
    // --fps times a file whose own rate is absurd (`media::frame_rate`).
    let fps_ignored = asked.fps.is_some_and(|f| f != 0.0) && source.fps().is_some();
    if asked.size.is_some() || fps_ignored {
        crate::warn!(
            "--size and --fps don't apply to {}: it keeps its own size and rate (they set the test pattern, and ask a camera)",
            source.describe()
        );
    }
}

/// Opens an OpenCV source; a camera is asked for `--size` and `--fps`, and for any other
/// source they are said not to apply.
#[cfg(feature = "opencv")]
fn open_capture(input: &InputSpec, asked: Asked) -> Result<Box<dyn Source>> {
    use super::capture;
    if asked.decode == Decode::Gpu && libav_url(input).is_none() {
        crate::warn!(
            "--decode gpu applies to video files and network streams; cameras, still images and GStreamer pipelines are read by OpenCV"
        );
    }
    let request = capture::Request {
        size: asked.size,
        fps: asked.fps.filter(|f| *f > 0.0),
        ..capture::Request::default()
    };
    if matches!(input, InputSpec::Camera(_)) {
        let source = capture::open(input, request)?;
        if let Some(size) = asked.size.filter(|s| *s != source.size()) {
            info!(
                "the camera was asked for {size} and gives {}",
                source.size()
            );
        }
        return Ok(source);
    }
    if let Some(source) = by_libav(input, asked)? {
        return Ok(source);
    }

    let request = capture::Request {
        pace: paced(asked),
        rotation: asked.rotation,
        offset: asked.offset,
        ..capture::Request::default()
    };
    let source = capture::open(input, request)?;
    say_size_and_fps_dont_apply(source.as_ref(), asked);
    Ok(source)
}
