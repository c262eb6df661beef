//! `RunPlan`: what a run is asked to do, made by consuming the parsed flags (`RunArgs`), as
//! ripgrep's `HiArgs::from_low_args` consumes its low-level arguments. Every argument that
//! can be checked without opening anything is checked here, and every decision the flags
//! imply is made here once: which window the run has, whether the mosaic is composed, each
//! input's own outputs (`{n}` replaced) and the mosaic's recording, what each input's
//! consumers take (the format negotiation's input), how each input is opened (paced,
//! reconnected, untouched, who decodes it: its own `decode=` over `--decode`), the trace's
//! span policy, whether progress is shown.
//!
//! Invariants: nothing here opens a file, a device or a window, or asks the machine
//! anything (facts about the machine come from `Machine`, beside the plan, in `fit`); no
//! later step of a run reads a flag: they read the plan.

use super::error::PlanError;

use super::machine::Machine;
use super::shard::{Entry, Roster};
use super::RING_EACH;
use crate::backend::device::NoCuda;
use crate::backend::{self, BackendKind, StreamLayout};
use crate::cli::{CodecArg, RunArgs};
use crate::display;
use crate::filter::Chain;
use crate::frame::{MAX_FPS, MIN_FPS};
use crate::output;
use crate::output::{claim::Overwrite, OutputSpec};
use crate::paths;
use crate::pipeline;
use crate::pixel::PixelFormat;
use crate::source::open::{Asked, Decode};
use crate::source::InputSpec;
use crate::source::Pictures;
use crate::trace::{Rolling, TraceFrames};

/// The browser view's settings (`--serve`): its address, token and hosts, checked.
#[cfg(feature = "ffmpeg")]
pub type Serve = display::web::Settings;
/// Without FFmpeg's libraries there is no browser view (`--serve` is refused).
#[cfg(not(feature = "ffmpeg"))]
pub type Serve = std::convert::Infallible;

/// One input's recording of its own packets (`--record`, `--segment`).
#[cfg(feature = "ffmpeg")]
pub type Record = crate::record::RecordSpec;
/// Without FFmpeg's libraries nothing is recorded (`--record` is refused).
#[cfg(not(feature = "ffmpeg"))]
pub type Record = std::convert::Infallible;

/// One run's plan (module doc).
#[derive(Clone, Debug)]
pub struct RunPlan {
    inputs: Vec<InputPlan>,
    recording: Option<Outputs>,
    display: Display,
    engine: Engine,
    reports: Reports,
    writing: Writing,
    progress: bool,
    detect: Option<crate::detect::Settings>,
    events: Option<crate::events::Settings>,
    joining: Joining,
    /// A run of several inputs, or of a list's (`several`).
    several: bool,
}

/// What an input that joins the run while it goes is made of (`RunPlan::input_for`): the
/// run's settings for an input with no outputs of its own, `--record` (`{shard}` put in)
/// and its flags, and whether a detector runs.
#[derive(Clone, Debug)]
struct Joining {
    base: InputPlan,
    record: Option<(String, crate::cli::RecordArgs)>,
    detect: bool,
    /// Inputs may join and leave while the run goes: they come from a list (a file, a
    /// shard) or the browser view's API may add them.
    open: bool,
    /// What the machine lets a joining input's decoder do (`RunPlan::fit`).
    nvdec: Nvdec,
}

/// What the machine lets an input's decoder do with NVDEC (`RunPlan::fit`), kept for the
/// inputs that join while the run goes.
#[derive(Clone, Copy, Debug)]
struct Nvdec {
    /// NVDEC's pictures may stay on the device: the backend is CUDA's, and the ring no
    /// longer than a decoder lends.
    lends: bool,
    /// A decoder may open beside the backend: it captures no CUDA graph, which a decoder
    /// opening or closing would break.
    may_open: bool,
}

impl Joining {
    /// What an input joining this run while it goes is made of.
    fn of(args: &RunArgs, display: &Display, marks: &Marks, roster: &Roster) -> Self {
        let spec = InputSpec::Default;
        Self {
            base: input_plan(args, display, true, spec, String::new(), Outputs::default()),
            record: args
                .recording
                .record
                .as_ref()
                .map(|r| (marks.shared(r), args.recording.clone())),
            detect: args.detect.detect.is_some(),
            open: cfg!(feature = "ffmpeg") && (roster.listed() || args.view.serve.is_some()),
            nvdec: Nvdec {
                lends: false,
                may_open: true,
            },
        }
    }
}

/// One input of the run: what it is, what it writes of its own, how it is opened.
#[derive(Clone, Debug)]
pub struct InputPlan {
    /// `--input`, classified.
    pub spec: InputSpec,
    /// Its name in errors and the summary: an inputs file's name for it, or `--input`'s
    /// text (empty for the default input).
    pub name: String,
    /// What it is called where it is shown (the mosaic, the window's title, the browser
    /// view, `{name}`): an inputs file's name, or one derived from its source (`names`).
    pub label: String,
    /// Its source as given (`--input`'s text, or an inputs file's), a password and all.
    pub source: String,
    /// Its own outputs: in a run of one input every `--output`; beside others, those with
    /// `{n}`, with its index put in.
    pub outputs: Outputs,
    /// How it is opened (`source::open`).
    pub asked: Asked,
    /// What each consumer of its frames takes (the window, its outputs, the browser view,
    /// the mosaic), preferred first: what `sink::negotiate` settles the format from.
    pub takes: Vec<Vec<PixelFormat>>,
    /// It may join the run after the others started (beside others, with no outputs of its
    /// own: only the mosaic shows it).
    pub may_join_late: bool,
    /// Its packets recorded as they came (`--record`, its `{n}` put in).
    pub record: Option<Record>,
    /// Outputs of its packets as they came (`--codec copy`: video files and streams).
    pub copies: Vec<OutputSpec>,
    /// Its own settings from the inputs file (`NAME [KEY=VALUE, …] = SOURCE`).
    pub own: super::shard::PerInput,
}

/// A set of outputs: a file, image sequence or standard output, and streams.
#[derive(Clone, Debug, Default)]
pub struct Outputs {
    /// The file, image sequence or standard output.
    pub file: Option<OutputSpec>,
    /// The streams (network outputs, HLS).
    pub streams: Vec<OutputSpec>,
    /// Every `--output` of the set as named (`{n}` replaced).
    pub named: Vec<String>,
}

impl Outputs {
    /// No output at all.
    pub fn is_empty(&self) -> bool {
        self.file.is_none() && self.streams.is_empty()
    }
}

/// Which window a run has.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// None (`--headless`).
    None,
    /// One per input: a run of one input, or `--no-mosaic`.
    Each,
    /// One, showing the mosaic of every input.
    Mosaic,
}

/// What the run shows.
#[derive(Clone, Debug)]
pub struct Display {
    /// The window.
    pub window: Window,
    /// At the end of a file the last frame stays up until q (a run of one input, without
    /// `--exit-at-end`).
    pub hold: bool,
    /// The browser view (`--serve`).
    pub serve: Option<Serve>,
    /// The RTSP server of the inputs' packets (`--rtsp-serve`).
    pub rtsp: Option<RtspServe>,
    /// Several inputs, shown, recorded or served: the backend composes their mosaic.
    pub mosaic: bool,
    /// `--grid`: columns and rows of the mosaic.
    pub grid: Option<(usize, usize)>,
}

