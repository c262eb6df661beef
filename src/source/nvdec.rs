//! NVDEC, the GPU's video decoder, through libavcodec's CUDA hwaccel (`--decode gpu`): the
//! decoder's context gets a CUDA device made around device 0's primary context (the one
//! framepipe's backend uses; NVDEC's post-processing of each picture into its output
//! surface runs on a stream of ours) and picks the CUDA pixel format when libavcodec offers
//! it. The first picture NVDEC decodes is brought down into a host picture (NV12, as NVDEC
//! gives 8-bit 4:2:0), so that `decode.rs` settles the input's format from it as from any
//! picture. Once that says NV12, as carried and upright, every later picture takes one of
//! two ways:
//! - with the CUDA backend (`keep`), it stays in device memory: the slot is lent it
//!   (`lend`: `desc::Memory::Device`, its planes at the surface's pitches, a lease holding
//!   a reference to the picture: in FFmpeg 5.1 NVDEC's mapped output surface itself, with
//!   the decoder surface it came from), and the backend copies its bands from there into
//!   its band buffers; nothing crosses PCIe on the way in;
//! - with the CPU backend, it is brought down straight into the ring's slot
//!   (`bring_into_slot`: one copy from the device, none on the CPU).
//!
//! Any other picture (a rotated file, 10-bit P010) keeps coming down into a host picture
//! and goes the CPU-decoded way (turned, or converted).
//!
//! Invariants: where NVDEC can't be used (no CUDA driver, a codec the build or the GPU has no
//! NVDEC for, a stream NVDEC refuses: libavcodec then hands software pictures) the CPU
//! decodes, and the run says why once; a picture is handed on only once it is whole: in
//! host memory (`av_hwframe_transfer_data` waits for its copy), or on the device (`lend`
//! waits for the post-processing on our stream); a lent picture's memory is not reused by
//! the decoder until its lease is dropped (the backend drops it when the frame completes),
//! so each lent picture holds one of the decoder's surfaces, of which libavcodec makes the
//! stream's reference frames, its frame threads and about five more; a high bit depth
//! comes down as such (P010) and is converted as `decode.rs` converts any picture it can't
//! carry.

use std::sync::Arc;

use ff::ffi;
use ffmpeg_next as ff;

use crate::desc::{Memory, Plane, Planes};
use crate::frame::FrameSize;

/// A decoder context's NVDEC (module doc).
pub struct Nvdec {
    /// Pictures stay on the device, lent to the slot (`keep`) or brought down straight into
    /// it by `bring_into_slot` (set once the first picture showed they are NV12 as carried,
    /// upright).
    pub direct: bool,
    /// The last picture brought down (the hardware picture is swapped in here).
    host: ff::frame::Video,
    /// Pictures NVDEC decoded.
    on_gpu: u64,
    /// Pictures the CPU decoded after all (libavcodec fell back).
    on_cpu: u64,
    /// Pictures left on the device stay there: the slot is lent the picture (`lend`) and
    /// the backend copies its bands from it, instead of `bring_into_slot`.
    pub keep: bool,
    /// The stream NVDEC's post-processing of each picture into its output surface runs on
    /// (the device context's `stream`), held with the context it belongs to until the
    /// decoder (which frees its surfaces in it) has gone: `decode.rs` declares this after
    /// the decoder.
    stream: Arc<cudarc::driver::CudaStream>,
}

/// A picture lent to a slot (`Memory::Device`): a reference to NVDEC's frame (its mapped
/// output surface and the decoder surface behind it), so that neither is reused until the
/// lease is dropped (when the backend has copied it), and to the stream of the context that
/// memory belongs to.
#[derive(Debug)]
struct Lent {
    _frame: super::lease::FrameLease,
    _stream: Arc<cudarc::driver::CudaStream>,
}

impl crate::desc::Lease for Lent {}

/// FFmpeg's AVCUDADeviceContext (libavutil/hwcontext_cuda.h, unchanged since FFmpeg 4;
/// ffmpeg-sys-next does not bind that header): the device context's `hwctx`.
#[repr(C)]
struct CudaDeviceContext {
    cuda_ctx: *mut std::ffi::c_void,
    stream: *mut std::ffi::c_void,
    internal: *mut std::ffi::c_void,
}

