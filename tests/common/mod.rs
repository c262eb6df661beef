//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod run;

use framepipe::backend::{self, BackendConfig, BackendKind};
use framepipe::band::BandPlan;
use framepipe::filter::Chain;
use framepipe::frame::FrameSize;
use framepipe::pipeline::{self, Options};
use framepipe::sink::{Flow, Sink};
use framepipe::source::pattern::{self, Pattern};
use framepipe::stop::Stop;

/// A sink that checks every frame against the reference chain applied to the pattern.
pub struct CheckSink {
    pub chain: Chain,
    pub size: FrameSize,
    pub seen: u64,
    pub bad_frames: u64,
    pub max_diff: u8,
    input: Vec<u8>,
    want: Vec<u8>,
}

impl CheckSink {
    pub fn new(chain: Chain, size: FrameSize) -> Self {
        Self {
            chain,
            size,
            seen: 0,
            bad_frames: 0,
            max_diff: 0,
            input: vec![0; size.bytes()],
            want: vec![0; size.bytes()],
        }
    }
}

impl Sink for CheckSink {
    fn verb(&self) -> &'static str {
        "checked"
    }
    fn describe(&self) -> String {
        "check against the reference".into()
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> anyhow::Result<Flow> {
        assert_eq!(size, self.size);
        pattern::draw(size, self.seen, &mut self.input);
        self.chain
            .apply_reference(size, &self.input, &mut self.want);
        let diff = frame
            .iter()
            .zip(&self.want)
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
    pub frames: u64,
}

/// Runs `case`; returns (frames seen, frames that differ, largest difference).
pub fn run_case(case: &Case) -> (u64, u64, u8) {
    let chain: Chain = case.chain.parse().unwrap();
    let plan = BandPlan::new(case.size.height, case.bands, chain.radius()).unwrap();
    let busy_plan = BandPlan::new(case.size.height, case.busy_bands, chain.radius()).unwrap();
    let cfg = BackendConfig {
        size: case.size,
        chain: chain.clone(),
        plan,
        busy_plan,
        in_flight: case.in_flight,
        pageable: case.pageable,
        issue: case.issue,
        streams: case.streams,
    };
    let backend = backend::create(case.kind, &cfg).unwrap();
    let mut sink = CheckSink::new(chain, case.size);
    let opts = Options {
        ring: case.in_flight + 2,
        frames: Some(case.frames),
        keep_frame_times: false,
    };
    let source = Box::new(Pattern::new(case.size, 0.0));
    let summary = pipeline::run(source, backend, &mut sink, &opts, &Stop::new()).unwrap();
    assert_eq!(summary.capture.captured, case.frames);
    assert_eq!(summary.process.processed, case.frames);
    (sink.seen, sink.bad_frames, sink.max_diff)
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
];
