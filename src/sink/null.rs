//! Discards frames: headless runs with no `--output`, and benchmarks. It reads no pixel, so a
//! frame that passed untouched in its decoder's buffer is never copied for it.

use anyhow::Result;

use super::{Flow, Frame, Sink};

/// What a run with no other output says it outputs.
pub const NOTHING: &str = "no output (headless)";

/// Discards every frame.
pub struct Null;

impl Sink for Null {
    fn verb(&self) -> &'static str {
        "consumed"
    }
    fn describe(&self) -> String {
        NOTHING.into()
    }
    fn consume(&mut self, _frame: &Frame) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    fn reads_pixels(&self) -> bool {
        false
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