// SAFETY: the frames are owned by the source that owns this, used on one thread at a time
// (`Source: Send`, moved to the capture thread whole).
unsafe impl Send for Nvdec {}

/// libavcodec's `get_format`: the CUDA format where offered, else the first (software) one,
/// which is also what is offered again when NVDEC refuses the stream.
unsafe extern "C" fn cuda_first(
    _ctx: *mut ffi::AVCodecContext,
    formats: *const ffi::AVPixelFormat,
) -> ffi::AVPixelFormat {
    // SAFETY: libavcodec passes a list ended by AV_PIX_FMT_NONE, with at least one format.
    unsafe {
        let mut p = formats;
        while *p != ffi::AVPixelFormat::AV_PIX_FMT_NONE {
            if *p == ffi::AVPixelFormat::AV_PIX_FMT_CUDA {
                return *p;
            }
            p = p.add(1);
        }
        *formats
    }
}

/// Whether libavcodec's decoder for `id` can decode through a CUDA device.
fn has_nvdec(id: ff::codec::Id) -> bool {
    let Some(codec) = ff::decoder::find(id) else {
        return false;
    };
    (0..)
        .map_while(|i| {
            // SAFETY: the codec is one of libavcodec's static descriptors; the index runs
            // until the function returns null.
            let config = unsafe { ffi::avcodec_get_hw_config(codec.as_ptr(), i) };
            // SAFETY: a non-null config points into the codec's static table.
            (!config.is_null()).then(|| unsafe { *config })
        })
        .any(|c| {
            c.device_type == ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA
                && c.methods & ffi::AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX as i32 != 0
        })
}

/// Pixels a second one NVDEC decodes, by codec, past start-up, and one CPU core decodes with
/// libavcodec (either codec): the H200 machine's figures (BENCHMARKS.md "NVDEC": 1080p
/// H.264 718 fps, 4K HEVC 392 fps on NVDEC, steady, `scripts/bench/nvdec-steady.sh`; 1485 and 366
/// fps on 16 cores, `scripts/bench/nvdec.sh`).
const NVDEC_PIXELS: [(ff::codec::Id, f64); 2] =
    [(ff::codec::Id::H264, 1.49e9), (ff::codec::Id::HEVC, 3.25e9)];
const CORE_PIXELS: f64 = 1.9e8;

/// Whether NVDEC decodes codec `id` faster than `cores` CPU cores would, with the two
/// rates in pixels a second (the cores' scaled from the H200's 16; the frame size counts for
/// both alike, so it drops out); None for a codec NVDEC does not take here.
fn nvdec_wins(id: ff::codec::Id, cores: usize) -> Option<(bool, f64, f64)> {
    let &(_, gpu) = NVDEC_PIXELS.iter().find(|(c, _)| *c == id)?;
    let cpu = cores as f64 * CORE_PIXELS;
    Some((gpu > cpu, gpu, cpu))
}

/// `--decode auto`: whether NVDEC decodes codec `id` faster than this machine's cores would
/// (`nvdec_wins`). Says which it picked, and why, for `what`.
pub fn prefers(id: ff::codec::Id, what: &str) -> bool {
    let cores = crate::host::cores();
    let Some((nvdec, gpu, cpu)) = nvdec_wins(id, cores) else {
        crate::info!(
            "{what}: --decode auto: NVDEC has no {} here; the CPU decodes it",
            id.name()
        );
        return false;
    };
    crate::info!(
        "{what}: --decode auto: {} decodes it (one NVDEC about {:.0} Mpixel/s for {}, {cores} cores about {:.0})",
        if nvdec { "NVDEC" } else { "the CPU" },
        gpu / 1e6,
        id.name(),
        cpu / 1e6
    );
    nvdec
}

/// Whether the NVIDIA driver's decoder library (libnvcuvid, which FFmpeg loads for NVDEC)
/// is there.
fn nvcuvid_present() -> bool {
    // SAFETY: loads a library by a constant name (its initialisers run, as FFmpeg's own
    // load would) and closes the handle at once; nothing of it is called.
    unsafe {
        let h = libc::dlopen(c"libnvcuvid.so.1".as_ptr(), libc::RTLD_LAZY);
        if h.is_null() {
            return false;
        }
        libc::dlclose(h);
        true
    }
}

