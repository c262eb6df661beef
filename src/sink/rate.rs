//! `fps:N`: an input's frames at another rate, as ffmpeg's `fps` filter makes them: output
//! frame `k` is at `k / N` seconds (from the first frame's time, rounded to a tick of
//! `1/N`) and shows the last frame whose time, rounded to the nearest tick, is at or before
//! it: frames that fall between two ticks are dropped, a tick with no new frame repeats
//! the last one; at the end the last frame is repeated over its own duration.
//!
//! Invariants: the frames handed on are in order, one per tick, each with its tick's time
//! (`Timestamp` of base `1/N`); what is held between two frames is one copy of the last
//! frame's bytes; what the sink after answers (quit, a key) is passed back as it answers.

use anyhow::Result;

use super::{Flow, Frame, Sink};
use crate::desc::{FrameDesc, Timestamp};
use crate::frame::Ratio;

/// Frames at `rate`, handed to the sink after (module doc).
pub struct Rate {
    /// Frames per second, as a fraction.
    rate: Ratio,
    inner: Box<dyn Sink>,
    /// The next output tick (ticks of `1/rate`).
    next: Option<i64>,
    /// The last frame taken, its tick and its bytes, not yet handed on for every tick.
    held: Option<(FrameDesc, i64, Vec<u8>)>,
    /// Seconds a frame of the input lasts (for the last one).
    frame_s: f64,
    /// Frames handed on.
    out: u64,
}

impl Rate {
    /// `inner`'s frames at `fps` a second, from an input of `input_fps`.
    pub fn new(fps: f64, input_fps: f64, inner: Box<dyn Sink>) -> Self {
        Self {
            rate: crate::frame::ratio_of(fps),
            inner,
            next: None,
            held: None,
            frame_s: 1.0 / input_fps.max(crate::frame::MIN_FPS),
            out: 0,
        }
    }

    /// The nearest tick to `seconds`.
    fn tick(&self, seconds: f64) -> i64 {
        let (n, d) = self.rate;
        (seconds * f64::from(n) / f64::from(d)).round() as i64
    }

    /// The nearest tick to a frame's time: exactly, from its timestamp's ticks (halves away
    /// from zero, as ffmpeg's `av_rescale_q_rnd` with `AV_ROUND_NEAR_INF`), else from its
    /// seconds or its index.
    fn tick_of(&self, desc: &FrameDesc) -> i64 {
        let Some(Timestamp {
            ticks,
            base: (n, d),
        }) = desc.pts
        else {
            return self.tick(desc.index as f64 * self.frame_s);
        };
        let (rn, rd) = self.rate;
        let num = i128::from(ticks) * i128::from(n) * i128::from(rn);
        let den = i128::from(d) * i128::from(rd);
        let q = (2 * num.abs() + den) / (2 * den);
        (num.signum() * q) as i64
    }

    /// Hands the held frame on for every tick before `until`.
    fn flush_until(&mut self, until: i64) -> Result<Flow> {
        let Some((desc, _, bytes)) = &self.held else {
            return Ok(Flow::Continue);
        };
        let mut next = self.next.unwrap_or(until);
        while next < until {
            let (n, d) = self.rate;
            let mut at = desc.clone();
            at.pts = Some(Timestamp {
                ticks: next,
                base: (d, n),
            });
            at.index = self.out;
            self.out += 1;
            next += 1;
            self.next = Some(next);
            // What the sink after says (quit, a key) is passed back at once.
            let flow = self.inner.consume(&Frame { desc: &at, bytes })?;
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        self.next = Some(next);
        Ok(Flow::Continue)
    }
}

impl Sink for Rate {
    fn verb(&self) -> &'static str {
        self.inner.verb()
    }
    fn describe(&self) -> String {
        let (n, d) = self.rate;
        format!(
            "{} at {} fps",
            self.inner.describe(),
            f64::from(n) / f64::from(d)
        )
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let tick = self.tick_of(frame.desc);
        self.next.get_or_insert(tick);
        let flow = self.flush_until(tick)?;
        let mut bytes = self.held.take().map(|h| h.2).unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(frame.bytes);
        self.held = Some((frame.desc.clone(), tick, bytes));
        Ok(flow)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.inner.composed(picture)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.inner.status(live)
    }
    fn idle(&mut self) -> Result<Flow> {
        self.inner.idle()
    }
    fn begin_finish(&mut self) {
        // The last frame lasts its own duration.
        if let Some((desc, _, _)) = &self.held {
            let end = desc.seconds().unwrap_or(desc.index as f64 * self.frame_s) + self.frame_s;
            let until = self.tick(end);
            if let Err(e) = self.flush_until(until) {
                crate::warn!("{}: the last frames: {e:#}", self.inner.describe());
            }
            self.held = None;
        }
        self.inner.begin_finish()
    }
    fn finish(&mut self) -> Result<()> {
        self.begin_finish();
        self.inner.finish()
    }
    fn report(&self) -> super::SinkReport {
        self.inner.report()
    }
}
