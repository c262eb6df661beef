//! A detector's pictures fitted to its model on the device (`--detect` with the CUDA
//! backend): each picture is uploaded, resized and placed as the model's family does it
//! (`pixel::linear`: OpenCV's `INTER_LINEAR` and a letterbox's border, `fp_fit_linear`),
//! laid out and normalised by lookup (`pixel::lookup`, `fp_lay_out`), and the model's
//! floats come down. The CPU makes the same floats from the same tap tables and lookups
//! (`detect::Model`), so where the fitting runs changes no box.
//!
//! A batch for a model that runs on the GPU (`fit_batch`) stays on the device: each
//! picture's floats are laid out in their place of one batch buffer, and the model's
//! session is handed where it lies (`detect::Model`'s I/O binding); `brought_down` counts the
//! bytes of fitted floats that did come to the host (`fit`).
//!
//! Invariants: one stream of its own on the backend's context (the primary one, which ONNX
//! Runtime's CUDA provider uses too: its pointers are valid there; no second context); its
//! device buffers only grow, and a picture's floats, or a batch, are handed over only once
//! the stream has finished with them (a wait on this stream alone, never the device's); a
//! batch stays as it is until the next fitting; the lookup's tables and each size's taps are
//! uploaded once and kept.

use std::collections::hash_map::{Entry, HashMap};
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};

use super::kernels::ChainKernels;
use crate::filter::{Chain, Filter};
use crate::frame::FrameSize;
use crate::pixel::linear::{self, Placed};
use crate::pixel::lookup::Lookup;

/// Fits pictures to a model on one device (module doc).
pub struct ModelFit {
    stream: Arc<CudaStream>,
    kernels: ChainKernels,
    /// The uploaded picture, the placed canvas (packed BGR), the model's floats.
    src: CudaSlice<u8>,
    canvas: CudaSlice<u8>,
    out: CudaSlice<f32>,
    /// The lookup whose tables are on the device now.
    tables: Option<(Lookup, CudaSlice<u8>)>,
    /// Each (picture, scaled) size's taps: across, then down (`linear_taps`).
    taps: HashMap<(FrameSize, FrameSize), CudaSlice<i32>>,
    /// The last batch fitted for a model on the device (`fit_batch`).
    batch: CudaSlice<f32>,
    /// Bytes of fitted floats brought to the host (`fit`; never by `fit_batch`).
    brought_down: u64,
    /// The device's number, as ONNX Runtime names it.
    ordinal: usize,
}

/// A batch fitted on the device (`ModelFit::fit_batch`): `floats` 4-byte floats at `ptr` on
/// device `ordinal`, as they stay until the next fitting.
#[derive(Clone, Copy, Debug)]
pub struct DeviceBatch {
    /// Its first float's device address.
    pub ptr: u64,
    /// How many floats.
    pub floats: usize,
    /// The device.
    pub ordinal: usize,
}

impl ModelFit {
    /// Ready to fit pictures on `ctx`'s device (its kernels are compiled already where the
    /// backend runs there).
    pub fn new(ctx: &Arc<CudaContext>) -> Result<Self> {
        let stream = ctx.new_stream()?;
        let kernels = ChainKernels::new(ctx, &stream, &Chain::from_filters(vec![Filter::Copy]))?;
        let alloc = || stream.alloc_zeros::<u8>(1);
        Ok(Self {
            kernels,
            src: alloc()?,
            canvas: alloc()?,
            out: stream.alloc_zeros::<f32>(1)?,
            tables: None,
            taps: HashMap::new(),
            batch: stream.alloc_zeros::<f32>(1)?,
            brought_down: 0,
            ordinal: ctx.ordinal(),
            stream,
        })
    }

    /// Bytes of fitted floats brought to the host so far (`fit`): none while every batch
    /// stays on the device (`fit_batch`).
    pub fn brought_down(&self) -> u64 {
        self.brought_down
    }

    /// A packed BGR picture of `size` resized and placed as `placed` says, laid out by
    /// `lookup` (of 4-byte floats): `Lookup::apply_f32` of `linear::place`, made on the
    /// device and brought down.
    pub fn fit(
        &mut self,
        bgr: &[u8],
        size: FrameSize,
        placed: &Placed,
        lookup: &Lookup,
    ) -> Result<Vec<f32>> {
        let n = 3 * placed.canvas.width * placed.canvas.height;
        let s = self.stream.clone();
        grow(&s, &mut self.out, n)?;
        let (out, _) = self.out.device_ptr(&s);
        self.queue(bgr, size, placed, lookup, out)?;
        let mut floats = vec![0f32; n];
        s.memcpy_dtoh(&self.out.slice(..n), &mut floats[..])
            .context("bringing the model's picture down")?;
        s.synchronize()?;
        self.brought_down += (n * std::mem::size_of::<f32>()) as u64;
        Ok(floats)
    }