/// `framepipe doctor`'s line on decoding: NVDEC in this build and on this machine, and what
/// `--decode auto` picks on `cores` cores (the CPU wherever CUDA is not here: `cuda`).
pub fn doctor(cores: usize, cuda: bool) -> String {
    use ff::codec::Id;
    let built: Vec<&str> = [Id::H264, Id::HEVC]
        .into_iter()
        .filter(|&id| has_nvdec(id))
        .map(|id| id.name())
        .collect();
    if built.is_empty() {
        return "libavcodec on the CPU; this build's FFmpeg has no NVDEC (--decode gpu decodes on the CPU)".into();
    }
    let driver = if nvcuvid_present() {
        "the driver's libnvcuvid found"
    } else {
        "libnvcuvid (the NVIDIA driver's decoder library) not found: --decode gpu decodes on the CPU"
    };
    if !cuda {
        return format!(
            "libavcodec on the CPU (this build has NVDEC for {}, but there is no CUDA here: --decode gpu and auto decode on the CPU)",
            built.join(" and ")
        );
    }
    let auto: Vec<String> = [Id::H264, Id::HEVC]
        .into_iter()
        .filter_map(|id| {
            let (nvdec, ..) = nvdec_wins(id, cores)?;
            Some(format!(
                "{} on {}",
                id.name(),
                if nvdec { "NVDEC" } else { "the CPU" }
            ))
        })
        .collect();
    format!(
        "libavcodec; NVDEC for {} in this build, {driver}; --decode auto on {cores} cores (with CUDA): {}",
        built.join(" and "),
        auto.join(", ")
    )
}

/// Why NVDEC can't decode a stream here (the CPU then does).
#[derive(Debug, thiserror::Error)]
pub enum NvdecError {
    /// No driver library.
    #[error("the NVIDIA driver library libcuda was not found")]
    NoDriver,
    /// This libavcodec has no NVDEC for the codec.
    #[error("this build's libavcodec has no NVDEC for {0} (it has H.264 and HEVC where built with NVIDIA's headers)")]
    NoDecoder(&'static str),
    /// CUDA could not give what NVDEC needs.
    #[error("{what} ({why})")]
    Cuda {
        /// What could not be made.
        what: &'static str,
        /// The driver's or libavutil's reason.
        why: String,
    },
    /// This libavutil has no CUDA device type.
    #[error("this build's libavutil has no CUDA device type")]
    NoDeviceType,
    /// No memory for a reference.
    #[error("out of memory referencing the CUDA device")]
    OutOfMemory,
}

/// Gives the decoder context `ctx` (not opened yet) for codec `id` a CUDA device and the
/// CUDA format; `keep`: pictures may stay on the device (`Nvdec::keep`). Err says why NVDEC
/// can't be used (the CPU then decodes).
pub fn attach(
    ctx: &mut ff::codec::context::Context,
    id: ff::codec::Id,
    keep: bool,
) -> Result<Nvdec, NvdecError> {
    // SAFETY: only tries to load the shared library (FFmpeg loads it again itself).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err(NvdecError::NoDriver);
    }
    if !has_nvdec(id) {
        return Err(NvdecError::NoDecoder(id.name()));
    }
    // Device 0's primary context, retained here (cudarc's own, the one framepipe's backend
    // uses). FFmpeg's `av_hwdevice_ctx_create` can't be asked for it: with `primary_ctx` it
    // sets the context's scheduling flags, and refuses (ENOTSUP) once the backend has made it
    // active with others; so the device context is made around the context instead, as a
    // user of hwcontext_cuda.h does.
    let cuda = cudarc::driver::CudaContext::new(0).map_err(|e| NvdecError::Cuda {
        what: "CUDA device 0 could not be opened",
        why: e.to_string(),
    })?;
    // This handle of the context allocates nothing of cudarc's: its per-buffer event
    // tracking is off, as the backend's is (`device::Device::open`), so that making the
    // stream below does not synchronize the whole context, which CUDA refuses while the
    // backend captures a graph on another thread (and which then breaks that capture: a
    // camera joining a running wall ended the run).
    // SAFETY: no `CudaSlice` is made through `cuda`; FFmpeg orders its own work on
    // `stream`, and `lend` waits for that stream before a surface is used elsewhere.
    unsafe { cuda.disable_event_tracking() };
    // NVDEC's post-processing into its output surfaces goes on a stream of ours, not the
    // legacy default stream (which would wait for the backend's streams), and `lend` waits
    // for it.
    let stream = cuda.new_stream().map_err(|e| NvdecError::Cuda {
        what: "a CUDA stream for NVDEC could not be made",
        why: e.to_string(),
    })?;
    let mut device = device_around(&cuda, &stream)?;
    // SAFETY: the context is allocated and not opened; it takes its own reference to the
    // device (freed with the context) and ours is released; `cuda_first` has get_format's
    // signature. The decoder keeps the frame threads `decode.rs` set, as ffmpeg does
    // (NVDEC's hwaccel is safe with them); NVDEC is the limit either way (ffmpeg itself
    // decodes 1080p H.264 at 714 fps steady with one thread and 718 with them on the H200,
    // BENCHMARKS.md "NVDEC").
    unsafe {
        let c = ctx.as_mut_ptr();
        (*c).hw_device_ctx = ffi::av_buffer_ref(device);
        ffi::av_buffer_unref(&mut device);
        if (*c).hw_device_ctx.is_null() {
            return Err(NvdecError::OutOfMemory);
        }
        (*c).get_format = Some(cuda_first);
    }
    Ok(Nvdec {
        stream,
        keep,
        direct: false,
        host: ff::frame::Video::empty(),
        on_gpu: 0,
        on_cpu: 0,
    })
}

