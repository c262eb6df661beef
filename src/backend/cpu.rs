//! The CPU backend: OpenCV's own functions when built with OpenCV, else the plain-Rust
//! reference of `filter.rs`. Frames are processed whole (OpenCV spreads them over cores)
//! and synchronously in `submit`; `complete` hands them back in order.

use std::collections::VecDeque;
use std::time::Instant;

use anyhow::Result;

use super::{Backend, BackendConfig};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::ring::{HostBuffer, Slot};

pub struct CpuBackend {
    size: FrameSize,
    chain: Chain,
    capacity: usize,
    done: VecDeque<Slot>,
    #[cfg(feature = "opencv")]
    scratch: imp::Scratch,
}

impl CpuBackend {
    pub fn new(cfg: &BackendConfig) -> Self {
        Self {
            size: cfg.size,
            chain: cfg.chain.clone(),
            capacity: cfg.in_flight.max(1),
            done: VecDeque::new(),
            #[cfg(feature = "opencv")]
            scratch: imp::Scratch::default(),
        }
    }
}

impl Backend for CpuBackend {
    fn describe(&self) -> String {
        if cfg!(feature = "opencv") {
            format!("cpu (OpenCV, {} threads)", imp_threads())
        } else {
            "cpu (built-in reference, one thread)".to_string()
        }
    }

    fn attach(&mut self, _buffer: &mut HostBuffer) -> Result<()> {
        Ok(())
    }

    fn capacity(&self) -> usize {
        self.capacity
    }

    fn in_flight(&self) -> usize {
        self.done.len()
    }

    fn submit(&mut self, mut slot: Slot) -> Result<()> {
        slot.stamps.submitted = Instant::now();
        let Slot { input, output, .. } = &mut slot;
        #[cfg(feature = "opencv")]
        imp::apply(&self.chain, self.size, input, output, &mut self.scratch)?;
        #[cfg(not(feature = "opencv"))]
        self.chain.apply_reference(self.size, input, output);
        slot.stamps.done = Instant::now();
        self.done.push_back(slot);
        Ok(())
    }

    fn complete(&mut self, _wait: bool) -> Result<Option<Slot>> {
        Ok(self.done.pop_front())
    }
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
    use opencv::core::{self, Mat, ToInputArray, ToOutputArray, Vec3b};
    use opencv::imgproc;
    use opencv::prelude::*;

    use crate::filter::{gain_table, Chain, Filter};
    use crate::frame::FrameSize;

    /// Intermediate images, allocated on first use and reused for every frame.
    #[derive(Default)]
    pub struct Scratch {
        bgr: Mat,
        gray: Mat,
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
            let Scratch { bgr, gray } = &mut *scratch;
            let f = *filter;
            match (k == 0, into_output) {
                (true, true) => run(f, &src, &mut dst, gray),
                (true, false) => run(f, &src, bgr, gray),
                (false, true) => run(f, &*bgr, &mut dst, gray),
                (false, false) => run(f, &dst, bgr, gray),
            }
            .with_context(|| format!("OpenCV failed on filter {filter}"))?;
        }
        anyhow::ensure!(
            dst.data() == output.as_ptr(),
            "OpenCV reallocated the output frame instead of writing into the ring buffer"
        );
        Ok(())
    }

    fn run(
        filter: Filter,
        from: &impl ToInputArray,
        to: &mut impl ToOutputArray,
        gray: &mut Mat,
    ) -> Result<()> {
        match filter {
            Filter::Copy => from.input_array()?.copy_to(to)?,
            Filter::Invert => core::bitwise_not(from, to, &core::no_array())?,
            Filter::Gray => {
                imgproc::cvt_color(from, gray, imgproc::COLOR_BGR2GRAY, 0)?;
                imgproc::cvt_color(gray, to, imgproc::COLOR_GRAY2BGR, 0)?;
            }
            Filter::Gain { alpha, beta } => {
                let values = gain_table(alpha, beta);
                let table = Mat::from_slice(&values)?;
                core::lut(from, &table, to)?;
            }
        }
        Ok(())
    }
}
