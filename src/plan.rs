//! One run's configuration, decided once, as ripgrep turns its low-level arguments into a
//! high-level plan: `Request::check` takes what the flags say that can be checked before
//! anything opens (outputs, tracing, rates); `Plan::settle` adds what the opened input says
//! (size, format, rate) and decides the ring, the frames in flight, the band counts and the
//! format the frames are handed to the sinks in (`sink::negotiate`). `Plan::new` makes a plan
//! from explicit counts: the bench and the tests make theirs with it, and every pipeline in
//! framepipe is started from a plan (`Plan::options`, `Plan::run`).
//!
//! Invariants: every default lives here once (ring, frames in flight, band counts, spare
//! slots, the output rate where nothing says one); a plan is valid when made (bands cut for
//! the size and the formats' row alignment, formats checked against the size, frames in
//! flight between 1 and the ring's slots, the ring at least 2); nothing here opens a file, a
//! device or a window.

use std::sync::Arc;

use anyhow::{bail, Result};

use crate::backend::{self, Backend, BackendConfig, BackendKind};
use crate::band;
use crate::cli::RunArgs;
use crate::filter::Chain;
use crate::frame::{FrameSize, DEFAULT_FPS};
use crate::paths;
use crate::pipeline::{self, Options};
use crate::pixel::{Formats, PixelFormat};
use crate::reload::Reloader;
use crate::sink::{self, OutputSpec, Sink};
use crate::source::{InputSpec, Source};
use crate::stats::Summary;
use crate::stop::Stop;

/// Slots the ring holds beyond the frames in flight where nothing else decides (the bench,
/// the tests): frames being captured, waiting and consumed while others are on the GPU.
pub const RING_SPARE: usize = 4;

/// Slots each input's ring holds in a run of several inputs when `--ring` is not given
/// (fewer than one input's default: many rings share the host's memory).
pub const RING_EACH: usize = 6;

/// The browser view's settings from the flags (and the token's file or environment).
#[cfg(feature = "ffmpeg")]
pub fn web_settings(args: &RunArgs) -> Result<sink::web::Settings> {
    let token = sink::web::TokenFrom {
        flag: args.serve_token.clone(),
        file: args.serve_token_file.clone(),
        env: std::env::var(sink::web::access::TOKEN_VARIABLE).ok(),
    };
    let serve = args.serve.as_deref().unwrap_or_default();
    sink::web::Settings::new(serve, &token, &args.serve_host, args.serve_insecure)
        .map_err(anyhow::Error::msg)
}

/// The rates `--fps` (and a pattern's rate) take, besides 0 (`frame` keeps them, below the
/// sources that read them too).
pub use crate::frame::{MAX_FPS, MIN_FPS};

/// How many of each a run uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Counts {
    /// Slots in the ring (frames that exist at once).
    pub ring: usize,
    /// Frames on the backend at once.
    pub in_flight: usize,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Bands of a frame submitted behind others.
    pub busy_bands: usize,
}

impl Counts {
    /// `bands` bands for every frame, `in_flight` frames in flight, `RING_SPARE` more slots.
    pub fn spare(bands: usize, in_flight: usize) -> Self {
        Self {
            ring: in_flight + RING_SPARE,
            in_flight,
            bands,
            busy_bands: bands,
        }
    }

    /// The app's defaults for `size` frames whose bands keep `align` rows whole: the ring
    /// the host's memory allows (`budget::default_ring`), frames in flight for the height
    /// (two slots left for capture and display), the height's bands, one band behind others.
    pub fn defaults(size: FrameSize, align: usize) -> Self {
        let ring = crate::budget::default_ring(size);
        Self {
            ring,
            in_flight: Self::in_flight_for(ring, size),
            bands: band::default_bands_in(size.height, align),
            busy_bands: 1,
        }
    }

    /// Frames in flight where `--in-flight` does not say: the height's (`band`), leaving two
    /// of the `ring`'s slots for capture and display.
    pub fn in_flight_for(ring: usize, size: FrameSize) -> usize {
        ring.saturating_sub(2)
            .clamp(1, band::default_in_flight(size.height))
    }
}

/// One run's validated configuration (module doc).
#[derive(Clone, Debug)]
pub struct Plan {
    /// Which backend runs the frames.
    pub kind: BackendKind,
    /// What the backend is made from: the first frames' size and formats, the chain, the
    /// band plans, frames in flight, page-locking, tracing, the CUDA settings.
    pub backend: BackendConfig,
    /// Slots in the ring.
    pub ring: usize,
    /// Stop after this many captured frames.
    pub frames: Option<u64>,
    /// The summary's trace is the last N traced frames (0: the first `trace_frames`).
    pub trace_last: u64,
    /// Keep every frame's submit and done instants (the bench).
    pub keep_frame_times: bool,
    /// The output's frame rate: the input's, `--fps`, or `DEFAULT_FPS`.
    pub fps: f64,
}

