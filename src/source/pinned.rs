//! libavcodec's pictures decoded straight into buffers of a pool of our own: a `get_buffer2`
//! gives the decoder one buffer a picture, all its planes in it, and `decode.rs` lends the
//! slot the picture as the decoder left it (`desc::Memory::HostLent`, its planes at the
//! decoder's pitches) instead of copying it. With the CUDA backend (`Pictures::Locked`) the
//! pool page-locks each buffer once, when it makes it, and the backend copies its bands up
//! from there: no copy on the CPU between the decoder and the GPU. With the CPU backend
//! (`Pictures::Lent`) the buffers are plain memory: the backend reads the picture where it
//! lies (`FrameLease::host_bytes`), and a frame nothing reads is never copied at all.
//!
//! Invariants:
//! - a locked pool's buffer is page-locked for as long as it lives and unregistered just
//!   before it is freed; one that can't be locked is never made: the pool stops serving and
//!   FFmpeg's own buffers are used from then on (the pictures are then copied into the
//!   slot, as before); where no CUDA device opens, a locked pool makes plain buffers (the
//!   run's backend is then the CPU's, which reads them as they are);
//! - the decoder writes a buffer only once every reference to it is gone, its own
//!   (reference pictures, frame threads) and a lent slot's (`Lent`): FFmpeg's reference
//!   counts return a buffer to the pool, so a picture a slot holds is never overwritten, and
//!   the pool grows while the decoder and the ring hold more pictures than it has;
//! - a buffer is laid out as FFmpeg's default one (`avcodec_align_dimensions2`: the rows
//!   and the padding the decoder writes past the picture's own size, planes aligned for
//!   its vector code), planes one after another in it;
//! - the pool serves the first format and size it is asked for, 8-bit YUV or gray in planes,
//!   and nothing else: a hardware frame, another format or a new size takes FFmpeg's
//!   default buffers;
//! - `get_buffer2` runs on the decoder's frame threads at once (FFmpeg 5.1's
//!   `thread_safe_callbacks`): the pool is FFmpeg's thread-safe `AVBufferPool`, the rest is
//!   behind a mutex, and nothing unwinds into C.

use std::collections::HashSet;
use std::ffi::{c_int, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use cudarc::driver::CudaContext;
use ff::ffi;
use ffmpeg_next as ff;

use super::lease::FrameLease;
use crate::backend::device::PinnedRange;
use crate::desc::{Memory, Plane, Planes};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// The alignment of each plane in a buffer (FFmpeg's widest vector code, AVX-512).
const PLANE_ALIGN: usize = 64;
/// Bytes past each plane that the decoder's vector code may touch (FFmpeg's own pools add
/// 16 and the stride alignment).
const PLANE_SLACK: usize = 16 + PLANE_ALIGN - 1;
/// Host pages, the unit `cuMemHostRegister` locks.
const PAGE: usize = 4096;

/// The decoder's pictures in page-locked buffers (module doc). Declared after the decoder
/// in `Decoded`, so that the decoder (whose threads call `get_buffer2`) is gone first.
pub struct PinnedPictures {
    shared: Box<Shared>,
    /// A picture was lent (said once, with -v).
    lent_one: bool,
    /// A picture was copied, not lent (said once, with -v).
    copied_one: bool,
}

/// What `get_buffer2` reaches through the codec context's `opaque`.
struct Shared {
    registry: Arc<Registry>,
    pool: Mutex<Pool>,
}

/// The pool, made for the first picture asked for.
#[derive(Default)]
struct Pool {
    layout: Option<Layout>,
    pool: Option<PoolPtr>,
    /// A buffer could not be made (or locked): FFmpeg's own buffers from then on.
    failed: bool,
}

/// FFmpeg's pool (thread-safe in itself; freed in `PinnedPictures::drop`).
struct PoolPtr(*mut ffi::AVBufferPool);

// SAFETY: an AVBufferPool is made for use from several threads (its own mutex); the
// pointer is only freed once, after the decoder is gone.
unsafe impl Send for PoolPtr {}

/// What every buffer of the pool shares: whether buffers are page-locked and the CUDA
/// context that locks them, and which buffers are ours (a picture is lent only from one of
/// them).
#[derive(Default)]
struct Registry {
    lock: bool,
    ctx: OnceLock<Option<Arc<CudaContext>>>,
    live: Mutex<HashSet<usize>>,
    /// That CUDA is missing was said (once, with -v).
    said_no_cuda: AtomicBool,
}

/// Where a picture's planes lie in its buffer.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Layout {
    format: ffi::AVPixelFormat,
    width: c_int,
    height: c_int,
    linesize: [c_int; 4],
    offset: [usize; 4],
    size: usize,
}

