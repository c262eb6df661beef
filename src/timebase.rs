//! FFmpeg's time arithmetic, in one place for the sources and the writer: rationals, time
//! bases, timestamps in seconds, and where a file and its streams start.
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
