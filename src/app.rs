//! `framepipe [OPTIONS]`: turns the command line into a source, a backend and a sink, runs
//! the pipeline, and prints the summary.
//!
//! Invariants: every bad argument, and every output that can't be written or would write
//! over the input, is refused before anything is opened for writing and before the capture
//! thread starts; the ring's memory is checked against the machine's before it is
//! allocated; a stop asked for while the input is still opening ends the run at once.

use anyhow::{bail, Context, Result};

use std::sync::Arc;

use crate::backend::{self, check, BackendConfig, BackendKind};
use crate::band;
use crate::cli::RunArgs;
use crate::frame::FrameSize;
use crate::info;
use crate::paths::{self, InputFile};
use crate::pipeline::{self, Options};
use crate::pixel::{Formats, PixelFormat};
use crate::reload::Reloader;
use crate::sink::Knobs;
use crate::sink::{self, OutputSpec, Sink};
use crate::source::{pattern::Pattern, InputSpec, Source};
use crate::stats::Summary;
use crate::stop::Stop;

/// Runs the pipeline as `args` say; Ok also when the user stopped it.
pub fn run(args: &RunArgs) -> Result<()> {
    let stop = Stop::process();
    Stop::install_signal_handler().context("installing the signal handlers")?;
    let checked = check_args(args)?;
    let input = InputSpec::parse(args.input.as_deref()).map_err(anyhow::Error::msg)?;
    let claimed = check_outputs(args, checked.output.as_ref(), &input)?;
    if !args.headless {
        if let Err(e) = check_window_possible() {
            if stop.is_requested() {
                info!("stopped before the window opened; nothing was written");
                return Ok(());
            }
            return Err(e);
        }
    }

    // CUDA starts (context, kernels) while the input opens.
    let warming = (args.backend != BackendKind::Cpu)
        .then(|| backend::cuda::warm_up(backend::cuda::DEFAULT_DEVICE));
    let Some((source, media)) = open_interruptibly(&stop, input, args)? else {
        info!("stopped while the input was opening; nothing was written");
        return Ok(());
    };
    let size = source.size();
    let ring = args.ring.unwrap_or_else(|| {
        let n = crate::budget::default_ring(size);
        if n < crate::budget::DEFAULT_RING {
            info!("{size} frames are large: the ring holds {n} of them (--ring sets it)");
        }
        n
    });
    crate::budget::check_ring(ring, size, crate::budget::host_available())
        .map_err(anyhow::Error::msg)?;
    let in_flight = args
        .in_flight
        .unwrap_or_else(|| (ring - 2).clamp(1, band::default_in_flight(size.height)));
    if in_flight > ring {
        // (0 was refused with the other arguments.)
        bail!("--in-flight {in_flight} must be between 1 and the ring's {ring} slots");
    }
    let bands = args
        .bands
        .unwrap_or_else(|| band::default_bands_in(size.height, source.format().row_align()));
    let mut cfg = BackendConfig::new(size, args.filter.clone(), bands, in_flight)
        .map_err(|e| anyhow::anyhow!("--bands {bands}: {e}"))?
        .with_busy_bands(args.busy_bands.min(size.height))
        .map_err(|e| anyhow::anyhow!("--busy-bands {}: {e}", args.busy_bands))?;
    // Frames cross the CPU and PCIe in the source's own format; the backend converts them
    // for the sink: to BGR for a window or a file, to --output-format for standard output
    // alone. Headless without an output, they stay in the source's format: nothing looks.
    let stdout_alone = args.headless && checked.output == Some(OutputSpec::Stdout);
    let nowhere = args.headless && checked.output.is_none();
    let formats = Formats {
        input: source.format(),
        output: match checked.output_format {
            _ if nowhere && source.format().writable() => source.format(),
            _ if !stdout_alone => PixelFormat::Bgr24,
            f => f.unwrap_or(PixelFormat::I420),
        },
    };
    if let Some(lost) = chroma_lost(formats) {
        crate::warn!("{lost}");
    }
    cfg = cfg
        .with_formats(formats)
        .map_err(|e| anyhow::anyhow!("{}: {e}", source.describe()))?;
    cfg.pageable = args.pageable;
    cfg.trace_frames = checked.trace_frames;
    // Spans beyond the first frames: every frame for --trace-frames last:N; bursts of a few
    // frames for the window's timeline strip (t); none otherwise.
    cfg.rolling = if checked.trace_last > 0 {
        crate::trace::Rolling::Every
    } else if !args.headless {
        crate::trace::Rolling::Bursts
    } else {
        crate::trace::Rolling::Off
    };
    cfg.cuda.streams = args.streams;
    cfg.cuda.graphs = !args.no_graphs;
    info!("input: {}", source.describe());
    // Held until the backend exists, so that the warmed context is the one it opens.
    let _warm = warming.and_then(|w| w.join().ok().flatten());
    let backend = backend::create(args.backend, &cfg)?;
    info!("backend: {}", backend.describe());
    let reload = user_kernels(args, &cfg)?;

    let fps = source.fps().unwrap_or(match args.fps {
        Some(f) if f > 0.0 => f,
        _ => DEFAULT_FPS,
    });
    let places = Places {
        claimed,
        fps,
        formats,
        bands,
        media: media.as_ref(),
    };
    let mut sink = open_sinks(args, &checked, source.as_ref(), places, &stop)?;
    info!("output: {}", sink.describe());

    let opts = Options {
        ring,
        frames: args.frames,
        keep_frame_times: false,
        trace_frames: checked.trace_frames,
        trace_last: checked.trace_last,
        reload,
    };
    arm_exit_summary(args);
    let ran = pipeline::run(source, backend, sink.as_mut(), &opts, &stop);
    disarm_exit_summary();
    let summary = match ran {
        Ok(summary) => summary,
        Err(e) => {
            if let Some(failed) = e.downcast_ref::<pipeline::Failed>() {
                crate::say!("{}", failed.summary.render());
                write_summary_json(args, &failed.summary, Some(&format!("{e:#}")))?;
            }
            return Err(e);
        }
    };
    report(args, &summary)
}

