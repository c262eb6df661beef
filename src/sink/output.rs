//! What an output is: a place frames are written (a video file, a stream, HLS, an image
//! sequence, standard output, nowhere). An output takes frames in order and finishes; it
//! says what it stored and what its streams sent. It never steers the run (no keys, no
//! controls, no figures on screen): that is a display's job (`display`).
//!
//! Invariants: `finish` is called exactly once, also after an error, so that a file is
//! finalized; an output whose reader went away says so (`Taken::Closed`) and the run stops.

use anyhow::Result;

use super::{Flow, Frame, Sink};

/// What an output did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taken {
    /// Taken (written, queued, or dropped as the output's own policy says).
    Kept,
    /// The output can take no more (its reader closed standard output): the run stops.
    Closed,
}

/// A place frames are written (module doc).
pub trait Output {
    /// One word for the summary.
    fn verb(&self) -> &'static str {
        "written"
    }
    /// One line for the log.
    fn describe(&self) -> String;
    /// Takes one processed frame, in the format the run negotiated for it.
    fn consume(&mut self, frame: &Frame) -> Result<Taken>;
    /// Starts ending without waiting (a stream lets its thread send what is queued), so
    /// that several outputs end together: `finish` then waits for each.
    fn begin_finish(&mut self) {}
    /// Flushes and closes; called exactly once, also after errors.
    fn finish(&mut self) -> Result<()>;
    /// Frames the output really holds, once finished, where it checks (a video file reopens
    /// what it wrote); None where every consumed frame is known to be stored.
    fn stored(&self) -> Option<u64> {
        None
    }
    /// What each stream out among these outputs sent and dropped, once finished.
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        Vec::new()
    }
}

/// `output` as one of the run's sinks.
pub fn boxed(output: impl Output + 'static) -> Box<dyn Sink> {
    Box::new(AsSink(output))
}

/// An output among the run's sinks: it answers the pipeline's frames, and steers nothing.
struct AsSink<O>(O);

impl<O: Output> Sink for AsSink<O> {
    fn verb(&self) -> &'static str {
        self.0.verb()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        Ok(match self.0.consume(frame)? {
            Taken::Kept => Flow::Continue,
            Taken::Closed => Flow::Quit,
        })
    }
    fn begin_finish(&mut self) {
        self.0.begin_finish()
    }
    fn finish(&mut self) -> Result<()> {
        self.0.finish()
    }
    fn stored(&self) -> Option<u64> {
        self.0.stored()
    }
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        self.0.streams()
    }
}
