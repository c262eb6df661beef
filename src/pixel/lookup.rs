//! A BGR frame laid out for a model by lookup: each of R, G and B's 256 values becomes an
//! element of 1, 2 or 4 bytes (the byte itself, or a normalised 16- or 32-bit float), the
//! channels interleaved, (height, width, 3), or in planes, (3, height, width). The Python
//! package's `rgb24`, `rgbf16` and `rgbf32` are such tables (`sink::handover::Layout`);
//! the CPU applies them here and the CUDA backend in `fp_lay_out` (`kernels/convert.cu`),
//! so both make the same bytes by construction.
//!
//! Invariants: `tables` holds 3 × 256 elements, R's first, each `element` bytes in the
//! machine's order; the frame's pixel `i`, channel `c` goes to element `c · n + i` (planar)
//! or `3 · i + c` (interleaved) of the output.

use crate::frame::FrameSize;

/// A layout by lookup (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct Lookup {
    /// Channels in planes (else interleaved).
    pub planar: bool,
    /// Bytes an element.
    pub element: usize,
    /// R's 256 elements, then G's, then B's.
    pub tables: Vec<u8>,
}

impl Lookup {
    /// Each channel's byte as it is, interleaved: RGB from BGR.
    pub fn rgb24() -> Self {
        let tables = (0..3).flat_map(|_| 0..=255u8).collect();
        Self {
            planar: false,
            element: 1,
            tables,
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
                let t = (c * 256 + usize::from(px[2 - c])) * e;
                let at = match self.planar {
                    true => (c * n + i) * e,
                    false => (3 * i + c) * e,
                };
                out[at..at + e].copy_from_slice(&self.tables[t..t + e]);
            }
        }
        out
    }
}
