//! NVRTC: CUDA C++ source to a cubin for the device (PTX where this NVRTC does not know the
//! device's architecture), with `kernels/framepipe.cuh` handed to the compiler as an
//! in-memory header (so `#include "framepipe.cuh"` works wherever a kernel file lives), and
//! two caches keyed by the whole program: one in memory, so that a kernel compiled ahead (a
//! reload's background thread) is only loaded when the backend swaps it in, and one on disk
//! (`kcache`, keyed also by framepipe's, NVRTC's and the driver's versions), so that a run
//! starts without compiling what an earlier run compiled.

use std::collections::HashMap;
use std::ffi::{c_char, CString};
use std::sync::Mutex;

use cudarc::nvrtc::{result, sys, Ptx};

use super::kcache::Entry;

/// The header every kernel is written against (built-in and user kernels alike).
pub const HEADER: (&str, &str) = ("framepipe.cuh", include_str!("../../kernels/framepipe.cuh"));

/// What to compile: the program's name (shown in the compiler's messages, with line
/// numbers of `source`), its text and NVRTC's options.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Program {
    /// Shown in the compiler's messages: `edges.cu(12): error: …`.
    pub name: String,
    /// The CUDA C++ text.
    pub source: String,
    /// NVRTC options (`--gpu-architecture=…`, `-D…`, `--include-path=…`).
    pub options: Vec<String>,
}

/// Why a program did not compile: the compiler's log, or why NVRTC could not run.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CompileError {
    /// A text handed to NVRTC holds a NUL byte.
    #[error("{0} holds a NUL byte")]
    Nul(String),
    /// NVRTC could not make a program (its error).
    #[error("NVRTC could not create a program: {0}")]
    Create(String),
    /// Compiled for a real architecture, but no cubin came out.
    #[error("NVRTC compiled {0} but gave no cubin")]
    NoCubin(String),
    /// Compiled, but no PTX came out.
    #[error("NVRTC compiled {name} but gave no PTX: {why}")]
    NoPtx {
        /// The program.
        name: String,
        /// NVRTC's error.
        why: String,
    },
    /// The compiler refused the source: its log (said as the compiler wrote it).
    #[error("{log}")]
    Log {
        /// The compiler's log.
        log: String,
    },
}

/// Compiles `program` (or takes it from the cache). The error is the compiler's log, or
/// why NVRTC could not run.
pub fn compile(program: &Program) -> Result<Ptx, CompileError> {
    static CACHE: Mutex<Option<HashMap<Program, Ptx>>> = Mutex::new(None);
    if let Some(ptx) = CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .get(program)
    {
        return Ok(ptx.clone());
    }
    let entry = match super::kcache::DiskCache::user() {
        Some(disk) => {
            let (entry, outcome) =
                disk.get_or_compile(&disk_key(program), || compile_uncached(program))?;
            crate::debug!("kernel cache, {}: {outcome:?}", program.name);
            entry
        }
        None => compile_uncached(program)?,
    };
    let ptx = match entry {
        Entry::Cubin(bin) => Ptx::from_binary(bin),
        Entry::Ptx(text) => Ptx::from_src(text),
    };
    CACHE
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get_or_insert_with(HashMap::new)
        .insert(program.clone(), ptx.clone());
    Ok(ptx)
}

fn c_string(what: &str, text: &str) -> Result<CString, CompileError> {
    CString::new(text).map_err(|_| CompileError::Nul(what.into()))
}

fn log_text(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .map(|c| *c as u8)
        .take_while(|b| *b != 0)
        .collect();
    String::from_utf8_lossy(&bytes).trim_end().to_string()
}

/// NVRTC's `--gpu-architecture` for compute capability `major.minor`: `sm_XY`, a cubin the
/// driver loads as it is, where this NVRTC supports it; else `compute_XY`, PTX that the
/// driver compiles when the module loads (on a machine without the driver's cache, most
/// of a second of start-up for framepipe's kernels).
pub fn arch_for(major: i32, minor: i32) -> String {
    let wanted = major * 10 + minor;
    if supported_archs().contains(&wanted) {
        format!("sm_{major}{minor}")
    } else {
        format!("compute_{major}{minor}")
    }
}

