//! Where frames come from: the built-in test pattern (`pattern`), standard input or a named
//! pipe (`stdin`: YUV4MPEG2 or raw frames), files and network streams decoded by libavcodec
//! (`decode`), or anything OpenCV can open (`capture`: cameras, GStreamer pipelines, still
//! images, and files with `--decode opencv`), with `media` reading a file's timing,
//! rotation and audio through libavformat, `reconnect` opening a lost live stream again, and
//! `tap` handing a decoded input's packets on untouched (`--record`).
//!
//! A source has a fixed frame size and pixel format, known once it is open. `read` fills a
//! ring buffer with the next frame: packed BGR, or the source's own YUV layout, which the
//! backend converts (so that a frame crosses the CPU and PCIe as it came); a decoder may
//! instead lend the frame where it lies (`lent`: NVDEC's surface, or a picture of the
//! CPU decoder's own pool, as `Pictures` says), and the slot's buffer is not written. `skip` consumes
//! one frame without keeping it, which live sources do when the ring stays full (past a
//! frame's time, and the patience `burst_budget` gives a source that buffers what arrives)
//! so that what is shown stays fresh.

pub mod open;
mod opens;
pub mod pattern;
pub mod reconnect;
pub mod remote;
pub mod stdin;

#[cfg(feature = "opencv")]
pub mod capture;
#[cfg(feature = "ffmpeg")]
pub mod continuity;
#[cfg(feature = "ffmpeg")]
pub mod decode;
#[cfg(feature = "ffmpeg")]
mod lease;
#[cfg(feature = "ffmpeg")]
pub(crate) mod nvdec;
#[cfg(feature = "ffmpeg")]
mod pinned;

use std::os::unix::fs::FileTypeExt;

use anyhow::Result;

use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// Silences the libraries' own log lines: OpenCV's below errors (its GStreamer and V4L2
/// warnings while probing), where the build has OpenCV; with `silent` (`-q`), every line of
/// OpenCV's and GLib's (GStreamer's `GStreamer-CRITICAL` lines), so that only framepipe's own
/// errors, warnings and summary remain. FFmpeg's lines follow the same level (`capture`'s
/// log hook, `media::init`).
pub fn quiet_libraries(silent: bool) {
    #[cfg(feature = "opencv")]
    let _ = opencv::core::set_log_level(if silent {
        opencv::core::LogLevel::LOG_LEVEL_SILENT
    } else {
        opencv::core::LogLevel::LOG_LEVEL_ERROR
    });
    if silent {
        silence_glib();
    }
}

/// Replaces GLib's default log handler with one that prints nothing, where the process has
/// GLib (OpenCV's GStreamer backend loads it).
fn silence_glib() {
    type LogFunc = unsafe extern "C" fn(
        *const std::ffi::c_char,
        std::ffi::c_int,
        *const std::ffi::c_char,
        *mut std::ffi::c_void,
    );
    unsafe extern "C" fn nothing(
        _: *const std::ffi::c_char,
        _: std::ffi::c_int,
        _: *const std::ffi::c_char,
        _: *mut std::ffi::c_void,
    ) {
    }
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only looks the symbol up; a
    // found `g_log_set_default_handler` has the C type GLib declares (gmessages.h): it takes a
    // GLogFunc and user data and returns the previous handler.
    unsafe {
        let set = libc::dlsym(libc::RTLD_DEFAULT, c"g_log_set_default_handler".as_ptr());
        if set.is_null() {
            return;
        }
        let set: unsafe extern "C" fn(LogFunc, *mut std::ffi::c_void) -> Option<LogFunc> =
            std::mem::transmute(set);
        set(nothing, std::ptr::null_mut());
    }
}

pub use crate::media::tags::{PictureTags, Range, Siting};

/// "what (WxH, 29.970 fps)": a source's line for the log.
pub fn described(what: &str, size: FrameSize, fps: Option<f64>) -> String {
    let fps = fps.map(|f| format!(", {f:.3} fps")).unwrap_or_default();
    format!("{what} ({size}{fps})")
}

/// Plays a file at its own times, like a player (a window run): when each frame is due.
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    /// The file's rate, for frames without a time.
    fps: f64,
    /// When the clock started, with the file at which position (seconds).
    clock: Option<(std::time::Instant, f64)>,
}

impl Pace {
    /// A clock for a file of `fps` frames per second.
    pub fn new(fps: f64) -> Self {
        Self { fps, clock: None }
    }