/// A libavutil CUDA device context made around `cuda` (a retained primary context) and
/// `stream` (NVDEC's post-processing stream), initialised; our reference to it.
fn device_around(
    cuda: &Arc<cudarc::driver::CudaContext>,
    stream: &Arc<cudarc::driver::CudaStream>,
) -> Result<*mut ffi::AVBufferRef, NvdecError> {
    // SAFETY: allocates a new device context of a type libavutil knows (or returns null).
    let mut device =
        unsafe { ffi::av_hwdevice_ctx_alloc(ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA) };
    if device.is_null() {
        return Err(NvdecError::NoDeviceType);
    }
    // SAFETY: the new device context's `hwctx` is an AVCUDADeviceContext (the type asked
    // for above), whose `cuda_ctx` is set before `av_hwdevice_ctx_init`: the retained
    // context, kept alive by `cuda` for as long as the decoder (`decode.rs` declares its
    // NVDEC after the decoder), and `stream`, a stream of it that lives as long. FFmpeg
    // does not release a context or destroy a stream it did not make.
    let r = unsafe {
        let hw = (*device).data as *mut ffi::AVHWDeviceContext;
        let cu = (*hw).hwctx as *mut CudaDeviceContext;
        (*cu).cuda_ctx = cuda.cu_ctx() as *mut std::ffi::c_void;
        (*cu).stream = stream.cu_stream() as *mut std::ffi::c_void;
        ffi::av_hwdevice_ctx_init(device)
    };
    if r < 0 {
        // SAFETY: our reference, released once.
        unsafe { ffi::av_buffer_unref(&mut device) };
        return Err(NvdecError::Cuda {
            what: "CUDA device 0 could not be given to libavcodec",
            why: ff::Error::from(r).to_string(),
        });
    }
    Ok(device)
}

impl Nvdec {
    /// Brings `picture` down into host memory where NVDEC decoded it (it is then a host
    /// picture with the same times and properties); a software picture stays as it is.
    /// `what` names the input for the message said once when the CPU decodes after all.
    pub fn download(&mut self, picture: &mut ff::frame::Video, what: &str) -> anyhow::Result<()> {
        if self.direct && picture.format() == ff::format::Pixel::CUDA {
            // SAFETY: `host` is a frame this owns; unreferencing an empty one does nothing.
            // (The first picture's surface, swapped in there, goes back to the pool.)
            unsafe { ffi::av_frame_unref(self.host.as_mut_ptr()) };
            self.on_gpu += 1;
            return Ok(()); // lent (`lend`) or brought down (`bring_into_slot`) by decode.rs
        }
        if picture.format() != ff::format::Pixel::CUDA {
            if self.on_cpu == 0 {
                crate::warn!(
                    "{what}: NVDEC did not take this stream (its codec profile, bit depth or size; FFmpeg's message above says which): the CPU decodes it"
                );
            }
            self.on_cpu += 1;
            return Ok(());
        }
        // SAFETY: `host` is a frame this owns (unreferenced first, so the transfer allocates
        // its buffers in the hardware frames' software format); `picture` is a CUDA frame
        // libavcodec just returned. The transfer returns once the copy is complete.
        let r = unsafe {
            ffi::av_frame_unref(self.host.as_mut_ptr());
            let r = ffi::av_hwframe_transfer_data(self.host.as_mut_ptr(), picture.as_ptr(), 0);
            if r >= 0 {
                ffi::av_frame_copy_props(self.host.as_mut_ptr(), picture.as_ptr())
            } else {
                r
            }
        };
        anyhow::ensure!(
            r >= 0,
            "{what}: bringing an NVDEC picture down: {}",
            ff::Error::from(r)
        );
        std::mem::swap(picture, &mut self.host);
        self.on_gpu += 1;
        Ok(())
    }