/// `--rtsp-serve`, checked: where it listens and the token it asks for.
#[derive(Clone, Debug)]
pub struct RtspServe {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// The token every player must give, if any.
    pub token: Option<String>,
    /// The path framepipe's own encoder publishes (`mosaic` of several inputs, `picture`
    /// of one whose filter changes it), where the run has one.
    pub published: Option<&'static str>,
    /// The secret that publisher gives (nobody else may publish).
    pub publish_key: String,
}

/// What the backend is asked for, before the input says its size.
#[derive(Clone, Debug)]
pub struct Engine {
    /// `--backend`.
    pub kind: BackendKind,
    /// `--filter`.
    pub chain: Chain,
    /// `--ring`.
    pub ring: Option<usize>,
    /// Most slots of an input's ring where `--ring` is not given (`RING_EACH` beside others).
    pub ring_cap: Option<usize>,
    /// `--in-flight`.
    pub in_flight: Option<usize>,
    /// `--bands`.
    pub bands: Option<usize>,
    /// `--busy-bands`.
    pub busy_bands: usize,
    /// `--pageable`.
    pub pageable: bool,
    /// `--streams`.
    pub streams: StreamLayout,
    /// CUDA graphs (not `--no-graphs`).
    pub graphs: bool,
    /// `--frames`.
    pub frames: Option<u64>,
    /// `--fps`, where given and not 0: the output's rate where the input says none.
    pub fps: Option<f64>,
    /// `fps:N` in `--filter` (taken out of `chain`): each input's outputs take its frames at
    /// N a second (`sink::rate`).
    pub rate: Option<f64>,
    /// Frames `0..trace_frames` are traced (0: no trace, or `last:N`).
    pub trace_frames: u64,
    /// `--trace-frames last:N` with a trace asked for: N.
    pub trace_last: u64,
    /// Spans beyond the first frames: every frame for `last:N`; bursts for the window's
    /// timeline strip; none otherwise.
    pub rolling: Rolling,
    /// User kernels' files are watched and reloaded when saved (not `--no-watch`).
    pub watch: bool,
}

/// The reports a run writes.
#[derive(Clone, Debug, Default)]
pub struct Reports {
    /// `--trace`.
    pub trace: Option<String>,
    /// `--timeline`.
    pub timeline: Option<String>,
    /// `--summary-json`.
    pub summary_json: Option<String>,
}

/// How outputs are written.
#[derive(Clone, Copy, Debug)]
pub struct Writing {
    /// `-y` / `-n`.
    pub overwrite: Overwrite,
    /// `--fragmented`.
    pub fragmented: bool,
    /// `--no-audio`.
    pub no_audio: bool,
    /// `--output-format` (it needs `--output -`).
    pub output_format: Option<PixelFormat>,
}

impl Engine {
    /// The ring of an input beside others (one joining late): `--ring`, else `RING_EACH`.
    pub fn ring_beside_others(&self) -> usize {
        self.ring.or(self.ring_cap).unwrap_or(RING_EACH)
    }
}

impl RunPlan {
    /// Consumes the flags into a plan, checking every argument that can be checked without
    /// opening anything or asking the machine; the inputs are `roster`'s share (its shard's,
    /// or every one listed).
    pub fn from_args(mut args: RunArgs, roster: &Roster) -> Result<Self, PlanError> {
        check_counts(&args)?;
        check_kernels(&args)?;
        check_reports(&args)?;
        let mine = roster.mine();
        args.sources.input = mine.iter().map(|e| e.source.clone()).collect();
        let specs = check_inputs(&args)?;
        let marks = Marks::of(&mine, roster, specs.len());
        let labels = labels_of(roster, &mine, &specs);
        let owns: Vec<super::shard::PerInput> = (0..specs.len())
            .map(|i| mine.get(i).map(|e| e.own.clone()).unwrap_or_default())
            .collect();
        let records = records_of(&args, &specs, &marks, (&labels, &owns))?;
        let serve = check_serve(&args)?;
        // A list's share is a wall even while it holds one camera: cameras come and go with
        // the list, and its view and outputs are the mosaic's, which outlive them.
        let several = specs.len() > 1 || roster.listed();
        let Parts {
            mut each,
            mut recording,
        } = outputs_of_parts(&args, &marks, &owns, several)?;
        check_geometry(&args, several)?;
        check_encoding(&args, &each[0], recording.as_ref())?;
        let copies = copies_of(&args, &specs, &mut each, recording.as_ref())?;
        let mut rtsp = check_rtsp(&args)?;
        publish_to_rtsp(&args, rtsp.as_mut(), (&mut each, several), &mut recording)?;
        let display = display_of(&args, several, (serve, rtsp), recording.is_some());
        let engine = engine_of(&args, several);
        let events = check_events(&args, &labels)?;
        check_own(&args, &mine)?;
        let inputs = specs
            .into_iter()
            .zip(each)
            .zip(records)
            .zip(labels)
            .zip(copies)
            .enumerate()
            .map(
                |(i, (((((spec, text), outputs), record), label), copies))| {
                    let source = text.clone();
                    // A listed input is called by its own name (`NAME = SOURCE`), and is a
                    // camera of a wall: opened again when lost, and at the start until it is up.
                    let (name, listed) = match roster.listed() {
                        true => (mine.get(i).map_or(text, |e| e.name.clone()), true),
                        false => (text, false),
                    };
                    let own = owns[i].clone();
                    let mut input = input_plan(&args, &display, several, spec, name, outputs);
                    input.asked.reconnect |= listed;
                    input.asked.decode = own.decode.unwrap_or(input.asked.decode);
                    // A file copied to streams alone is sent at its own rate, as a live
                    // source would send it.
                    input.asked.realtime |= input.outputs.is_empty() && streams_alone(&copies);
                    input.asked.packets_only = packets_alone(&args, &display, &input, &copies);
                    InputPlan {
                        record,
                        label,
                        source,
                        copies,
                        own,
                        ..input
                    }
                },
            )
            .collect();
        let joining = Joining::of(&args, &display, &marks, roster);
        Ok(Self {
            inputs,
            recording,
            display,
            engine,
            joining,
            several,
            detect: check_detect(&args)?,
            events,
            writing: writing_of(&args),
            progress: args.view.headless && !args.quiet,
            reports: reports_of(args),
        })
    }