    /// When the frame after `frames` frames is due, the last two of them at `last` and
    /// `before` seconds on the file's timeline (a variable rate keeps its last gap); a clock
    /// behind by more than half a second (a pause, a slow decode) plays on from now instead
    /// of rushing.
    pub fn due(
        &mut self,
        frames: u64,
        last: Option<f64>,
        before: Option<f64>,
    ) -> std::time::Instant {
        let next = match (last, before) {
            (Some(p), Some(q)) if p > q && frames > 0 => p + (p - q),
            (Some(p), _) if frames > 0 => p + 1.0 / self.fps,
            _ => frames as f64 / self.fps,
        };
        let now = std::time::Instant::now();
        let (start, first) = *self.clock.get_or_insert((now, next));
        let due = start + std::time::Duration::from_secs_f64((next - first).max(0.0));
        if now > due + std::time::Duration::from_millis(500) {
            self.clock = Some((now, next));
            return now;
        }
        due
    }
}

/// What `read` found.
#[derive(Debug, PartialEq, Eq)]
pub enum Read {
    /// A frame was read.
    Frame,
    /// The input has no more frames.
    End,
}

/// Where a CPU decoder's pictures are decoded (`source::pinned`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pictures {
    /// FFmpeg's own buffers: each picture is copied into its slot (`--pageable`, which
    /// shows what page-locking is for; NVDEC's and OpenCV's pictures).
    #[default]
    Copied,
    /// A pool of the decoder's own, each picture lent to its slot as it lies: the run's
    /// backend is the CPU's.
    Lent,
    /// The same, page-locked: the run's backend may be CUDA's (the pool asks CUDA itself
    /// where the plan did not).
    Locked,
}

/// Where frames come from: fills ring buffers with frames of one size and format.
pub trait Source: Send {
    /// One line for the log, e.g. "file clip.mp4 (641x479, 25 fps)".
    fn describe(&self) -> String;
    /// The size of every frame it gives.
    fn size(&self) -> FrameSize;
    /// The layout of the frames `read` writes (packed BGR unless the source says).
    fn format(&self) -> PixelFormat {
        PixelFormat::Bgr24
    }
    /// A YUV4MPEG2 input's pixel aspect ratio and interlacing, which a Y4M output keeps.
    fn picture_tags(&self) -> Option<PictureTags> {
        None
    }
    /// Frames per second the source runs at, when known.
    fn fps(&self) -> Option<f64>;
    /// Live sources drop frames when the ring is full; others wait for a free slot.
    fn is_live(&self) -> bool;
    /// How long, in all, a live source may wait for a free slot past a frame's time before
    /// it drops frames (the capture thread's patience): a source that keeps what arrives
    /// meanwhile (a network stream read by FFmpeg: its packets wait in the demuxer's and
    /// the socket's buffers) rides out a burst, such as the frames it buffered while it
    /// was probed; a camera, whose driver drops frames unseen while it is not read, has
    /// none.
    fn burst_budget(&self) -> std::time::Duration {
        std::time::Duration::ZERO
    }
    /// Writes the next frame into `frame` (`format().bytes(size())` long), or leaves it in
    /// device memory (`lent`).
    fn read(&mut self, frame: &mut [u8]) -> Result<Read>;
    /// Where the frame `read` just gave was left in device memory instead of being written
    /// into its buffer (NVDEC's pictures, `nvdec.rs`): its memory, whose lease keeps it
    /// until dropped, and its planes. Taken once per frame; None for a frame `read` wrote.
    fn lent(&mut self) -> Option<(crate::desc::Memory, crate::desc::Planes)> {
        None
    }
    /// Consumes the next frame without keeping it.
    fn skip(&mut self) -> Result<Read>;
    /// After a stop: the frames still inside a live source (its demuxer's last packets, its
    /// decoder's delayed pictures) come from `read` from now on, without waiting for more
    /// input, until `Read::End`; false where a source holds none.
    fn begin_drain(&mut self) -> bool {
        false
    }
    /// When the next frame is due, for a source paced to a rate; the capture thread waits
    /// until then (waking at once on a stop) before `read`.
    fn due(&mut self) -> Option<std::time::Instant> {
        None
    }
    /// Frames the source holds, when it is a file that says.
    fn frame_count(&self) -> Option<u64> {
        None
    }
    /// The last frame's presentation time, seconds on the output's timeline, where the
    /// source has one (a file's frames); video outputs keep it.
    fn timestamp(&self) -> Option<f64> {
        None
    }
    /// How a reconnecting input is doing (`reconnect`); None for any other.
    fn health(&self) -> Option<std::sync::Arc<reconnect::Health>> {
        None
    }
    /// What libavformat read of a file's header when the source opened it (rate, time
    /// base, rotation, audio: the outputs keep them); None for a live stream or any other
    /// source.
    fn media(&self) -> Option<open::Media> {
        None
    }
    /// The last frame's presentation time as the source keeps it (a file's own time base,
    /// exact); by default `timestamp` to the microsecond.
    fn pts(&self) -> Option<crate::desc::Timestamp> {
        self.timestamp()
            .and_then(crate::desc::Timestamp::from_seconds)
    }
    /// Hands every packet the source reads to `tap` from now on (`--record`); gives the tap
    /// back where the source reads no packets (the pattern, a camera, standard input).
    #[cfg(feature = "ffmpeg")]
    fn tap(
        &mut self,
        tap: crate::media::tap::Tap,
    ) -> std::result::Result<(), crate::media::tap::Tap> {
        Err(tap)
    }
}

