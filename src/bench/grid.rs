//! One section of the bench: the bound of a size and chain, then every configuration of the
//! grid (or only the defaults), each through `measured`.

use anyhow::{Context, Result};

use super::measured::{measure_row, Setup, Subject};
use super::report::{make_row, Row, Section};
use super::DEFAULT_IN_FLIGHT;
use crate::backend::{measure, IssueOrder, StreamLayout};
use crate::cli::BenchArgs;

/// Measures one size, chain and formats: the bound, the original question's configuration,
/// the grid, the app's defaults and the bare baseline (back to back, `PAIRED_RUNS` times; the
/// pair of median difference kept),
/// the defaults' variants, and paced (live) runs.
pub(crate) fn run_section(args: &BenchArgs, subject: &Subject) -> Result<Section> {
    let Subject {
        size,
        chain,
        formats,
    } = *subject;
    let bound = measure::bound(size, chain, formats, 30, 5)?;
    let both_over_ring_ms =
        measure::both_rotating(size, DEFAULT_IN_FLIGHT + super::RING_SPARE, 30)?;
    let bound_ms = bound.bound_ms();
    let frames_for =
        |per_frame_ms: f64| ((args.seconds * 1e3 / per_frame_ms) as u64).clamp(60, 4000);
    let defaults = Setup::defaults(subject);
    let measure = |setup: Setup, frames: u64| measure_row(subject, setup, frames);

    // The original question's configuration: pageable, 3 bands, one frame at a time.
    let orig = Setup::new(true, 3.min(size.height), 1);
    let t = measure(orig, frames_for(bound_ms * 10.0))?;
    let mut original = make_row(orig, &t, bound_ms, None).context("too few frames")?;
    let original_ms = Some(original.ms_per_frame);
    let mut rows = Vec::new();
    let fits = |bands: usize| bands <= size.height / formats.row_align();
    let row_of = |setup: Setup| -> Result<Option<_>> {
        let est = if setup.pageable {
            bound_ms * 10.0
        } else {
            bound_ms
        };
        let t = measure(setup, frames_for(est))?;
        Ok(make_row(setup, &t, bound_ms, original_ms))
    };
    // The grid.
    for setup in grid(args, fits) {
        rows.extend(row_of(setup)?);
    }
    // The app's defaults (finely cut frames when the GPU is idle, one band behind others)
    // and the bare baseline, measured back to back `PAIRED_RUNS` times; the pair whose
    // difference is the median difference is kept.
    let bare = Setup::bare(defaults);
    let mut pairs = Vec::new();
    for _ in 0..PAIRED_RUNS {
        if let (Some(ours), Some(baseline)) = (row_of(defaults)?, row_of(bare)?) {
            pairs.push((ours, baseline));
        }
    }
    if let Some((ours, baseline)) = median_pair(pairs) {
        rows.extend([ours, baseline]);
    }
    // The defaults' variants, each changing one thing.
    for setup in variants_of_defaults(args, defaults) {
        rows.extend(row_of(setup)?);
    }
    // The defaults paced as a live source.
    if args.live_fps > 0.0 {
        let frames = ((args.live_fps * args.seconds * 2.0) as u64).max(60);
        for setup in live(args, defaults) {
            let t = measure(setup, frames)?;
            rows.extend(make_row(setup, &t, bound_ms, original_ms));
        }
    }
    original.speedup_vs_original = 1.0;
    rows.insert(0, original);
    Ok(Section {
        size: size.to_string(),
        filter: chain.to_string(),
        format: formats.to_string(),
        bound,
        bound_ms,
        limiter: bound.limiter().to_string(),
        both_over_ring_ms,
        default_bands: defaults.bands,
        rows,
    })
}

/// Times the defaults and the bare baseline are each measured, back to back (defaults, bare,
/// defaults, bare, …): on a noisy machine runs seconds apart differ by points (4K,
/// 2026-12-01: the baseline alone 92.3–99.1 % of the bound over three bench runs; 95.1–99.9
/// % in another session), while two runs back to back share the machine's state of the
/// moment, so each pair's difference is what the pipeline's threads cost.
const PAIRED_RUNS: usize = 5;

