//! `framepipe bench`: the real pipeline (capture thread, ring, GPU thread, consumer thread)
//! on synthetic frames, against the bound measured in the same run.
//!
//! For each frame size and filter chain: the bound (largest of one frame's upload,
//! download, kernels, and an upload plus a download together), then throughput (steady-state
//! frame period) and latency (submit → output in host memory) for page-locked and pageable
//! buffers, band counts and frames in flight; then a paced "live" run with the defaults.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::Serialize;

use crate::backend::{
    self, measure, Backend, BackendConfig, BackendKind, IssueOrder, StreamLayout,
};
use crate::band::{self, BandPlan};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pipeline::{self, Options};
use crate::ring::{self, Slot};
use crate::sink::null::Null;
use crate::source::pattern::{self, Pattern};
use crate::stop::Stop;

#[derive(Args, Debug, Clone)]
pub struct BenchArgs {
    /// Frame sizes, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1920x1080,3840x2160")]
    pub size: Vec<FrameSize>,
    /// Filter chain to measure; repeat for several.
    #[arg(long, default_values = ["copy", "gray"])]
    pub filter: Vec<Chain>,
    /// Band counts, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1,2,3,4,8,16")]
    pub bands: Vec<usize>,
    /// Frames in flight, comma-separated (the ring holds four more).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,6")]
    pub in_flight: Vec<usize>,
    /// Band counts measured with pageable buffers.
    #[arg(long, value_delimiter = ',', default_value = "1,3,8")]
    pub pageable_bands: Vec<usize>,
    /// Frames in flight measured with pageable buffers.
    #[arg(long, value_delimiter = ',', default_value = "1,4")]
    pub pageable_in_flight: Vec<usize>,
    /// Also measure breadth-first issue order (every band's upload first, …).
    #[arg(long)]
    pub compare_issue: bool,
    /// Also measure the per-band stream layout (a stream per band and frame in flight).
    #[arg(long)]
    pub compare_streams: bool,
    /// Also measure frames that find the GPU idle issued call by call instead of replayed
    /// as CUDA graphs (one frame in flight, and the defaults unpaced and live).
    #[arg(long)]
    pub compare_graphs: bool,
    /// Also measure the defaults with stream priorities (downloads, then kernels, then
    /// uploads).
    #[arg(long)]
    pub compare_priorities: bool,
    /// Also measure the defaults driven from one thread with no capture or consumer
    /// thread: what the pipeline's threads cost.
    #[arg(long)]
    pub compare_threads: bool,
    /// Rate of the paced "live" run with the default settings.
    #[arg(long, default_value_t = 60.0)]
    pub live_fps: f64,
    /// Target duration of each measurement in seconds.
    #[arg(long, default_value_t = 0.3)]
    pub seconds: f64,
    /// Only the bound, the original question's configuration and the app's defaults (no
    /// grid): a quick comparison of filters.
    #[arg(long)]
    pub only_defaults: bool,
    /// Draw the first frames of the app's defaults (page-locked) above the original
    /// question's configuration (pageable, 3 bands, one frame at a time), for the first
    /// size and filter, as an SVG timeline.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<String>,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

/// Frames in flight of the app's defaults (ring 8, `in_flight = min(ring - 2, 4)`).
const DEFAULT_IN_FLIGHT: usize = 4;

/// One measured configuration: its setup and what was measured.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    /// "page-locked" or "pageable".
    pub mode: String,
    #[serde(flatten)]
    pub setup: Setup,
    pub frames: u64,
    pub ms_per_frame: f64,
    pub fps: f64,
    pub pct_of_bound: f64,
    pub latency_ms: f64,
    pub latency_p50_ms: f64,
    pub latency_p99_ms: f64,
    /// Frame period of the original question's configuration over this row's.
    pub speedup_vs_original: f64,
}

