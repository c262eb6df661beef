//! The frame descriptor: what every stage knows about a frame besides its bytes. Which input
//! it came from, its place in that input, its time (a rational, on the input's time base),
//! its pixel format and size, where each plane starts and how long its rows are, and where
//! the bytes live (a ring slot's host buffer, or memory lent by its owner: a decoder's
//! surface on the device, a CPU decoder's picture in host memory, a processed frame the
//! CUDA backend lends on the device or the CPU backend in host memory).
//!
//! A sink takes a `Frame` (a descriptor and the bytes it describes) and reads the format
//! from it; a backend picks its lane set by the descriptor's size and format.
//!
//! Invariants: a descriptor made by `FrameDesc::host` describes a frame packed as
//! `PixelFormat::bytes` lays it out (`Planes::packed`: planes one after another, rows
//! without padding), which is how the ring's buffers hold every frame in host memory; a
//! source whose decoder pads rows copies them packed into the slot, or describes its own
//! pitches in `planes` (`Planes::is_packed` says which; a lent frame is described at its
//! owner's pitches); a `Memory::Device` or `Memory::HostLent` frame holds its lease until the
//! descriptor is dropped or its memory replaced (the CUDA backend replaces it as the frame
//! completes), and dropping the lease gives the memory back to its owner.

use std::sync::Arc;

use crate::frame::{FrameSize, Ratio};
use crate::pixel::PixelFormat;
pub use crate::pixel::{Plane, Planes};

/// Which input of the run a frame came from (0 for a single-input run).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InputId(pub u16);

/// A time as `ticks` of `base` seconds (`base` = (numerator, denominator), FFmpeg's time
/// base), so that a file's timestamps are kept exactly and turned into seconds only where
/// seconds are wanted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timestamp {
    /// Ticks of `base`.
    pub ticks: i64,
    /// Seconds per tick, as a fraction (positive terms).
    pub base: Ratio,
}

impl Timestamp {
    /// Microseconds: the base of a time known only in seconds (a camera's clock, OpenCV's
    /// position in milliseconds).
    pub const MICROS: Ratio = (1, 1_000_000);

    /// `seconds`, rounded to the microsecond; None for what is not a time.
    pub fn from_seconds(seconds: f64) -> Option<Self> {
        let ticks = (seconds * 1e6).round();
        (ticks.is_finite() && ticks.abs() < 9.0e18).then_some(Self {
            ticks: ticks as i64,
            base: Self::MICROS,
        })
    }

    /// The time in seconds.
    pub fn seconds(self) -> f64 {
        let (n, d) = self.base;
        self.ticks as f64 * f64::from(n) / f64::from(d)
    }
}

/// What lends a frame: dropping the lease gives the memory back (a decoder's pool of
/// surfaces or pictures, the backends' frames lent to an embedding program).
pub trait Lease: Send + Sync + std::fmt::Debug {
    /// A consumer reads the memory on CUDA stream `stream` (a `CUstream`; 1 is the legacy
    /// default stream, 2 the per-thread one): the memory is given back only after the work
    /// queued there by the time the lease is dropped. A lease whose memory is never handed
    /// outside framepipe ignores it.
    fn read_on(&self, _stream: u64) -> anyhow::Result<()> {
        Ok(())
    }

    /// The lent bytes, where they are host memory this lease owns whole (a processed frame
    /// the CPU backend lends); None for memory it only points at.
    fn host_bytes(&self) -> Option<&[u8]> {
        None
    }
}

/// Where a frame's bytes live.
#[derive(Clone, Debug, Default)]
pub enum Memory {
    /// In the ring slot's host buffer (page-locked while a CUDA backend holds the ring).
    #[default]
    Host,
    /// In device memory of CUDA device `device` at `ptr`, lent by `lease`'s owner until the
    /// last copy of this descriptor is dropped.
    Device {
        /// The CUDA device's index.
        device: usize,
        /// The frame's first byte (planes at `Planes` offsets from it).
        ptr: u64,
        /// Gives the memory back when dropped.
        lease: Arc<dyn Lease>,
    },
    /// In host memory at `ptr`, lent by `lease`'s owner until the last copy of this
    /// descriptor is dropped: a CPU decoder's picture as it decoded it (page-locked where
    /// the CUDA backend takes it, `source::pinned`), or a processed frame the CPU backend
    /// lends to an embedding program (`backend::host_lend`; `Lease::host_bytes` reads it).
    HostLent {
        /// The frame's first byte (planes at `Planes` offsets from it).
        ptr: u64,
        /// Gives the memory back when dropped.
        lease: Arc<dyn Lease>,
    },
}

