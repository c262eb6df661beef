//! `framepipe [OPTIONS]`: one run, whatever the number of inputs. The flags are checked once
//! (`plan::Request`) and split into each input's part and the mosaic's recording (`Parts`);
//! every output is claimed (`claims`); every input is opened side by side while CUDA warms
//! up, and a `Plan` settled for each (`opening`); one backend is made; each input's own
//! outputs (`outputs`) and what the run shows (`displays`: the window, the browser view,
//! the mosaic) are opened; one pipeline runs; the summary is reported (`report`). A run of
//! one input is this run with one input.
//!
//! Invariants: every bad argument, and every output that can't be written or would write
//! over an input, is refused before anything is opened for writing and before a capture
//! thread starts; the ring's memory is checked against the machine's before it is
//! allocated; a stop asked for while the inputs are still opening ends the run at once; an
//! input that can't be opened beside others is said at once and the others run (its tile
//! says why, and the run exits non-zero at the end); each input's outputs are written from
//! its own frames only, as a run of that input alone would write them.

use anyhow::{Context, Result};

use std::sync::Arc;
use std::time::Instant;

use crate::backend::{self, check, BackendConfig, BackendKind};
use crate::cli::RunArgs;
use crate::info;
use crate::pipeline;
use crate::plan::Request;
use crate::reload::Reloader;
use crate::sink::{self, route, Sink};
use crate::stop::Stop;

mod claims;
mod displays;
mod opening;
mod outputs;
mod report;

/// Runs the pipeline as `args` say; Ok also when the user stopped it. The flags are checked
/// once, into a `Request`, and every later step reads that.
pub fn run(args: &RunArgs) -> Result<()> {
    let stop = Stop::process();
    Stop::install_signal_handler().context("installing the signal handlers")?;
    let ran = Request::check(args).and_then(|request| run_request(&request, &stop));
    report::without_a_run(args, ran.as_ref().err());
    ran
}

/// What each input writes of its own, and what records the mosaic.
struct Parts {
    /// Each input's request: in a run of one input, every output; beside others, its `{n}`
    /// outputs (`Request::for_input`).
    inputs: Vec<Request>,
    /// In a run of several inputs, the outputs without `{n}`: they record the mosaic.
    recording: Option<Request>,
}

impl Parts {
    fn of(request: &Request) -> Result<Self> {
        if !request.several() {
            return Ok(Self {
                inputs: vec![request.clone()],
                recording: None,
            });
        }
        Ok(Self {
            inputs: (0..request.inputs.len())
                .map(|i| request.for_input(i))
                .collect::<Result<_>>()?,
            recording: request.mosaic_request()?,
        })
    }
}

/// The run a checked request describes (module doc).
fn run_request(request: &Request, stop: &Stop) -> Result<()> {
    let args = &request.flags;
    let started = Instant::now();
    let since = || crate::stats::ms(started.elapsed());
    let parts = Parts::of(request)?;
    let mut claims = claims::claim(&parts)?;
    if !displays::window_possible_unless_stopped(args, stop)? {
        return Ok(());
    }
    // CUDA starts (context, kernels) while the inputs open.
    let warming = (args.backend != BackendKind::Cpu)
        .then(|| backend::device::warm_up(backend::device::DEFAULT_DEVICE));
    let Some(mut inputs) = opening::open(stop, &parts)? else {
        pipeline::leave_a_thread_behind();
        info!("stopped while the input was opening; nothing was written");
        return Ok(());
    };
    crate::debug!("start-up: input open at {:.1} ms", since());
    let (each, total) = open_each(&parts, &inputs, &mut claims.each, stop)?;
    let order = inputs.order();
    let compose = displays::compose(&parts, &inputs, &order, each.iter().any(Option::is_some));
    inputs.running[0].plan.backend.compose.clone_from(&compose);
    // Held until the backend exists, so that the warmed context is the one it opens.
    let _warm = warming.and_then(|w| w.join().ok().flatten());
    crate::debug!("start-up: CUDA warmed up at {:.1} ms", since());
    let plan = &inputs.running[0].plan;
    let backend = plan.make_backend()?;
    crate::debug!("start-up: backend made at {:.1} ms", since());
    info!("backend: {}", backend.describe());
    let first = inputs.running[0].at;
    let opts = plan.options(user_kernels(&parts.inputs[first], &plan.backend)?);
    let all = match compose {
        Some(c) => Some(displays::open_mosaic(
            &parts,
            &inputs,
            c,
            stop,
            claims.recording,
        )?),
        None => None,
    };
    let mut sink = route::by_input(each, all);
    if args.headless && !args.quiet {
        sink = Box::new(sink::progress::Progress::new(sink, total));
    }
    info!("output: {}", sink.describe());
    let names: Vec<String> = parts.inputs.iter().map(|r| r.input_name.clone()).collect();
    let failed: Vec<(usize, String)> = std::mem::take(&mut inputs.failed)
        .into_iter()
        .map(|(i, e)| (i, format!("failed: {e:#}")))
        .collect();
    let ring = args.ring.unwrap_or(crate::plan::RING_EACH);
    let pipeline_inputs = inputs.into_pipeline(&names, ring);
    report::arm_exit_summary(request);
    crate::debug!("start-up: sinks open at {:.1} ms", since());
    let ran = pipeline::run_inputs(pipeline_inputs, backend, sink.as_mut(), &opts, stop);
    crate::debug!("run ended at {:.1} ms", since());
    report::disarm_exit_summary();
    let places = report::Places {
        order: &order,
        failed: &failed,
        names: &names,
    };
    report::finish(request, ran, places)
}