/// All rows for one frame size and chain.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    pub size: String,
    pub filter: String,
    pub bound: measure::Bound,
    pub bound_ms: f64,
    pub limiter: String,
    /// An upload and a download together over as many host buffer pairs as the default
    /// ring has, taken in turn (a diagnostic; the bound uses one pair).
    pub both_over_ring_ms: f64,
    pub default_bands: usize,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Report {
    pub device: String,
    pub date_unix: u64,
    pub sections: Vec<Section>,
}

/// Frames left out of a row's figures as warm-up: a tenth, and at least 10 (more than the
/// ring's first pass, whose frames may capture CUDA graphs).
fn warm_up(frames: usize) -> usize {
    (frames / 10).max(10)
}

/// Steady-state frame period from completion times (ms, ascending), after `warm_up`.
pub fn steady_period_ms(done_ms: &[f64]) -> Option<f64> {
    let n = done_ms.len();
    let warm = warm_up(n);
    if n < warm + 2 {
        return None;
    }
    Some((done_ms[n - 1] - done_ms[warm]) / (n - 1 - warm) as f64)
}

/// The `p`-th percentile (0–100) by nearest rank.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// One configuration of the pipeline to measure.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct Setup {
    pub pageable: bool,
    pub streams: StreamLayout,
    pub issue: IssueOrder,
    pub bands: usize,
    /// Bands of frames submitted behind others.
    pub busy_bands: usize,
    pub in_flight: usize,
    /// Frames that find the GPU idle are replayed as CUDA graphs.
    pub graphs: bool,
    /// The per-stage streams have priorities.
    pub priorities: bool,
    /// Through the real threads (false: the backend alone, driven from one thread).
    pub threads: bool,
    /// Frames per second the source is paced at; 0 = unpaced.
    pub paced_fps: f64,
    /// The app's default settings.
    pub defaults: bool,
}

impl Setup {
    fn new(pageable: bool, bands: usize, in_flight: usize) -> Self {
        Self {
            pageable,
            streams: StreamLayout::default(),
            issue: IssueOrder::Depth,
            bands,
            busy_bands: bands,
            in_flight,
            graphs: true,
            priorities: false,
            threads: true,
            paced_fps: 0.0,
            defaults: false,
        }
    }
}

/// Builds a row from per-frame (submitted, done) times in ms.
pub fn make_row(
    setup: Setup,
    times: &[(f64, f64)],
    bound_ms: f64,
    original_ms: Option<f64>,
) -> Option<Row> {
    let mode = if setup.pageable {
        "pageable"
    } else {
        "page-locked"
    };
    let done: Vec<f64> = times.iter().map(|t| t.1).collect();
    let period = steady_period_ms(&done)?;
    let warm = warm_up(times.len());
    let mut lat: Vec<f64> = times[warm..].iter().map(|(s, d)| d - s).collect();
    lat.sort_by(f64::total_cmp);
    let mean = lat.iter().sum::<f64>() / lat.len() as f64;
    Some(Row {
        mode: mode.to_string(),
        setup,
        frames: times.len() as u64,
        ms_per_frame: period,
        fps: 1e3 / period,
        pct_of_bound: 100.0 * bound_ms / period,
        latency_ms: mean,
        latency_p50_ms: percentile(&lat, 50.0),
        latency_p99_ms: percentile(&lat, 99.0),
        speedup_vs_original: original_ms.map_or(1.0, |o| o / period),
    })
}

