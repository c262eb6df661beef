//! The CUDA kernels: `.cu` sources from `kernels/` (and users' own files), compiled at start
//! with NVRTC for the device's compute capability, and the launcher that runs a filter chain
//! over a band buffer exactly as `filter::reference` defines it; also a picture fitted to a
//! model (`fit_linear`, `lay_out`: `pixel::linear` and `pixel::lookup` on the device).
//!
//! Every filter kernel but the separable passes takes an `fp_band` (`kernels/framepipe.cuh`)
//! as its first argument (`Band` is its Rust twin); the separable passes and the format
//! conversions (`kernels/convert.cu`) take plain pointers and sizes.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, DevicePtr, DevicePtrMut, DeviceRepr,
    LaunchArgs, LaunchConfig, PushKernelArg,
};
use cudarc::nvrtc::Ptx;

use super::nvrtc::{self, Program};
use crate::filter::geometry::{centred, tap_table, Geometry, Turn};
use crate::filter::reference::{gauss_weights, yuv, View};
use crate::filter::user::{UserKernel, Value};
use crate::filter::{Chain, Filter};
use crate::frame::FrameSize;
use crate::pixel::lookup::Lookup;
use crate::pixel::planes::PlaneJob;
use crate::pixel::PixelFormat;

/// Every kernel source, compiled as one program.
pub const SOURCES: &[(&str, &str)] = &[
    ("pointwise.cu", include_str!("../../kernels/pointwise.cu")),
    (
        "neighbourhood.cu",
        include_str!("../../kernels/neighbourhood.cu"),
    ),
    ("convert.cu", include_str!("../../kernels/convert.cu")),
    ("compose.cu", include_str!("../../kernels/compose.cu")),
    ("text.cu", include_str!("../../kernels/text.cu")),
    ("geometry.cu", include_str!("../../kernels/geometry.cu")),
];

/// Every kernel in `kernels/*.cu`, by its role; `name` is its `__global__` function.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kernel {
    CopyBytes,
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
    ToBgr,
    FromBgr,
    Repack420,
    Compose,
    Text,
    TextPlanes,
    GeometryMove,
    ScaleBilinear,
    ScaleArea,
    LayOut,
    FitLinear,
}

impl Kernel {
    const ALL: [Kernel; 23] = [
        Kernel::CopyBytes,
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
        Kernel::ToBgr,
        Kernel::FromBgr,
        Kernel::Repack420,
        Kernel::Compose,
        Kernel::Text,
        Kernel::TextPlanes,
        Kernel::GeometryMove,
        Kernel::ScaleBilinear,
        Kernel::ScaleArea,
        Kernel::LayOut,
        Kernel::FitLinear,
    ];

    fn name(self) -> &'static str {
        match self {
            Kernel::CopyBytes => "fp_copy_bytes",
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
            Kernel::ToBgr => "fp_to_bgr",
            Kernel::FromBgr => "fp_from_bgr",
            Kernel::Repack420 => "fp_repack420",
            Kernel::Compose => "fp_compose",
            Kernel::Text => "fp_text_draw",
            Kernel::TextPlanes => "fp_text_planes",
            Kernel::GeometryMove => "fp_geometry_move",
            Kernel::ScaleBilinear => "fp_scale_bilinear",
            Kernel::ScaleArea => "fp_scale_area",
            Kernel::LayOut => "fp_lay_out",
            Kernel::FitLinear => "fp_fit_linear",
        }
    }
}

/// A band's buffers for one filter: its input, its output and the separable filters'
/// intermediate rows.
struct BandBuffers<'a> {
    src: &'a CudaSlice<u8>,
    dst: &'a mut CudaSlice<u8>,
    tmp: &'a mut CudaSlice<u16>,
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
        ("FP_TEXT_BOX_DARKEN", crate::filter::text::BOX_DARKEN),
        ("FP_SCALE_BITS", crate::filter::geometry::BITS),
    ]
    .iter()
    .map(|(name, value)| format!("-D{name}={value}u"))
    .chain(yuv_constants())
    .collect()
}

