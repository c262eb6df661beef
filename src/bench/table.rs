//! The printed table of one section.

use std::fmt::Write as _;

use super::report::{Row, Section};
use super::DEFAULT_IN_FLIGHT;
use crate::backend::IssueOrder;

/// The printed table of one section.
pub fn render(section: &Section) -> String {
    let b = &section.bound;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{} {} ({}): bound {:.3} ms/frame ({:.0} fps, {}): H2D {:.3}, D2H {:.3}, kernels {:.3}, H2D+D2H together {:.3} ms",
        section.size,
        section.filter,
        section.format,
        section.bound_ms,
        1e3 / section.bound_ms,
        section.limiter,
        b.h2d_ms,
        b.d2h_ms,
        b.kernel_ms,
        b.both_ms
    );
    let _ = writeln!(
        out,
        "(H2D+D2H together over {} host buffer pairs in turn, as the ring's slots: {:.3} ms)",
        DEFAULT_IN_FLIGHT + super::RING_SPARE,
        section.both_over_ring_ms
    );
    let _ = writeln!(
        out,
        "{:<12} {:<9} {:<7} {:>5} {:>9} {:>9} {:>9} {:>8} {:>10} {:>10} {:>10} {:>8}  notes",
        "mode",
        "streams",
        "issue",
        "bands",
        "in-flight",
        "ms/frame",
        "fps",
        "% bound",
        "latency",
        "lat p99",
        "paced",
        "speedup",
    );
    for r in &section.rows {
        let issue = match r.setup.issue {
            IssueOrder::Depth => "depth",
            IssueOrder::Breadth => "breadth",
        };
        let paced = if r.setup.paced_fps > 0.0 {
            format!("{:.0} fps", r.setup.paced_fps)
        } else {
            "-".into()
        };
        let notes = notes(r);
        let _ = writeln!(
            out,
            "{:<12} {:<9} {:<7} {:>5} {:>9} {:>9.3} {:>9.0} {:>7.1}% {:>7.3} ms {:>7.3} ms {:>10} {:>7.2}x  {notes}",
            r.mode, r.setup.streams.to_string(), issue, r.setup.bands, r.setup.in_flight, r.ms_per_frame, r.fps, r.pct_of_bound, r.latency_ms,
            r.latency_p99_ms, paced, r.speedup_vs_original
        );
    }
    if section.rows.iter().any(|r| r.setup.defaults) {
        let _ = writeln!(
            out,
            "* the app's defaults: {} bands for a frame that finds the GPU idle, 1 band behind other frames",
            section.default_bands
        );
    }
    out
}

/// What sets a row apart besides its columns: "defaults*", "no graphs", "priorities",
/// "no threads", the busy plan's bands.
pub(crate) fn notes(r: &Row) -> String {
    let mut n = Vec::new();
    if r.setup.defaults {
        n.push("defaults*".to_string());
    }
    if r.setup.busy_bands != r.setup.bands {
        n.push(format!("{} band(s) behind others", r.setup.busy_bands));
    }
    if r.setup.bare {
        n.push("bare baseline (one thread, no channels, plain calls)".into());
    } else if !r.setup.graphs && !r.setup.pageable {
        n.push("no graphs".into());
    }
    if r.setup.priorities {
        n.push("priorities".into());
    }
    if !r.setup.threads && !r.setup.bare {
        n.push("no threads".into());
    }
    if r.setup.rolling {
        n.push("rolling trace (as a window run)".into());
    }
    n.join(", ")
}
