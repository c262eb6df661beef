//! Each input's own outputs, opened for its frames once it is open: the streams `--output`
//! names (network outputs, HLS) and its file, image sequence or standard output, timed by
//! the input's own clock and carrying its audio where the output takes it (each video
//! output, stream or file, with a tap of its own on the input's packets).
//!
//! Invariants: an output is opened on its claim (`claims`), at the rate the plan settled
//! and in the format the backend hands it (`Formats::output`); a Y4M header keeps the
//! source's chroma siting and range only where the samples pass untouched.

use anyhow::Result;

use crate::output;
use crate::output::OutputSpec;
use crate::pixel::{Formats, PixelFormat};
use crate::plan::run::Writing;
use crate::plan::{InputPlan, RunPlan};
use crate::sink::{self, Sink};
use crate::source::Source;

/// What an input's outputs are opened on, decided before: the claimed output, the rate, the
/// formats the backend hands over, and the input's timing and audio.
pub(super) struct Places<'a> {
    pub claimed: output::claim::Claimed,
    /// The frames' size as the backend hands them over (the chain's output size).
    pub size: crate::frame::FrameSize,
    /// `fps:N`: the outputs' own rate, whatever the input's.
    pub rate: Option<f64>,
    pub fps: f64,
    pub formats: Formats,
    pub media: Option<&'a crate::source::open::Media>,
}

/// Every output of `input` for `source`'s frames: its streams, then its file.
pub(super) fn open(
    plan: &RunPlan,
    input: &InputPlan,
    source: &mut dyn Source,
    places: Places,
) -> Result<Vec<Box<dyn Sink>>> {
    let identity = plan.engine().chain.is_identity();
    let tags = y4m_tags(identity, source, places.formats);
    let rate = places.rate;
    let input_fps = places.fps;
    // `fps:N`: the outputs are made for N frames a second, and given them so.
    let places = Places {
        fps: rate.unwrap_or(places.fps),
        ..places
    };
    let mut sinks = open_streams(plan.writing(), input, source, tags, &places)?;
    sinks.extend(open_file_output(
        plan.writing(),
        input,
        source,
        tags,
        places,
    )?);
    Ok(match (rate, sink::tee(sinks)) {
        (Some(rate), Some(all)) => vec![Box::new(sink::rate::Rate::new(rate, input_fps, all))],
        (_, all) => all.into_iter().collect(),
    })
}

