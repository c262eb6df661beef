//! The CUDA kernels: `.cu` sources from `kernels/`, compiled at start with NVRTC for the
//! device's compute capability, and one launcher per filter.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use crate::filter::Filter;

/// Every kernel source, in the order they are compiled.
pub const SOURCES: &[(&str, &str)] =
    &[("pointwise.cu", include_str!("../../kernels/pointwise.cu"))];

/// The loaded kernels.
pub struct Kernels {
    copy: CudaFunction,
    invert: CudaFunction,
    gray: CudaFunction,
    gain: CudaFunction,
}

const BLOCK: u32 = 256;

/// The PTX of `SOURCES` for `arch`, compiled by NVRTC on first use (about 50 ms).
fn compiled(arch: &str) -> Result<Ptx> {
    static CACHE: Mutex<Option<(String, Ptx)>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ptx)) = cache.as_ref().filter(|(a, _)| a == arch) {
        return Ok(ptx.clone());
    }
    let (name, src) = SOURCES[0];
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some(name.to_string()),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(src, opts)
        .map_err(|e| anyhow::anyhow!("NVRTC could not compile kernels/{name}: {e:?}"))?;
    *cache = Some((arch.to_string(), ptx.clone()));
    Ok(ptx)
}

impl Kernels {
    /// Compiles and loads every kernel for `ctx`'s device.
    pub fn load(ctx: &Arc<CudaContext>) -> Result<Self> {
        let (major, minor) = ctx
            .compute_capability()
            .context("reading compute capability")?;
        let ptx = compiled(&format!("compute_{major}{minor}"))?;
        let module = ctx
            .load_module(ptx)
            .context("loading the compiled kernels")?;
        let f = |n: &str| {
            module
                .load_function(n)
                .with_context(|| format!("kernel {n} missing"))
        };
        Ok(Self {
            copy: f("fp_copy")?,
            invert: f("fp_invert")?,
            gray: f("fp_gray")?,
            gain: f("fp_gain")?,
        })
    }

    /// Queues `filter` over the first `len` bytes of `src`, writing `dst`, on `stream`.
    pub fn launch(
        &self,
        stream: &CudaStream,
        filter: Filter,
        src: &CudaSlice<u8>,
        dst: &mut CudaSlice<u8>,
        len: usize,
    ) -> Result<()> {
        let n = len as u64;
        let (func, per_thread) = match filter {
            Filter::Copy => (&self.copy, 16),
            Filter::Invert => (&self.invert, 16),
            Filter::Gray => (&self.gray, 48),
            Filter::Gain { .. } => (&self.gain, 16),
        };
        let threads = n.div_ceil(per_thread).max(1);
        let cfg = LaunchConfig {
            grid_dim: (threads.div_ceil(u64::from(BLOCK)) as u32, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = stream.launch_builder(func);
        b.arg(src).arg(dst).arg(&n);
        let (alpha, beta);
        if let Filter::Gain { alpha: a, beta: c } = filter {
            (alpha, beta) = (a, c);
            b.arg(&alpha).arg(&beta);
        }
        // SAFETY: the arguments match the kernel's signature in kernels/pointwise.cu, and
        // `len` is within both buffers (the caller sizes them for the largest band).
        unsafe { b.launch(cfg) }.with_context(|| format!("launching the {filter} kernel"))?;
        Ok(())
    }
}
