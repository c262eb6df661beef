//! `framepipe [OPTIONS]`: turns the command line into a source, a backend and a sink, runs
//! the pipeline, and prints the summary. Every bad-input error is raised here, before any
//! thread starts.

use anyhow::{bail, Context, Result};

use crate::backend::{self, BackendConfig};
use crate::band::{self, BandPlan};
use crate::cli::RunArgs;
use crate::pipeline::{self, Options};
use crate::sink::Knobs;
use crate::sink::{self, OutputSpec, Sink};
use crate::source::{pattern::Pattern, InputSpec, Source};
use crate::stop::Stop;
use crate::trace::Trace;

macro_rules! info {
    ($quiet:expr, $($t:tt)*) => {
        if !$quiet {
            eprintln!("framepipe: {}", format!($($t)*));
        }
    };
}

pub fn run(args: &RunArgs) -> Result<()> {
    let q = args.quiet;
    if args.ring < 2 {
        bail!(
            "--ring {} is too small: the ring needs at least 2 slots",
            args.ring
        );
    }
    let in_flight = args
        .in_flight
        .unwrap_or_else(|| (args.ring - 2).clamp(1, 4));
    if in_flight == 0 || in_flight > args.ring {
        bail!(
            "--in-flight {in_flight} must be between 1 and --ring ({})",
            args.ring
        );
    }
    if !args.fps.is_finite() || args.fps < 0.0 {
        bail!("--fps {} must be 0 or a positive number", args.fps);
    }
    if let Some(p) = &args.trace {
        check_file_arg("--trace", p, "json")?;
    }
    if let Some(p) = &args.timeline {
        check_file_arg("--timeline", p, "svg")?;
    }
    let tracing = args.trace.is_some() || args.timeline.is_some();
    let trace_frames = if tracing { args.trace_frames.max(1) } else { 0 };
    let output = args
        .output
        .as_deref()
        .map(OutputSpec::parse)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let input = InputSpec::parse(args.input.as_deref()).map_err(anyhow::Error::msg)?;
    if !args.headless {
        check_window_possible()?;
    }

    let source = open_source(&input, args)?;
    let size = source.size();
    let bands = args
        .bands
        .unwrap_or_else(|| band::default_bands(size.height));
    let plan =
        BandPlan::new(size.height, bands, args.filter.radius()).map_err(anyhow::Error::msg)?;
    if args.busy_bands == 0 {
        bail!("--busy-bands must be at least 1");
    }
    let busy_plan = BandPlan::new(
        size.height,
        args.busy_bands.min(size.height),
        args.filter.radius(),
    )
    .map_err(anyhow::Error::msg)?;
    info!(q, "input: {}", source.describe());

    let cfg = BackendConfig {
        size,
        chain: args.filter.clone(),
        plan,
        busy_plan,
        in_flight,
        pageable: args.pageable,
        issue: Default::default(),
        streams: args.streams,
        trace_frames,
        graphs: !args.no_graphs,
        priorities: false,
        sample_every: backend::SAMPLE_EVERY,
    };
    let backend = backend::create(args.backend, &cfg)?;
    info!(q, "backend: {}", backend.describe());

    let fps = source
        .fps()
        .unwrap_or(if args.fps > 0.0 { args.fps } else { 30.0 });
    let mut sinks: Vec<Box<dyn Sink>> = Vec::new();
    if let Some(spec) = &output {
        sinks.push(sink::open_output(spec, size, fps)?);
    }
    if !args.headless {
        let knobs = Knobs {
            pageable: args.pageable,
            bands,
            height: size.height,
        };
        sinks.insert(0, open_window(knobs)?);
    }
    let mut sink: Box<dyn Sink> = match sinks.len() {
        0 => Box::new(sink::null::Null),
        1 => sinks.pop().expect("one sink"),
        _ => Box::new(sink::Tee(sinks)),
    };
    if args.headless && !q {
        let total = match (source.frame_count(), args.frames) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        sink = Box::new(sink::progress::Progress::new(sink, total));
    }
    info!(q, "output: {}", sink.describe());

    let stop = Stop::new();
    stop.install_signal_handler()
        .context("installing the Ctrl-C handler")?;
    let opts = Options {
        ring: args.ring,
        frames: args.frames,
        keep_frame_times: false,
        trace_frames,
    };
    let summary = pipeline::run(source, backend, sink.as_mut(), &opts, &stop)?;
    eprintln!("{}", summary.render());
    if let Some(trace) = &summary.trace {
        write_trace_files(
            trace,
            args.trace.as_deref(),
            args.timeline.as_deref(),
            &summary.backend,
        )?;
    }
    Ok(())
}