impl Plan {
    /// `size` frames in `formats` through `chain` on `kind`, with `counts`; untraced,
    /// page-locked, CUDA's default settings, to the end of the input. The error says which
    /// count or format is wrong.
    pub fn new(
        kind: BackendKind,
        size: FrameSize,
        formats: Formats,
        chain: Chain,
        counts: Counts,
    ) -> Result<Self, String> {
        let Counts {
            ring,
            in_flight,
            bands,
            busy_bands,
        } = counts;
        if ring < 2 {
            return Err(format!(
                "--ring {ring} is too small: the ring needs at least 2 slots"
            ));
        }
        if in_flight == 0 || in_flight > ring {
            return Err(format!(
                "--in-flight {in_flight} must be between 1 and the ring's {ring} slots"
            ));
        }
        let backend = BackendConfig::new(size, chain, bands, in_flight)
            .map_err(|e| format!("--bands {bands}: {e}"))?
            .with_busy_bands(busy_bands.min(size.height))
            .map_err(|e| format!("--busy-bands {busy_bands}: {e}"))?
            .with_formats(formats)?;
        Ok(Self {
            kind,
            backend,
            ring,
            frames: None,
            trace_last: 0,
            keep_frame_times: false,
            fps: DEFAULT_FPS,
        })
    }

    /// The app's plan: the checked flags (`request`) over what the opened `source` says.
    pub fn settle(request: &Request, source: &dyn Source) -> Result<Self> {
        let args = &request.flags;
        let size = source.size();
        let defaults = Counts::defaults(size, source.format().row_align());
        let ring = args.ring.unwrap_or_else(|| {
            if defaults.ring < crate::budget::DEFAULT_RING {
                crate::info!(
                    "{size} frames are large: the ring holds {} of them (--ring sets it)",
                    defaults.ring
                );
            }
            defaults.ring
        });
        crate::budget::check_ring(ring, size, crate::budget::host_available())
            .map_err(anyhow::Error::msg)?;
        let counts = Counts {
            ring,
            in_flight: args
                .in_flight
                .unwrap_or_else(|| Counts::in_flight_for(ring, size)),
            bands: args.bands.unwrap_or(defaults.bands),
            busy_bands: args.busy_bands,
        };
        // Frames cross the CPU and PCIe in the source's own format; the backend converts
        // them to the format every sink takes (negotiated once, here).
        let mut takes: Vec<Vec<PixelFormat>> = Vec::new();
        if !args.headless {
            takes.push(sink::WINDOW_TAKES.to_vec());
        }
        if let Some(out) = &request.output {
            takes.push(out.takes(request.output_format));
        }
        for stream in &request.streams {
            takes.push(stream.takes(None));
        }
        if args.serve.is_some() || request.mosaic {
            // The browser view and the mosaic take BGR too.
            takes.push(sink::WINDOW_TAKES.to_vec());
        }
        let formats = Formats {
            input: source.format(),
            output: sink::negotiate(source.format(), size, &takes),
        };
        if let Some(lost) = chroma_lost(formats) {
            crate::warn!("{lost}");
        }
        let mut plan = Self::new(args.backend, size, formats, args.filter.clone(), counts)
            .map_err(|e| match e.starts_with("--") {
                true => anyhow::anyhow!("{e}"),
                false => anyhow::anyhow!("{}: {e}", source.describe()),
            })?;
        let cfg = &mut plan.backend;
        cfg.pageable = args.pageable;
        cfg.trace_frames = request.trace_frames;
        // Spans beyond the first frames: every frame for --trace-frames last:N; bursts of a
        // few frames for the window's timeline strip (t); none otherwise.
        cfg.rolling = if request.trace_last > 0 {
            crate::trace::Rolling::Every
        } else if !args.headless {
            crate::trace::Rolling::Bursts
        } else {
            crate::trace::Rolling::Off
        };
        cfg.cuda.streams = args.streams;
        cfg.cuda.graphs = !args.no_graphs;
        plan.frames = args.frames;
        plan.trace_last = request.trace_last;
        plan.fps = source.fps().unwrap_or(match args.fps {
            Some(f) if f > 0.0 => f,
            _ => DEFAULT_FPS,
        });
        Ok(plan)
    }

