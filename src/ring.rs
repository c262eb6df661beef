//! The ring of frame slots that travel capture → backend → sink → capture.
//!
//! Invariants:
//! - every frame buffer is allocated once, page-aligned, before the first frame (its pages
//!   come from the kernel, zeroed, as they are first touched); none is allocated or
//!   registered per frame;
//! - a `Slot` moves by value through channels, so exactly one thread can touch its buffers;
//! - a buffer's page lock (set by the CUDA backend) is released before its memory is freed.

use std::alloc::{self, Layout};
use std::ops::{Deref, DerefMut};
use std::time::Instant;

use crate::desc::FrameDesc;
use crate::frame::FrameSize;
use crate::pixel::{Formats, PixelFormat};

const PAGE: usize = 4096;

/// Bytes a buffer of `len` bytes takes: page-rounded, at least one page; None on overflow.
pub fn allocated_bytes(len: usize) -> Option<usize> {
    len.max(1).div_ceil(PAGE).checked_mul(PAGE)
}

/// A page-aligned, zero-initialised host buffer of fixed length: an anonymous mapping of its
/// own (memmap2), whose zeroed pages the kernel provides as they are first touched (the
/// first frame written into it, or the page lock), so that making a ring costs no time at
/// start-up (zeroing 100 MB through the allocator took 56 ms).
pub struct HostBuffer {
    /// Keeps the buffer page-locked while held. Declared before `map`: fields drop in
    /// order, so the lock is released before the memory is unmapped.
    lock: Option<Box<dyn Send>>,
    /// The mapping: `len` page-rounded, at least one page.
    map: memmap2::MmapMut,
    len: usize,
}

// SAFETY: through `&HostBuffer` only its bytes are read (`Deref`) and whether a lock token is
// attached; the token itself is touched only through `&mut`, so sharing is as safe as a
// `Vec<u8>`'s (the backend's mosaic pictures are shared, read-only, with the sink thread).
unsafe impl Sync for HostBuffer {}

impl HostBuffer {
    /// A zeroed buffer of `len` bytes, page-aligned and page-rounded.
    pub fn new(len: usize) -> Self {
        let size = allocated_bytes(len).expect("frame buffer size (checked by budget)");
        let map = memmap2::MmapMut::map_anon(size).unwrap_or_else(|_| {
            alloc::handle_alloc_error(
                Layout::from_size_align(size, PAGE).expect("frame buffer layout"),
            )
        });
        Self {
            lock: None,
            map,
            len,
        }
    }

    /// The whole page-rounded allocation, the range a page lock must cover.
    pub fn allocation(&mut self) -> (*mut u8, usize) {
        (self.map.as_mut_ptr(), self.map.len())
    }

    /// Attaches a page-lock token; the previous one, if any, is released first.
    pub fn set_lock(&mut self, lock: Option<Box<dyn Send>>) {
        self.lock = None;
        self.lock = lock;
    }

    /// Whether a page-lock token is attached.
    pub fn is_locked(&self) -> bool {
        self.lock.is_some()
    }
}

impl Deref for HostBuffer {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.map[..self.len]
    }
}

impl DerefMut for HostBuffer {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.map[..self.len]
    }
}

/// Host-side times of one frame, filled in as it moves along.
#[derive(Clone, Copy, Debug)]
pub struct Stamps {
    /// When the capture thread started reading the frame.
    pub read_start: Instant,
    /// When the frame was in its ring buffer.
    pub captured: Instant,
    /// How long the read took, ms.
    pub capture_ms: f64,
    /// When the backend took it.
    pub submitted: Instant,
    /// When its output was ready in host memory.
    pub done: Instant,
}

impl Default for Stamps {
    fn default() -> Self {
        let now = Instant::now();
        Self {
            read_start: now,
            captured: now,
            capture_ms: 0.0,
            submitted: now,
            done: now,
        }
    }
}

