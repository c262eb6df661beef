//! Copies of a frame's rows between host and device memory, or within the device, queued
//! on a stream as 2D copies (`cuMemcpy2DAsync`): a band's rows up from the ring's slot, a
//! decoder's surface or a decoder's page-locked picture, and a frame's rows down into the
//! slot or the buffer lent with it (`lend`). Used by the lane sets (`lanes`) and the
//! whole-frame part of a chain (`reshape`).
//!
//! Invariants: every copy is checked to lie inside both of its buffers before it is queued
//! (`check_copy`); the memory at both ends is the caller's to keep alive and unchanged
//! until the copy completes on its stream (each unsafe function's `# Safety`).

use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaSlice, CudaStream, DevicePtrMut};

use crate::desc::Memory;
use crate::pixel::BandCopy;
use crate::ring::Slot;

/// One end of a 2D copy: host memory at a pointer, or device memory at an address.
#[derive(Clone, Copy)]
pub(super) enum End {
    Host(*const u8),
    Device(u64),
}

impl End {
    /// `bytes` further on.
    fn at(self, bytes: usize) -> Self {
        match self {
            End::Host(p) => End::Host(p.wrapping_add(bytes)),
            End::Device(a) => End::Device(a + bytes as u64),
        }
    }
}

/// Where a frame's output goes, and how many bytes are there: the slot's host buffer, or
/// the device buffer lent with it (`lend`), of `lent` bytes.
pub(super) fn output_end(slot: &mut Slot, lent: usize) -> (End, usize) {
    match &slot.output_memory {
        Memory::Device { ptr, .. } => (End::Device(*ptr), lent),
        Memory::HostLent { ptr, .. } => (End::Host(*ptr as *const u8), lent),
        Memory::Host => (End::Host(slot.output.as_mut_ptr()), slot.output.len()),
    }
}

/// Queues copy `c`'s runs (`c.height` runs of `c.width` bytes, `c.src_pitch` apart at `src`
/// and `c.dst_pitch` apart at `dst`; `c.src` and `c.dst` already applied) on `s`. `what`
/// names the copy in an error.
///
/// # Safety
/// Every run must lie inside memory that `src` and `dst` point into, and that memory must
/// stay valid, and `src`'s unwritten, until the copy completes on `s`.
pub(super) unsafe fn queue_2d(
    s: &CudaStream,
    src: End,
    dst: End,
    c: BandCopy,
    what: &str,
) -> Result<()> {
    use sys::CUmemorytype::{CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST};
    let (src_type, src_host, src_device) = match src {
        End::Host(p) => (CU_MEMORYTYPE_HOST, p.cast(), 0),
        End::Device(a) => (CU_MEMORYTYPE_DEVICE, std::ptr::null(), a),
    };
    let (dst_type, dst_host, dst_device) = match dst {
        End::Host(p) => (CU_MEMORYTYPE_HOST, p.cast_mut().cast(), 0),
        End::Device(a) => (CU_MEMORYTYPE_DEVICE, std::ptr::null_mut(), a),
    };
    let copy = sys::CUDA_MEMCPY2D {
        srcXInBytes: 0,
        srcY: 0,
        srcMemoryType: src_type,
        srcHost: src_host,
        srcDevice: src_device,
        srcArray: std::ptr::null_mut(),
        srcPitch: c.src_pitch,
        dstXInBytes: 0,
        dstY: 0,
        dstMemoryType: dst_type,
        dstHost: dst_host,
        dstDevice: dst_device,
        dstArray: std::ptr::null_mut(),
        dstPitch: c.dst_pitch,
        WidthInBytes: c.width,
        Height: c.height,
    };
    // SAFETY: the caller's contract: the runs lie inside live memory at both ends.
    unsafe { sys::cuMemcpy2DAsync_v2(&copy, s.cu_stream()) }
        .result()
        .with_context(|| format!("queueing a 2D {what}"))
}