/// `filter::reference::yuv`'s fixed-point constants (signed) for `kernels/convert.cu`.
fn yuv_constants() -> Vec<String> {
    use crate::filter::reference::yuv::*;
    [
        ("SHIFT", SHIFT as i32),
        ("CY", CY),
        ("CUB", CUB),
        ("CUG", CUG),
        ("CVG", CVG),
        ("CVR", CVR),
        ("CRY", CRY),
        ("CGY", CGY),
        ("CBY", CBY),
        ("CRU", CRU),
        ("CGU", CGU),
        ("CBU", CBU),
        ("CGV", CGV),
        ("CBV", CBV),
    ]
    .iter()
    .map(|(name, value)| format!("-DFP_YUV_{name}=({value})"))
    .collect()
}

/// The compiled `SOURCES` for `arch` (a cubin, or PTX), compiled by NVRTC on first use
/// (about 50 ms; `device::warm_up` does it ahead, while the input opens).
pub(super) fn compiled(arch: &str) -> Result<Ptx> {
    let source: String = SOURCES
        .iter()
        .map(|(_, s)| *s)
        .collect::<Vec<_>>()
        .join("\n");
    let mut options = vec![format!("--gpu-architecture={arch}")];
    options.extend(shared_constants());
    let program = Program {
        name: "framepipe.cu".to_string(),
        source,
        options,
    };
    nvrtc::compile(&program)
        .map_err(|log| anyhow::anyhow!("NVRTC could not compile kernels/*.cu:\n{log}"))
}

/// The device's architecture for NVRTC: `sm_90` on an H200 (`nvrtc::arch_for`).
pub fn arch(ctx: &Arc<CudaContext>) -> Result<String> {
    let (major, minor) = ctx
        .compute_capability()
        .context("reading compute capability")?;
    Ok(nvrtc::arch_for(major, minor))
}

/// The NVRTC program of a user kernel: its file's text, named by its path (the compiler's
/// messages then give the file's own line numbers), with its folder on the include path.
fn user_program(kernel: &UserKernel, arch: &str) -> Program {
    let folder = kernel
        .spec
        .path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Program {
        name: kernel.file(),
        source: kernel.source.to_string(),
        options: vec![
            format!("--gpu-architecture={arch}"),
            format!("--include-path={}", folder.display()),
        ],
    }
}

/// Compiles a user kernel for `arch` (cached: compiling ahead makes the later load cheap).
/// The error is the compiler's log, with the file's line numbers.
pub fn compile_user(kernel: &UserKernel, arch: &str) -> Result<Ptx, UserCompileError> {
    nvrtc::compile(&user_program(kernel, arch)).map_err(|why| UserCompileError {
        file: kernel.file().to_string(),
        why,
    })
}

/// A user kernel NVRTC did not compile: the file and the compiler's log.
#[derive(Debug, thiserror::Error)]
#[error("NVRTC could not compile {file}:\n{why}")]
pub struct UserCompileError {
    /// The kernel's file.
    file: String,
    /// The log, or why NVRTC could not run.
    why: nvrtc::CompileError,
}

/// `fp_band` of `kernels/framepipe.cuh`: a band buffer and its place in the frame.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Band {
    src: u64,
    dst: u64,
    width: i32,
    rows: i32,
    row0: i32,
    height: i32,
}

// SAFETY: `#[repr(C)]` with the field types and order of `struct fp_band` (two 64-bit device
// addresses, four 32-bit ints): the layout the kernels read.
unsafe impl DeviceRepr for Band {}

impl Band {
    fn new(s: &CudaStream, src: &CudaSlice<u8>, dst: &mut CudaSlice<u8>, v: View) -> Self {
        // Event tracking is off (`Device::open`), so the guards record nothing.
        let (src, _) = src.device_ptr(s);
        let (dst, _) = dst.device_ptr_mut(s);
        Band {
            src,
            dst,
            width: v.width as i32,
            rows: v.rows as i32,
            row0: v.row0 as i32,
            height: v.height as i32,
        }
    }
}