/// The part of an input that is read (`--ss`, `--to`, `-t`), seconds on its own timeline
/// from its start, as ffmpeg's input options count them.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Trim {
    /// Frames before this are dropped (after a seek to the keyframe before).
    pub start: f64,
    /// Frames from this on are not read.
    pub end: Option<f64>,
}

impl Trim {
    /// Whether any part is cut.
    pub fn is_set(&self) -> bool {
        self.start > 0.0 || self.end.is_some()
    }
}

/// What `--input` names, before anything is opened.
#[derive(Clone, Debug, PartialEq)]
pub enum InputSpec {
    /// No `--input`: the default camera, or the test pattern where there is none.
    Default,
    /// The built-in test pattern, with its own size, format or rate where given
    /// (`pattern:640x360:nv12:25`).
    Pattern(PatternOpts),
    /// A camera by index.
    Camera(i32),
    /// A URL (`rtsp://…`, `http://…`) or a GStreamer pipeline (holds `!`).
    Stream(String),
    /// A still image, processed in a loop.
    Image(std::path::PathBuf),
    /// A video file.
    Video(std::path::PathBuf),
    /// Standard input (`-`): a YUV4MPEG2 stream, or raw frames (`--input-format`).
    Stdin,
    /// A named pipe (FIFO), read as standard input is.
    Pipe(std::path::PathBuf),
}

impl InputSpec {
    /// Whether FFmpeg's demuxer reads it, so that it has packets to copy or serve: a file,
    /// or a URL that is neither a GStreamer pipeline nor a V4L2 camera's path.
    pub fn has_packets(&self) -> bool {
        match self {
            InputSpec::Video(_) => true,
            InputSpec::Stream(url) => !url.contains('!') && !url.starts_with("/dev/"),
            _ => false,
        }
    }
}

/// What `pattern:…` says of the pattern; what it leaves out comes from `--size`,
/// `--input-format` and `--fps`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct PatternOpts {
    /// Its size.
    pub size: Option<FrameSize>,
    /// Its pixel format.
    pub format: Option<crate::pixel::PixelFormat>,
    /// Its rate (0: unpaced).
    pub fps: Option<f64>,
    /// Its first frame is due this share (0 to 1) of a frame period after the start.
    pub phase: Option<f64>,
    /// Each ring slot is filled once, then only the frame number is stamped in it (as the
    /// bench's pattern does): the pipeline measured without the source's copying.
    pub fill_once: bool,
}

/// Why an `--input` can't be read, found before opening it.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// An empty `--input`.
    #[error("--input is empty")]
    Empty,
    /// A camera index below 0.
    #[error("camera index {0} is negative")]
    NegativeCamera(i32),
    /// No such file.
    #[error("input '{0}' does not exist")]
    Missing(String),
    /// The file can't be read.
    #[error("input '{input}' cannot be read: {source}")]
    Unreadable {
        /// As given.
        input: String,
        /// The system's reason.
        source: std::io::Error,
    },
    /// A folder.
    #[error("input '{0}' is a directory, not a video or image file")]
    Folder(String),
    /// A device, socket or other special file.
    #[error("input '{input}' is a {kind}, not a file: framepipe reads video and image files, cameras, URLs, GStreamer pipelines, named pipes and standard input (YUV4MPEG2 or raw frames)")]
    Special {
        /// As given.
        input: String,
        /// What it is.
        kind: &'static str,
    },
    /// An empty file.
    #[error("input '{0}' is an empty file")]
    EmptyFile(String),
    /// A `pattern:` setting.
    #[error("--input 'pattern:{words}': {why}")]
    Pattern {
        /// The words after `pattern:`.
        words: String,
        /// What is wrong with them.
        why: PatternError,
    },
}

