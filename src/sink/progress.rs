//! A progress bar for headless runs (frames, fps, time left), drawn on standard error and
//! only when standard error is a terminal (indicatif hides it otherwise).

use anyhow::Result;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::{Flow, Frame, Sink};
use crate::stats::Live;

/// Wraps a sink with a progress bar on a terminal.
pub struct Progress {
    inner: Box<dyn Sink>,
    bar: ProgressBar,
}

/// The rate as people read it: "31 fps" (indicatif's `{per_sec}` says "31.0379/s").
fn fps(state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write) {
    let _ = write!(w, "{:.0} fps", state.per_sec());
}

impl Progress {
    /// Wraps `inner`; `total` is the number of frames expected, when known.
    pub fn new(inner: Box<dyn Sink>, total: Option<u64>) -> Self {
        let (len, template) = match total {
            Some(n) => (
                Some(n),
                "{wide_bar} {pos}/{len} frames  {fps}  {elapsed} elapsed, {eta} left",
            ),
            None => (None, "{spinner} {pos} frames  {fps}  {elapsed}"),
        };
        let style = ProgressStyle::with_template(template)
            .expect("template")
            .with_key("fps", fps);
        let bar =
            ProgressBar::with_draw_target(len, ProgressDrawTarget::stderr()).with_style(style);
        Self { inner, bar }
    }
}

impl Sink for Progress {
    fn verb(&self) -> &'static str {
        self.inner.verb()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn status(&mut self, live: &Live) {
        self.inner.status(live)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.inner.composed(picture)
    }
    fn wants_timeline(&self) -> bool {
        self.inner.wants_timeline()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let flow = self.inner.consume(frame)?;
        self.bar.inc(1);
        Ok(flow)
    }
    fn idle(&mut self) -> Result<Flow> {
        self.bar.tick();
        self.inner.idle()
    }
    fn leave(&mut self, input: usize) -> Result<()> {
        self.inner.leave(input)
    }
    fn finish(&mut self) -> Result<()> {
        self.bar.finish_and_clear();
        self.inner.finish()
    }
    fn report(&self) -> super::SinkReport {
        self.inner.report()
    }
}
