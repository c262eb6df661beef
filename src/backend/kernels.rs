//! The CUDA kernels: `.cu` sources from `kernels/`, compiled at start with NVRTC for the
//! device's compute capability, and the launcher that runs a filter chain over a band
//! buffer exactly as `filter::reference` defines it.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, LaunchArgs, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use crate::filter::reference::{gauss_weights, View};
use crate::filter::{Chain, Filter};

/// Every kernel source, compiled as one program.
pub const SOURCES: &[(&str, &str)] = &[
    ("pointwise.cu", include_str!("../../kernels/pointwise.cu")),
    (
        "neighbourhood.cu",
        include_str!("../../kernels/neighbourhood.cu"),
    ),
];

const NAMES: &[&str] = &[
    "fp_copy",
    "fp_invert",
    "fp_gray",
    "fp_gain",
    "fp_box_h",
    "fp_box_v",
    "fp_gauss_h",
    "fp_gauss_v",
    "fp_sobel",
    "fp_sharpen",
    "fp_median3",
];

/// The PTX of `SOURCES` for `arch`, compiled by NVRTC on first use (about 50 ms).
fn compiled(arch: &str) -> Result<Ptx> {
    static CACHE: Mutex<Option<(String, Ptx)>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, ptx)) = cache.as_ref().filter(|(a, _)| a == arch) {
        return Ok(ptx.clone());
    }
    let src: String = SOURCES
        .iter()
        .map(|(_, s)| *s)
        .collect::<Vec<_>>()
        .join("\n");
    let opts = CompileOptions {
        options: vec![format!("--gpu-architecture={arch}")],
        name: Some("framepipe.cu".to_string()),
        ..Default::default()
    };
    let ptx = compile_ptx_with_opts(src, opts)
        .map_err(|e| anyhow::anyhow!("NVRTC could not compile kernels/*.cu: {e:?}"))?;
    *cache = Some((arch.to_string(), ptx.clone()));
    Ok(ptx)
}