/// One buffer of the pool: page-aligned, page-locked, freed when FFmpeg frees it.
struct Block {
    /// The start of `map`, where the pictures go.
    ptr: *mut u8,
    pin: Option<PinnedRange>,
    registry: Arc<Registry>,
    /// The block's memory: an anonymous mapping (page-aligned and zeroed), unmapped after
    /// the registration is dropped (`Drop`).
    _map: memmap2::MmapMut,
}

impl PinnedPictures {
    /// Gives the decoder context `ctx` (not yet opened) buffers from a pool of our own,
    /// page-locked where `lock` says.
    ///
    /// # Safety
    /// `ctx` is a live, unopened decoder context, and the returned value outlives it (it is
    /// dropped after the decoder is freed).
    pub unsafe fn install(ctx: *mut ffi::AVCodecContext, lock: bool) -> Self {
        let shared = Box::new(Shared {
            registry: Arc::new(Registry {
                lock,
                ..Registry::default()
            }),
            pool: Mutex::new(Pool::default()),
        });
        // SAFETY: the caller's contract: the context is live and not opened yet; `opaque`
        // points at the boxed `Shared`, which stays where it is until this value is
        // dropped, after the decoder. FFmpeg 5.1 calls a custom get_buffer2 from its frame
        // threads only where told it is thread-safe (it is: module doc).
        unsafe {
            (*ctx).opaque = std::ptr::addr_of!(*shared) as *mut c_void;
            (*ctx).get_buffer2 = Some(get_buffer);
            (*ctx).thread_safe_callbacks = 1;
        }
        Self {
            shared,
            lent_one: false,
            copied_one: false,
        }
    }

    /// Lends `picture` (a decoded `format` picture of `size`) as it lies in its buffer, where
    /// that buffer is one of this pool's; None where it is not (FFmpeg's own: copy it).
    pub fn lend(
        &mut self,
        picture: &ff::frame::Video,
        format: PixelFormat,
        size: FrameSize,
    ) -> anyhow::Result<Option<(Memory, Planes)>> {
        // SAFETY: a decoded software picture: buf[0] is null or a live buffer reference,
        // data and linesize are the decoder's own.
        let (base, data, linesize, lease) = unsafe {
            let p = picture.as_ptr();
            let buf = (*p).buf[0];
            if buf.is_null() || !(*p).buf[1].is_null() || !self.ours((*buf).data) {
                self.say_copied(picture);
                return Ok(None);
            }
            let lease = FrameLease::of_host(p, "a decoded picture lent in host memory");
            ((*buf).data, (*p).data, (*p).linesize, lease)
        };
        let Some(lease) = lease else {
            return Ok(None);
        };
        let layout = self.shared.pool.lock().ok().and_then(|p| p.layout);
        let (Some(planes), Some(layout)) = (planes_of(format, data, linesize), layout) else {
            return Ok(None);
        };
        let start = data[0] as usize - base as usize;
        let extent = start + planes.extent(format, size);
        crate::ensure_kept!(
            extent <= layout.size,
            "a decoded picture's planes ({extent} bytes) reach past its {}-byte buffer",
            layout.size
        );
        let memory = Memory::HostLent {
            ptr: data[0] as u64,
            lease: Arc::new(lease),
        };
        if !std::mem::replace(&mut self.lent_one, true) {
            let how = if self.shared.registry.lock {
                "page-locked "
            } else {
                ""
            };
            crate::debug!(
                "decoded pictures lent from {how}buffers of {} bytes",
                layout.size
            );
        }
        Ok(Some((memory, planes)))
    }

    /// Says (once, with -v) that a picture is in FFmpeg's own buffers, and why.
    fn say_copied(&mut self, picture: &ff::frame::Video) {
        if std::mem::replace(&mut self.copied_one, true) {
            return;
        }
        let why = match self.shared.pool.lock().map(|p| (p.failed, p.layout)) {
            Ok((true, _)) => return, // the buffer that could not be made said why
            Ok((false, Some(l))) => format!(
                "the pool serves {:?} pictures of {}x{} only",
                l.format, l.width, l.height
            ),
            _ => format!("the pool doesn't serve {:?} pictures", picture.format()),
        };
        crate::debug!("a decoded picture is copied into the slot: {why}");
    }

