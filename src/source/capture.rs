//! Sources opened with OpenCV: cameras, video files, URLs and GStreamer pipelines
//! (`VideoCapture`), and still images (`imread`, shown in a loop).
//!
//! `VideoCapture::read` writes straight into the ring buffer through a `Mat` header over
//! it. After every read we check that OpenCV did not swap in a buffer of its own (a frame of
//! another size or format); if it did, the frame is converted into the ring buffer instead.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use opencv::core::{self, Mat, Size, Vec3b};
use opencv::prelude::*;
use opencv::{imgcodecs, imgproc, videoio};

use super::{InputSpec, Read, Source};
use crate::frame::FrameSize;
use crate::media::log as ffmpeg_log;
use crate::pixel::PixelFormat;

/// An open that failed after this long gave up waiting (OpenCV's FFmpeg backend waits 30 s
/// for a network input's first answer) rather than being refused.
const OPEN_TIMEOUT_SEEN: Duration = Duration::from_secs(20);

/// A `VideoCapture` of any kind.
pub struct Capture {
    cap: videoio::VideoCapture,
    what: String,
    size: FrameSize,
    fps: Option<f64>,
    live: bool,
    /// The frame read while opening (to learn the size), handed out first.
    first: Option<Mat>,
    /// Frames handed out so far.
    frames: u64,
    /// Quarter turns clockwise that make a frame upright (a file's display matrix), and the
    /// decoder's own frame size; OpenCV's auto-rotation is off (4.6 turns the wrong way).
    turn: Option<(i32, FrameSize)>,
    /// A decoded frame before it is turned.
    raw: Mat,
    /// Seconds added to OpenCV's stream time to put a frame on the file's timeline (where
    /// its audio is), for files.
    offset: Option<f64>,
    /// The last frame's presentation time.
    pts: Option<f64>,
    /// A GStreamer pipeline whose appsink gets YUV (OpenCV 4.6 hands its planes out as
    /// they are): the format's name, `cvtColor` code and pixel format (`raw_caps`).
    yuv_caps: Option<RawCaps>,
    /// The layout of the frames `read` gives: BGR, or the appsink's own YUV.
    format: PixelFormat,
    /// A live source's clock: when its first frame was handed out (its frames are timed
    /// by when they arrived, so that a dropped frame leaves a gap in a file, as in ffmpeg).
    live_start: Option<Instant>,
    /// Playing at the file's own times: its rate (for frames without a time), and when the
    /// clock started with the file at which position (seconds).
    pace: Option<super::Pace>,
    /// The frame before the last one's presentation time (the gap to the next is taken to
    /// be the last gap: a variable-rate file keeps its rhythm).
    prev_pts: Option<f64>,
}

/// What a camera is asked for before its first frame (`--size`, `--fps`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Request {
    /// Frame size.
    pub size: Option<FrameSize>,
    /// Frames per second.
    pub fps: Option<f64>,
    /// Hand a file's frames out at its own rate, like a player (window runs).
    pub pace: bool,
    /// A file's display-matrix rotation, clockwise degrees (`media::MediaInfo`).
    pub rotation: u32,
    /// A file's video start on its timeline, seconds (`media::MediaInfo::video_offset`).
    pub offset: f64,
}

/// Whether a stream OpenCV opened is a file at a URL (`http://…/clip.mp4`): a protocol that
/// serves files, and a frame count from a duration. Such a stream is read as a file (waited
/// for, never dropped); anything else at a URL is live. Decided on the one connection
/// OpenCV opened: a live server may take a single client (`ffmpeg -listen 1`).
fn is_file_at_url(url: &str, cap: &videoio::VideoCapture) -> bool {
    let lower = url.to_ascii_lowercase();
    let serves_files = ["http://", "https://", "ftp://", "file:"]
        .iter()
        .any(|p| lower.starts_with(p));
    let frames = cap.get(videoio::CAP_PROP_FRAME_COUNT).unwrap_or(0.0);
    serves_files && (1.0..1e9).contains(&frames)
}

