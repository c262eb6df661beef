//! Direct timings of the pieces a frame is made of, on preallocated buffers: one frame's
//! upload, download and filter chain alone, and an upload and a download issued together.
//! The largest of the four bounds the frame period of any pipeline (`framepipe bench`), and
//! the copies give the link's bandwidth (`framepipe doctor`).

use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use serde::Serialize;

use super::device::{mapped, PinnedRange};
use super::kernels::ChainKernels;
use crate::filter::reference::View;
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::{Formats, PixelFormat};
use crate::ring::HostBuffer;

/// Milliseconds per frame for each piece.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Bound {
    /// One frame's upload, ms.
    pub h2d_ms: f64,
    /// One frame's download, ms.
    pub d2h_ms: f64,
    /// The chain's kernels on one frame, ms.
    pub kernel_ms: f64,
    /// One upload and one download issued together on two streams.
    pub both_ms: f64,
}

impl Bound {
    /// The shortest possible steady-state frame period.
    pub fn bound_ms(&self) -> f64 {
        self.h2d_ms
            .max(self.d2h_ms)
            .max(self.kernel_ms)
            .max(self.both_ms)
    }

    /// What limits the period.
    pub fn limiter(&self) -> &'static str {
        let b = self.bound_ms();
        if b == self.both_ms {
            "copies both ways"
        } else if b == self.h2d_ms {
            "upload"
        } else if b == self.d2h_ms {
            "download"
        } else {
            "kernels"
        }
    }
}

struct Rig {
    ctx: Arc<CudaContext>,
    s1: Arc<CudaStream>,
    s2: Arc<CudaStream>,
    host_in: HostBuffer,
    host_out: HostBuffer,
    /// Two frame buffers for the filter chain, a third for downloads.
    dev: [CudaSlice<u8>; 2],
    dev_c: CudaSlice<u8>,
}

impl Rig {
    fn new(size: FrameSize, pageable: bool) -> Result<Self> {
        let ctx = super::device::open_device(super::device::DEFAULT_DEVICE)?;
        // SAFETY: every buffer below is used on one stream at a time, ordered by events.
        unsafe { ctx.disable_event_tracking() };
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        let n = size.bytes();
        let mut host_in = HostBuffer::new(n);
        let mut host_out = HostBuffer::new(n);
        // Bytes that vary (the copies and kernels take as long whatever the picture is).
        for (i, b) in host_in.iter_mut().enumerate() {
            *b = (i.wrapping_mul(31) % 251) as u8;
        }
        if !pageable {
            for b in [&mut host_in, &mut host_out] {
                PinnedRange::lock(&ctx, b)?;
            }
        }
        let dev = [s1.alloc_zeros::<u8>(n)?, s1.alloc_zeros::<u8>(n)?];
        let dev_c = s1.alloc_zeros::<u8>(n)?;
        ctx.synchronize()?;
        Ok(Self {
            ctx,
            s1,
            s2,
            host_in,
            host_out,
            dev,
            dev_c,
        })
    }

    fn event(&self) -> Result<CudaEvent> {
        Ok(self
            .ctx
            .new_event(Some(sys::CUevent_flags::CU_EVENT_DEFAULT))?)
    }

    /// Average milliseconds of `reps` runs of `work` queued back to back on `s1` (and `s2`).
    fn time(&mut self, reps: usize, mut work: impl FnMut(&mut Self) -> Result<()>) -> Result<f64> {
        work(self)?; // warm-up
        self.ctx.synchronize()?;
        let (start, end1, end2) = (self.event()?, self.event()?, self.event()?);
        start.record(&self.s1)?;
        self.s2.wait(&start)?;
        for _ in 0..reps {
            work(self)?;
        }
        end1.record(&self.s1)?;
        end2.record(&self.s2)?;
        let t = start.elapsed_ms(&end1)?.max(start.elapsed_ms(&end2)?);
        Ok(f64::from(t) / reps as f64)
    }

    /// The least of `trials` timings by `time` (a floor: the least disturbed trial counts).
    fn best(
        &mut self,
        trials: usize,
        reps: usize,
        mut work: impl FnMut(&mut Self) -> Result<()>,
    ) -> Result<f64> {
        let mut t = f64::MAX;
        for _ in 0..trials.max(1) {
            t = t.min(self.time(reps, &mut work)?);
        }
        Ok(t)
    }
}

