//! The part of a chain that changes the frame's size, on the CUDA backend: everything from
//! its first geometry filter on (`Chain::banded`), run on the whole frame that the bands
//! assembled on the device, then converted to the output format and downloaded (or copied
//! into the buffer lent with the frame, `lend`; or, for a frame shaped for a model, laid out
//! into it by the model's lookup, `lay_out`: the fit is then the chain's last part).
//!
//! A chain of geometry and text between one YUV format (I420, NV12 or gray: `pixel::planes`)
//! runs on the frame's own planes instead (`Reshape::planes`): the bands only upload their
//! planes, each band's rows are gathered into the whole frame as they came (`gather_planes`),
//! every geometry filter runs plane by plane (`PlaneJob`: the chroma planes at their own
//! size, NV12's interleaved chroma as pixels of 2 bytes), text is drawn into Y, U and V in
//! place, and the frame goes down in its format: no conversion either way, the samples a
//! crop, a pad, a flip or a turn moves untouched, as ffmpeg's filters leave them.
//!
//! Why whole frames: a geometry filter moves pixels across bands (a turn makes columns of
//! rows, a flip sends the top band's rows to the bottom, a scale's output band reads a band
//! of another height), so no band of the output can be made from one band of the input.
//! The bands still carry the upload, the conversion to BGR and the filters before the
//! first geometry filter, each band writing its own rows into the frame here (a copy inside
//! the device); frames in flight keep copies and kernels overlapped as before.
//!
//! Invariants:
//! - each lane (frame in flight) owns its frame buffers, made once in `Reshape::new` for
//!   the largest frame the chain makes of the lane set's size, so frames never share them;
//! - the steps are fixed for the lane set's size: each geometry filter's input and output
//!   sizes, a bilinear scale's taps uploaded once;
//! - every kernel is the integer arithmetic of `filter::geometry`, `filter::reference` and
//!   `pixel::planes`, and the layout a table lookup (`pixel::lookup`), so the output is the
//!   CPU backend's, byte for byte.

use std::ops::Range;
use std::sync::Arc;

use anyhow::Result;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};

use super::kernels::{ChainKernels, Taps};
use crate::filter::geometry::{Geometry, Sampling};
use crate::filter::reference::View;
use crate::filter::{Chain, Filter};
use crate::frame::FrameSize;
use crate::pixel::planes::{plane_steps, PlaneJob, PlaneStep};
use crate::pixel::{BandCopy, PixelFormat};
use crate::ring::Slot;

/// One step after the bands.
enum Step {
    /// A geometry filter from a `from` frame to a `to` one; a bilinear scale's taps.
    Geometry {
        g: Geometry,
        from: FrameSize,
        to: FrameSize,
        taps: Option<Taps>,
    },
    /// The chain's filters `filters` (none changes the size) over a `size` frame.
    Same {
        filters: Range<usize>,
        size: FrameSize,
    },
    /// A geometry filter on each plane of a YUV frame, with each plane's bilinear taps
    /// where it scales.
    Planes(Vec<(PlaneJob, Option<Taps>)>),
    /// The chain's text filter `index` drawn in place on the planes of a `size` frame.
    PlanesText { index: usize, size: FrameSize },
}

/// One lane's frame buffers: two frames to ping-pong between (packed BGR, or the planes of
/// the frames' own format), the separable filters' scratch, and the output frame in the
/// output format (where the frames are BGR and it is not).
struct Frames {
    bufs: [CudaSlice<u8>; 2],
    tmp: CudaSlice<u16>,
    raw_out: CudaSlice<u8>,
    /// Which of `bufs` holds the finished frame (BGR, or the planes).
    result: usize,
}

/// The part of a lane set's chain after the bands (module doc).
pub(super) struct Reshape {
    steps: Vec<Step>,
    /// The frame the chain makes, and the format it goes down in.
    out: FrameSize,
    output: PixelFormat,
    /// The frames run on their planes in this format (the output's), not through BGR.
    planes: Option<PixelFormat>,
    lanes: Vec<Frames>,
}

