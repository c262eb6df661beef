//! Each output kind in one place: what its frames are handed in (`takes`), how it is
//! claimed before anything opens (`claim`), and how it opens for the run's frames (`open`).
//! `spec` parses what `--output` names into a kind; each kind's writer is a room of its own
//! (`writer`, `stream`, `images`, `ppm`, `y4m`). A new output is a variant of `OutputSpec`
//! and an arm of each function here.
//!
//! Invariants: an output is claimed before any output opens, and opens only on its claim (a
//! video file on its `VideoClaim`, an image sequence on its folder's lock); a claim refuses
//! what would write over an input or, without `-y`, over an existing file; what this build
//! can't write is refused by name.

use anyhow::Result;

use super::claim::{self, Claimed, Overwrite, VideoClaim};
use super::{Container, OutputSpec, Timing};
use crate::frame::FrameSize;
use crate::paths::{self, InputFile};
use crate::pixel::PixelFormat;
use crate::sink::Sink;

/// What an output opens with, decided before: the frames' size and rate, the timing and
/// audio a video takes, what standard output writes and is given, and whether an MP4/MOV is
/// written in fragments.
pub struct OpenAt<'a> {
    /// The frames' size.
    pub size: FrameSize,
    /// Their rate.
    pub fps: f64,
    /// A video's timing and audio.
    pub timing: &'a Timing,
    /// What standard output writes, and what it is given.
    pub stdout: super::y4m::Layout,
    /// An MP4/MOV is written in fragments.
    pub fragmented: bool,
}

impl OpenAt<'_> {
    /// A video output's settings at `path` (a file's or a stream's), as `at` opens it.
    #[cfg(feature = "ffmpeg")]
    fn video(
        &self,
        path: &str,
        codec: super::Codec,
        quality: Option<u8>,
        encoding: &super::Encoding,
    ) -> super::av::Settings {
        super::av::Settings {
            path: path.to_string(),
            codec,
            quality,
            encoding: encoding.clone(),
            size: self.size,
            timing: self.timing.clone(),
            fragmented: self.fragmented,
        }
    }
}

impl OutputSpec {
    /// The formats this output takes its frames in, preferred first: standard output
    /// `write` (`--output-format`, I420 by default) or BGR (converted on the CPU); a video
    /// file whose encoder takes 4:2:0 (`Codec::takes_i420`) I420 or BGR; other files and
    /// image sequences BGR (their encoders convert).
    pub fn takes(&self, write: Option<PixelFormat>) -> Vec<PixelFormat> {
        match self {
            OutputSpec::Video {
                codec, encoding, ..
            } if codec.takes_i420() && encoding.stores_420() => {
                vec![PixelFormat::I420, PixelFormat::Bgr24]
            }
            OutputSpec::Stdout => {
                let write = write.unwrap_or(PixelFormat::I420);
                let mut v = vec![write];
                if write != PixelFormat::Bgr24 {
                    v.push(PixelFormat::Bgr24);
                }
                v
            }
            _ => vec![PixelFormat::Bgr24],
        }
    }