/// Milliseconds per frame of an upload alone, a download alone, and both at once, of
/// `up` and `down` bytes.
fn copies(rig: &mut Rig, reps: usize, up: usize, down: usize) -> Result<(f64, f64, f64)> {
    let h2d = rig.time(reps, |r| {
        let to = &mut r.dev[0].slice_mut(0..up);
        Ok(r.s1.memcpy_htod(&r.host_in[..up], to)?)
    })?;
    let d2h = rig.time(reps, |r| {
        Ok(r.s1.memcpy_dtoh(&r.dev[1].slice(0..down), &mut r.host_out[..down])?)
    })?;
    let both = rig.time(reps, |r| {
        r.s1.memcpy_htod(&r.host_in[..up], &mut r.dev[0].slice_mut(0..up))?;
        r.s2.memcpy_dtoh(&r.dev_c.slice(0..down), &mut r.host_out[..down])?;
        Ok(())
    })?;
    Ok((h2d, d2h, both))
}

/// Times one `size` frame's pieces for `chain` between `formats`: the upload of the input
/// format's bytes, the download of the output's, and the kernels (the conversions and the
/// chain; none where the frame passes untouched): `reps` back-to-back runs each, best of
/// `trials` (the bound is a floor, so the least disturbed trial is the one to keep).
pub fn bound(
    size: FrameSize,
    chain: &Chain,
    formats: Formats,
    reps: usize,
    trials: usize,
) -> Result<Bound> {
    let mut rig = Rig::new(size, false)?;
    let (up, down) = (formats.input.bytes(size), formats.output.bytes(size));
    let mut raw = rig.s1.alloc_zeros::<u8>(up.max(down))?;
    let kernels = ChainKernels::new(&rig.ctx, &rig.s1, chain)?;
    let view = View {
        width: size.width,
        rows: size.height,
        row0: 0,
        height: size.height,
    };
    let mut tmp = rig.s1.alloc_zeros::<u16>(size.bytes())?;
    let mut best = Bound {
        h2d_ms: f64::MAX,
        d2h_ms: f64::MAX,
        kernel_ms: f64::MAX,
        both_ms: f64::MAX,
    };
    let (w, h) = (size.width, size.height);
    let Formats { input, output } = formats;
    for _ in 0..trials.max(1) {
        let (h2d, d2h, both) = copies(&mut rig, reps, up, down)?;
        let kernel = rig.time(reps, |r| {
            if formats.passthrough(chain.is_identity()) {
                return Ok(());
            }
            if formats.repacked(chain.is_identity()) {
                let (src, _) = raw.device_ptr(&r.s1);
                let (dst, _) = r.dev[0].device_ptr_mut(&r.s1);
                return kernels.repack_420(&r.s1, src, dst, w, h, input);
            }
            if input != PixelFormat::Bgr24 {
                let (src, _) = raw.device_ptr(&r.s1);
                let (dst, _) = r.dev[0].device_ptr(&r.s1);
                kernels.convert_in(&r.s1, src, dst, w, h, input)?;
            }
            let result = kernels.enqueue(&r.s1, &mut r.dev, &mut tmp, view, None)?;
            if output != PixelFormat::Bgr24 {
                let (src, _) = r.dev[result].device_ptr(&r.s1);
                let (dst, _) = raw.device_ptr_mut(&r.s1);
                kernels.convert_out(&r.s1, src, dst, w, h, output)?;
            }
            Ok(())
        })?;
        best.h2d_ms = best.h2d_ms.min(h2d);
        best.d2h_ms = best.d2h_ms.min(d2h);
        best.both_ms = best.both_ms.min(both);
        best.kernel_ms = best.kernel_ms.min(kernel);
    }
    Ok(best)
}

/// Milliseconds per frame of an upload and a download issued together, as `bound` times
/// them, but over `buffers` page-locked host buffer pairs taken in turn (as the ring's slots
/// are) instead of one: whether the amount of page-locked memory the copies touch matters.
pub fn both_rotating(size: FrameSize, buffers: usize, reps: usize) -> Result<f64> {
    let mut rig = Rig::new(size, false)?;
    let mut pairs = Vec::new();
    for _ in 0..buffers.max(1) {
        let mut pair = [HostBuffer::new(size.bytes()), HostBuffer::new(size.bytes())];
        for b in &mut pair {
            PinnedRange::lock(&rig.ctx, b)?;
        }
        pairs.push(pair);
    }
    let mut next = 0;
    rig.best(5, reps, |r| {
        let n = pairs.len();
        let [input, output] = &mut pairs[next % n];
        next += 1;
        r.s1.memcpy_htod(&input[..], &mut r.dev[0])?;
        r.s2.memcpy_dtoh(&r.dev_c, &mut output[..])?;
        Ok(())
    })
}

