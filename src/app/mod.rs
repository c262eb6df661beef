//! `framepipe [OPTIONS]`: checks the command line once (`plan::Request`), claims the
//! outputs, opens the input, settles the `Plan`, makes the backend and the sinks from it
//! (the window, the browser view, the file and the streams), runs the pipeline, and prints
//! the summary. A run of several inputs goes the same way in `several`.
//!
//! Invariants: every bad argument, and every output that can't be written or would write
//! over the input, is refused before anything is opened for writing and before the capture
//! thread starts; the ring's memory is checked against the machine's before it is
//! allocated; a stop asked for while the input is still opening ends the run at once.

use anyhow::{bail, Context, Result};

use std::sync::Arc;

use crate::backend::{self, check, BackendConfig, BackendKind};
use crate::cli::RunArgs;
use crate::info;
use crate::paths::{self, InputFile};
use crate::pipeline;
use crate::pixel::{Formats, PixelFormat};
use crate::plan::{Plan, Request};
use crate::reload::Reloader;
use crate::sink::Knobs;
use crate::sink::{self, OutputSpec, Sink};
use crate::source::{InputSpec, Source};
use crate::stats::Summary;
use crate::stop::Stop;

mod several;

/// Runs the pipeline as `args` say; Ok also when the user stopped it. The flags are checked
/// once, into a `Request`, and every later step reads that.
pub fn run(args: &RunArgs) -> Result<()> {
    let stop = Stop::process();
    Stop::install_signal_handler().context("installing the signal handlers")?;
    let ran = Request::check(args).and_then(|request| match request.several() {
        true => several::run(&request, &stop),
        false => run_request(&request, &stop),
    });
    summary_without_a_run(args, ran.as_ref().err());
    ran
}

/// Whether `--summary-json` was written by this run.
static SUMMARY_WRITTEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// `--summary-json` for a run that ended before its pipeline did (the input could not be
/// opened, a stop came first): no frames, and the error where there was one. Not where the
/// summary's own name was the problem.
fn summary_without_a_run(args: &RunArgs, error: Option<&anyhow::Error>) {
    let Some(path) = &args.summary_json else {
        return;
    };
    let error = error.map(|e| format!("{e:#}"));
    let about_itself = error
        .as_deref()
        .is_some_and(|e| e.contains("--summary-json"));
    if SUMMARY_WRITTEN.load(std::sync::atomic::Ordering::SeqCst)
        || about_itself
        || paths::check_file_arg("--summary-json", path, "json").is_err()
    {
        return;
    }
    let json = serde_json::json!({
        "ok": error.is_none(),
        "error": error,
        "frames": { "captured": 0, "processed": 0, "consumed": 0, "written": 0, "dropped": 0 },
    });
    let text = serde_json::to_string_pretty(&json).unwrap_or_default() + "\n";
    let _ = paths::write_atomically(std::path::Path::new(path), text.as_bytes());
}

/// The run a checked request describes: outputs claimed, the input opened (while CUDA warms
/// up), the plan settled, backend and sinks made, the pipeline run, the summary reported.
fn run_request(request: &Request, stop: &Stop) -> Result<()> {
    let stop = stop.clone();
    let args = &request.flags;
    let started = std::time::Instant::now();
    let since = || crate::stats::ms(started.elapsed());
    let claimed = check_outputs(request)?;
    if !window_possible_unless_stopped(args, &stop)? {
        return Ok(());
    }

    // CUDA starts (context, kernels) while the input opens.
    let warming = (args.backend != BackendKind::Cpu)
        .then(|| backend::device::warm_up(backend::device::DEFAULT_DEVICE));
    let opened = crate::source::open::interruptibly(&stop, request.input.clone(), request.asked())?;
    let Some((source, media)) = opened else {
        pipeline::leave_a_thread_behind();
        info!("stopped while the input was opening; nothing was written");
        return Ok(());
    };
    crate::debug!("start-up: input open at {:.1} ms", since());
    let plan = Plan::settle(request, source.as_ref())?;
    info!("input: {}", source.describe());
    // Held until the backend exists, so that the warmed context is the one it opens.
    let _warm = warming.and_then(|w| w.join().ok().flatten());
    crate::debug!("start-up: CUDA warmed up at {:.1} ms", since());
    let backend = plan.make_backend()?;
    crate::debug!("start-up: backend made at {:.1} ms", since());
    info!("backend: {}", backend.describe());
    let reload = user_kernels(request, &plan.backend)?;

    let places = Places {
        claimed,
        fps: plan.fps,
        formats: plan.backend.formats,
        bands: plan.backend.plan.len(),
        media: media.as_ref(),
    };
    let mut sink = open_sinks(request, source.as_ref(), places, &stop)?;
    info!("output: {}", sink.describe());

    let opts = plan.options(reload);
    arm_exit_summary(request);
    crate::debug!("start-up: sinks open at {:.1} ms", since());
    let ran = pipeline::run(source, backend, sink.as_mut(), &opts, &stop);
    crate::debug!("run ended at {:.1} ms", since());
    disarm_exit_summary();
    let summary = match ran {
        Ok(summary) => summary,
        Err(e) => {
            if let Some(failed) = e.downcast_ref::<pipeline::Failed>() {
                crate::say!("{}", failed.summary.render());
                write_summary_json(request, &failed.summary, Some(&format!("{e:#}")))?;
            }
            return Err(e);
        }
    };
    report(request, &summary)?;
    drop((sink, summary));
    crate::debug!("exiting at {:.1} ms", since());
    Ok(())
}

