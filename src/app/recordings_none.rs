//! `--record` in a build without FFmpeg's libraries: the plan refuses it (`plan::Record`
//! has no value), so there is never a recording; the same calls as `recordings.rs`, each
//! doing nothing.

use anyhow::Result;

use crate::plan::RunPlan;
use crate::source::Source;

/// No recording is ever made: no tap.
pub(super) type Tap = std::convert::Infallible;

/// The run's recordings: none.
pub(super) struct Recordings;

impl Recordings {
    /// No recording to start.
    pub fn start(_: &RunPlan) -> Result<Self> {
        Ok(Self)
    }

    /// No tap.
    pub fn tap(&self, _: usize) -> Option<Tap> {
        None
    }

    /// No clips.
    pub fn clip_hook(&self, _: usize) -> Option<crate::events::ClipHook> {
        None
    }

    /// No sidecars.
    pub fn beside(&self, _: usize) -> Option<crate::sink::detecting::Beside> {
        None
    }

    /// No figures.
    pub fn live(&self, _: usize) -> Option<std::sync::Arc<crate::stats::RecordLive>> {
        None
    }

    /// Nothing to attach.
    pub fn attach(&self, _: usize, _: &mut dyn Source) -> Result<()> {
        Ok(())
    }

    /// No copies without FFmpeg.
    pub fn copies_described(&self) -> Option<String> {
        None
    }

    /// No copy to finish.
    pub fn finish_copies(&mut self) -> Result<()> {
        Ok(())
    }

    /// Nothing recorded.
    pub fn finish(self) -> Vec<Option<crate::stats::Recorded>> {
        Vec::new()
    }
}

/// Nothing to attach.
pub(super) fn attach(tap: Option<Tap>, _: &mut dyn Source) -> Result<()> {
    match tap {
        Some(never) => match never {},
        None => Ok(()),
    }
}