/// Opens what `spec` names (a camera asked for `request`); `Default` is the default camera
/// and is never called here.
pub fn open(spec: &InputSpec, request: Request) -> Result<Box<dyn Source>> {
    // Before OpenCV's first FFmpeg call: its lines go through the hook from the start.
    ffmpeg_log::install();
    match spec {
        InputSpec::Camera(i) => open_camera(*i, request),
        InputSpec::Stream(s) => open_stream(s, request),
        InputSpec::Video(path) => open_video(path, request),
        InputSpec::Image(path) => StillImage::open(path).map(|s| Box::new(s) as _),
        InputSpec::Default | InputSpec::Pattern(_) | InputSpec::Stdin | InputSpec::Pipe(_) => {
            Err(crate::bug!("{spec:?} is not an OpenCV source"))
        }
    }
}

/// Camera `i`, asked for `request`'s size and rate, in YUYV where it gives it raw.
fn open_camera(i: i32, request: Request) -> Result<Box<dyn Source>> {
    let mut cap = videoio::VideoCapture::new(i, videoio::CAP_ANY)
        .with_context(|| format!("opening camera {i}"))?;
    // Asked before the first frame; the camera gives what it can (start reads back
    // the real size from that frame).
    if let Some(size) = request.size {
        let _ = cap.set(videoio::CAP_PROP_FRAME_WIDTH, size.width as f64);
        let _ = cap.set(videoio::CAP_PROP_FRAME_HEIGHT, size.height as f64);
    }
    if let Some(fps) = request.fps {
        let _ = cap.set(videoio::CAP_PROP_FPS, fps);
    }
    let raw = ask_raw_yuyv(&mut cap);
    let mut c = Capture::start(cap, format!("camera {i}"), true, false)?;
    if raw {
        c.take_camera_yuyv()?;
    }
    Ok(Box::new(c))
}

/// A network stream or a GStreamer pipeline (`!`), read live unless it is a file behind a
/// URL (it has a duration).
fn open_stream(s: &str, request: Request) -> Result<Box<dyn Source>> {
    let api = if s.contains('!') {
        videoio::CAP_GSTREAMER
    } else {
        videoio::CAP_ANY
    };
    let kind = if api == videoio::CAP_GSTREAMER {
        "GStreamer pipeline"
    } else {
        "stream"
    };
    let asked = std::time::Instant::now();
    let cap = videoio::VideoCapture::from_file(s, api)
        .with_context(|| format!("opening {kind} '{s}'"))?;
    if !cap.is_opened().unwrap_or(false) && asked.elapsed() >= OPEN_TIMEOUT_SEEN {
        bail!(
            "{kind} '{s}' timed out: no answer within {:.0} s (OpenCV's FFmpeg backend gives up after 30 s); is the server up and the address right?",
            asked.elapsed().as_secs_f64()
        );
    }
    let live = api == videoio::CAP_GSTREAMER || !is_file_at_url(s, &cap);
    let mut c = Capture::start(cap, format!("{kind} '{s}'"), live, request.pace && !live)?;
    if live {
        crate::info!(
            "{kind} '{s}' is read live: when the pipeline falls behind, frames are dropped (counted at the end) so that what comes out stays current; its audio, if any, is not recorded"
        );
    } else {
        crate::info!("'{s}' is a file (it has a duration): read as one, every frame kept in order");
        c.timed_by_stream(0.0);
    }
    if api == videoio::CAP_GSTREAMER {
        if let Some(raw) = raw_caps(s) {
            c.take_raw(raw)?;
        }
    }
    Ok(Box::new(c))
}

/// A video file, turned upright and timed by its stream, as ffmpeg does.
fn open_video(path: &std::path::Path, request: Request) -> Result<Box<dyn Source>> {
    let p = path.display().to_string();
    let mut cap = videoio::VideoCapture::from_file(&p, videoio::CAP_FFMPEG)
        .with_context(|| format!("opening video file '{p}'"))?;
    // Frames are turned upright here, the way ffmpeg does (OpenCV 4.6 turns a
    // 90-degree matrix the other way).
    let _ = cap.set(videoio::CAP_PROP_ORIENTATION_AUTO, 0.0);
    let mut c = Capture::start(cap, format!("file '{p}'"), false, request.pace)?;
    c.timed_by_stream(request.offset);
    if request.rotation != 0 {
        c.turn_by(request.rotation)?;
    }
    Ok(Box::new(c))
}

