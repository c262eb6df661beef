//! Frames the CUDA backend lends in device memory to the run's one consumer (the embedding
//! program: `torch.from_dlpack(frame)` from Python) instead of bringing them down: each
//! frame's bands are copied, device to device, into a whole-frame buffer taken from a pool
//! (`Lender`), and that buffer travels to the sink with the frame as its memory
//! (`desc::Memory::Device`, with a `Lent` lease).
//!
//! Invariants:
//! - a buffer is lent to one frame at a time: it returns to the pool when the frame's last
//!   lease is dropped, and is written again only after the work its consumer had queued, by
//!   then, on the streams it named (`Lease::read_on`) has completed: an event is recorded
//!   on each as the lease is dropped, and waited for before the buffer is taken again (or,
//!   where the pool is gone, before the buffer is freed);
//! - a lent frame's copies have completed before it reaches the sink (the backend hands a
//!   frame on only once its downloads are done), so a consumer reads it on any stream
//!   without waiting for framepipe;
//! - the pool grows as the consumer holds frames (a program may keep a whole clip's frames
//!   on the GPU), while the device keeps `RESERVE` free beside it; past that the run ends
//!   with an error saying how many frames the program holds (back-pressure on a slow
//!   consumer is the hand-over's bounded channel, not this pool);
//! - `stack` and `read_back` serve the consumer: a batch of lent frames copied into one
//!   buffer of its own (freed, the same way, after its readers' work), and a frame's bytes
//!   copied to the host.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr};

use crate::desc::{Lease, Memory};

/// Device memory left free beside the lent frames (the consumer's model needs some).
pub const RESERVE: u64 = 1 << 30;

/// Device memory that its readers may still be reading: freed (or reused) after the events
/// recorded on their streams.
struct Buffer {
    mem: CudaSlice<u8>,
    ptr: u64,
    after: Vec<CudaEvent>,
}

impl Buffer {
    fn new(stream: &Arc<CudaStream>, bytes: usize) -> Result<Self> {
        let mem = stream
            .alloc_zeros::<u8>(bytes)
            .context("allocating a frame to lend on the device")?;
        let (ptr, _) = mem.device_ptr(stream);
        Ok(Self {
            mem,
            ptr,
            after: Vec::new(),
        })
    }

    /// Records, on each of `readers`' streams, an event that its later use waits for; a
    /// stream it can't record on (the consumer's, gone) makes it wait for the whole device.
    fn read_by(&mut self, ctx: &Arc<CudaContext>, readers: &[u64]) {
        for &stream in readers {
            let recorded = ctx.new_event(None).and_then(|e| {
                // SAFETY: the event is live and of this context, bound to the thread by
                // `new_event`; a stream handle the consumer gave that is no longer valid
                // makes the driver return an error, which is handled below.
                unsafe {
                    cudarc::driver::result::event::record(e.cu_event(), stream as sys::CUstream)
                }
                .map(|()| e)
            });
            match recorded {
                Ok(e) => self.after.push(e),
                Err(_) => {
                    let _ = ctx.synchronize();
                }
            }
        }
    }

    /// Waits (on the host) until its readers' work has completed.
    fn settle(&mut self) -> Result<()> {
        for e in self.after.drain(..) {
            e.synchronize()
                .context("waiting for the consumer's work on a lent frame")?;
        }
        Ok(())
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // The memory is freed on its own stream: after its readers' work.
        for e in &self.after {
            let _ = self.mem.stream().wait(e);
        }
    }
}

/// The buffers not lent now, and how many of each size are out.
#[derive(Default)]
struct Shelf {
    free: HashMap<usize, Vec<Buffer>>,
    out: HashMap<usize, usize>,
}

struct Pool {
    shelf: Mutex<Shelf>,
}

/// The backend's side: takes buffers to lend.
pub(super) struct Lender {
    pool: Arc<Pool>,
    stream: Arc<CudaStream>,
    device: usize,
}

impl Lender {
    /// Lends buffers of `ctx`'s device `device`.
    pub(super) fn new(ctx: &Arc<CudaContext>, device: usize) -> Result<Self> {
        Ok(Self {
            pool: Arc::new(Pool {
                shelf: Mutex::new(Shelf::default()),
            }),
            stream: ctx.new_stream()?,
            device,
        })
    }

