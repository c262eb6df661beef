//! One section of the bench: the bound of a size and chain, then every configuration of the
//! grid (or only the defaults), each through `measured`.

use anyhow::{Context, Result};

use super::measured::{measure_row, Setup};
use super::report::{make_row, Section};
use super::DEFAULT_IN_FLIGHT;
use crate::backend::{measure, IssueOrder, StreamLayout};
use crate::band;
use crate::cli::BenchArgs;
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::Formats;

pub(crate) fn run_section(
    args: &BenchArgs,
    size: FrameSize,
    chain: &Chain,
    formats: Formats,
) -> Result<Section> {
    let bound = measure::bound(size, chain, formats, 30, 5)?;
    let both_over_ring_ms =
        measure::both_rotating(size, DEFAULT_IN_FLIGHT + super::RING_SPARE, 30)?;
    let bound_ms = bound.bound_ms();
    let frames_for =
        |per_frame_ms: f64| ((args.seconds * 1e3 / per_frame_ms) as u64).clamp(60, 4000);
    let fits = |bands: usize| bands <= size.height / formats.row_align();
    let default_bands = band::default_bands_in(size.height, formats.input.row_align());
    let mut rows = Vec::new();

    // The original question's configuration: pageable, 3 bands, one frame at a time.
    let orig = Setup::new(true, 3.min(size.height), 1);
    let t = measure_row(size, chain, formats, orig, frames_for(bound_ms * 10.0))?;
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
        let t = measure_row(size, chain, formats, setup, frames_for(est))?;
        rows.extend(make_row(setup, &t, bound_ms, original_ms));
    }
    // The app's defaults: finely cut frames when the GPU is idle, one band behind others;
    // unpaced (a file) and paced (a live source).
    let defaults = Setup {
        busy_bands: 1,
        defaults: true,
        ..Setup::new(
            false,
            default_bands.min(size.height),
            band::default_in_flight(size.height),
        )
    };
    let t = measure_row(size, chain, formats, defaults, frames_for(bound_ms))?;
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
    // The rolling trace a window run keeps for its timeline strip: its cost, against the
    // defaults' row of the same run.
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
    for setup in variants {
        let t = measure_row(size, chain, formats, setup, frames_for(bound_ms))?;
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
            let t = measure_row(size, chain, formats, setup, frames)?;
            rows.extend(make_row(setup, &t, bound_ms, original_ms));
        }
    }
    let mut original = original;
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
        default_bands,
        rows,
    })
}