/// The YUV layout a GStreamer pipeline's appsink receives, where its last caps before
/// `appsink` name one (`… ! video/x-raw,format=NV12 ! appsink`): the format's name, the
/// `cvtColor` code that turns it into BGR exactly, and the pixel format the backends take
/// it in as it comes (NV12, I420, YUY2), if any.
pub fn raw_caps(pipeline: &str) -> Option<RawCaps> {
    let parts: Vec<&str> = pipeline.split('!').map(str::trim).collect();
    let [.., caps, sink] = parts.as_slice() else {
        return None;
    };
    if !sink.starts_with("appsink") || !caps.starts_with("video/x-raw") {
        return None;
    }
    let format = caps
        .split(',')
        .find_map(|f| f.trim().strip_prefix("format="))?;
    let format = format.trim_start_matches("(string)").trim();
    use PixelFormat::{Nv12, Yuyv, I420};
    Some(match format {
        "NV12" => ("NV12", imgproc::COLOR_YUV2BGR_NV12, Some(Nv12)),
        "NV21" => ("NV21", imgproc::COLOR_YUV2BGR_NV21, None),
        "I420" => ("I420", imgproc::COLOR_YUV2BGR_I420, Some(I420)),
        "YV12" => ("YV12", imgproc::COLOR_YUV2BGR_YV12, None),
        "YUY2" => ("YUY2", imgproc::COLOR_YUV2BGR_YUY2, Some(Yuyv)),
        "UYVY" => ("UYVY", imgproc::COLOR_YUV2BGR_UYVY, None),
        "YVYU" => ("YVYU", imgproc::COLOR_YUV2BGR_YVYU, None),
        _ => return None,
    })
}

