//! A BGR frame laid out for a model by lookup: each of R, G and B's 256 values becomes an
//! element of 1, 2 or 4 bytes (the byte itself, or a normalised 16- or 32-bit float), the
//! channels interleaved, (height, width, 3), or in planes, (3, height, width). The Python
//! package's `rgb24`, `rgbf16` and `rgbf32` are such tables (`sink::handover::Layout`);
//! the CPU applies them here and the CUDA backend in `fp_lay_out` (`kernels/convert.cu`),
//! so both make the same bytes by construction.
//!
//! A detector fed B, G, R (PaddleOCR's) keeps the frame's own order (`Lookup::bgr`).
//!
//! Invariants: `tables` holds 3 × 256 elements, the first output channel's first, each
//! `element` bytes in the machine's order; the frame's pixel `i`, output channel `c` goes
//! to element `c · n + i` (planar) or `3 · i + c` (interleaved) of the output, read from the
//! pixel's byte `2 - c` (R, G, B from BGR) or, `bgr`, byte `c`.

use crate::frame::FrameSize;

/// A layout by lookup (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Lookup {
    /// Channels in planes (else interleaved).
    pub planar: bool,
    /// Bytes an element.
    pub element: usize,
    /// The first output channel's 256 elements, then the second's, then the third's.
    pub tables: Vec<u8>,
    /// The output channels are B, G, R (else R, G, B).
    pub bgr: bool,
}

impl Lookup {
    /// Each channel's byte as it is, interleaved: RGB from BGR.
    pub fn rgb24() -> Self {
        let tables = (0..3).flat_map(|_| 0..=255u8).collect();
        Self {
            planar: false,
            element: 1,
            tables,
            bgr: false,
        }
    }

    /// Planes whose elements are `value(c, v)` for channel `c` (R, G, B) and byte `v`,
    /// stored as `bytes` makes them (`element` bytes each).
    pub fn planes<const N: usize>(value: impl Fn(usize, u8) -> [u8; N]) -> Self {
        let mut tables = Vec::with_capacity(3 * 256 * N);
        for c in 0..3 {
            for v in 0..=255u8 {
                tables.extend_from_slice(&value(c, v));
            }
        }
        Self {
            planar: true,
            element: N,
            tables,
            bgr: false,
        }
    }

    /// The same, its channels interleaved.
    pub fn interleaved(self) -> Self {
        Self {
            planar: false,
            ..self
        }
    }

    /// The same, its output channels B, G, R (`value`'s `c` counts them so).
    pub fn in_bgr(self) -> Self {
        Self { bgr: true, ..self }
    }

    /// The byte of a BGR pixel output channel `c` is read from.
    fn source(&self, c: usize) -> usize {
        match self.bgr {
            true => c,
            false => 2 - c,
        }
    }

    /// The bytes a `size` frame takes, laid out.
    pub fn bytes(&self, size: FrameSize) -> usize {
        3 * size.width * size.height * self.element
    }

    /// A `size` BGR frame laid out.
    pub fn apply(&self, size: FrameSize, bgr: &[u8]) -> Vec<u8> {
        let (n, e) = (size.width * size.height, self.element);
        let mut out = vec![0u8; self.bytes(size)];
        for (i, px) in bgr.chunks_exact(3).take(n).enumerate() {
            for c in 0..3 {
                let t = (c * 256 + usize::from(px[self.source(c)])) * e;
                let at = match self.planar {
                    true => (c * n + i) * e,
                    false => (3 * i + c) * e,
                };
                out[at..at + e].copy_from_slice(&self.tables[t..t + e]);
            }
        }
        out
    }

    /// A `size` BGR frame laid out as 32-bit floats (a table of 4-byte elements: `planes`
    /// of `f32::to_ne_bytes`): `apply`'s values, as floats.
    pub fn apply_f32(&self, size: FrameSize, bgr: &[u8]) -> Vec<f32> {
        assert_eq!(self.element, 4, "a table of floats has 4-byte elements");
        let table: Vec<f32> = self
            .tables
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        let n = size.width * size.height;
        let mut out = vec![0f32; 3 * n];
        for (i, px) in bgr.chunks_exact(3).take(n).enumerate() {
            for c in 0..3 {
                let at = match self.planar {
                    true => c * n + i,
                    false => 3 * i + c,
                };
                out[at] = table[c * 256 + usize::from(px[self.source(c)])];
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_the_bytes_laid_out_in_either_order() {
        let size = FrameSize::new(5, 3);
        let bgr: Vec<u8> = (0..size.bytes() as u32)
            .map(|v| (v * 53 % 256) as u8)
            .collect();
        let value = |c: usize, v: u8| (f32::from(v) + c as f32 * 1000.0).to_ne_bytes();
        for lookup in [
            Lookup::planes(value),
            Lookup::planes(value).interleaved(),
            Lookup::planes(value).in_bgr(),
        ] {
            let floats = lookup.apply_f32(size, &bgr);
            let bytes: Vec<u8> = floats.iter().flat_map(|v| v.to_ne_bytes()).collect();
            assert_eq!(bytes, lookup.apply(size, &bgr));
            // Pixel 1's first output channel: its R, or with `in_bgr` its B.
            let first = if lookup.planar { floats[1] } else { floats[3] };
            let byte = if lookup.bgr { bgr[3] } else { bgr[5] };
            assert_eq!(first, f32::from(byte));
        }
    }
}