/// The pair (defaults, baseline) whose difference in throughput is the median of all the
/// pairs' differences (None for none): the estimate a slow drift of the machine or one
/// disturbed run can't move, and both rows shown are ones measured together.
fn median_pair(mut pairs: Vec<(Row, Row)>) -> Option<(Row, Row)> {
    let diff = |p: &(Row, Row)| p.0.pct_of_bound - p.1.pct_of_bound;
    pairs.sort_by(|a, b| diff(a).total_cmp(&diff(b)));
    let mid = pairs.len().checked_sub(1)? / 2;
    Some(pairs.swap_remove(mid))
}

/// The grid `args` asks for (none with `--only-defaults`): bands × frames in flight
/// page-locked, the issue orders, stream layouts and graphs compared, and pageable rows;
/// band counts the frame can't hold (`fits`) are left out.
fn grid(args: &BenchArgs, fits: impl Fn(usize) -> bool) -> Vec<Setup> {
    let mut grid: Vec<Setup> = Vec::new();
    if args.only_defaults {
        return grid;
    }
    let bands = || args.bands.iter().copied().filter(|&b| fits(b));
    for b in bands() {
        for &f in &args.in_flight {
            grid.push(Setup::new(false, b, f));
        }
    }
    if args.compare_issue {
        for b in bands().filter(|&b| b > 1) {
            for f in [1, 4] {
                grid.push(Setup {
                    issue: IssueOrder::Breadth,
                    ..Setup::new(false, b, f)
                });
            }
        }
    }
    if args.compare_streams {
        for b in bands() {
            for f in [1, 4] {
                grid.push(Setup {
                    streams: StreamLayout::PerBand,
                    ..Setup::new(false, b, f)
                });
            }
        }
    }
    if args.compare_graphs {
        for b in bands() {
            grid.push(Setup {
                graphs: false,
                ..Setup::new(false, b, 1)
            });
        }
    }
    for b in args.pageable_bands.iter().copied().filter(|&b| fits(b)) {
        for &f in &args.pageable_in_flight {
            grid.push(Setup::new(true, b, f));
        }
    }
    grid
}

/// The defaults with one thing changed: the window's rolling trace (its cost), and what
/// `args` compares (graphs, stream priorities, the threads against the backend alone, one
/// frame at a time).
fn variants_of_defaults(args: &BenchArgs, defaults: Setup) -> Vec<Setup> {
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
    let mut variants = vec![Setup {
        rolling: true,
        ..variant
    }];
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
    variants
}

/// The defaults paced at `--live-fps` (and without graphs, where compared).
fn live(args: &BenchArgs, defaults: Setup) -> Vec<Setup> {
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
    lives
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_of_median_difference_is_kept() {
        let row = |period: f64| {
            let times: Vec<(f64, f64)> = (0..40)
                .map(|i| (i as f64 * period, i as f64 * period + 0.3))
                .collect();
            make_row(Setup::new(false, 1, 4), &times, 0.4, None).unwrap()
        };
        // Differences (bound 0.4 ms): 80 - 100 = -20, 80 - 80 = 0, 100 - 95.2 = +4.8 points;
        // the slowest pair overall (0.5 and 0.5) is the median one, not the median rows.
        let pairs = vec![
            (row(0.5), row(0.4)),
            (row(0.5), row(0.5)),
            (row(0.4), row(0.42)),
        ];
        let (ours, base) = median_pair(pairs).unwrap();
        assert!((ours.ms_per_frame - 0.5).abs() < 1e-9, "{ours:?}");
        assert!((base.ms_per_frame - 0.5).abs() < 1e-9, "{base:?}");
        assert!(median_pair(Vec::new()).is_none());
        let (one, _) = median_pair(vec![(row(0.45), row(0.4))]).unwrap();
        assert!((one.ms_per_frame - 0.45).abs() < 1e-9);
    }
}
