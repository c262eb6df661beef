//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod composed;
pub mod mixed;
pub mod probe;
pub mod run;
pub mod x;

use framepipe::backend::{self, BackendKind};
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pixel::Formats;
use framepipe::plan::{Counts, Plan};
use framepipe::sink::{Flow, Sink};
use framepipe::source::pattern::{self, Pattern};
use framepipe::stop::Stop;

/// Whether CUDA is here; where it is not, says the test is skipped and why.
pub fn cuda_or_skip(test: &str) -> bool {
    match backend::device::probe() {
        Ok(()) => true,
        Err(why) => {
            println!("SKIPPED {test}: no CUDA here ({why})");
            false
        }
    }
}

/// A sink that checks every frame against the reference chain applied to the pattern.
pub struct CheckSink {
    pub chain: Chain,
    pub size: FrameSize,
    pub formats: Formats,
    pub seen: u64,
    pub bad_frames: u64,
    pub max_diff: u8,
    /// Frames lent (`BackendConfig::lend`, on the device or in host memory): every one is kept until the run
    /// ends, with the bytes read the first time, and read again then (a buffer written
    /// again while lent would differ).
    pub lent: Vec<(framepipe::desc::Memory, Vec<u8>)>,
}

/// The reference output of pattern frame `seq` through `chain`, computed once per process.
pub fn reference(chain: &Chain, size: FrameSize, seq: u64) -> std::sync::Arc<Vec<u8>> {
    reference_in(chain, size, Formats::BGR, seq)
}

/// `reference` between `formats`: pattern frame `seq` drawn in the input format, through
/// `chain` as `pixel::apply_reference` defines it.
pub fn reference_in(
    chain: &Chain,
    size: FrameSize,
    formats: Formats,
    seq: u64,
) -> std::sync::Arc<Vec<u8>> {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    type Key = (String, FrameSize, String, u64);
    static CACHE: Mutex<Option<HashMap<Key, Arc<Vec<u8>>>>> = Mutex::new(None);
    let key = (chain.to_string(), size, format!("{formats:?}"), seq);
    if let Some(hit) = CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .get(&key)
    {
        return hit.clone();
    }
    let mut input = vec![0; formats.input.bytes(size)];
    pattern::draw_in(formats.input, size, seq, &mut input);
    let out = chain.output_size(size).unwrap_or(size);
    let mut want = vec![0; formats.output.bytes(out)];
    framepipe::pixel::apply_reference(chain, size, formats, &input, &mut want);
    let want = Arc::new(want);
    CACHE
        .lock()
        .unwrap()
        .get_or_insert_with(HashMap::new)
        .insert(key, want.clone());
    want
}

impl CheckSink {
    pub fn new(chain: Chain, size: FrameSize) -> Self {
        Self::in_formats(chain, size, Formats::BGR)
    }

    /// Checks frames that went through the pipeline between `formats`.
    pub fn in_formats(chain: Chain, size: FrameSize, formats: Formats) -> Self {
        Self {
            chain,
            size,
            formats,
            seen: 0,
            bad_frames: 0,
            max_diff: 0,
            lent: Vec::new(),
        }
    }

    /// Frames lent and kept that changed since they were first read.
    pub fn lent_changed(&self) -> usize {
        self.lent
            .iter()
            .filter(|(memory, first)| read_lent(memory, first.len()) != *first)
            .count()
    }
}

/// `len` bytes of a frame lent on the device, or by the CPU backend in host memory.
fn read_lent(memory: &framepipe::desc::Memory, len: usize) -> Vec<u8> {
    let (device, ptr) = match memory {
        framepipe::desc::Memory::Device { device, ptr, .. } => (device, ptr),
        framepipe::desc::Memory::HostLent { lease, .. } => {
            let lent = lease.host_bytes().expect("a frame the CPU backend lent");
            return lent[..len].to_vec();
        }
        framepipe::desc::Memory::Host => panic!("not lent"),
    };
    let mut bytes = vec![0; len];
    framepipe::backend::lend::read_back(*device, *ptr, &mut bytes).unwrap();
    bytes
}

