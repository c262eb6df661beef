//! What runs the filters: CUDA (banded streams, several frames in flight) or the CPU.
//!
//! A backend takes slots whose input buffer holds a frame, fills their output buffer, and
//! hands them back **in submission order**. It never keeps more than `capacity()` frames.
//! `attach` is called once per ring buffer before the first frame (the CUDA backend
//! page-locks it there).

pub mod cpu;
pub mod cuda;
mod kernels;

use anyhow::{bail, Result};

use crate::band::BandPlan;
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::ring::{HostBuffer, Slot};

pub trait Backend: Send {
    /// One line for the log, e.g. "cuda: NVIDIA H200 (sm_90), 4 bands, page-locked".
    fn describe(&self) -> String;
    /// Prepares a ring buffer for this backend (page-locks it for CUDA).
    fn attach(&mut self, buffer: &mut HostBuffer) -> Result<()>;
    /// The most frames this backend holds at once.
    fn capacity(&self) -> usize;
    fn in_flight(&self) -> usize;
    /// Starts processing a frame. Callers keep `in_flight() < capacity()`.
    fn submit(&mut self, slot: Slot) -> Result<()>;
    /// The oldest submitted frame once it is done; with `wait`, blocks until it is.
    fn complete(&mut self, wait: bool) -> Result<Option<Slot>>;
}

/// `--backend`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// CUDA when a driver and a GPU are present, else the CPU.
    Auto,
    Cuda,
    Cpu,
}

/// What a backend is built from.
#[derive(Clone, Debug)]
pub struct BackendConfig {
    pub size: FrameSize,
    pub chain: Chain,
    pub plan: BandPlan,
    /// Frames in flight at once.
    pub in_flight: usize,
    /// Leave ring buffers pageable (the original question's mistake, for comparison).
    pub pageable: bool,
}

/// Builds the backend `kind` asks for; `auto` says in one line why it fell back to the CPU.
pub fn create(kind: BackendKind, cfg: &BackendConfig) -> Result<Box<dyn Backend>> {
    match kind {
        BackendKind::Cpu => Ok(Box::new(cpu::CpuBackend::new(cfg))),
        BackendKind::Cuda => match cuda::probe() {
            Ok(()) => Ok(Box::new(cuda::CudaBackend::new(cfg)?)),
            Err(why) => bail!("--backend cuda: {why}"),
        },
        BackendKind::Auto => match cuda::probe() {
            Ok(()) => Ok(Box::new(cuda::CudaBackend::new(cfg)?)),
            Err(why) => {
                eprintln!("framepipe: no CUDA ({why}); using the CPU backend");
                Ok(Box::new(cpu::CpuBackend::new(cfg)))
            }
        },
    }
}