/// What the sinks are opened on, decided before: the claimed output, the rate, the formats
/// the backend hands over, the window's bands, and the input's timing and audio.
struct Places<'a> {
    claimed: sink::claim::Claimed,
    fps: f64,
    formats: Formats,
    bands: usize,
    media: Option<&'a crate::source::open::Media>,
}

/// Opens every sink the run writes or shows to (the output, the window), wrapped in a
/// progress bar on a terminal.
fn open_sinks(
    checked: &Request,
    source: &dyn Source,
    places: Places,
    stop: &Stop,
) -> Result<Box<dyn Sink>> {
    let args = &checked.flags;
    let size = source.size();
    let (bands, total) = (places.bands, frames_to_go(source, args));
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    sinks.extend(open_streams(checked, source, &places)?);
    sinks.extend(open_file_output(checked, source, places)?);
    let knobs = Knobs {
        pageable: args.pageable,
        bands,
        height: size.height,
    };
    if args.serve.is_some() {
        // Before the outputs: the summary's verb is the last sink's (a file's "written").
        sinks.insert(0, open_web(args, knobs.clone())?);
    }
    if !args.headless {
        // At the end of a file the last frame stays up until q (or a stop).
        let hold = (!args.exit_at_end).then(|| stop.clone());
        sinks.insert(0, open_window("framepipe", knobs, hold)?);
    }
    let mut sink: Box<dyn Sink> = match sinks.len() {
        0 => Box::new(sink::null::Null),
        1 => sinks.pop().expect("one sink"),
        _ => Box::new(sink::Tee(sinks)),
    };
    if args.headless && !args.quiet {
        sink = Box::new(sink::progress::Progress::new(sink, total));
    }
    Ok(sink)
}