    /// The plan on this machine: refuses what it lacks (a user kernel needs CUDA), and
    /// lets NVDEC's pictures stay on the device where the backend will be CUDA's.
    pub fn fit(mut self, machine: &Machine) -> Result<Self, PlanError> {
        if let Some(k) = self.engine.chain.user_kernels().next() {
            if let Err(why) = machine.cuda() {
                return Err(PlanError::KernelWithoutCuda {
                    kernel: backend::cpu::needs_cuda(k),
                    why: why.to_string(),
                });
            }
        }
        let cuda_backend = self.engine.kind != BackendKind::Cpu && machine.cuda().is_ok();
        let may_be_cuda = self.engine.kind != BackendKind::Cpu
            && matches!(machine.cuda(), Ok(()) | Err(NoCuda::NotAsked));
        // Slots an input's ring can have: `--ring`, the cap beside others, else the most
        // the default ring takes (its size is settled once the input is open).
        let ring = self
            .engine
            .ring
            .or(self.engine.ring_cap)
            .unwrap_or(crate::budget::DEFAULT_RING);
        // A ring of more slots than a decoder lends would run it short of surfaces: its
        // pictures are brought down into the slots instead.
        let lends = cuda_backend && ring <= crate::budget::MAX_LENT;
        // A CPU decoder's pictures are lent from buffers of their own, which its pool adds
        // to as the ring holds them (no surfaces to run short of): page-locked where the
        // backend may be CUDA's. Where the machine was not asked (a run that needs no answer
        // doesn't wait for CUDA), the pool asks it on the decoder's thread: where CUDA
        // works, the backend is CUDA's (`backend::create`), and where it doesn't, the
        // buffers are plain memory, which the CPU backend reads.
        let pictures = match (may_be_cuda, self.engine.pageable) {
            (false, _) => Pictures::Lent,
            (true, false) => Pictures::Locked,
            (true, true) => Pictures::Copied,
        };
        let joining = &mut self.joining.base;
        for input in self.inputs.iter_mut().chain(std::iter::once(joining)) {
            input.asked.on_device = asks_nvdec(input.asked.decode) && lends;
            input.asked.pictures = pictures;
        }
        // NVDEC shares the backend's CUDA context, and a decoder opening or closing
        // synchronizes the whole context: a graph capture under way on the backend's thread
        // then fails (its frame runs without a graph) or, as seen on the H200 under a
        // thread that synchronized the context over and over, the driver crashes. No graph
        // is captured where a decoder may run beside the backend: an input's, or one that
        // joins while the run goes with the run's `--decode`.
        let joiners_decode = self.joining.open && asks_nvdec(self.joining.base.asked.decode);
        if cuda_backend
            && (joiners_decode
                || self
                    .inputs
                    .iter()
                    .any(|i| may_use_nvdec(&i.spec, i.asked.decode)))
        {
            if self.engine.graphs {
                crate::debug!("CUDA graphs off: NVDEC decoders share the backend's CUDA context");
            }
            self.engine.graphs = false;
        }
        self.joining.nvdec = Nvdec {
            lends,
            may_open: !(cuda_backend && self.engine.graphs),
        };
        Ok(self)
    }

    /// Whether the plan needs to know if CUDA works here (`Machine::gather`): a user kernel,
    /// or NVDEC's pictures that may stay on a CUDA backend's device.
    pub fn asks_cuda(&self) -> bool {
        let nvdec = self
            .inputs
            .iter()
            .chain(self.joining.open.then_some(&self.joining.base))
            .any(|i| asks_nvdec(i.asked.decode));
        self.engine.chain.user_kernels().next().is_some()
            || (nvdec && self.engine.kind != BackendKind::Cpu)
    }

    /// The inputs, in `--input` order.
    pub fn inputs(&self) -> &[InputPlan] {
        &self.inputs
    }

    /// Whether inputs may join and leave while the run goes (a wall of a list, or one the
    /// browser view's API may change).
    pub fn takes_joins(&self) -> bool {
        self.joining.open
    }

    /// The plan of `entry`, an input that joins the run while it goes (through the API, a
    /// changed inputs file or shard share): a camera of the wall, with no outputs of its
    /// own (the mosaic, the browser view, `--record` and the API see it), reopened when
    /// lost.
    pub fn input_for(&self, entry: &Entry) -> Result<InputPlan, PlanError> {
        let spec = InputSpec::parse(Some(&entry.source)).map_err(|why| PlanError::Input {
            input: Some(entry.n),
            why,
        })?;
        let own = &entry.own;
        if !own.outputs.is_empty() {
            return Err(PlanError::Events(format!(
                "'{}' names outputs of its own: a camera that joins while the run goes has none (name them in the camera file before the run starts)",
                entry.name
            )));
        }
        if (own.detect == Some(true) || own.detect_millis.is_some()) && !self.joining.detect {
            return Err(PlanError::Events(format!(
                "'{}' asks for detection, and no --detect MODEL is given",
                entry.name
            )));
        }
        let demuxed = match &spec {
            InputSpec::Video(_) => true,
            InputSpec::Stream(url) => !url.contains('!'),
            _ => false,
        };
        let record = match (&self.joining.record, own.record) {
            (_, Some(false)) => None,
            // Only what FFmpeg demuxes has packets to record (the test pattern has none).
            (Some(_), None) if !demuxed => None,
            (Some((pattern, args)), _) => {
                let name = pattern
                    .replace("{n}", &entry.n.to_string())
                    .replace("{name}", &entry.file_name());
                Some(record_of(name, (pattern, &entry.name), args, own)?)
            }
            (None, _) if own.record == Some(true) || own.retain_secs.is_some() => {
                return Err(PlanError::Events(format!(
                    "'{}' asks for recording, and no --record PATTERN names its files",
                    entry.name
                )))
            }
            (None, _) => None,
        };
        let mut base = self.joining.base.clone();
        base.asked.reconnect = true;
        base.asked.decode = self.decoder_of(entry);
        base.asked.on_device = asks_nvdec(base.asked.decode) && self.joining.nvdec.lends;
        Ok(InputPlan {
            spec,
            name: entry.name.clone(),
            label: entry.name.clone(),
            source: entry.source.clone(),
            may_join_late: true,
            record,
            own: own.clone(),
            ..base
        })
    }

    /// Who decodes `entry`, an input joining the run: its own `decode=`, else the run's
    /// `--decode`; the CPU, said in a line, where it asks NVDEC and the backend captures
    /// CUDA graphs (the run started with no input NVDEC decodes), which a decoder opening
    /// beside them would break.
    fn decoder_of(&self, entry: &Entry) -> Decode {
        let asked = entry.own.decode.unwrap_or(self.joining.base.asked.decode);
        if asks_nvdec(asked) && !self.joining.nvdec.may_open {
            crate::warn!(
                "'{}': decode={}: this run captures CUDA graphs, which an NVDEC decoder opening beside them would break (it started with no input NVDEC decodes; --no-graphs lets one join); the CPU decodes it",
                entry.name,
                if asked == Decode::Gpu { "gpu" } else { "auto" }
            );
            return Decode::Cpu;
        }
        asked
    }

    /// Whether the run has several inputs, or a list's share (a wall: its cameras may come
    /// and go, and the mosaic shows them however many there are).
    pub fn several(&self) -> bool {
        self.several
    }
    /// In a run of several inputs, the outputs without `{n}`: they record the mosaic.
    pub fn recording(&self) -> Option<&Outputs> {
        self.recording.as_ref()
    }
    /// Whether any picture of the run is shown or encoded (a window, the browser view, the
    /// RTSP server, an output): where none is, `--draw` has nothing to draw into.
    pub fn pictures_seen(&self) -> bool {
        let d = &self.display;
        d.window != Window::None
            || d.serve.is_some()
            || d.rtsp.is_some()
            || self.recording.as_ref().is_some_and(|r| !r.is_empty())
            || self.inputs.iter().any(|i| !i.outputs.is_empty())
    }
    /// What the run shows.
    pub fn display(&self) -> &Display {
        &self.display
    }
    /// What the backend is asked for.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    /// The reports the run writes.
    pub fn reports(&self) -> &Reports {
        &self.reports
    }
    /// The detector the run runs on its pictures (`--detect`), if any.
    pub fn detect(&self) -> Option<&crate::detect::Settings> {
        self.detect.as_ref()
    }
    /// The tracks, zones, lines and events the run makes of its detections, if any.
    pub fn events(&self) -> Option<&crate::events::Settings> {
        self.events.as_ref()
    }
    /// How outputs are written.
    pub fn writing(&self) -> Writing {
        self.writing
    }
    /// A headless run that is not `--quiet` shows its progress.
    pub fn progress(&self) -> bool {
        self.progress
    }
}

