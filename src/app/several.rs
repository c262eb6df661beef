//! A run of several inputs (`--input` given more than once): every input's outputs claimed,
//! the inputs opened side by side, a plan settled for each (its ring, its formats), one
//! backend for all, each input's own output (`{n}` in `--output`), the mosaic (or one
//! window each with `--no-mosaic`), one pipeline, and a summary with a part per input.
//!
//! Invariants: what a run of one input refuses, each input's part refuses too, before
//! anything opens; an input that can't be opened is said at once and the others run (its
//! tile says why, and the run exits non-zero at the end); an input slow to open holds the
//! others up at most `LATE_AFTER` after the first one opened, then joins the run when it
//! opens (only one without outputs of its own: theirs are made for its frames before the
//! run, so such an input is waited for); each input's output is written from its own frames
//! only, as a run of that input alone would write it.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

use super::{
    arm_exit_summary, check_outputs, disarm_exit_summary, frames_to_go, open_file_output,
    open_streams, open_window, report, user_kernels, window_possible_unless_stopped,
    write_summary_json, Places,
};
use crate::info;
use crate::pipeline::{self, Arrival, Input};
use crate::plan::{Plan, Request};
use crate::sink::{self, route::ByInput, Knobs, Sink};
use crate::source::open::{self, Opened};
use crate::stats::InputStats;
use crate::stop::Stop;
use crate::tiles::{Compose, FullFrames, Layout, MAX_MOSAIC};

/// An input that opened: its index among `--input`s, the source (and its media), its plan.
type Running = (usize, Opened, Plan);

/// Slots each input's ring holds when `--ring` is not given (fewer than one input's
/// default: many rings share the host's memory).
const RING_EACH: usize = 6;

