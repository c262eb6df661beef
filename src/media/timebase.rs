//! FFmpeg's time arithmetic, in one place for the sources and the writer: rationals, time
//! bases, timestamps in seconds, where a file and its streams start, and a copied stream's
//! timeline made continuous across a jump (`Timeline`).
//!
//! Invariants: a missing value (`AV_NOPTS_VALUE`, a zero denominator) is `None`, never a
//! number; seconds are f64 from exact integer arithmetic up to the last division.

use ffmpeg_next as ff;

pub use crate::frame::Ratio;

/// `(n, d)` as FFmpeg's rational.
pub fn rational((n, d): Ratio) -> ff::Rational {
    ff::Rational::new(n, d)
}

/// FFmpeg's rational as a fraction; None where it is unset (zero or negative terms).
pub fn ratio(r: ff::Rational) -> Option<Ratio> {
    (r.numerator() > 0 && r.denominator() > 0).then(|| (r.numerator(), r.denominator()))
}

/// `ts` ticks of `tb`, in seconds.
pub fn seconds(ts: i64, tb: ff::Rational) -> f64 {
    ts as f64 * f64::from(tb.numerator()) / f64::from(tb.denominator())
}

/// Where `stream` starts, in seconds; None where it does not say.
pub fn stream_start(stream: &ff::format::stream::Stream) -> Option<f64> {
    let ts = stream.start_time();
    (ts != ff::ffi::AV_NOPTS_VALUE).then(|| seconds(ts, stream.time_base()))
}

/// Where the file `input` starts (its earliest stream), in seconds; None where it does not
/// say.
pub fn file_start(input: &ff::format::context::Input) -> Option<f64> {
    // SAFETY: `input` is an open input context; `start_time` is a plain field of it.
    let ts = unsafe { (*input.as_ptr()).start_time };
    (ts != ff::ffi::AV_NOPTS_VALUE).then(|| ts as f64 / f64::from(ff::ffi::AV_TIME_BASE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fractions_and_seconds() {
        assert_eq!(ratio(rational((30000, 1001))), Some((30000, 1001)));
        assert_eq!(ratio(ff::Rational::new(0, 1)), None);
        assert_eq!(seconds(90_000, rational((1, 90_000))), 1.0);
        assert_eq!(seconds(1001, rational((1, 30000))), 1001.0 / 30000.0);
    }
}

/// A forward jump of a copied stream's timestamps larger than this is a discontinuity
/// (ffmpeg's `dts_delta_threshold`).
pub const FORWARD_LIMIT_S: i64 = 10;

/// A copied stream's packets' timeline made continuous (a looping or joined file, a camera
/// that restarted): where a decoding time goes back, or forward by more than
/// `FORWARD_LIMIT_S`, this and every later packet of the stream are offset to go on from the
/// last one by the last step, as ffmpeg offsets a discontinuity; nothing is dropped.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timeline {
    /// Added to every timestamp of the stream since its last jump.
    offset: i64,
    /// The last decoding time, offset.
    last: Option<i64>,
    /// The last step between two decoding times: where a jump puts the next packet.
    step: i64,
}

impl Timeline {
    /// Offsets `packet` (of time base `tb`) onto the continuous timeline; the jump it made
    /// (ticks of `tb`), where it made one.
    pub fn carry(&mut self, packet: &mut ff::Packet, tb: ff::Rational) -> Option<i64> {
        let mut jump = None;
        if let Some(dts) = packet.dts() {
            let mut now = dts + self.offset;
            if let Some(last) = self.last {
                let limit = FORWARD_LIMIT_S * i64::from(tb.denominator())
                    / i64::from(tb.numerator()).max(1);
                if now < last || now - last > limit {
                    let to = last + self.step.max(1);
                    self.offset += to - now;
                    jump = Some(now - last);
                    now = to;
                } else if now > last {
                    self.step = now - last;
                }
            }
            self.last = Some(now);
        }
        let offset = self.offset;
        if offset != 0 {
            packet.set_dts(packet.dts().map(|t| t + offset));
            packet.set_pts(packet.pts().map(|t| t + offset));
        }
        jump
    }
}