/// The printed table of one section.
pub fn render(section: &Section) -> String {
    let b = &section.bound;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} {}: bound {:.3} ms/frame ({:.0} fps, {}): H2D {:.3}, D2H {:.3}, kernels {:.3}, H2D+D2H together {:.3} ms",
        section.size,
        section.filter,
        section.bound_ms,
        1e3 / section.bound_ms,
        section.limiter,
        b.h2d_ms,
        b.d2h_ms,
        b.kernel_ms,
        b.both_ms
    );
    let _ = writeln!(
        out,
        "(H2D+D2H together over {} host buffer pairs in turn, as the ring's slots: {:.3} ms)",
        DEFAULT_IN_FLIGHT + 4,
        section.both_over_ring_ms
    );
    let _ = writeln!(
        out,
        "{:<12} {:<9} {:<7} {:>5} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10} {:>8}  notes",
        "mode",
        "streams",
        "issue",
        "bands",
        "in-flight",
        "ms/frame",
        "fps",
        "% bound",
        "latency",
        "lat p99",
        "paced",
        "speedup",
    );
    for r in &section.rows {
        let issue = match r.setup.issue {
            IssueOrder::Depth => "depth",
            IssueOrder::Breadth => "breadth",
        };
        let paced = if r.setup.paced_fps > 0.0 {
            format!("{:.0} fps", r.setup.paced_fps)
        } else {
            "-".into()
        };
        let notes = notes(r);
        let _ = writeln!(
            out,
            "{:<12} {:<9} {:<7} {:>5} {:>9} {:>9.3} {:>9.0} {:>7.1}% {:>7.3} ms {:>7.3} ms {:>10} {:>7.2}x  {notes}",
            r.mode, r.setup.streams.to_string(), issue, r.setup.bands, r.setup.in_flight, r.ms_per_frame, r.fps, r.pct_of_bound, r.latency_ms,
            r.latency_p99_ms, paced, r.speedup_vs_original
        );
    }
    if section.rows.iter().any(|r| r.setup.defaults) {
        let _ = writeln!(
            out,
            "* the app's defaults: {} bands for a frame that finds the GPU idle, 1 band behind other frames",
            section.default_bands
        );
    }
    out
}

/// What sets a row apart besides its columns: "defaults*", "no graphs", "priorities",
/// "no threads", the busy plan's bands.
fn notes(r: &Row) -> String {
    let mut n = Vec::new();
    if r.setup.defaults {
        n.push("defaults*".to_string());
    }
    if r.setup.busy_bands != r.setup.bands {
        n.push(format!("{} band(s) behind others", r.setup.busy_bands));
    }
    if !r.setup.graphs && !r.setup.pageable {
        n.push("no graphs".into());
    }
    if r.setup.priorities {
        n.push("priorities".into());
    }
    if !r.setup.threads {
        n.push("no threads".into());
    }
    n.join(", ")
}

/// The best figures of a section, against the project's targets.
pub fn verdict(section: &Section) -> String {
    let locked = || {
        section
            .rows
            .iter()
            .filter(|r| !r.setup.pageable && r.setup.paced_fps == 0.0 && r.setup.threads)
    };
    let best_tp = locked().max_by(|a, b| a.pct_of_bound.total_cmp(&b.pct_of_bound));
    let best_lat = locked()
        .filter(|r| r.setup.in_flight == 1)
        .min_by(|a, b| a.latency_ms.total_cmp(&b.latency_ms));
    let mut out = format!("{} {}: ", section.size, section.filter);
    if let Some(r) = best_tp {
        let _ = write!(
            out,
            "best throughput {:.1}% of bound ({} bands, {} in flight, {} streams)",
            r.pct_of_bound, r.setup.bands, r.setup.in_flight, r.setup.streams
        );
    }
    if let Some(r) = best_lat {
        let _ = write!(
            out,
            "; best single-frame latency {:.3} ms ({} bands, {} streams)",
            r.latency_ms, r.setup.bands, r.setup.streams
        );
    }
    if let Some(r) = section
        .rows
        .iter()
        .find(|r| r.setup.defaults && r.setup.paced_fps == 0.0)
    {
        let _ = write!(out, "; defaults unpaced {:.1}% of bound", r.pct_of_bound);
    }
    if let Some(r) = section
        .rows
        .iter()
        .find(|r| r.setup.defaults && r.setup.paced_fps > 0.0)
    {
        let _ = write!(
            out,
            ", live {:.0} fps latency {:.3} ms (p99 {:.3})",
            r.setup.paced_fps, r.latency_ms, r.latency_p99_ms
        );
    }
    out
}

