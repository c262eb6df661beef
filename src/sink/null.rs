//! Discards frames: headless runs with no `--output`, and benchmarks.

use anyhow::Result;

use super::{Flow, Frame, Sink};

/// Discards every frame.
pub struct Null;

impl Sink for Null {
    fn verb(&self) -> &'static str {
        "consumed"
    }
    fn describe(&self) -> String {
        "no output (headless)".into()
    }
    fn consume(&mut self, _frame: &Frame) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