/// `fp_tile` of `kernels/compose.cu`: one band's part of its input's tile of the mosaic.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct Tile {
    /// The mosaic's device address (packed BGR).
    pub(super) canvas: u64,
    /// The mosaic's width, pixels.
    pub(super) canvas_width: i32,
    /// The tile's left column, top row and width in the mosaic.
    pub(super) tile_x: i32,
    pub(super) tile_y: i32,
    pub(super) tile_w: i32,
    /// The picture's place and size in its tile.
    pub(super) pic_x: i32,
    pub(super) pic_y: i32,
    pub(super) pic_w: i32,
    pub(super) pic_h: i32,
    /// The frame's size.
    pub(super) src_w: i32,
    pub(super) src_h: i32,
    /// The tile rows this band writes: `first..first + rows`.
    pub(super) first: i32,
    pub(super) rows: i32,
    /// Frame row of the band buffer's first row.
    pub(super) band_row0: i32,
}

// SAFETY: `#[repr(C)]` with the field types and order of `struct fp_tile` (a 64-bit device
// address, thirteen 32-bit ints): the layout the kernel reads.
unsafe impl DeviceRepr for Tile {}

/// `fp_text` of `kernels/text.cu`: one frame's text at its place (`filter::text::Placed`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct TextArgs {
    x0: i32,
    y0: i32,
    scale: i32,
    cols: i32,
    color: [u8; 3],
    boxed: u8,
    chars: [u8; crate::filter::text::MAX_CHARS],
}

// SAFETY: `#[repr(C)]` with the field types and order of `struct fp_text` (four 32-bit ints,
// four bytes, `FP_TEXT_MAX` = `MAX_CHARS` bytes): the layout the kernel reads.
unsafe impl DeviceRepr for TextArgs {}

impl TextArgs {
    fn of(p: &crate::filter::text::Placed) -> Self {
        let mut chars = [0u8; crate::filter::text::MAX_CHARS];
        chars[..p.chars.len()].copy_from_slice(&p.chars);
        Self {
            x0: p.x0,
            y0: p.y0,
            scale: p.scale,
            cols: p.cols,
            color: p.color,
            boxed: u8::from(p.boxed),
            chars,
        }
    }
}

/// A bilinear scale's taps on the device (`filter::geometry::tap_table`), each way: the
/// table and its weights per coordinate.
pub struct Taps {
    xs: CudaSlice<i32>,
    nx: i32,
    ys: CudaSlice<i32>,
    ny: i32,
}

impl Taps {
    /// The taps of a bilinear scale from `from` to `to`, uploaded on `s`.
    pub fn new(s: &Arc<CudaStream>, from: FrameSize, to: FrameSize) -> Result<Self> {
        let (xs, nx) = tap_table(from.width, to.width);
        let (ys, ny) = tap_table(from.height, to.height);
        Ok(Self {
            xs: s.clone_htod(&xs)?,
            nx: nx as i32,
            ys: s.clone_htod(&ys)?,
            ny: ny as i32,
        })
    }
}

/// `fp_geometry_move`'s last arguments: how an output pixel finds its input pixel, the
/// offsets, and the colour outside the input (a pad's).
struct Move {
    how: i32,
    a: i32,
    b: i32,
    color: u32,
}

impl Move {
    /// The arguments for `g` over frames of `from` (the `FP_MOVE_*` numbers of the kernel).
    fn of(g: &Geometry, from: FrameSize) -> Self {
        let at = |how, a: usize, b: usize| Move {
            how,
            a: a as i32,
            b: b as i32,
            color: 0,
        };
        match *g {
            Geometry::Crop { w, h, at: corner } => {
                let (x, y) = corner.unwrap_or_else(|| centred(from, w, h));
                at(0, x, y)
            }
            Geometry::Pad { x, y, color, .. } => Move {
                color: u32::from_le_bytes([color[0], color[1], color[2], 0]),
                ..at(1, x, y)
            },
            Geometry::HFlip => at(2, 0, 0),
            Geometry::VFlip => at(3, 0, 0),
            Geometry::Transpose(t) => at(
                match t {
                    Turn::CclockFlip => 4,
                    Turn::Clock => 5,
                    Turn::Cclock => 6,
                    Turn::ClockFlip => 7,
                },
                0,
                0,
            ),
            Geometry::Scale { .. } => at(0, 0, 0),
        }
    }
}

/// Launches a kernel whose arguments have been pushed on `b`.
fn go(b: &mut LaunchArgs<'_>, cfg: LaunchConfig) -> Result<()> {
    // SAFETY: every caller (`ChainKernels::launch`, `convert`, `compose`, `lay_out`) pushes exactly the
    // arguments of the kernel's signature: in kernels/*.cu, or in a user's file as `filter::user` read it
    // (an `fp_band`, then each parameter with its declared type); every buffer holds the
    // band's elements. A user kernel that writes outside its band makes the device report
    // a fault, which the backend returns as an error.
    unsafe { b.launch(cfg) }?;
    Ok(())
}

