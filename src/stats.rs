//! Counters and timings each stage keeps for itself, merged into the exit summary.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

/// Device time one frame spent in each stage, summed over its bands.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StageTimes {
    pub h2d_ms: f64,
    pub kernel_ms: f64,
    pub d2h_ms: f64,
    /// First band's first copy start to last band's last copy end.
    pub span_ms: f64,
}

impl StageTimes {
    fn add(&mut self, o: &StageTimes) {
        self.h2d_ms += o.h2d_ms;
        self.kernel_ms += o.kernel_ms;
        self.d2h_ms += o.d2h_ms;
        self.span_ms += o.span_ms;
    }
}

/// What the capture thread counted.
#[derive(Clone, Debug, Default)]
pub struct CaptureStats {
    pub captured: u64,
    pub dropped: u64,
    pub read_ms: f64,
}

/// What the processing thread counted.
#[derive(Clone, Debug, Default)]
pub struct ProcessStats {
    pub processed: u64,
    /// Submit → output ready in host memory, summed.
    pub latency_ms: f64,
    pub stages: StageTimes,
    pub stage_frames: u64,
    /// Per-frame (submitted, done) instants, kept only when asked (benchmarks).
    pub frames: Vec<(Instant, Instant)>,
}

impl ProcessStats {
    pub fn record(
        &mut self,
        submitted: Instant,
        done: Instant,
        stages: Option<&StageTimes>,
        keep: bool,
    ) {
        self.processed += 1;
        self.latency_ms += ms(done - submitted);
        if let Some(s) = stages {
            self.stages.add(s);
            self.stage_frames += 1;
        }
        if keep {
            self.frames.push((submitted, done));
        }
    }
}

/// What the sink thread counted.
#[derive(Clone, Debug, Default)]
pub struct SinkStats {
    pub consumed: u64,
    pub sink_ms: f64,
}

/// Everything the exit summary reports.
#[derive(Clone, Debug, Default)]
pub struct Summary {
    pub backend: String,
    pub sink: String,
    pub elapsed: Duration,
    pub capture: CaptureStats,
    pub process: ProcessStats,
    pub sink_stats: SinkStats,
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn avg(total: f64, n: u64) -> f64 {
    if n == 0 {
        0.0
    } else {
        total / n as f64
    }
}

impl Summary {
    pub fn fps(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.sink_stats.consumed as f64 / s
        } else {
            0.0
        }
    }

    /// The multi-line text printed at exit.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let c = &self.capture;
        let p = &self.process;
        let _ = writeln!(
            out,
            "frames: {} captured, {} processed, {} {}, {} dropped",
            c.captured, p.processed, self.sink_stats.consumed, self.sink, c.dropped
        );
        let _ = writeln!(
            out,
            "time: {:.2} s, {:.1} fps average; backend: {}",
            self.elapsed.as_secs_f64(),
            self.fps(),
            self.backend
        );
        let _ = write!(
            out,
            "per frame: capture {:.3} ms, process {:.3} ms (submit to ready), output {:.3} ms",
            avg(c.read_ms, c.captured),
            avg(p.latency_ms, p.processed),
            avg(self.sink_stats.sink_ms, self.sink_stats.consumed)
        );
        if p.stage_frames > 0 {
            let n = p.stage_frames;
            let _ = write!(
                out,
                "\ngpu per frame: H2D {:.3} ms, kernels {:.3} ms, D2H {:.3} ms (summed over bands), first copy to last {:.3} ms",
                avg(p.stages.h2d_ms, n),
                avg(p.stages.kernel_ms, n),
                avg(p.stages.d2h_ms, n),
                avg(p.stages.span_ms, n)
            );
        }
        out
    }
}
