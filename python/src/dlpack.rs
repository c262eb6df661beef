//! DLPack (the protocol `np.from_dlpack`, `torch.from_dlpack` and other array libraries take
//! arrays by) for a frame's pixels, in host memory or on a CUDA device: a
//! `DLManagedTensor` over the frame's own pixels, in a capsule named "dltensor" (the
//! unversioned protocol, which every consumer reads).
//!
//! Invariants: the tensor points into the frame's pixels, which never change (a `Frame` is
//! frozen) and live as long as the tensor does: its manager holds a reference to the frame,
//! given back by the deleter the consumer calls (or by the capsule's destructor where no
//! consumer took it).

use std::ffi::{c_void, CStr};

use pyo3::prelude::*;

/// `DLDevice`: kDLCPU is 1, kDLCUDA 2.
#[repr(C)]
struct Device {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`: a type code (kDLUInt is 1, kDLFloat 2), its bits, one lane.
#[repr(C)]
struct DataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct Tensor {
    data: *mut c_void,
    device: Device,
    ndim: i32,
    dtype: DataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct Managed {
    dl_tensor: Tensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut Managed)>,
}

/// What a managed tensor keeps alive: the object that owns the pixels, and the shape the
/// tensor points to.
struct Keep {
    _owner: PyObject,
    shape: Vec<i64>,
}

const NAME: &CStr = c"dltensor";

/// Frees a managed tensor made by `capsule` and what it kept.
///
/// # Safety
/// `m` must come from `capsule`, and be deleted once.
unsafe extern "C" fn delete(m: *mut Managed) {
    // SAFETY: `m` and its manager were made by `Box::into_raw` in `capsule`, and this is
    // their one deletion (the caller's contract). Dropping the owner without the GIL is
    // allowed: pyo3 defers the decref until the GIL is next held.
    unsafe {
        let m = Box::from_raw(m);
        drop(Box::from_raw(m.manager_ctx.cast::<Keep>()));
    }
}

/// The capsule's destructor: deletes the tensor where no consumer took it (a consumer
/// renames the capsule "used_dltensor" and calls the deleter itself).
unsafe extern "C" fn destruct(capsule: *mut pyo3::ffi::PyObject) {
    // SAFETY: called by Python with the capsule being destroyed; its pointer, under its
    // name, is the managed tensor `capsule` made.
    unsafe {
        if pyo3::ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let m = pyo3::ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()).cast::<Managed>();
            if !m.is_null() {
                delete(m);
            }
        }
    }
}

/// A DLPack capsule over the bytes at `data` of shape `shape` (C order) on `device` (a
/// DLPack device type and index), of `element`s ((false, 8): uint8; (true, bits): floats of
/// `bits`), keeping `owner` alive until the tensor is deleted.
///
/// # Safety
/// The bytes at `data` (an address on `device`) must belong to `owner`, stay unchanged, and
/// live as long as it does.
pub unsafe fn capsule(
    py: Python<'_>,
    owner: PyObject,
    data: *const u8,
    (device_type, device_id): (i32, i32),
    shape: &[usize],
    element: (bool, u8),
) -> PyResult<PyObject> {
    let mut keep = Box::new(Keep {
        _owner: owner,
        shape: shape.iter().map(|&s| s as i64).collect(),
    });
    let managed = Box::new(Managed {
        dl_tensor: Tensor {
            data: data.cast_mut().cast(),
            device: Device {
                device_type,
                device_id,
            },
            ndim: shape.len() as i32,
            dtype: DataType {
                // kDLUInt is 1, kDLFloat 2.
                code: if element.0 { 2 } else { 1 },
                bits: element.1,
                lanes: 1,
            },
            shape: keep.shape.as_mut_ptr(),
            strides: std::ptr::null_mut(),
            byte_offset: 0,
        },
        manager_ctx: Box::into_raw(keep).cast(),
        deleter: Some(delete),
    });
    let m = Box::into_raw(managed);
    // SAFETY: `m` is a valid managed tensor that the capsule now owns (its destructor, or
    // the consumer through the deleter, frees it once); the name is a static C string.
    let raw = unsafe { pyo3::ffi::PyCapsule_New(m.cast(), NAME.as_ptr(), Some(destruct)) };
    if raw.is_null() {
        // SAFETY: the capsule was not made, so `m` is still ours to free, once.
        unsafe { delete(m) };
        return Err(PyErr::fetch(py));
    }
    // SAFETY: `raw` is a new, owned reference.
    Ok(unsafe { PyObject::from_owned_ptr(py, raw) })
}
