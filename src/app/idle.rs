//! A process with no input of its own to run: a shard whose inputs all belong to other
//! shards, or an inputs file with none yet. Where the list may hold live inputs (a camera
//! wall) it stays up (an orchestrator would start an ended one again and again), says so
//! once, and waits for the file to change (`roster::Watch` then stops it and `main` starts
//! it again) or for a stop, answering `/healthz` (healthy: no input is down) and `/metrics`
//! with `--serve` meanwhile. Where the list holds only files (a batch: an indexed Job), it
//! ends at once, done.
//!
//! Invariants: nothing is claimed, opened or written; a stop ends the wait within a tick.

use std::time::{Duration, Instant};

use anyhow::Result;

use crate::plan::shard::Roster;
use crate::plan::Start;
use crate::stop::Stop;

/// How often the browser view's figures are refreshed while waiting.
const REFRESH: Duration = Duration::from_millis(250);

/// Waits as the module doc says.
pub(super) fn wait(start: &Start, roster: &Roster, stop: &Stop) -> Result<()> {
    let Some(file) = roster.file.as_ref().filter(|_| !only_files(roster)) else {
        crate::info!("nothing to run: none of the inputs is this process's");
        return Ok(());
    };
    let serve = start.serve()?;
    crate::info!("nothing to run until '{file}' gives this process an input; waiting");
    let mut view = serve.map(open_view).transpose()?;
    while !stop.is_requested() {
        stop.sleep_until(Instant::now() + REFRESH);
        if let Some(v) = view.as_mut() {
            v.status(&crate::stats::Live::default());
        }
    }
    if let Some(mut v) = view {
        v.finish()?;
    }
    Ok(())
}

/// Whether the list holds inputs and every one is a file (a video or a still image): a
/// batch, done when its share is. An empty list waits for its first input.
fn only_files(roster: &Roster) -> bool {
    use crate::source::InputSpec;
    !roster.all.is_empty()
        && roster.all.iter().all(|e| {
            matches!(
                InputSpec::parse(Some(&e.source)),
                Ok(InputSpec::Video(_) | InputSpec::Image(_))
            )
        })
}

/// The browser view with no input: its page, `/healthz` and `/metrics`.
#[cfg(feature = "ffmpeg")]
fn open_view(serve: crate::plan::run::Serve) -> Result<Box<dyn crate::display::Display>> {
    Ok(Box::new(crate::display::web::Web::open(serve)?))
}

#[cfg(not(feature = "ffmpeg"))]
fn open_view(serve: crate::plan::run::Serve) -> Result<Box<dyn crate::display::Display>> {
    match serve {}
}