/// What the sinks are opened on, decided before: the claimed output, the rate, the formats
/// the backend hands over, the window's bands, and the input's timing and audio.
struct Places<'a> {
    claimed: sink::claim::Claimed,
    fps: f64,
    formats: Formats,
    bands: usize,
    media: Option<&'a Media>,
}

/// Opens every sink the run writes or shows to (the output, the window), wrapped in a
/// progress bar on a terminal.
fn open_sinks(
    args: &RunArgs,
    checked: &Checked,
    source: &dyn Source,
    places: Places,
    stop: &Stop,
) -> Result<Box<dyn Sink>> {
    let size = source.size();
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if let Some(spec) = &checked.output {
        sink::check_rate(spec, places.fps).map_err(anyhow::Error::msg)?;
        let timing = timing(places.media, places.fps, args, Some(spec));
        let stdout = sink::y4m::Layout {
            write: checked.output_format.unwrap_or(PixelFormat::I420),
            given: places.formats.output,
            tags: source.picture_tags().unwrap_or_default(),
        };
        // A source with no known end (a camera, a stream, the pattern, standard input) is
        // recorded in MP4/MOV fragments, so that a crash keeps all but the last second.
        let fragmented = args.fragmented || source.is_live() || source.frame_count().is_none();
        sinks.push(sink::open_output(
            spec,
            places.claimed,
            size,
            places.fps,
            &timing,
            stdout,
            fragmented,
        )?);
    }
    if !args.headless {
        let knobs = Knobs {
            pageable: args.pageable,
            bands: places.bands,
            height: size.height,
        };
        // At the end of a file the last frame stays up until q (or a stop).
        let hold = (!args.exit_at_end).then(|| stop.clone());
        sinks.insert(0, open_window(knobs, hold)?);
    }
    let mut sink: Box<dyn Sink> = match sinks.len() {
        0 => Box::new(sink::null::Null),
        1 => sinks.pop().expect("one sink"),
        _ => Box::new(sink::Tee(sinks)),
    };
    if args.headless && !args.quiet {
        let total = match (source.frame_count(), args.frames) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        sink = Box::new(sink::progress::Progress::new(sink, total));
    }
    Ok(sink)
}

