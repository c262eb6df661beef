//! Where processed frames go: a window, a video file, an image sequence, or nowhere.
//!
//! Sinks run on one thread (the main thread, so that every highgui call stays there), see
//! frames in order, and are always `finish`ed, also after an error, so that files are
//! finalized.

#[cfg(feature = "opencv")]
pub mod av;
pub mod claim;
pub mod null;
pub mod ppm;
pub mod progress;
#[cfg(feature = "opencv")]
pub mod strip;
#[cfg(feature = "opencv")]
pub mod window;
#[cfg(feature = "opencv")]
pub mod writer;
#[cfg(feature = "opencv")]
mod xscreen;
pub mod y4m;

use std::path::Path;

use anyhow::Result;

use crate::frame::{FrameSize, SequencePattern};

/// What a sink wants after a frame.
#[derive(Debug, PartialEq, Clone)]
pub enum Flow {
    /// Go on.
    Continue,
    /// The user asked to quit (q, Esc, window closed).
    Quit,
    /// Pause or resume capture (space).
    TogglePause,
    /// Show the next frame, staying paused (`.`).
    Step,
    /// Change the running backend (filter preset, page-locking, bands).
    Control(crate::backend::Control),
    /// Compile the chain's kernel files again and swap them in (`r`).
    Reload,
}

impl Flow {
    /// The more important of two answers: quitting wins, then any request over `Continue`.
    fn merge(self, other: Flow) -> Flow {
        match (self, other) {
            (Flow::Quit, _) | (_, Flow::Quit) => Flow::Quit,
            (Flow::Continue, o) => o,
            (s, _) => s,
        }
    }
}

/// The settings the window's keys change, as the window last asked for them.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Ring buffers left pageable.
    pub pageable: bool,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Frame height (the most bands there can be).
    pub height: usize,
}

/// Where processed frames go (a window, a file, nowhere), on the pipeline's calling thread.
pub trait Sink {
    /// One word for the summary: "shown", "written".
    fn verb(&self) -> &'static str;
    /// One line for the log.
    fn describe(&self) -> String;
    /// Takes one processed frame (`size`, packed BGR) and says what the user wants next.
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow>;
    /// `consume`, with the frame's presentation time in seconds where the source gave one
    /// (a file's frames): sinks that keep time (video files) use it.
    fn consume_at(&mut self, frame: &[u8], size: FrameSize, _at: Option<f64>) -> Result<Flow> {
        self.consume(frame, size)
    }
    /// The live figures, before each frame (the window's overlay shows them).
    fn status(&mut self, _live: &crate::stats::Live) {}
    /// Whether `status` should carry the recent frames' timeline (the window's strip is
    /// on): laying it out costs a little, so only then.
    fn wants_timeline(&self) -> bool {
        false
    }
    /// Called when no frame came for a while (keeps a window responsive).
    fn idle(&mut self) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// Flushes and closes; called exactly once, also after errors.
    fn finish(&mut self) -> Result<()>;
    /// Frames the output really holds, once finished, where the sink checks (a video file
    /// reopens what it wrote); None where every consumed frame is known to be stored.
    fn stored(&self) -> Option<u64> {
        None
    }
}

/// Several sinks fed the same frames (a window and a file).
pub struct Tee(pub Vec<Box<dyn Sink>>);

