//! A decoded picture lent to a ring slot as it lies (`desc::Lease`): a reference to
//! libavcodec's frame, NVDEC's surface (`nvdec.rs`) or a picture of the decoder's own pool
//! in host memory (`pinned.rs`), held until the backend (or, for a frame that passes
//! untouched, its consumer) is done with it.
//!
//! Invariants: the reference is taken with `av_frame_clone` and freed once, when the lease
//! is dropped; the frame is only ever read through the lease (`host_bytes`, a pool
//! picture's one buffer), never written, and the decoder writes a buffer only once no
//! reference holds it, so moving or sharing a lease between threads touches nothing but
//! FFmpeg's reference counts, which it keeps atomically.

use ffmpeg_next::ffi;

/// A new reference to a decoded frame (module doc); `what` names it where a lease is shown.
pub(super) struct FrameLease {
    frame: *mut ffi::AVFrame,
    what: &'static str,
    /// The frame's first buffer is host memory holding every plane (a pool picture).
    host: bool,
}

impl FrameLease {
    /// A new reference to `frame`; None when FFmpeg is out of memory.
    ///
    /// # Safety
    /// `frame` is a live, decoded frame.
    pub(super) unsafe fn of(frame: *const ffi::AVFrame, what: &'static str) -> Option<Self> {
        // SAFETY: the caller's live frame; the clone takes new references to its buffers.
        let frame = unsafe { ffi::av_frame_clone(frame) };
        (!frame.is_null()).then_some(Self {
            frame,
            what,
            host: false,
        })
    }

    /// `of` a picture whose first buffer is host memory holding all its planes (the
    /// decoder's pool's, `pinned.rs`), which `host_bytes` reads.
    ///
    /// # Safety
    /// As `of`; and `frame.buf[0]` is a live host buffer holding every plane of the frame.
    pub(super) unsafe fn of_host(frame: *const ffi::AVFrame, what: &'static str) -> Option<Self> {
        // SAFETY: the caller's contract.
        let lease = unsafe { Self::of(frame, what) };
        lease.map(|mut l| {
            l.host = true;
            l
        })
    }
}

impl std::fmt::Debug for FrameLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.what)
    }
}

// SAFETY: the module's invariants: only the reference counts are touched, atomically.
unsafe impl Send for FrameLease {}
// SAFETY: as above.
unsafe impl Sync for FrameLease {}

impl crate::desc::Lease for FrameLease {
    fn host_bytes(&self) -> Option<&[u8]> {
        if !self.host {
            return None;
        }
        // SAFETY: a pool picture (`of_host`): `buf[0]` is a live host buffer of `size`
        // bytes, kept by this reference for as long as `self` lives, and the decoder writes
        // it only once no reference holds it (module doc).
        unsafe {
            let buf = (*self.frame).buf[0];
            (!buf.is_null()).then(|| std::slice::from_raw_parts((*buf).data, (*buf).size))
        }
    }
}

impl Drop for FrameLease {
    fn drop(&mut self) {
        // SAFETY: `frame` came from av_frame_clone and is freed once, here.
        unsafe { ffi::av_frame_free(&mut self.frame) };
    }
}
