//! Memory a run will take, checked against what the machine has before anything is allocated,
//! and the file descriptors its inputs will hold.
//!
//! Invariants: every figure is computed with checked arithmetic (an absurd `--ring` or frame
//! size is an error, never an overflow or an abort); the ring may take at most
//! `HOST_SHARE` of the host's available memory, so that the decoder, the encoder and the
//! CPU backend's scratch images still fit; a refusal names the figure and the option that
//! lowers it.

use crate::frame::FrameSize;

/// The share of `MemAvailable` the ring's buffers may take.
pub const HOST_SHARE: f64 = 0.5;

/// Slots in the ring when `--ring` is not given.
pub const DEFAULT_RING: usize = 8;
/// The most slots of a ring that NVDEC's pictures are lent to, staying on the device: a
/// ring of more has its pictures brought down into the slots instead. Each lent picture
/// holds one of the decoder's surfaces, of which libavcodec makes the stream's own and a
/// few more: rings of 6 (beside others) and 8 (one input) fit on the H200, H.264 and HEVC;
/// a ring of 12 ran the decoder out, and its pictures came out broken.
pub const MAX_LENT: usize = DEFAULT_RING;

/// The most the default ring takes: huge frames (a 16000x16000 image) get fewer slots.
pub const DEFAULT_RING_BYTES: u64 = 2 << 30;

/// The ring's slot count when `--ring` is not given: `DEFAULT_RING`, or fewer (at least 2)
/// where that would take more than `DEFAULT_RING_BYTES`.
pub fn default_ring(size: FrameSize) -> usize {
    match slot_bytes(size) {
        Some(per_slot) if per_slot > 0 => {
            ((DEFAULT_RING_BYTES / per_slot) as usize).clamp(2, DEFAULT_RING)
        }
        _ => 2,
    }
}

/// Host buffers of one ring slot (an input and an output frame, each page-rounded), counted
/// as BGR: an upper bound, a YUV slot is smaller (the ring is checked before the formats
/// are settled).
pub fn slot_bytes(size: FrameSize) -> Option<u64> {
    let frame = (size.width as u64)
        .checked_mul(size.height as u64)?
        .checked_mul(crate::frame::CHANNELS as u64)?;
    let buffer = crate::ring::allocated_bytes(usize::try_from(frame).ok()?)?;
    (buffer as u64).checked_mul(2)
}

/// Host buffers of a ring of `slots` slots.
pub fn ring_bytes(slots: usize, size: FrameSize) -> Option<u64> {
    slot_bytes(size)?.checked_mul(slots as u64)
}

/// Bytes as "11.6 GiB".
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// More memory, or more open files, than the machine lets a run have (each names the
/// figures and what to lower).
#[derive(Debug, thiserror::Error)]
pub enum BudgetError {
    /// One frame is over what memory can address.
    #[error("frames of {0} are too large to hold in memory")]
    FrameTooLarge(FrameSize),
    /// A ring over what memory can address.
    #[error("--ring {slots} at {size} needs more memory than any machine has; lower --ring")]
    RingPastMemory {
        /// Its slots.
        slots: usize,
        /// Its frames' size.
        size: FrameSize,
    },
    /// A ring over this machine's share.
    #[error("--ring {slots} at {size} needs {} of frame buffers ({slots} slots of {}), more than the {:.0} % of this machine's available {} it may take; {advice}", human(*.total), human(*.per_slot), HOST_SHARE * 100.0, human(*.available))]
    Ring {
        /// Its slots.
        slots: usize,
        /// Its frames' size.
        size: FrameSize,
        /// Bytes it needs.
        total: u64,
        /// Bytes a slot needs.
        per_slot: u64,
        /// Bytes available.
        available: u64,
        /// What would fit.
        advice: String,
    },
    /// The inputs' rings together over what memory can address.
    #[error("the inputs' rings need more memory than any machine has; lower --ring")]
    RingsPastMemory,
    /// The inputs' rings together over this machine's share.
    #[error("the {inputs} inputs' rings need {} of frame buffers together, more than the {:.0} % of this machine's available {} a run may take; lower --ring (now {slots} slots each) or run fewer inputs", human(*.total), HOST_SHARE * 100.0, human(*.available))]
    Rings {
        /// Inputs.
        inputs: usize,
        /// Bytes they need.
        total: u64,
        /// Bytes available.
        available: u64,
        /// The most slots of a ring.
        slots: usize,
    },
    /// Device buffers over the device's free memory.
    #[error("the CUDA backend needs {} of device memory for these frames, bands and --in-flight, but {device} has {} free; lower --in-flight or --bands, or use a smaller input", human(*.need), human(*.free))]
    Device {
        /// Bytes needed.
        need: u64,
        /// Bytes free.
        free: u64,
        /// The device, by name.
        device: String,
    },
    /// More open files than the hard limit.
    #[error("{inputs} inputs may need {need} open files, but this process may open {hard} at most (ulimit -Hn); raise the limit or run fewer inputs")]
    Files {
        /// Inputs.
        inputs: usize,
        /// Files they may need.
        need: u64,
        /// The hard limit.
        hard: u64,
    },
    /// Raising the soft limit failed.
    #[error("{inputs} inputs may need {need} open files (ulimit -n is {soft}), and raising it failed: {source}")]
    FilesNotRaised {
        /// Inputs.
        inputs: usize,
        /// Files they may need.
        need: u64,
        /// The soft limit.
        soft: u64,
        /// The system's reason.
        source: std::io::Error,
    },
}

