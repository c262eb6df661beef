//! What the run shows: the window (one, or one per input with `--no-mosaic`), the browser
//! view (`--serve`), and in a run of several inputs the mosaic the backend composes, which
//! the window and the browser view show and the outputs without `{n}` record.
//!
//! Invariants: every highgui call stays on the main thread (the sink's); a run that asks
//! for a window checks the display before anything is opened; the mosaic is composed only
//! where something shows or records it.

use anyhow::Result;

use super::opening::{Inputs, Running};
use super::Parts;
use crate::cli::RunArgs;
use crate::plan::Plan;
#[cfg(feature = "opencv")]
use crate::sink;
use crate::sink::{claim::Claimed, Knobs, Sink};
use crate::stop::Stop;
use crate::tiles::{Compose, FullFrames, Layout, MAX_MOSAIC};

/// Each input is shown in a window of its own (one input, or `--no-mosaic`).
pub(super) fn window_each(args: &RunArgs, several: bool) -> bool {
    !args.headless && (!several || args.no_mosaic)
}

/// The window and the browser view of input `at` where it is shown alone (a run of one
/// input; `--no-mosaic`): the window first, then the view.
pub(super) fn of_input(
    parts: &Parts,
    running: &Running,
    stop: &Stop,
) -> Result<Vec<Box<dyn Sink>>> {
    let args = &parts.inputs[running.at].flags;
    let several = parts.inputs.len() > 1;
    let knobs = knobs(args, &running.plan);
    let mut shown: Vec<Box<dyn Sink>> = Vec::new();
    if window_each(args, several) {
        let (title, hold) = match several {
            true => (
                format!(
                    "framepipe {}: {}",
                    running.at, parts.inputs[running.at].input_name
                ),
                None,
            ),
            // At the end of a file the last frame stays up until q (or a stop).
            false => (
                "framepipe".to_string(),
                (!args.exit_at_end).then(|| stop.clone()),
            ),
        };
        shown.push(open_window(&title, knobs.clone(), hold)?);
    }
    if args.serve.is_some() && !several {
        shown.push(open_web(args, knobs)?);
    }
    Ok(shown)
}

/// The window's knobs for an input's plan.
fn knobs(args: &RunArgs, plan: &Plan) -> Knobs {
    Knobs {
        pageable: args.pageable,
        bands: plan.backend.plan.len(),
        height: plan.backend.size.height,
    }
}

/// What the backend composes in a run of several inputs shown (the window), recorded (the
/// outputs without `{n}`) or served (the browser view): the layout, the tile of each input
/// (`order`: open, then joining late), and whose frames come down whole (`own_outputs`:
/// some input writes outputs of its own). None for one input, or where nothing looks.
pub(super) fn compose(
    parts: &Parts,
    inputs: &Inputs,
    order: &[usize],
    own_outputs: bool,
) -> Option<Compose> {
    let args = &parts.inputs[0].flags;
    let n = parts.inputs.len();
    let shown = !args.headless && !args.no_mosaic;
    let looked_at = shown || parts.recording.is_some() || args.serve.is_some();
    (n > 1 && looked_at).then(|| Compose {
        layout: mosaic_layout(args, n, &inputs.running),
        tile_of: order.to_vec(),
        full: match own_outputs {
            true => FullFrames::all(),
            false => FullFrames::shown(),
        },
    })
}

/// The mosaic's layout: `--grid` or as square as `n` tiles make it, fitting the screen
/// where it is shown, at most `MAX_MOSAIC` where it is only recorded (wherever the run is).
fn mosaic_layout(args: &RunArgs, n: usize, running: &[Running]) -> Layout {
    let (cols, rows) = args
        .grid
        .map(|g| (g.width, g.height))
        .unwrap_or_else(|| crate::tiles::auto_grid(n));
    let sizes: Vec<_> = running.iter().map(|r| r.opened.0.size()).collect();
    let within = match args.headless || args.no_mosaic {
        true => MAX_MOSAIC,
        false => shown_within(),
    };
    Layout::new(cols, rows, &sizes, within)
}

/// The screen's area a shown mosaic fits.
#[cfg(feature = "opencv")]
fn shown_within() -> crate::frame::FrameSize {
    crate::sink::window::unscaled_area().unwrap_or(MAX_MOSAIC)
}

#[cfg(not(feature = "opencv"))]
fn shown_within() -> crate::frame::FrameSize {
    MAX_MOSAIC
}