impl Sink for CheckSink {
    fn verb(&self) -> &'static str {
        "checked"
    }
    fn describe(&self) -> String {
        "check against the reference".into()
    }
    fn consume(&mut self, frame: &framepipe::desc::Frame) -> anyhow::Result<Flow> {
        // The descriptor says which frame this is and what it holds.
        assert_eq!(frame.desc.index, self.seen, "frames arrive in order");
        assert_eq!(frame.format(), self.formats.output);
        // A text that shows the frame's facts is the reference bound to them (no clock).
        let facts = framepipe::filter::text::Facts {
            pts: frame.desc.seconds(),
            input: usize::from(frame.desc.input.0),
            frame: frame.desc.index,
            ..framepipe::filter::text::Facts::none()
        };
        let made = self.chain.output_size(self.size).unwrap_or(self.size);
        let read;
        let (frame, size) = match &frame.desc.memory {
            framepipe::desc::Memory::Host => (frame.bytes, frame.size()),
            memory => {
                read = read_lent(memory, self.formats.output.bytes(made));
                self.lent.push((memory.clone(), read.clone()));
                (&read[..], frame.size())
            }
        };
        assert_eq!(size, made, "the chain's output size");
        let want = reference_in(
            &self.chain.bound(&facts),
            self.size,
            self.formats,
            self.seen,
        );
        assert_eq!(frame.len(), want.len(), "a frame in {}", self.formats);
        let diff = frame
            .iter()
            .zip(want.iter())
            .map(|(a, b)| a.abs_diff(*b))
            .max()
            .unwrap_or(0);
        if diff > 0 {
            self.bad_frames += 1;
        }
        self.max_diff = self.max_diff.max(diff);
        self.seen += 1;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// One run of the real pipeline on the test pattern, checked frame by frame.
pub struct Case<'a> {
    pub kind: BackendKind,
    pub chain: &'a str,
    pub size: FrameSize,
    pub bands: usize,
    /// Bands of frames submitted behind others.
    pub busy_bands: usize,
    pub in_flight: usize,
    pub pageable: bool,
    pub issue: framepipe::backend::IssueOrder,
    pub streams: framepipe::backend::StreamLayout,
    /// Replay frames that find the GPU idle as CUDA graphs.
    pub graphs: bool,
    pub frames: u64,
    /// Frames whose spans are traced.
    pub trace_frames: u64,
}

impl<'a> Case<'a> {
    /// Four frames of `chain` at `size` on the CUDA backend, page-locked, `bands` bands
    /// (the busy plan's varied with `in_flight`), per-stage streams, depth-first, graphs on.
    pub fn cuda(chain: &'a str, size: FrameSize, (bands, in_flight): (usize, usize)) -> Self {
        Self {
            kind: BackendKind::Cuda,
            chain,
            size,
            bands,
            busy_bands: [1, bands, 3][in_flight % 3],
            in_flight,
            pageable: false,
            issue: framepipe::backend::IssueOrder::Depth,
            streams: framepipe::backend::StreamLayout::PerStage,
            graphs: true,
            frames: 4,
            trace_frames: 0,
        }
    }
}

/// Runs `case`; returns (frames seen, frames that differ, largest difference).
pub fn run_case(case: &Case) -> (u64, u64, u8) {
    let (seen, bad, max, _) = run_case_traced(case);
    (seen, bad, max)
}

/// `run_case`, also returning the trace when `case.trace_frames > 0`.
pub fn run_case_traced(case: &Case) -> (u64, u64, u8, Option<framepipe::trace::Trace>) {
    run_case_against(case, case.chain)
}

/// `run_case_traced`, checking every frame against the reference of `reference` (a chain
/// of built-in filters that a chain of user kernels must equal).
pub fn run_case_against(
    case: &Case,
    reference: &str,
) -> (u64, u64, u8, Option<framepipe::trace::Trace>) {
    run_case_in(case, reference, Formats::BGR)
}

/// `run_case_against`, with frames carried between `formats` (the pattern drawn in the
/// input format, the reference converting as `pixel::apply_reference` does).
pub fn run_case_in(
    case: &Case,
    reference: &str,
    formats: Formats,
) -> (u64, u64, u8, Option<framepipe::trace::Trace>) {
    let (sink, summary) = run_checked(case, reference, formats, false);
    (sink.seen, sink.bad_frames, sink.max_diff, summary.trace)
}

