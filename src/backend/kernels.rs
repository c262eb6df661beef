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

/// Every kernel in `kernels/*.cu`, by its role; `name` is its `__global__` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    Copy,
    Invert,
    Gray,
    Gain,
    BoxRows,
    BoxColumns,
    GaussRows,
    GaussColumns,
    Sobel,
    Sharpen,
    Median3,
}

impl Kernel {
    const ALL: [Kernel; 11] = [
        Kernel::Copy,
        Kernel::Invert,
        Kernel::Gray,
        Kernel::Gain,
        Kernel::BoxRows,
        Kernel::BoxColumns,
        Kernel::GaussRows,
        Kernel::GaussColumns,
        Kernel::Sobel,
        Kernel::Sharpen,
        Kernel::Median3,
    ];

    fn name(self) -> &'static str {
        match self {
            Kernel::Copy => "fp_copy",
            Kernel::Invert => "fp_invert",
            Kernel::Gray => "fp_gray",
            Kernel::Gain => "fp_gain",
            Kernel::BoxRows => "fp_box_h",
            Kernel::BoxColumns => "fp_box_v",
            Kernel::GaussRows => "fp_gauss_h",
            Kernel::GaussColumns => "fp_gauss_v",
            Kernel::Sobel => "fp_sobel",
            Kernel::Sharpen => "fp_sharpen",
            Kernel::Median3 => "fp_median3",
        }
    }
}

/// The last argument of a separable filter's passes.
enum PassArg<'w> {
    /// The box's area (k²), divided by in its column pass.
    Area(u32),
    /// The Gaussian's weights, read by both passes.
    Weights(&'w CudaSlice<u32>),
}

