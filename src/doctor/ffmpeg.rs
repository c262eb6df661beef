//! What this build's FFmpeg can read and write, asked of its libraries (for `framepipe
//! doctor`): the protocols each way, the containers framepipe names, and the encoders of its
//! `--codec` and image sequences. A static build carries only what `scripts/ffmpeg-server.sh`
//! configured, so the answer differs between builds: this is how a user of the server build
//! sees whether `udp://` or `.mp4` is there before a run refuses it.
//!
//! Invariant: each answer comes from libavformat's or libavcodec's own registry (nothing here
//! is a list of what the build is believed to have).

use std::ffi::{c_void, CStr, CString};

use ffmpeg_next as ff;

use crate::output::codec::Codec;
use crate::output::picture::ImageFormat;

/// The containers framepipe reads or writes, by what users call them, with FFmpeg's name of
/// their demuxer and muxer ("" where FFmpeg has none that way).
const CONTAINERS: &[(&str, &str, &str)] = &[
    ("mp4/mov", "mov", "mp4"),
    ("mkv", "matroska", "matroska"),
    ("webm", "matroska", "webm"),
    ("avi", "avi", "avi"),
    ("ts", "mpegts", "mpegts"),
    ("flv", "flv", "flv"),
    ("hls", "hls", "hls"),
    ("rtsp", "rtsp", "rtsp"),
    ("sdp", "sdp", ""),
    ("y4m", "yuv4mpegpipe", "yuv4mpegpipe"),
    ("images", "image2", "image2"),
];

/// The protocols libavformat has for input (`output` false) or output, in its order.
pub fn protocols(output: bool) -> Vec<String> {
    crate::media::info::init();
    let mut opaque: *mut c_void = std::ptr::null_mut();
    let mut names = Vec::new();
    loop {
        // SAFETY: avio_enum_protocols walks a static table through `opaque`, which starts
        // null and is only ever passed back to it; the names it returns are static strings.
        let name = unsafe { ff::ffi::avio_enum_protocols(&mut opaque, i32::from(output)) };
        if name.is_null() {
            break;
        }
        // SAFETY: non-null, a static NUL-terminated string (above).
        names.push(
            unsafe { CStr::from_ptr(name) }
                .to_string_lossy()
                .into_owned(),
        );
    }
    names
}

/// Whether libavformat has a demuxer (`output` false) or muxer called `name`.
fn has_format(name: &str, output: bool) -> bool {
    let Ok(c) = CString::new(name) else {
        return false;
    };
    // SAFETY: both take a NUL-terminated name and only look it up in static tables.
    unsafe {
        if output {
            !ff::ffi::av_guess_format(c.as_ptr(), std::ptr::null(), std::ptr::null()).is_null()
        } else {
            !ff::ffi::av_find_input_format(c.as_ptr()).is_null()
        }
    }
}

/// The containers of `CONTAINERS` that this FFmpeg reads (`output` false) or writes.
pub fn containers(output: bool) -> Vec<&'static str> {
    crate::media::info::init();
    CONTAINERS
        .iter()
        .filter(|(_, demuxer, muxer)| {
            let name = if output { muxer } else { demuxer };
            !name.is_empty() && has_format(name, output)
        })
        .map(|(label, ..)| *label)
        .collect()
}

/// `--codec` names whose encoder this FFmpeg has, and those it lacks.
pub fn codecs() -> (Vec<&'static str>, Vec<&'static str>) {
    use Codec::*;
    [H264, Hevc, Mpeg4, Mjpeg, Ffv1, Vp9]
        .into_iter()
        .map(|c| (c.name(), crate::output::av::available(c)))
        .fold((vec![], vec![]), |(mut has, mut lacks), (name, ok)| {
            if ok { &mut has } else { &mut lacks }.push(name);
            (has, lacks)
        })
}

/// The image sequence formats whose encoder this FFmpeg has.
pub fn image_formats() -> Vec<&'static str> {
    use ImageFormat::*;
    [Png, Ppm, Bmp, Tiff, Jpeg]
        .into_iter()
        .filter(|f| f.available())
        .map(ImageFormat::name)
        .collect()
}

/// Prints what this FFmpeg reads and writes, a line each way and one per kind of encoder.
pub fn report() {
    let list = |v: Vec<&str>| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let reads = protocols(false);
    let writes = protocols(true);
    crate::out!(
        "reads:      {} (protocols); {} (containers)",
        list(reads.iter().map(String::as_str).collect()),
        list(containers(false))
    );
    crate::out!(
        "writes:     {} (protocols); {} (containers)",
        list(writes.iter().map(String::as_str).collect()),
        list(containers(true))
    );
    let (has, lacks) = codecs();
    let missing = if lacks.is_empty() {
        String::new()
    } else {
        format!("; not in this build: {}", lacks.join(", "))
    };
    crate::out!(
        "encoders:   --codec {}{missing}; image sequences {}",
        list(has),
        list(image_formats())
    );
}
