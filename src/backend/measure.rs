//! Direct timings of the pieces a frame is made of, on preallocated buffers: one frame's
//! upload, download and filter chain alone, and an upload and a download issued together.
//! The largest of the four bounds the frame period of any pipeline (`framepipe bench`), and
//! the copies give the link's bandwidth (`framepipe doctor`).

use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{sys, CudaContext, CudaEvent, CudaSlice, CudaStream};
use serde::Serialize;

use super::cuda::PinnedRange;
use super::kernels::ChainKernels;
use crate::filter::reference::View;
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::ring::HostBuffer;
use crate::source::pattern;

/// Milliseconds per frame for each piece.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Bound {
    pub h2d_ms: f64,
    pub d2h_ms: f64,
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
        let ctx = CudaContext::new(0).context("opening CUDA device 0")?;
        // SAFETY: every buffer below is used on one stream at a time, ordered by events.
        unsafe { ctx.disable_event_tracking() };
        let (s1, s2) = (ctx.new_stream()?, ctx.new_stream()?);
        let n = size.bytes();
        let mut host_in = HostBuffer::new(n);
        let mut host_out = HostBuffer::new(n);
        pattern::draw(size, 0, &mut host_in);
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
}

/// Milliseconds per frame of an upload alone, a download alone, and both at once.
fn copies(rig: &mut Rig, reps: usize) -> Result<(f64, f64, f64)> {
    let h2d = rig.time(reps, |r| {
        Ok(r.s1.memcpy_htod(&r.host_in[..], &mut r.dev[0])?)
    })?;
    let d2h = rig.time(reps, |r| {
        Ok(r.s1.memcpy_dtoh(&r.dev[1], &mut r.host_out[..])?)
    })?;
    let both = rig.time(reps, |r| {
        r.s1.memcpy_htod(&r.host_in[..], &mut r.dev[0])?;
        r.s2.memcpy_dtoh(&r.dev_c, &mut r.host_out[..])?;
        Ok(())
    })?;
    Ok((h2d, d2h, both))
}

/// Times one `size` frame's pieces for `chain`: `reps` back-to-back runs each, best of
/// `trials` (the bound is a floor, so the least disturbed trial is the one to keep).
pub fn bound(size: FrameSize, chain: &Chain, reps: usize, trials: usize) -> Result<Bound> {
    let mut rig = Rig::new(size, false)?;
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
    for _ in 0..trials.max(1) {
        let (h2d, d2h, both) = copies(&mut rig, reps)?;
        let kernel = rig.time(reps, |r| {
            kernels.enqueue(&r.s1, &mut r.dev, &mut tmp, view)?;
            Ok(())
        })?;
        best.h2d_ms = best.h2d_ms.min(h2d);
        best.d2h_ms = best.d2h_ms.min(d2h);
        best.both_ms = best.both_ms.min(both);
        best.kernel_ms = best.kernel_ms.min(kernel);
    }
    Ok(best)
}

/// Copy bandwidth in GB/s.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Bandwidth {
    pub h2d_gbs: f64,
    pub d2h_gbs: f64,
    /// Upload and download at once, both directions added.
    pub both_gbs: f64,
}

/// Measures copy bandwidth with `size` frames from page-locked or pageable memory.
pub fn bandwidth(size: FrameSize, pageable: bool, reps: usize) -> Result<Bandwidth> {
    let mut rig = Rig::new(size, pageable)?;
    let gb = size.bytes() as f64 / 1e9;
    let (h2d, d2h, both) = copies(&mut rig, reps)?;
    Ok(Bandwidth {
        h2d_gbs: gb / (h2d / 1e3),
        d2h_gbs: gb / (d2h / 1e3),
        both_gbs: 2.0 * gb / (both / 1e3),
    })
}
