//! `framepipe [OPTIONS]`: one run, whatever the number of inputs. The flags are consumed once
//! into a `RunPlan` (each input's part, the mosaic's recording, what the run shows); a
//! build without OpenCV hands a plan that needs OpenCV to the OpenCV build where one is
//! named (`full_build`), before anything opens; the plan is fitted to the machine's facts (`Machine`; with no display the run goes on headless,
//! said once); every output is claimed (`claims`); the browser view is opened (`displays`:
//! its `/healthz` answers while the inputs open); each input's `--record` is started
//! (`recordings`, finished however the run ends); every input is opened side by side while CUDA warms up, and a `Plan` settled for each
//! (`opening`); one backend is made; each input's own outputs (`outputs`) and what the run
//! shows (`displays`: the window, the browser view, the mosaic) are opened; one pipeline
//! runs; the summary is reported (`report`). A run of one input is this run with one input.
//! Where inputs may join and leave while it runs (a wall of a list, or a served one), its
//! `service` takes the browser view's and the inputs file's changes in place.
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
use crate::detect::seen::Seen;
use crate::info;
use crate::output;
use crate::pipeline;
use crate::plan::shard::Environment;
use crate::plan::{Machine, RunPlan, Start};
use crate::reload::Reloader;
use crate::sink::{self, route, Sink};
use crate::stop::Stop;

mod claims;
mod displays;
pub mod full_build;
mod idle;
#[cfg(feature = "ffmpeg")]
mod kept;
mod opening;
mod outputs;
#[cfg(feature = "ffmpeg")]
mod recordings;
#[cfg(not(feature = "ffmpeg"))]
#[path = "recordings_none.rs"]
mod recordings;
mod report;
mod roster;
#[cfg(feature = "opencv")]
mod screen;
#[cfg(not(feature = "opencv"))]
#[path = "screen_none.rs"]
mod screen;
#[cfg(feature = "ffmpeg")]
mod service;

/// How a run ended: its result (Ok also when the user stopped it), and whether a thread
/// was left blocked inside a source (a stalled stream's read, an opening that never
/// answered): the process must then end without running exit-time destructors under that
/// thread's feet (`libc::_exit`).
pub struct Ran {
    /// The run's result.
    pub result: Result<()>,
    /// A thread was left blocked inside a source.
    pub left_behind: bool,
    /// The run was stopped because its share of `--inputs` changed: the process is to
    /// start again with the same flags (`roster`).
    pub restart: bool,
    /// What an abort still reports of the run until the process ends (its summary, marked
    /// failed): a process that ends after its run keeps it to the end (`stop::end`).
    pub until_exit: UntilExit,
}

