//! The screen in a build without OpenCV: there is none (the same calls as `screen.rs`).

use anyhow::Result;

use crate::display::Knobs;
use crate::sink::Sink;
use crate::stop::Stop;
use crate::tiles::MAX_MOSAIC;

/// No screen: the largest mosaic.
pub(super) fn shown_within() -> crate::frame::FrameSize {
    MAX_MOSAIC
}

/// Never possible.
pub(super) fn check_window_possible() -> Result<()> {
    anyhow::bail!("this build has no OpenCV and cannot open a window; run with --headless")
}

/// Never opened.
pub(super) fn open_window(_: &str, _: Knobs, _: Option<Stop>) -> Result<Box<dyn Sink>> {
    anyhow::bail!("this build has no OpenCV and cannot open a window")
}
