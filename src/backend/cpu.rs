//! The CPU backend: OpenCV's own functions when built with OpenCV, else the plain-Rust
//! reference of `filter/reference.rs`. Frames are processed whole (OpenCV spreads them over cores)
//! and synchronously in `submit`; `complete` hands them back in order. Each frame is read
//! by its own descriptor (size, formats), so frames of several sizes and formats may be
//! interleaved; the BGR scratch frames grow to the largest seen. A chain that changes the
//! size (`filter::geometry`) runs part by part and the slot says the size it made
//! (`Slot::output_size`); a text that shows each frame's facts is drawn bound to them. Where
//! the run has a mosaic, each processed frame is drawn into it too (`canvas`). Where the
//! run's one consumer is an embedding program that takes frames as they are made
//! (`BackendConfig::lend`), each frame is made into a buffer lent with it instead of the
//! slot's output (`host_lend`): the program's array is that buffer, not a copy of it. A
//! decoder's picture lent to the slot (`Memory::HostLent`) is packed into the slot's input
//! where the chain reads it, and passed on as it lies where nothing changes it (the sink
//! thread packs it for a sink that reads pixels: a run that writes nothing never copies it).

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::Result;

use super::canvas::Canvas;
use super::{Backend, BackendConfig, Control, Fetch, Picture};
use crate::desc::Memory;
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::{self, Formats, PixelFormat};
use crate::ring::{HostBuffer, Slot};

/// The CPU backend: whole frames, synchronously, in submission order.
pub struct CpuBackend {
    /// The run's first configuration (what `formats` reports; frames say their own).
    formats: Formats,
    /// BGR frames between the input's conversion, the chain and the output's conversion
    /// (as long as the largest frame that needed them).
    bgr_in: Vec<u8>,
    bgr_out: Vec<u8>,
    chain: std::sync::Arc<Chain>,
    capacity: usize,
    trace_frames: u64,
    rolling: crate::trace::Rolling,
    done: VecDeque<Slot>,
    /// The mosaic, where the run composes one.
    canvas: Option<Canvas>,
    /// The inputs' names, for a text's `{name}`.
    names: std::sync::Arc<[String]>,
    scratch: Scratch,
    /// The frames between the parts of a chain that changes the size.
    parts: crate::filter::Parts,
    /// The last frame's size (a new chain must make frames of the size the outputs have).
    last: Option<FrameSize>,
    /// Frames are made into buffers lent with them (module doc).
    lender: Option<super::host_lend::HostLender>,
}

/// Why a user kernel can't run here.
pub fn needs_cuda(k: &crate::filter::user::UserKernel) -> String {
    format!(
        "the filter {k} is a CUDA kernel and needs the CUDA backend; the CPU backend can't run it"
    )
}

/// Refuses a chain with a user kernel.
fn check_chain(chain: &Chain) -> Result<()> {
    match chain.user_kernels().next() {
        Some(k) => anyhow::bail!("{}", needs_cuda(k)),
        None => Ok(()),
    }
}

impl CpuBackend {
    /// A backend for `cfg`'s size and chain (its CUDA-only settings are not used); refuses a
    /// chain with a user kernel.
    pub fn new(cfg: &BackendConfig) -> Result<Self> {
        check_chain(&cfg.chain)?;
        let bgr = |f: PixelFormat| {
            if f == PixelFormat::Bgr24 {
                Vec::new()
            } else {
                vec![0; cfg.size.bytes()]
            }
        };
        Ok(Self {
            formats: cfg.formats,
            bgr_in: bgr(cfg.formats.input),
            bgr_out: bgr(cfg.formats.output),
            chain: std::sync::Arc::new(cfg.chain.clone()),
            capacity: cfg.in_flight.max(1),
            trace_frames: cfg.trace_frames,
            rolling: cfg.rolling,
            done: VecDeque::new(),
            canvas: cfg.compose.as_ref().map(Canvas::new),
            names: cfg.names.clone(),
            scratch: Scratch::default(),
            parts: crate::filter::Parts::default(),
            last: None,
            // (Frames shaped for a model are shaped by the hand-over, from the slot.)
            lender: (cfg.lend && cfg.shape.is_none()).then(Default::default),
        })
    }
}