    /// Whether `data` is the start of one of the pool's buffers.
    fn ours(&self, data: *const u8) -> bool {
        let live = &self.shared.registry.live;
        live.lock().is_ok_and(|l| l.contains(&(data as usize)))
    }
}

impl Drop for PinnedPictures {
    fn drop(&mut self) {
        if let Ok(mut pool) = self.shared.pool.lock() {
            if let Some(PoolPtr(mut p)) = pool.pool.take() {
                // SAFETY: the pool was made by av_buffer_pool_init2 and is uninitialised
                // once; FFmpeg frees it when its last buffer comes back.
                unsafe { ffi::av_buffer_pool_uninit(&mut p) };
            }
        }
    }
}

/// The planes of a picture whose first plane starts at `data[0]`, each at its offset from
/// there; None where one lies before it or the format's planes are not all there.
fn planes_of(format: PixelFormat, data: [*mut u8; 8], linesize: [c_int; 8]) -> Option<Planes> {
    let base = data[0] as usize;
    let plane = |i: usize, rows_per: usize| {
        let at = (data[i] as usize).checked_sub(base)?;
        let pitch = usize::try_from(linesize[i]).ok().filter(|&p| p > 0)?;
        Some(Plane {
            offset: at,
            pitch,
            rows_per,
        })
    };
    Some(match format {
        PixelFormat::I420 => Planes::with([plane(0, 1)?, plane(1, 2)?, plane(2, 2)?]),
        PixelFormat::Yuv422p | PixelFormat::Yuv444p => {
            Planes::with([plane(0, 1)?, plane(1, 1)?, plane(2, 1)?])
        }
        PixelFormat::Nv12 => Planes::with([plane(0, 1)?, plane(1, 2)?]),
        PixelFormat::Gray => Planes::with([plane(0, 1)?]),
        _ => return None,
    })
}

/// The picture formats the pool serves (8-bit, in planes), by a frame's format number.
fn served(format: c_int) -> Option<ffi::AVPixelFormat> {
    use ffi::AVPixelFormat::*;
    [
        AV_PIX_FMT_YUV420P,
        AV_PIX_FMT_YUVJ420P,
        AV_PIX_FMT_YUV422P,
        AV_PIX_FMT_YUVJ422P,
        AV_PIX_FMT_YUV444P,
        AV_PIX_FMT_YUVJ444P,
        AV_PIX_FMT_NV12,
        AV_PIX_FMT_GRAY8,
    ]
    .into_iter()
    .find(|&f| f as c_int == format)
}

/// The decoder's `get_buffer2`: a buffer of the pool where it serves the picture, FFmpeg's
/// default buffer otherwise.
unsafe extern "C" fn get_buffer(
    avctx: *mut ffi::AVCodecContext,
    frame: *mut ffi::AVFrame,
    flags: c_int,
) -> c_int {
    let served = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: FFmpeg calls this with the live context whose `opaque` `install` set (the
        // boxed `Shared`, alive until after the decoder) and a frame to fill.
        unsafe { fill(avctx, frame) }
    }));
    if served.unwrap_or(false) {
        return 0;
    }
    // SAFETY: the same context and frame, untouched by `fill` where it did not serve.
    unsafe { ffi::avcodec_default_get_buffer2(avctx, frame, flags) }
}

/// Fills `frame`'s planes from the pool; false (the frame untouched) where it does not serve.
///
/// # Safety
/// `avctx` is the live context `install` set up, `frame` the frame FFmpeg asks a buffer for.
unsafe fn fill(avctx: *mut ffi::AVCodecContext, frame: *mut ffi::AVFrame) -> bool {
    // SAFETY: the caller's contract.
    let (shared, format, width, height, hardware) = unsafe {
        (
            &*((*avctx).opaque as *const Shared),
            (*frame).format,
            (*frame).width,
            (*frame).height,
            !(*avctx).hw_frames_ctx.is_null(),
        )
    };
    let Some(format) = served(format).filter(|_| !hardware && width > 0 && height > 0) else {
        return false;
    };
    let Some((layout, pool)) = shared.pool_for(avctx, format, width, height) else {
        return false;
    };
    // SAFETY: the pool is live (freed only after the decoder); av_buffer_pool_get is
    // thread-safe and returns null when its allocator fails.
    let buf = unsafe { ffi::av_buffer_pool_get(pool) };
    if buf.is_null() {
        if let Ok(mut p) = shared.pool.lock() {
            p.failed = true;
        }
        return false;
    }
    // SAFETY: `buf` holds `layout.size` bytes, page-aligned; every plane lies inside it at
    // its offset (`layout_of`); the frame takes the one reference.
    unsafe {
        let base = (*buf).data;
        for i in 0..4 {
            (*frame).data[i] = if layout.linesize[i] > 0 {
                base.add(layout.offset[i])
            } else {
                std::ptr::null_mut()
            };
            (*frame).linesize[i] = layout.linesize[i];
        }
        (*frame).buf[0] = buf;
        (*frame).extended_data = (*frame).data.as_mut_ptr();
    }
    true
}

