//! The best figures of a section, against the project's targets.

use std::fmt::Write as _;

use super::report::Section;

/// The best figures of a section, against the project's targets.
pub fn verdict(section: &Section) -> String {
    let locked = || {
        section
            .rows
            .iter()
            .filter(|r| !r.setup.pageable && r.setup.paced_fps == 0.0 && r.setup.threads)
    };
    let best_tp = locked().max_by(|a, b| a.pct_of_bound.total_cmp(&b.pct_of_bound));
    let best_lat = locked()
        .filter(|r| r.setup.in_flight == 1)
        .min_by(|a, b| a.latency_ms.total_cmp(&b.latency_ms));
    let mut out = format!("{} {}: ", section.size, section.filter);
    if let Some(r) = best_tp {
        let _ = write!(
            out,
            "best throughput {:.1}% of bound ({} bands, {} in flight, {} streams)",
            r.pct_of_bound, r.setup.bands, r.setup.in_flight, r.setup.streams
        );
    }
    if let Some(r) = best_lat {
        let _ = write!(
            out,
            "; best single-frame latency {:.3} ms ({} bands, {} streams)",
            r.latency_ms, r.setup.bands, r.setup.streams
        );
    }
    let defaults = section
        .rows
        .iter()
        .find(|r| r.setup.defaults && r.setup.paced_fps == 0.0);
    if let Some(r) = defaults {
        let _ = write!(out, "; defaults unpaced {:.1}% of bound", r.pct_of_bound);
    }
    if let (Some(d), Some(b)) = (defaults, section.rows.iter().find(|r| r.setup.bare)) {
        let _ = write!(
            out,
            " against the bare baseline's {:.1}% ({:+.1} points)",
            b.pct_of_bound,
            d.pct_of_bound - b.pct_of_bound
        );
    }
    if let Some(r) = section
        .rows
        .iter()
        .find(|r| r.setup.defaults && r.setup.paced_fps > 0.0)
    {
        let _ = write!(
            out,
            ", live {:.0} fps latency {:.3} ms (p99 {:.3})",
            r.setup.paced_fps, r.latency_ms, r.latency_p99_ms
        );
    }
    out
}
