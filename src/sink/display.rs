//! What a display is: something a person looks at and steers the run from (the window, the
//! browser view). A display shows frames, the live figures and the mosaic's pictures, and
//! answers with what the person asked for (`Flow`: quit, pause, a filter preset, a tile);
//! it writes nothing that must be finalized (that is an output's job: `output`).
//!
//! Invariants: a display is called on the sink loop's thread only (highgui calls stay on
//! one thread); `idle` keeps it responsive when no frame comes; `finish` is called once.

use anyhow::Result;

use super::{Flow, Frame, Sink};

/// Something a person looks at and steers the run from (module doc).
pub trait Display {
    /// One word for the summary.
    fn verb(&self) -> &'static str {
        "shown"
    }
    /// One line for the log.
    fn describe(&self) -> String;
    /// Shows one processed frame (BGR: what the run negotiated for displays) and says what
    /// the person wants next.
    fn show(&mut self, frame: &Frame) -> Result<Flow>;
    /// Takes the mosaic as the backend composed it (packed BGR, the mosaic's size).
    fn composed(&mut self, _picture: &crate::backend::Picture) -> Result<()> {
        Ok(())
    }
    /// The live figures, before each frame.
    fn status(&mut self, _live: &crate::stats::Live) {}
    /// Whether `status` should carry the recent frames' timeline (the window's strip is on).
    fn wants_timeline(&self) -> bool {
        false
    }
    /// Called when no frame came for a while (keeps the display responsive).
    fn idle(&mut self) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// Closes (a window may first keep its last frame up until q); called once.
    fn finish(&mut self) -> Result<()>;
}

/// `display` as one of the run's sinks.
pub fn boxed(display: impl Display + 'static) -> Box<dyn Sink> {
    Box::new(AsSink(display))
}

/// A display among the run's sinks.
struct AsSink<D>(D);

impl<D: Display> Sink for AsSink<D> {
    fn verb(&self) -> &'static str {
        self.0.verb()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        self.0.show(frame)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.0.composed(picture)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.0.status(live)
    }
    fn wants_timeline(&self) -> bool {
        self.0.wants_timeline()
    }
    fn idle(&mut self) -> Result<Flow> {
        self.0.idle()
    }
    fn finish(&mut self) -> Result<()> {
        self.0.finish()
    }
}
