//! The screen, as the run's displays need it, through OpenCV's window (`display::window`):
//! whether there is a display, the area a mosaic fits, and the window itself. A build
//! without OpenCV has none of them: `screen_none.rs` stands in.

use anyhow::Result;

use crate::display::{self, Knobs};
use crate::sink::Sink;
use crate::stop::Stop;
use crate::tiles::MAX_MOSAIC;

/// The screen's area a shown mosaic fits.
pub(super) fn shown_within() -> crate::frame::FrameSize {
    display::window::unscaled_area().unwrap_or(MAX_MOSAIC)
}

/// Fails, saying what to do instead, where a window can't be opened.
pub(super) fn check_window_possible() -> Result<()> {
    Ok(display::window::check_display()?)
}

/// The window, titled `title`, steered by `knobs`.
pub(super) fn open_window(title: &str, knobs: Knobs, hold: Option<Stop>) -> Result<Box<dyn Sink>> {
    Ok(display::boxed(display::window::Window::open(
        title, knobs, hold,
    )?))
}