/// Per-frame (submitted, done) times in ms.
type FrameTimes = Vec<(f64, f64)>;

/// Per-frame (submitted, done) ms of one configuration.
fn measure_row(
    size: FrameSize,
    chain: &Chain,
    setup: Setup,
    frames: u64,
) -> Result<Vec<(f64, f64)>> {
    Ok(run_setup(size, chain, setup, frames, 0)?.0)
}

/// Runs one configuration through the real pipeline (or the backend alone, for a setup
/// without threads); traces its first `trace_frames` frames.
fn run_setup(
    size: FrameSize,
    chain: &Chain,
    setup: Setup,
    frames: u64,
    trace_frames: u64,
) -> Result<(FrameTimes, Option<crate::trace::Trace>)> {
    let plan = |n| BandPlan::new(size.height, n, chain.radius()).map_err(anyhow::Error::msg);
    let cfg = BackendConfig {
        size,
        chain: chain.clone(),
        plan: plan(setup.bands)?,
        busy_plan: plan(setup.busy_bands)?,
        in_flight: setup.in_flight,
        pageable: setup.pageable,
        issue: setup.issue,
        streams: setup.streams,
        trace_frames,
        graphs: setup.graphs,
        priorities: setup.priorities,
        sample_every: backend::SAMPLE_EVERY,
    };
    let backend = backend::create(BackendKind::Cuda, &cfg)?;
    let ring = setup.in_flight + 4;
    let (instants, trace) = if setup.threads {
        let opts = Options {
            ring,
            frames: Some(frames),
            keep_frame_times: true,
            trace_frames,
        };
        let source = Box::new(Pattern::new(size, setup.paced_fps).cheap());
        let summary = pipeline::run(source, backend, &mut Null, &opts, &Stop::new())?;
        (summary.process.frames, summary.trace)
    } else {
        (run_alone(backend, size, ring, frames)?, None)
    };
    let t0 = instants
        .first()
        .map(|f| f.0)
        .context("no frame was processed")?;
    let ms = |t: Instant| crate::stats::ms(t - t0);
    let times = instants.iter().map(|(s, d)| (ms(*s), ms(*d))).collect();
    Ok((times, trace))
}

/// The backend alone, driven from this thread over a ring of `ring` slots taken in turn:
/// no capture thread, no consumer, no channels. Per-frame (submitted, done) instants.
fn run_alone(
    mut backend: Box<dyn Backend>,
    size: FrameSize,
    ring: usize,
    frames: u64,
) -> Result<Vec<(Instant, Instant)>> {
    let mut free: VecDeque<Slot> = ring::allocate(ring, size).into();
    for slot in &mut free {
        pattern::draw(size, 0, &mut slot.input);
        for buf in slot.buffers_mut() {
            backend.attach(buf)?;
        }
    }
    let mut times = Vec::with_capacity(frames as usize);
    let mut next = 0;
    while (times.len() as u64) < frames {
        while next < frames && backend.in_flight() < backend.capacity() {
            let Some(mut slot) = free.pop_front() else {
                break;
            };
            slot.seq = next;
            next += 1;
            backend.submit(slot)?;
        }
        let slot = backend
            .complete(true)?
            .context("the backend lost a frame")?;
        times.push((slot.stamps.submitted, slot.stamps.done));
        free.push_back(slot);
    }
    Ok(times)
}