/// `run_case_in` with every frame lent on the device (`BackendConfig::lend`) and kept
/// there until the run ends: (frames seen, frames unlike the reference, the largest
/// difference, frames lent that changed while kept).
pub fn run_case_lent(case: &Case, formats: Formats) -> (u64, u64, u8, usize) {
    let (sink, _) = run_checked(case, case.chain, formats, true);
    let lent = sink.lent.len() as u64;
    assert_eq!(lent, sink.seen, "every frame was lent on the device");
    (
        sink.seen,
        sink.bad_frames,
        sink.max_diff,
        sink.lent_changed(),
    )
}

/// `case`'s frames (BGR) lent on the device shaped for a model as `shape` says: (frames
/// seen, frames unlike the reference fitted and laid out on the CPU, `pixel::lookup`).
pub fn run_case_shaped(case: &Case, shape: backend::Shape) -> (u64, u64) {
    let chain: Chain = case.chain.parse().unwrap();
    let plan = plan_of(case, Formats::BGR, chain.clone()).lending(true, Some(shape.clone()));
    let mut sink = ShapedSink {
        chain: shape.after(&chain, case.size).unwrap(),
        shape,
        size: case.size,
        seen: 0,
        bad: 0,
    };
    let source = Box::new(Pattern::new(case.size, 0.0));
    plan.run(source, &mut sink, &Stop::new()).unwrap();
    (sink.seen, sink.bad)
}

/// Checks frames lent shaped for a model against the reference (`run_case_shaped`).
struct ShapedSink {
    /// The chain with the fit after it.
    chain: Chain,
    shape: backend::Shape,
    size: FrameSize,
    seen: u64,
    bad: u64,
}