    /// `pictures` (packed BGR of their sizes, each placed on one canvas size) fitted as
    /// `fit` fits them into one batch of `fed_n` on the device, zeros after the last: the
    /// batch a model on this device is handed where it lies. Nothing comes down.
    pub fn fit_batch(
        &mut self,
        pictures: &[(&[u8], FrameSize, Placed)],
        fed_n: usize,
        lookup: &Lookup,
    ) -> Result<DeviceBatch> {
        let Some((_, _, first)) = pictures.first() else {
            anyhow::bail!("a batch of no picture");
        };
        anyhow::ensure!(
            pictures.iter().all(|p| p.2.canvas == first.canvas) && pictures.len() <= fed_n,
            "a batch's pictures are placed on one canvas, {fed_n} at most"
        );
        let n = 3 * first.canvas.width * first.canvas.height;
        let s = self.stream.clone();
        grow(&s, &mut self.batch, fed_n * n)?;
        let (base, _) = self.batch.device_ptr(&s);
        for (k, (bgr, size, placed)) in pictures.iter().enumerate() {
            let at = base + (k * n * std::mem::size_of::<f32>()) as u64;
            self.queue(bgr, *size, placed, lookup, at)?;
        }
        if pictures.len() < fed_n {
            s.memset_zeros(&mut self.batch.slice_mut(pictures.len() * n..fed_n * n))?;
        }
        s.synchronize()?;
        Ok(DeviceBatch {
            ptr: base,
            floats: fed_n * n,
            ordinal: self.ordinal,
        })
    }

    /// Queues on the stream the upload of one picture, its placing and its layout into the
    /// floats at device address `out`.
    fn queue(
        &mut self,
        bgr: &[u8],
        size: FrameSize,
        placed: &Placed,
        lookup: &Lookup,
        out: u64,
    ) -> Result<()> {
        anyhow::ensure!(lookup.element == 4, "a model's lookup makes 4-byte floats");
        let s = self.stream.clone();
        grow(&s, &mut self.src, bgr.len())?;
        grow(
            &s,
            &mut self.canvas,
            3 * placed.canvas.width * placed.canvas.height,
        )?;
        if self.tables.as_ref().is_none_or(|(l, _)| l != lookup) {
            self.tables = Some((lookup.clone(), s.clone_htod(&lookup.tables)?));
        }
        let key = (size, placed.scaled);
        if let Entry::Vacant(e) = self.taps.entry(key) {
            e.insert(s.clone_htod(&linear_taps(size, placed.scaled))?);
        }
        s.memcpy_htod(bgr, &mut self.src.slice_mut(..bgr.len()))
            .context("uploading a picture for the model")?;
        let (src, _) = self.src.device_ptr(&s);
        let (canvas, _) = self.canvas.device_ptr(&s);
        let (taps, _) = self.taps[&key].device_ptr(&s);
        let (tables, _) = self
            .tables
            .as_ref()
            .expect("uploaded above")
            .1
            .device_ptr(&s);
        self.kernels
            .fit_linear(&s, [src, canvas, taps], size, placed)?;
        self.kernels
            .lay_out(&s, [canvas, out], placed.canvas, lookup, tables)
    }
}

/// `buf` made at least `n` long (its contents are not kept).
fn grow<T: cudarc::driver::DeviceRepr + cudarc::driver::ValidAsZeroBits>(
    s: &Arc<CudaStream>,
    buf: &mut CudaSlice<T>,
    n: usize,
) -> Result<()> {
    if buf.len() < n {
        *buf = s.alloc_zeros::<T>(n)?;
    }
    Ok(())
}

/// The taps of a `from` picture resized to `to` as `fp_fit_linear` reads them: (a, b, w)
/// for each output column, then for each output row (`linear::taps`).
fn linear_taps(from: FrameSize, to: FrameSize) -> Vec<i32> {
    let across = linear::taps(from.width, to.width);
    let down = linear::taps(from.height, to.height);
    across
        .iter()
        .chain(&down)
        .flat_map(|t| [t.a as i32, t.b as i32, t.w as i32])
        .collect()
}
