//! The CUDA driver's teardown at the end of a process, left to the kernel. Freeing a run's
//! device buffers, streams, events, modules and page-locked registrations one by one, then
//! the context, takes the driver about a tenth of a second on the H200 (each is a call into
//! the GPU's firmware); the kernel frees all of a process's GPU objects at once when it ends.
//! A program that ends after its run (the CLI, `leave_to_exit`) keeps the backend and the
//! rings' slots here instead of dropping them, and ends with `_exit` (`kept`), after its
//! outputs are finalized; an embedding program (Python) never asks, and frees as usual.
//!
//! Invariants: nothing is kept unless `leave_to_exit` was called and a CUDA context was
//! opened (a run on the CPU backend ends as it always did); what is kept is never
//! touched again (it only waits for the process's end); nothing that finalizes a file, or
//! whose drop another thread waits for (a recording's packet channel), is ever kept.

use std::any::Any;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static LEAVE: AtomicBool = AtomicBool::new(false);
static CUDA: AtomicBool = AtomicBool::new(false);
static KEPT: Mutex<Vec<Box<dyn Any + Send>>> = Mutex::new(Vec::new());

/// This process ends after its run: its CUDA objects are left to the kernel from now on.
pub fn leave_to_exit() {
    LEAVE.store(true, Ordering::SeqCst);
}

/// A CUDA context was opened in this process (`device::open_device`).
pub(super) fn note_cuda() {
    CUDA.store(true, Ordering::SeqCst);
}

/// Keeps `thing` until the process ends where its CUDA objects are left to the kernel;
/// drops it otherwise (no CUDA in this process: nothing to leave).
pub fn keep_or_drop<T: Send + 'static>(thing: T) {
    if !LEAVE.load(Ordering::SeqCst) || !CUDA.load(Ordering::SeqCst) {
        return drop(thing);
    }
    match KEPT.lock() {
        Ok(mut kept) => kept.push(Box::new(thing)),
        Err(_) => drop(thing),
    }
}

/// Whether anything was kept: the process must then end with `_exit`, so that no exit-time
/// handler (the CUDA driver's own) tears down what the kernel will.
pub fn kept() -> bool {
    KEPT.lock().is_ok_and(|kept| !kept.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_kept_unless_asked() {
        struct Dropped(std::sync::Arc<AtomicBool>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = std::sync::Arc::new(AtomicBool::new(false));
        keep_or_drop(Dropped(flag.clone()));
        assert!(flag.load(Ordering::SeqCst) && !kept());
    }
}