/// The window, the browser view and the mosaic, decided once.
fn display_of(
    args: &RunArgs,
    several: bool,
    (serve, rtsp): (Option<Serve>, Option<RtspServe>),
    recorded: bool,
) -> Display {
    let window = match (args.view.headless, several && !args.view.no_mosaic) {
        (true, _) => Window::None,
        (false, false) => Window::Each,
        (false, true) => Window::Mosaic,
    };
    Display {
        window,
        hold: !args.sources.exit_at_end,
        mosaic: several
            && !args.view.no_mosaic
            && (!args.view.headless || recorded || serve.is_some()),
        serve,
        rtsp,
        grid: args.view.grid.map(|g| (g.width, g.height)),
    }
}

/// The backend's part of the flags.
fn engine_of(args: &RunArgs, several: bool) -> Engine {
    let tracing = args.reports.trace.is_some() || args.reports.timeline.is_some();
    let (trace_frames, trace_last) = match args.reports.trace_frames {
        TraceFrames::First(n) if tracing => (n.max(1), 0),
        TraceFrames::Last(n) if tracing => (0, n.max(1)),
        _ => (0, 0),
    };
    let (chain, rate) = args.engine.filter.without_rate();
    Engine {
        kind: args.engine.backend,
        chain,
        rate,
        ring: args.engine.ring,
        ring_cap: (several && args.engine.ring.is_none()).then_some(RING_EACH),
        in_flight: args.engine.in_flight,
        bands: args.engine.bands,
        busy_bands: args.engine.busy_bands,
        pageable: args.engine.pageable,
        streams: args.engine.streams,
        graphs: !args.engine.no_graphs,
        frames: args.engine.frames,
        fps: args.sources.fps.filter(|&f| f > 0.0),
        trace_frames,
        trace_last,
        // The window's strip and the browser view's timeline draw the last frames.
        rolling: match (
            trace_last > 0,
            args.view.headless && args.view.serve.is_none(),
        ) {
            (true, _) => Rolling::Every,
            (false, false) => Rolling::Bursts,
            (false, true) => Rolling::Off,
        },
        watch: !args.engine.no_watch,
    }
}

/// Input `spec`'s part of the run: its outputs, how it is opened, what its consumers take.
fn input_plan(
    args: &RunArgs,
    display: &Display,
    several: bool,
    spec: InputSpec,
    name: String,
    outputs: Outputs,
) -> InputPlan {
    // A file is sent at its own rate, as a live source would send it, where every output
    // of the run is live (streams, HLS, the browser view).
    let live_only =
        (!outputs.streams.is_empty() || display.serve.is_some() || display.rtsp.is_some())
            && outputs.file.is_none();
    let asked = Asked {
        input_format: args.sources.input_format,
        size: args.sources.size,
        fps: args.sources.fps,
        window: !args.view.headless,
        no_pace: args.sources.no_pace,
        realtime: args.sources.realtime || live_only,
        decode: args.sources.decode,
        on_device: false,
        pictures: Pictures::Copied,
        reconnect: args.sources.reconnect || several,
        trim: trim_of(args),
        packets_only: false,
        untouched: args.engine.filter.is_identity()
            && args.view.headless
            && outputs.file == Some(OutputSpec::Stdout)
            && outputs.streams.is_empty(),
        #[cfg(feature = "opencv")]
        rotation: 0,
        #[cfg(feature = "opencv")]
        offset: 0.0,
    };
    // Frames cross the CPU and PCIe in the source's own format; the backend converts them
    // to the format every consumer takes (negotiated once, when the input is open).
    let mut takes: Vec<Vec<PixelFormat>> = Vec::new();
    if !args.view.headless {
        takes.push(display::WINDOW_TAKES.to_vec());
    }
    if let Some(out) = &outputs.file {
        takes.push(out.takes(args.outputs.output_format));
    }
    takes.extend(outputs.streams.iter().map(|s| s.takes(None)));
    if display.serve.is_some() || display.mosaic {
        // The browser view and the mosaic take BGR too.
        takes.push(display::WINDOW_TAKES.to_vec());
    }
    // A program that embeds framepipe takes every input's frames (an input joining late's
    // too: `sink::route::Embedded`).
    takes.extend(args.engine.handover.map(|f| vec![f]));
    InputPlan {
        may_join_late: several
            && outputs.is_empty()
            && (args.view.headless || !args.view.no_mosaic),
        spec,
        label: name.clone(),
        source: String::new(),
        name,
        outputs,
        asked,
        takes,
        record: None,
        copies: Vec::new(),
        own: Default::default(),
    }
}

/// What each input puts into the names of its outputs and recording: `{n}` its number in
/// the whole list (the same in every shard), `{name}` its name made safe for a file name,
/// `{shard}` this process's shard (0 without one).
#[derive(Clone, Debug)]
struct Marks(Vec<(usize, String)>, usize);

impl Marks {
    /// The marks of a run of `count` inputs, `mine` of `roster` (none listed: the default
    /// input, number 0, named `default`).
    fn of(mine: &[Entry], roster: &Roster, count: usize) -> Self {
        let each = (0..count)
            .map(|i| match mine.get(i) {
                Some(e) => (e.n, e.file_name()),
                None => (i, "default".to_string()),
            })
            .collect();
        Self(each, roster.shard.map_or(0, |s| s.k))
    }

    /// `template` with input `i`'s marks put in.
    fn fill(&self, template: &str, i: usize) -> String {
        let (n, name) = &self.0[i];
        self.shared(template)
            .replace("{n}", &n.to_string())
            .replace("{name}", name)
    }

    /// `template` with the marks every input shares put in (`{shard}`); a word joiner
    /// copied from `--help` (which writes `{n}` with one) taken out.
    fn shared(&self, template: &str) -> String {
        template
            .replace('\u{2060}', "")
            .replace("{shard}", &self.1.to_string())
    }

    /// Whether `template` names each input's own file (`{n}` or `{name}`).
    fn own(template: &str) -> bool {
        let template = template.replace('\u{2060}', "");
        template.contains("{n}") || template.contains("{name}")
    }
}

/// Each input's `--record` (its marks put in), checked: only what FFmpeg demuxes has packets
/// to record, and several inputs need `{n}` or `{name}` to keep their recordings apart.
fn records_of(
    args: &RunArgs,
    specs: &[(InputSpec, String)],
    marks: &Marks,
    (labels, owns): (&[String], &[super::shard::PerInput]),
) -> Result<Vec<Option<Record>>, PlanError> {
    let Some(name) = &args.recording.record else {
        return Ok(specs.iter().map(|_| None).collect());
    };
    if specs.len() > 1 && !Marks::own(name) {
        return Err(PlanError::RecordsShareName {
            name: name.clone(),
            inputs: specs.len(),
        });
    }
    if args.sources.decode == Decode::Opencv {
        return Err(PlanError::RecordWithoutDemuxer(name.clone()));
    }
    let mut records = Vec::with_capacity(specs.len());
    for (n, (spec, text)) in specs.iter().enumerate() {
        if owns[n].record == Some(false) {
            records.push(None);
            continue;
        }
        let demuxed = match spec {
            InputSpec::Video(_) => true,
            InputSpec::Stream(url) => !url.contains('!'),
            _ => false,
        };
        if !demuxed {
            let what = if text.is_empty() {
                "the default input"
            } else {
                text
            };
            return Err(PlanError::RecordNoPackets {
                name: name.clone(),
                n,
                what: what.to_string(),
            });
        }
        let root = marks.shared(name);
        records.push(Some(record_of(
            marks.fill(name, n),
            (&root, &labels[n]),
            &args.recording,
            &owns[n],
        )?));
    }
    Ok(records)
}