/// The mosaic of every input (`inputs`: those running, and those that failed to open, with
/// why), in one window (unless headless or `--no-mosaic`), in the browser view, and recorded
/// to the outputs without `{n}` (`parts.recording`, on its claim); `compose` is what the
/// backend composes.
#[cfg(feature = "opencv")]
pub(super) fn open_mosaic(
    parts: &Parts,
    inputs: &Inputs,
    compose: Compose,
    stop: &Stop,
    claim: Option<Claimed>,
) -> Result<Box<dyn Sink>> {
    use crate::sink::mosaic::Mosaic;
    let args = &parts.inputs[0].flags;
    let running = &inputs.running;
    let canvas = compose.layout.canvas;
    let knobs = Knobs {
        pageable: args.pageable,
        bands: running[0].plan.backend.plan.len(),
        height: running
            .iter()
            .map(|r| r.plan.backend.size.height)
            .min()
            .unwrap_or(canvas.height),
    };
    let mut shown: Vec<Box<dyn Sink>> = Vec::new();
    if !args.headless && !args.no_mosaic {
        let hold = (!args.exit_at_end).then(|| stop.clone());
        shown.push(open_window("framepipe", knobs.clone(), hold)?);
    }
    // The browser view shows what the window shows: the mosaic, labelled.
    if args.serve.is_some() {
        shown.push(open_web(args, knobs)?);
    }
    let failed = inputs
        .failed
        .iter()
        .map(|(i, e)| (*i, format!("failed: {e:#}")))
        .collect();
    let names = parts.inputs.iter().map(|r| r.input_name.clone()).collect();
    let Compose {
        layout,
        tile_of,
        full,
    } = compose;
    let mosaic = Mosaic::new(sink::tee(shown), layout, full, names, tile_of, failed);
    match (&parts.recording, claim) {
        (Some(recording), Some(claim)) => {
            let fps = sink::mosaic::RECORD_FPS;
            let record = open_recording(recording, claim, mosaic.size(), fps)?;
            Ok(Box::new(mosaic.with_recording(record, fps)))
        }
        _ => Ok(Box::new(mosaic)),
    }
}

/// The mosaic's recording: its pictures (BGR, `size`) at `fps`, to a file (or standard
/// output) on `claim` and to the streams `recording` names.
#[cfg(feature = "opencv")]
fn open_recording(
    recording: &crate::plan::Request,
    claim: Claimed,
    size: crate::frame::FrameSize,
    fps: f64,
) -> Result<Box<dyn Sink>> {
    let args = &recording.flags;
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut claim = Some(claim);
    for spec in recording.output.iter().chain(&recording.streams) {
        sink::check_rate(spec, fps).map_err(anyhow::Error::msg)?;
        let claimed = match spec.is_stream() {
            true => Claimed::Nothing,
            false => claim.take().expect("one claim for the one file"),
        };
        let stdout = sink::y4m::Layout {
            write: recording
                .output_format
                .unwrap_or(crate::pixel::PixelFormat::I420),
            given: crate::pixel::PixelFormat::Bgr24,
            tags: Default::default(),
        };
        let timing = super::outputs::timing(None, fps, args, Some(spec));
        sinks.push(sink::open_output(
            spec, claimed, size, fps, &timing, stdout, true,
        )?);
    }
    Ok(sink::tee(sinks).expect("a recording has an output"))
}

#[cfg(not(feature = "opencv"))]
pub(super) fn open_mosaic(
    _: &Parts,
    _: &Inputs,
    _: Compose,
    _: &Stop,
    _: Option<Claimed>,
) -> Result<Box<dyn Sink>> {
    anyhow::bail!("this build has no OpenCV and cannot draw the mosaic")
}

#[cfg(feature = "ffmpeg")]
fn open_web(args: &RunArgs, knobs: Knobs) -> Result<Box<dyn Sink>> {
    let settings = crate::plan::web_settings(args)?;
    Ok(Box::new(crate::sink::web::Web::open(settings, knobs)?))
}

#[cfg(not(feature = "ffmpeg"))]
fn open_web(_: &RunArgs, _: Knobs) -> Result<Box<dyn Sink>> {
    anyhow::bail!("--serve: this build has no FFmpeg libraries")
}

/// Checks that the run's window can open (where it has one); false when a stop came while
/// the display was being asked (the run then ends, having written nothing).
pub(super) fn window_possible_unless_stopped(args: &RunArgs, stop: &Stop) -> Result<bool> {
    if args.headless {
        return Ok(true);
    }
    match check_window_possible() {
        Ok(()) => Ok(true),
        Err(_) if stop.is_requested() => {
            crate::info!("stopped before the window opened; nothing was written");
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

#[cfg(feature = "opencv")]
fn check_window_possible() -> Result<()> {
    sink::window::check_display().map_err(anyhow::Error::msg)
}

#[cfg(not(feature = "opencv"))]
fn check_window_possible() -> Result<()> {
    anyhow::bail!("this build has no OpenCV and cannot open a window; run with --headless")
}

#[cfg(feature = "opencv")]
fn open_window(title: &str, knobs: Knobs, hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    Ok(Box::new(sink::window::Window::open(title, knobs, hold)?))
}

#[cfg(not(feature = "opencv"))]
fn open_window(_title: &str, _knobs: Knobs, _hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    anyhow::bail!("this build has no OpenCV and cannot open a window")
}