/// What is wrong with the settings of a `pattern:` input.
#[derive(Debug, thiserror::Error)]
pub enum PatternError {
    /// Its size.
    #[error(transparent)]
    Size(crate::frame::ParseError),
    /// A name that is no pixel format.
    #[error("'{0}' is not a pixel format")]
    NotAFormat(String),
    /// A rate out of range.
    #[error(
        "'{value}' is not a rate (0, or {} to {} frames per second)",
        crate::frame::MIN_FPS,
        crate::frame::MAX_FPS
    )]
    NotARate {
        /// As given.
        value: String,
    },
    /// A setting given twice.
    #[error("the {0} is given twice")]
    Twice(&'static str),
    /// A phase outside 0 to 1.
    #[error("phase '{0}' is not between 0 and 1")]
    Phase(String),
    /// A key that is no setting.
    #[error("'{0}' is not a pattern setting (size, format, fps, phase, fill=once)")]
    NotASetting(String),
    /// An empty setting.
    #[error("an empty setting")]
    EmptySetting,
    /// A word that is no size, format or rate.
    #[error("'{0}' is neither a size (640x360), a pixel format (nv12) nor a rate (25)")]
    Neither(String),
}

impl PatternOpts {
    /// Reads the words after `pattern:` (separated by ':'), each a size (`640x360`), a pixel
    /// format (`nv12`) or a rate (`25`, `29.97`, `0`), or the same as `size=`, `format=`,
    /// `fps=`; also `phase=F` (0 to 1 of a frame period) and `fill=once`; each at most once.
    pub fn parse(words: &str) -> Result<Self, InputError> {
        let mut o = PatternOpts::default();
        for word in words.split(':') {
            let (key, value) = match word.split_once('=') {
                Some((k, v)) => (Some(k.trim()), v.trim()),
                None => (None, word.trim()),
            };
            let bad = |why: PatternError| InputError::Pattern {
                words: words.into(),
                why,
            };
            let size = || value.parse::<FrameSize>().map_err(PatternError::Size);
            let format = || {
                crate::pixel::PixelFormat::from_name(value)
                    .ok_or_else(|| PatternError::NotAFormat(value.into()))
            };
            let fps = || match value.parse::<f64>() {
                Ok(f)
                    if f == 0.0 || (crate::frame::MIN_FPS..=crate::frame::MAX_FPS).contains(&f) =>
                {
                    Ok(f)
                }
                _ => Err(PatternError::NotARate {
                    value: value.into(),
                }),
            };
            let twice = |what: &'static str| bad(PatternError::Twice(what));
            match key {
                Some("size" | "s") => {
                    if o.size.replace(size().map_err(&bad)?).is_some() {
                        return Err(twice("size"));
                    }
                }
                Some("format" | "pix_fmt") => {
                    if o.format.replace(format().map_err(&bad)?).is_some() {
                        return Err(twice("format"));
                    }
                }
                Some("fps" | "rate" | "r") => {
                    if o.fps.replace(fps().map_err(&bad)?).is_some() {
                        return Err(twice("rate"));
                    }
                }
                Some("phase") => match value.parse::<f64>() {
                    Ok(p) if (0.0..=1.0).contains(&p) && o.phase.is_none() => o.phase = Some(p),
                    Ok(_) if o.phase.is_some() => return Err(twice("phase")),
                    _ => return Err(bad(PatternError::Phase(value.into()))),
                },
                Some("fill") if value == "once" => o.fill_once = true,
                Some(k) => return Err(bad(PatternError::NotASetting(format!("{k}={value}")))),
                None if value.is_empty() => return Err(bad(PatternError::EmptySetting)),
                None if value.contains('x') && size().is_ok() => {
                    if o.size.replace(size().map_err(&bad)?).is_some() {
                        return Err(twice("size"));
                    }
                }
                None if value.parse::<f64>().is_ok() => {
                    if o.fps.replace(fps().map_err(&bad)?).is_some() {
                        return Err(twice("rate"));
                    }
                }
                None => match format() {
                    Ok(f) => {
                        if o.format.replace(f).is_some() {
                            return Err(twice("format"));
                        }
                    }
                    Err(_) => return Err(bad(PatternError::Neither(value.into()))),
                },
            }
        }
        Ok(o)
    }
}

/// File extensions opened as still images (looped) rather than as videos.
pub const IMAGE_EXTENSIONS: &[&str] = &[
    "jpg", "jpeg", "png", "bmp", "tif", "tiff", "webp", "ppm", "pgm", "pnm", "jp2",
];

