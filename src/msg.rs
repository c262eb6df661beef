//! Every line framepipe prints goes through here (FFmpeg's own lines, with -v or where they
//! are not looked at, go through FFmpeg's printer: `media::log`).
//!
//! Invariants: a write to standard error or standard output never panics and never stops the
//! program (a closed pipe, `| head -1`, a closed terminal: the line is dropped); no line shows
//! a URL's password or secret parameters (`crate::secret`), but the browser view's own
//! address, given to its user with its token (`stderr_as_is`); `-q` silences
//! `info!` lines only (warnings, errors and the summary still print); `Silent` (Python's
//! `quiet=True`) the summary and the notices too (`notice!`); `-v` adds `debug!` lines.

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

/// How much framepipe says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum Level {
    /// Errors and warnings alone (an embedding program's `quiet=True`).
    Silent = 0,
    /// `-q`: errors, warnings and the summary.
    Quiet = 1,
    /// The default: also what was opened and chosen.
    Normal = 2,
    /// `-v`: also details (OpenCV's own log lines, probing).
    Verbose = 3,
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Normal as u8);

/// Sets the level for the rest of the process.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Whether lines of `level` are printed.
pub fn enabled(level: Level) -> bool {
    LEVEL.load(Ordering::Relaxed) >= level as u8
}

/// Writes to standard error, best effort: an error (a closed pipe) is ignored. A URL's
/// secrets are taken out first (`crate::secret`).
pub fn stderr(args: fmt::Arguments) {
    let line = fmt::format(args);
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(crate::secret::redact(&line).as_bytes());
    let _ = e.flush();
}

/// Writes to standard error as it is, secrets and all: only for the one line whose job is
/// to give the user their own secret (the browser view's address with its token).
pub fn stderr_as_is(args: fmt::Arguments) {
    let mut e = std::io::stderr().lock();
    let _ = e.write_fmt(args);
    let _ = e.flush();
}

/// Writes to standard output, best effort: an error (a closed pipe) is ignored. A URL's
/// secrets are taken out first.
pub fn stdout(args: fmt::Arguments) {
    let line = fmt::format(args);
    let mut o = std::io::stdout().lock();
    let _ = o.write_all(crate::secret::redact(&line).as_bytes());
    let _ = o.flush();
}

/// A line on stderr, prefixed "framepipe: ", unless `-q`.
#[macro_export]
macro_rules! info {
    ($($t:tt)*) => {
        if $crate::msg::enabled($crate::msg::Level::Normal) {
            $crate::msg::stderr(format_args!("framepipe: {}\n", format_args!($($t)*)))
        }
    };
}

/// A line on stderr, prefixed "framepipe: ", only with `-v`.
#[macro_export]
macro_rules! debug {
    ($($t:tt)*) => {
        if $crate::msg::enabled($crate::msg::Level::Verbose) {
            $crate::msg::stderr(format_args!("framepipe: {}\n", format_args!($($t)*)))
        }
    };
}

/// A line on stderr, prefixed "framepipe: warning: ", always.
#[macro_export]
macro_rules! warn {
    ($($t:tt)*) => {
        $crate::msg::stderr(format_args!("framepipe: warning: {}\n", format_args!($($t)*)))
    };
}

/// A line on stderr as it is written (the summary, a notice), unless silent.
#[macro_export]
macro_rules! notice {
    ($($t:tt)*) => {
        if $crate::msg::enabled($crate::msg::Level::Quiet) {
            $crate::msg::stderr(format_args!("{}\n", format_args!($($t)*)))
        }
    };
}

/// A line on stderr as it is written (an error), always.
#[macro_export]
macro_rules! say {
    ($($t:tt)*) => {
        $crate::msg::stderr(format_args!("{}\n", format_args!($($t)*)))
    };
}

/// A line on stdout (the reports of `bench` and `doctor`), always.
#[macro_export]
macro_rules! out {
    () => {
        $crate::msg::stdout(format_args!("\n"))
    };
    ($($t:tt)*) => {
        $crate::msg::stdout(format_args!("{}\n", format_args!($($t)*)))
    };
}