impl Shared {
    /// The pool and its layout for `format` pictures of `width` × `height`: made for the
    /// first picture, None for any other or once a buffer failed.
    fn pool_for(
        &self,
        avctx: *mut ffi::AVCodecContext,
        format: ffi::AVPixelFormat,
        width: c_int,
        height: c_int,
    ) -> Option<(Layout, *mut ffi::AVBufferPool)> {
        let mut p = self.pool.lock().ok()?;
        if p.failed {
            return None;
        }
        if p.layout.is_none() {
            // SAFETY: the live context of the call (`fill`'s contract).
            let layout = unsafe { layout_of(avctx, format, width, height) }?;
            let opaque = Arc::as_ptr(&self.registry) as *mut c_void;
            // SAFETY: the allocator reads `opaque` as the registry, which `Shared` keeps
            // alive while the pool can allocate (only from get_buffer2, while the decoder
            // lives); no free callback for the pool itself.
            let pool = unsafe { ffi::av_buffer_pool_init2(layout.size, opaque, Some(alloc), None) };
            if pool.is_null() {
                p.failed = true;
                return None;
            }
            (p.layout, p.pool) = (Some(layout), Some(PoolPtr(pool)));
        }
        let layout = p.layout?;
        let same = (layout.format, layout.width, layout.height) == (format, width, height);
        Some((layout, p.pool.as_ref()?.0)).filter(|_| same)
    }
}

/// FFmpeg's own layout of a `format` picture of `width` × `height` for this decoder (its
/// aligned size, its rows' alignment), the planes one after another in one buffer.
///
/// # Safety
/// `avctx` is a live decoder context.
unsafe fn layout_of(
    avctx: *mut ffi::AVCodecContext,
    format: ffi::AVPixelFormat,
    width: c_int,
    height: c_int,
) -> Option<Layout> {
    let (mut w, mut h) = (width, height);
    let mut align = [0 as c_int; 8];
    // SAFETY: the caller's live context; three out-parameters of the sizes FFmpeg writes.
    unsafe { ffi::avcodec_align_dimensions2(avctx, &mut w, &mut h, align.as_mut_ptr()) };
    let mut linesize = [0 as c_int; 4];
    let aligned = |l: &[c_int; 4]| (0..4).all(|i| align[i] <= 0 || l[i] % align[i] == 0);
    for _ in 0..16 {
        // SAFETY: fills four ints for a known format.
        if unsafe { ffi::av_image_fill_linesizes(linesize.as_mut_ptr(), format, w) } < 0 {
            return None;
        }
        if aligned(&linesize) {
            break;
        }
        // As FFmpeg does: widen by the lowest set bit of the width until every row aligns.
        w += w & !(w - 1);
    }
    if !aligned(&linesize) {
        return None;
    }
    let wide: [isize; 4] = linesize.map(|l| l as isize);
    let mut sizes = [0usize; 4];
    // SAFETY: fills four sizes from four linesizes.
    if unsafe { ffi::av_image_fill_plane_sizes(sizes.as_mut_ptr(), format, h, wide.as_ptr()) } < 0 {
        return None;
    }
    let mut offset = [0usize; 4];
    let mut end = 0usize;
    for i in 0..4 {
        if sizes[i] > 0 {
            offset[i] = end.next_multiple_of(PLANE_ALIGN);
            end = offset[i].checked_add(sizes[i])?.checked_add(PLANE_SLACK)?;
        }
    }
    Some(Layout {
        format,
        width,
        height,
        linesize,
        offset,
        size: end.next_multiple_of(PAGE),
    })
}