pub fn run(args: &BenchArgs) -> Result<()> {
    if let Err(why) = backend::cuda::probe() {
        bail!("bench measures the CUDA pipeline and needs a GPU: {why}");
    }
    if args.bands.contains(&0) || args.in_flight.contains(&0) {
        bail!("--bands and --in-flight values must be at least 1");
    }
    if let Some(p) = &args.timeline {
        crate::paths::check_file_arg("--timeline", p, "svg").map_err(anyhow::Error::msg)?;
    }
    let device = backend::cuda::device_name()?;
    crate::out!("framepipe bench on {device}");
    let mut sections = Vec::new();
    for &size in &args.size {
        for chain in &args.filter {
            let section = run_section(args, size, chain)?;
            crate::msg::stdout(format_args!("{}", render(&section)));
            sections.push(section);
        }
    }
    crate::out!();
    for s in &sections {
        crate::out!("{}", verdict(s));
    }
    if let (Some(path), Some(&size), Some(chain)) =
        (&args.timeline, args.size.first(), args.filter.first())
    {
        draw_timeline(path, size, chain)?;
    }
    if let Some(path) = &args.json {
        let report = Report {
            device,
            date_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            sections,
        };
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text).with_context(|| format!("writing {path}"))?;
        crate::out!("wrote {path}");
    }
    Ok(())
}

/// The defaults against the original configuration, on one picture.
fn draw_timeline(path: &str, size: FrameSize, chain: &Chain) -> Result<()> {
    let frames = crate::trace::TIMELINE_FRAMES;
    let defaults = Setup {
        busy_bands: 1,
        ..Setup::new(
            false,
            band::default_bands(size.height).min(size.height),
            DEFAULT_IN_FLIGHT,
        )
    };
    let original = Setup::new(true, 3.min(size.height), 1);
    let mut panels = Vec::new();
    for (name, setup) in [
        ("page-locked, app defaults", defaults),
        ("pageable, 3 bands, one frame at a time", original),
    ] {
        // Skip the first frames (start-up), then trace a steady-state window.
        let (_, trace) = run_setup(size, chain, setup, 40 + frames, 40 + frames)?;
        let mut trace = trace.context("no trace recorded")?;
        trace.spans.retain(|s| s.frame >= 40);
        trace.spans.iter_mut().for_each(|s| s.frame -= 40);
        panels.push((format!("{size} {chain}, {name}"), trace));
    }
    let refs: Vec<(&str, &crate::trace::Trace)> =
        panels.iter().map(|(n, t)| (n.as_str(), t)).collect();
    std::fs::write(path, crate::trace::timeline_svg(&refs, frames))
        .with_context(|| format!("writing {path}"))?;
    crate::out!("timeline written to {path}");
    Ok(())
}

