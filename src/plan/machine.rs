//! Facts about the machine a run needs, gathered once, beside the plan (not while the
//! flags are checked): whether CUDA is here.
//!
//! Invariants: the machine is asked only what the plan needs to know (`RunPlan::asks_cuda`),
//! once; a fact not asked for reads as absent.

use crate::backend;
use crate::backend::device::NoCuda;

/// What the machine has (module doc).
#[derive(Clone, Debug)]
pub struct Machine {
    cuda: Result<(), NoCuda>,
}

impl Machine {
    /// Asks the machine whether CUDA works, where `cuda` says the plan needs to know
    /// (CUDA starts in tens of milliseconds: a run that needs no answer doesn't wait).
    pub fn gather(cuda: bool) -> Self {
        Self {
            cuda: match cuda {
                true => backend::device::probe(),
                false => Err(NoCuda::NotAsked),
            },
        }
    }

    /// Whether CUDA works here, or why not.
    pub fn cuda(&self) -> Result<(), &NoCuda> {
        self.cuda.as_ref().map(|_| ())
    }
}