/// What a filter of the chain needs besides the built-in kernels.
enum Extra {
    None,
    /// A Gaussian's weights on the device.
    Weights(CudaSlice<u32>),
    /// A user kernel's function.
    User(CudaFunction),
    /// The text filters' glyph atlas on the device (`filter::text::atlas`).
    Atlas(CudaSlice<u8>),
}

/// A filter chain ready to run on one device: its kernels, its Gaussian weights and its
/// users' kernels.
pub struct ChainKernels {
    funcs: Vec<CudaFunction>,
    chain: Chain,
    /// Per filter of the chain.
    extras: Vec<Extra>,
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
        let arch = arch(ctx)?;
        let ptx = compiled(&arch)?;
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
        let extras = chain
            .filters()
            .iter()
            .map(|f| match f {
                Filter::Gauss { k, sigma } => Ok(Extra::Weights(
                    stream.clone_htod(&gauss_weights(*k, *sigma))?,
                )),
                Filter::Kernel(user) => {
                    let ptx = compile_user(user, &arch)?;
                    let module = ctx
                        .load_module(ptx)
                        .with_context(|| format!("loading {}", user.file()))?;
                    let func = module.load_function(&user.function).with_context(|| {
                        format!("kernel '{}' missing from {}", user.function, user.file())
                    })?;
                    Ok(Extra::User(func))
                }
                Filter::Text(_) => Ok(Extra::Atlas(
                    stream.clone_htod(&crate::filter::text::atlas()[..])?,
                )),
                _ => Ok(Extra::None),
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            funcs,
            chain: chain.clone(),
            extras,
        })
    }

    /// Copies `n` bytes from `src` to `dst` with the copy kernel, given raw device
    /// addresses (page-locked host memory mapped into the device's address space included).
    pub fn copy_raw(&self, s: &CudaStream, src: u64, dst: u64, n: u64) -> Result<()> {
        let mut b = s.launch_builder(self.func(Kernel::CopyBytes));
        b.arg(&src).arg(&dst).arg(&n);
        let blocks = n.div_ceil(16).div_ceil(u64::from(BLOCK)).max(1) as u32;
        let cfg = LaunchConfig {
            grid_dim: (blocks, 1, 1),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        go(&mut b, cfg)
    }

    /// Converts `rows` rows of a `width`-wide band from `format` at device address `src`
    /// into packed BGR at `dst` (`kernels/convert.cu`).
    pub fn convert_in(
        &self,
        s: &CudaStream,
        src: u64,
        dst: u64,
        width: usize,
        rows: usize,
        format: PixelFormat,
    ) -> Result<()> {
        self.convert(Kernel::ToBgr, s, [src, dst], width, rows, format)
    }

    /// Converts `rows` packed BGR rows at `src` into `format` (I420, NV12 or gray) at `dst`.
    pub fn convert_out(
        &self,
        s: &CudaStream,
        src: u64,
        dst: u64,
        width: usize,
        rows: usize,
        format: PixelFormat,
    ) -> Result<()> {
        self.convert(Kernel::FromBgr, s, [src, dst], width, rows, format)
    }

    /// Moves `rows` rows of a 4:2:0 band at `src`, in `from` (I420 or NV12), into the other
    /// layout at `dst`, samples untouched (`Formats::repacked`).
    pub fn repack_420(
        &self,
        s: &CudaStream,
        src: u64,
        dst: u64,
        width: usize,
        rows: usize,
        from: PixelFormat,
    ) -> Result<()> {
        self.convert(Kernel::Repack420, s, [src, dst], width, rows, from)
    }

    fn convert(
        &self,
        kernel: Kernel,
        s: &CudaStream,
        [src, dst]: [u64; 2],
        width: usize,
        rows: usize,
        format: PixelFormat,
    ) -> Result<()> {
        let (w, n, code) = (width as i32, rows as i32, format.code());
        let mut b = s.launch_builder(self.func(kernel));
        b.arg(&src).arg(&dst).arg(&w).arg(&n).arg(&code);
        // fp_from_bgr takes a 2x2 block a thread for 4:2:0, a pixel for the rest;
        // fp_repack420 a 2x2 block.
        let per = match kernel {
            Kernel::FromBgr | Kernel::Repack420 => format.row_align(),
            _ => 1,
        };
        let v = View {
            width: width.div_ceil(per),
            rows: rows.div_ceil(per),
            row0: 0,
            height: rows,
        };
        go(&mut b, grid_2d(v)).with_context(|| format!("launching the {format} conversion"))
    }

    /// Writes a band's part of its tile of the mosaic (`kernels/compose.cu`) from the packed
    /// BGR band buffer at device address `band`.
    pub fn compose(&self, s: &CudaStream, band: u64, tile: Tile) -> Result<()> {
        if tile.rows <= 0 {
            return Ok(());
        }
        let mut b = s.launch_builder(self.func(Kernel::Compose));
        b.arg(&band).arg(&tile);
        let v = View {
            width: tile.tile_w as usize,
            rows: tile.rows as usize,
            row0: 0,
            height: tile.rows as usize,
        };
        go(&mut b, grid_2d(v)).context("launching the mosaic's kernel")
    }

    /// The chain these kernels run.
    pub fn chain(&self) -> &Chain {
        &self.chain
    }

    fn func(&self, kernel: Kernel) -> &CudaFunction {
        &self.funcs[kernel as usize] // loaded in `Kernel::ALL`'s order, which is declaration order
    }

    /// Queues the chain on `stream` over the band in `bufs[0]` (its place given by `v`),
    /// ping-ponging between the two buffers; returns the index of the one with the result.
    /// `tmp` holds at least as many elements as the band has bytes. `bound` is the chain
    /// bound to this frame (`Chain::bound`), where its texts show the frame's facts.
    pub fn enqueue(
        &self,
        stream: &CudaStream,
        bufs: &mut [CudaSlice<u8>; 2],
        tmp: &mut CudaSlice<u16>,
        v: View,
        bound: Option<&Chain>,
    ) -> Result<usize> {
        let all = 0..self.chain.filters().len();
        self.enqueue_part(stream, bufs, tmp, v, bound, all)
    }

    /// `enqueue` for the chain's filters `part` only (none of them a geometry filter): the
    /// part run in the bands, or a run between geometry filters (`backend::reshape`).
    pub fn enqueue_part(
        &self,
        stream: &CudaStream,
        bufs: &mut [CudaSlice<u8>; 2],
        tmp: &mut CudaSlice<u16>,
        v: View,
        bound: Option<&Chain>,
        part: std::ops::Range<usize>,
    ) -> Result<usize> {
        let mut cur = 0;
        let chain = bound.unwrap_or(&self.chain);
        let filters = chain.filters()[part.clone()].iter();
        for (filter, extra) in filters.zip(&self.extras[part]) {
            let [a, b] = bufs;
            let (src, dst) = if cur == 0 { (&*a, b) } else { (&*b, a) };
            let band = BandBuffers {
                src,
                dst,
                tmp: &mut *tmp,
            };
            self.launch(stream, filter, extra, band, v)
                .with_context(|| format!("launching the {filter} kernels"))?;
            cur = 1 - cur;
        }
        Ok(cur)
    }

    /// Queues geometry filter `g` on `s` from the whole `from` frame at `src` into the `to`
    /// frame at `dst` (packed BGR; `kernels/geometry.cu`); `taps` are a bilinear scale's
    /// (`filter::geometry::tap_table`, on the device).
    pub fn geometry(
        &self,
        s: &CudaStream,
        g: &Geometry,
        ends: [u64; 2],
        (from, to): (FrameSize, FrameSize),
        taps: Option<&Taps>,
    ) -> Result<()> {
        let moved = Move::of(g, from);
        self.geometry_px(s, g, ends, (from, to), (3, moved.color), taps)
    }

    /// Queues one plane's part of a geometry filter on `s` (`pixel::planes::PlaneJob`): from
    /// the input frame at `src` into the output frame at `dst` (the plane's offsets are
    /// added here); `taps` are a bilinear scale's at the plane's sizes.
    pub fn geometry_plane(
        &self,
        s: &CudaStream,
        job: &PlaneJob,
        [src, dst]: [u64; 2],
        taps: Option<&Taps>,
    ) -> Result<()> {
        let ends = [src + job.from.0 as u64, dst + job.to.0 as u64];
        let fill = u32::from_le_bytes([job.fill[0], job.fill[1], 0, 0]);
        let sizes = (job.from.1, job.to.1);
        self.geometry_px(s, &job.g, ends, sizes, (job.px, fill), taps)
    }

    /// `geometry` on pictures of `px` bytes a pixel, a pad filling with `fill`'s bytes.
    fn geometry_px(
        &self,
        s: &CudaStream,
        g: &Geometry,
        [src, dst]: [u64; 2],
        (from, to): (FrameSize, FrameSize),
        (px, fill): (usize, u32),
        taps: Option<&Taps>,
    ) -> Result<()> {
        let sides = [from.width, from.height, to.width, to.height, px].map(|v| v as i32);
        let grid = grid_2d(View {
            width: to.width,
            rows: to.height,
            row0: 0,
            height: to.height,
        });
        let kernel = match (g, taps) {
            (Geometry::Scale { .. }, Some(_)) => Kernel::ScaleBilinear,
            (Geometry::Scale { .. }, None) => Kernel::ScaleArea,
            _ => Kernel::GeometryMove,
        };
        let mut b = s.launch_builder(self.func(kernel));
        b.arg(&src).arg(&dst);
        for side in &sides {
            b.arg(side);
        }
        let moved = Move {
            color: fill,
            ..Move::of(g, from)
        };
        if kernel == Kernel::GeometryMove {
            b.arg(&moved.how)
                .arg(&moved.a)
                .arg(&moved.b)
                .arg(&moved.color);
        }
        if let (Kernel::ScaleBilinear, Some(t)) = (kernel, taps) {
            b.arg(&t.xs).arg(&t.nx).arg(&t.ys).arg(&t.ny);
        }
        go(&mut b, grid).with_context(|| format!("launching the {g} kernel"))
    }

    /// Queues on `s` the chain's text filter `index` (of `bound` where given: the chain
    /// bound to this frame) drawn in place on the planes of the `size` frame of `format`
    /// (I420, NV12 or gray) at `frame` (`pixel::planes`' arithmetic).
    pub fn text_planes(
        &self,
        s: &CudaStream,
        (index, bound): (usize, Option<&Chain>),
        frame: u64,
        size: FrameSize,
        format: PixelFormat,
    ) -> Result<()> {
        let chain = bound.unwrap_or(&self.chain);
        let (Some(Filter::Text(t)), Some(Extra::Atlas(atlas))) =
            (chain.filters().get(index), self.extras.get(index))
        else {
            anyhow::bail!("filter {index} is not a text with its glyphs uploaded");
        };
        let placed = t.place(size);
        let (left, top, w, h) = placed.covers();
        let (x0, y0) = (left.max(0), top.max(0));
        let (x1, y1) = (
            (left + w).min(size.width as i32),
            (top + h).min(size.height as i32),
        );
        if x1 <= x0 || y1 <= y0 {
            return Ok(());
        }
        let [b, g, r] = placed.color;
        let (y, (u, v)) = (yuv::luma(b, g, r), yuv::chroma(b, g, r));
        let chroma: i32 = match format {
            PixelFormat::I420 => 1,
            PixelFormat::Nv12 => 2,
            _ => 0,
        };
        let ints = [
            size.width as i32,
            size.height as i32,
            chroma,
            x0,
            y0,
            x1 - x0,
            y1 - y0,
        ];
        let (args, yuv) = (TextArgs::of(&placed), u32::from_le_bytes([y, u, v, 0]));
        let grid = grid_2d(View {
            width: (x1 - x0) as usize,
            rows: (y1 - y0) as usize,
            row0: 0,
            height: (y1 - y0) as usize,
        });
        let mut launch = s.launch_builder(self.func(Kernel::TextPlanes));
        launch.arg(&frame);
        for i in &ints {
            launch.arg(i);
        }
        launch.arg(atlas).arg(&args).arg(&yuv);
        go(&mut launch, grid).with_context(|| format!("launching the {t} kernel on planes"))
    }

    /// Queues on `s` the packed BGR `size` frame at `src` laid out for a model into `dst`
    /// by `lookup`, whose tables are on the device at `tables` (`pixel::lookup`).
    pub fn lay_out(
        &self,
        s: &CudaStream,
        [src, dst]: [u64; 2],
        size: FrameSize,
        lookup: &Lookup,
        tables: u64,
    ) -> Result<()> {
        let grid = grid_2d(View {
            width: size.width,
            rows: size.height,
            row0: 0,
            height: size.height,
        });
        let sides = [size.width as i32, size.height as i32];
        let (planar, element) = (i32::from(lookup.planar), lookup.element as i32);
        let bgr = i32::from(lookup.bgr);
        let mut b = s.launch_builder(self.func(Kernel::LayOut));
        b.arg(&src).arg(&dst).arg(&sides[0]).arg(&sides[1]);
        b.arg(&planar).arg(&element).arg(&tables).arg(&bgr);
        go(&mut b, grid).context("launching the layout kernel")
    }

    /// Queues on `s` the packed BGR `size` picture at `src` resized and placed on the
    /// canvas at `dst` as `placed` says (`pixel::linear`), with the tap tables at `taps`
    /// (`linear_taps`).
    pub fn fit_linear(
        &self,
        s: &CudaStream,
        [src, dst, taps]: [u64; 3],
        size: FrameSize,
        placed: &crate::pixel::linear::Placed,
    ) -> Result<()> {
        let canvas = placed.canvas;
        let grid = grid_2d(View {
            width: canvas.width,
            rows: canvas.height,
            row0: 0,
            height: canvas.height,
        });
        let ints = [
            size.width,
            canvas.width,
            canvas.height,
            placed.scaled.width,
            placed.scaled.height,
            placed.at.0,
            placed.at.1,
            usize::from(placed.pad),
        ]
        .map(|v| v as i32);
        let mut b = s.launch_builder(self.func(Kernel::FitLinear));
        b.arg(&src).arg(&dst);
        for i in &ints {
            b.arg(i);
        }
        b.arg(&taps);
        go(&mut b, grid).context("launching the model's resize kernel")
    }

    fn launch(
        &self,
        s: &CudaStream,
        filter: &Filter,
        extra: &Extra,
        band: BandBuffers,
        v: View,
    ) -> Result<()> {
        let BandBuffers { src, dst, tmp } = band;
        let grid = grid_2d(v);
        match *filter {
            Filter::Copy
            | Filter::Invert
            | Filter::Gray
            | Filter::Gain { .. }
            | Filter::Rate(_) => self.pointwise(s, filter, Band::new(s, src, dst, v)),
            Filter::Box { k } => {
                let passes = (Kernel::BoxRows, Kernel::BoxColumns);
                let band = BandBuffers { src, dst, tmp };
                self.separable(s, passes, band, v, k, PassArg::Area(k * k))
            }
            Filter::Gauss { k, .. } => {
                let Extra::Weights(wts) = extra else {
                    anyhow::bail!("Gaussian weights missing");
                };
                let passes = (Kernel::GaussRows, Kernel::GaussColumns);
                let band = BandBuffers { src, dst, tmp };
                self.separable(s, passes, band, v, k, PassArg::Weights(wts))
            }
            Filter::Sobel | Filter::Median3 | Filter::Sharpen { .. } => {
                self.neighbourhood(s, filter, Band::new(s, src, dst, v), grid)
            }
            Filter::Geometry(ref g) => {
                anyhow::bail!("{g} runs on the whole frame after the bands (`backend::reshape`), not in a band")
            }
            Filter::Text(ref t) => {
                let Extra::Atlas(atlas) = extra else {
                    anyhow::bail!("the text's glyphs were not uploaded");
                };
                self.text(s, t, atlas, Band::new(s, src, dst, v), grid)
            }
            Filter::Kernel(ref user) => {
                let Extra::User(func) = extra else {
                    anyhow::bail!("kernel {} was not loaded", user.function);
                };
                Self::user(s, func, user, Band::new(s, src, dst, v), grid)
            }
        }
    }

    /// The filters that read one pixel at a time (`copy`, `invert`, `gray`, `gain`; `fps:N`
    /// changes no pixel: the plan leaves it to the outputs, a copy here), over the band's
    /// bytes in a line of threads: 16 bytes each (one uint4), 48 for gray (16 whole pixels).
    fn pointwise(&self, s: &CudaStream, filter: &Filter, band: Band) -> Result<()> {
        let (kernel, per_thread) = match filter {
            Filter::Copy | Filter::Rate(_) => (Kernel::Copy, 16),
            Filter::Invert => (Kernel::Invert, 16),
            Filter::Gray => (Kernel::Gray, 48),
            _ => (Kernel::Gain, 16),
        };
        let n = band.width as u64 * band.rows as u64 * 3;
        let linear = LaunchConfig {
            grid_dim: (
                n.div_ceil(per_thread).div_ceil(u64::from(BLOCK)).max(1) as u32,
                1,
                1,
            ),
            block_dim: (BLOCK, 1, 1),
            shared_mem_bytes: 0,
        };
        let mut b = s.launch_builder(self.func(kernel));
        b.arg(&band);
        if let Filter::Gain { alpha, beta } = filter {
            b.arg(alpha).arg(beta);
        }
        go(&mut b, linear)
    }

    /// The 3×3 filters (`sobel`, `median3`, `sharpen` with its two weights) over `band`.
    fn neighbourhood(
        &self,
        s: &CudaStream,
        filter: &Filter,
        band: Band,
        grid: LaunchConfig,
    ) -> Result<()> {
        let kernel = match filter {
            Filter::Sobel => Kernel::Sobel,
            Filter::Median3 => Kernel::Median3,
            _ => Kernel::Sharpen,
        };
        let mut b = s.launch_builder(self.func(kernel));
        b.arg(&band);
        let (keep, take) = match filter {
            Filter::Sharpen { amount } => (1.0 + amount, -amount),
            _ => (0.0, 0.0),
        };
        if kernel == Kernel::Sharpen {
            b.arg(&keep).arg(&take);
        }
        go(&mut b, grid)
    }

    /// A text over `band`, placed on its frame (`filter::text`), its glyphs from `atlas`.
    fn text(
        &self,
        s: &CudaStream,
        t: &crate::filter::text::Text,
        atlas: &CudaSlice<u8>,
        band: Band,
        grid: LaunchConfig,
    ) -> Result<()> {
        let size = crate::frame::FrameSize::new(band.width as usize, band.height as usize);
        let args = TextArgs::of(&t.place(size));
        let mut b = s.launch_builder(self.func(Kernel::Text));
        b.arg(&band).arg(atlas).arg(&args);
        go(&mut b, grid)
    }

    /// A user's kernel over `band`, its parameters in the order its file declares them.
    fn user(
        s: &CudaStream,
        func: &CudaFunction,
        user: &UserKernel,
        band: Band,
        grid: LaunchConfig,
    ) -> Result<()> {
        let mut b = s.launch_builder(func);
        b.arg(&band);
        for (_, value) in &user.args {
            match value {
                Value::Float(x) => b.arg(x),
                Value::Int(x) => b.arg(x),
                Value::Uint(x) => b.arg(x),
            };
        }
        go(&mut b, grid)
    }

    /// A separable filter's two passes over band `v`: `passes.0` along rows from `src` into
    /// `tmp`, then `passes.1` along columns from `tmp` into `dst`, with radius `k / 2`. The
    /// box and the Gaussian differ only in their last argument (`last`).
    fn separable(
        &self,
        s: &CudaStream,
        passes: (Kernel, Kernel),
        band: BandBuffers,
        v: View,
        k: u32,
        last: PassArg,
    ) -> Result<()> {
        let BandBuffers { src, dst, tmp } = band;
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
                sources.contains(&format!("void {}(", kernel.name()))
                    || sources.contains(&format!("FP_KERNEL {}(", kernel.name())),
                "{kernel:?}"
            );
        }
        assert!(Kernel::ALL
            .iter()
            .enumerate()
            .all(|(i, k)| *k as usize == i));
    }

    #[test]
    fn format_numbers_match_the_conversion_kernels() {
        let source = include_str!("../../kernels/convert.cu");
        for format in PixelFormat::ALL {
            let name = format.to_string().to_uppercase();
            let line = format!("#define FP_FMT_{name} {}", format.code());
            assert!(source.contains(&line), "{line}");
        }
    }
}