/// Frames drawn in a timeline picture.
pub const TIMELINE_FRAMES: u64 = 6;

/// Writes `--trace` (Chrome JSON) and `--timeline` (SVG) from a run's trace.
pub fn write_trace_files(
    trace: &Trace,
    json: Option<&str>,
    svg: Option<&str>,
    title: &str,
) -> Result<()> {
    if let Some(o) = trace.overlap() {
        eprintln!(
            "framepipe: trace: over {:.3} ms of GPU work, uploads {:.0}% busy, downloads {:.0}%, both at once {:.0}%",
            o.window_ms,
            100.0 * o.h2d_busy,
            100.0 * o.d2h_busy,
            100.0 * o.both
        );
    }
    if let Some(path) = json {
        std::fs::write(path, trace.to_chrome_json()).with_context(|| format!("writing {path}"))?;
        eprintln!(
            "framepipe: trace of {} spans written to {path}",
            trace.spans.len()
        );
    }
    if let Some(path) = svg {
        let picture = crate::trace::timeline_svg(&[(title, trace)], TIMELINE_FRAMES);
        std::fs::write(path, picture).with_context(|| format!("writing {path}"))?;
        eprintln!("framepipe: timeline written to {path}");
    }
    Ok(())
}

/// Checks that `path` can be created and ends in `.ext`.
pub fn check_file_arg(flag: &str, path: &str, ext: &str) -> Result<()> {
    if crate::paths::extension(std::path::Path::new(path)) != ext {
        bail!("{flag} '{path}' must end in .{ext}");
    }
    crate::paths::check_folder(flag, path).map_err(anyhow::Error::msg)
}

fn open_source(input: &InputSpec, args: &RunArgs) -> Result<Box<dyn Source>> {
    let pattern = || -> Box<dyn Source> { Box::new(Pattern::new(args.size, args.fps)) };
    match input {
        InputSpec::Pattern => Ok(pattern()),
        InputSpec::Default => {
            #[cfg(feature = "opencv")]
            if crate::source::capture::default_camera_present() {
                match crate::source::capture::open(&InputSpec::Camera(0)) {
                    Ok(cam) => return Ok(cam),
                    Err(e) => eprintln!("framepipe: {e:#}; showing the test pattern instead"),
                }
            } else {
                eprintln!("framepipe: no camera found; showing the test pattern (--input chooses a source)");
            }
            #[cfg(not(feature = "opencv"))]
            eprintln!("framepipe: built without OpenCV; showing the test pattern");
            Ok(pattern())
        }
        #[cfg(feature = "opencv")]
        other => crate::source::capture::open(other),
        #[cfg(not(feature = "opencv"))]
        _ => bail!("this build has no OpenCV: only --input pattern is available"),
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
fn open_window(knobs: Knobs) -> Result<Box<dyn Sink>> {
    Ok(Box::new(sink::window::Window::open("framepipe", knobs)?))
}

#[cfg(not(feature = "opencv"))]
fn open_window(_knobs: Knobs) -> Result<Box<dyn Sink>> {
    bail!("this build has no OpenCV and cannot open a window")
}