    /// Traces frames `0..n` (spans into the summary's trace).
    pub fn traced(mut self, n: u64) -> Self {
        self.backend.trace_frames = n;
        self
    }

    /// The pipeline's options, with `reload` watching the chain's kernel files.
    pub fn options(&self, reload: Option<Arc<Reloader>>) -> Options {
        Options {
            ring: self.ring,
            frames: self.frames,
            keep_frame_times: self.keep_frame_times,
            trace_frames: self.backend.trace_frames,
            trace_last: self.trace_last,
            reload,
        }
    }

    /// The backend the plan asks for.
    pub fn make_backend(&self) -> Result<Box<dyn Backend>> {
        backend::create(self.kind, &self.backend)
    }

    /// Runs `source` into `sink` as planned, until the input ends, `frames` are captured or
    /// `stop` is asked for.
    pub fn run(
        &self,
        source: Box<dyn Source>,
        sink: &mut dyn Sink,
        stop: &Stop,
    ) -> Result<Summary> {
        let backend = self.make_backend()?;
        pipeline::run(source, backend, sink, &self.options(None), stop)
    }
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

/// What the flags ask for, checked before anything opens (ripgrep's low-level arguments
/// made high-level): every later step of a run reads this, not the flags.
#[derive(Clone, Debug)]
pub struct Request {
    /// The flags as parsed (what needs no more checking: switches, paths already checked).
    pub flags: RunArgs,
    /// `--input`, classified (the first one; `for_input` gives each input's request).
    pub input: InputSpec,
    /// What `input` was given as (`--input`'s text; empty for the default).
    pub input_name: String,
    /// Every `--input`, classified, with its text, in order (one for a run of one input).
    pub inputs: Vec<(InputSpec, String)>,
    /// `--output`'s file, image sequence or standard output, parsed with its codec and
    /// quality.
    pub output: Option<OutputSpec>,
    /// `--output`'s streams (network outputs, HLS), parsed the same way.
    pub streams: Vec<OutputSpec>,
    /// The input's frames also go to the mosaic (several inputs, shown or recorded): its
    /// sinks take BGR.
    pub mosaic: bool,
    /// `--output-format`, checked (it needs `--output -`).
    pub output_format: Option<PixelFormat>,
    /// Frames `0..trace_frames` are traced (0: no trace, or `last:N`).
    pub trace_frames: u64,
    /// `--trace-frames last:N` with a trace asked for: N.
    pub trace_last: u64,
}

impl Request {
    /// Checks every argument that can be checked without opening anything.
    pub fn check(args: &RunArgs) -> Result<Self> {
        check_args(args)
    }

    /// Whether the run has several inputs.
    pub fn several(&self) -> bool {
        self.inputs.len() > 1
    }

    /// Input `n`'s own request: its input, and its output (`{n}` in `--output` replaced by
    /// its index).
    pub fn for_input(&self, n: usize) -> Result<Request> {
        let (input, name) = self.inputs[n].clone();
        let mut flags = self.flags.clone();
        // Input n's own outputs are those with {n}; the others record the mosaic.
        flags.output = flags
            .output
            .iter()
            .filter(|o| o.contains("{n}"))
            .map(|o| o.replace("{n}", &n.to_string()))
            .collect();
        let (output, streams) = outputs_of(&flags)?;
        let mosaic_outputs = self.flags.output.iter().any(|o| !o.contains("{n}"));
        Ok(Request {
            input,
            input_name: name,
            output,
            streams,
            mosaic: !flags.no_mosaic
                && (!flags.headless || mosaic_outputs || flags.serve.is_some()),
            flags,
            ..self.clone()
        })
    }

    /// In a run of several inputs, what records the mosaic: the `--output`s without `{n}`
    /// (None where there is none).
    pub fn mosaic_request(&self) -> Result<Option<Request>> {
        let mut flags = self.flags.clone();
        flags.output.retain(|o| !o.contains("{n}"));
        if flags.output.is_empty() {
            return Ok(None);
        }
        let (output, streams) = outputs_of(&flags)?;
        Ok(Some(Request {
            input: InputSpec::Default,
            input_name: String::new(),
            output,
            streams,
            flags,
            ..self.clone()
        }))
    }

    /// Whether every output of the run is live (streams, HLS, the browser view) and there
    /// is one: a file is then sent at its own rate, as a live source would send it.
    pub fn live_outputs_only(&self) -> bool {
        let live = !self.streams.is_empty() || self.flags.serve.is_some();
        live && self.output.is_none()
    }

