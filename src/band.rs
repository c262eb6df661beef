//! How a frame is cut into horizontal bands, computed once per frame size and chain.
//!
//! Invariants: bands are contiguous, non-empty, in order and cover every row exactly once;
//! band sizes differ by at most one alignment unit (one row; two for 4:2:0 frames, whose
//! bands start and end on even rows: `BandPlan::aligned`); each band's input rows are its own rows widened by
//! the chain's radius, clamped to the frame.

use std::ops::Range;

/// One band: the rows it writes and the rows it must read to write them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Band {
    /// Rows this band writes.
    pub rows: Range<usize>,
    /// Rows this band reads: its own plus the chain's radius on each side, within the frame.
    pub input_rows: Range<usize>,
}

impl Band {
    /// Where the band's own rows start inside its input rows.
    pub fn offset_in_input(&self) -> usize {
        self.rows.start - self.input_rows.start
    }
}

/// A band count a frame can't be cut into; the caller names the option it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BandError {
    /// No band.
    #[error("must be at least 1")]
    None,
    /// More bands than rows.
    #[error("{count} is more than the frame's {height} rows")]
    MoreThanRows {
        /// Asked.
        count: usize,
        /// The frame's rows.
        height: usize,
    },
    /// More bands than 4:2:0 row pairs.
    #[error(
        "{count} is more than the frame's {pairs} pairs of rows (4:2:0 bands hold whole pairs)"
    )]
    MoreThanPairs {
        /// Asked.
        count: usize,
        /// The frame's row pairs.
        pairs: usize,
    },
}

/// The bands of one frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BandPlan {
    bands: Vec<Band>,
}

impl BandPlan {
    /// Cuts `height` rows into `count` bands, each reading `radius` extra rows on both sides.
    /// The error says what is wrong with `count`; the caller names the option it came from.
    pub fn new(height: usize, count: usize, radius: usize) -> Result<Self, BandError> {
        Self::aligned(height, count, radius, 1)
    }

    /// `new`, with every band's rows and input rows starting and ending on multiples of
    /// `align` (or at the frame's end): 2 for 4:2:0 frames, whose chroma rows each belong to
    /// two luma rows.
    pub fn aligned(
        height: usize,
        count: usize,
        radius: usize,
        align: usize,
    ) -> Result<Self, BandError> {
        let align = align.max(1);
        let units = height.div_ceil(align);
        if count == 0 {
            return Err(BandError::None);
        }
        if count > units {
            return Err(if align == 1 {
                BandError::MoreThanRows { count, height }
            } else {
                BandError::MoreThanPairs {
                    count,
                    pairs: units,
                }
            });
        }
        let base = units / count;
        let extra = units % count;
        let mut start = 0;
        let down = |r: usize| r / align * align;
        let up = |r: usize| r.div_ceil(align) * align;
        let bands = (0..count)
            .map(|i| {
                let end = (start + (base + usize::from(i < extra)) * align).min(height);
                let rows = start..end;
                start = rows.end;
                let input_rows =
                    down(rows.start.saturating_sub(radius))..up(rows.end + radius).min(height);
                Band { rows, input_rows }
            })
            .collect();
        Ok(Self { bands })
    }

    /// The bands, top to bottom.
    pub fn bands(&self) -> &[Band] {
        &self.bands
    }

    /// Number of bands.
    pub fn len(&self) -> usize {
        self.bands.len()
    }

    /// Whether the plan has no band (never, for a plan `new` made).
    pub fn is_empty(&self) -> bool {
        self.bands.is_empty()
    }

    /// The most input rows any band reads: the size of each band's device buffer.
    pub fn max_input_rows(&self) -> usize {
        self.bands
            .iter()
            .map(|b| b.input_rows.len())
            .max()
            .unwrap_or(0)
    }
}

/// The default band count for a frame height, from the H200 measurements in BENCHMARKS.md.
pub fn default_bands(height: usize) -> usize {
    let wanted = match height {
        0..=360 => 1,
        361..=1200 => 4,
        _ => 8,
    };
    wanted.min(height.max(1))
}

/// The default band count for frames whose bands keep `row_align` rows together
/// (`PixelFormat::row_align`): `default_bands`, halved for 4:2:0 frames (2), whose bands
/// each take two or three copies a way (one a plane): a
/// single I420 frame is ready soonest with 2 bands at 1080p (0.122 ms against 0.130 with
/// 4) and 4 at 4K (0.361 ms against 0.382 with 8) (BENCHMARKS.md, "Pixel formats").
pub fn default_bands_in(height: usize, row_align: usize) -> usize {
    let bands = default_bands(height);
    if row_align == 2 {
        (bands / 2).max(1)
    } else {
        bands
    }
}

/// The default frames in flight for a frame height: 4, and 6 above 1200 rows, where a 4K
/// frame's copies need a deeper queue to keep both copy engines busy (BENCHMARKS.md, "4K
/// defaults").
pub fn default_in_flight(height: usize) -> usize {
    if height > 1200 {
        6
    } else {
        4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covers_every_row_once() {
        for height in [1, 2, 17, 479, 1080] {
            for count in 1..=16.min(height) {
                let plan = BandPlan::new(height, count, 2).unwrap();
                let mut next = 0;
                for b in plan.bands() {
                    assert_eq!(b.rows.start, next);
                    assert!(!b.rows.is_empty());
                    assert!(b.input_rows.start <= b.rows.start && b.input_rows.end >= b.rows.end);
                    assert!(b.input_rows.end <= height);
                    next = b.rows.end;
                }
                assert_eq!(next, height);
                let sizes: Vec<_> = plan.bands().iter().map(|b| b.rows.len()).collect();
                assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            }
        }
    }

    #[test]
    fn aligned_bands_keep_row_pairs_together() {
        for height in [2, 18, 480, 1080] {
            for count in 1..=16.min(height / 2) {
                for radius in [0, 1, 3] {
                    let plan = BandPlan::aligned(height, count, radius, 2).unwrap();
                    let mut next = 0;
                    for b in plan.bands() {
                        assert_eq!(b.rows.start, next);
                        for r in [&b.rows, &b.input_rows] {
                            assert!(r.start % 2 == 0 && r.end % 2 == 0, "{r:?}");
                        }
                        assert!(b.input_rows.start + radius >= b.rows.start.min(radius));
                        assert!(b.input_rows.start <= b.rows.start.saturating_sub(radius));
                        assert!(b.input_rows.end >= (b.rows.end + radius).min(height));
                        next = b.rows.end;
                    }
                    assert_eq!(next, height);
                }
            }
        }
        assert!(BandPlan::aligned(10, 6, 0, 2)
            .unwrap_err()
            .to_string()
            .contains("5 pairs of rows"));
    }

    #[test]
    fn refuses_impossible_counts() {
        assert!(BandPlan::new(10, 0, 0)
            .unwrap_err()
            .to_string()
            .contains("at least 1"));
        assert!(BandPlan::new(10, 11, 0)
            .unwrap_err()
            .to_string()
            .contains("more than the frame's 10 rows"));
    }

    #[test]
    fn halos_clamp_at_edges() {
        let plan = BandPlan::new(10, 2, 3).unwrap();
        assert_eq!(plan.bands()[0].input_rows, 0..8);
        assert_eq!(plan.bands()[1].input_rows, 2..10);
        assert_eq!(plan.bands()[1].offset_in_input(), 3);
    }
}