/// One input's recording, its `name` checked: the recordings' root is that of the
/// `--record` name every input shares (`pattern`), the input listed as `label`.
#[cfg(feature = "ffmpeg")]
fn record_of(
    name: String,
    (pattern, label): (&str, &str),
    args: &crate::cli::RecordArgs,
    own: &super::shard::PerInput,
) -> Result<Record, PlanError> {
    let segment = own.segment().or(args.segment);
    let root = crate::record::index::root_of(pattern);
    crate::record::check(&name, &root, segment)?;
    Ok(Record {
        name,
        segment,
        input: label.to_string(),
        root,
        keep: crate::record::archive::Keep {
            age: own.retain().or(args.retain),
            size: args.retain_size,
            free: args.retain_free,
        },
    })
}

#[cfg(not(feature = "ffmpeg"))]
fn record_of(
    name: String,
    _: (&str, &str),
    _: &crate::cli::RecordArgs,
    _: &super::shard::PerInput,
) -> Result<Record, PlanError> {
    Err(PlanError::RecordWithoutFfmpeg(name))
}

/// How the run's outputs are written, as the flags ask.
fn writing_of(args: &RunArgs) -> Writing {
    Writing {
        overwrite: Overwrite::from_flags(args.outputs.overwrite, args.outputs.no_overwrite),
        fragmented: args.outputs.fragmented,
        no_audio: args.outputs.no_audio,
        output_format: args.outputs.output_format,
    }
}

/// The encoder flags as asked.
fn encoding_of(args: &RunArgs) -> output::Encoding {
    output::Encoding {
        crf: args.encode.crf,
        bitrate: args.encode.bitrate,
        maxrate: args.encode.maxrate,
        bufsize: args.encode.bufsize,
        preset: args.encode.preset.clone(),
        tune: args.encode.tune.clone(),
        gop: args.encode.gop,
        pix_fmt: args.encode.pix_fmt,
        opts: args.encode.codec_opt.clone(),
    }
}

/// The `--output`s `named`, parsed with the codec, quality and encoder flags: the one
/// file, image sequence or standard output, and the streams (network outputs, HLS).
fn outputs_of(args: &RunArgs, named: Vec<String>) -> Result<Outputs, PlanError> {
    let mut local: Option<(OutputSpec, &str)> = None;
    let mut streams = Vec::new();
    for (k, o) in named.iter().enumerate() {
        let spec = OutputSpec::parse(o)
            .and_then(|spec| spec.with_codec(args.encode.codec.and_then(CodecArg::encoder)))
            .and_then(|spec| spec.with_quality(args.encode.quality))
            .and_then(|spec| spec.with_encoding(encoding_of(args)))
            .map_err(PlanError::Output)?;
        if named[..k].contains(o) {
            return Err(PlanError::OutputTwice(o.clone()));
        }
        if spec.is_stream() {
            streams.push(spec);
        } else if let Some((_, first)) = &local {
            return Err(PlanError::SecondFile {
                output: o.clone(),
                first: first.to_string(),
            });
        } else {
            local = Some((spec, o));
        }
    }
    let file = local.map(|(spec, _)| spec);
    Ok(Outputs {
        file,
        streams,
        named,
    })
}

/// What the run reports beside its frames (`--trace`, `--timeline`, `--summary-json`).
fn reports_of(args: RunArgs) -> Reports {
    Reports {
        trace: args.reports.trace,
        timeline: args.reports.timeline,
        summary_json: args.reports.summary_json,
    }
}

/// Each input's outputs and the mosaic's recording.
struct Parts {
    each: Vec<Outputs>,
    recording: Option<Outputs>,
}

/// The outputs of a run of the inputs `marks` name, checked: with one (and no list), every
/// `--output` is the input's; with `several`, those with `{n}` or `{name}` are each input's (its marks put
/// in) and those without record the mosaic, each set checked as a run of one input checks
/// its outputs.
fn outputs_of_parts(
    args: &RunArgs,
    marks: &Marks,
    owns: &[super::shard::PerInput],
    several: bool,
) -> Result<Parts, PlanError> {
    // Each input's own outputs (a camera file's `outputs`), its marks put in.
    let theirs = |i: usize| owns[i].outputs.iter().map(move |o| marks.fill(o, i));
    if !several {
        let named = args.outputs.output.iter().map(|o| marks.fill(o, 0));
        return Ok(Parts {
            each: vec![outputs_of(args, named.chain(theirs(0)).collect())?],
            recording: None,
        });
    }
    let (own, mosaic): (Vec<String>, Vec<String>) = args
        .outputs
        .output
        .iter()
        .cloned()
        .partition(|o| Marks::own(o));
    let each = (0..marks.0.len())
        .map(|i| {
            let named = own.iter().map(|o| marks.fill(o, i)).chain(theirs(i));
            outputs_of(args, named.collect())
        })
        .collect::<Result<_, _>>()?;
    let recording = match mosaic.is_empty() {
        true => None,
        false => Some(outputs_of(
            args,
            mosaic.iter().map(|o| marks.shared(o)).collect(),
        )?),
    };
    Ok(Parts { each, recording })
}

/// Every `--input`, classified; with several, what a run of several inputs can't do is
/// refused here (one standard input; the browser view and the mosaic's outputs
/// need the mosaic).
fn check_inputs(args: &RunArgs) -> Result<Vec<(InputSpec, String)>, PlanError> {
    if args.sources.input.is_empty() {
        return Ok(vec![(InputSpec::Default, String::new())]);
    }
    let mut inputs = Vec::with_capacity(args.sources.input.len());
    for (n, text) in args.sources.input.iter().enumerate() {
        let spec = InputSpec::parse(Some(text)).map_err(|why| PlanError::Input {
            input: (args.sources.input.len() > 1).then_some(n),
            why,
        })?;
        inputs.push((spec, text.clone()));
    }
    if inputs.len() > 1 {
        check_several(args, &inputs)?;
    }
    Ok(inputs)
}

/// What a run of several `inputs` refuses.
fn check_several(args: &RunArgs, inputs: &[(InputSpec, String)]) -> Result<(), PlanError> {
    let n = inputs.len();
    if n > pipeline::MAX_INPUTS {
        return Err(PlanError::TooManyInputs {
            n,
            max: pipeline::MAX_INPUTS,
        });
    }
    if inputs
        .iter()
        .filter(|(i, _)| *i == InputSpec::Stdin)
        .count()
        > 1
    {
        return Err(PlanError::StdinTwice);
    }
    if args.view.serve.is_some() && args.view.no_mosaic {
        return Err(PlanError::ServeWithoutMosaic(n));
    }
    if let Some(grid) = args.view.grid {
        if grid.width * grid.height < n {
            return Err(PlanError::GridTooSmall {
                cols: grid.width,
                rows: grid.height,
                n,
            });
        }
    }
    if let Some(o) = args.outputs.output.iter().find(|o| !Marks::own(o)) {
        let output = o.clone();
        if args.view.no_mosaic {
            return Err(PlanError::RecordingWithoutMosaic { output, n });
        }
    }
    Ok(())
}