    /// What the input is asked for (`source::open`).
    pub fn asked(&self) -> crate::source::open::Asked {
        let args = &self.flags;
        crate::source::open::Asked {
            input_format: args.input_format,
            size: args.size,
            fps: args.fps,
            window: !args.headless,
            no_pace: args.no_pace,
            realtime: args.realtime || self.live_outputs_only(),
            decode: args.decode,
            // The CUDA backend, where it will be the one (`backend::create`), takes frames
            // NVDEC leaves in device memory.
            on_device: matches!(
                args.decode,
                crate::source::open::Decode::Gpu | crate::source::open::Decode::Auto
            ) && args.backend != crate::backend::BackendKind::Cpu
                && crate::backend::device::probe().is_ok(),
            reconnect: args.reconnect || self.several(),
            untouched: args.filter.is_identity()
                && args.headless
                && self.output == Some(OutputSpec::Stdout)
                && self.streams.is_empty(),
            #[cfg(feature = "opencv")]
            rotation: 0,
            #[cfg(feature = "opencv")]
            offset: 0.0,
        }
    }
}

/// The encoder flags as asked.
fn encoding_of(args: &RunArgs) -> sink::Encoding {
    sink::Encoding {
        crf: args.crf,
        bitrate: args.bitrate,
        maxrate: args.maxrate,
        bufsize: args.bufsize,
        preset: args.preset.clone(),
        tune: args.tune.clone(),
        gop: args.gop,
        pix_fmt: args.pix_fmt,
        opts: args.codec_opt.clone(),
    }
}

/// Every `--output` as parsed with its codec, quality and encoder flags: the one file,
/// image sequence or standard output, and the streams (network outputs, HLS).
fn outputs_of(args: &RunArgs) -> Result<(Option<OutputSpec>, Vec<OutputSpec>)> {
    let mut local: Option<(OutputSpec, &str)> = None;
    let mut streams = Vec::new();
    for (k, o) in args.output.iter().enumerate() {
        let spec = OutputSpec::parse(o)
            .and_then(|spec| spec.with_codec(args.codec))
            .and_then(|spec| spec.with_quality(args.quality))
            .and_then(|spec| spec.with_encoding(encoding_of(args)))
            .map_err(anyhow::Error::msg)?;
        if args.output[..k].contains(o) {
            bail!("--output '{o}' is given twice");
        }
        if spec.is_stream() {
            streams.push(spec);
        } else if let Some((_, first)) = &local {
            bail!(
                "--output '{o}': a run writes one file, image sequence or standard output ('{first}' is one); more --outputs are streams (udp://, srt://, rtmp://, rtsp://, .m3u8)"
            );
        } else {
            local = Some((spec, o));
        }
    }
    Ok((local.map(|(spec, _)| spec), streams))
}

/// Every `--input`, classified; with several, what a run of several inputs can't do is
/// refused here (one standard input; the browser view and the mosaic's outputs
/// need the mosaic).
fn check_inputs(args: &RunArgs) -> Result<Vec<(InputSpec, String)>> {
    if args.input.is_empty() {
        return Ok(vec![(InputSpec::Default, String::new())]);
    }
    let mut inputs = Vec::with_capacity(args.input.len());
    for (n, text) in args.input.iter().enumerate() {
        let spec = InputSpec::parse(Some(text)).map_err(|e| match args.input.len() {
            1 => anyhow::anyhow!("{e}"),
            _ => anyhow::anyhow!("input {n}: {e}"),
        })?;
        inputs.push((spec, text.clone()));
    }
    let n = inputs.len();
    if n == 1 {
        return Ok(inputs);
    }
    if n > pipeline::MAX_INPUTS {
        bail!(
            "{n} inputs are more than the {} one run takes",
            pipeline::MAX_INPUTS
        );
    }
    if inputs
        .iter()
        .filter(|(i, _)| *i == InputSpec::Stdin)
        .count()
        > 1
    {
        bail!("--input - is given more than once: there is one standard input (a named pipe, made with mkfifo, is another stream)");
    }
    if args.serve.is_some() && args.no_mosaic {
        bail!("--serve with {n} inputs serves the mosaic, and --no-mosaic turns the mosaic off");
    }
    if let Some(grid) = args.grid {
        if grid.width * grid.height < n {
            bail!(
                "--grid {}x{} has {} tiles for {n} inputs",
                grid.width,
                grid.height,
                grid.width * grid.height
            );
        }
    }
    if let Some(o) = args.output.iter().find(|o| !o.contains("{n}")) {
        if args.no_mosaic {
            bail!(
                "--output '{o}' with {n} inputs records the mosaic, and --no-mosaic turns the mosaic off; name one output per input with {{n}}, the input's index (--output 'cam-{{n}}.mp4', udp://host:500{{n}})"
            );
        }
        if !cfg!(feature = "opencv") {
            bail!("--output '{o}' with {n} inputs records the mosaic, which this build (no OpenCV) can't draw; name one output per input with {{n}}");
        }
    }
    Ok(inputs)
}

fn check_args(args: &RunArgs) -> Result<Request> {
    check_counts(args)?;
    check_kernels(args)?;
    check_reports(args)?;
    let tracing = args.trace.is_some() || args.timeline.is_some();
    let inputs = check_inputs(args)?;
    check_serve(args)?;
    let (output, streams) = outputs_of_parts(args, inputs.len())?;
    check_encoding(args, output.as_ref(), &streams)?;
    Ok(Request {
        flags: args.clone(),
        input: inputs[0].0.clone(),
        input_name: inputs[0].1.clone(),
        inputs,
        output_format: args.output_format,
        output,
        streams,
        mosaic: false,
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

/// `--ring`, `--in-flight`, `--fps`, `--frames`, `--busy-bands`.
fn check_counts(args: &RunArgs) -> Result<()> {
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
    Ok(())
}

/// A user kernel runs on CUDA only: refused before the input is opened where there is none.
fn check_kernels(args: &RunArgs) -> Result<()> {
    let Some(k) = args.filter.user_kernels().next() else {
        return Ok(());
    };
    if args.backend == BackendKind::Cpu {
        bail!(
            "{} (--backend cpu was asked for)",
            backend::cpu::needs_cuda(k)
        );
    }
    if let Err(why) = backend::device::probe() {
        bail!("{}: no CUDA here ({why})", backend::cpu::needs_cuda(k));
    }
    Ok(())
}

/// `--trace-frames`, and the names of `--trace`, `--timeline` and `--summary-json`.
fn check_reports(args: &RunArgs) -> Result<()> {
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
    Ok(())
}

/// `--serve` and the flags that apply to it.
fn check_serve(args: &RunArgs) -> Result<()> {
    if args.serve.is_some() && !cfg!(feature = "ffmpeg") {
        bail!("--serve: this build has no FFmpeg libraries (whose JPEG encoder the browser view uses)");
    }
    #[cfg(feature = "ffmpeg")]
    if args.serve.is_some() {
        web_settings(args)?;
    }
    let serve_flags = args.serve_token.is_some()
        || args.serve_token_file.is_some()
        || !args.serve_host.is_empty()
        || args.serve_insecure;
    if serve_flags && args.serve.is_none() {
        bail!("--serve-token, --serve-token-file, --serve-host and --serve-insecure apply to --serve, and it is not given");
    }
    Ok(())
}

/// The outputs of a run of `inputs` inputs, checked: with several, the outputs with `{n}`
/// (each input's) and those without (the mosaic's) are two sets, each checked as a run of
/// one input checks its outputs.
fn outputs_of_parts(
    args: &RunArgs,
    inputs: usize,
) -> Result<(Option<OutputSpec>, Vec<OutputSpec>)> {
    if inputs == 1 {
        return outputs_of(args);
    }
    let (own, mosaic): (Vec<String>, Vec<String>) =
        args.output.iter().cloned().partition(|o| o.contains("{n}"));
    let own = RunArgs {
        output: own.iter().map(|o| o.replace("{n}", "0")).collect(),
        ..args.clone()
    };
    let (a, b) = outputs_of(&own)?;
    let (c, d) = outputs_of(&RunArgs {
        output: mosaic,
        ..args.clone()
    })?;
    Ok((a.or(c), [b, d].concat()))
}

/// The encoder flags and `--output-format` need an output they apply to.
fn check_encoding(
    args: &RunArgs,
    output: Option<&OutputSpec>,
    streams: &[OutputSpec],
) -> Result<()> {
    let videos = output.is_some() || !streams.is_empty();
    if (args.codec.is_some() || args.quality.is_some()) && !videos {
        bail!("--codec and --quality apply to a video --output, and there is none");
    }
    if !encoding_of(args).is_default() && !videos {
        bail!("--crf, --bitrate, --maxrate, --bufsize, --preset, --tune, --gop, --pix-fmt and --codec-opt apply to a video --output, and there is none");
    }
    if let Some(f) = args.output_format {
        if output != Some(&OutputSpec::Stdout) {
            bail!("--output-format {f} applies to --output - (standard output), and that is not the output");
        }
        if !f.writable() {
            bail!("--output-format {f}: framepipe writes i420, gray, nv12 or bgr24 frames");
        }
    }
    Ok(())
}