impl Sink for Tee {
    fn verb(&self) -> &'static str {
        self.0.last().map_or("consumed", |s| s.verb())
    }
    fn describe(&self) -> String {
        let parts: Vec<_> = self.0.iter().map(|s| s.describe()).collect();
        parts.join(" and ")
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        self.consume_at(frame, size, None)
    }
    fn consume_at(&mut self, frame: &[u8], size: FrameSize, at: Option<f64>) -> Result<Flow> {
        let mut flow = Flow::Continue;
        for s in &mut self.0 {
            flow = flow.merge(s.consume_at(frame, size, at)?);
        }
        Ok(flow)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.0.iter_mut().for_each(|s| s.status(live));
    }
    fn wants_timeline(&self) -> bool {
        self.0.iter().any(|s| s.wants_timeline())
    }
    fn idle(&mut self) -> Result<Flow> {
        let mut flow = Flow::Continue;
        for s in &mut self.0 {
            flow = flow.merge(s.idle()?);
        }
        Ok(flow)
    }
    fn finish(&mut self) -> Result<()> {
        // Files first: a window may keep its last frame up until q (sinks are added window
        // first).
        let mut first_err = None;
        for s in self.0.iter_mut().rev() {
            if let Err(e) = s.finish() {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
    fn stored(&self) -> Option<u64> {
        self.0.iter().filter_map(|s| s.stored()).min()
    }
}

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
/// Image formats `--output` writes as numbered sequences.
pub const SEQUENCE_EXTENSIONS: &[&str] = &["png", "ppm", "bmp", "tif", "tiff", "jpg", "jpeg"];

/// What `--output` names, checked before anything runs.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputSpec {
    /// A video file.
    Video {
        /// Its path.
        path: String,
        /// Its extension, lower-cased (the container).
        extension: String,
        /// What its frames are compressed with.
        codec: Codec,
        /// JPEG quality (1–100) of OpenCV's Motion JPEG writer, when asked for.
        quality: Option<u8>,
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
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "-" {
            return Ok(OutputSpec::Stdout);
        }
        if s.contains("://") {
            return Err(format!(
                "--output '{s}': network outputs (udp://, rtmp://, …) are not supported; write a file"
            ));
        }
        let path = Path::new(s);
        if s.ends_with('/') || path.is_dir() {
            return Err(format!("--output '{s}' is a folder; name a file in it"));
        }
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| format!("--output '{s}' does not name a file"))?;
        let extension = crate::paths::extension(Path::new(name));
        if path
            .parent()
            .is_some_and(|dir| dir.to_string_lossy().contains('%'))
        {
            return Err(format!(
                "--output '{s}': the number pattern must be in the file name"
            ));
        }
        let what = if extension.is_empty() {
            "files without an extension".to_string()
        } else {
            format!("'.{extension}' files")
        };
        let supported = || {
            format!(
                "--output '{s}': cannot write {what}; use a video ({}) or an image sequence such as frames/%05d.png ({})",
                VIDEO_EXTENSIONS.join(", "),
                SEQUENCE_EXTENSIONS.join(", ")
            )
        };
        // A video file's name is taken as written ('100%.mkv'); a frame number in it means
        // an image sequence was meant.
        let video = VIDEO_EXTENSIONS.contains(&extension.as_str());
        match SequencePattern::parse(name) {
            Some(Ok(_)) if video => Err(format!(
                "--output '{s}': %d numbers the files of an image sequence, and .{extension} is a video container holding every frame in one file: name one file, or use an image extension (.png, …) for a sequence"
            )),
            Some(Err(_)) if video => Self::parse_video(s, extension),
            Some(Err(e)) => Err(format!("--output: {e}")),
            Some(Ok(_)) => {
                if !SEQUENCE_EXTENSIONS.contains(&extension.as_str()) {
                    return Err(supported());
                }
                let pattern = SequencePattern::parse(s)
                    .expect("has %")
                    .map_err(|e| format!("--output: {e}"))?;
                if !cfg!(feature = "opencv") && extension != "ppm" {
                    return Err(format!(
                        "--output '{s}': this build has no OpenCV and writes only .ppm sequences"
                    ));
                }
                Ok(OutputSpec::Sequence { pattern, extension })
            }
            None => {
                if SEQUENCE_EXTENSIONS.contains(&extension.as_str()) {
                    return Err(format!(
                        "--output '{s}': an image output needs a frame number, for example frames/%05d.{extension}"
                    ));
                }
                if !video {
                    return Err(supported());
                }
                Self::parse_video(s, extension)
            }
        }
    }

    /// A video file named `s`, of the container `extension`.
    fn parse_video(s: &str, extension: String) -> Result<Self, String> {
        crate::paths::check_folder("--output", s)?;
        if !cfg!(feature = "opencv") {
            return Err(format!(
                "--output '{s}': this build has no OpenCV; write a .ppm sequence such as frames/%05d.ppm"
            ));
        }
        let codec = Codec::default_for(&extension);
        Ok(OutputSpec::Video {
            path: s.to_string(),
            extension,
            codec,
            quality: None,
        })
    }
}

