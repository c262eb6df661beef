//! `--codec copy` decided before anything opens: each input's outputs become copies of its
//! own packets (`output::copy`), and what makes a copy impossible is refused by name: a
//! filter, a cut, encoder settings, the mosaic, an output that takes pictures (an image
//! sequence, raw frames, HLS), an input that has no packets.
//!
//! Invariant: a plan with copies has no frame output left for the copied inputs: their
//! pictures go only to the window and the browser view, where shown.

use crate::cli::{CodecArg, RunArgs};
use crate::output::{Container, OutputSpec};
use crate::source::open::Decode;
use crate::source::InputSpec;

/// Why `--codec copy` can't be done (module doc); each says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum CopyError {
    /// A build without FFmpeg's libraries.
    #[error("--codec copy: this build has no FFmpeg libraries to read packets with")]
    WithoutFfmpeg,
    /// A filter changes the pictures.
    #[error("--codec copy writes the input's packets as they came, and the filter '{0}' changes its pictures: leave out --filter, or encode (--codec h264)")]
    Filter(String),
    /// `--ss`, `--to` or `-t`.
    #[error("--codec copy writes the input's packets as they came: it can't cut at --ss, --to or -t (a cut between keyframes needs the pictures decoded); leave them out, or encode (--codec h264)")]
    Trim,
    /// Encoder settings.
    #[error("--codec copy encodes nothing: leave out {0}")]
    Encoding(&'static str),
    /// `--decode opencv`.
    #[error("--codec copy reads packets through FFmpeg's demuxer: --decode opencv reads none (use --decode cpu, gpu or auto)")]
    Opencv,
    /// An output of the mosaic.
    #[error("--codec copy: '{0}' would hold the mosaic of several inputs, which is made of decoded pictures: put {{n}} or {{name}} in its name for each input's own packets")]
    Mosaic(String),
    /// An output that takes pictures.
    #[error("--codec copy: '{out}' is {what}, which takes pictures, not packets: write a video file (.mp4, .mkv, .ts…) or a stream (udp://, srt://, rtmp://, rtsp://)")]
    Pictures {
        /// The output as named.
        out: String,
        /// What kind it is.
        what: &'static str,
    },
    /// An input that gives pictures, not packets.
    #[error("--codec copy copies an input's packets: input {n} ({what}) gives pictures, not packets (only files and network streams read by FFmpeg do)")]
    NoPackets {
        /// The input's number.
        n: usize,
        /// The input as given.
        what: String,
    },
}

/// Whether the run copies packets (`--codec copy`).
pub fn asked(args: &RunArgs) -> bool {
    args.encode.codec == Some(CodecArg::Copy)
}

/// Each input's copies (`--codec copy`): `each` holds each input's outputs (its file and
/// its streams, taken out of its frame outputs), `mosaic` the first output of the mosaic.
pub fn copies_of(
    args: &RunArgs,
    specs: &[(InputSpec, String)],
    each: Vec<Vec<OutputSpec>>,
    mosaic: Option<&str>,
) -> Result<Vec<Vec<OutputSpec>>, CopyError> {
    check_run(args, mosaic)?;
    for (n, (all, (spec, text))) in each.iter().zip(specs).enumerate() {
        for out in all {
            check_output(out)?;
        }
        if !all.is_empty() && !spec.has_packets() {
            return Err(CopyError::NoPackets {
                n,
                what: match text.is_empty() {
                    true => "the default input".into(),
                    false => crate::secret::redact(text).into_owned(),
                },
            });
        }
    }
    Ok(each)
}

/// What refuses a copy whatever the inputs and outputs.
fn check_run(args: &RunArgs, mosaic: Option<&str>) -> Result<(), CopyError> {
    if !cfg!(feature = "ffmpeg") {
        return Err(CopyError::WithoutFfmpeg);
    }
    if !args.engine.filter.is_identity() {
        return Err(CopyError::Filter(args.engine.filter.to_string()));
    }
    if args.trim.ss.is_some() || args.trim.to.is_some() || args.trim.duration.is_some() {
        return Err(CopyError::Trim);
    }
    if let Some(flag) = encoder_flag(args) {
        return Err(CopyError::Encoding(flag));
    }
    if args.sources.decode == Decode::Opencv {
        return Err(CopyError::Opencv);
    }
    if let Some(mosaic) = mosaic {
        return Err(CopyError::Mosaic(mosaic.to_string()));
    }
    Ok(())
}

/// The first encoder flag given, by name.
fn encoder_flag(args: &RunArgs) -> Option<&'static str> {
    let e = &args.encode;
    [
        (e.quality.is_some(), "--quality"),
        (e.crf.is_some(), "--crf"),
        (e.bitrate.is_some(), "--bitrate"),
        (e.maxrate.is_some(), "--maxrate"),
        (e.bufsize.is_some(), "--bufsize"),
        (e.preset.is_some(), "--preset"),
        (e.tune.is_some(), "--tune"),
        (e.gop.is_some(), "--gop"),
        (e.pix_fmt.is_some(), "--pix-fmt"),
        (!e.codec_opt.is_empty(), "--codec-opt"),
    ]
    .into_iter()
    .find_map(|(given, flag)| given.then_some(flag))
}

/// An output that can hold packets: a video file or a stream, not HLS.
fn check_output(out: &OutputSpec) -> Result<(), CopyError> {
    let (name, what) = match out {
        OutputSpec::Video {
            container: Container::Hls,
            path,
            ..
        } => (path.clone(), "an HLS playlist"),
        OutputSpec::Video { .. } => return Ok(()),
        OutputSpec::Stdout => ("-".to_string(), "raw frames on standard output"),
        OutputSpec::Sequence { pattern, .. } => (pattern.path(1), "an image sequence"),
    };
    Err(CopyError::Pictures {
        out: crate::secret::redact(&name).into_owned(),
        what,
    })
}
