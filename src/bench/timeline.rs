//! `bench --timeline`: the app's defaults above the original question's configuration.

use anyhow::{Context, Result};

use super::measured::{run_setup, Setup, Subject};
use crate::filter::Chain;
use crate::frame::FrameSize;

/// The defaults against the original configuration, on one picture.
pub(crate) fn draw_timeline(path: &str, size: FrameSize, chain: &Chain) -> Result<()> {
    let frames = crate::trace::TIMELINE_FRAMES;
    let subject = Subject {
        size,
        chain,
        formats: crate::pixel::Formats::BGR,
    };
    let defaults = Setup {
        defaults: false,
        ..Setup::defaults(&subject)
    };
    let original = Setup::new(true, 3.min(size.height), 1);
    let mut panels = Vec::new();
    for (name, setup) in [
        ("page-locked, app defaults", defaults),
        ("pageable, 3 bands, one frame at a time", original),
    ] {
        // Skip the first frames (start-up), then trace a steady-state window.
        let (_, trace) = run_setup(&subject, setup, 40 + frames, 40 + frames)?;
        let mut trace = trace.context("no trace recorded")?;
        trace.spans.retain(|s| s.frame >= 40);
        trace.spans.iter_mut().for_each(|s| s.frame -= 40);
        panels.push((format!("{size} {chain}, {name}"), trace));
    }
    let refs: Vec<(&str, &crate::trace::Trace)> =
        panels.iter().map(|(n, t)| (n.as_str(), t)).collect();
    std::fs::write(path, crate::trace::timeline_svg(&refs, frames))
        .with_context(|| format!("writing {path}"))?;
    crate::out!("timeline written to {path}");
    Ok(())
}
