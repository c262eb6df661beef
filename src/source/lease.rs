//! A decoded picture lent to a ring slot as it lies (`desc::Lease`): a reference to
//! libavcodec's frame, NVDEC's surface (`nvdec.rs`) or a page-locked picture of the decoder's
//! pool (`pinned.rs`), held until the backend has copied it.
//!
//! Invariants: the reference is taken with `av_frame_clone` and freed once, when the lease
//! is dropped; nothing reads the frame through the lease, so moving or sharing it between
//! threads touches nothing but FFmpeg's reference counts, which it keeps atomically.

use ffmpeg_next::ffi;

/// A new reference to a decoded frame (module doc); `what` names it where a lease is shown.
pub(super) struct FrameLease {
    frame: *mut ffi::AVFrame,
    what: &'static str,
}

impl FrameLease {
    /// A new reference to `frame`; None when FFmpeg is out of memory.
    ///
    /// # Safety
    /// `frame` is a live, decoded frame.
    pub(super) unsafe fn of(frame: *const ffi::AVFrame, what: &'static str) -> Option<Self> {
        // SAFETY: the caller's live frame; the clone takes new references to its buffers.
        let frame = unsafe { ffi::av_frame_clone(frame) };
        (!frame.is_null()).then_some(Self { frame, what })
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

impl crate::desc::Lease for FrameLease {}

impl Drop for FrameLease {
    fn drop(&mut self) {
        // SAFETY: `frame` came from av_frame_clone and is freed once, here.
        unsafe { ffi::av_frame_free(&mut self.frame) };
    }
}