/// Fails, naming the figures and `--ring`, when a ring of `slots` slots of `size` frames
/// would take more than `HOST_SHARE` of `available` bytes.
pub fn check_ring(
    slots: usize,
    size: FrameSize,
    available: Option<u64>,
) -> Result<(), BudgetError> {
    let per_slot = slot_bytes(size).ok_or(BudgetError::FrameTooLarge(size))?;
    let Some(total) = ring_bytes(slots, size) else {
        return Err(BudgetError::RingPastMemory { slots, size });
    };
    let Some(available) = available else {
        return Ok(()); // no figure to compare with (not Linux): the allocation decides
    };
    let allowed = (available as f64 * HOST_SHARE) as u64;
    if total <= allowed {
        return Ok(());
    }
    let fit = allowed / per_slot;
    let advice = if fit >= 2 {
        format!("lower --ring to {fit} or less")
    } else {
        "even the smallest ring (--ring 2) does not fit: use a smaller input or --size".into()
    };
    Err(BudgetError::Ring {
        slots,
        size,
        total,
        per_slot,
        available,
        advice,
    })
}

/// Fails when the rings of a run's inputs (`rings`: each one's slots and frame size) need
/// more of the machine's `available` memory together than `HOST_SHARE` of it, though each
/// fits alone (`check_ring`, as each input's plan settles).
pub fn check_rings(
    rings: &[(usize, FrameSize)],
    available: Option<u64>,
) -> Result<(), BudgetError> {
    let total = rings
        .iter()
        .try_fold(0u64, |sum, &(slots, size)| {
            sum.checked_add(ring_bytes(slots, size)?)
        })
        .ok_or(BudgetError::RingsPastMemory)?;
    let Some(available) = available else {
        return Ok(());
    };
    let allowed = (available as f64 * HOST_SHARE) as u64;
    if total <= allowed {
        return Ok(());
    }
    Err(BudgetError::Rings {
        inputs: rings.len(),
        total,
        available,
        slots: rings.iter().map(|r| r.0).max().unwrap_or(0),
    })
}

/// Fails when a backend's device buffers (`need` bytes) exceed the device's free memory.
pub fn check_device(need: u64, free: u64, device: &str) -> Result<(), BudgetError> {
    if need <= free {
        return Ok(());
    }
    Err(BudgetError::Device {
        need,
        free,
        device: device.into(),
    })
}

/// File descriptors a run holds for itself (standard streams, the libraries', the outputs,
/// the browser view), before its inputs.
const FDS_OF_THE_RUN: u64 = 64;
/// File descriptors one input may hold at once: a network input's socket and FFmpeg's, its
/// recording's file (and the next segment's as one closes), an output of its own.
const FDS_PER_INPUT: u64 = 6;

/// Makes room for `inputs` inputs' file descriptors: raises the soft limit (`ulimit -n`) up
/// to the hard one where it is lower than they need, as servers do; an error naming both
/// where even the hard limit is too low.
pub fn make_room_for_fds(inputs: usize) -> Result<(), BudgetError> {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let need = FDS_OF_THE_RUN + FDS_PER_INPUT * inputs as u64;
    let now = getrlimit(Resource::Nofile);
    let soft = now.current.unwrap_or(u64::MAX);
    if soft >= need {
        return Ok(());
    }
    let hard = now.maximum.unwrap_or(u64::MAX);
    if hard < need {
        return Err(BudgetError::Files { inputs, need, hard });
    }
    let raised = Rlimit {
        current: Some(need.max(soft)),
        maximum: now.maximum,
    };
    setrlimit(Resource::Nofile, raised).map_err(|e| BudgetError::FilesNotRaised {
        inputs,
        need,
        soft,
        source: e.into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_open_files_limit_is_raised_for_many_inputs() {
        make_room_for_fds(200).unwrap();
        let now = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        assert!(now.current.unwrap_or(u64::MAX) >= FDS_OF_THE_RUN + 200 * FDS_PER_INPUT);
    }

    #[test]
    fn absurd_rings_and_sizes_are_refused_without_overflow() {
        let hd = FrameSize::new(1920, 1080);
        let gib = 1u64 << 30;
        assert!(check_ring(8, hd, Some(16 * gib)).is_ok());
        let e = check_ring(1000, hd, Some(8 * gib)).unwrap_err().to_string();
        assert!(e.contains("--ring 1000 at 1920x1080 needs 11.6 GiB"), "{e}");
        assert!(e.contains("lower --ring to"), "{e}");
        let e = check_ring(usize::MAX, hd, Some(16 * gib))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lower --ring"), "{e}");
        let e = check_ring(8, FrameSize::new(32768, 32768), Some(8 * gib))
            .unwrap_err()
            .to_string();
        assert!(e.contains("smallest ring"), "{e}");
        assert!(check_ring(usize::MAX, hd, None).is_err());
    }

    #[test]
    fn the_default_ring_shrinks_for_huge_frames() {
        assert_eq!(default_ring(FrameSize::new(3840, 2160)), DEFAULT_RING);
        assert_eq!(default_ring(FrameSize::new(8192, 8192)), 5);
        assert_eq!(default_ring(FrameSize::new(16000, 16000)), 2);
    }

    #[test]
    fn says_bytes_in_binary_units() {
        assert_eq!(human(1536), "1.5 KiB");
    }
}