/// A raw YUV appsink's layout (`raw_caps`): its name, the `cvtColor` code to BGR, and the
/// pixel format it is carried in untouched, where the backends take it.
pub type RawCaps = (&'static str, i32, Option<PixelFormat>);

/// Asks a V4L2 camera that sends YUYV for its frames unconverted (`CAP_PROP_CONVERT_RGB`
/// off), so that they cross PCIe at 2 bytes a pixel and the GPU converts them; true where
/// the camera took the request. (Not tested here: CI has no camera. `take_camera_yuyv`
/// checks the first frame's bytes and falls back to OpenCV's conversion.)
fn ask_raw_yuyv(cap: &mut videoio::VideoCapture) -> bool {
    let yuyv = f64::from(i32::from_le_bytes(*b"YUYV"));
    cap.get_backend_name().is_ok_and(|b| b == "V4L2")
        && cap.get(videoio::CAP_PROP_FOURCC).is_ok_and(|f| f == yuyv)
        && cap.set(videoio::CAP_PROP_CONVERT_RGB, 0.0).unwrap_or(false)
}

/// Whether a default camera seems to exist, checked without OpenCV's warnings.
pub fn default_camera_present() -> bool {
    Path::new("/dev/video0").exists()
}

impl Capture {
    fn start(mut cap: videoio::VideoCapture, what: String, live: bool, pace: bool) -> Result<Self> {
        if !cap.is_opened()? {
            if live {
                bail!("could not open {what}");
            }
            bail!("{what} is not a video OpenCV can decode");
        }
        let mut first = Mat::default();
        if !cap.read(&mut first)? || first.empty() {
            bail!("{what} opened, but gave no frame");
        }
        let size = FrameSize::new(first.cols() as usize, first.rows() as usize);
        let fps = cap
            .get(videoio::CAP_PROP_FPS)
            .ok()
            .filter(|f| f.is_finite() && *f > 0.0 && *f < 1000.0);
        Ok(Self {
            cap,
            what,
            size,
            fps,
            live,
            first: Some(first),
            frames: 0,
            turn: None,
            raw: Mat::default(),
            offset: None,
            pts: None,
            prev_pts: None,
            live_start: None,
            yuv_caps: None,
            format: PixelFormat::Bgr24,
            pace: fps.filter(|_| pace).map(super::Pace::new),
        })
    }

    /// Times frames by the stream's own clock, placed `offset` seconds into the output's
    /// timeline (a file, also one at a URL).
    fn timed_by_stream(&mut self, offset: f64) {
        self.offset = Some(offset);
        self.pts = self.stream_time();
    }

    /// The current frame's time in its stream, on the file's timeline (files only).
    fn stream_time(&self) -> Option<f64> {
        let offset = self.offset?;
        let ms = self.cap.get(videoio::CAP_PROP_POS_MSEC).ok()?;
        ms.is_finite().then_some(ms / 1000.0 + offset)
    }

    /// Hands frames out turned `degrees` clockwise (90, 180, 270).
    fn turn_by(&mut self, degrees: u32) -> Result<()> {
        let code = match degrees {
            90 => core::ROTATE_90_CLOCKWISE,
            180 => core::ROTATE_180,
            270 => core::ROTATE_90_COUNTERCLOCKWISE,
            _ => return Ok(()),
        };
        let coded = self.size;
        if degrees != 180 {
            self.size = FrameSize::new(coded.height, coded.width);
        }
        if let Some(first) = self.first.take() {
            let mut turned = Mat::default();
            core::rotate(&first, &mut turned, code)?;
            self.first = Some(turned);
        }
        self.what = format!(
            "{}, turned {degrees} degrees as its display matrix says",
            self.what
        );
        self.turn = Some((code, coded));
        Ok(())
    }

    /// After `ask_raw_yuyv`: carries the camera's frames as YUYV where the first one holds
    /// exactly a YUYV frame's bytes at the size the camera reports; else turns OpenCV's
    /// conversion back on and starts again from a converted frame.
    fn take_camera_yuyv(&mut self) -> Result<()> {
        let first = self.first.as_ref().context("no first frame")?;
        let dim = |p| self.cap.get(p).map(|v| v as usize).unwrap_or(0);
        let size = FrameSize::new(
            dim(videoio::CAP_PROP_FRAME_WIDTH),
            dim(videoio::CAP_PROP_FRAME_HEIGHT),
        );
        let bytes = first.total() * first.elem_size()?;
        if PixelFormat::Yuyv.check(size).is_ok() && bytes == PixelFormat::Yuyv.bytes(size) {
            self.size = size;
            self.yuv_caps = Some(("YUYV", imgproc::COLOR_YUV2BGR_YUY2, Some(PixelFormat::Yuyv)));
            self.format = PixelFormat::Yuyv;
            self.what = format!("{}, YUYV carried as it comes", self.what);
            return Ok(());
        }
        let _ = self.cap.set(videoio::CAP_PROP_CONVERT_RGB, 1.0);
        let mut again = Mat::default();
        if !self.cap.read(&mut again)? || again.empty() || again.channels() != 3 {
            bail!(
                "{}: gave no usable frame after asking for raw YUYV",
                self.what
            );
        }
        self.size = FrameSize::new(again.cols() as usize, again.rows() as usize);
        self.first = Some(again);
        Ok(())
    }

    /// Takes frames as the YUV layout `raw` (from the pipeline's caps): the size is the
    /// picture's, and each frame is converted as `cvtColor` does.
    fn take_raw(&mut self, raw: RawCaps) -> Result<()> {
        let first = self.first.as_ref().context("no first frame")?;
        let (name, _, native) = raw;
        let (rows, cols) = (first.rows() as usize, first.cols() as usize);
        let size = match first.channels() {
            1 if rows % 3 == 0 => FrameSize::new(cols, rows * 2 / 3),
            2 => FrameSize::new(cols, rows),
            n => bail!(
                "{}: the caps ask for {name}, but OpenCV handed out {cols}x{rows} frames of {n} channel(s)",
                self.what
            ),
        };
        self.size = size;
        self.yuv_caps = Some(raw);
        // Carried as it comes where the backends take the layout (and the size suits it);
        // else converted to BGR here.
        let bytes = first.total() * first.elem_size()?;
        self.format = native
            .filter(|f| f.check(size).is_ok() && f.bytes(size) == bytes)
            .unwrap_or(PixelFormat::Bgr24);
        self.what = match self.format {
            PixelFormat::Bgr24 => format!("{}, {name} converted to BGR as it comes", self.what),
            f => format!("{}, {name} carried as {f}", self.what),
        };
        Ok(())
    }

    /// A raw YUV frame (`self.yuv_caps`) into `frame`: its bytes as they are where the
    /// source's format is the YUV layout, else converted to BGR.
    fn convert_raw(&self, got: &Mat, frame: &mut [u8]) -> Result<()> {
        let (_, code, _) = self.yuv_caps.context("not a raw source")?;
        if self.format != PixelFormat::Bgr24 {
            let bytes = got.data_bytes()?;
            anyhow::ensure!(
                bytes.len() == frame.len(),
                "{}: a frame's size changed ({} bytes, not {})",
                self.what,
                bytes.len(),
                frame.len()
            );
            frame.copy_from_slice(bytes);
            return Ok(());
        }
        let (rows, cols) = (self.size.height as i32, self.size.width as i32);
        let mut dst = Mat::new_rows_cols_with_bytes_mut::<Vec3b>(rows, cols, frame)?;
        let ptr = dst.data();
        imgproc::cvt_color(got, &mut dst, code, 0)?;
        anyhow::ensure!(
            dst.data() == ptr,
            "{}: a frame's size changed (OpenCV reallocated it)",
            self.what
        );
        Ok(())
    }

    /// Reads the next frame into `frame` (see `Source::read`).
    fn read_frame(&mut self, frame: &mut [u8]) -> Result<Read> {
        if let Some(first) = self.first.take() {
            match self.yuv_caps {
                Some(_) => self.convert_raw(&first, frame)?,
                None => conform(&first, frame, self.size)?,
            }
            return Ok(Read::Frame);
        }
        // Frames that need more than OpenCV's own decode (YUV caps, a turn) go through the
        // scratch `raw` first.
        if (self.yuv_caps.is_some() || self.turn.is_some())
            && (!self
                .cap
                .read(&mut self.raw)
                .with_context(|| format!("reading from {}", self.what))?
                || self.raw.empty())
        {
            return Ok(Read::End);
        }
        if self.yuv_caps.is_some() {
            self.convert_raw(&self.raw, frame)?;
            return Ok(Read::Frame);
        }
        if let Some((code, _)) = self.turn {
            let (rows, cols) = (self.size.height as i32, self.size.width as i32);
            let mut dst = Mat::new_rows_cols_with_bytes_mut::<Vec3b>(rows, cols, frame)?;
            let ptr = dst.data();
            core::rotate(&self.raw, &mut dst, code)?;
            if dst.data() != ptr || dst.rows() != rows || dst.cols() != cols {
                let got = dst.try_clone()?;
                drop(dst);
                conform(&got, frame, self.size)?;
            }
            return Ok(Read::Frame);
        }
        let ptr = frame.as_ptr();
        let (rows, cols) = (self.size.height as i32, self.size.width as i32);
        let mut dst = Mat::new_rows_cols_with_bytes_mut::<Vec3b>(rows, cols, frame)?;
        if !self
            .cap
            .read(&mut dst)
            .with_context(|| format!("reading from {}", self.what))?
        {
            return Ok(Read::End);
        }
        if dst.empty() {
            return Ok(Read::End);
        }
        if dst.data() == ptr
            && dst.rows() == rows
            && dst.cols() == cols
            && dst.typ() == core::CV_8UC3
        {
            return Ok(Read::Frame); // decoded in place: the common case
        }
        // OpenCV reallocated: keep its frame, then convert it into the ring buffer.
        let got = dst.try_clone()?;
        drop(dst);
        conform(&got, frame, self.size)?;
        Ok(Read::Frame)
    }
}

/// Converts any 8-bit image OpenCV produced into `frame` (BGR, `size`).
fn conform(got: &Mat, frame: &mut [u8], size: FrameSize) -> Result<()> {
    let mut bgr = Mat::default();
    let src = match got.channels() {
        3 => got,
        1 => {
            imgproc::cvt_color(got, &mut bgr, imgproc::COLOR_GRAY2BGR, 0)?;
            &bgr
        }
        4 => {
            imgproc::cvt_color(got, &mut bgr, imgproc::COLOR_BGRA2BGR, 0)?;
            &bgr
        }
        n => bail!("frames with {n} channels are not supported"),
    };
    let mut eight = Mat::default();
    let src = if src.depth() == core::CV_8U {
        src
    } else {
        src.convert_to(&mut eight, core::CV_8U, 1.0, 0.0)?;
        &eight
    };
    let mut dst =
        Mat::new_rows_cols_with_bytes_mut::<Vec3b>(size.height as i32, size.width as i32, frame)?;
    if src.cols() as usize == size.width && src.rows() as usize == size.height {
        src.copy_to(&mut dst)?;
    } else {
        let to = Size::new(size.width as i32, size.height as i32);
        imgproc::resize(src, &mut dst, to, 0.0, 0.0, imgproc::INTER_AREA)?;
    }
    Ok(())
}

impl Source for Capture {
    fn describe(&self) -> String {
        super::described(&self.what, self.size, self.fps)
    }
    fn size(&self) -> FrameSize {
        self.size
    }
    fn format(&self) -> PixelFormat {
        self.format
    }
    fn fps(&self) -> Option<f64> {
        self.fps
    }
    fn is_live(&self) -> bool {
        self.live
    }

    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        let failures = ffmpeg_log::scaler_failures();
        let read = self.read_frame(frame)?;
        // A decoder that re-initialized to another size (beyond its 16-pixel alignment).
        let coded = self.turn.map_or(self.size, |(_, coded)| coded);
        let resized = ffmpeg_log::reinit_size()
            .filter(|&(w, h)| w.abs_diff(coded.width) >= 16 || h.abs_diff(coded.height) >= 16);
        if read == Read::Frame && (ffmpeg_log::scaler_failures() != failures || resized.is_some()) {
            bail!(
                "frame {} of {} has another size than the first frames ({}): OpenCV 4.6 does not follow such a change (it hands out the previous frame again, or the new one laid out at the old size), so framepipe stops here instead of writing wrong frames (the {} frames before were processed). Split the input where the size changes, or scale it to one size first (ffmpeg -i IN -vf scale={}:{} OUT)",
                self.frames,
                self.what,
                self.size,
                self.frames,
                self.size.width,
                self.size.height
            );
        }
        if read == Read::Frame && self.live {
            let start = *self.live_start.get_or_insert_with(Instant::now);
            self.pts = Some(start.elapsed().as_secs_f64());
            self.frames += 1;
        } else if read == Read::Frame {
            if self.frames > 0 {
                // OpenCV repeats the last time for the frames a decoder hands out at the
                // end of the file: those follow at the last gap.
                let gap = match (self.pts, self.prev_pts) {
                    (Some(p), Some(q)) if p > q => p - q,
                    _ => 1.0 / self.fps.unwrap_or(crate::frame::DEFAULT_FPS),
                };
                let t = match (self.stream_time(), self.pts) {
                    (Some(t), Some(p)) if t <= p => Some(p + gap),
                    (t, _) => t,
                };
                self.prev_pts = self.pts;
                self.pts = t;
            }
            self.frames += 1;
        }
        Ok(read)
    }

    fn timestamp(&self) -> Option<f64> {
        self.pts
    }

    fn due(&mut self) -> Option<Instant> {
        let (frames, pts, prev) = (self.frames, self.pts, self.prev_pts);
        Some(self.pace.as_mut()?.due(frames, pts, prev))
    }

    fn frame_count(&self) -> Option<u64> {
        if self.live {
            return None;
        }
        let n = self.cap.get(videoio::CAP_PROP_FRAME_COUNT).ok()?;
        (n.is_finite() && n >= 1.0).then_some(n as u64)
    }

    fn skip(&mut self) -> Result<Read> {
        if self.first.take().is_some() {
            return Ok(Read::Frame);
        }
        Ok(if self.cap.grab()? {
            Read::Frame
        } else {
            Read::End
        })
    }
}