    /// A buffer of `bytes` to lend with the next frame, as that frame's memory: one given
    /// back, or a new one where the device keeps `RESERVE` free beside it.
    pub(super) fn take(&self, bytes: usize) -> Result<Memory> {
        let mut shelf = self.pool.shelf.lock().expect("the lender's shelf");
        let out = shelf.out.get(&bytes).copied().unwrap_or(0);
        let mut buffer = match shelf.free.get_mut(&bytes).and_then(Vec::pop) {
            Some(b) => b,
            None => {
                let (free, _) = self.stream.context().mem_get_info()?;
                anyhow::ensure!(
                    free as u64 >= bytes as u64 + RESERVE,
                    "the program holds {out} frames lent on the GPU ({}), and the device has {} free: release frames it no longer needs",
                    crate::budget::human((out * bytes) as u64),
                    crate::budget::human(free as u64)
                );
                Buffer::new(&self.stream, bytes)?
            }
        };
        *shelf.out.entry(bytes).or_default() += 1;
        drop(shelf);
        buffer.settle()?;
        let ptr = buffer.ptr;
        let lease = Lent {
            buffer: Some(buffer),
            bytes,
            readers: Mutex::new(Vec::new()),
            pool: Some(self.pool.clone()),
        };
        Ok(Memory::Device {
            device: self.device,
            ptr,
            lease: Arc::new(lease),
        })
    }
}

/// A lent buffer: dropping the last reference gives it back (module doc).
pub struct Lent {
    buffer: Option<Buffer>,
    bytes: usize,
    readers: Mutex<Vec<u64>>,
    /// Where it goes back to; None for a batch's own buffer (`stack`), freed instead.
    pool: Option<Arc<Pool>>,
}

impl std::fmt::Debug for Lent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a frame of {} bytes lent on the device", self.bytes)
    }
}

impl Lease for Lent {
    fn read_on(&self, stream: u64) -> Result<()> {
        let mut readers = self.readers.lock().expect("a lease's readers");
        if !readers.contains(&stream) {
            readers.push(stream);
        }
        Ok(())
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        let Some(mut buffer) = self.buffer.take() else {
            return;
        };
        let readers = std::mem::take(&mut *self.readers.lock().expect("a lease's readers"));
        let ctx = buffer.mem.stream().context().clone();
        buffer.read_by(&ctx, &readers);
        let Some(pool) = &self.pool else { return };
        let mut shelf = pool.shelf.lock().expect("the lender's shelf");
        shelf.free.entry(self.bytes).or_default().push(buffer);
        if let Some(n) = shelf.out.get_mut(&self.bytes) {
            *n = n.saturating_sub(1);
        }
    }
}

/// The context of CUDA device `device`, bound to this thread.
fn context(device: usize) -> Result<Arc<CudaContext>> {
    let ctx = super::device::open_device(device)?;
    ctx.bind_to_thread()?;
    Ok(ctx)
}

/// Copies `bytes.len()` bytes at `ptr` in device `device`'s memory (a lent frame) to
/// `bytes`.
pub fn read_back(device: usize, ptr: u64, bytes: &mut [u8]) -> Result<()> {
    let _ctx = context(device)?;
    // SAFETY: the caller holds the frame's lease, so `bytes.len()` bytes at `ptr` are live
    // device memory whose copies have completed (module doc); the context is bound.
    unsafe { cudarc::driver::result::memcpy_dtoh_sync(bytes, ptr) }
        .context("copying a frame from the device")
}

/// `parts` (address and length in device `device`'s memory: lent frames, whose leases the
/// caller holds) one after another in a new buffer, as its memory; the copies have completed
/// when it returns.
pub fn stack(device: usize, parts: &[(u64, usize)]) -> Result<Memory> {
    let ctx = context(device)?;
    // A stream of its own: the default stream would wait for the consumer's work (a model
    // on PyTorch's default stream) before stacking.
    let stream = ctx.new_stream()?;
    let bytes = parts.iter().map(|p| p.1).sum();
    let buffer = Buffer::new(&stream, bytes)?;
    let mut at = buffer.ptr;
    for &(ptr, len) in parts {
        // SAFETY: `len` bytes at `ptr` are a lent frame the caller holds, and they fit in
        // the new buffer at `at` (its length is the parts' sum); both are this context's.
        unsafe { cudarc::driver::result::memcpy_dtod_async(at, ptr, len, stream.cu_stream()) }
            .context("stacking frames on the device")?;
        at += len as u64;
    }
    stream
        .synchronize()
        .context("stacking frames on the device")?;
    let ptr = buffer.ptr;
    Ok(Memory::Device {
        device,
        ptr,
        lease: Arc::new(Lent {
            buffer: Some(buffer),
            bytes,
            readers: Mutex::new(Vec::new()),
            pool: None,
        }),
    })
}
