//! A frame's (or a batch's) pixels where they are: bytes in host memory (its own, or a
//! buffer the CPU backend lends: `framepipe::backend::host_lend`, which NumPy reads as it
//! lies), or a buffer on the GPU that the CUDA backend lends (`framepipe::backend::lend`),
//! read back to the host once, where NumPy or `tobytes` asks for them.
//!
//! Invariants: a lent buffer's lease is held as long as the pixels are (and a DLPack
//! tensor over them keeps their owner alive); every stream a consumer names through
//! `__dlpack__(stream=...)` is told to the lease, so that the buffer is written again only
//! after the work queued there by the time the pixels are dropped; the pixels never change.

use std::sync::OnceLock;

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;

use framepipe::desc::Memory;

use crate::dlpack;

/// DLPack's device types: kDLCPU, kDLCUDA.
const CPU: i32 = 1;
const CUDA: i32 = 2;

/// The pixels of a frame or a batch (module doc).
pub struct Pixels {
    bytes: Vec<u8>,
    memory: Memory,
    /// Their length in bytes (on the device: the bytes lent there).
    len: usize,
    host: OnceLock<Vec<u8>>,
}

impl Pixels {
    /// `bytes` in host memory, or `len` bytes in `memory` (lent in host memory, or on the
    /// device).
    pub fn new(bytes: Vec<u8>, memory: Memory, len: usize) -> Self {
        let len = match &memory {
            Memory::Host => bytes.len(),
            Memory::HostLent { lease, .. } => lease.host_bytes().map_or(0, |b| b.len().min(len)),
            Memory::Device { .. } => len,
        };
        Self {
            bytes,
            memory,
            len,
            host: OnceLock::new(),
        }
    }

    /// The device and address, for pixels on the GPU.
    pub fn on_device(&self) -> Option<(usize, u64)> {
        match self.memory {
            Memory::Device { device, ptr, .. } => Some((device, ptr)),
            Memory::Host | Memory::HostLent { .. } => None,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// `len` bytes from `offset` on, sharing the device buffer's lease (a batch's frames
    /// are views of its stacked buffer); None for pixels in host memory.
    pub fn view(&self, offset: usize, len: usize) -> Option<Self> {
        let Memory::Device { device, ptr, lease } = &self.memory else {
            return None;
        };
        (offset + len <= self.len).then(|| {
            let memory = Memory::Device {
                device: *device,
                ptr: ptr + offset as u64,
                lease: lease.clone(),
            };
            Self::new(Vec::new(), memory, len)
        })
    }

    /// The bytes in host memory: read back from the device the first time.
    pub fn host(&self, py: Python<'_>) -> PyResult<&[u8]> {
        if let Memory::HostLent { lease, .. } = &self.memory {
            let lent = lease.host_bytes().ok_or_else(|| {
                PyRuntimeError::new_err("a frame lent in host memory without its bytes")
            })?;
            return Ok(&lent[..self.len]);
        }
        let Some((device, ptr)) = self.on_device() else {
            return Ok(&self.bytes);
        };
        if let Some(b) = self.host.get() {
            return Ok(b);
        }
        let mut bytes = vec![0u8; self.len];
        py.allow_threads(|| framepipe::backend::lend::read_back(device, ptr, &mut bytes))
            .map_err(|e| PyRuntimeError::new_err(format!("{e:#}")))?;
        Ok(self.host.get_or_init(|| bytes))
    }

    /// DLPack's `__dlpack_device__`: (kDLCPU, 0) or (kDLCUDA, device).
    pub fn dlpack_device(&self) -> (i32, i32) {
        match self.on_device() {
            Some((device, _)) => (CUDA, device as i32),
            None => (CPU, 0),
        }
    }

    /// A DLPack capsule over the pixels, `shape` of `element`s, keeping `owner` (which
    /// holds these pixels) alive; `stream` is the consumer's, as `__dlpack__` takes it.
    pub fn dlpack(
        &self,
        py: Python<'_>,
        owner: PyObject,
        shape: &[usize],
        element: (bool, u8),
        (stream, copy): (Option<i64>, Option<bool>),
    ) -> PyResult<PyObject> {
        if copy == Some(true) {
            return Err(PyValueError::new_err(
                "copy=True: a frame is lent, not copied",
            ));
        }
        let (data, device) = match &self.memory {
            Memory::Host => (self.bytes.as_ptr(), (CPU, 0)),
            Memory::HostLent { .. } => (self.host(py)?.as_ptr(), (CPU, 0)),
            Memory::Device { device, ptr, lease } => {
                // DLPack's streams for CUDA: None and 1 the legacy default stream, 2 the
                // per-thread one, -1 none to order on, any other a stream's handle (0 is
                // not allowed: taken as the legacy one).
                match stream {
                    Some(-1) => {}
                    Some(s) if s < -1 => {
                        return Err(PyValueError::new_err(format!(
                            "stream={s}: not a CUDA stream"
                        )))
                    }
                    s => lease
                        .read_on(s.filter(|&s| s > 0).unwrap_or(1) as u64)
                        .map_err(|e| PyRuntimeError::new_err(format!("{e:#}")))?,
                }
                (*ptr as *const u8, (CUDA, *device as i32))
            }
        };
        // SAFETY: the pixels are `owner`'s, never change, and live as long as it does (its
        // bytes, or the device buffer its lease holds); the capsule keeps `owner` alive.
        unsafe { dlpack::capsule(py, owner, data, device, shape, element) }
    }
}