/// The steps of `chain` after its banded part, for frames of `size`.
fn steps_of(chain: &Chain, size: FrameSize, s: &Arc<CudaStream>) -> Result<Vec<Step>> {
    let filters = chain.filters();
    let mut steps = Vec::new();
    let mut at = size;
    let mut i = chain.banded();
    while i < filters.len() {
        if let Filter::Geometry(g) = &filters[i] {
            let to = g.output(at).map_err(anyhow::Error::msg)?;
            let taps = taps_of(g, (at, to), s)?;
            let (g, from) = (*g, at);
            steps.push(Step::Geometry { g, from, to, taps });
            (at, i) = (to, i + 1);
            continue;
        }
        let end = (i..filters.len())
            .find(|&k| matches!(filters[k], Filter::Geometry(_)))
            .unwrap_or(filters.len());
        steps.push(Step::Same {
            filters: i..end,
            size: at,
        });
        i = end;
    }
    Ok(steps)
}

/// `g`'s taps on the device from a `from` picture to a `to` one, where it is a bilinear
/// scale; None for any other filter.
fn taps_of(
    g: &Geometry,
    (from, to): (FrameSize, FrameSize),
    s: &Arc<CudaStream>,
) -> Result<Option<Taps>> {
    let bilinear = matches!(
        g,
        Geometry::Scale {
            sampling: Sampling::Bilinear,
            ..
        }
    );
    bilinear.then(|| Taps::new(s, from, to)).transpose()
}

/// The steps of `chain` (which `pixel::planes::fits` `format`) on the planes of `size`
/// frames, each bilinear scale's taps at each plane's sizes.
fn plane_steps_of(
    chain: &Chain,
    format: PixelFormat,
    size: FrameSize,
    s: &Arc<CudaStream>,
) -> Result<Vec<Step>> {
    let with_taps = |job: PlaneJob| -> Result<(PlaneJob, Option<Taps>)> {
        Ok((job, taps_of(&job.g, (job.from.1, job.to.1), s)?))
    };
    plane_steps(chain, format, size)
        .into_iter()
        .map(|step| match step {
            PlaneStep::Geometry(jobs, _) => Ok(Step::Planes(
                jobs.into_iter().map(with_taps).collect::<Result<_>>()?,
            )),
            PlaneStep::Text(index, size) => Ok(Step::PlanesText { index, size }),
        })
        .collect()
}

