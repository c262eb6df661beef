//! FFmpeg's bitstream filters, for what a copied stream must change on its way into another
//! container: `aac_adtstoasc` (ADTS frames from MPEG-TS to the raw AAC an MP4 holds).
//! ffmpeg-sys-next has no bindings for `libavcodec/bsf.h`: the few calls are declared here.
//!
//! Invariants: a filter's context is allocated and freed here only, once; a packet handed in
//! is consumed (its reference taken) whatever the filter answers.

use anyhow::{bail, Result};
use ff::packet::Mut;
use ffmpeg_next as ff;

/// FFmpeg's `aac_adtstoasc` bitstream filter on one stream: ADTS frames in, raw AAC out, the
/// stream's AudioSpecificConfig given to the muxer as new extradata on the first packet.
pub struct AdtsToAsc(*mut ffi::AVBSFContext);

// SAFETY: the filter is used by the recording's one thread.
unsafe impl Send for AdtsToAsc {}

mod ffi {
    use ffmpeg_next::ffi::{AVCodecParameters, AVPacket, AVRational};
    use std::ffi::{c_char, c_int, c_void};

    /// The head of libavcodec's `AVBSFContext`, as declared from FFmpeg 4.0 to 7.1.
    #[repr(C)]
    pub struct AVBSFContext {
        pub av_class: *const c_void,
        pub filter: *const c_void,
        pub priv_data: *mut c_void,
        pub par_in: *mut AVCodecParameters,
        pub par_out: *mut AVCodecParameters,
        pub time_base_in: AVRational,
        pub time_base_out: AVRational,
    }

    extern "C" {
        pub fn av_bsf_get_by_name(name: *const c_char) -> *const c_void;
        pub fn av_bsf_alloc(filter: *const c_void, ctx: *mut *mut AVBSFContext) -> c_int;
        pub fn av_bsf_init(ctx: *mut AVBSFContext) -> c_int;
        pub fn av_bsf_send_packet(ctx: *mut AVBSFContext, pkt: *mut AVPacket) -> c_int;
        pub fn av_bsf_receive_packet(ctx: *mut AVBSFContext, pkt: *mut AVPacket) -> c_int;
        pub fn av_bsf_free(ctx: *mut *mut AVBSFContext);
    }
}

impl AdtsToAsc {
    /// The filter for one stream of these parameters and time base.
    pub fn new(params: &ff::codec::Parameters, time_base: ff::Rational) -> Result<Self> {
        // SAFETY: the filter is looked up by a static name and allocated by libavcodec; its
        // input parameters are a copy of `params` (valid while this runs) and its time base
        // is set before av_bsf_init, as bsf.h requires; on failure it is freed here.
        unsafe {
            let filter = ffi::av_bsf_get_by_name(c"aac_adtstoasc".as_ptr());
            if filter.is_null() {
                bail!("this FFmpeg has no aac_adtstoasc filter to write AAC from MPEG-TS into MP4");
            }
            let mut ctx = std::ptr::null_mut();
            if ffi::av_bsf_alloc(filter, &mut ctx) < 0 {
                bail!("allocating the aac_adtstoasc filter");
            }
            let this = Self(ctx);
            ff::ffi::avcodec_parameters_copy((*ctx).par_in, params.as_ptr());
            (*ctx).time_base_in = time_base.into();
            let ret = ffi::av_bsf_init(ctx);
            if ret < 0 {
                bail!(
                    "starting the aac_adtstoasc filter: {}",
                    ff::Error::from(ret)
                );
            }
            Ok(this)
        }
    }

    /// The packet as raw AAC (None where the filter keeps it for later).
    pub fn convert(&mut self, mut p: ff::Packet) -> Result<Option<ff::Packet>> {
        let mut out = ff::Packet::empty();
        // SAFETY: the context is initialised; send takes the packet's reference (leaving
        // it blank), receive fills `out`, both owned here.
        let ret = unsafe {
            let sent = ffi::av_bsf_send_packet(self.0, p.as_mut_ptr());
            if sent < 0 {
                sent
            } else {
                ffi::av_bsf_receive_packet(self.0, out.as_mut_ptr())
            }
        };
        match ret {
            0 => Ok(Some(out)),
            e if e == ff::ffi::AVERROR(libc::EAGAIN) => Ok(None),
            e => bail!("converting ADTS audio for MP4: {}", ff::Error::from(e)),
        }
    }
}

impl Drop for AdtsToAsc {
    fn drop(&mut self) {
        // SAFETY: the context was allocated by av_bsf_alloc and is freed once.
        unsafe { ffi::av_bsf_free(&mut self.0) };
    }
}
