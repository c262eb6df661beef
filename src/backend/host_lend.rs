//! Processed frames lent in host memory by the CPU backend to the run's one consumer (an
//! embedding program's hand-over, where nothing else reads them: `BackendConfig::lend`), as
//! the CUDA backend lends them on the device (`lend`): each frame is made straight into a
//! buffer of a pool of its own, and that buffer goes with the frame
//! (`desc::Memory::HostLent`, read through `Lease::host_bytes`) until the program drops
//! it, then back to the pool. The copy of every frame out of its slot into the program's
//! array is gone; the slot's own output buffer is left as it was.
//!
//! Invariants: a buffer is written only while no lease holds it (taken from the pool, or
//! new), and never while one does; a program that keeps frames gets new buffers, never a
//! wait; the pool keeps at most `KEEP` buffers; a buffer comes back from whichever thread
//! drops its last lease.

use std::sync::{Arc, Mutex};

use crate::desc::{Lease, Memory};

/// Buffers the pool keeps for reuse (more come back only where the program held frames).
const KEEP: usize = 8;

/// The pool of buffers processed frames are made into (module doc).
#[derive(Clone, Default)]
pub struct HostLender {
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

/// A buffer lent with a frame: given back to the pool when the last lease is dropped.
struct HostLease {
    buf: Vec<u8>,
    pool: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl std::fmt::Debug for HostLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "a frame of {} bytes lent in host memory", self.buf.len())
    }
}

impl Lease for HostLease {
    fn host_bytes(&self) -> Option<&[u8]> {
        Some(&self.buf)
    }
}

impl Drop for HostLease {
    fn drop(&mut self) {
        if let Ok(mut pool) = self.pool.lock() {
            if pool.len() < KEEP {
                pool.push(std::mem::take(&mut self.buf));
            }
        }
    }
}

impl HostLender {
    /// A buffer of `len` bytes that no lease holds: one given back, else a new one. Its
    /// bytes are whatever they were: the frame made into it writes every one.
    pub fn take(&self, len: usize) -> Vec<u8> {
        let reused = self.pool.lock().ok().and_then(|mut p| {
            let at = p.iter().position(|b| b.len() == len)?;
            Some(p.swap_remove(at))
        });
        reused.unwrap_or_else(|| vec![0; len])
    }

    /// `buf` (a frame made into it) lent with its frame until the last lease is dropped.
    pub fn lend(&self, buf: Vec<u8>) -> Memory {
        let lease = HostLease {
            buf,
            pool: self.pool.clone(),
        };
        Memory::HostLent {
            ptr: lease.buf.as_ptr() as u64,
            lease: Arc::new(lease),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_comes_back_only_when_its_last_lease_goes() {
        let lender = HostLender::default();
        let mut buf = lender.take(16);
        buf[3] = 7;
        let memory = lender.lend(buf);
        let ptr = match &memory {
            Memory::HostLent { ptr, lease } => {
                assert_eq!(lease.host_bytes().map(|b| (b.len(), b[3])), Some((16, 7)));
                *ptr
            }
            _ => panic!("lent in host memory"),
        };
        let copy = memory.clone();
        drop(memory);
        // Still held by the copy: a new buffer is made.
        let new = lender.take(16);
        assert_ne!(new.as_ptr() as u64, ptr);
        drop(copy);
        let back = lender.take(16);
        assert_eq!(back.as_ptr() as u64, ptr);
        // A buffer of another length is not handed out for this one.
        let _ = lender.lend(lender.take(8));
        assert_eq!(lender.take(16).len(), 16);
    }
}