impl Reshape {
    /// The reshaping part of `chain` for `size` frames going down in `output`, with frame
    /// buffers for `lanes` frames in flight; on the frames' planes where `planes` is set
    /// (their format, the output's: module doc); None where the chain keeps the size and
    /// runs in the bands.
    pub(super) fn new(
        s: &Arc<CudaStream>,
        chain: &Chain,
        (size, output): (FrameSize, PixelFormat),
        lanes: usize,
        planes: Option<PixelFormat>,
    ) -> Result<Option<Self>> {
        if !chain.changes_size() && planes.is_none() {
            return Ok(None);
        }
        let steps = match planes {
            Some(format) => plane_steps_of(chain, format, size, s)?,
            None => steps_of(chain, size, s)?,
        };
        let most = chain.largest_frame(size);
        let out = chain.output_size(size)?;
        let separable = chain.filters()[chain.banded()..]
            .iter()
            .any(|f| matches!(f, Filter::Box { .. } | Filter::Gauss { .. }));
        let raw = match (planes, output) {
            (Some(_), _) | (None, PixelFormat::Bgr24) => 1,
            (None, other) => other.bytes(out),
        };
        let lanes = (0..lanes)
            .map(|_| {
                Ok(Frames {
                    bufs: [s.alloc_zeros::<u8>(most)?, s.alloc_zeros::<u8>(most)?],
                    tmp: s.alloc_zeros::<u16>(if separable { most } else { 1 })?,
                    raw_out: s.alloc_zeros::<u8>(raw)?,
                    result: 0,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Some(Self {
            steps,
            out,
            output,
            planes,
            lanes,
        }))
    }

    /// The device bytes `Reshape::new` allocates for `chain` over `size` frames, per lane
    /// (for the lane set's budget check, before anything is allocated).
    pub(super) fn bytes(chain: &Chain, size: FrameSize, output: PixelFormat) -> u64 {
        let Ok(out) = chain.output_size(size) else {
            return 0;
        };
        let most = chain.largest_frame(size);
        let raw = if output == PixelFormat::Bgr24 {
            0
        } else {
            output.bytes(out)
        };
        (2 * most + 2 * most + raw) as u64
    }

    /// Queues on `s` the copy of a band's own rows into `lane`'s frame: the bytes `from` of
    /// `band` to `at` bytes into the frame (a copy engine's, which takes any alignment).
    pub(super) fn gather(
        &mut self,
        s: &Arc<CudaStream>,
        lane: usize,
        band: &CudaSlice<u8>,
        from: Range<usize>,
        at: usize,
    ) -> Result<()> {
        let frame = &mut self.lanes[lane].bufs[0];
        let n = from.len();
        crate::ensure_kept!(
            from.end <= band.len() && at + n <= frame.len(),
            "a band's {n} bytes do not fit the frame it is gathered into"
        );
        s.memcpy_dtod(&band.slice(from), &mut frame.slice_mut(at..at + n))?;
        Ok(())
    }

    /// Queues on `s` the copy of a band's planes (`band`, laid out as a frame of its rows:
    /// `PixelFormat::band_copies`) into `lane`'s frame of `format` and `size`, device to
    /// device: rows `rows` of each plane, where they lie in the whole frame.
    pub(super) fn gather_planes(
        &mut self,
        s: &Arc<CudaStream>,
        lane: usize,
        band: &CudaSlice<u8>,
        (format, size): (PixelFormat, FrameSize),
        rows: Range<usize>,
    ) -> Result<()> {
        let frame = &mut self.lanes[lane].bufs[0];
        let to_len = frame.len();
        let (to, _) = frame.device_ptr_mut(s);
        let from = (band.device_ptr(s).0, band.len());
        for c in format.band_copies(size, rows) {
            // SAFETY: the band's buffer and the lane's frame are the lane's, kept and
            // unwritten by anything else until the frame completes (`lanes`' invariants);
            // `copy_down` checks that every run lies inside both.
            unsafe {
                super::copies::copy_down(s, from, (super::copies::End::Device(to), to_len), c)?
            };
        }
        Ok(())
    }

    /// Queues on `s` the steps over `lane`'s assembled frame, then its conversion to the
    /// output format. `bound` is the chain bound to this frame, where its texts show facts.
    pub(super) fn queue(
        &mut self,
        s: &CudaStream,
        lane: usize,
        k: &ChainKernels,
        bound: Option<&Chain>,
    ) -> Result<()> {
        let frames = &mut self.lanes[lane];
        let mut cur = 0;
        for step in &self.steps {
            match step {
                Step::Geometry { g, from, to, taps } => {
                    let [a, b] = &mut frames.bufs;
                    let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
                    let (src, _) = src.device_ptr(s);
                    let (dst, _) = dst.device_ptr_mut(s);
                    k.geometry(s, g, [src, dst], (*from, *to), taps.as_ref())?;
                    cur = 1 - cur;
                }
                Step::Planes(jobs) => {
                    let [a, b] = &mut frames.bufs;
                    let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
                    let (src, _) = src.device_ptr(s);
                    let (dst, _) = dst.device_ptr_mut(s);
                    for (job, taps) in jobs {
                        k.geometry_plane(s, job, [src, dst], taps.as_ref())?;
                    }
                    cur = 1 - cur;
                }
                Step::PlanesText { index, size } => {
                    let (frame, _) = frames.bufs[cur].device_ptr_mut(s);
                    let format = self.planes.unwrap_or(self.output);
                    k.text_planes(s, (*index, bound), frame, *size, format)?;
                }
                Step::Same { filters, size } => {
                    if cur == 1 {
                        frames.bufs.swap(0, 1);
                    }
                    let v = whole(*size);
                    cur = k.enqueue_part(
                        s,
                        &mut frames.bufs,
                        &mut frames.tmp,
                        v,
                        bound,
                        filters.clone(),
                    )?;
                }
            }
        }
        frames.result = cur;
        if self.planes.is_none() && self.output != PixelFormat::Bgr24 {
            let (src, _) = frames.bufs[cur].device_ptr(s);
            let (dst, _) = frames.raw_out.device_ptr_mut(s);
            let (w, h) = (self.out.width, self.out.height);
            k.convert_out(s, src, dst, w, h, self.output)?;
        }
        Ok(())
    }

    /// Queues on `s` the download of `lane`'s finished frame into the slot's output (its
    /// host buffer, or the device buffer of `lent` bytes lent with it), and says its size on
    /// the slot where it changed.
    pub(super) fn download(
        &self,
        s: &Arc<CudaStream>,
        lane: usize,
        slot: &mut Slot,
        lent: usize,
    ) -> Result<()> {
        let frames = &self.lanes[lane];
        let (from, n) = match (self.planes, self.output) {
            (Some(format), _) => (&frames.bufs[frames.result], format.bytes(self.out)),
            (None, PixelFormat::Bgr24) => (&frames.bufs[frames.result], self.out.bytes()),
            (None, other) => (&frames.raw_out, other.bytes(self.out)),
        };
        let out = super::copies::output_end(slot, lent);
        crate::ensure_kept!(
            out.1 >= n,
            "a {} frame ({}) does not fit its slot",
            self.out,
            self.output
        );
        let c = BandCopy {
            src: 0,
            src_pitch: n,
            dst: 0,
            dst_pitch: n,
            width: n,
            height: 1,
        };
        // SAFETY: the lane's frame buffer is kept, and unwritten, and the slot's output
        // kept, until the frame completes (`lanes`' invariants).
        unsafe { super::copies::copy_down(s, (from.device_ptr(s).0, from.len()), out, c)? };
        slot.output_size = (self.out != slot.size()).then_some(self.out);
        Ok(())
    }

    /// Queues on `s` `lane`'s finished frame laid out for a model (`shape`, its lookup
    /// tables on the device) into the buffer lent with the slot's frame.
    pub(super) fn lay_out(
        &self,
        s: &Arc<CudaStream>,
        lane: usize,
        slot: &mut Slot,
        k: &ChainKernels,
        (shape, tables): (&super::Shape, &CudaSlice<u8>),
    ) -> Result<()> {
        let frames = &self.lanes[lane];
        crate::ensure_kept!(
            self.output == PixelFormat::Bgr24 && self.out == shape.size,
            "a {} frame ({}) shaped for a model of {}",
            self.out,
            self.output,
            shape.size
        );
        let crate::desc::Memory::Device { ptr, .. } = slot.output_memory else {
            anyhow::bail!("a frame shaped for a model is lent on the device");
        };
        let (src, _) = frames.bufs[frames.result].device_ptr(s);
        let (tables, _) = tables.device_ptr(s);
        k.lay_out(s, [src, ptr], self.out, &shape.lookup, tables)?;
        slot.output_size = (self.out != slot.size()).then_some(self.out);
        Ok(())
    }

    /// The size of the frames it makes.
    pub(super) fn out(&self) -> FrameSize {
        self.out
    }
}

/// A whole `size` frame as one band.
fn whole(size: FrameSize) -> View {
    View {
        width: size.width,
        rows: size.height,
        row0: 0,
        height: size.height,
    }
}