fn run_section(args: &BenchArgs, size: FrameSize, chain: &Chain) -> Result<Section> {
    let bound = measure::bound(size, chain, 30, 5)?;
    let both_over_ring_ms = measure::both_rotating(size, DEFAULT_IN_FLIGHT + 4, 30)?;
    let bound_ms = bound.bound_ms();
    let frames_for =
        |per_frame_ms: f64| ((args.seconds * 1e3 / per_frame_ms) as u64).clamp(60, 4000);
    let fits = |bands: usize| bands <= size.height;
    let default_bands = band::default_bands(size.height);
    let mut rows = Vec::new();

    // The original question's configuration: pageable, 3 bands, one frame at a time.
    let orig = Setup::new(true, 3.min(size.height), 1);
    let t = measure_row(size, chain, orig, frames_for(bound_ms * 10.0))?;
    let original = make_row(orig, &t, bound_ms, None).context("too few frames")?;
    let original_ms = Some(original.ms_per_frame);

    let mut grid: Vec<Setup> = Vec::new();
    let all = !args.only_defaults;
    for &b in args.bands.iter().filter(|b| all && fits(**b)) {
        for &f in &args.in_flight {
            grid.push(Setup::new(false, b, f));
        }
    }
    if all && args.compare_issue {
        for &b in args.bands.iter().filter(|b| fits(**b) && **b > 1) {
            for f in [1, 4] {
                grid.push(Setup {
                    issue: IssueOrder::Breadth,
                    ..Setup::new(false, b, f)
                });
            }
        }
    }
    if all && args.compare_streams {
        for &b in args.bands.iter().filter(|b| fits(**b)) {
            for f in [1, 4] {
                grid.push(Setup {
                    streams: StreamLayout::PerBand,
                    ..Setup::new(false, b, f)
                });
            }
        }
    }
    if all && args.compare_graphs {
        for &b in args.bands.iter().filter(|b| fits(**b)) {
            grid.push(Setup {
                graphs: false,
                ..Setup::new(false, b, 1)
            });
        }
    }
    for &b in args.pageable_bands.iter().filter(|b| all && fits(**b)) {
        for &f in &args.pageable_in_flight {
            grid.push(Setup::new(true, b, f));
        }
    }
    for setup in grid {
        let est = if setup.pageable {
            bound_ms * 10.0
        } else {
            bound_ms
        };
        let t = measure_row(size, chain, setup, frames_for(est))?;
        rows.extend(make_row(setup, &t, bound_ms, original_ms));
    }
    // The app's defaults: finely cut frames when the GPU is idle, one band behind others;
    // unpaced (a file) and paced (a live source).
    let defaults = Setup {
        busy_bands: 1,
        defaults: true,
        ..Setup::new(false, default_bands.min(size.height), DEFAULT_IN_FLIGHT)
    };
    let t = measure_row(size, chain, defaults, frames_for(bound_ms))?;
    rows.extend(make_row(defaults, &t, bound_ms, original_ms));
    // Variants of the defaults, each changing one thing.
    let variant = Setup {
        defaults: false,
        ..defaults
    };
    // One frame at a time, each cut into the idle plan's bands: frames submitted back to
    // back do not find the GPU idle for long, so the busy plan is set to the same cut.
    let alone = Setup {
        in_flight: 1,
        busy_bands: variant.bands,
        ..variant
    };
    let mut variants = Vec::new();
    if args.compare_graphs {
        variants.push(Setup {
            graphs: false,
            ..variant
        });
    }
    if args.compare_priorities {
        variants.push(Setup {
            priorities: true,
            ..variant
        });
        variants.push(Setup {
            priorities: true,
            ..alone
        });
    }
    if args.compare_threads {
        variants.push(Setup {
            threads: false,
            ..variant
        });
        variants.push(alone);
        variants.push(Setup {
            threads: false,
            ..alone
        });
    }
    for setup in variants {
        let t = measure_row(size, chain, setup, frames_for(bound_ms))?;
        rows.extend(make_row(setup, &t, bound_ms, original_ms));
    }
    if args.live_fps > 0.0 {
        let frames = ((args.live_fps * args.seconds * 2.0) as u64).max(60);
        let live = Setup {
            paced_fps: args.live_fps,
            ..defaults
        };
        let mut lives = vec![live];
        if args.compare_graphs {
            lives.push(Setup {
                graphs: false,
                defaults: false,
                ..live
            });
        }
        for setup in lives {
            let t = measure_row(size, chain, setup, frames)?;
            rows.extend(make_row(setup, &t, bound_ms, original_ms));
        }
    }
    let mut original = original;
    original.speedup_vs_original = 1.0;
    rows.insert(0, original);
    Ok(Section {
        size: size.to_string(),
        filter: chain.to_string(),
        bound,
        bound_ms,
        limiter: bound.limiter().to_string(),
        both_over_ring_ms,
        default_bands,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steady_period_skips_warm_up() {
        // 3 slow warm-up frames, then one frame per 2 ms.
        let mut done = vec![0.0, 10.0, 20.0];
        done.extend((0..20).map(|i| 30.0 + 2.0 * i as f64));
        assert_eq!(steady_period_ms(&done), Some(2.0));
        assert_eq!(steady_period_ms(&[1.0, 2.0]), None);
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 50.0), 50.0);
        assert_eq!(percentile(&v, 99.0), 99.0);
        assert_eq!(percentile(&v, 100.0), 100.0);
        assert_eq!(percentile(&[], 50.0), 0.0);
    }

    fn sample_section() -> Section {
        let times: Vec<(f64, f64)> = (0..40)
            .map(|i| (i as f64 * 0.5, i as f64 * 0.5 + 0.3))
            .collect();
        let row = make_row(Setup::new(false, 4, 1), &times, 0.4, Some(2.0)).unwrap();
        Section {
            size: "1920x1080".into(),
            filter: "copy".into(),
            bound: measure::Bound {
                h2d_ms: 0.3,
                d2h_ms: 0.3,
                kernel_ms: 0.01,
                both_ms: 0.4,
            },
            bound_ms: 0.4,
            limiter: "copies both ways".into(),
            both_over_ring_ms: 0.41,
            default_bands: 4,
            rows: vec![row],
        }
    }

    #[test]
    fn rows_compute_ratios() {
        let r = &sample_section().rows[0];
        assert!((r.ms_per_frame - 0.5).abs() < 1e-9);
        assert!((r.pct_of_bound - 80.0).abs() < 1e-9);
        assert!((r.latency_ms - 0.3).abs() < 1e-9);
        assert!((r.speedup_vs_original - 4.0).abs() < 1e-9);
        assert!((r.fps - 2000.0).abs() < 1e-6);
    }

    #[test]
    fn table_and_verdict_show_the_figures() {
        let s = sample_section();
        let t = render(&s);
        assert!(t.contains("bound 0.400 ms/frame"), "{t}");
        assert!(t.contains("80.0%"), "{t}");
        assert!(t.contains("4.00x"), "{t}");
        let v = verdict(&s);
        assert!(v.contains("best throughput 80.0% of bound"), "{v}");
        assert!(v.contains("best single-frame latency 0.300 ms"), "{v}");
    }

    #[test]
    fn notes_name_what_sets_a_row_apart() {
        let mut r = sample_section().rows.remove(0);
        assert_eq!(notes(&r), "");
        r.setup.defaults = true;
        r.setup.busy_bands = 1;
        r.setup.graphs = false;
        r.setup.priorities = true;
        r.setup.threads = false;
        assert_eq!(
            notes(&r),
            "defaults*, 1 band(s) behind others, no graphs, priorities, no threads"
        );
        // Rows driven without the threads are diagnostics, never the verdict's best.
        let mut s = sample_section();
        s.rows[0].setup.threads = false;
        assert!(!verdict(&s).contains("best throughput"), "{}", verdict(&s));
    }

    #[test]
    fn json_schema() {
        let report = Report {
            device: "test".into(),
            date_unix: 1,
            sections: vec![sample_section()],
        };
        let v: serde_json::Value = serde_json::to_value(&report).unwrap();
        let s = &v["sections"][0];
        for key in ["size", "filter", "bound", "bound_ms", "limiter", "rows"] {
            assert!(!s[key].is_null(), "missing {key}");
        }
        for key in ["h2d_ms", "d2h_ms", "kernel_ms", "both_ms"] {
            assert!(s["bound"][key].is_number(), "missing bound.{key}");
        }
        let r = &s["rows"][0];
        for key in [
            "mode",
            "streams",
            "issue",
            "bands",
            "in_flight",
            "frames",
            "ms_per_frame",
            "fps",
            "pct_of_bound",
            "latency_ms",
            "latency_p99_ms",
            "speedup_vs_original",
        ] {
            assert!(!r[key].is_null(), "missing row.{key}");
        }
        assert_eq!(r["issue"], "depth");
        assert_eq!(r["streams"], "per-stage");
        for key in ["graphs", "priorities", "threads"] {
            assert!(r[key].is_boolean(), "missing row.{key}");
        }
        assert!(s["both_over_ring_ms"].is_number());
    }
}