/// Queues copy `c` from the host `frame` into the device `band` buffer on `s`: a plain copy,
/// or one 2D copy for planes that step evenly (`PixelFormat::band_copies`).
pub(super) fn copy_up(
    s: &Arc<CudaStream>,
    frame: &[u8],
    band: &mut CudaSlice<u8>,
    c: BandCopy,
) -> Result<()> {
    if c.height == 1 {
        let (f, b) = (c.src..c.src + c.width, c.dst..c.dst + c.width);
        return Ok(s.memcpy_htod(&frame[f], &mut band.slice_mut(b))?);
    }
    check_copy(c, frame.len(), band.len())?;
    let (dst, _) = band.device_ptr_mut(s);
    let src = End::Host(frame[c.src..].as_ptr());
    // SAFETY: every run lies inside `frame` and inside `band` (`check_copy`); the host
    // memory is the slot's, which is not touched again until its frame completes (the lane
    // set's invariant), so the asynchronous copy never outlives what it reads.
    unsafe { queue_2d(s, src, End::Device(dst + c.dst as u64), c, "upload") }
}

/// Queues copy `c` from device memory at `band` (`band_len` bytes) into the output `out`
/// (`out_len` bytes: the slot's host buffer, or the device buffer lent with it) on `s`, as
/// `copy_up` the other way: `c.src` is the place in the frame, `c.dst` the place in the band.
///
/// # Safety
/// `band` and `out` must stay valid, and `band`'s bytes unwritten, until the copy completes
/// on `s` (a slot's memory, host or lent, is the frame's until it completes).
pub(super) unsafe fn copy_down(
    s: &CudaStream,
    (band, band_len): (u64, usize),
    (out, out_len): (End, usize),
    c: BandCopy,
) -> Result<()> {
    check_copy(c, out_len, band_len)?;
    let back = BandCopy {
        src_pitch: c.dst_pitch,
        dst_pitch: c.src_pitch,
        ..c
    };
    // SAFETY: every run lies inside both (`check_copy`); their life is the caller's contract.
    unsafe {
        queue_2d(
            s,
            End::Device(band + c.dst as u64),
            out.at(c.src),
            back,
            "download",
        )
    }
}

/// Queues copy `c` from a lent frame at `frame` (a decoder's surface in device memory, or a
/// CPU decoder's picture in page-locked host memory; its planes at their pitches:
/// `Planes::band_copies`), spanning `extent` bytes (`Planes::extent`), into the device
/// `band` buffer on `s`. Both sides are checked as `copy_up`'s are.
///
/// # Safety
/// `extent` bytes at `frame` must be the frame's memory (page-locked where it is the
/// host's), which its lease keeps until the frame completes.
pub(super) unsafe fn copy_from_lent(
    s: &Arc<CudaStream>,
    frame: End,
    extent: usize,
    band: &mut CudaSlice<u8>,
    c: BandCopy,
) -> Result<()> {
    check_copy(c, extent, band.len())?;
    let (dst, _) = band.device_ptr_mut(s);
    // SAFETY: every run lies inside the frame's `extent` and inside `band` (`check_copy`);
    // the frame's memory is the caller's contract.
    unsafe {
        queue_2d(
            s,
            frame.at(c.src),
            End::Device(dst + c.dst as u64),
            c,
            "copy from a lent frame",
        )
    }
}

/// Refuses a copy whose runs would reach past a frame of `frame` bytes or a band buffer of
/// `band` bytes.
fn check_copy(c: BandCopy, frame: usize, band: usize) -> Result<()> {
    let end = |at: usize, pitch: usize| at + (c.height - 1) * pitch + c.width;
    crate::ensure_kept!(
        c.height > 0 && end(c.src, c.src_pitch) <= frame && end(c.dst, c.dst_pitch) <= band,
        "a band copy {c:?} reaches past its buffers ({frame} and {band} bytes)"
    );
    Ok(())
}
