//! What the run shows: the window (one, or one per input with `--no-mosaic`), the browser
//! view (`--serve`), and in a run of several inputs the mosaic the backend composes, which
//! the window and the browser view show and the outputs without `{n}` record.
//!
//! Invariants: every highgui call stays on the main thread (the sink's); a run that asks
//! for a window checks the display before anything is opened; the mosaic is composed only
//! where something shows or records it.

use anyhow::Result;

use super::opening::{Inputs, Running};
use super::screen::{check_window_possible, open_window, shown_within};
use crate::display;
use crate::display::Knobs;
use crate::output;
use crate::output::claim::Claimed;
use crate::plan::run::{Display, Window};
use crate::plan::{Plan, RunPlan};
use crate::sink;
use crate::sink::Sink;
use crate::stop::Stop;
use crate::tiles::{Compose, FullFrames, Layout, MAX_MOSAIC};

/// The window and the browser view of input `at` where it is shown alone (a run of one
/// input; `--no-mosaic`): the window first, then the view.
pub(super) fn of_input(
    plan: &RunPlan,
    running: &Running,
    stop: &Stop,
    view: &mut Option<View>,
) -> Result<Vec<Box<dyn Sink>>> {
    let (display, several) = (plan.display(), plan.several());
    let knobs = knobs(&running.plan);
    let mut shown: Vec<Box<dyn Sink>> = Vec::new();
    if display.window == Window::Each {
        let (title, hold) = match several {
            true => (
                format!(
                    "framepipe {}: {}",
                    running.at,
                    plan.inputs()[running.at].label
                ),
                None,
            ),
            // At the end of a file the last frame stays up until q (or a stop).
            false => ("framepipe".to_string(), display.hold.then(|| stop.clone())),
        };
        shown.push(open_window(&title, knobs.clone(), hold)?);
    }
    // Beside others the view shows the mosaic (`open_mosaic` takes it).
    if let Some(view) = view.take_if(|_| !several) {
        let label = plan.inputs()[running.at].label.clone();
        shown.push(web(view, knobs, vec![label], Vec::new()));
    }
    Ok(shown)
}

/// The window's knobs for an input's plan.
fn knobs(plan: &Plan) -> Knobs {
    Knobs {
        pageable: plan.backend.pageable,
        bands: plan.backend.plan.len(),
        height: plan.backend.size.height,
    }
}

/// What the backend composes in a run of several inputs shown (the window), recorded (the
/// outputs without `{n}`) or served (the browser view): the layout, the tile of each input
/// (`order`: open, then joining late), and whose frames come down whole (`own_outputs`:
/// some input writes outputs of its own). None for one input, or where nothing looks.
pub(super) fn compose(
    plan: &RunPlan,
    inputs: &Inputs,
    order: &[usize],
    own_outputs: bool,
) -> Option<Compose> {
    let display = plan.display();
    display.mosaic.then(|| {
        let layout = mosaic_layout(display, plan.inputs().len(), &inputs.running);
        let full = match own_outputs {
            true => FullFrames::all(),
            false => FullFrames::shown(),
        };
        Compose::new(layout, order.to_vec(), full, display.grid)
    })
}

/// The mosaic's layout: `--grid` or as square as `n` tiles make it, fitting the screen
/// where it is shown, at most `MAX_MOSAIC` where it is only recorded (wherever the run is).
fn mosaic_layout(display: &Display, n: usize, running: &[Running]) -> Layout {
    let (cols, rows) = display.grid.unwrap_or_else(|| crate::tiles::auto_grid(n));
    let sizes: Vec<_> = running.iter().map(|r| r.opened.0.size()).collect();
    let within = match display.window {
        Window::Mosaic => shown_within(),
        _ => MAX_MOSAIC,
    };
    Layout::new(cols, rows, &sizes, within)
}

/// The mosaic of every input (`inputs`: those running, and those that failed to open, with
/// why), in one window (unless headless or `--no-mosaic`), in the browser view, and recorded
/// to the outputs without `{n}` (`RunPlan::recording`, on its claim); `compose` is what the
/// backend composes; `seen`, the detector's boxes to draw into the tiles (`--detect`).
pub(super) fn open_mosaic(
    plan: &RunPlan,
    inputs: &Inputs,
    compose: Compose,
    stop: &Stop,
    (claim, view): (Option<Claimed>, Option<View>),
    seen: Option<crate::detect::seen::Seen>,
) -> Result<Box<dyn Sink>> {
    use crate::display::mosaic::Mosaic;
    let display = plan.display();
    let running = &inputs.running;
    let canvas = compose.layout.canvas;
    let knobs = Knobs {
        pageable: plan.engine().pageable,
        bands: running[0].plan.backend.plan.len(),
        height: running
            .iter()
            .map(|r| r.plan.backend.size.height)
            .min()
            .unwrap_or(canvas.height),
    };
    let mut shown: Vec<Box<dyn Sink>> = Vec::new();
    if display.window == Window::Mosaic {
        let hold = display.hold.then(|| stop.clone());
        shown.push(open_window("framepipe", knobs.clone(), hold)?);
    }
    let names: Vec<String> = plan.inputs().iter().map(|i| i.label.clone()).collect();
    // The browser view shows what the window shows: the mosaic, labelled.
    if let Some(view) = view {
        let labels = compose.tile_of.iter().map(|&i| names[i].clone()).collect();
        let failed = inputs.failed.iter().map(|(i, _)| names[*i].clone());
        shown.push(web(view, knobs, labels, failed.collect()));
    }
    let failed = inputs
        .failed
        .iter()
        .map(|(i, e)| (*i, format!("failed: {e:#}")))
        .collect();
    let (layout, tile_of, full) = (
        compose.layout,
        compose.tile_of.clone(),
        compose.full.clone(),
    );
    let mut mosaic = Mosaic::new(sink::tee(shown), layout, full, names, tile_of, failed);
    mosaic = mosaic.with_regrid(compose);
    if let (Some(seen), Some(detect)) = (seen, plan.detect()) {
        mosaic = mosaic.with_boxes(seen, detect.draw);
    }
    match (plan.recording(), claim) {
        (Some(recording), Some(claim)) => {
            let fps = display::mosaic::RECORD_FPS;
            let record = open_recording(plan, recording, claim, mosaic.size(), fps)?;
            Ok(Box::new(mosaic.with_recording(record, fps)))
        }
        _ => Ok(Box::new(mosaic)),
    }
}

