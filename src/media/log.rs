//! FFmpeg's log, through framepipe's own hook: watched for the one sign that OpenCV 4.6
//! returned a stale frame, and kept short.
//!
//! OpenCV's FFmpeg reader sets its colour conversion up for the stream's first frame size.
//! When the decoded size later grows (a transport stream or a concatenation of clips), the
//! conversion fails with FFmpeg's "Slice parameters … are invalid" and OpenCV hands out
//! the previous frame again, without a word. The hook counts those messages, notes the
//! H.264 decoder's re-initializations (a size change either way), keeps each thread's last
//! error for framepipe's own message (`take_last_error`), says the decoders' complaints
//! about a stream joined between keyframes once (the rest only with -v), keeps without
//! printing the errors of an input being opened (`kept_here`: framepipe's own line says
//! their cause; -v prints them), and passes every other message on to FFmpeg's own printer
//! (none with -q).
//!
//! Invariants: installed once, before OpenCV's first open (so no line escapes it), through
//! the FFmpeg functions the binary links (a static build exports none to `dlsym`); with -q
//! every line is dropped after it is looked at; a line is formatted only where it is read.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

type Callback = unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *mut c_void);
type FormatLine = unsafe extern "C" fn(
    *mut c_void,
    c_int,
    *const c_char,
    *mut c_void,
    *mut c_char,
    c_int,
    *mut c_int,
);

static SCALER_FAILURES: AtomicU64 = AtomicU64::new(0);
/// The size an H.264 decoder last re-initialized to, as `width << 32 | height`.
static REINIT_SIZE: AtomicU64 = AtomicU64::new(0);
static DEFAULT: OnceLock<Option<(Callback, FormatLine)>> = OnceLock::new();
/// Whether the first decoder complaint about a stream joined between keyframes was said.
static SAID_JOINED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The H.264 and HEVC decoders' complaints about pictures that refer to what came before
/// the first keyframe read: what a camera or a wall of them prints by the hundred when it is
/// joined mid-stream, and harmless (the decoder waits for the next keyframe). By their
/// format strings.
const JOINED_MID_STREAM: [&[u8]; 8] = [
    b"non-existing PPS",
    b"non-existing SPS",
    b"decode_slice_header error",
    b"no frame!",
    b"co located POCs unavailable",
    b"mmco: unref short failure",
    b"PPS id out of range",
    b"Could not find ref with POC",
];

/// Whether an error line's format is one of `JOINED_MID_STREAM`.
fn joined_between_keyframes(format: &[u8]) -> bool {
    JOINED_MID_STREAM.iter().any(|j| format.starts_with(j))
}

/// How many frames FFmpeg's scaler refused so far (OpenCV's reader asks).
#[cfg(feature = "opencv")]
pub fn scaler_failures() -> u64 {
    SCALER_FAILURES.load(Ordering::SeqCst)
}

/// The size an H.264 decoder last re-initialized to (its "Reinit context to WxH"
/// message, at debug level: a size change, also a shrinking one, which OpenCV 4.6
/// answers with frames of the old size holding the wrong pixels); None before any.
#[cfg(feature = "opencv")]
pub fn reinit_size() -> Option<(usize, usize)> {
    let v = REINIT_SIZE.load(Ordering::SeqCst);
    (v != 0).then_some(((v >> 32) as usize, (v & 0xffff_ffff) as usize))
}

