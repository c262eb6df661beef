//! The error idiom: what the user got wrong is a typed error (thiserror) of the room that
//! found it (`plan::error::PlanError` for the flags, `output::spec::OutputError` for an output's
//! name, `paths::PathError`, `output::claim::ClaimError`, `filter::FilterError`, …; no function
//! returns `Result<_, String>`), carried through `anyhow` to the edge (`main`), which prints
//! one `framepipe: error:` line. A broken promise
//! inside framepipe (a frame in a format its consumer was not promised, a count outside its
//! range) is a `Bug`: said as such, never as the user's fault.
//!
//! Invariants: no message a user sees says "internal:"; a `Bug` names what broke.

/// A promise inside framepipe broken: the message says what, and that it is a bug.
#[derive(Debug, thiserror::Error)]
#[error("{0} (a bug in framepipe: please report it with the command line)")]
pub struct Bug(pub String);

/// `anyhow::ensure!` for a promise inside framepipe: a `Bug` where `cond` is false.
#[macro_export]
macro_rules! ensure_kept {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(anyhow::Error::from($crate::error::Bug(format!($($fmt)+))));
        }
    };
}

/// A `Bug` as an `anyhow::Error`, for `bail`-like returns.
#[macro_export]
macro_rules! bug {
    ($($fmt:tt)+) => {
        anyhow::Error::from($crate::error::Bug(format!($($fmt)+)))
    };
}