/// Launches a kernel whose arguments have been pushed on `b`.
fn go(b: &mut LaunchArgs<'_>, cfg: LaunchConfig) -> Result<()> {
    // SAFETY: every caller (`ChainKernels::launch`) pushes exactly the arguments of the
    // kernel's signature in kernels/*.cu, and every buffer holds the band's elements.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// A filter chain ready to run on one device: its kernels and its Gaussian weights.
pub struct ChainKernels {
    funcs: Vec<CudaFunction>,
    chain: Chain,
    /// Per filter of the chain: its weights on the device (Gaussians only).
    weights: Vec<Option<CudaSlice<u32>>>,
}

const BLOCK: u32 = 256;
const BLOCK_2D: (u32, u32) = (32, 8);

impl ChainKernels {
    /// Compiles (once per process and architecture) and loads every kernel, and uploads the
    /// chain's weights on `stream`.
    pub fn new(ctx: &Arc<CudaContext>, stream: &Arc<CudaStream>, chain: &Chain) -> Result<Self> {
        let (major, minor) = ctx
            .compute_capability()
            .context("reading compute capability")?;
        let ptx = compiled(&format!("compute_{major}{minor}"))?;
        let module = ctx
            .load_module(ptx)
            .context("loading the compiled kernels")?;
        let funcs = NAMES
            .iter()
            .map(|n| {
                module
                    .load_function(n)
                    .with_context(|| format!("kernel {n} missing"))
            })
            .collect::<Result<Vec<_>>>()?;
        let weights = chain
            .filters()
            .iter()
            .map(|f| match f {
                Filter::Gauss { k, sigma } => {
                    stream.clone_htod(&gauss_weights(*k, *sigma)).map(Some)
                }
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            funcs,
            chain: chain.clone(),
            weights,
        })
    }

    /// Copies `n` bytes from `src` to `dst` with the copy kernel, given raw device
    /// addresses (page-locked host memory mapped into the device's address space included).
    pub fn copy_raw(&self, s: &CudaStream, src: u64, dst: u64, n: u64) -> Result<()> {
        let mut b = s.launch_builder(self.func("fp_copy"));
        b.arg(&src).arg(&dst).arg(&n);
        let blocks = n.div_ceil(16).div_ceil(u64::from(BLOCK)).max(1) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        go(&mut b, cfg)
    }

    fn func(&self, name: &str) -> &CudaFunction {
        let i = NAMES.iter().position(|n| *n == name).expect("kernel name");
        &self.funcs[i]
    }

    /// Queues the chain on `stream` over the band in `bufs[0]` (its place given by `v`),
    /// ping-ponging between the two buffers; returns the index of the one with the result.
    /// `tmp` holds at least as many elements as the band has bytes.
    pub fn enqueue(
        &self,
        stream: &CudaStream,
        bufs: &mut [CudaSlice<u8>; 2],
        tmp: &mut CudaSlice<u16>,
        v: View,
    ) -> Result<usize> {
        let mut cur = 0;
        for (filter, weights) in self.chain.filters().iter().zip(&self.weights) {
            let [a, b] = bufs;
            let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
            self.launch(stream, *filter, weights.as_ref(), src, dst, tmp, v)
                .with_context(|| format!("launching the {filter} kernels"))?;
            cur = 1 - cur;
        }
        Ok(cur)
    }

    #[allow(clippy::too_many_arguments)]
    fn launch(
        &self,
        s: &CudaStream,
        filter: Filter,
        weights: Option<&CudaSlice<u32>>,
        src: &CudaSlice<u8>,
        dst: &mut CudaSlice<u8>,
        tmp: &mut CudaSlice<u16>,
        v: View,
    ) -> Result<()> {
        let n = (v.width * v.rows * 3) as u64;
        let linear = |per_thread: u64| LaunchConfig {
            grid_dim: (
                n.div_ceil(per_thread).div_ceil(u64::from(BLOCK)).max(1) as u32,
                1,
                1,
            ),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let grid = LaunchConfig {
            grid_dim: (
                (v.width as u32).div_ceil(BLOCK_2D.0),
                (v.rows as u32).div_ceil(BLOCK_2D.1),
                1,
            ),
            block_dim: (BLOCK_2D.0, BLOCK_2D.1, 1),
            shared_mem_bytes: 0,
        };
        let (w, rows, row0, height) = (
            v.width as i32,
            v.rows as i32,
            v.row0 as i32,
            v.height as i32,
        );
        match filter {
            Filter::Copy | Filter::Invert | Filter::Gray => {
                let (name, per) = match filter {
                    Filter::Copy => ("fp_copy", 16),
                    Filter::Invert => ("fp_invert", 16),
                    _ => ("fp_gray", 48),
                };
                let mut b = s.launch_builder(self.func(name));
                b.arg(src).arg(dst).arg(&n);
                go(&mut b, linear(per))?;
            }
            Filter::Gain { alpha, beta } => {
                let mut b = s.launch_builder(self.func("fp_gain"));
                b.arg(src).arg(dst).arg(&n).arg(&alpha).arg(&beta);
                go(&mut b, linear(16))?;
            }
            Filter::Box { k } => {
                let r = (k / 2) as i32;
                let area = k * k;
                let mut b = s.launch_builder(self.func("fp_box_h"));
                b.arg(src).arg(&mut *tmp).arg(&w).arg(&rows).arg(&r);
                go(&mut b, grid)?;
                let mut b = s.launch_builder(self.func("fp_box_v"));
                b.arg(&*tmp)
                    .arg(dst)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&row0)
                    .arg(&height)
                    .arg(&r)
                    .arg(&area);
                go(&mut b, grid)?;
            }
            Filter::Gauss { k, .. } => {
                let r = (k / 2) as i32;
                let wts = weights.context("Gaussian weights missing")?;
                let mut b = s.launch_builder(self.func("fp_gauss_h"));
                b.arg(src)
                    .arg(&mut *tmp)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&r)
                    .arg(wts);
                go(&mut b, grid)?;
                let mut b = s.launch_builder(self.func("fp_gauss_v"));
                b.arg(&*tmp)
                    .arg(dst)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&row0)
                    .arg(&height)
                    .arg(&r)
                    .arg(wts);
                go(&mut b, grid)?;
            }
            Filter::Sobel | Filter::Median3 => {
                let name = if filter == Filter::Sobel {
                    "fp_sobel"
                } else {
                    "fp_median3"
                };
                let mut b = s.launch_builder(self.func(name));
                b.arg(src)
                    .arg(dst)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&row0)
                    .arg(&height);
                go(&mut b, grid)?;
            }
            Filter::Sharpen { amount } => {
                let (keep, take) = (1.0 + amount, -amount);
                let mut b = s.launch_builder(self.func("fp_sharpen"));
                b.arg(src)
                    .arg(dst)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&row0)
                    .arg(&height)
                    .arg(&keep)
                    .arg(&take);
                go(&mut b, grid)?;
            }
        }
        Ok(())
    }
}