/// The mosaic's recording: its pictures (BGR, `size`) at `fps`, to a file (or standard
/// output) on `claim` and to the streams `recording` names.
fn open_recording(
    plan: &RunPlan,
    recording: &crate::plan::run::Outputs,
    claim: Claimed,
    size: crate::frame::FrameSize,
    fps: f64,
) -> Result<Box<dyn Sink>> {
    let writing = plan.writing();
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut claim = Some(claim);
    for spec in recording.file.iter().chain(&recording.streams) {
        output::check_rate(spec, fps)?;
        let claimed = match spec.is_stream() {
            true => Claimed::Nothing,
            false => claim.take().expect("one claim for the one file"),
        };
        let stdout = output::y4m::Layout {
            write: writing
                .output_format
                .unwrap_or(crate::pixel::PixelFormat::I420),
            given: crate::pixel::PixelFormat::Bgr24,
            tags: Default::default(),
        };
        let timing = super::outputs::timing(None, fps, writing, Some(spec));
        let at = output::kind::OpenAt {
            size,
            fps,
            timing: &timing,
            stdout,
            fragmented: true,
        };
        sinks.push(spec.open(claimed, &at)?);
    }
    Ok(sink::tee(sinks).expect("a recording has an output"))
}

/// The browser view (`--serve`), opened as the run starts, before its inputs, so that
/// `/healthz` answers while they open; handed to the display that shows it.
#[cfg(feature = "ffmpeg")]
pub(super) type View = crate::display::web::Web;
/// Without FFmpeg's libraries there is no browser view.
#[cfg(not(feature = "ffmpeg"))]
pub(super) type View = std::convert::Infallible;

/// The run's browser view, where it has one: every input down until it opens.
#[cfg(feature = "ffmpeg")]
pub(super) fn open_view(
    plan: &RunPlan,
    recordings: &super::recordings::Recordings,
    recent: Option<std::sync::Arc<crate::events::recent::Recent>>,
    takes_inputs: bool,
) -> Result<Option<View>> {
    let Some(serve) = &plan.display().serve else {
        return Ok(None);
    };
    let names: Vec<String> = plan.inputs().iter().map(|i| i.label.clone()).collect();
    let indexes = recordings
        .archives()
        .iter()
        .map(|a| a.index().clone())
        .collect();
    let recorded = plan
        .inputs()
        .iter()
        .filter_map(|i| Some(i.record.as_ref()?.input.clone()));
    let sources = plan.inputs().iter().map(|i| i.source.clone()).collect();
    // Everything the view answers from is given before it answers (`Web::bind`).
    let view = View::bind(serve.clone())?.opening(&names);
    let view = view.with_recordings(indexes, recorded.collect(), sources);
    let feeds = recordings.live_feeds();
    let live = names
        .iter()
        .cloned()
        .zip(feeds.into_iter().chain(std::iter::repeat(None)));
    let view = view.with_live(live.collect())?;
    let view = match recent {
        Some(recent) => view.with_events(recent),
        None => view,
    };
    let view = match takes_inputs {
        true => view.taking_inputs(),
        false => view,
    };
    Ok(Some(view.start()?))
}

#[cfg(not(feature = "ffmpeg"))]
pub(super) fn open_view(
    plan: &RunPlan,
    _: &super::recordings::Recordings,
    _: Option<std::sync::Arc<crate::events::recent::Recent>>,
    _: bool,
) -> Result<Option<View>> {
    match plan.display().serve {
        Some(never) => match never {},
        None => Ok(None),
    }
}

/// The browser view as one of the run's sinks: its controls' `knobs`, its inputs named
/// (`labels` by the pipeline's input number; those that `failed` to open) for `/healthz`
/// and `/metrics`.
#[cfg(feature = "ffmpeg")]
fn web(view: View, knobs: Knobs, labels: Vec<String>, failed: Vec<String>) -> Box<dyn Sink> {
    crate::display::boxed(view.with_knobs(knobs).with_inputs(labels, failed))
}

#[cfg(not(feature = "ffmpeg"))]
fn web(view: View, _: Knobs, _: Vec<String>, _: Vec<String>) -> Box<dyn Sink> {
    match view {}
}

/// Checks that the run's window can open (where it has one); false when a stop came while
/// the display was being asked (the run then ends, having written nothing).
pub(super) fn window_possible_unless_stopped(display: &Display, stop: &Stop) -> Result<bool> {
    if display.window == Window::None {
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
