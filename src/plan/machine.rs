//! Facts about the machine a run needs, gathered once, beside the plan (not while the
//! flags are checked): its cores and whether a display is named (`host`, read once per
//! process), and whether CUDA is here. The available memory is checked where a ring's
//! size is known (`budget`, from `host::memory_available`).
//!
//! Invariants: CUDA is asked only where the plan needs to know (`RunPlan::asks_cuda`),
//! once; a fact not asked for reads as absent.

use crate::backend;
use crate::backend::device::NoCuda;

/// What the machine has (module doc).
#[derive(Clone, Debug)]
pub struct Machine {
    cores: usize,
    display: bool,
    cuda: Result<(), NoCuda>,
}

impl Machine {
    /// Gathers the machine's facts, asking whether CUDA works where `cuda` says the plan
    /// needs to know (CUDA starts in tens of milliseconds: a run that needs no answer
    /// doesn't wait).
    pub fn gather(cuda: bool) -> Self {
        Self {
            cores: crate::host::cores(),
            display: crate::host::display_named(false),
            cuda: match cuda {
                true => backend::device::probe(),
                false => Err(NoCuda::NotAsked),
            },
        }
    }

    /// A machine of `cores` cores, no display, and CUDA working: what a plan's tests fit
    /// a plan to without asking the machine they run on.
    #[cfg(test)]
    pub fn with_cuda(cores: usize) -> Self {
        Self {
            cores,
            display: false,
            cuda: Ok(()),
        }
    }

    /// Whether CUDA works here, or why not.
    pub fn cuda(&self) -> Result<(), &NoCuda> {
        self.cuda.as_ref().map(|_| ())
    }

    /// The cores this process may run on.
    pub fn cores(&self) -> usize {
        self.cores
    }

    /// Whether a display is named (`DISPLAY`).
    pub fn display(&self) -> bool {
        self.display
    }
}
