//! Figures of a measured configuration: frame times turned into a row, rows into a section.

use serde::Serialize;

use super::measured::Setup;
use crate::backend::measure;

/// One measured configuration: its setup and what was measured.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    /// "page-locked" or "pageable".
    pub mode: String,
    /// The configuration measured.
    #[serde(flatten)]
    pub setup: Setup,
    /// Frames measured (warm-up excluded from the figures).
    pub frames: u64,
    /// Steady-state frame period, ms.
    pub ms_per_frame: f64,
    /// Frames per second at that period.
    pub fps: f64,
    /// The bound over the frame period, in percent.
    pub pct_of_bound: f64,
    /// Mean latency (submit to output in host memory), ms.
    pub latency_ms: f64,
    /// Median latency, ms.
    pub latency_p50_ms: f64,
    /// 99th-percentile latency, ms.
    pub latency_p99_ms: f64,
    /// Frame period of the original question's configuration over this row's.
    pub speedup_vs_original: f64,
}

/// All rows for one frame size and chain.
#[derive(Clone, Debug, Serialize)]
pub struct Section {
    /// Frame size, WxH.
    pub size: String,
    /// The filter chain.
    pub filter: String,
    /// The frames' pixel formats, in and out ("i420", "i420 in, bgr24 out").
    pub format: String,
    /// The four figures the bound is the largest of.
    pub bound: measure::Bound,
    /// The bound, ms per frame.
    pub bound_ms: f64,
    /// Which figure sets the bound.
    pub limiter: String,
    /// An upload and a download together over as many host buffer pairs as the default
    /// ring has, taken in turn (a diagnostic; the bound uses one pair).
    pub both_over_ring_ms: f64,
    /// Bands the app uses for this height by default.
    pub default_bands: usize,
    /// One row per configuration measured.
    pub rows: Vec<Row>,
}

/// Everything `bench --json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The GPU's name.
    pub device: String,
    /// When it was measured (seconds since 1970).
    pub date_unix: u64,
    /// One section per size and chain.
    pub sections: Vec<Section>,
}

/// Frames left out of a row's figures as warm-up: a tenth, and at least 10 (more than the
/// ring's first pass, whose frames may capture CUDA graphs).
pub(crate) fn warm_up(frames: usize) -> usize {
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