/// Microseconds that each copy costs beyond moving its bytes, upload and download: one frame
/// copied as `pieces` back-to-back copies on one stream against as one copy (best of 3).
/// A frame cut into bands pays this once per band and direction.
pub fn copy_overhead_us(size: FrameSize, pieces: usize, reps: usize) -> Result<(f64, f64)> {
    let mut rig = Rig::new(size, false)?;
    let n = size.bytes();
    let pieces = pieces.clamp(2, n);
    let cut = |i: usize| (i * n / pieces, (i + 1) * n / pieces);
    let mut best = |upload: bool, split: bool| {
        rig.best(3, reps, |r| {
            for i in 0..if split { pieces } else { 1 } {
                let (a, b) = if split { cut(i) } else { (0, n) };
                if upload {
                    r.s1.memcpy_htod(&r.host_in[a..b], &mut r.dev[0].slice_mut(a..b))?;
                } else {
                    r.s1.memcpy_dtoh(&r.dev[1].slice(a..b), &mut r.host_out[a..b])?;
                }
            }
            Ok(())
        })
    };
    let per_copy = |whole: f64, split: f64| (split - whole) * 1e3 / (pieces - 1) as f64;
    let up = per_copy(best(true, false)?, best(true, true)?);
    let down = per_copy(best(false, false)?, best(false, true)?);
    Ok((up, down))
}

/// Bandwidth in GB/s of the GPU's own threads moving a frame over PCIe with no copy engine
/// ("zero-copy": the copy kernel reading or writing page-locked host memory mapped into the
/// device's address space).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ZeroCopy {
    /// Host → device memory.
    pub read_gbs: f64,
    /// Device memory → host.
    pub write_gbs: f64,
    /// Host → host: reading and writing at once, both directions added.
    pub both_gbs: f64,
    /// A copy-engine upload and a kernel writing to the host at once, both added.
    pub upload_and_write_gbs: f64,
}

/// Measures `ZeroCopy` with `size` frames: `reps` back-to-back copies, best of 3.
pub fn zero_copy(size: FrameSize, reps: usize) -> Result<ZeroCopy> {
    let mut rig = Rig::new(size, false)?;
    let copy: Chain = "copy".parse()?;
    let kernels = ChainKernels::new(&rig.ctx, &rig.s1, &copy)?;
    let (input, output) = (
        mapped(rig.host_in.as_ptr())?,
        mapped(rig.host_out.as_ptr())?,
    );
    let (d0, d1) = {
        let (a, _) = rig.dev[0].device_ptr(&rig.s1);
        let (b, _) = rig.dev[1].device_ptr(&rig.s1);
        (a, b)
    };
    let n = size.bytes() as u64;
    let gb = size.bytes() as f64 / 1e9;
    let mut best = |src: u64, dst: u64| -> Result<f64> {
        let t = rig.best(3, reps, |r| kernels.copy_raw(&r.s1, src, dst, n))?;
        Ok(gb / (t / 1e3))
    };
    let (read_gbs, write_gbs, both_gbs) = (
        best(input, d0)?,
        best(d1, output)?,
        2.0 * best(input, output)?,
    );
    let mixed = rig.time(reps, |r| {
        r.s1.memcpy_htod(&r.host_in[..], &mut r.dev[0])?;
        kernels.copy_raw(&r.s2, d1, output, n)
    })?;
    Ok(ZeroCopy {
        read_gbs,
        write_gbs,
        both_gbs,
        upload_and_write_gbs: 2.0 * gb / (mixed / 1e3),
    })
}

/// Copy bandwidth in GB/s.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bandwidth {
    /// Upload bandwidth, GB/s.
    pub h2d_gbs: f64,
    /// Download bandwidth, GB/s.
    pub d2h_gbs: f64,
    /// Upload and download at once, both directions added.
    pub both_gbs: f64,
}

/// Measures copy bandwidth with `size` frames from page-locked or pageable memory.
pub fn bandwidth(size: FrameSize, pageable: bool, reps: usize) -> Result<Bandwidth> {
    let mut rig = Rig::new(size, pageable)?;
    let gb = size.bytes() as f64 / 1e9;
    let (h2d, d2h, both) = copies(&mut rig, reps, size.bytes(), size.bytes())?;
    Ok(Bandwidth {
        h2d_gbs: gb / (h2d / 1e3),
        d2h_gbs: gb / (d2h / 1e3),
        both_gbs: 2.0 * gb / (both / 1e3),
    })
}