// `va_list` is passed as a pointer on x86-64 and AArch64 Linux, so the hook forwards it
// untouched as one.
unsafe extern "C" fn hook(avcl: *mut c_void, level: c_int, fmt: *const c_char, vl: *mut c_void) {
    // SAFETY: FFmpeg passes a NUL-terminated format string, or null.
    if !fmt.is_null()
        && unsafe { CStr::from_ptr(fmt) }
            .to_bytes()
            .starts_with(b"Slice parameters")
    {
        SCALER_FAILURES.fetch_add(1, Ordering::SeqCst);
    }
    let Some(Some((default, format_line))) = DEFAULT.get() else {
        return;
    };
    // SAFETY: as above.
    if !fmt.is_null()
        && unsafe { CStr::from_ptr(fmt) }
            .to_bytes()
            .starts_with(b"Reinit context to ")
    {
        // A debug-level line the default printer would not print at OpenCV's level: it
        // is formatted here (which consumes `vl`) and not passed on.
        let mut line = [0 as c_char; 256];
        let mut prefix: c_int = 0;
        // SAFETY: FFmpeg's own arguments; `line` is writable for its length, which
        // av_log_format_line NUL-terminates within.
        unsafe {
            format_line(avcl, level, fmt, vl, line.as_mut_ptr(), 256, &mut prefix);
            let text = CStr::from_ptr(line.as_ptr()).to_string_lossy();
            if let Some((w, h)) = parse_reinit(&text) {
                REINIT_SIZE.store((w as u64) << 32 | h as u64, Ordering::SeqCst);
            }
        }
        return;
    }
    if level <= AV_LOG_ERROR && !fmt.is_null() {
        // Kept for the error framepipe says ("Failed to resolve hostname …" is only here),
        // then printed as FFmpeg's printer prints it (formatting consumes `vl`).
        let mut line = [0 as c_char; 1024];
        let mut prefix: c_int = 1;
        // SAFETY: as above; `line` is writable for its length, NUL-terminated within.
        let text = unsafe {
            format_line(avcl, level, fmt, vl, line.as_mut_ptr(), 1024, &mut prefix);
            CStr::from_ptr(line.as_ptr()).to_string_lossy().into_owned()
        };
        let cause = text.split("] ").last().unwrap_or(&text).trim().to_string();
        LAST_ERROR.with(|e| *e.borrow_mut() = Some(cause));
        let kept = QUIET.with(|q| q.get()) && !crate::msg::enabled(crate::msg::Level::Verbose);
        if crate::msg::enabled(crate::msg::Level::Normal) && !kept {
            // SAFETY: as above.
            let format = unsafe { CStr::from_ptr(fmt) }.to_bytes();
            if !joined_between_keyframes(format) || crate::msg::enabled(crate::msg::Level::Verbose)
            {
                crate::msg::stderr(format_args!("{text}"));
            } else if !SAID_JOINED.swap(true, Ordering::SeqCst) {
                crate::msg::stderr(format_args!(
                    "{} (a stream read from between two keyframes: the decoder's complaints until the next one are not shown; -v shows them)",
                    text.trim_end()
                ));
            }
        }
        return;
    }
    // -q: framepipe's own lines only (FFmpeg's "Duplicate element" and the like say
    // nothing a user can act on that framepipe does not say itself).
    if !crate::msg::enabled(crate::msg::Level::Normal) {
        return;
    }
    // SAFETY: the arguments are FFmpeg's own, passed on to its default printer.
    unsafe { default(avcl, level, fmt, vl) };
}

/// FFmpeg's `AV_LOG_ERROR`.
const AV_LOG_ERROR: c_int = 16;

thread_local! {
    /// The last error line FFmpeg logged on this thread, without its `[tcp @ …]` prefix.
    static LAST_ERROR: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

thread_local! {
    /// This thread's FFmpeg errors are kept (`take_last_error`) but not printed.
    static QUIET: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// From now on FFmpeg's errors on this thread are kept but not printed: a camera tried
/// again until it comes up said why once, not at every attempt.
pub fn quiet_errors_here() {
    QUIET.with(|q| q.set(true));
}

/// FFmpeg's errors on this thread kept, not printed, until the guard goes (the state before
/// it comes back): an input being opened, whose failure framepipe says in its own line with
/// FFmpeg's cause (`take_last_error`), so that FFmpeg's raw line never comes first. With -v
/// they are printed all the same.
pub fn kept_here() -> KeptHere {
    KeptHere(QUIET.with(|q| q.replace(true)))
}

/// Keeps this thread's FFmpeg errors while it lives (`kept_here`).
pub struct KeptHere(bool);

impl Drop for KeptHere {
    fn drop(&mut self) {
        QUIET.with(|q| q.set(self.0));
    }
}

/// The last error line FFmpeg logged on this thread since the last call, if any: the cause
/// behind a bare "Input/output error" (an unknown host, a refused connection).
pub fn take_last_error() -> Option<String> {
    LAST_ERROR.with(|e| e.borrow_mut().take())
}

/// "… Reinit context to 1280x720, pix_fmt: yuv420p" → (1280, 720).
fn parse_reinit(line: &str) -> Option<(usize, usize)> {
    let rest = line.split("Reinit context to ").nth(1)?;
    let size = rest.split([',', ' ', '\n']).next()?;
    let (w, h) = size.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

/// Installs the hook once. FFmpeg's functions are taken as linked, not looked up: a
/// GPU server's build links FFmpeg in statically and exports none of its symbols, so a
/// `dlsym` found nothing there and FFmpeg printed every line itself (a wall's hundreds of
/// "non-existing PPS", and `-q` did not silence it). OpenCV's reader uses the same libavutil
/// where both are in the build.
pub fn install() {
    DEFAULT.get_or_init(|| {
        use ffmpeg_next::ffi;
        // SAFETY: FFmpeg's own functions; the transmutes go between two spellings of one C
        // signature each (avutil/log.h: `va_list` is a pointer either way on the targets
        // framepipe builds for), and `hook` is such a callback.
        unsafe {
            let default: Callback = std::mem::transmute(ffi::av_log_default_callback as *const ());
            let format: FormatLine = std::mem::transmute(ffi::av_log_format_line as *const ());
            type Theirs =
                unsafe extern "C" fn(*mut c_void, c_int, *const c_char, *mut ffi::__va_list_tag);
            ffi::av_log_set_callback(Some(std::mem::transmute::<Callback, Theirs>(hook)));
            Some((default, format))
        }
    });
}