/// `--ring`, `--in-flight`, `--fps`, `--frames`, `--busy-bands`.
fn check_counts(args: &RunArgs) -> Result<(), PlanError> {
    if let Some(ring) = args.engine.ring.filter(|&n| n < 2) {
        return Err(PlanError::RingTooSmall(ring));
    }
    if args.engine.in_flight == Some(0) {
        return Err(PlanError::NoneInFlight);
    }
    if let Some(fps) = args.sources.fps.filter(|f| !f.is_finite() || *f < 0.0) {
        return Err(PlanError::FpsNotARate(fps));
    }
    if let Some(fps) = args
        .sources
        .fps
        .filter(|&f| f != 0.0 && !(MIN_FPS..=MAX_FPS).contains(&f))
    {
        return Err(PlanError::FpsOutOfRange {
            fps,
            min: MIN_FPS,
            max: MAX_FPS,
        });
    }
    if args.engine.frames == Some(0) {
        return Err(PlanError::NoFrames);
    }
    if args.engine.busy_bands == 0 {
        return Err(PlanError::NoBusyBands);
    }
    if let (Some(to), ss) = (args.trim.to, args.trim.ss.unwrap_or(0.0)) {
        if to <= ss {
            return Err(PlanError::ToNotAfterSs { to, ss });
        }
    }
    if args.trim.duration == Some(0.0) {
        return Err(PlanError::NoDuration);
    }
    Ok(())
}

/// The part of each input that is read: `--ss` on, until `--to` or for `-t`.
fn trim_of(args: &RunArgs) -> crate::source::Trim {
    let start = args.trim.ss.unwrap_or(0.0);
    crate::source::Trim {
        start,
        end: args.trim.to.or(args.trim.duration.map(|t| start + t)),
    }
}

/// A user kernel runs on CUDA only: refused with `--backend cpu` before the input is
/// classified (whether CUDA is here is the machine's fact: `RunPlan::fit`).
fn check_kernels(args: &RunArgs) -> Result<(), PlanError> {
    match args.engine.filter.user_kernels().next() {
        Some(k) if args.engine.backend == BackendKind::Cpu => {
            Err(PlanError::KernelOnCpu(backend::cpu::needs_cuda(k)))
        }
        _ => Ok(()),
    }
}

/// A chain that changes the frames' size takes one input (this version: the mosaic's tiles
/// take frames of their input's size).
fn check_geometry(args: &RunArgs, several: bool) -> Result<(), PlanError> {
    if !args.engine.filter.changes_size() || !several {
        return Ok(());
    }
    Err(PlanError::GeometryOfSeveral(args.engine.filter.to_string()))
}

/// `--trace-frames`, and the names of `--trace`, `--timeline` and `--summary-json`.
fn check_reports(args: &RunArgs) -> Result<(), PlanError> {
    if args.reports.trace_frames.count() > crate::trace::MAX_TRACE_FRAMES {
        return Err(PlanError::TooManyTraceFrames {
            asked: args.reports.trace_frames.to_string(),
            max: crate::trace::MAX_TRACE_FRAMES,
        });
    }
    for (flag, path, ext) in [
        ("--trace", &args.reports.trace, "json"),
        ("--timeline", &args.reports.timeline, "svg"),
        ("--summary-json", &args.reports.summary_json, "json"),
    ] {
        if let Some(p) = path {
            paths::check_file_arg(flag, p, ext).map_err(PlanError::ReportFile)?;
        }
    }
    Ok(())
}

/// `--serve` and the flags that apply to it: the browser view's settings, where asked for
/// (a run with no input of its own to run serves them too: `app::idle`).
pub fn check_serve(args: &RunArgs) -> Result<Option<Serve>, PlanError> {
    let token_flags = args.view.serve_token.is_some()
        || args.view.serve_token_file.is_some()
        || args.view.serve_insecure;
    let alone = (token_flags && args.view.rtsp_serve.is_none())
        || !args.view.serve_host.is_empty()
        || !args.view.ice_server.is_empty();
    if alone && args.view.serve.is_none() {
        return Err(PlanError::ServeFlagsAlone);
    }
    let Some(serve) = &args.view.serve else {
        return Ok(None);
    };
    serve_settings(args, serve).map(Some)
}

#[cfg(feature = "ffmpeg")]
fn serve_settings(args: &RunArgs, serve: &str) -> Result<Serve, PlanError> {
    let token = display::web::TokenFrom {
        flag: args.view.serve_token.clone(),
        file: args.view.serve_token_file.clone(),
        env: std::env::var(display::web::access::TOKEN_VARIABLE).ok(),
    };
    let mut settings = display::web::Settings::new(
        serve,
        &token,
        &args.view.serve_host,
        args.view.serve_insecure,
    )
    .map_err(PlanError::Serve)?;
    settings.health_budget = args.view.health_budget;
    settings.listening_sources = args.view.serve_listening_sources;
    settings.ice_servers = args
        .view
        .ice_server
        .iter()
        .map(|u| display::web::access::IceServer::parse(u))
        .collect::<Result<_, _>>()
        .map_err(PlanError::Serve)?;
    Ok(settings)
}

#[cfg(not(feature = "ffmpeg"))]
fn serve_settings(_: &RunArgs, _: &str) -> Result<Serve, PlanError> {
    Err(PlanError::ServeNotBuilt)
}

/// What each input is called where it is shown: an inputs file's name, or one derived
/// from its source (`names`).
fn labels_of(roster: &Roster, mine: &[Entry], specs: &[(InputSpec, String)]) -> Vec<String> {
    let given: Vec<Option<String>> = (0..specs.len())
        .map(|i| {
            roster
                .listed()
                .then(|| mine.get(i).map(|e| e.name.clone()))
                .flatten()
        })
        .collect();
    let sources: Vec<(&InputSpec, &str)> = specs.iter().map(|(s, t)| (s, t.as_str())).collect();
    super::names::shown(&sources, &given)
}

/// Whether `copies` are streams and nothing else (none: false).
/// Whether nothing but `copies` to files takes input `input`'s video (`--codec copy`, as
/// `ffmpeg -c copy`): no frame output, window, view, RTSP, detector, motion or program, no
/// `--frames` count and no pacing; its packets are then read and copied, its pictures not
/// decoded.
fn packets_alone(
    args: &RunArgs,
    display: &Display,
    input: &InputPlan,
    copies: &[OutputSpec],
) -> bool {
    let files = !copies.is_empty()
        && copies
            .iter()
            .all(|c| matches!(c, OutputSpec::Video { container, .. } if !container.is_stream()));
    files
        && input.outputs.is_empty()
        && args.view.headless
        && display.serve.is_none()
        && display.rtsp.is_none()
        && !display.mosaic
        && args.detect.detect.is_none()
        && !args.events.motion
        && args.engine.handover.is_none()
        && args.engine.frames.is_none()
        && !input.asked.realtime
}

fn streams_alone(copies: &[OutputSpec]) -> bool {
    !copies.is_empty()
        && copies
            .iter()
            .all(|c| matches!(c, OutputSpec::Video { container, .. } if container.is_stream()))
}

/// `--codec copy`: each input's outputs taken out of its frame outputs as copies of its
/// packets (`copy`); none otherwise.
fn copies_of(
    args: &RunArgs,
    specs: &[(InputSpec, String)],
    each: &mut [Outputs],
    mosaic: Option<&Outputs>,
) -> Result<Vec<Vec<OutputSpec>>, PlanError> {
    if !super::copy::asked(args) {
        return Ok(vec![Vec::new(); each.len()]);
    }
    let taken = each
        .iter_mut()
        .map(|o| {
            let o = std::mem::take(o);
            o.file.into_iter().chain(o.streams).collect()
        })
        .collect();
    let mosaic = mosaic.and_then(|r| r.named.first()).map(String::as_str);
    Ok(super::copy::copies_of(args, specs, taken, mosaic)?)
}