/// Runs every input of `request` (module doc).
pub(super) fn run(request: &Request, stop: &Stop) -> Result<()> {
    let args = &request.flags;
    let n = request.inputs.len();
    let requests = (0..n)
        .map(|i| request.for_input(i))
        .collect::<Result<Vec<_>>>()?;
    let recording = request.mosaic_request()?;
    refuse_crossed_files(&requests, recording.as_ref())?;
    let mut claims = Vec::with_capacity(n);
    for r in &requests {
        claims.push(Some(check_outputs(r)?));
    }
    let recording_claim = recording.as_ref().map(check_outputs).transpose()?;
    if !window_possible_unless_stopped(args, stop)? {
        return Ok(());
    }
    let warming = (args.backend != crate::backend::BackendKind::Cpu)
        .then(|| crate::backend::device::warm_up(crate::backend::device::DEFAULT_DEVICE));
    // An input with outputs of its own must be open before the run (its outputs are made
    // for its frames); one that only the mosaic shows may join later.
    let may_join_late: Vec<bool> = requests
        .iter()
        .map(|r| r.output.is_none() && r.streams.is_empty() && (args.headless || !args.no_mosaic))
        .collect();
    let Some(opened) = open_all(stop, &requests, &may_join_late) else {
        pipeline::leave_a_thread_behind();
        info!("stopped while the inputs were opening; nothing was written");
        return Ok(());
    };

    // The inputs that opened run, numbered in order (their `InputId`), then those still
    // opening (they join when open); the others keep their tile and their place in the
    // summary.
    let mut running: Vec<Running> = Vec::new();
    let mut late: Vec<(usize, pipeline::Opener)> = Vec::new();
    let mut failed: Vec<(usize, String)> = Vec::new();
    for (i, opening) in opened.into_iter().enumerate() {
        let result = match opening {
            Opening::Done(result) => result,
            Opening::Late(rx) => {
                info!(
                    "input {i} ({}) is still opening after {} s; the others start, and it joins when it opens",
                    requests[i].input_name,
                    LATE_AFTER.as_secs()
                );
                late.push((i, late_opener(rx, requests[i].clone(), i)));
                continue;
            }
        };
        match result {
            Ok((source, media)) => {
                info!("input {i}: {}", source.describe());
                let mut plan = Plan::settle(&requests[i], source.as_ref())
                    .with_context(|| format!("input {i} ({})", requests[i].input_name))?;
                if args.ring.is_none() {
                    // The backend's frames in flight are taken from every input's ring, not
                    // from this one alone: they stay as planned (or as --in-flight says).
                    plan.ring = plan.ring.min(RING_EACH);
                }
                running.push((i, (source, media), plan));
            }
            Err(e) => {
                crate::warn!(
                    "input {i} ({}) could not be opened: {e:#}; the other inputs go on",
                    requests[i].input_name
                );
                failed.push((i, format!("failed: {e:#}")));
            }
        }
    }
    let Some((first, ..)) = running.first() else {
        bail!(
            "none of the {n} inputs could be opened ({})",
            failed
                .iter()
                .map(|(i, e)| format!("input {i}: {}", e.trim_start_matches("failed: ")))
                .collect::<Vec<_>>()
                .join("; ")
        );
    };
    let first = *first;
    let mut each: Vec<Option<Box<dyn Sink>>> = Vec::with_capacity(running.len());
    let mut total = Some(0u64);
    for (i, (source, media), plan) in &running {
        let places = Places {
            claimed: claims[*i].take().expect("claimed once"),
            fps: plan.fps,
            formats: plan.backend.formats,
            bands: plan.backend.plan.len(),
            media: media.as_ref(),
        };
        let mut own: Vec<Box<dyn Sink>> = Vec::new();
        own.extend(open_streams(&requests[*i], source.as_ref(), &places)?);
        own.extend(open_file_output(&requests[*i], source.as_ref(), places)?);
        if !args.headless && args.no_mosaic {
            let knobs = knobs(args, plan);
            let title = format!("framepipe {i}: {}", requests[*i].input_name);
            own.insert(0, open_window(&title, knobs, None)?);
        }
        total = total
            .zip(frames_to_go(source.as_ref(), args))
            .map(|(a, b)| a + b);
        each.push(match own.len() {
            0 => None,
            1 => own.pop(),
            _ => Some(Box::new(sink::Tee(own))),
        });
    }
    // The run's inputs by `InputId`: their places among the `--input`s (those open, then
    // those joining late).
    let order: Vec<usize> = running
        .iter()
        .map(|(i, ..)| *i)
        .chain(late.iter().map(|(i, _)| *i))
        .collect();
    // Inputs that join late write nowhere of their own, and their length is not known.
    each.extend(late.iter().map(|_| None));
    if !late.is_empty() {
        total = None;
    }
    let record = match (&recording, recording_claim) {
        (Some(r), Some(claim)) => Some((r, claim)),
        _ => None,
    };
    let shown = !args.headless && !args.no_mosaic;
    // The mosaic is composed by the backend (on the device with CUDA: then only its picture
    // and the frames some output of their own needs come down).
    let compose = (shown || record.is_some() || args.serve.is_some()).then(|| Compose {
        layout: mosaic_layout(args, n, &running),
        tile_of: order.clone(),
        full: match each.iter().any(Option::is_some) {
            true => FullFrames::all(),
            false => FullFrames::shown(),
        },
    });
    running[0].2.backend.compose.clone_from(&compose);
    let plan = &running[0].2;
    let _warm = warming.and_then(|w| w.join().ok().flatten());
    let backend = plan.make_backend()?;
    info!("backend: {}", backend.describe());
    let reload = user_kernels(&requests[first], &plan.backend)?;
    let opts = plan.options(reload);
    let all = match compose {
        Some(c) => Some(open_mosaic(
            request,
            (&running[..], &failed[..]),
            c,
            stop,
            record,
        )?),
        None => None,
    };
    let mut sink: Box<dyn Sink> = Box::new(ByInput::new(each, all));
    if args.headless && !args.quiet {
        sink = Box::new(sink::progress::Progress::new(sink, total));
    }
    info!("output: {}", sink.describe());

    let names: Vec<String> = requests.iter().map(|r| r.input_name.clone()).collect();
    let ring = args.ring.unwrap_or(RING_EACH);
    let inputs: Vec<Input> = running
        .into_iter()
        .map(|(_, (source, _), plan)| Input {
            source: Arrival::Open {
                source,
                formats: plan.backend.formats,
            },
            ring: plan.ring,
        })
        .chain(late.into_iter().map(|(i, open)| Input {
            source: Arrival::Late {
                name: names[i].clone(),
                open,
            },
            ring,
        }))
        .collect();
    arm_exit_summary(request);
    let ran = pipeline::run_inputs(inputs, backend, sink.as_mut(), &opts, stop);
    disarm_exit_summary();
    let mut summary = match ran {
        Ok(summary) => summary,
        Err(e) => {
            if let Some(failed_run) = e.downcast_ref::<pipeline::Failed>() {
                let mut summary = (*failed_run.summary).clone();
                summary.inputs = in_order(summary.inputs, &order, &failed, &names);
                crate::say!("{}", summary.render());
                write_summary_json(request, &summary, Some(&format!("{e:#}")))?;
            }
            return Err(e);
        }
    };
    summary.inputs = in_order(summary.inputs, &order, &failed, &names);
    if let Some((i, why)) = failed.first() {
        let error = format!(
            "input {i} ({}) could not be opened: {}",
            names[*i],
            why.trim_start_matches("failed: ")
        );
        crate::say!("{}", summary.render());
        write_summary_json(request, &summary, Some(&error))?;
        bail!("{error}; the other inputs ran to their end");
    }
    report(request, &summary)
}