impl InputSpec {
    /// Classifies `--input`, checking what can be checked without opening it.
    pub fn parse(input: Option<&str>) -> Result<Self, InputError> {
        let Some(s) = input else {
            return Ok(InputSpec::Default);
        };
        let s = s.trim();
        if s.is_empty() {
            return Err(InputError::Empty);
        }
        if s == "-" {
            return Ok(InputSpec::Stdin);
        }
        if s.eq_ignore_ascii_case("pattern") {
            return Ok(InputSpec::Pattern(PatternOpts::default()));
        }
        if let Some(words) = s
            .get(..8)
            .filter(|p| p.eq_ignore_ascii_case("pattern:"))
            .map(|_| &s[8..])
        {
            return PatternOpts::parse(words).map(InputSpec::Pattern);
        }
        if let Ok(index) = s.parse::<i32>() {
            if index < 0 {
                return Err(InputError::NegativeCamera(index));
            }
            return Ok(InputSpec::Camera(index));
        }
        if s.contains("://") || s.contains('!') {
            return Ok(InputSpec::Stream(s.to_string()));
        }
        let path = std::path::PathBuf::from(s);
        let meta = std::fs::metadata(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => InputError::Missing(s.into()),
            _ => InputError::Unreadable {
                input: s.into(),
                source: e,
            },
        })?;
        if meta.is_dir() {
            return Err(InputError::Folder(s.into()));
        }
        if meta.file_type().is_fifo() {
            return Ok(InputSpec::Pipe(path)); // read as standard input is
        }
        if let Some(kind) = crate::paths::special_kind(&meta) {
            if kind == "character device" && s.starts_with("/dev/video") {
                return Ok(InputSpec::Stream(s.to_string())); // a V4L2 camera by its path
            }
            return Err(InputError::Special {
                input: s.into(),
                kind,
            });
        }
        if meta.len() == 0 {
            return Err(InputError::EmptyFile(s.into()));
        }
        if let Err(e) = std::fs::File::open(&path) {
            return Err(InputError::Unreadable {
                input: s.into(),
                source: e,
            });
        }
        if IMAGE_EXTENSIONS.contains(&crate::paths::extension(&path).as_str()) {
            Ok(InputSpec::Image(path))
        } else {
            Ok(InputSpec::Video(path))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_inputs() {
        assert_eq!(InputSpec::parse(None).unwrap(), InputSpec::Default);
        assert_eq!(
            InputSpec::parse(Some("pattern")).unwrap(),
            InputSpec::Pattern(PatternOpts::default())
        );
        let p = InputSpec::parse(Some("Pattern:640x360:nv12:fps=25")).unwrap();
        assert_eq!(
            p,
            InputSpec::Pattern(PatternOpts {
                size: Some(FrameSize::new(640, 360)),
                format: Some(crate::pixel::PixelFormat::Nv12),
                fps: Some(25.0),
                ..PatternOpts::default()
            })
        );
        for bad in [
            "pattern:",
            "pattern:640x360:320x240",
            "pattern:teal",
            "pattern:fps=-3",
            "pattern:depth=8",
        ] {
            let e = InputSpec::parse(Some(bad)).unwrap_err().to_string();
            assert!(e.starts_with("--input 'pattern:"), "{bad}: {e}");
        }
        assert_eq!(InputSpec::parse(Some("2")).unwrap(), InputSpec::Camera(2));
        assert!(matches!(
            InputSpec::parse(Some("rtsp://cam/1")).unwrap(),
            InputSpec::Stream(_)
        ));
        assert!(matches!(
            InputSpec::parse(Some("videotestsrc ! appsink")).unwrap(),
            InputSpec::Stream(_)
        ));
        let dir = std::env::temp_dir();
        let e = InputSpec::parse(dir.to_str()).unwrap_err().to_string();
        assert!(e.contains("is a directory"), "{e}");
        let e = InputSpec::parse(Some("/no/such/clip.mp4"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not exist"), "{e}");
        let empty = dir.join(format!("framepipe-empty-{}.mp4", std::process::id()));
        std::fs::write(&empty, b"").unwrap();
        let e = InputSpec::parse(empty.to_str()).unwrap_err().to_string();
        assert!(e.contains("empty file"), "{e}");
        std::fs::remove_file(empty).unwrap();
        let fifo = dir.join(format!("framepipe-fifo-{}", std::process::id()));
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(
            InputSpec::parse(fifo.to_str()).unwrap(),
            InputSpec::Pipe(fifo.clone())
        );
        std::fs::remove_file(fifo).unwrap();
        assert!(InputSpec::parse(Some("-1")).is_err());
    }
}