impl Sink for ShapedSink {
    fn verb(&self) -> &'static str {
        "checked"
    }
    fn describe(&self) -> String {
        "check shaped frames against the reference".into()
    }
    fn consume(&mut self, frame: &framepipe::desc::Frame) -> anyhow::Result<Flow> {
        let to = self.shape.size;
        assert_eq!(frame.size(), to, "a shaped frame's size");
        let got = read_lent(&frame.desc.memory, self.shape.lookup.bytes(to));
        let bgr = reference_in(&self.chain, self.size, Formats::BGR, self.seen);
        if got != self.shape.lookup.apply(to, &bgr) {
            self.bad += 1;
        }
        self.seen += 1;
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// The plan `case` describes (counts, page-locking, stream layout, graphs, frames, traced
/// frames) for `chain` between `formats`.
fn plan_of(case: &Case, formats: Formats, chain: Chain) -> Plan {
    let counts = Counts {
        ring: case.in_flight + 2,
        in_flight: case.in_flight,
        bands: case.bands,
        busy_bands: case.busy_bands,
    };
    let plan = Plan::new(case.kind, case.size, formats, chain, counts)
        .unwrap()
        .traced(case.trace_frames)
        .pageable(case.pageable);
    let cuda = framepipe::backend::CudaSettings {
        issue: case.issue,
        streams: case.streams,
        graphs: case.graphs,
        ..plan.cuda()
    };
    let mut plan = plan.with_cuda(cuda);
    plan.frames = Some(case.frames);
    plan
}

fn run_checked(
    case: &Case,
    reference: &str,
    formats: Formats,
    lend: bool,
) -> (CheckSink, framepipe::stats::Summary) {
    let chain: Chain = case.chain.parse().unwrap();
    let plan = plan_of(case, formats, chain).lending(lend, None);
    let mut sink = CheckSink::in_formats(reference.parse().unwrap(), case.size, formats);
    let source = Box::new(Pattern::new(case.size, 0.0).in_format(formats.input));
    let summary = plan.run(source, &mut sink, &Stop::new()).unwrap();
    assert_eq!(summary.capture.captured, case.frames);
    assert_eq!(summary.process.processed, case.frames);
    (sink, summary)
}

/// The chains every backend is checked on.
pub const CHAINS: &[&str] = &[
    "copy",
    "invert",
    "gray",
    "gain:1.5,10",
    "gain:0.5,0.5",
    "gain:-1,255",
    "gray,gain:1.3,-7,invert",
    "blur:3",
    "blur:9",
    "gauss:2",
    "gauss:5,0.8",
    "sobel",
    "sharpen:1.5",
    "median3",
    "gray,gauss:2,sobel",
    "invert,blur:5,median3,gain:2,-20",
    "text:fp {frame} {input} {pts},x=3,y=2,size=8",
    "gray,text:Hi!,x=-1,y=-1,size=16,color=ff8000,box=0,blur:3",
];

/// Chains that change the frame's size, checked on both backends against the reference
/// (not against OpenCV: ffmpeg's filters are their peers, `tests/geometry.rs`).
pub const GEOMETRY_CHAINS: &[&str] = &[
    "hflip",
    "vflip",
    "transpose:clock",
    "transpose:cclock_flip,gray",
    "crop:20:10:3:5",
    "pad:64:40:7:9:ff8000",
    "scale:48:30",
    "scale:9:5:area",
    "scale:16:9,gauss:1",
    "blur:3,scale:40:-2,sobel,text:Hi!,x=1,y=1,size=8",
    "median3,transpose:clock_flip,crop:11:20,pad:30:30:2:2,vflip,scale:61:33",
];

/// How far OpenCV's own functions may be from the reference: 0 where the arithmetic is
/// integer; 1 for the Gaussian (OpenCV quantizes its weights its own way) and the unsharp
/// mask (OpenCV's addWeighted may fuse the multiply and add); a ±1 that a later Sobel
/// amplifies (8 = its total weight) where one of them precedes it.
pub fn opencv_tolerance(chain: &str) -> u8 {
    let inexact = chain.find("gauss").or_else(|| chain.find("sharpen"));
    match inexact {
        None => 0,
        Some(at) if chain[at..].contains("sobel") => 8,
        Some(_) => 1,
    }
}

/// A sink that asks for controls at given frames (as the window's keys do) and checks that
/// every frame equals the reference of the chain in force: the chains follow each other in
/// the order asked, each from some frame after it was asked for, never mixed.
pub struct ControlSink {
    pub size: FrameSize,
    /// (frame at which to ask, control)
    pub asks: Vec<(u64, framepipe::backend::Control)>,
    /// The chains in the order they come into force.
    pub chains: Vec<Chain>,
    pub current: usize,
    pub seen: u64,
    /// Frame at which each later chain was first seen.
    pub switched_at: Vec<u64>,
    pub mismatches: u64,
}

impl Sink for ControlSink {
    fn verb(&self) -> &'static str {
        "checked"
    }
    fn describe(&self) -> String {
        "check while changing the backend".into()
    }
    fn consume(&mut self, frame: &framepipe::desc::Frame) -> anyhow::Result<Flow> {
        let (frame, size) = (frame.bytes, frame.size());
        let seq = self.seen;
        self.seen += 1;
        if frame != reference(&self.chains[self.current], size, seq).as_slice() {
            match self.chains.get(self.current + 1) {
                Some(next) if frame == reference(next, size, seq).as_slice() => {
                    self.current += 1;
                    self.switched_at.push(seq);
                }
                _ => self.mismatches += 1,
            }
        }
        let ask = self.asks.iter().find(|p| p.0 == seq).map(|p| p.1.clone());
        Ok(ask.map_or(Flow::Continue, Flow::Control))
    }
    fn finish(&mut self) -> anyhow::Result<()> {
        Ok(())
    }
}

/// Runs the pipeline with `kind`, changing filter, page-locking and bands on the way.
pub fn run_with_controls(kind: BackendKind) -> ControlSink {
    use framepipe::backend::Control;
    let size = FrameSize::new(640, 360);
    let first: Chain = "invert".parse().unwrap();
    let sobel: Chain = "gray,sobel".parse().unwrap();
    let gauss: Chain = "blur:5".parse().unwrap();
    let mut plan = Plan::new(kind, size, Formats::BGR, first.clone(), Counts::spare(4, 3)).unwrap();
    plan.ring = 6;
    plan.frames = Some(40);
    let mut sink = ControlSink {
        size,
        asks: vec![
            (3, Control::Chain(sobel.clone())),
            (10, Control::Pageable(true)),
            (16, Control::Bands(8)),
            (22, Control::Chain(gauss.clone())),
            (28, Control::Pageable(false)),
        ],
        chains: vec![first.clone(), sobel, gauss],
        current: 0,
        seen: 0,
        switched_at: Vec::new(),
        mismatches: 0,
    };
    let summary = plan
        .run(Box::new(Pattern::new(size, 0.0)), &mut sink, &Stop::new())
        .unwrap();
    assert_eq!(summary.sink_stats.consumed, 40);
    assert_eq!(
        summary.process.controls.len(),
        5,
        "{:?}",
        summary.process.controls
    );
    sink
}