/// How long the run waits for the other inputs once one has opened: those still opening then
/// (and allowed to) join the run when they open.
const LATE_AFTER: Duration = Duration::from_secs(2);

/// An input's opening, as the run starts.
enum Opening {
    /// Opened, or failed.
    Done(Result<Opened>),
    /// Still opening: its answer comes on this channel.
    Late(open::Opening),
}

/// Opens every input at once, each on its own helper thread (a slow one doesn't hold the
/// others' opening up), and waits until each has opened or failed; those that
/// `may_join_late` are waited for at most `LATE_AFTER` after the first input opened. None
/// when a stop came first.
fn open_all(stop: &Stop, requests: &[Request], may_join_late: &[bool]) -> Option<Vec<Opening>> {
    let mut openings: Vec<Opening> = requests
        .iter()
        .map(|r| match open::start(r.input.clone(), r.asked()) {
            Ok(rx) => Opening::Late(rx),
            Err(e) => Opening::Done(Err(e.context("starting its opening thread"))),
        })
        .collect();
    let mut first_open: Option<Instant> = None;
    loop {
        crate::stop::beat();
        for opening in &mut openings {
            let Opening::Late(rx) = opening else { continue };
            let Some(result) = open::answer(rx) else {
                continue;
            };
            if result.is_ok() {
                first_open.get_or_insert_with(Instant::now);
            }
            *opening = Opening::Done(result);
        }
        // An open that gave up because of a stop is a stop, not a failure.
        if stop.is_requested() {
            return None;
        }
        let waiting = |i: &usize| matches!(openings[*i], Opening::Late(_));
        let late_now = first_open.is_some_and(|t| t.elapsed() >= LATE_AFTER);
        let mut still = (0..openings.len()).filter(waiting).peekable();
        if still.peek().is_none() || (late_now && still.all(|i| may_join_late[i])) {
            return Some(openings);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// What a late input's capture thread waits on (`pipeline::Arrival::Late`): its opening's
/// answer, then its plan's formats (as an input open at the start gets them).
fn late_opener(answer: open::Opening, request: Request, i: usize) -> pipeline::Opener {
    Box::new(move |stop: &Stop| {
        let Some((source, _media)) = open::wait(stop, &answer).context("it could not be opened")?
        else {
            return Ok(None);
        };
        let plan = Plan::settle(&request, source.as_ref())
            .with_context(|| format!("input {i} ({})", request.input_name))?;
        Ok(Some((source, plan.backend.formats)))
    })
}

/// The window's knobs for an input's plan.
fn knobs(args: &crate::cli::RunArgs, plan: &Plan) -> Knobs {
    Knobs {
        pageable: args.pageable,
        bands: plan.backend.plan.len(),
        height: plan.backend.size.height,
    }
}

/// The mosaic's layout: `--grid` or as square as `n` tiles make it, fitting the screen
/// where it is shown, at most `MAX_MOSAIC` where it is only recorded (wherever the run is).
fn mosaic_layout(args: &crate::cli::RunArgs, n: usize, running: &[Running]) -> Layout {
    let (cols, rows) = args
        .grid
        .map(|g| (g.width, g.height))
        .unwrap_or_else(|| crate::tiles::auto_grid(n));
    let sizes: Vec<_> = running.iter().map(|(_, (s, _), _)| s.size()).collect();
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

/// The mosaic of every input laid out by `layout` (`opened`: the inputs running, and those
/// that failed to open, with why), in one window (unless headless) and recorded to what
/// `record` names (its request and claim); `compose` is what the backend composes (its
/// layout, the tile of each input, open or joining late, and whose frames come down whole).
#[cfg(feature = "opencv")]
fn open_mosaic(
    request: &Request,
    (running, failed): (&[Running], &[(usize, String)]),
    compose: Compose,
    stop: &Stop,
    record: Option<(&Request, crate::sink::claim::Claimed)>,
) -> Result<Box<dyn Sink>> {
    use crate::sink::mosaic::{self, Mosaic};
    let args = &request.flags;
    let Compose {
        layout,
        tile_of,
        full,
    } = compose;
    let canvas = layout.canvas;
    let knobs = Knobs {
        pageable: args.pageable,
        bands: running[0].2.backend.plan.len(),
        height: running
            .iter()
            .map(|(.., p)| p.backend.size.height)
            .min()
            .unwrap_or(canvas.height),
    };
    let hold = (!args.exit_at_end).then(|| stop.clone());
    let window = match args.headless || args.no_mosaic {
        true => None,
        false => Some(open_window("framepipe", knobs.clone(), hold)?),
    };
    // The browser view shows what the window shows: the mosaic, labelled.
    let web = match &args.serve {
        Some(_) => Some(super::open_web(args, knobs)?),
        None => None,
    };
    let window: Option<Box<dyn Sink>> = match (window, web) {
        (Some(w), Some(v)) => Some(Box::new(crate::sink::Tee(vec![w, v]))),
        (w, v) => w.or(v),
    };
    let mosaic = Mosaic::new(
        window,
        layout,
        full,
        request.inputs.iter().map(|(_, t)| t.clone()).collect(),
        tile_of,
        failed.to_vec(),
    );
    let Some((recording, claim)) = record else {
        return Ok(Box::new(mosaic));
    };
    // The recording: the mosaic's pictures (BGR) at its rate, to a file (or standard
    // output) and the streams.
    let fps = mosaic::RECORD_FPS;
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    let mut claim = Some(claim);
    for spec in recording.output.iter().chain(&recording.streams) {
        crate::sink::check_rate(spec, fps).map_err(anyhow::Error::msg)?;
        let claimed = match spec.is_stream() {
            true => crate::sink::claim::Claimed::Nothing,
            false => claim.take().expect("one claim for the one file"),
        };
        let stdout = crate::sink::y4m::Layout {
            write: recording
                .output_format
                .unwrap_or(crate::pixel::PixelFormat::I420),
            given: crate::pixel::PixelFormat::Bgr24,
            tags: Default::default(),
        };
        sinks.push(crate::sink::open_output(
            spec,
            claimed,
            mosaic.size(),
            fps,
            &super::timing(None, fps, args, Some(spec)),
            stdout,
            true,
        )?);
    }
    let record: Box<dyn Sink> = match sinks.len() {
        1 => sinks.pop().expect("one"),
        _ => Box::new(crate::sink::Tee(sinks)),
    };
    Ok(Box::new(mosaic.with_recording(record, fps)))
}

#[cfg(not(feature = "opencv"))]
fn open_mosaic(
    _: &Request,
    _: (&[Running], &[(usize, String)]),
    _: Compose,
    _: &Stop,
    _: Option<(&Request, crate::sink::claim::Claimed)>,
) -> Result<Box<dyn Sink>> {
    bail!("this build has no OpenCV and cannot open a window")
}

/// The summary's inputs in `--input` order: the run's (`order[k]` is the run's input `k`)
/// and those that could not be opened.
fn in_order(
    ran: Vec<InputStats>,
    order: &[usize],
    failed: &[(usize, String)],
    names: &[String],
) -> Vec<InputStats> {
    let mut all: Vec<Option<InputStats>> = vec![None; names.len()];
    for (k, stats) in ran.into_iter().enumerate() {
        all[order[k]] = Some(stats);
    }
    for (i, why) in failed {
        all[*i] = Some(InputStats {
            name: names[*i].clone(),
            ended: Some(why.clone()),
            ..InputStats::default()
        });
    }
    all.into_iter().flatten().collect()
}

/// Refuses an input's output (or the mosaic's: `recording`) that is another input's file
/// (each input's part checks its own input), and two outputs that are one file.
fn refuse_crossed_files(requests: &[Request], recording: Option<&Request>) -> Result<()> {
    use crate::paths::{self, InputFile};
    use crate::source::InputSpec;
    let files: Vec<InputFile> = requests
        .iter()
        .filter_map(|r| match &r.input {
            InputSpec::Video(p) | InputSpec::Image(p) => paths::file_id(p).map(|id| InputFile {
                name: &r.input_name,
                id,
            }),
            _ => None,
        })
        .collect();
    let outputs: Vec<&str> = requests
        .iter()
        .chain(recording)
        .flat_map(|r| r.flags.output.iter().map(String::as_str))
        .filter(|o| !o.contains("://") && *o != "-")
        .collect();
    for (k, out) in outputs.iter().enumerate() {
        for input in &files {
            paths::refuse_input_file("--output", out, input).map_err(anyhow::Error::msg)?;
        }
        if outputs[..k].iter().any(|o| paths::same_file(o, out)) {
            bail!("--output: two inputs would write '{out}'");
        }
    }
    #[cfg(feature = "ffmpeg")]
    {
        use crate::sink::{hls, Container};
        let (playlists, others): (Vec<&str>, Vec<&str>) = outputs
            .iter()
            .partition(|o| Container::of_path(o) == Some(Container::Hls));
        for p in &playlists {
            hls::refuse_inputs(p, &files).map_err(anyhow::Error::msg)?;
        }
        hls::refuse_crossing(&playlists, &others).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}
