//! NVDEC, the GPU's video decoder, through libavcodec's CUDA hwaccel (`--decode gpu`): the
//! decoder's context gets a CUDA device (device 0's primary context, the one framepipe's
//! backend uses) and picks the CUDA pixel format when libavcodec offers it. The first
//! picture NVDEC decodes is brought down into a host picture (NV12, as NVDEC gives 8-bit
//! 4:2:0), so that `decode.rs` settles the input's format from it as from any picture; once
//! that says NV12, as carried and upright, every later picture is brought down straight
//! into the ring's slot (`bring_into_slot`: one copy from the device, no copy on the CPU), and
//! any other picture (a rotated file, 10-bit P010) keeps coming down into a host picture
//! and goes the CPU-decoded way (turned, or converted).
//!
//! This first step takes the decoding off the CPU; the frames still cross PCIe twice (down
//! here, up in the backend). Frames kept in device memory (`desc::Memory::Device`) are the
//! next step.
//!
//! Invariants: where NVDEC can't be used (no CUDA driver, a codec the build or the GPU has no
//! NVDEC for, a stream NVDEC refuses: libavcodec then hands software pictures) the CPU
//! decodes, and the run says why once; a picture is handed on only once it is whole in host
//! memory (`av_hwframe_transfer_data` waits for its copy); a high bit depth comes down as
//! such (P010) and is converted as `decode.rs` converts any picture it can't carry.

use ff::ffi;
use ffmpeg_next as ff;

/// A decoder context's NVDEC (module doc).
pub struct Nvdec {
    /// Pictures stay on the device until `bring_into_slot` brings them down straight into the
    /// ring's slot (set once the first picture showed they are NV12 as carried, upright).
    pub direct: bool,
    /// The last picture brought down (the hardware picture is swapped in here).
    host: ff::frame::Video,
    /// Pictures NVDEC decoded.
    on_gpu: u64,
    /// Pictures the CPU decoded after all (libavcodec fell back).
    on_cpu: u64,
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

/// Gives the decoder context `ctx` (not opened yet) for codec `id` a CUDA device and the
/// CUDA format; Err says why NVDEC can't be used (the CPU then decodes).
pub fn attach(ctx: &mut ff::codec::context::Context, id: ff::codec::Id) -> Result<Nvdec, String> {
    // SAFETY: only tries to load the shared library (FFmpeg loads it again itself).
    if !unsafe { cudarc::driver::sys::is_culib_present() } {
        return Err("the NVIDIA driver library libcuda was not found".into());
    }
    if !has_nvdec(id) {
        return Err(format!(
            "this build's libavcodec has no NVDEC for {} (it has H.264 and HEVC where built with NVIDIA's headers)",
            id.name()
        ));
    }
    let mut options = ff::Dictionary::new();
    // The device's primary context: the one cudarc, and so framepipe's backend, uses.
    options.set("primary_ctx", "1");
    let mut device: *mut ffi::AVBufferRef = std::ptr::null_mut();
    // SAFETY: the dictionary is taken back below (`own`), once.
    let opts = unsafe { options.disown() };
    // SAFETY: `device` receives a new reference or stays null; "0" names CUDA device 0;
    // `opts` is only read (it stays ours, freed below).
    let r = unsafe {
        ffi::av_hwdevice_ctx_create(
            &mut device,
            ffi::AVHWDeviceType::AV_HWDEVICE_TYPE_CUDA,
            c"0".as_ptr(),
            opts,
            0,
        )
    };
    // SAFETY: `opts` came from `disown` above and is owned (and freed) once, here.
    drop(unsafe { ff::Dictionary::own(opts) });
    if r < 0 || device.is_null() {
        return Err(format!(
            "CUDA device 0 could not be opened for NVDEC ({})",
            ff::Error::from(r)
        ));
    }
    // SAFETY: the context is allocated and not opened; it takes its own reference to the
    // device (freed with the context) and ours is released; `cuda_first` has get_format's
    // signature. One thread for parsing: NVDEC decodes, and frame threads would only hold
    // more surfaces.
    unsafe {
        let c = ctx.as_mut_ptr();
        (*c).hw_device_ctx = ffi::av_buffer_ref(device);
        ffi::av_buffer_unref(&mut device);
        if (*c).hw_device_ctx.is_null() {
            return Err("out of memory referencing the CUDA device".into());
        }
        (*c).get_format = Some(cuda_first);
        (*c).thread_count = 1;
    }
    Ok(Nvdec {
        direct: false,
        host: ff::frame::Video::empty(),
        on_gpu: 0,
        on_cpu: 0,
    })
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
            return Ok(()); // brought down by `bring_into_slot`
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
        anyhow::ensure!(
            frame.len() == w * h * 3 / 2 && sw_format(picture) == ff::format::Pixel::NV12,
            "internal: an NVDEC picture ({:?}) does not fit a {size} NV12 slot",
            sw_format(picture)
        );
        unsafe extern "C" fn kept(_: *mut std::ffi::c_void, _: *mut u8) {}
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
            (*dst).buf[0] =
                ffi::av_buffer_create(base, frame.len(), Some(kept), std::ptr::null_mut(), 0);
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

    /// Whether NVDEC decoded the pictures so far (all of them).
    pub fn decoding(&self) -> bool {
        self.on_gpu > 0 && self.on_cpu == 0
    }
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