/// `--detect` and its companions: a model file that is there, flags that need it, a
/// `--detections` file that may be written.
fn check_detect(args: &RunArgs) -> Result<Option<crate::detect::Settings>, PlanError> {
    let d = &args.detect;
    let Some(model) = &d.detect else {
        let companions = d.detect_score.is_some()
            || d.detect_fps.is_some()
            || d.detections.is_some()
            || d.detect_labels.is_some()
            || d.detect_nms.is_some()
            || d.detect_size.is_some();
        if companions {
            return Err(PlanError::DetectFlagsAlone);
        }
        return Ok(None);
    };
    if !model.is_file() {
        return Err(PlanError::NoModel(model.clone()));
    }
    if let Some(labels) = &d.detect_labels {
        if !labels.is_file() {
            return Err(PlanError::NoLabels(labels.clone()));
        }
    }
    if let Some(out) = &d.detections {
        let text = out.to_string_lossy();
        paths::check_folder("--detections", &text).map_err(PlanError::ReportFile)?;
        if out.exists() && !args.outputs.overwrite {
            return Err(PlanError::DetectionsExist(out.clone()));
        }
    }
    Ok(Some(crate::detect::Settings {
        model: model.clone(),
        score: d.detect_score,
        fps: d.detect_fps,
        jsonl: d.detections.clone(),
        labels: d.detect_labels.clone(),
        nms: d.detect_nms,
        size: d.detect_size,
        draw: d.draw,
        provider: d.detect_provider,
    }))
}

/// The inputs file's own settings: `detect=on` and `detect-fps` need `--detect`.
fn check_own(args: &RunArgs, mine: &[super::shard::Entry]) -> Result<(), PlanError> {
    let asks = mine
        .iter()
        .find(|e| e.own.detect == Some(true) || e.own.detect_millis.is_some());
    if let (Some(e), None) = (asks, &args.detect.detect) {
        return Err(PlanError::Events(format!(
            "--inputs: '{}' asks for detection, and no --detect MODEL is given",
            e.name
        )));
    }
    let records = mine.iter().find(|e| {
        e.own.record == Some(true) || e.own.segment_millis.is_some() || e.own.retain_secs.is_some()
    });
    match (records, &args.recording.record) {
        (Some(e), None) => Err(PlanError::Events(format!(
            "--inputs: '{}' asks for recording (record, segment or retain), and no --record PATTERN names its files",
            e.name
        ))),
        _ => Ok(()),
    }
}

/// `--zone`, `--line`, `--events` and their companions: definitions that read, inputs that
/// are there (`names`: the inputs' labels), a detector to see with, files that may be
/// written.
fn check_events(
    args: &RunArgs,
    names: &[String],
) -> Result<Option<crate::events::Settings>, PlanError> {
    use crate::events::{out::Destination, zones::Shape};
    let e = &args.events;
    let zones = e.zone.iter().map(|z| Shape::parse(z, false));
    let lines = e.line.iter().map(|l| Shape::parse(l, true));
    let shapes: Vec<Shape> = zones.chain(lines).collect::<Result<_, _>>()?;
    for s in &shapes {
        s.check_input(names)?;
    }
    let to: Vec<Destination> = e
        .events
        .iter()
        .map(|t| Destination::parse(t).map_err(PlanError::from))
        .collect::<Result<_, _>>()?;
    let clip = match &e.clip {
        Some(pattern) => Some((
            pattern.clone(),
            e.pre.unwrap_or(5.0),
            e.post.unwrap_or(10.0),
        )),
        None if e.pre.is_some() || e.post.is_some() => {
            return Err(PlanError::Events(
                "--pre and --post apply to --clip, and it is not given".into(),
            ))
        }
        None => None,
    };
    if let Some((pattern, ..)) = &clip {
        check_clip(pattern, &shapes, e.motion)?;
    }
    let settings = crate::events::Settings {
        shapes,
        to,
        labels: e.event_labels.clone(),
        stay: e.stay,
        clip,
        motion: e.motion,
    };
    if !settings.any() {
        if !e.event_labels.is_empty() || e.stay.is_some() {
            return Err(PlanError::Events(
                "--event-labels and --stay apply to --zone and --line, and none is given".into(),
            ));
        }
        return Ok(None);
    }
    if args.detect.detect.is_none() && !settings.shapes.is_empty() {
        return Err(PlanError::Events(
            "--zone and --line follow what --detect finds, and it is not given".into(),
        ));
    }
    for d in &settings.to {
        if let Destination::File(f) = d {
            paths::check_folder("--events", &f.to_string_lossy()).map_err(PlanError::ReportFile)?;
            if f.exists() && !args.outputs.overwrite {
                return Err(PlanError::Events(format!(
                    "--events '{}' exists (-y replaces it)",
                    f.display()
                )));
            }
        }
    }
    Ok(Some(settings))
}

/// `--clip PATTERN`: a container clips can be written in, zones, lines or motion to make
/// events, and a build with FFmpeg's libraries.
fn check_clip(
    pattern: &str,
    shapes: &[crate::events::zones::Shape],
    motion: bool,
) -> Result<(), PlanError> {
    if shapes.is_empty() && !motion {
        return Err(PlanError::Events(
            "--clip writes the clips of events, and no --zone, --line or --motion makes any".into(),
        ));
    }
    #[cfg(feature = "ffmpeg")]
    {
        if crate::record::muxer_of(pattern).is_none() {
            return Err(PlanError::Events(format!(
                "--clip '{pattern}': a clip is .mp4, .mov, .mkv or .ts"
            )));
        }
        crate::record::clip::check_folder(pattern)
            .map_err(|why| PlanError::Events(format!("--clip '{pattern}': {why}")))
    }
    #[cfg(not(feature = "ffmpeg"))]
    Err(PlanError::Events(format!(
        "--clip '{pattern}': this build has no FFmpeg libraries to write clips with"
    )))
}

/// `--rtsp-serve`'s address and token: beyond loopback, a token or `--serve-insecure`.
fn check_rtsp(args: &RunArgs) -> Result<Option<RtspServe>, PlanError> {
    match &args.view.rtsp_serve {
        Some(given) => rtsp_settings(args, given).map(Some),
        None => Ok(None),
    }
}

#[cfg(not(feature = "ffmpeg"))]
fn rtsp_settings(_: &RunArgs, _: &str) -> Result<RtspServe, PlanError> {
    Err(PlanError::RtspNotBuilt)
}

#[cfg(feature = "ffmpeg")]
fn rtsp_settings(args: &RunArgs, given: &str) -> Result<RtspServe, PlanError> {
    let addr = display::web::access::bind_address(given).map_err(PlanError::Serve)?;
    let token = display::web::TokenFrom {
        flag: args.view.serve_token.clone(),
        file: args.view.serve_token_file.clone(),
        env: std::env::var(display::web::access::TOKEN_VARIABLE).ok(),
    }
    .read()
    .map_err(PlanError::Serve)?;
    if token.is_none() && !addr.ip().is_loopback() && !args.view.serve_insecure {
        return Err(PlanError::RtspOpenWithoutToken(addr));
    }
    Ok(RtspServe {
        addr,
        token,
        published: None,
        publish_key: crate::rtsp::new_publish_key(),
    })
}