    /// Claims the output before anything opens (module doc): a video file (`VideoClaim`),
    /// an image sequence's folder (made where missing, locked, its files checked against
    /// `overwrite`, proven writable), an HLS playlist's names (`hls::claim`); standard
    /// output must not be a terminal. `input` holds the files the run's input opens.
    pub fn claim(&self, overwrite: Overwrite, input: &[InputFile]) -> Result<Claimed> {
        match self {
            OutputSpec::Video {
                path,
                container: Container::Hls,
                ..
            } => claim_playlist(path, overwrite, input),
            spec @ OutputSpec::Video { path, .. } if !spec.is_stream() => Ok(Claimed::Video(
                VideoClaim::new("--output", path, overwrite)?,
            )),
            OutputSpec::Video { .. } => Ok(Claimed::Nothing),
            OutputSpec::Stdout if std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
                anyhow::bail!("--output -: standard output is a terminal; redirect it to a file or a pipe (| ffmpeg -f yuv4mpegpipe -i - …), or name an output file")
            }
            OutputSpec::Stdout => Ok(Claimed::Nothing),
            OutputSpec::Sequence { pattern, .. } => claim_sequence(pattern, overwrite, input),
        }
    }

    /// Opens the output on what `claimed` holds for it, for frames as `at` says.
    pub fn open(&self, claimed: Claimed, at: &OpenAt) -> Result<Box<dyn Sink>> {
        let OpenAt {
            size,
            fps,
            timing,
            fragmented,
            ..
        } = *at;
        match (self, claimed) {
            #[cfg(feature = "ffmpeg")]
            (
                OutputSpec::Video {
                    path,
                    container,
                    codec,
                    encoding,
                    ..
                },
                _,
            ) if container.is_stream() => Ok(super::boxed(super::stream::Stream::open(
                at.video(path, *codec, None, encoding),
            )?)),
            (OutputSpec::Stdout, _) => Ok(super::boxed(super::y4m::Y4mOut::new(
                size,
                crate::frame::ratio_of(fps),
                at.stdout,
            )?)),
            (OutputSpec::Sequence { pattern, extension }, Claimed::Folder(lock))
                if extension == "ppm" =>
            {
                Ok(super::boxed(super::ppm::PpmSequence::new(
                    pattern.clone(),
                    lock,
                )))
            }
            #[cfg(feature = "ffmpeg")]
            (OutputSpec::Sequence { pattern, .. }, Claimed::Folder(lock)) => Ok(super::boxed(
                super::images::ImageSequence::new(pattern.clone(), size, lock)?,
            )),
            #[cfg(feature = "ffmpeg")]
            (
                OutputSpec::Video {
                    codec,
                    quality,
                    encoding,
                    ..
                },
                Claimed::Video(claim),
            ) => {
                let settings = at.video(&claim.path, *codec, *quality, encoding);
                Ok(super::boxed(super::writer::VideoFile::open(
                    claim, settings,
                )?))
            }
            (other, _) => {
                let _ = (timing, fragmented);
                anyhow::bail!(
                    "{} can't be written by this build (it has no FFmpeg libraries)",
                    other.name()
                )
            }
        }
    }

    /// The output as `--output` named it.
    pub fn name(&self) -> String {
        match self {
            OutputSpec::Video { path, .. } => format!("--output '{path}'"),
            OutputSpec::Stdout => "--output -".to_string(),
            OutputSpec::Sequence { pattern, .. } => format!("--output '{}'", pattern.path(0)),
        }
    }
}

/// An HLS playlist's claim (`hls::claim`: its folder made, its names checked against the
/// input and, without `-y`, against what exists), locked for the run
/// (`PlaylistLock`).
#[cfg(feature = "ffmpeg")]
fn claim_playlist(path: &str, overwrite: Overwrite, inputs: &[InputFile]) -> Result<Claimed> {
    super::hls::claim(path, overwrite, inputs)?;
    let lock = claim::PlaylistLock::new("--output", std::path::Path::new(path))?;
    Ok(Claimed::Playlist(lock))
}

#[cfg(not(feature = "ffmpeg"))]
fn claim_playlist(_: &str, _: Overwrite, _: &[InputFile]) -> Result<Claimed> {
    Ok(Claimed::Nothing)
}

/// An image sequence's claim (`OutputSpec::claim`).
fn claim_sequence(
    pattern: &crate::frame::SequencePattern,
    overwrite: Overwrite,
    input: &[InputFile],
) -> Result<Claimed> {
    // Like `mkdir -p`: an image sequence's folder is made when missing.
    std::fs::create_dir_all(pattern.folder()).map_err(|e| {
        anyhow::anyhow!(
            "--output: creating the folder '{}': {e}",
            pattern.folder().display()
        )
    })?;
    for input in input {
        paths::refuse_input_in_sequence("--output", pattern, input)?;
    }
    let lock = claim::FolderLock::new("--output", pattern.folder(), &pattern.path(0))?;
    claim::check_sequence("--output", pattern, overwrite)?;
    let probe = pattern
        .folder()
        .join(format!(".framepipe-{}.probe", std::process::id()));
    paths::check_writable("--output", &probe.to_string_lossy()).map_err(|e| {
        let why = match &e {
            paths::PathError::NotWritable { source, .. } => source.to_string(),
            other => other.to_string(),
        };
        anyhow::anyhow!(
            "--output '{}': its folder '{}' can't be written ({why})",
            pattern.path(0),
            pattern.folder().display(),
        )
    })?;
    Ok(Claimed::Folder(lock))
}