    /// Brings the NVDEC picture `picture` (NV12, `size`) down into `frame`, the slot's
    /// buffer, packed as the ring holds NV12 (the luma rows, then the interleaved chroma
    /// rows): one copy from the device, page-locked where the backend has locked the slot.
    pub fn bring_into_slot(
        &self,
        picture: &ff::frame::Video,
        size: crate::frame::FrameSize,
        frame: &mut [u8],
    ) -> anyhow::Result<()> {
        let (w, h) = (size.width, size.height);
        crate::ensure_kept!(
            frame.len() == w * h * 3 / 2 && sw_format(picture) == ff::format::Pixel::NV12,
            "an NVDEC picture ({:?}) does not fit a {size} NV12 slot",
            sw_format(picture)
        );
        // SAFETY: `dst` is a new frame describing `frame` (luma at 0, chroma at w*h, both
        // with w-byte rows: exactly `frame`'s length), wrapped in a buffer whose free does
        // nothing (the slot owns the memory and outlives the call); with a buffer set,
        // av_hwframe_transfer_data copies into the given planes (CUDA's transfer copies
        // min(pitch) bytes a row over the picture's height, and waits for the copy); the
        // frame is freed (the wrapper too) before `frame` is touched again.
        let r = unsafe {
            let mut dst = ffi::av_frame_alloc();
            anyhow::ensure!(!dst.is_null(), "out of memory describing a slot");
            let base = frame.as_mut_ptr();
            (*dst).buf[0] = ffi::av_buffer_create(
                base,
                frame.len(),
                Some(free_nothing),
                std::ptr::null_mut(),
                0,
            );
            let r = if (*dst).buf[0].is_null() {
                ffi::AVERROR(libc::ENOMEM)
            } else {
                (*dst).format = ffi::AVPixelFormat::AV_PIX_FMT_NV12 as i32;
                (*dst).width = w as i32;
                (*dst).height = h as i32;
                (*dst).data[0] = base;
                (*dst).linesize[0] = w as i32;
                (*dst).data[1] = base.add(w * h);
                (*dst).linesize[1] = w as i32;
                ffi::av_hwframe_transfer_data(dst, picture.as_ptr(), 0)
            };
            ffi::av_frame_free(&mut dst);
            r
        };
        anyhow::ensure!(
            r >= 0,
            "bringing an NVDEC picture into the ring: {}",
            ff::Error::from(r)
        );
        Ok(())
    }