impl OutputSpec {
    /// Uses `codec` for a video output instead of its container's default; fails where the
    /// container can't hold it, or for an image sequence.
    pub fn with_codec(self, codec: Option<Codec>) -> Result<Self, String> {
        let Some(codec) = codec else { return Ok(self) };
        match self {
            OutputSpec::Video {
                path,
                extension,
                quality,
                ..
            } => {
                if !codec.fits(&extension) {
                    return Err(format!(
                        "--codec {}: a .{extension} file can't hold it (.mkv holds every codec)",
                        codec.name()
                    ));
                }
                Ok(OutputSpec::Video {
                    path,
                    extension,
                    codec,
                    quality,
                })
            }
            OutputSpec::Sequence { .. } | OutputSpec::Stdout => Err(
                "--codec applies to video files, not to image sequences or standard output".into(),
            ),
        }
    }

    /// Sets the quality (0-100, a fixed quantiser) of a Motion JPEG or MPEG-4 Part 2 video;
    /// fails for any other output.
    pub fn with_quality(self, quality: Option<u8>) -> Result<Self, String> {
        let Some(q) = quality else { return Ok(self) };
        match self {
            OutputSpec::Video {
                path,
                extension,
                codec: codec @ (Codec::Mjpeg | Codec::Mpeg4),
                ..
            } => Ok(OutputSpec::Video {
                path,
                extension,
                codec,
                quality: Some(q),
            }),
            _ => Err("--quality applies to Motion JPEG and MPEG-4 Part 2 (a fixed quantiser); H.264, HEVC and VP9 keep their encoders' defaults, and FFV1 is lossless".into()),
        }
    }
}

/// Fails when a video output's container can't hold `fps` frames per second (image
/// sequences hold any rate).
pub fn check_rate(spec: &OutputSpec, fps: f64) -> Result<(), String> {
    let OutputSpec::Video {
        path, extension, ..
    } = spec
    else {
        return Ok(());
    };
    #[cfg(feature = "opencv")]
    let (low, high) = writer::rate_range(extension);
    #[cfg(not(feature = "opencv"))]
    let (low, high) = (0.01, 1000.0);
    if (low..=high).contains(&fps) {
        return Ok(());
    }
    Err(format!(
        "--output '{path}': a .{extension} file holds {low} to {high} frames per second, not {fps} (the rate comes from the input, or from --fps for the test pattern)"
    ))
}

/// What a video file needs to keep the input's timing and audio (see `av::Timing`).
#[cfg(feature = "opencv")]
pub use av::Timing;
/// Without OpenCV there are no video files, and nothing to time.
#[cfg(not(feature = "opencv"))]
#[derive(Clone, Debug, Default)]
pub struct Timing;

/// Opens the sink for `spec` at `fps` frames per second, on what `claimed` holds for it
/// (`timing` says more, for video; `stdout` what standard output writes and what it is
/// given; `fragmented` writes MP4/MOV in fragments).
pub fn open_output(
    spec: &OutputSpec,
    claimed: claim::Claimed,
    size: FrameSize,
    fps: f64,
    timing: &Timing,
    stdout: y4m::Layout,
    fragmented: bool,
) -> Result<Box<dyn Sink>> {
    match (spec, claimed) {
        (OutputSpec::Stdout, _) => Ok(Box::new(y4m::Y4mOut::new(
            size,
            crate::frame::ratio_of(fps),
            stdout,
        )?)),
        (OutputSpec::Sequence { pattern, extension }, claim::Claimed::Folder(lock))
            if extension == "ppm" =>
        {
            Ok(Box::new(ppm::PpmSequence::new(pattern.clone(), lock)))
        }
        #[cfg(feature = "opencv")]
        (OutputSpec::Sequence { pattern, .. }, claim::Claimed::Folder(lock)) => Ok(Box::new(
            writer::ImageSequence::new(pattern.clone(), size, lock)?,
        )),
        #[cfg(feature = "opencv")]
        (OutputSpec::Video { codec, quality, .. }, claim::Claimed::Video(claim)) => {
            let _ = fps;
            Ok(Box::new(writer::VideoFile::open(
                claim, *codec, *quality, size, timing, fragmented,
            )?))
        }
        (other, _) => {
            let _ = (size, fps, timing, fragmented);
            anyhow::bail!("internal: {other:?} was not claimed, or this build cannot write it")
        }
    }
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
            ("udp://10.0.0.1:5000".to_string(), "network outputs"),
        ] {
            let e = OutputSpec::parse(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }
}