/// One frame's worth of buffers plus what is known about the frame in it.
pub struct Slot {
    /// The captured frame in `input` (its input, index, time, format, size and planes).
    pub desc: FrameDesc,
    /// The format the backend writes into `output`.
    pub output_format: PixelFormat,
    /// The captured frame's bytes (host memory, as `desc` lays them out).
    pub input: HostBuffer,
    /// The processed frame (in `output_format`, packed).
    pub output: HostBuffer,
    /// Host times of the frame's way.
    pub stamps: Stamps,
    /// Device time of each stage for this frame, when the backend measures it.
    pub gpu: Option<crate::stats::StageTimes>,
    /// The backend's trace spans of this frame (traced frames only; the vector is reused).
    pub spans: Vec<crate::trace::Span>,
    /// The backend left `output` as it was: only the mosaic it composes needed the frame
    /// (`tiles::FullFrames`).
    pub output_skipped: bool,
    /// The processed frame's size, where the chain changed it (set by the backend).
    pub output_size: Option<FrameSize>,
    /// Where the processed frame is: `output` (host), or a buffer lent with it (`output` is
    /// left as it was, and the lease goes with the frame to the sink, then leaves the slot):
    /// a device buffer the CUDA backend lends, or a host buffer the CPU backend lends, to the
    /// run's one consumer (`BackendConfig::lend`); or the decoder's picture itself, where the
    /// CPU backend changed nothing (`passed_as_lent`).
    pub output_memory: crate::desc::Memory,
    /// The backend passed the captured frame on where its source lent it: `output_memory`
    /// is the source's lease and the frame lies at `desc.planes`' pitches (the CPU backend,
    /// where nothing changes it); the sink thread packs it into `output` for a sink that
    /// reads pixels.
    pub passed_as_lent: bool,
}

impl Slot {
    /// A slot for `size` frames in `formats` (input, output), buffers allocated.
    pub fn new(size: FrameSize, formats: Formats) -> Self {
        Self::resized(size, size, formats)
    }

    /// A slot for `size` frames that the backend makes into `out` frames.
    pub fn resized(size: FrameSize, out: FrameSize, formats: Formats) -> Self {
        Self {
            desc: FrameDesc::host(formats.input, size),
            output_format: formats.output,
            input: HostBuffer::new(formats.input.bytes(size)),
            output: HostBuffer::new(formats.output.bytes(out)),
            stamps: Stamps::default(),
            gpu: None,
            spans: Vec::new(),
            output_skipped: false,
            output_size: None,
            output_memory: crate::desc::Memory::Host,
            passed_as_lent: false,
        }
    }

    /// The frame's position in its input (0, 1, 2, …).
    pub fn seq(&self) -> u64 {
        self.desc.index
    }

    /// The frame's size.
    pub fn size(&self) -> FrameSize {
        self.desc.size
    }

    /// The formats of `input` and `output`.
    pub fn formats(&self) -> Formats {
        Formats {
            input: self.desc.format,
            output: self.output_format,
        }
    }

    /// The processed frame's descriptor: the captured frame's, in `output_format`, at its
    /// output size, where the backend put it (`output_memory`).
    pub fn output_desc(&self) -> FrameDesc {
        let mut desc = self.desc.converted(self.output_format);
        if let Some(size) = self.output_size {
            desc = desc.resized(size);
        }
        desc.memory = self.output_memory.clone();
        if self.passed_as_lent {
            desc.planes = self.desc.planes;
        }
        desc
    }

    /// The input and output buffers (for `Backend::attach`).
    pub fn buffers_mut(&mut self) -> [&mut HostBuffer; 2] {
        [&mut self.input, &mut self.output]
    }
}

/// Allocates the ring's slots, their buffers sized for `formats`.
pub fn allocate(count: usize, size: FrameSize, formats: Formats) -> Vec<Slot> {
    allocate_resized(count, size, size, formats)
}

/// Allocates the ring's slots for `size` frames the backend makes into `out` frames.
pub fn allocate_resized(
    count: usize,
    size: FrameSize,
    out: FrameSize,
    formats: Formats,
) -> Vec<Slot> {
    (0..count)
        .map(|_| Slot::resized(size, out, formats))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_page_aligned_and_zeroed() {
        let mut b = HostBuffer::new(641 * 479 * 3);
        assert_eq!(b.as_ptr() as usize % PAGE, 0);
        assert_eq!(b.len(), 641 * 479 * 3);
        assert!(b.iter().all(|&v| v == 0));
        let (_, cap) = b.allocation();
        assert_eq!(cap % PAGE, 0);
        assert!(cap >= b.len());
    }

    #[test]
    fn lock_is_released_before_free() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        struct Token(Arc<AtomicBool>);
        impl Drop for Token {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicBool::new(false));
        let mut b = HostBuffer::new(10);
        b.set_lock(Some(Box::new(Token(dropped.clone()))));
        assert!(b.is_locked());
        drop(b);
        assert!(dropped.load(Ordering::SeqCst));
    }
}
