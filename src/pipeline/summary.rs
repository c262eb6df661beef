//! The run's summary, once every thread has ended: the counts of each stage and each input,
//! what the outputs hold (`SinkReport`), the trace, and each thread's CPU over the run.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::sink::{input_stats, Sunk};
use super::{Options, Shared};
use crate::sink::Sink;
use crate::stats::{CaptureStats, ProcessStats, Summary, ThreadCpu};

/// The run's summary: every input's counts (capture side and sink side), the sink's, the
/// trace and the reloads.
pub(super) fn summarize(
    shared: &Shared,
    sink: &mut dyn Sink,
    sunk: Sunk,
    elapsed: Duration,
    opts: &Options,
) -> Summary {
    let Sunk {
        mut stats,
        mut per_input,
        retired,
        trace,
        ..
    } = sunk;
    per_input.resize_with(shared.in_use().len(), Default::default);
    stats.pauses = shared.pauses.load(Ordering::SeqCst);
    let report = sink.report();
    stats.stored = report.stored;
    stats.streams = report.streams.clone();
    stats.mosaic = report.mosaic.clone();
    stats.detection = report.detection.clone();
    // Each place's input (a vacant place's last went to `retired`), then those that left.
    let inputs = shared
        .in_use()
        .iter()
        .zip(&per_input)
        .enumerate()
        .filter(|(_, (c, _))| !c.vacant.load(Ordering::SeqCst))
        .map(|(i, (c, mine))| input_stats(c, mine, report.of_input(i)))
        .chain(retired)
        .collect();
    Summary {
        input: shared.input(),
        inputs,
        backend: shared.backend.lock().map(|b| b.clone()).unwrap_or_default(),
        sink: sink.verb().to_string(),
        elapsed,
        capture: CaptureStats {
            captured: shared.total(|c| &c.captured),
            dropped: shared.total(|c| &c.dropped),
            read_ms: shared.total(|c| &c.read_us) as f64 / 1000.0,
        },
        process: ProcessStats::default(),
        sink_stats: stats,
        trace,
        reloads: opts.reload.as_ref().map(|r| r.log()).unwrap_or_default(),
        left_behind: false,
        busy: busy_threads(shared, elapsed),
    }
}

/// The sink's, the backend's and the busiest capture thread's CPU time over `elapsed`,
/// busiest first (`Summary::busy`).
fn busy_threads(shared: &Shared, elapsed: Duration) -> Vec<(String, f64)> {
    let Ok(cpu) = shared.cpu.lock() else {
        return Vec::new();
    };
    let wall = elapsed.as_secs_f64().max(1e-9);
    let share = |c: &ThreadCpu| (c.user_s + c.sys_s) / wall;
    let mut busy: Vec<(String, f64)> = cpu
        .iter()
        .filter(|(name, _)| !name.starts_with("capture"))
        .map(|(name, c)| (name.clone(), share(c)))
        .collect();
    let capture = cpu
        .iter()
        .filter(|(name, _)| name.starts_with("capture"))
        .map(|(name, c)| (name.clone(), share(c)))
        .max_by(|a, b| a.1.total_cmp(&b.1));
    busy.extend(capture);
    busy.sort_by(|a, b| b.1.total_cmp(&a.1));
    busy
}