/// The real architectures this NVRTC compiles cubins for (empty where it can't say).
fn supported_archs() -> Vec<i32> {
    let mut n = 0;
    // SAFETY: writes one int.
    if unsafe { sys::nvrtcGetNumSupportedArchs(&mut n) }
        .result()
        .is_err()
        || n <= 0
    {
        return Vec::new();
    }
    let mut archs = vec![0; n as usize];
    // SAFETY: `archs` holds the `n` ints NVRTC writes.
    match unsafe { sys::nvrtcGetSupportedArchs(archs.as_mut_ptr()) }.result() {
        Ok(()) => archs,
        Err(_) => Vec::new(),
    }
}

/// The compiled program's cubin, where it was compiled for a real architecture (`sm_XY`).
///
/// # Safety
///
/// `prog` is a live program that compiled.
unsafe fn cubin(prog: sys::nvrtcProgram) -> Option<Vec<u8>> {
    let mut size = 0usize;
    // SAFETY: `prog` compiled (caller); writes one size.
    unsafe { sys::nvrtcGetCUBINSize(prog, &mut size) }
        .result()
        .ok()?;
    if size == 0 {
        return None;
    }
    let mut bin = vec![0u8; size];
    // SAFETY: `bin` holds the `size` bytes NVRTC writes.
    unsafe { sys::nvrtcGetCUBIN(prog, bin.as_mut_ptr().cast()) }
        .result()
        .ok()?;
    Some(bin)
}

/// Everything a compiled program depends on, as the disk cache's key: framepipe's version
/// (the header's text is in it too), NVRTC's and the driver's versions, and the program.
fn disk_key(program: &Program) -> String {
    let (mut major, mut minor, mut driver) = (0, 0, 0);
    // SAFETY: each call writes the ints it is given (failures leave them 0, which only
    // makes the key less likely to match).
    unsafe {
        let _ = sys::nvrtcVersion(&mut major, &mut minor);
        let _ = cudarc::driver::sys::cuDriverGetVersion(&mut driver);
    }
    format!(
        "framepipe {}\nnvrtc {major}.{minor}\ndriver {driver}\nname {}\noptions {}\nheader {}\nsource {}",
        env!("CARGO_PKG_VERSION"),
        program.name,
        program.options.join(" "),
        HEADER.1,
        program.source
    )
}

fn compile_uncached(program: &Program) -> Result<Entry, CompileError> {
    let real = program
        .options
        .iter()
        .any(|o| o.starts_with("--gpu-architecture=sm_"));
    let src = c_string(&program.name, &program.source)?;
    let name = c_string("the program's name", &program.name)?;
    let header_text = c_string("framepipe.cuh", HEADER.1)?;
    let header_name = c_string("framepipe.cuh", HEADER.0)?;
    let headers = [header_text.as_ptr()];
    let names = [header_name.as_ptr()];
    let mut prog = std::mem::MaybeUninit::<sys::nvrtcProgram>::uninit();
    // SAFETY: every pointer is to a NUL-terminated string alive until the program is
    // destroyed below; `headers` and `names` hold one entry each, as the count says.
    unsafe {
        sys::nvrtcCreateProgram(
            prog.as_mut_ptr(),
            src.as_ptr(),
            name.as_ptr(),
            1,
            headers.as_ptr(),
            names.as_ptr(),
        )
    }
    .result()
    .map_err(|e| CompileError::Create(format!("{e:?}")))?;
    // SAFETY: nvrtcCreateProgram succeeded, so `prog` is initialised.
    let prog = unsafe { prog.assume_init() };
    // SAFETY: `prog` is a live program until `destroy_program` at the end of this block.
    let outcome = unsafe {
        let compiled = result::compile_program(prog, &program.options);
        let out = match compiled {
            Ok(()) if real => cubin(prog)
                .map(Entry::Cubin)
                .ok_or_else(|| CompileError::NoCubin(program.name.clone())),
            Ok(()) => result::get_ptx(prog)
                .map(|ptx| Entry::Ptx(log_text(&ptx)))
                .map_err(|e| CompileError::NoPtx {
                    name: program.name.clone(),
                    why: format!("{e:?}"),
                }),
            Err(_) => Err(CompileError::Log {
                log: result::get_program_log(prog)
                    .map(|log| log_text(&log))
                    .unwrap_or_else(|e| format!("(NVRTC gave no log: {e:?})")),
            }),
        };
        let _ = result::destroy_program(prog);
        out
    };
    outcome
}