/// The frames `source` will give in this run, where known (a file's count, or `--frames`).
fn frames_to_go(source: &dyn Source, args: &RunArgs) -> Option<u64> {
    match (source.frame_count(), args.frames) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// Starts the streams `--output` names (network outputs, HLS) for `source`'s frames.
fn open_streams(
    checked: &Request,
    source: &dyn Source,
    places: &Places,
) -> Result<Vec<Box<dyn Sink>>> {
    let args = &checked.flags;
    let mut sinks = Vec::new();
    for spec in &checked.streams {
        sink::check_rate(spec, places.fps).map_err(anyhow::Error::msg)?;
        let timing = timing(places.media, places.fps, args, None);
        let stdout = sink::y4m::Layout {
            write: PixelFormat::I420,
            given: places.formats.output,
            tags: y4m_tags(checked, source, places.formats),
        };
        sinks.push(sink::open_output(
            spec,
            sink::claim::Claimed::Nothing,
            source.size(),
            places.fps,
            &timing,
            stdout,
            false,
        )?);
    }
    Ok(sinks)
}

/// What a Y4M output's header says of `source`'s pictures: the source's own tags, with the
/// chroma siting and the range kept only where the samples pass untouched (a chain that changes
/// nothing, from a 4:2:0 input: `Formats::passthrough`, `Formats::repacked`); framepipe's
/// conversions from BGR are written as centred.
fn y4m_tags(
    checked: &Request,
    source: &dyn Source,
    formats: Formats,
) -> crate::source::PictureTags {
    let mut tags = source.picture_tags().unwrap_or_default();
    // The backend hands I420 on (not BGR for a window to share, converted again here).
    let identity = checked.flags.filter.is_identity();
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
    checked: &Request,
    source: &dyn Source,
    places: Places,
) -> Result<Option<Box<dyn Sink>>> {
    let args = &checked.flags;
    let Some(spec) = &checked.output else {
        return Ok(None);
    };
    sink::check_rate(spec, places.fps).map_err(anyhow::Error::msg)?;
    let timing = timing(places.media, places.fps, args, Some(spec));
    let stdout = sink::y4m::Layout {
        write: checked.output_format.unwrap_or(PixelFormat::I420),
        given: places.formats.output,
        tags: y4m_tags(checked, source, places.formats),
    };
    // A source with no known end (a camera, a stream, the pattern, standard input) is
    // recorded in MP4/MOV fragments, so that a crash keeps all but the last second.
    let fragmented = args.fragmented || source.is_live() || source.frame_count().is_none();
    sink::open_output(
        spec,
        places.claimed,
        source.size(),
        places.fps,
        &timing,
        stdout,
        fragmented,
    )
    .map(Some)
}

/// After a run: the summary (and a warning when a live input dropped many frames),
/// `--summary-json`, `--trace` and `--timeline`.
fn report(request: &Request, summary: &Summary) -> Result<()> {
    let args = &request.flags;
    crate::say!("{}", summary.render());
    let (captured, dropped) = (summary.capture.captured, summary.capture.dropped);
    if dropped * 100 > (captured + dropped) * DROP_WARNING_PERCENT {
        crate::warn!(
            "{dropped} of {} frames ({:.0} %) were dropped: the live input came faster than the pipeline took it",
            captured + dropped,
            100.0 * dropped as f64 / (captured + dropped) as f64
        );
    }
    write_summary_json(request, summary, None)?;
    if let Some(trace) = &summary.trace {
        crate::trace::write_files(
            trace,
            args.trace.as_deref(),
            args.timeline.as_deref(),
            &summary.backend,
        )?;
    }
    Ok(())
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

/// Writes `--summary-json`, where asked for (whole, under a temporary name, then renamed).
fn write_summary_json(request: &Request, summary: &Summary, error: Option<&str>) -> Result<()> {
    let args = &request.flags;
    let Some(path) = &args.summary_json else {
        return Ok(());
    };
    let text = serde_json::to_string_pretty(&summary.to_json(error))?;
    SUMMARY_WRITTEN.store(true, std::sync::atomic::Ordering::SeqCst);
    paths::write_atomically(std::path::Path::new(path), (text + "\n").as_bytes())
        .with_context(|| format!("writing {path}"))
}

/// `--summary-json` while the pipeline runs, for a run that ends without returning: an abort
/// (a second stop signal, the stop watchdog) or `exit` from inside a library (Qt, when the
/// display dies). Taken once the summary is written the usual way.
static EXIT_SUMMARY: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
/// Whether the pipeline is running (an exit now ends it from outside).
static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn arm_exit_summary(request: &Request) {
    let args = &request.flags;
    if let Ok(mut s) = EXIT_SUMMARY.lock() {
        s.clone_from(&args.summary_json);
    }
    RUNNING.store(true, std::sync::atomic::Ordering::SeqCst);
    static HANDLER: std::sync::Once = std::sync::Once::new();
    // SAFETY: `summary_at_exit` is an `extern "C" fn()` that never unwinds (every error is
    // ignored) and takes its lock without waiting.
    HANDLER.call_once(|| unsafe {
        libc::atexit(summary_at_exit);
    });
    crate::stop::on_abort(|| summary_at_exit());
}

fn disarm_exit_summary() {
    RUNNING.store(false, std::sync::atomic::Ordering::SeqCst);
    if let Ok(mut s) = EXIT_SUMMARY.lock() {
        *s = None;
    }
}

/// Says why a running pipeline ended from outside, and writes `--summary-json` with the
/// counts so far.
extern "C" fn summary_at_exit() {
    if !RUNNING.swap(false, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    let [captured, processed, consumed, dropped] = pipeline::progress();
    let why = match crate::stop::abort_code() {
        Some(130) => "aborted by a second stop signal".to_string(),
        Some(code) => format!("the run did not end after the stop (exit {code})"),
        None => {
            let why =
                "the process was ended from inside the window system (its display went away?)";
            crate::say!("framepipe: error: {why}; {consumed} frames had reached the output");
            why.to_string()
        }
    };
    let Some(path) = EXIT_SUMMARY.try_lock().ok().and_then(|mut s| s.take()) else {
        return;
    };
    let json = serde_json::json!({
        "ok": false,
        "error": why,
        "frames": {
            "captured": captured,
            "processed": processed,
            "consumed": consumed,
            "written": consumed,
            "dropped": dropped,
        },
    });
    let text = serde_json::to_string_pretty(&json).unwrap_or_default() + "\n";
    let _ = paths::write_atomically(std::path::Path::new(&path), text.as_bytes());
}

/// Refuses any file the run would write that can't be written (with the OS's reason), is
/// the input file (by identity), is not a regular file, is named twice, or exists without
/// `-y`; then claims the output (`sink::claim`), before anything is opened.
fn check_outputs(request: &Request) -> Result<sink::claim::Claimed> {
    let (args, output, input) = (&request.flags, request.output.as_ref(), &request.input);
    use sink::claim::{self, Claimed, Overwrite, VideoClaim};
    let overwrite = Overwrite::from_flags(args.overwrite, args.no_overwrite);
    let input_file = match input {
        InputSpec::Video(p) | InputSpec::Image(p) => paths::file_id(p).map(|id| InputFile {
            name: &request.input_name,
            id,
        }),
        _ => None,
    };
    let mut files: Vec<(&str, String)> = Vec::new();
    match output {
        Some(OutputSpec::Video { path, .. }) => files.push(("--output", path.clone())),
        Some(OutputSpec::Stdout) if std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            bail!("--output -: standard output is a terminal; redirect it to a file or a pipe (| ffmpeg -f yuv4mpegpipe -i - …), or name an output file");
        }
        Some(OutputSpec::Stdout) => {}
        Some(OutputSpec::Sequence { pattern, .. }) => {
            // Like `mkdir -p`: an image sequence's folder is made when missing.
            std::fs::create_dir_all(pattern.folder()).with_context(|| {
                format!(
                    "--output: creating the folder '{}'",
                    pattern.folder().display()
                )
            })?;
            if let Some(input) = &input_file {
                paths::refuse_input_in_sequence("--output", pattern, input)
                    .map_err(anyhow::Error::msg)?;
            }
        }
        None => {}
    }
    let inputs: Vec<InputFile> = input_file.iter().cloned().collect();
    let playlists = claim_playlists(&request.streams, overwrite, &inputs)?;
    files.extend(playlists.iter().map(|p| ("--output", p.to_string())));
    files.extend(args.trace.iter().map(|p| ("--trace", p.clone())));
    files.extend(args.timeline.iter().map(|p| ("--timeline", p.clone())));
    files.extend(
        args.summary_json
            .iter()
            .map(|p| ("--summary-json", p.clone())),
    );
    for (k, (flag, path)) in files.iter().enumerate() {
        if let Some((other, _)) = files[..k].iter().find(|(_, p)| paths::same_file(p, path)) {
            bail!("{other} and {flag} both name '{path}': one would replace the other; give each its own file");
        }
    }
    #[cfg(feature = "ffmpeg")]
    {
        let others: Vec<&str> = files
            .iter()
            .map(|(_, p)| p.as_str())
            .filter(|p| !playlists.contains(p))
            .collect();
        sink::hls::refuse_crossing(&playlists, &others).map_err(anyhow::Error::msg)?;
    }
    for (flag, path) in &files {
        paths::check_name(flag, path).map_err(anyhow::Error::msg)?;
        if let Some(input) = &input_file {
            paths::refuse_input_file(flag, path, input).map_err(anyhow::Error::msg)?;
        }
        paths::refuse_special(flag, path).map_err(anyhow::Error::msg)?;
        if *flag != "--output" {
            paths::check_writable(flag, path).map_err(anyhow::Error::msg)?;
        }
    }
    Ok(match output {
        Some(spec @ OutputSpec::Video { path, .. }) if !spec.is_stream() => Claimed::Video(
            VideoClaim::new("--output", path, overwrite).map_err(anyhow::Error::msg)?,
        ),
        Some(OutputSpec::Sequence { pattern, .. }) => {
            let lock = claim::FolderLock::new("--output", pattern.folder(), &pattern.path(0))
                .map_err(anyhow::Error::msg)?;
            claim::check_sequence("--output", pattern, overwrite).map_err(anyhow::Error::msg)?;
            let probe = pattern
                .folder()
                .join(format!(".framepipe-{}.probe", std::process::id()));
            paths::check_writable("--output", &probe.to_string_lossy()).map_err(|e| {
                anyhow::anyhow!(
                    "--output '{}': its folder '{}' can't be written ({})",
                    pattern.path(0),
                    pattern.folder().display(),
                    e.rsplit(": ").next().unwrap_or_default()
                )
            })?;
            Claimed::Folder(lock)
        }
        _ => Claimed::Nothing,
    })
}

/// An HLS playlist (and its segments beside it) may be written at `path`: its folder is
/// made when missing, an existing playlist is replaced only with `-y`.
/// Claims every HLS output among `streams` (`sink::hls::claim`: its folder made, its
/// names checked against the inputs and, without `-y`, against what exists); their
/// playlists' names.
fn claim_playlists<'a>(
    streams: &'a [OutputSpec],
    overwrite: sink::claim::Overwrite,
    inputs: &[InputFile],
) -> Result<Vec<&'a str>> {
    let mut playlists = Vec::new();
    for stream in streams {
        if let OutputSpec::Video {
            path,
            container: sink::Container::Hls,
            ..
        } = stream
        {
            #[cfg(feature = "ffmpeg")]
            sink::hls::claim(path, overwrite, inputs).map_err(anyhow::Error::msg)?;
            let _ = (overwrite, inputs);
            playlists.push(path.as_str());
        }
    }
    Ok(playlists)
}