impl CpuBackend {
    /// Hands a processed frame back: its done time and, when traced, its span.
    fn done_now(&mut self, mut slot: Slot) -> Result<()> {
        slot.stamps.done = Instant::now();
        slot.spans.clear();
        if slot.seq() < self.trace_frames || self.rolling.traces(slot.seq()) {
            slot.spans.push(crate::trace::Span {
                track: crate::trace::Track::Backend(0),
                kind: crate::trace::Kind::Process,
                input: slot.desc.input.0,
                frame: slot.seq(),
                band: None,
                start: slot.stamps.submitted,
                end: slot.stamps.done,
            });
        }
        if let Some(c) = &mut self.canvas {
            c.draw(&slot)?;
        }
        self.done.push_back(slot);
        Ok(())
    }

    /// One `size` frame in `formats`: the input converted to BGR, the chain, the result
    /// converted to the output format (`pixel::apply_reference` defines it); untouched where
    /// nothing changes, the chroma moved where only the 4:2:0 layout does, and a chain of
    /// geometry alone run on the planes of a YUV frame that stays YUV (`pixel::planes`).
    fn process(
        &mut self,
        chain: &Chain,
        (size, out): (FrameSize, FrameSize),
        formats: Formats,
        input: &[u8],
        output: &mut [u8],
    ) -> Result<()> {
        let Formats {
            input: fin,
            output: fout,
        } = formats;
        if formats.passthrough(chain.is_identity()) {
            output.copy_from_slice(input);
            return Ok(());
        }
        if formats.repacked(chain.is_identity()) {
            pixel::repack_420(formats, size, input, output);
            return Ok(());
        }
        // A chain that changes nothing converts straight into the output: no BGR frame
        // between (a copy of the whole frame saved).
        if chain.is_identity() {
            match (fin, fout) {
                (_, PixelFormat::Bgr24) => pixel::to_bgr(fin, size, input, output),
                (PixelFormat::Bgr24, _) => pixel::from_bgr(fout, size, input, output),
                _ => {
                    grow(&mut self.bgr_in, size.bytes());
                    let bgr = &mut self.bgr_in[..size.bytes()];
                    pixel::to_bgr(fin, size, input, bgr);
                    pixel::from_bgr(fout, size, bgr, output);
                }
            }
            return Ok(());
        }
        if fin == fout && crate::pixel::planes::fits(chain, fin, size) {
            crate::pixel::planes::apply(chain, fin, size, input, output, &mut self.parts);
            return Ok(());
        }
        let src: &[u8] = if fin == PixelFormat::Bgr24 {
            input
        } else {
            grow(&mut self.bgr_in, size.bytes());
            pixel::to_bgr(fin, size, input, &mut self.bgr_in[..size.bytes()]);
            &self.bgr_in[..size.bytes()]
        };
        let dst: &mut [u8] = if fout == PixelFormat::Bgr24 {
            &mut *output
        } else {
            grow(&mut self.bgr_out, out.bytes());
            &mut self.bgr_out[..out.bytes()]
        };
        match chain.changes_size() {
            false => same_size(chain, size, src, dst, &mut self.scratch)?,
            true => {
                let scratch = &mut self.scratch;
                let same = |part: &Chain, s: FrameSize, from: &[u8], to: &mut [u8]| {
                    same_size(part, s, from, to, scratch)
                };
                chain.apply_parts(size, src, dst, &mut self.parts, same)?
            }
        }
        if fout != PixelFormat::Bgr24 {
            pixel::from_bgr(fout, out, &self.bgr_out[..out.bytes()], output);
        }
        Ok(())
    }
}

/// Scratch of the CPU backend's own filters (OpenCV's images where built with it).
#[cfg(feature = "opencv")]
type Scratch = imp::Scratch;
#[cfg(not(feature = "opencv"))]
type Scratch = ();