/// After a run: the summary (and a warning when a live input dropped many frames),
/// `--summary-json`, `--trace` and `--timeline`.
fn report(args: &RunArgs, summary: &Summary) -> Result<()> {
    crate::say!("{}", summary.render());
    let (captured, dropped) = (summary.capture.captured, summary.capture.dropped);
    if dropped * 100 > (captured + dropped) * DROP_WARNING_PERCENT {
        crate::warn!(
            "{dropped} of {} frames ({:.0} %) were dropped: the live input came faster than the pipeline took it",
            captured + dropped,
            100.0 * dropped as f64 / (captured + dropped) as f64
        );
    }
    write_summary_json(args, summary, None)?;
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

/// What a run loses of its input's chroma, said before it starts: a 4:2:2 or 4:4:4 input
/// written as 4:2:0 (framepipe writes no 4:2:2 or 4:4:4).
fn chroma_lost(formats: Formats) -> Option<String> {
    let from = match formats.input {
        PixelFormat::Yuyv | PixelFormat::Yuv422p => "4:2:2",
        PixelFormat::Yuv444p => "4:4:4",
        _ => return None,
    };
    matches!(formats.output, PixelFormat::I420 | PixelFormat::Nv12).then(|| {
        format!(
            "the input is {from} ({}) and the output {} is 4:2:0: half of its colour resolution is dropped (--output-format bgr24 keeps every pixel's colour)",
            formats.input, formats.output
        )
    })
}

/// With user kernels in the chain (the backend is CUDA then): checks them for band
/// invariance on one frame of the run's size before any frame is read, and makes the
/// reloader that watches their files (unless `--no-watch`; `r` reloads either way).
fn user_kernels(args: &RunArgs, cfg: &BackendConfig) -> Result<Option<Arc<Reloader>>> {
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
fn write_summary_json(args: &RunArgs, summary: &Summary, error: Option<&str>) -> Result<()> {
    let Some(path) = &args.summary_json else {
        return Ok(());
    };
    let text = serde_json::to_string_pretty(&summary.to_json(error))?;
    paths::write_atomically(std::path::Path::new(path), (text + "\n").as_bytes())
        .with_context(|| format!("writing {path}"))
}

/// `--summary-json` while the pipeline runs, for a run that ends without returning: an abort
/// (a second stop signal, the stop watchdog) or `exit` from inside a library (Qt, when the
/// display dies). Taken once the summary is written the usual way.
static EXIT_SUMMARY: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);
/// Whether the pipeline is running (an exit now ends it from outside).
static RUNNING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

fn arm_exit_summary(args: &RunArgs) {
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

/// What `check_args` derived from the arguments.
struct Checked {
    output: Option<OutputSpec>,
    /// `--output-format`, checked (it needs `--output -`).
    output_format: Option<PixelFormat>,
    trace_frames: u64,
    /// `--trace-frames last:N` with a trace asked for: N.
    trace_last: u64,
}

/// Checks every argument that can be checked without opening anything.
fn check_args(args: &RunArgs) -> Result<Checked> {
    if let Some(ring) = args.ring.filter(|&n| n < 2) {
        bail!("--ring {ring} is too small: the ring needs at least 2 slots");
    }
    if args.in_flight == Some(0) {
        bail!("--in-flight must be at least 1");
    }
    if let Some(fps) = args.fps.filter(|f| !f.is_finite() || *f < 0.0) {
        bail!("--fps {fps} must be 0 or a positive number");
    }
    if let Some(fps) = args
        .fps
        .filter(|&f| f != 0.0 && !(MIN_FPS..=MAX_FPS).contains(&f))
    {
        bail!("--fps {fps} is out of range: 0 (as fast as the pipeline goes) or {MIN_FPS} to {MAX_FPS} frames per second");
    }
    if args.frames == Some(0) {
        bail!(
            "--frames 0 would process nothing; give at least 1 (or leave it out to run to the end)"
        );
    }
    if args.busy_bands == 0 {
        bail!("--busy-bands must be at least 1");
    }
    if let Some(k) = args.filter.user_kernels().next() {
        // Before the input is opened: a user kernel runs on CUDA only.
        if args.backend == BackendKind::Cpu {
            bail!(
                "{} (--backend cpu was asked for)",
                backend::cpu::needs_cuda(k)
            );
        }
        if let Err(why) = backend::cuda::probe() {
            bail!("{}: no CUDA here ({why})", backend::cpu::needs_cuda(k));
        }
    }
    if args.trace_frames.count() > crate::trace::MAX_TRACE_FRAMES {
        bail!(
            "--trace-frames {} is more than the {} a trace may hold",
            args.trace_frames,
            crate::trace::MAX_TRACE_FRAMES
        );
    }
    for (flag, path, ext) in [
        ("--trace", &args.trace, "json"),
        ("--timeline", &args.timeline, "svg"),
        ("--summary-json", &args.summary_json, "json"),
    ] {
        if let Some(p) = path {
            paths::check_file_arg(flag, p, ext).map_err(anyhow::Error::msg)?;
        }
    }
    let tracing = args.trace.is_some() || args.timeline.is_some();
    let output = args
        .output
        .as_deref()
        .map(|o| {
            OutputSpec::parse(o)
                .and_then(|spec| spec.with_codec(args.codec))
                .and_then(|spec| spec.with_quality(args.quality))
        })
        .transpose()
        .map_err(anyhow::Error::msg)?;
    if (args.codec.is_some() || args.quality.is_some()) && output.is_none() {
        bail!("--codec and --quality apply to a video --output, and there is none");
    }
    if let Some(f) = args.output_format {
        if output != Some(OutputSpec::Stdout) {
            bail!("--output-format {f} applies to --output - (standard output), and that is not the output");
        }
        if !f.writable() {
            bail!("--output-format {f}: framepipe writes i420, gray, nv12 or bgr24 frames");
        }
    }
    Ok(Checked {
        output_format: args.output_format,
        output,
        trace_frames: match args.trace_frames {
            crate::trace::TraceFrames::First(n) if tracing => n.max(1),
            _ => 0,
        },
        trace_last: match args.trace_frames {
            crate::trace::TraceFrames::Last(n) if tracing => n.max(1),
            _ => 0,
        },
    })
}

/// Refuses any file the run would write that can't be written (with the OS's reason), is
/// the input file (by identity), is not a regular file, is named twice, or exists without
/// `-y`; then claims the output (`sink::claim`), before anything is opened.
fn check_outputs(
    args: &RunArgs,
    output: Option<&OutputSpec>,
    input: &InputSpec,
) -> Result<sink::claim::Claimed> {
    use sink::claim::{self, Claimed, Overwrite, VideoClaim};
    let overwrite = Overwrite::from_flags(args.overwrite, args.no_overwrite);
    let input_file = match input {
        InputSpec::Video(p) | InputSpec::Image(p) => paths::file_id(p).map(|id| InputFile {
            name: args.input.as_deref().unwrap_or_default(),
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
        Some(OutputSpec::Video { path, .. }) => Claimed::Video(
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

/// An opened input and what libavformat read of it.
type Opened = (Box<dyn Source>, Option<Media>);

/// Reads the input's header (where libavformat reads it) and opens it, on a helper thread,
/// so that a stop asked for while it opens (a stalled stream or camera) is answered at once:
/// None then, and the helper is left behind.
fn open_interruptibly(stop: &Stop, input: InputSpec, args: &RunArgs) -> Result<Option<Opened>> {
    let asked = Asked {
        input_format: args.input_format,
        size: args.size,
        fps: args.fps,
        window: !args.headless,
        no_pace: args.no_pace,
        #[cfg(feature = "opencv")]
        rotation: 0,
        #[cfg(feature = "opencv")]
        offset: 0.0,
    };
    let (tx, rx) = crossbeam_channel::bounded(1);
    std::thread::Builder::new()
        .name("open input".into())
        .spawn(move || {
            let media = probe_media(&input);
            #[cfg(feature = "opencv")]
            let asked = match &media {
                Some(m) => Asked {
                    rotation: m.rotation,
                    offset: m.video_offset,
                    ..asked
                },
                None => asked,
            };
            let opened = open_source(&input, asked).map(|source| {
                // A file at a URL: its rate, time base and audio, as a local file's.
                let media = match &input {
                    #[cfg(feature = "opencv")]
                    InputSpec::Stream(url) if !source.is_live() => {
                        crate::source::media::probe(std::path::Path::new(url))
                    }
                    _ => media,
                };
                (source, media)
            });
            let _ = tx.send(opened);
        })?;
    loop {
        crate::stop::beat();
        match rx.recv_timeout(Stop::TICK) {
            Ok(result) => return result.map(Some),
            Err(crossbeam_channel::RecvTimeoutError::Timeout) if stop.is_requested() => {
                pipeline::leave_a_thread_behind();
                return Ok(None);
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => {
                bail!("opening the input failed without a reason (the opening thread ended)")
            }
        }
    }
}

use crate::frame::DEFAULT_FPS;
/// Drops above this share of a live input's frames are warned about at the end.
const DROP_WARNING_PERCENT: u64 = 3;
/// The rates `--fps` takes besides 0: what every video container here holds.
const MIN_FPS: f64 = 0.01;
const MAX_FPS: f64 = 1000.0;
/// Size of the test pattern.
const DEFAULT_SIZE: FrameSize = FrameSize::new(1280, 720);

/// What `--size` and `--fps` asked for, when given, and how a file is played.
#[derive(Clone, Copy, Debug)]
struct Asked {
    /// What standard input carries (`--input -`).
    input_format: crate::source::stdin::InputFormat,
    size: Option<FrameSize>,
    fps: Option<f64>,
    /// The run shows a window (a file then plays at its rate). Files need OpenCV.
    #[cfg_attr(not(feature = "opencv"), allow(dead_code))]
    window: bool,
    /// `--no-pace`.
    #[cfg_attr(not(feature = "opencv"), allow(dead_code))]
    no_pace: bool,
    /// A file's rotation and video start (`media::MediaInfo`).
    #[cfg(feature = "opencv")]
    rotation: u32,
    #[cfg(feature = "opencv")]
    offset: f64,
}

/// What libavformat reads from a video file's header (rate, rotation, audio); nothing for
/// other inputs, or without OpenCV (which brings FFmpeg's libraries).
#[cfg(feature = "opencv")]
type Media = crate::source::media::MediaInfo;
#[cfg(not(feature = "opencv"))]
type Media = ();

fn probe_media(input: &InputSpec) -> Option<Media> {
    match input {
        #[cfg(feature = "opencv")]
        InputSpec::Video(path) => crate::source::media::probe(path),
        _ => None,
    }
}

/// How a video output is timed, and whose audio it copies: a file input's exact rate, time
/// base and audio streams; else `fps` as a fraction.
#[cfg(feature = "opencv")]
fn timing(
    media: Option<&Media>,
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
        time_base: media.map(|m| m.time_base),
        audio: audio.filter(|_| !args.no_audio),
    }
}

#[cfg(not(feature = "opencv"))]
fn timing(_: Option<&Media>, _: f64, _: &RunArgs, _: Option<&OutputSpec>) -> sink::Timing {
    sink::Timing
}

fn open_source(input: &InputSpec, asked: Asked) -> Result<Box<dyn Source>> {
    let pattern = || -> Result<Box<dyn Source>> {
        let size = asked.size.unwrap_or(DEFAULT_SIZE);
        let format = asked.input_format.pixel().unwrap_or(PixelFormat::Bgr24);
        format
            .check(size)
            .map_err(|e| anyhow::anyhow!("--input-format {format}: {e}"))?;
        Ok(Box::new(
            Pattern::new(size, asked.fps.unwrap_or(DEFAULT_FPS)).in_format(format),
        ))
    };
    match input {
        InputSpec::Pattern => pattern(),
        InputSpec::Stdin => Ok(Box::new(crate::source::stdin::Stdin::open(
            asked.input_format,
            asked.size,
            asked.fps,
        )?)),
        InputSpec::Default => {
            #[cfg(feature = "opencv")]
            if crate::source::capture::default_camera_present() {
                match open_capture(&InputSpec::Camera(0), asked) {
                    Ok(cam) => return Ok(cam),
                    Err(e) => info!("{e:#}; showing the test pattern instead"),
                }
            } else {
                info!("no camera found; showing the test pattern (--input chooses a source)");
            }
            #[cfg(not(feature = "opencv"))]
            info!("built without OpenCV; showing the test pattern");
            pattern()
        }
        #[cfg(feature = "opencv")]
        other => open_capture(other, asked),
        #[cfg(not(feature = "opencv"))]
        _ => bail!("this build has no OpenCV: only --input pattern is available"),
    }
}

/// Opens an OpenCV source; a camera is asked for `--size` and `--fps`, and for any other
/// source they are said not to apply.
#[cfg(feature = "opencv")]
fn open_capture(input: &InputSpec, asked: Asked) -> Result<Box<dyn Source>> {
    use crate::source::capture;
    let request = capture::Request {
        size: asked.size,
        fps: asked.fps.filter(|f| *f > 0.0),
        ..capture::Request::default()
    };
    if matches!(input, InputSpec::Camera(_)) {
        let source = capture::open(input, request)?;
        if let Some(size) = asked.size.filter(|s| *s != source.size()) {
            info!(
                "the camera was asked for {size} and gives {}",
                source.size()
            );
        }
        return Ok(source);
    }
    // In a window a file plays at its own rate, unless --no-pace or --fps 0.
    let pace = asked.window && !asked.no_pace && asked.fps != Some(0.0);
    let request = capture::Request {
        pace,
        rotation: asked.rotation,
        offset: asked.offset,
        ..capture::Request::default()
    };
    let source = capture::open(input, request)?;
    if asked.size.is_some() || asked.fps.is_some_and(|f| f != 0.0) {
        crate::warn!(
            "--size and --fps don't apply to {}: it keeps its own size and rate (they set the test pattern, and ask a camera)",
            source.describe()
        );
    }
    Ok(source)
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
fn open_window(knobs: Knobs, hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    Ok(Box::new(sink::window::Window::open(
        "framepipe",
        knobs,
        hold,
    )?))
}

#[cfg(not(feature = "opencv"))]
fn open_window(_knobs: Knobs, _hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    bail!("this build has no OpenCV and cannot open a window")
}