/// Drops above this share of a live input's frames are warned about at the end.
const DROP_WARNING_PERCENT: u64 = 3;
/// How a video output is timed, and whose audio it copies: a file input's exact rate, time
/// base and audio streams; else `fps` as a fraction.
#[cfg(feature = "ffmpeg")]
fn timing(
    media: Option<&crate::source::open::Media>,
    fps: f64,
    args: &RunArgs,
    output: Option<&OutputSpec>,
) -> sink::Timing {
    use crate::sink::av;
    let audio = media.and_then(av::audio_of);
    if let (Some((from, streams)), Some(out)) = (&audio, output) {
        let what = format!("{} audio stream(s) of {}", streams.len(), from.display());
        match out {
            _ if args.no_audio => info!("--no-audio: the {what} are left out"),
            OutputSpec::Sequence { .. } | OutputSpec::Stdout => {
                info!("an image sequence holds no audio: the {what} are left out")
            }
            OutputSpec::Video { .. } => {}
        }
    }
    sink::Timing {
        rate: media.and_then(|m| m.rate).or(Some(av::ratio_of(fps))),
        time_base: media.filter(|m| !m.untimed).map(|m| m.time_base),
        audio: audio.filter(|_| !args.no_audio),
    }
}

#[cfg(not(feature = "ffmpeg"))]
fn timing(
    _: Option<&crate::source::open::Media>,
    _: f64,
    _: &RunArgs,
    _: Option<&OutputSpec>,
) -> sink::Timing {
    sink::Timing
}