/// Each input's own sinks, by `InputId` (its window and browser view where it is shown
/// alone, its streams, its file), on its claim; and the frames the run will take where
/// every input's count is known (inputs joining late have none of their own, and no known
/// length).
type Each = (Vec<Option<Box<dyn Sink>>>, Option<u64>);

fn open_each(
    parts: &Parts,
    inputs: &opening::Inputs,
    claims: &mut [Option<sink::claim::Claimed>],
    stop: &Stop,
) -> Result<Each> {
    let mut each = Vec::with_capacity(inputs.running.len() + inputs.late.len());
    let mut total = Some(0u64);
    for running in &inputs.running {
        let (request, (source, media)) = (&parts.inputs[running.at], &running.opened);
        let places = outputs::Places {
            claimed: claims[running.at].take().expect("claimed once"),
            fps: running.plan.fps,
            formats: running.plan.backend.formats,
            media: media.as_ref(),
        };
        // Before the outputs: the summary's verb is the last sink's (a file's "written").
        let mut own = displays::of_input(parts, running, stop)?;
        own.extend(outputs::open(request, source.as_ref(), places)?);
        total = total
            .zip(outputs::frames_to_go(source.as_ref(), &request.flags))
            .map(|(a, b)| a + b);
        each.push(sink::tee(own));
    }
    each.extend(inputs.late.iter().map(|_| None));
    if !inputs.late.is_empty() {
        total = None;
    }
    Ok((each, total))
}

/// With user kernels in the chain (the backend is CUDA then): checks them for band
/// invariance on one frame of the run's size before any frame is read, and makes the
/// reloader that watches their files (unless `--no-watch`; `r` reloads either way).
fn user_kernels(request: &Request, cfg: &BackendConfig) -> Result<Option<Arc<Reloader>>> {
    let args = &request.flags;
    let files: Vec<String> = args.filter.user_kernels().map(|k| k.file()).collect();
    if files.is_empty() {
        return Ok(None);
    }
    let (size, device) = (cfg.size, cfg.cuda.device);
    let runs = [cfg.plan.len(), cfg.busy_plan.len()];
    let check = move |chain: &crate::filter::Chain| check::before_run(chain, size, &runs, device);
    check(&args.filter).map_err(anyhow::Error::msg)?;
    info!(
        "{}: compiled, and band-invariant on a {size} frame with {} and {} bands",
        files.join(", "),
        runs[0],
        runs[1]
    );
    if !args.no_watch {
        info!(
            "watching {} (save to reload, or r in the window)",
            files.join(", ")
        );
    }
    Ok(Some(Arc::new(Reloader::new(
        args.filter.clone(),
        Box::new(check),
        !args.no_watch,
    ))))
}