/// The frames `source` will give in this run, where known (a file's count, or `--frames`).
pub(super) fn frames_to_go(source: &dyn Source, frames: Option<u64>) -> Option<u64> {
    match (source.frame_count(), frames) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Starts the streams `--output` names (network outputs, HLS) for `source`'s frames.
fn open_streams(
    writing: Writing,
    input: &InputPlan,
    source: &mut dyn Source,
    tags: crate::source::PictureTags,
    places: &Places,
) -> Result<Vec<Box<dyn Sink>>> {
    let mut sinks = Vec::new();
    for spec in &input.outputs.streams {
        output::check_rate(spec, places.fps)?;
        let timing = fed_by(source, timed(places, writing, Some(spec)));
        let stdout = output::y4m::Layout {
            write: PixelFormat::I420,
            given: places.formats.output,
            tags,
        };
        let at = output::kind::OpenAt {
            size: places.size,
            fps: places.fps,
            timing: &timing,
            stdout,
            fragmented: false,
        };
        sinks.push(spec.open(output::claim::Claimed::Nothing, &at)?);
    }
    Ok(sinks)
}

/// What a Y4M output's header says of `source`'s pictures: the source's own tags, with the
/// chroma siting and the range kept only where the samples pass untouched (a chain that changes
/// nothing, from a 4:2:0 input: `Formats::passthrough`, `Formats::repacked`); framepipe's
/// conversions from BGR are written as centred.
fn y4m_tags(identity: bool, source: &dyn Source, formats: Formats) -> crate::source::PictureTags {
    let mut tags = source.picture_tags().unwrap_or_default();
    // The backend hands I420 on (not BGR for a window to share, converted again here).
    let untouched = formats.output == PixelFormat::I420
        && (formats.passthrough(identity) || formats.repacked(identity));
    if !untouched {
        tags.chroma = crate::source::Siting::Center;
        tags.range = None;
    }
    tags
}

/// Opens the file, image sequence or standard output `--output` names for `source`'s
/// frames, where it names one.
fn open_file_output(
    writing: Writing,
    input: &InputPlan,
    source: &mut dyn Source,
    tags: crate::source::PictureTags,
    places: Places,
) -> Result<Option<Box<dyn Sink>>> {
    let Some(spec) = &input.outputs.file else {
        return Ok(None);
    };
    output::check_rate(spec, places.fps)?;
    let timing = fed_by(source, timed(&places, writing, Some(spec)));
    let stdout = output::y4m::Layout {
        write: writing.output_format.unwrap_or(PixelFormat::I420),
        given: places.formats.output,
        tags,
    };
    // A source with no known end (a camera, a stream, the pattern, standard input) is
    // recorded in MP4/MOV fragments, so that a crash keeps all but the last fragment.
    let fragmented = writing.fragmented || source.is_live() || source.frame_count().is_none();
    let at = output::kind::OpenAt {
        size: places.size,
        fps: places.fps,
        timing: &timing,
        stdout,
        fragmented,
    };
    spec.open(places.claimed, &at).map(Some)
}

/// `timing` with the input's audio handed on by `source`'s own demuxer as it reads (the
/// input is opened once), where it reads packets; else read from its file by the copy.
#[cfg(feature = "ffmpeg")]
fn fed_by(source: &mut dyn Source, mut timing: output::Timing) -> output::Timing {
    use output::audio::{Audio, AudioTap};
    if let Some(Audio::File(from, streams)) = timing.audio.take() {
        let tap = std::sync::Arc::new(AudioTap::new(streams.clone()));
        timing.audio = Some(match source.tap(tap.clone()) {
            Ok(()) => Audio::Fed(tap),
            Err(_) => Audio::File(from, streams),
        });
    }
    timing
}

#[cfg(not(feature = "ffmpeg"))]
fn fed_by(_: &mut dyn Source, timing: output::Timing) -> output::Timing {
    timing
}

/// `timing` for an input's output: at `fps:N`'s rate where asked (its frames then count in
/// ticks of that rate, whatever the input's time base).
fn timed(places: &Places, writing: Writing, output: Option<&OutputSpec>) -> output::Timing {
    let timing = timing(places.media, places.fps, writing, output);
    match places.rate {
        #[cfg(feature = "ffmpeg")]
        Some(rate) => output::Timing {
            rate: Some(output::av::ratio_of(rate)),
            time_base: None,
            ..timing
        },
        _ => timing,
    }
}

/// How a video output is timed, and whose audio it copies: a file input's exact rate, time
/// base and audio streams (read from the file: `fed_by` hands them on from the source);
/// else `fps` as a fraction.
#[cfg(feature = "ffmpeg")]
pub(super) fn timing(
    media: Option<&crate::source::open::Media>,
    fps: f64,
    writing: Writing,
    output: Option<&OutputSpec>,
) -> output::Timing {
    use crate::output::av;
    let audio = media.and_then(output::audio::audio_of);
    if let (Some((from, streams)), Some(out)) = (&audio, output) {
        let what = format!("{} audio stream(s) of {}", streams.len(), from.display());
        match out {
            _ if writing.no_audio => crate::info!("--no-audio: the {what} are left out"),
            OutputSpec::Sequence { .. } | OutputSpec::Stdout => {
                crate::info!("an image sequence holds no audio: the {what} are left out")
            }
            OutputSpec::Video { .. } => {}
        }
    }
    output::Timing {
        rate: media.and_then(|m| m.rate).or(Some(av::ratio_of(fps))),
        time_base: media.filter(|m| !m.untimed).map(|m| m.time_base),
        audio: audio
            .filter(|_| !writing.no_audio && matches!(output, Some(OutputSpec::Video { .. })))
            .map(|(from, streams)| output::audio::Audio::File(from, streams)),
    }
}

#[cfg(not(feature = "ffmpeg"))]
pub(super) fn timing(
    _: Option<&crate::source::open::Media>,
    _: f64,
    _: Writing,
    _: Option<&OutputSpec>,
) -> output::Timing {
    output::Timing
}