/// With `--rtsp-serve`, the mosaic of several inputs (or the processed picture of one whose
/// filter changes it) is encoded once by a stream output publishing it to the server from
/// loopback (`rtsp::`'s `/mosaic`, `/picture`); copies (`--codec copy`) publish nothing.
fn publish_to_rtsp(
    args: &RunArgs,
    rtsp: Option<&mut RtspServe>,
    (each, several): (&mut [Outputs], bool),
    recording: &mut Option<Outputs>,
) -> Result<(), PlanError> {
    let Some(rtsp) = rtsp else { return Ok(()) };
    if args.encode.codec == Some(CodecArg::Copy)
        || (several && args.view.no_mosaic)
        || (!several && args.engine.filter.is_identity())
    {
        return Ok(());
    }
    let name = if several { "mosaic" } else { "picture" };
    let ip = match rtsp.addr.ip() {
        ip if ip.is_unspecified() && ip.is_ipv6() => {
            std::net::IpAddr::from([0u16, 0, 0, 0, 0, 0, 0, 1])
        }
        ip if ip.is_unspecified() => std::net::IpAddr::from([127, 0, 0, 1]),
        ip => ip,
    };
    let at = std::net::SocketAddr::new(ip, rtsp.addr.port());
    // The run's secret (hex) goes first; the token, where there is one, after it.
    let mut query = format!("?publish_key={}", rtsp.publish_key);
    if let Some(t) = &rtsp.token {
        let encoded: String = t
            .bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    char::from(b).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect();
        query.push_str(&format!("&token={encoded}"));
    }
    let url = format!("rtsp://{at}/{name}{query}");
    let spec = OutputSpec::parse(&url)
        .and_then(|spec| spec.with_codec(args.encode.codec.and_then(CodecArg::encoder)))
        .and_then(|spec| spec.with_encoding(encoding_of(args)))
        .map_err(PlanError::Output)?;
    let outputs = match several {
        true => recording.get_or_insert_with(Outputs::default),
        false => &mut each[0],
    };
    outputs.streams.push(spec);
    rtsp.published = Some(name);
    Ok(())
}

/// The encoder flags and `--output-format` need an output they apply to (`first`: the
/// first input's outputs, which every input's mirror; `recording`: the mosaic's).
fn check_encoding(
    args: &RunArgs,
    first: &Outputs,
    recording: Option<&Outputs>,
) -> Result<(), PlanError> {
    let videos = !first.is_empty() || recording.is_some_and(|r| !r.is_empty());
    if (args.encode.codec.is_some() || args.encode.quality.is_some()) && !videos {
        return Err(PlanError::CodecWithoutVideo);
    }
    if !encoding_of(args).is_default() && !videos {
        return Err(PlanError::EncodingWithoutVideo);
    }
    if let Some(f) = args.outputs.output_format {
        let file = first
            .file
            .as_ref()
            .or(recording.and_then(|r| r.file.as_ref()));
        if file != Some(&OutputSpec::Stdout) {
            return Err(PlanError::OutputFormatWithoutStdout(f));
        }
        if !f.writable() {
            return Err(PlanError::OutputFormatNotWritten(f));
        }
    }
    Ok(())
}

/// Whether an input of `spec`, decoded as `decode` says, may be decoded by NVDEC (a file or
/// a network stream through FFmpeg, with `--decode gpu` or `auto`).
fn may_use_nvdec(spec: &InputSpec, decode: Decode) -> bool {
    matches!(spec, InputSpec::Video(_) | InputSpec::Stream(_)) && asks_nvdec(decode)
}

/// Whether `decode` asks for NVDEC where it can (`gpu`, `auto`).
fn asks_nvdec(decode: Decode) -> bool {
    matches!(decode, Decode::Gpu | Decode::Auto)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The plan of a wall of `list` (an inputs file's text) with the CUDA backend and
    /// `--decode decode`, fitted to a machine where CUDA works.
    fn wall(list: &str, decode: &str) -> RunPlan {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("cams.txt");
        std::fs::write(&file, list).unwrap();
        let file = file.display().to_string();
        let line = [
            "framepipe",
            "--headless",
            "--backend",
            "cuda",
            "--decode",
            decode,
        ];
        let cli = crate::cli::Cli::try_parse_from(line.into_iter().chain(["--inputs", &file]));
        let args = cli.unwrap().run;
        let env = super::super::shard::Environment::default();
        let roster = Roster::gather(&[], Some(&file), None, &env).unwrap();
        let plan = RunPlan::from_args(args, &roster).unwrap();
        plan.fit(&Machine::with_cuda(16)).unwrap()
    }

    /// A camera joining the run, with its own `settings` (`KEY=VALUE, …`).
    fn joining(name: &str, settings: &str) -> Entry {
        Entry {
            name: name.into(),
            source: format!("rtsp://127.0.0.1:1/{name}"),
            n: 9,
            own: super::super::shard::PerInput::parse(settings).unwrap(),
        }
    }

    #[test]
    fn an_input_s_own_decode_is_its_decoder_from_the_start_or_joining() {
        let plan = wall(
            "a = rtsp://127.0.0.1:1/a\nb [decode=cpu] = rtsp://127.0.0.1:1/b\n",
            "gpu",
        );
        let asked: Vec<_> = plan
            .inputs()
            .iter()
            .map(|i| (i.asked.decode, i.asked.on_device))
            .collect();
        assert_eq!(asked, [(Decode::Gpu, true), (Decode::Cpu, false)]);
        assert!(!plan.engine.graphs, "NVDEC beside the backend: no graphs");
        let c = plan.input_for(&joining("c", "decode=cpu")).unwrap();
        assert_eq!((c.asked.decode, c.asked.on_device), (Decode::Cpu, false));
        let d = plan.input_for(&joining("d", "")).unwrap();
        assert_eq!((d.asked.decode, d.asked.on_device), (Decode::Gpu, true));
    }

    /// Cameras join a running wall only where FFmpeg's libraries are (`Joining::open`).
    #[cfg(feature = "ffmpeg")]
    #[test]
    fn cameras_that_may_join_with_nvdec_keep_graphs_off_else_the_cpu_decodes_them() {
        // The run's --decode gpu: a camera joining later is NVDEC's, though none is yet.
        let plan = wall("a [decode=cpu] = rtsp://127.0.0.1:1/a\n", "gpu");
        assert!(!plan.engine.graphs);
        let b = plan.input_for(&joining("b", "")).unwrap();
        assert_eq!((b.asked.decode, b.asked.on_device), (Decode::Gpu, true));
        // The run's --decode cpu, none on NVDEC: graphs are captured, and a camera asking
        // NVDEC as it joins is decoded by the CPU (said in a line) rather than break them.
        let plan = wall("a = rtsp://127.0.0.1:1/a\n", "cpu");
        assert!(plan.engine.graphs);
        let b = plan.input_for(&joining("b", "decode=gpu")).unwrap();
        assert_eq!((b.asked.decode, b.asked.on_device), (Decode::Cpu, false));
    }

    #[test]
    fn only_files_and_streams_decoded_by_gpu_or_auto_may_use_nvdec() {
        let file = InputSpec::Video("a.mp4".into());
        let stream = InputSpec::Stream("udp://127.0.0.1:5000".into());
        assert!(may_use_nvdec(&file, Decode::Gpu));
        assert!(may_use_nvdec(&stream, Decode::Auto));
        assert!(!may_use_nvdec(&file, Decode::Cpu));
        assert!(!may_use_nvdec(
            &InputSpec::Pattern(Default::default()),
            Decode::Auto
        ));
        assert!(!may_use_nvdec(&InputSpec::Stdin, Decode::Gpu));
    }
}