/// The pool's allocator: a page-aligned, zeroed, page-locked buffer of `size` bytes; null
/// where it can't be made or locked (the pool then stops serving).
unsafe extern "C" fn alloc(opaque: *mut c_void, size: usize) -> *mut ffi::AVBufferRef {
    let made = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let registry = opaque as *const Registry;
        // SAFETY: `opaque` is `Arc::as_ptr` of the registry `Shared` holds, alive while the
        // pool allocates: this makes one more strong reference to it, for the block.
        let registry = unsafe {
            Arc::increment_strong_count(registry);
            Arc::from_raw(registry)
        };
        Block::new(registry, size)
    }));
    let Ok(Some(block)) = made else {
        return std::ptr::null_mut();
    };
    let ptr = block.ptr;
    let raw = Box::into_raw(Box::new(block));
    // SAFETY: wraps the block's `size` bytes; `free_block` frees it once, when FFmpeg frees
    // the buffer.
    let buf = unsafe { ffi::av_buffer_create(ptr, size, Some(free_block), raw.cast(), 0) };
    if buf.is_null() {
        // SAFETY: not handed to FFmpeg: freed here, once.
        drop(unsafe { Box::from_raw(raw) });
    }
    buf
}

/// Frees a block when FFmpeg frees its buffer.
unsafe extern "C" fn free_block(opaque: *mut c_void, _data: *mut u8) {
    // SAFETY: `opaque` is the block `alloc` boxed for this buffer, freed once, here.
    let block = unsafe { Box::from_raw(opaque as *mut Block) };
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(block)));
}

impl Block {
    /// A buffer of `size` bytes (page-locked where the registry locks them and CUDA is
    /// there), noted as live in `registry`; None (said once) where the memory can't be had
    /// or locked.
    fn new(registry: Arc<Registry>, size: usize) -> Option<Self> {
        let ctx = match registry.lock {
            false => None,
            true => registry
                .ctx
                .get_or_init(|| {
                    use crate::backend::device::{open_device, probe};
                    probe().ok().and_then(|()| open_device(0).ok())
                })
                .clone(),
        };
        if registry.lock && ctx.is_none() && !registry.said_no_cuda.swap(true, Ordering::Relaxed) {
            crate::debug!("decoded pictures are not page-locked: no CUDA device opens here");
        }
        let len = size.next_multiple_of(PAGE);
        let mut map = memmap2::MmapMut::map_anon(len).ok()?;
        let ptr = map.as_mut_ptr();
        // SAFETY: a live page-aligned mapping of ours, not registered, unmapped only after
        // the range is dropped (`Drop`; on an error here, as `map` goes).
        let pin = match ctx.map(|ctx| unsafe { PinnedRange::register(&ctx, ptr, len) }) {
            None => None,
            Some(Ok(pin)) => Some(pin),
            Some(Err(e)) => {
                crate::warn!("decoded pictures can't be page-locked ({e:#}): they are copied");
                return None;
            }
        };
        let block = Self {
            ptr,
            pin,
            registry,
            _map: map,
        };
        // (Where the registry can't take it, the block is freed on the way out.)
        block.registry.live.lock().ok()?.insert(ptr as usize);
        Some(block)
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        if let Ok(mut live) = self.registry.live.lock() {
            live.remove(&(self.ptr as usize));
        }
        // The registration goes first, then the memory (`_map`, dropped after this).
        drop(self.pin.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_are_read_from_where_the_decoder_put_them() {
        let mut buf = vec![0u8; 4096];
        let base = buf.as_mut_ptr();
        // SAFETY: offsets inside the buffer.
        let data = unsafe {
            [
                base,
                base.add(1024),
                base.add(2048),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            ]
        };
        let linesize = [64, 32, 32, 0, 0, 0, 0, 0];
        let planes = planes_of(PixelFormat::I420, data, linesize).unwrap();
        let v: Vec<_> = planes
            .iter()
            .map(|p| (p.offset, p.pitch, p.rows_per))
            .collect();
        assert_eq!(v, [(0, 64, 1), (1024, 32, 2), (2048, 32, 2)]);
        // A plane before the first, or a missing one, is not lent.
        let before = [
            data[1], data[0], data[2], data[3], data[4], data[5], data[6], data[7],
        ];
        assert!(planes_of(PixelFormat::I420, before, linesize).is_none());
        assert!(planes_of(PixelFormat::I420, data, [64, 0, 32, 0, 0, 0, 0, 0]).is_none());
        assert!(planes_of(PixelFormat::Bgr24, data, linesize).is_none());
    }

    #[test]
    fn only_8_bit_planar_pictures_are_served() {
        use ffi::AVPixelFormat::*;
        assert!(served(AV_PIX_FMT_YUV420P as c_int).is_some());
        assert!(served(AV_PIX_FMT_NV12 as c_int).is_some());
        assert!(served(AV_PIX_FMT_YUV420P10LE as c_int).is_none());
        assert!(served(AV_PIX_FMT_BGR24 as c_int).is_none());
        assert!(served(-1).is_none() && served(100_000).is_none());
    }
}