/// Runs a chain that keeps the size, OpenCV's where built with it, from `src` into `dst`.
fn same_size(
    chain: &Chain,
    size: FrameSize,
    src: &[u8],
    dst: &mut [u8],
    scratch: &mut Scratch,
) -> Result<()> {
    #[cfg(feature = "opencv")]
    imp::apply(chain, size, src, dst, scratch)?;
    #[cfg(not(feature = "opencv"))]
    {
        let () = scratch;
        chain.apply_reference(size, src, dst);
    }
    Ok(())
}

/// Makes `buf` at least `len` bytes long.
fn grow(buf: &mut Vec<u8>, len: usize) {
    if buf.len() < len {
        buf.resize(len, 0);
    }
}

impl Backend for CpuBackend {
    fn describe(&self) -> String {
        let what = if cfg!(feature = "opencv") {
            format!("cpu (OpenCV, {} threads)", imp_threads())
        } else {
            "cpu (built-in reference, one thread)".to_string()
        };
        format!("{what}; filter {}; {}", self.chain.brief(), self.formats)
    }

    fn formats(&self) -> Formats {
        self.formats
    }

    fn resizer(&self) -> super::Resizer {
        super::resizer_of(&self.chain)
    }

    fn attach(&mut self, _buffer: &mut HostBuffer) -> Result<()> {
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn tracks(&self) -> Vec<String> {
        vec!["cpu backend".to_string()]
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn submit(&mut self, mut slot: Slot) -> Result<()> {
        slot.stamps.submitted = Instant::now();
        slot.output_size = None;
        slot.passed_as_lent = false;
        let (size, formats) = (slot.size(), slot.formats());
        // Before any way out: a chain changed while running is checked against this size.
        self.last = Some(size);
        let lends = self.lender.is_some();
        let untouched = formats.passthrough(self.chain.is_identity());
        match &slot.desc.memory {
            Memory::Host => {}
            Memory::Device { .. } => anyhow::bail!(
                "the CPU backend takes frames in host memory; frame {} is in device memory",
                slot.seq()
            ),
            // Nothing changes the frame and nothing here reads it: it goes on where its
            // decoder left it (packed for a sink that reads pixels, `pipeline::sink`).
            Memory::HostLent { .. }
                if untouched
                    && !lends
                    && self.canvas.is_none()
                    && slot.output.len() >= formats.output.bytes(size) =>
            {
                slot.output_memory = std::mem::take(&mut slot.desc.memory);
                slot.passed_as_lent = true;
                return self.done_now(slot);
            }
            Memory::HostLent { .. } => unlend(&mut slot)?,
        }
        let Slot { input, output, .. } = &mut slot;
        if !lends && untouched && input.len() == output.len() {
            // Nothing changes the frame: the two buffers trade places instead of a copy
            // (both are the slot's, allocated once; the next capture fills the other).
            std::mem::swap(input, output);
            return self.done_now(slot);
        }
        let need = |f: PixelFormat| f.bytes(size);
        crate::ensure_kept!(
            input.len() >= need(formats.input),
            "a {size} frame ({formats}) does not fit its slot"
        );
        // A text that shows the frame's own facts is drawn bound to them.
        let chain = match self.chain.changes_per_frame() {
            true => std::sync::Arc::new(self.chain.bound(&super::facts_of(&slot, &self.names))),
            false => self.chain.clone(),
        };
        let out = chain.output_size(size)?;
        crate::ensure_kept!(
            slot.output.len() >= formats.output.bytes(out),
            "a {out} frame ({formats}) does not fit its slot"
        );
        slot.output_size = (out != size).then_some(out);
        let input = &slot.input[..need(formats.input)];
        match self.lender.clone() {
            Some(lender) => {
                let mut lent = lender.take(formats.output.bytes(out));
                self.process(&chain, (size, out), formats, input, &mut lent)?;
                slot.output_memory = lender.lend(lent);
            }
            None => {
                let Slot { input, output, .. } = &mut slot;
                let (input, output) = (
                    &input[..need(formats.input)],
                    &mut output[..formats.output.bytes(out)],
                );
                self.process(&chain, (size, out), formats, input, output)?;
            }
        }
        self.done_now(slot)
    }

    fn control(&mut self, control: &Control) -> Result<()> {
        if let Control::Chain(chain) = control {
            check_chain(chain)?;
            let Some(chain) = super::next_chain(&self.chain, chain, self.last) else {
                return Ok(());
            };
            self.chain = std::sync::Arc::new(chain);
        }
        // Bands and page-locking mean nothing on the CPU.
        Ok(())
    }

    fn complete(&mut self, _wait: bool) -> Result<Option<Slot>> {
        Ok(self.done.pop_front())
    }

    fn picture(&mut self, fetch: Fetch) -> Result<Option<Picture>> {
        Ok(self.canvas.as_mut().and_then(|c| c.picture(fetch)))
    }
}

/// A frame lent in host memory (its decoder's picture, `Memory::HostLent`) packed into the
/// slot's input, where the chain reads it; the lease given back.
fn unlend(slot: &mut Slot) -> Result<()> {
    let (format, size) = (slot.desc.format, slot.size());
    let from = slot
        .desc
        .memory
        .host_frame()
        .ok_or_else(|| crate::bug!("frame {} is lent without its bytes", slot.desc.index))?;
    crate::ensure_kept!(
        slot.input.len() >= format.bytes(size)
            && from.len() >= slot.desc.planes.extent(format, size),
        "a lent {size} frame ({format}) does not fit its slot"
    );
    slot.desc
        .planes
        .pack(format, size, from, &mut slot.input[..format.bytes(size)]);
    slot.desc.memory = Memory::Host;
    slot.desc.planes = crate::desc::Planes::packed(format, size);
    Ok(())
}

#[cfg(feature = "opencv")]
fn imp_threads() -> i32 {
    opencv::core::get_num_threads().unwrap_or(1)
}

#[cfg(not(feature = "opencv"))]
fn imp_threads() -> i32 {
    1
}

#[cfg(feature = "opencv")]
mod imp {
    use anyhow::{Context, Result};
    use opencv::core::{self, Mat, Point, Rect, Scalar, Size, ToInputArray, ToOutputArray, Vec3b};
    use opencv::imgproc;
    use opencv::prelude::*;

    use crate::filter::{gain_table, Chain, Filter};
    use crate::frame::FrameSize;

    /// Intermediate images, allocated on first use and reused for every frame.
    #[derive(Default)]
    pub struct Scratch {
        bgr: Mat,
        work: Work,
    }

    /// Intermediate images of single filters.
    #[derive(Default)]
    pub struct Work {
        gray: Mat,
        dx: Mat,
        dy: Mat,
        adx: Mat,
        ady: Mat,
        blur: Mat,
        padded: Mat,
        median: Mat,
    }

    /// Runs `chain` from `input` to `output` with OpenCV; intermediate results ping-pong
    /// between `output` and a scratch image so that the last filter writes `output`.
    pub fn apply(
        chain: &Chain,
        size: FrameSize,
        input: &[u8],
        output: &mut [u8],
        scratch: &mut Scratch,
    ) -> Result<()> {
        let (rows, cols) = (size.height as i32, size.width as i32);
        let src = Mat::new_rows_cols_with_bytes::<Vec3b>(rows, cols, input)?;
        let mut dst = Mat::new_rows_cols_with_bytes_mut::<Vec3b>(rows, cols, output)?;
        let filters = chain.filters();
        let n = filters.len();
        for (k, filter) in filters.iter().enumerate() {
            let into_output = (n - 1 - k).is_multiple_of(2);
            // Filter k reads what filter k-1 wrote: the input, the output or the scratch image.
            let Scratch { bgr, work } = &mut *scratch;
            let f = filter;
            match (k == 0, into_output) {
                (true, true) => run(f, &src, &mut dst, work),
                (true, false) => run(f, &src, bgr, work),
                (false, true) => run(f, &*bgr, &mut dst, work),
                (false, false) => run(f, &dst, bgr, work),
            }
            .with_context(|| format!("OpenCV failed on filter {filter}"))?;
            if let Filter::Text(t) = filter {
                // Drawn over the copy `run` made, by the reference's arithmetic.
                let v = crate::filter::text::Band {
                    width: size.width,
                    rows: size.height,
                    row0: 0,
                };
                let bytes = match into_output {
                    true => dst.data_bytes_mut()?,
                    false => scratch.bgr.data_bytes_mut()?,
                };
                t.place(size)
                    .draw_in_place(crate::filter::text::atlas(), v, bytes);
            }
        }
        anyhow::ensure!(
            dst.data() == output.as_ptr(),
            "OpenCV reallocated the output frame instead of writing into the ring buffer"
        );
        Ok(())
    }

    fn run(
        filter: &Filter,
        from: &impl ToInputArray,
        to: &mut impl ToOutputArray,
        w: &mut Work,
    ) -> Result<()> {
        const BORDER: i32 = core::BORDER_REFLECT_101;
        let square = |k: u32| Size::new(k as i32, k as i32);
        match *filter {
            Filter::Copy | Filter::Text(_) | Filter::Rate(_) => from.input_array()?.copy_to(to)?,
            Filter::Invert => core::bitwise_not(from, to, &core::no_array())?,
            Filter::Gray => {
                imgproc::cvt_color(from, &mut w.gray, imgproc::COLOR_BGR2GRAY, 0)?;
                imgproc::cvt_color(&w.gray, to, imgproc::COLOR_GRAY2BGR, 0)?;
            }
            Filter::Box { k } => imgproc::blur(from, to, square(k), Point::new(-1, -1), BORDER)?,
            Filter::Gauss { k, sigma } => {
                let s = f64::from(sigma);
                imgproc::gaussian_blur(from, to, square(k), s, s, BORDER)?
            }
            Filter::Sobel => {
                imgproc::sobel(from, &mut w.dx, core::CV_16S, 1, 0, 3, 1.0, 0.0, BORDER)?;
                imgproc::sobel(from, &mut w.dy, core::CV_16S, 0, 1, 3, 1.0, 0.0, BORDER)?;
                core::convert_scale_abs(&w.dx, &mut w.adx, 1.0, 0.0)?;
                core::convert_scale_abs(&w.dy, &mut w.ady, 1.0, 0.0)?;
                core::add_weighted(&w.adx, 0.5, &w.ady, 0.5, 0.0, to, -1)?;
            }
            Filter::Sharpen { amount } => {
                imgproc::gaussian_blur(from, &mut w.blur, square(3), 0.0, 0.0, BORDER)?;
                let a = f64::from(amount);
                core::add_weighted(from, 1.0 + a, &w.blur, -a, 0.0, to, -1)?;
            }
            Filter::Median3 => {
                // medianBlur replicates borders; pad with REFLECT_101 first, like every filter.
                core::copy_make_border(from, &mut w.padded, 1, 1, 1, 1, BORDER, Scalar::default())?;
                imgproc::median_blur(&w.padded, &mut w.median, 3)?;
                let (cols, rows) = (w.padded.cols() - 2, w.padded.rows() - 2);
                Mat::roi(&w.median, Rect::new(1, 1, cols, rows))?.copy_to(to)?;
            }
            Filter::Gain { alpha, beta } => {
                let values = gain_table(alpha, beta);
                let table = Mat::from_slice(&values)?;
                core::lut(from, &table, to)?;
            }
            Filter::Kernel(ref k) => anyhow::bail!("{}", super::needs_cuda(k)),
            Filter::Geometry(ref g) => {
                anyhow::bail!(
                    "{g} runs on whole frames between the chain's parts (`CpuBackend::run_chain`)"
                )
            }
        }
        Ok(())
    }
}
