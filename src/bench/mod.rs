//! `framepipe bench`: the real pipeline (capture thread, ring, GPU thread, consumer thread)
//! on synthetic frames, against the bound measured in the same run.
//!
//! For each frame size and filter chain: the bound (largest of one frame's upload,
//! download, kernels, and an upload plus a download together), then throughput (steady-state
//! frame period) and latency (submit → output in host memory) for page-locked and pageable
//! buffers, band counts and frames in flight; then a paced "live" run with the defaults.
//!
//! The rooms: `grid` measures one size and chain (the bound, then every configuration),
//! `measured` runs one configuration, `report` turns frame times into a row, `table` prints
//! a section, `verdict` judges it against the targets, `timeline` draws the defaults against
//! the original question's configuration. The flags are `cli::BenchArgs`.

mod grid;
mod measured;
mod report;
mod table;
mod timeline;
mod verdict;

use anyhow::{bail, Context, Result};

use crate::backend;
use crate::cli::BenchArgs;

pub use measured::Setup;
pub use report::{make_row, percentile, steady_period_ms, Report, Row, Section};
pub use table::render;
pub use verdict::verdict;

/// Frames in flight of the app's defaults up to 1080p (ring 8, `in_flight = min(ring - 2,
/// band::default_in_flight)`): the ring the copy measurements rotate over, and the timeline.
pub(crate) const DEFAULT_IN_FLIGHT: usize = 4;
/// Ring slots beyond the frames in flight of a measured configuration (`plan::RING_SPARE`).
pub(crate) use crate::plan::RING_SPARE;

/// Runs `framepipe bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if let Err(why) = backend::device::probe() {
        bail!("bench measures the CUDA pipeline and needs a GPU: {why}");
    }
    if args.bands.contains(&0) || args.in_flight.contains(&0) {
        bail!("--bands and --in-flight values must be at least 1");
    }
    if let Some(p) = &args.timeline {
        crate::paths::check_file_arg("--timeline", p, "svg")?;
    }
    let device = backend::device::device_name(backend::device::DEFAULT_DEVICE)?;
    crate::out!("framepipe bench on {device}");
    let mut sections = Vec::new();
    for &size in &args.size {
        for chain in &args.filter {
            for &formats in &args.format {
                formats
                    .check(size)
                    .map_err(|e| anyhow::anyhow!("--format {formats}: {e}"))?;
                let subject = measured::Subject {
                    size,
                    chain,
                    formats,
                };
                let section = grid::run_section(args, &subject)?;
                crate::msg::stdout(format_args!("{}", render(&section)));
                sections.push(section);
            }
        }
    }
    crate::out!();
    for s in &sections {
        crate::out!("{}", verdict(s));
    }
    if let (Some(path), Some(&size), Some(chain)) =
        (&args.timeline, args.size.first(), args.filter.first())
    {
        timeline::draw_timeline(path, size, chain)?;
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

#[cfg(test)]
mod tests {
    use super::table::notes;
    use super::*;
    use crate::backend::measure;

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
            format: "bgr24".into(),
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
    fn the_verdict_sets_the_defaults_against_the_bare_baseline() {
        let mut s = sample_section();
        s.rows[0].setup.defaults = true;
        let bare = Setup::bare(s.rows[0].setup);
        assert_eq!((bare.bands, bare.busy_bands), (1, 1));
        assert!(!bare.threads && !bare.graphs && !bare.defaults && bare.bare);
        let times: Vec<(f64, f64)> = (0..40)
            .map(|i| (i as f64 * 0.45, i as f64 * 0.45 + 0.3))
            .collect();
        let row = make_row(bare, &times, 0.4, Some(2.0)).unwrap();
        assert_eq!(
            notes(&row),
            "bare baseline (one thread, no channels, plain calls)"
        );
        s.rows.push(row);
        let v = verdict(&s);
        assert!(
            v.contains(
                "defaults unpaced 80.0% of bound against the bare baseline's 88.9% (-8.9 points)"
            ),
            "{v}"
        );
        // The baseline is never the section's best throughput: it is not the app.
        assert!(v.contains("best throughput 80.0%"), "{v}");
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
        for key in ["graphs", "priorities", "threads", "bare"] {
            assert!(r[key].is_boolean(), "missing row.{key}");
        }
        assert!(s["both_over_ring_ms"].is_number());
    }
}