/// The run's hooks at the process's end (`stop::at_end`), taken back when dropped.
pub struct UntilExit(#[allow(dead_code)] Option<report::ExitSummary>);

/// Runs the pipeline as `start` says. The flags are consumed into a `RunPlan`, and every
/// later step reads that.
pub fn run(start: Start) -> Ran {
    run_with(start, Stop::process(), None)
}

/// Runs the pipeline as `args` say for a program that embeds framepipe (the Python
/// package): every input's frames are also handed over as `to` says (`sink::handover`,
/// in the format its shaping asks for), and the run ends when `to.stop` is asked for. No
/// signal handler is installed: the embedding program keeps its own. No CUDA graph is
/// captured (`Start::embedded`).
pub fn run_embedded(start: Start, to: sink::handover::HandTo) -> Ran {
    let start = start.embedded(to.shaping.format());
    run_with(start, to.stop.clone(), Some(to))
}

fn run_with(start: Start, stop: Stop, to: Option<sink::handover::HandTo>) -> Ran {
    let window = start.window_part();
    let headless_because = start.headless_because();
    let ending = report::Ending::default();
    let summary_json = start.summary_json();
    let mut watch = None;
    let result = (|| {
        if to.is_none() {
            Stop::install_signal_handler().context("installing the signal handlers")?;
        }
        let roster = start.roster(&Environment::of_process())?;
        if let Some(line) = roster.describe() {
            info!("inputs: {line}");
        }
        watch = roster::Watch::start(start.inputs_given(), &roster, &stop);
        if roster.listed() && roster.mine().is_empty() {
            return idle::wait(&start, &roster, &stop);
        }
        let plan = start.plan(&roster)?;
        if to.is_none() {
            full_build::hand_over(window.or_else(|| plan.opencv_part()));
        }
        if let Some(why) = headless_because {
            info!("{why}: running headless, as --headless does");
        }
        let machine = Machine::gather(plan.asks_cuda());
        let plan = plan.fit(&machine)?;
        run_plan(&plan, (&stop, watch.as_ref()), &ending, to.as_ref())
    })();
    report::without_a_run(summary_json.as_deref(), result.as_ref().err(), &ending);
    Ran {
        result,
        left_behind: ending.left_a_thread_behind(),
        restart: watch.is_some_and(|w| w.restart()),
        until_exit: UntilExit(ending.into_exit_summary()),
    }
}

/// The run `plan` describes (module doc).
fn run_plan(
    plan: &RunPlan,
    (stop, watch): (&Stop, Option<&roster::Watch>),
    ending: &report::Ending,
    to: Option<&sink::handover::HandTo>,
) -> Result<()> {
    let started = Instant::now();
    let since = || crate::stats::ms(started.elapsed());
    let mut claims = claims::claim(plan)?;
    // The detector is opened, and its family known, before any input is.
    let mut model = plan.detect().map(crate::detect::Model::open).transpose()?;
    if !displays::window_possible_unless_stopped(plan.display(), stop)? {
        return Ok(());
    }
    // CUDA starts (context, kernels) while the inputs open.
    let warming = (plan.engine().kind != BackendKind::Cpu)
        .then(|| backend::device::warm_up(backend::device::DEFAULT_DEVICE));
    crate::budget::make_room_for_fds(plan.inputs().len())?;
    let recordings = recordings::Recordings::start(plan)?;
    let recent = recent_events(plan);
    let mut view = displays::open_view(plan, &recordings, recent.clone(), takes_inputs(plan, to))?;
    let Some(mut inputs) = opening::open(stop, plan, &recordings)? else {
        ending.leave_a_thread_behind();
        info!("stopped while the input was opening; nothing was written");
        return Ok(());
    };
    crate::debug!("start-up: input open at {:.1} ms", since());
    let order = inputs.order();
    // Before the view goes to what shows it (the mosaic, or the one input's own display).
    let (joins, service);
    (view, joins, service) = serve_joins(plan, view, (&order, to), &recordings, watch);
    let outs = (&mut claims.each[..], &mut view);
    let (each, total) = open_each(plan, &mut inputs, outs, stop)?;
    // The detector and the motion detector read every frame: the backend brings each one
    // down.
    let motion = plan.events().is_some_and(|e| e.motion);
    let every_frame = each.iter().any(Option::is_some) || model.is_some() || motion;
    let compose = displays::compose(plan, &inputs, &order, every_frame);
    if let (Some(service), Some(compose)) = (&service, &compose) {
        lay_out(service, compose);
    }
    let seen = model.as_ref().map(|_| Seen::new(order.len()));
    let consumers = consumers_of(plan, &each, compose.clone(), to, &order);
    inputs.running[0].plan.settle_consumers(consumers);
    // Held until the backend exists, so that the warmed context is the one it opens.
    let _warm = warming.and_then(|w| w.join().ok().flatten());
    crate::debug!("start-up: CUDA warmed up at {:.1} ms", since());
    let first = &inputs.running[0].plan;
    let backend = backend_for(first, model.as_mut())?;
    crate::debug!("start-up: backend made at {:.1} ms", since());
    let mut opts = first.options(user_kernels(plan, &first.backend)?);
    opts.joins = joins.clone();
    let progress = opts.progress.clone();
    let mosaic = |c| {
        displays::open_mosaic(
            plan,
            &inputs,
            c,
            stop,
            (claims.recording, view),
            seen.clone(),
        )
    };
    let all = compose.map(mosaic).transpose()?;
    let mut sink = the_sink(plan, (each, joins.is_some()), all, to, total, seen.clone());
    let around = (&inputs, &order[..], &recordings, to.is_some());
    sink = detecting(plan, sink, (model, seen, recent), around, service.as_ref())?;
    info!("output: {}", outputs_said(sink.as_ref(), &recordings));
    let names: Vec<String> = plan.inputs().iter().map(|i| i.name.clone()).collect();
    let failed = inputs.take_failed();
    let ring = plan.engine().ring_beside_others();
    let pipeline_inputs = inputs.into_pipeline(&names, ring, &recordings);
    report::arm_exit_summary(ending, plan.reports(), progress);
    crate::debug!("start-up: sinks open at {:.1} ms", since());
    let ran = pipeline::run_inputs(pipeline_inputs, backend, sink.as_mut(), &opts, stop);
    crate::debug!("run ended at {:.1} ms", since());
    end_run(plan, ran, recordings, (&order, &failed, &names), ending)
}

/// The run's backend, made as the first input's `plan` asks (and said), the detector's
/// pictures fitted to its `model` on the backend's device where it has one.
fn backend_for(
    plan: &crate::plan::Plan,
    model: Option<&mut crate::detect::Model>,
) -> Result<Box<dyn backend::Backend>> {
    let backend = plan.make_backend()?;
    info!("backend: {}", backend.describe());
    if let (Some(model), Some(ctx)) = (model, backend.cuda_context()) {
        model.fit_on(&ctx);
    }
    Ok(backend)
}

/// What the run `ran` left: its recordings and copies finished, its summary reported (the
/// run's inputs by `order`, those that `failed`, every input's `names`).
fn end_run(
    plan: &RunPlan,
    ran: Result<crate::stats::Summary>,
    recordings: recordings::Recordings,
    (order, failed, names): (&[usize], &[(usize, String)], &[String]),
    ending: &report::Ending,
) -> Result<()> {
    let (ran, recorded) = finish_taps(ran, recordings);
    report::disarm_exit_summary(ending);
    let places = report::Places {
        order,
        failed,
        names,
        recorded: &recorded,
    };
    report::finish(plan.reports(), ran, places, ending)
}

/// Whether inputs may join and leave the run while it goes (a wall, not an embedding
/// program's run).
fn takes_inputs(plan: &RunPlan, to: Option<&sink::handover::HandTo>) -> bool {
    plan.takes_joins() && to.is_none()
}

/// The running wall's service, where inputs may join and leave (`joins`): the browser
/// view's API changes the inputs through it, and the inputs file's watcher hands it its
/// changes; the view is told each input's source by the pipeline's number (`order[k]`: the
/// `--input` place of input `k`).
#[cfg(feature = "ffmpeg")]
fn serve_joins(
    plan: &RunPlan,
    view: Option<displays::View>,
    (order, to): (&[usize], Option<&sink::handover::HandTo>),
    recordings: &recordings::Recordings,
    watch: Option<&roster::Watch>,
) -> (
    Option<displays::View>,
    Option<pipeline::Joins>,
    Option<Service>,
) {
    let joins = takes_inputs(plan, to)
        .then(|| pipeline::Joins::new(pipeline::MAX_INPUTS.saturating_sub(order.len())));
    let joined = view.as_ref().map(|v| v.joined());
    if let Some(joined) = &joined {
        for (k, &at) in order.iter().enumerate() {
            joined.source(k, &plan.inputs()[at].source);
        }
    }
    let Some(joins) = joins else {
        return (view, None, None);
    };
    let mut ids = vec![None; plan.inputs().len()];
    for (k, &at) in order.iter().enumerate() {
        ids[at] = Some(crate::desc::InputId(k as u16));
    }
    let recorded = (0..plan.inputs().len())
        .map(|at| recordings.recording(at))
        .collect();
    let kept = kept::Kept::beside(watch.map(roster::Watch::file));
    let service = std::sync::Arc::new(service::Service::new(
        plan,
        joins.clone(),
        (ids, recorded),
        (recordings.archives().to_vec(), kept),
        joined,
    ));
    if let Some(watch) = watch {
        watch.adopt(service.clone());
    }
    service::Service::restore(&service);
    let view = view.map(|v| v.with_control(service.clone()));
    (view, Some(joins), Some(service))
}

#[cfg(not(feature = "ffmpeg"))]
fn serve_joins(
    _: &RunPlan,
    view: Option<displays::View>,
    _: (&[usize], Option<&sink::handover::HandTo>),
    _: &recordings::Recordings,
    _: Option<&roster::Watch>,
) -> (
    Option<displays::View>,
    Option<pipeline::Joins>,
    Option<Service>,
) {
    (view, None, None)
}

/// The running wall's service (`service`), where inputs may join and leave.
#[cfg(feature = "ffmpeg")]
type Service = std::sync::Arc<service::Service>;
/// Without FFmpeg's libraries no input joins a running wall.
#[cfg(not(feature = "ffmpeg"))]
type Service = std::convert::Infallible;

/// The running wall's inputs made `mine` (a changed inputs file's share) by its service.
#[cfg(feature = "ffmpeg")]
fn hand_to(service: &Service, mine: &[crate::plan::shard::Entry]) {
    service.become_(mine);
}

#[cfg(not(feature = "ffmpeg"))]
fn hand_to(service: &Service, _: &[crate::plan::shard::Entry]) {
    match *service {}
}

/// The detector told each joining input's own settings by the service.
#[cfg(feature = "ffmpeg")]
fn detect_with(service: &Service, own: sink::detecting::JoinedOwn) {
    service.detect_with(own);
}

#[cfg(not(feature = "ffmpeg"))]
fn detect_with(service: &Service, _: sink::detecting::JoinedOwn) {
    match *service {}
}

/// The mosaic `compose` laid out again as the service's inputs join and leave.
#[cfg(feature = "ffmpeg")]
fn lay_out(service: &Service, compose: &crate::tiles::Compose) {
    service.lay_out(compose.regrid.clone());
}

#[cfg(not(feature = "ffmpeg"))]
fn lay_out(service: &Service, _: &crate::tiles::Compose) {
    match *service {}
}

/// Finishes what took the inputs' packets (copies, recordings) after the run `ran`: a copy
/// that failed fails the run (its summary kept); what each recording wrote, by place.
fn finish_taps(
    ran: Result<crate::stats::Summary>,
    mut recordings: recordings::Recordings,
) -> (
    Result<crate::stats::Summary>,
    Vec<Option<crate::stats::Recorded>>,
) {
    let ran = match (ran, recordings.finish_copies()) {
        (Ok(summary), Err(error)) => Err(pipeline::Failed {
            summary: Box::new(summary),
            error,
        }
        .into()),
        (ran, _) => ran,
    };
    (ran, recordings.finish())
}

/// What the backend does for the consumers: compose the mosaic where there is one; keep
/// frames on the device (or where their source left them) where nothing else reads them (no
/// other output, no detector, no motion) and the embedding program takes them
/// as they are, or shaped for a model as the CUDA backend shapes them (it lends them:
/// `backend::lend`; the CPU backend ignores both); each input's name for `{name}`.
fn consumers_of(
    plan: &RunPlan,
    each: &[Option<Box<dyn Sink>>],
    compose: Option<crate::tiles::Compose>,
    to: Option<&sink::handover::HandTo>,
    order: &[usize],
) -> crate::plan::Consumers {
    // The detector and motion read the frames' pixels on the host: a frame lent where its
    // source left it would reach them unread (Python's detect= found nothing).
    let detects = plan.detect().is_some() || plan.events().is_some_and(|e| e.motion);
    let alone = each.iter().all(Option::is_none) && compose.is_none() && !detects;
    let shape = to.and_then(|to| to.shaping.on_device());
    let lend = alone && to.is_some_and(|to| to.shaping.plain() || shape.is_some());
    crate::plan::Consumers {
        compose,
        lend,
        shape,
        names: order
            .iter()
            .map(|&at| plan.inputs()[at].label.clone())
            .collect(),
    }
}

/// The latest events, for the browser view's list, where the run makes events and serves
/// the view.
fn recent_events(plan: &RunPlan) -> Option<Arc<crate::events::recent::Recent>> {
    plan.events()
        .and(plan.display().serve.as_ref())
        .map(|_| Default::default())
}

/// `sink` with `model` run on the inputs' due frames (`--detect`), their boxes kept in
/// `seen`, their lines written beside each input's recording, their events made (kept in
/// `recent` for the browser view) and clipped (`recordings`' clip makers); without a model,
/// only the events of motion and the inputs' states; `sink` itself where neither is asked;
/// `order[k]` is the `--input` place of the run's input `k`; `handed`: an embedding program
/// takes the frames (a file's then waits for its own boxes, as where they are drawn).
fn detecting(
    plan: &RunPlan,
    sink: Box<dyn Sink>,
    (model, seen, recent): (
        Option<crate::detect::Model>,
        Option<crate::detect::seen::Seen>,
        Option<Arc<crate::events::recent::Recent>>,
    ),
    (inputs, order, recordings, handed): (
        &opening::Inputs,
        &[usize],
        &recordings::Recordings,
        bool,
    ),
    service: Option<&Service>,
) -> Result<Box<dyn Sink>> {
    if model.is_none() && plan.events().is_none() {
        return Ok(sink);
    }
    let seen = seen.unwrap_or_else(|| Seen::new(order.len()));
    let settings = plan.detect();
    let beside = order.iter().map(|&at| recordings.beside(at)).collect();
    let clips = order.iter().map(|&at| recordings.clip_hook(at)).collect();
    let events = events_of(plan, inputs, order, (clips, recent))?;
    let placed = || order.iter().map(|&at| &plan.inputs()[at]);
    let inputs = sink::detecting::Inputs {
        names: placed().map(|i| i.label.clone()).collect(),
        // What is read whole, a file or frames piped in (which wait rather than drop), has
        // every frame detected.
        live: placed()
            .map(|i| {
                use crate::source::InputSpec::{Image, Pipe, Stdin, Video};
                !matches!(i.spec, Video(_) | Image(_) | Stdin | Pipe(_))
            })
            .collect(),
        seen,
        // Nothing to draw into: a file's frames need not wait for their boxes.
        draw: match (plan.pictures_seen(), settings) {
            (true, Some(settings)) => settings.draw,
            _ => crate::detect::Draw::None,
        },
        beside,
        exact: handed,
        events,
        motion: plan.events().is_some_and(|e| e.motion),
        own: placed()
            .map(|i| sink::detecting::OwnSettings {
                on: i.own.detect != Some(false),
                fps: i.own.detect_fps(),
                events: Arc::new(i.own.events()),
            })
            .collect(),
    };
    let replace = plan.writing().overwrite == crate::output::claim::Overwrite::Replace;
    let jsonl = settings.and_then(|s| s.jsonl.clone()).map(|p| (p, replace));
    let fps = settings.and_then(|s| s.fps);
    let detecting = sink::detecting::Detecting::new(sink, model, inputs, fps, jsonl)?;
    if let Some(service) = service {
        detect_with(service, detecting.joined_own());
    }
    Ok(Box::new(detecting))
}

/// What the run writes, as its start says it: the sink's outputs and the copies' files.
fn outputs_said(sink: &dyn crate::sink::Sink, recordings: &recordings::Recordings) -> String {
    match (sink.describe(), recordings.copies_described()) {
        (s, Some(copies)) if s == crate::sink::null::NOTHING => copies,
        (s, Some(copies)) => format!("{s}; {copies}"),
        (s, None) => s,
    }
}

/// What makes an event's picture a JPEG (MQTT's snapshots): the recordings' snapshot's.
fn jpeg_maker() -> Option<crate::events::JpegMaker> {
    #[cfg(feature = "ffmpeg")]
    {
        fn jpeg(picture: &crate::events::Picture) -> Option<Vec<u8>> {
            crate::record::snapshot::jpeg(picture)
                .map_err(|e| crate::debug!("an event's snapshot: {e:#}"))
                .ok()
        }
        Some(jpeg)
    }
    #[cfg(not(feature = "ffmpeg"))]
    None
}

/// The tracks of the run's detections, and the zones and events (`--zone`, `--line`,
/// `--events`, each input's `clips`) where asked: every zone and line checked against its input's picture (a
/// point outside it is an error before the first frame), the destinations started.
fn events_of(
    plan: &RunPlan,
    inputs: &opening::Inputs,
    order: &[usize],
    (clips, recent): (
        Vec<Option<crate::events::ClipHook>>,
        Option<Arc<crate::events::recent::Recent>>,
    ),
) -> Result<Option<crate::events::Engine>> {
    let none = crate::events::Settings::default();
    let settings = plan.events().unwrap_or(&none);
    let names: Vec<String> = order
        .iter()
        .map(|&at| plan.inputs()[at].label.clone())
        .collect();
    for (k, r) in inputs.running.iter().enumerate() {
        let size = r.opened.0.size();
        let own = plan.inputs()[order[k]].own.events().shapes;
        for s in settings
            .shapes
            .iter()
            .filter(|s| s.on(k, &names[k]))
            .chain(&own)
        {
            let input = format!("{k} ({})", names[k]);
            s.check_inside(&input, size.width, size.height)?;
        }
    }
    let replace = plan.writing().overwrite == crate::output::claim::Overwrite::Replace;
    let hooks = (clips, recent, jpeg_maker());
    crate::events::Engine::start(settings, &names, replace, hooks).map(Some)
}

/// The run's one sink: each input's own, the mosaic's, the embedding program's hand-over
/// first (each frame with its input's newest boxes, from `seen`, where the run detects),
/// and the progress bar where asked (`total` frames where known).
fn the_sink(
    plan: &RunPlan,
    (each, joins): (Vec<Option<Box<dyn Sink>>>, bool),
    all: Option<Box<dyn Sink>>,
    to: Option<&sink::handover::HandTo>,
    total: Option<u64>,
    seen: Option<crate::detect::seen::Seen>,
) -> Box<dyn Sink> {
    let embedded = to.map(|to| route::Embedded {
        first: Box::new(sink::handover::Handover::new(to.clone()).with_detections(seen)),
        marks: to.marks.clone(),
    });
    let sink = route::by_input(each, all, embedded, joins);
    match plan.progress() {
        true => Box::new(sink::progress::Progress::new(sink, total)),
        false => sink,
    }
}

/// Each input's own sinks, by `InputId` (its window and browser view where it is shown
/// alone, its streams, its file), on its claim; and the frames the run will take where
/// every input's count is known (inputs joining late have none of their own, and no known
/// length).
type Each = (Vec<Option<Box<dyn Sink>>>, Option<u64>);

fn open_each(
    plan: &RunPlan,
    inputs: &mut opening::Inputs,
    (claims, view): (
        &mut [Option<output::claim::Claimed>],
        &mut Option<displays::View>,
    ),
    stop: &Stop,
) -> Result<Each> {
    let mut each = Vec::with_capacity(inputs.running.len() + inputs.late.len());
    let mut total = Some(0u64);
    for running in &mut inputs.running {
        let input = &plan.inputs()[running.at];
        // Before the outputs: the summary's verb is the last sink's (a file's "written").
        let mut own = displays::of_input(plan, running, stop, view)?;
        let (source, media) = &mut running.opened;
        let places = outputs::Places {
            claimed: claims[running.at].take().expect("claimed once"),
            size: running.plan.output_size(),
            rate: plan.engine().rate,
            fps: running.plan.fps,
            formats: running.plan.backend.formats,
            media: media.as_ref(),
        };
        // A file output's audio is tapped from the source: `&mut`.
        own.extend(outputs::open(plan, input, source.as_mut(), places)?);
        total = total
            .zip(outputs::frames_to_go(source.as_ref(), plan.engine().frames))
            .map(|(a, b)| a + b);
        each.push(sink::tee(own));
    }
    // An input joining late has no outputs of its own (the embedding program takes every
    // input's frames: `route::Embedded`).
    each.extend(inputs.late.iter().map(|_| None));
    if !inputs.late.is_empty() {
        total = None;
    }
    Ok((each, total))
}

/// With user kernels in the chain (the backend is CUDA then): checks them for band
/// invariance on one frame of the run's size before any frame is read, and makes the
/// reloader that watches their files (unless `--no-watch`; `r` reloads either way).
fn user_kernels(plan: &RunPlan, cfg: &BackendConfig) -> Result<Option<Arc<Reloader>>> {
    let engine = plan.engine();
    let files: Vec<String> = engine.chain.user_kernels().map(|k| k.file()).collect();
    if files.is_empty() {
        return Ok(None);
    }
    let (size, device) = (cfg.size, cfg.cuda.device);
    let runs = [cfg.plan.len(), cfg.busy_plan.len()];
    let check = move |chain: &crate::filter::Chain| {
        check::before_run(chain, size, &runs, device).map_err(anyhow::Error::from)
    };
    check(&engine.chain)?;
    info!(
        "{}: compiled, and band-invariant on a {size} frame with {} and {} bands",
        files.join(", "),
        runs[0],
        runs[1]
    );
    if engine.watch {
        info!(
            "watching {} (save to reload, or r in the window)",
            files.join(", ")
        );
    }
    Ok(Some(Arc::new(Reloader::new(
        engine.chain.clone(),
        Box::new(check),
        engine.watch,
    ))))
}
