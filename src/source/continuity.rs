//! A file's frame times kept going forward, as ffmpeg keeps them: where a stream's
//! timestamps jump back (files joined with `cat`, a camera's clock reset) or, in a format
//! that allows discontinuities (MPEG-TS), far forward, the times after the jump are offset
//! so that the next frame follows the one before by one frame's duration.
//!
//! Invariants: times never go back by more than `BACK` between frames handed out; a jump is
//! reported once, when it happens (`Continuity::next` says how far); times that only wobble
//! (B-frames reordered within `BACK`) are left as they are.

/// The most a time may go back before it is taken as a discontinuity (ffmpeg's 0.1 s).
pub const BACK_SECONDS: f64 = 0.1;
/// The most a time may jump forward in a discontinuous format (ffmpeg's
/// `dts_delta_threshold`, 10 s).
pub const FORWARD_SECONDS: f64 = 10.0;

/// The running offset of one stream's times, in ticks of its time base.
#[derive(Clone, Debug)]
pub struct Continuity {
    /// Seconds per tick.
    tick: f64,
    /// One frame's duration in ticks (from the rate, else the last step).
    frame: i64,
    /// Forward jumps are discontinuities too (`AVFMT_TS_DISCONT`).
    forward: bool,
    offset: i64,
    last: Option<i64>,
}

impl Continuity {
    /// For a stream whose tick is `tick` seconds, `fps` frames a second (where known), in a
    /// format that allows forward discontinuities where `forward`.
    pub fn new(tick: f64, fps: Option<f64>, forward: bool) -> Self {
        let frame = fps
            .filter(|f| *f > 0.0 && tick > 0.0)
            .map_or(1, |f| ((1.0 / f) / tick).round().max(1.0) as i64);
        Self {
            tick,
            frame,
            forward,
            offset: 0,
            last: None,
        }
    }

    /// The time to hand out for a frame stamped `ticks`, and the jump in seconds where this
    /// frame starts a discontinuity.
    pub fn next(&mut self, ticks: i64) -> (i64, Option<f64>) {
        let mut at = ticks.saturating_add(self.offset);
        let mut jump = None;
        if let Some(last) = self.last {
            let step = (at - last) as f64 * self.tick;
            let back = step < -BACK_SECONDS;
            if back || (self.forward && step > FORWARD_SECONDS) {
                let corrected = last + self.frame;
                self.offset += corrected - at;
                at = corrected;
                jump = Some(step);
            } else if at > last {
                self.frame = self.frame.min(at - last).max(1);
            }
        }
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
        (at, jump)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joined_files_keep_going_forward() {
        // 90 kHz ticks, 30 fps: 3000 ticks a frame; three 2 s files joined.
        let mut c = Continuity::new(1.0 / 90_000.0, Some(30.0), true);
        let mut out = Vec::new();
        let mut jumps = 0;
        for _ in 0..3 {
            for f in 0..60 {
                let (at, jump) = c.next(126_000 + f * 3000);
                jumps += usize::from(jump.is_some());
                out.push(at);
            }
        }
        assert_eq!(jumps, 2);
        assert!(out.windows(2).all(|w| w[1] - w[0] == 3000), "{out:?}");
    }

    #[test]
    fn reordered_times_within_a_tenth_are_left_alone() {
        let mut c = Continuity::new(1.0 / 1000.0, Some(25.0), false);
        let times: Vec<i64> = [0, 80, 40, 120, 160].iter().map(|&t| c.next(t).0).collect();
        assert_eq!(times, vec![0, 80, 40, 120, 160]);
        // A forward jump is kept where the format has no discontinuities (a pause).
        assert_eq!(c.next(60_000), (60_000, None));
    }
}
