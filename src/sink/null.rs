//! Discards frames: headless runs with no `--output`, and benchmarks.

use anyhow::Result;

use super::output::{Output, Taken};
use super::Frame;

/// Discards every frame.
pub struct Null;

impl Output for Null {
    fn verb(&self) -> &'static str {
        "consumed"
    }
    fn describe(&self) -> String {
        "no output (headless)".into()
    }
    fn consume(&mut self, _frame: &Frame) -> Result<Taken> {
        Ok(Taken::Kept)
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