    /// Lends the NVDEC picture `picture` (NV12, `size`) to a slot: where its bytes are on
    /// the device and how its planes lie there (rows at the surface's pitch), and a lease
    /// that keeps the surface from being reused until the backend has copied it. Waits for
    /// NVDEC's post-processing of the picture (on our stream) first.
    pub fn lend(
        &self,
        picture: &ff::frame::Video,
        size: FrameSize,
    ) -> anyhow::Result<(Memory, Planes)> {
        let (w, h) = (size.width, size.height);
        crate::ensure_kept!(
            sw_format(picture) == ff::format::Pixel::NV12,
            "an NVDEC picture ({:?}) lent as NV12",
            sw_format(picture)
        );
        self.stream
            .synchronize()
            .map_err(|e| anyhow::anyhow!("waiting for an NVDEC picture: {e}"))?;
        // SAFETY: a CUDA frame from libavcodec: data[0] and data[1] are device addresses of
        // its luma and chroma planes, in the memory its buffers hold (in FFmpeg 5.1, NVDEC's
        // mapped output surface, held by buf[1], with an empty buf[0]); the lease takes new
        // references to those buffers.
        let (base, luma, chroma, pitches, len, frame) = unsafe {
            let f = picture.as_ptr();
            let buf = (*f).buf[0];
            crate::ensure_kept!(!buf.is_null(), "an NVDEC picture without a buffer");
            (
                (*buf).data as u64,
                (*f).data[0] as u64,
                (*f).data[1] as u64,
                ((*f).linesize[0], (*f).linesize[1]),
                (*buf).size as u64,
                super::lease::FrameLease::of(f, "an NVDEC picture"),
            )
        };
        let lease = Lent {
            _frame: frame
                .ok_or_else(|| anyhow::anyhow!("out of memory lending an NVDEC picture"))?,
            _stream: self.stream.clone(),
        };
        // The planes as the surface holds them, checked to lie inside its buffer where the
        // buffer says its size (the backend's copies trust them). A picture FFmpeg maps
        // straight out of NVDEC's surface has a buffer of no size (hwcontext_cuda's
        // pool-less frames): its rows and planes are then checked against each other.
        let (p0, p1) = (pitches.0.max(0) as usize, pitches.1.max(0) as usize);
        let offset = chroma.saturating_sub(luma) as usize;
        let end = luma.saturating_sub(base) + (offset + p1 * (h / 2)) as u64;
        crate::ensure_kept!(
            p0 >= w && p1 >= w && offset >= p0 * h && (len == 0 || (luma >= base && end <= len)),
            "an NVDEC picture's planes (pitches {}, {}; chroma {offset} bytes on) do not fit its {len}-byte buffer at {size}",
            pitches.0,
            pitches.1
        );
        let planes = Planes::with([
            Plane {
                offset: 0,
                pitch: p0,
                rows_per: 1,
            },
            Plane {
                offset,
                pitch: p1,
                rows_per: 2,
            },
        ]);
        let memory = Memory::Device {
            device: 0,
            ptr: luma,
            lease: Arc::new(lease),
        };
        Ok((memory, planes))
    }

    /// Whether NVDEC decoded the pictures so far (all of them).
    pub fn decoding(&self) -> bool {
        self.on_gpu > 0 && self.on_cpu == 0
    }
}

/// The free of a buffer that wraps a slot's memory for `av_hwframe_transfer_data`: nothing
/// (the slot owns the memory, and outlives the buffer).
unsafe extern "C" fn free_nothing(_: *mut std::ffi::c_void, _: *mut u8) {
    // The slot's memory stays the slot's.
}

/// The format a picture's pixels are in: a CUDA picture's software format (its frames
/// context's), else its own.
pub fn sw_format(picture: &ff::frame::Video) -> ff::format::Pixel {
    if picture.format() != ff::format::Pixel::CUDA {
        return picture.format();
    }
    // SAFETY: a CUDA frame from libavcodec holds a reference to its hardware frames context,
    // whose `data` is an AVHWFramesContext; null is checked.
    unsafe {
        let frames = (*picture.as_ptr()).hw_frames_ctx;
        if frames.is_null() {
            return ff::format::Pixel::None;
        }
        let ctx = (*frames).data as *const ffi::AVHWFramesContext;
        ff::format::Pixel::from((*ctx).sw_format)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_takes_nvdec_where_the_cores_decode_slower() {
        use ff::codec::Id;
        // The H200's 16 cores decode H.264 faster than one NVDEC, HEVC not quite.
        assert_eq!(nvdec_wins(Id::H264, 16).map(|w| w.0), Some(false));
        assert_eq!(nvdec_wins(Id::HEVC, 16).map(|w| w.0), Some(true));
        // Fewer cores: NVDEC for both; more: the CPU for both.
        assert_eq!(nvdec_wins(Id::H264, 4).map(|w| w.0), Some(true));
        assert_eq!(nvdec_wins(Id::HEVC, 32).map(|w| w.0), Some(false));
        // No NVDEC in the build for VP9: the CPU.
        assert_eq!(nvdec_wins(Id::VP9, 1), None);
    }
}