/// A still image, handed out again and again (the original question's loop).
pub struct StillImage {
    what: String,
    size: FrameSize,
    pixels: Vec<u8>,
}

impl StillImage {
    fn open(path: &Path) -> Result<Self> {
        let p = path.display().to_string();
        let img = imgcodecs::imread(&p, imgcodecs::IMREAD_COLOR)
            .with_context(|| format!("reading image '{p}'"))?;
        if img.empty() {
            bail!("'{p}' is not an image OpenCV can decode");
        }
        let size = FrameSize::new(img.cols() as usize, img.rows() as usize);
        let mut pixels = vec![0u8; size.bytes()];
        conform(&img, &mut pixels, size)?;
        Ok(Self {
            what: format!("image '{p}'"),
            size,
            pixels,
        })
    }
}

impl Source for StillImage {
    fn describe(&self) -> String {
        format!("{} ({}, looped)", self.what, self.size)
    }
    fn size(&self) -> FrameSize {
        self.size
    }
    fn fps(&self) -> Option<f64> {
        None
    }
    fn is_live(&self) -> bool {
        false
    }
    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        frame.copy_from_slice(&self.pixels);
        Ok(Read::Frame)
    }
    fn skip(&mut self) -> Result<Read> {
        Ok(Read::Frame)
    }
}