impl Memory {
    /// A frame lent in host memory whose lease owns its bytes (`Lease::host_bytes`): its
    /// bytes from its first (`ptr`) to the end of the lent buffer; None for any other.
    pub fn host_frame(&self) -> Option<&[u8]> {
        let Memory::HostLent { ptr, lease } = self else {
            return None;
        };
        let bytes = lease.host_bytes()?;
        let at = usize::try_from(ptr.checked_sub(bytes.as_ptr() as u64)?).ok()?;
        bytes.get(at..)
    }
}

impl PartialEq for Memory {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Memory::Host, Memory::Host) => true,
            (
                Memory::Device { device, ptr, .. },
                Memory::Device {
                    device: d2,
                    ptr: p2,
                    ..
                },
            ) => device == d2 && ptr == p2,
            (Memory::HostLent { ptr, .. }, Memory::HostLent { ptr: p2, .. }) => ptr == p2,
            _ => false,
        }
    }
}

/// What every stage knows about a frame (module doc).
#[derive(Clone, Debug, PartialEq)]
pub struct FrameDesc {
    /// The input it came from.
    pub input: InputId,
    /// Its place in that input's sequence of captured frames (0, 1, 2, …).
    pub index: u64,
    /// Its presentation time, where its source has one.
    pub pts: Option<Timestamp>,
    /// Its pixel format.
    pub format: PixelFormat,
    /// Its size in pixels.
    pub size: FrameSize,
    /// Where each plane lies in its bytes.
    pub planes: Planes,
    /// Where its bytes are.
    pub memory: Memory,
}

impl FrameDesc {
    /// Frame `index` of input 0: a `size` frame of `format`, packed, in host memory, with no
    /// time yet.
    pub fn host(format: PixelFormat, size: FrameSize) -> Self {
        Self {
            input: InputId::default(),
            index: 0,
            pts: None,
            format,
            size,
            planes: Planes::packed(format, size),
            memory: Memory::Host,
        }
    }

    /// The same frame (input, index, time, size) in another format, packed in host memory:
    /// what a backend's output of this frame is.
    pub fn converted(&self, format: PixelFormat) -> Self {
        Self {
            format,
            planes: Planes::packed(format, self.size),
            memory: Memory::Host,
            ..self.clone()
        }
    }

    /// The same frame at another size (a chain that scaled, cropped or turned it), packed.
    pub fn resized(&self, size: FrameSize) -> Self {
        Self {
            size,
            planes: Planes::packed(self.format, size),
            ..self.clone()
        }
    }

    /// The bytes a packed frame of this format and size takes.
    pub fn bytes(&self) -> usize {
        self.format.bytes(self.size)
    }

    /// Its time in seconds, where it has one.
    pub fn seconds(&self) -> Option<f64> {
        self.pts.map(Timestamp::seconds)
    }
}

/// A frame as a sink sees it: its descriptor and its bytes (host memory, laid out as the
/// descriptor's planes say). The bytes are empty for a frame the backend did not bring
/// down because only the mosaic it composes needed it (`tiles::FullFrames`).
#[derive(Clone, Copy, Debug)]
pub struct Frame<'a> {
    /// What the bytes are.
    pub desc: &'a FrameDesc,
    /// The bytes.
    pub bytes: &'a [u8],
}

impl Frame<'_> {
    /// The frame's size.
    pub fn size(&self) -> FrameSize {
        self.desc.size
    }

    /// The frame's format.
    pub fn format(&self) -> PixelFormat {
        self.desc.format
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_planes_follow_each_other() {
        let size = FrameSize::new(8, 6);
        let p = Planes::packed(PixelFormat::I420, size);
        let v: Vec<_> = p.iter().map(|p| (p.offset, p.pitch, p.rows_per)).collect();
        assert_eq!(v, [(0, 8, 1), (48, 4, 2), (60, 4, 2)]);
        assert!(p.is_packed(PixelFormat::I420, size));
        assert!(!p.is_packed(PixelFormat::Nv12, size));
        let bgr = FrameDesc::host(PixelFormat::Bgr24, size);
        assert_eq!(bgr.planes.iter().count(), 1);
        assert_eq!(bgr.bytes(), 8 * 6 * 3);
        let out = FrameDesc { index: 7, ..bgr }.converted(PixelFormat::Gray);
        assert_eq!(
            (out.index, out.format, out.bytes()),
            (7, PixelFormat::Gray, 48)
        );
    }

    #[test]
    fn times_keep_their_base() {
        let t = Timestamp {
            ticks: 1001,
            base: (1, 30000),
        };
        assert_eq!(t.seconds(), 1001.0 / 30000.0);
        let s = Timestamp::from_seconds(1.5).unwrap();
        assert_eq!((s.ticks, s.base), (1_500_000, Timestamp::MICROS));
        assert!(Timestamp::from_seconds(f64::NAN).is_none());
    }
}