#[cfg(feature = "opencv")]
fn open_web(args: &RunArgs, knobs: Knobs) -> Result<Box<dyn Sink>> {
    let settings = crate::plan::web_settings(args)?;
    Ok(Box::new(sink::web::Web::open(settings, knobs)?))
}

#[cfg(not(feature = "opencv"))]
fn open_web(_: &RunArgs, _: Knobs) -> Result<Box<dyn Sink>> {
    bail!("--serve: this build has no OpenCV")
}

/// Checks that the run's window can open (where it has one); false when a stop came while
/// the display was being asked (the run then ends, having written nothing).
fn window_possible_unless_stopped(args: &RunArgs, stop: &Stop) -> Result<bool> {
    if args.headless {
        return Ok(true);
    }
    match check_window_possible() {
        Ok(()) => Ok(true),
        Err(_) if stop.is_requested() => {
            info!("stopped before the window opened; nothing was written");
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
    bail!("this build has no OpenCV and cannot open a window; run with --headless")
}

#[cfg(feature = "opencv")]
fn open_window(title: &str, knobs: Knobs, hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    Ok(Box::new(sink::window::Window::open(title, knobs, hold)?))
}

#[cfg(not(feature = "opencv"))]
fn open_window(_title: &str, _knobs: Knobs, _hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    bail!("this build has no OpenCV and cannot open a window")
}