/// The constants the kernels share with `filter::reference`, passed to NVRTC as `-D`
/// definitions: the `.cu` sources hold no value of their own, so the two can't drift.
fn shared_constants() -> Vec<String> {
    use crate::filter::reference::{GAUSS_COL_SHIFT, GAUSS_ROW_SHIFT};
    use crate::filter::{GRAY_B, GRAY_G, GRAY_R, GRAY_SHIFT};
    [
        ("FP_GRAY_B", GRAY_B),
        ("FP_GRAY_G", GRAY_G),
        ("FP_GRAY_R", GRAY_R),
        ("FP_GRAY_SHIFT", GRAY_SHIFT),
        ("FP_GAUSS_ROW_SHIFT", GAUSS_ROW_SHIFT),
        ("FP_GAUSS_COL_SHIFT", GAUSS_COL_SHIFT),
    ]
    .iter()
    .map(|(name, value)| format!("-D{name}={value}u"))
    .collect()
}

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
    let mut options = vec![format!("--gpu-architecture={arch}")];
    options.extend(shared_constants());
    let opts = CompileOptions {
        options,
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

/// One thread per pixel of band `v`, in 32×8 blocks.
fn grid_2d(v: View) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (
            (v.width as u32).div_ceil(BLOCK_2D.0),
            (v.rows as u32).div_ceil(BLOCK_2D.1),
            1,
        ),
        block_dim: (BLOCK_2D.0, BLOCK_2D.1, 1),
        shared_mem_bytes: 0,
    }
}

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
        let funcs = Kernel::ALL
            .iter()
            .map(|k| {
                module
                    .load_function(k.name())
                    .with_context(|| format!("kernel {} missing", k.name()))
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
        let mut b = s.launch_builder(self.func(Kernel::Copy));
        b.arg(&src).arg(&dst).arg(&n);
        let blocks = n.div_ceil(16).div_ceil(u64::from(BLOCK)).max(1) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        go(&mut b, cfg)
    }

    fn func(&self, kernel: Kernel) -> &CudaFunction {
        &self.funcs[kernel as usize] // loaded in `Kernel::ALL`'s order, which is declaration order
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
        let grid = grid_2d(v);
        let (w, rows, row0, height) = (
            v.width as i32,
            v.rows as i32,
            v.row0 as i32,
            v.height as i32,
        );
        match filter {
            Filter::Copy | Filter::Invert | Filter::Gray | Filter::Gain { .. } => {
                // Bytes per thread: 16 (one uint4), 48 for gray (16 whole pixels).
                let (kernel, per) = match filter {
                    Filter::Copy => (Kernel::Copy, 16),
                    Filter::Invert => (Kernel::Invert, 16),
                    Filter::Gray => (Kernel::Gray, 48),
                    _ => (Kernel::Gain, 16),
                };
                let mut b = s.launch_builder(self.func(kernel));
                b.arg(src).arg(dst).arg(&n);
                if let Filter::Gain { alpha, beta } = &filter {
                    b.arg(alpha).arg(beta);
                }
                go(&mut b, linear(per))?;
            }
            Filter::Box { k } => {
                let area = k * k;
                let passes = (Kernel::BoxRows, Kernel::BoxColumns);
                self.separable(s, passes, src, tmp, dst, v, k, PassArg::Area(area))?;
            }
            Filter::Gauss { k, .. } => {
                let wts = weights.context("Gaussian weights missing")?;
                let passes = (Kernel::GaussRows, Kernel::GaussColumns);
                self.separable(s, passes, src, tmp, dst, v, k, PassArg::Weights(wts))?;
            }
            Filter::Sobel | Filter::Median3 | Filter::Sharpen { .. } => {
                let kernel = match filter {
                    Filter::Sobel => Kernel::Sobel,
                    Filter::Median3 => Kernel::Median3,
                    _ => Kernel::Sharpen,
                };
                let mut b = s.launch_builder(self.func(kernel));
                b.arg(src)
                    .arg(dst)
                    .arg(&w)
                    .arg(&rows)
                    .arg(&row0)
                    .arg(&height);
                let (keep, take) = match filter {
                    Filter::Sharpen { amount } => (1.0 + amount, -amount),
                    _ => (0.0, 0.0),
                };
                if kernel == Kernel::Sharpen {
                    b.arg(&keep).arg(&take);
                }
                go(&mut b, grid)?;
            }
        }
        Ok(())
    }

    /// A separable filter's two passes over band `v`: `passes.0` along rows from `src` into
    /// `tmp`, then `passes.1` along columns from `tmp` into `dst`, with radius `k / 2`. The
    /// box and the Gaussian differ only in their last argument (`last`).
    #[allow(clippy::too_many_arguments)]
    fn separable(
        &self,
        s: &CudaStream,
        passes: (Kernel, Kernel),
        src: &CudaSlice<u8>,
        tmp: &mut CudaSlice<u16>,
        dst: &mut CudaSlice<u8>,
        v: View,
        k: u32,
        last: PassArg,
    ) -> Result<()> {
        let grid = grid_2d(v);
        let r = (k / 2) as i32;
        let (w, rows, row0, height) = (
            v.width as i32,
            v.rows as i32,
            v.row0 as i32,
            v.height as i32,
        );
        let mut b = s.launch_builder(self.func(passes.0));
        b.arg(src).arg(&mut *tmp).arg(&w).arg(&rows).arg(&r);
        if let PassArg::Weights(wts) = last {
            b.arg(wts); // the box's row pass takes no last argument
        }
        go(&mut b, grid)?;
        let mut b = s.launch_builder(self.func(passes.1));
        b.arg(&*tmp)
            .arg(dst)
            .arg(&w)
            .arg(&rows)
            .arg(&row0)
            .arg(&height)
            .arg(&r);
        match &last {
            PassArg::Area(area) => b.arg(area),
            PassArg::Weights(wts) => b.arg(*wts),
        };
        go(&mut b, grid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_constant_the_kernels_require_is_passed() {
        let defines = shared_constants().join(" ");
        let sources: String = SOURCES.iter().map(|(_, s)| *s).collect();
        let required: Vec<&str> = sources
            .split("defined(")
            .skip(1)
            .filter_map(|rest| rest.split(')').next())
            .collect();
        assert!(required.len() >= 6, "{required:?}");
        for name in required {
            assert!(
                defines.contains(&format!("-D{name}=")),
                "{name} is not passed to NVRTC"
            );
        }
        for kernel in Kernel::ALL {
            assert!(
                sources.contains(&format!("void {}(", kernel.name())),
                "{kernel:?}"
            );
        }
        assert!(Kernel::ALL
            .iter()
            .enumerate()
            .all(|(i, k)| *k as usize == i));
    }
}
