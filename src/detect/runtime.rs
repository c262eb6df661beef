//! Where ONNX Runtime's library is, and that it loads: `ORT_DYLIB_PATH` where set, else one
//! an embedding program found (`look_also`: the Python package's, PyPI's `onnxruntime`
//! installed beside it), else the copy `scripts/setup.sh` installs for the project
//! (`target/ort/`, found from the executable's folder, the working folder or a folder the
//! embedding program named, up), else the system's `libonnxruntime.so`.
//! The library is loaded here first (`libloading`), so that one that is missing or broken
//! is a sentence, not a panic inside `ort`.
//!
//! Invariant: `ort` is initialised at most once a process, with the library found here.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// Why ONNX Runtime can't be used here.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No library found.
    #[error("no ONNX Runtime library here (set ORT_DYLIB_PATH to libonnxruntime.so, or run scripts/setup.sh, which installs PyPI's onnxruntime for the project)")]
    Missing,
    /// A library that does not load, or is not ONNX Runtime.
    #[error("'{}' is not a loadable ONNX Runtime library ({why})", path.display())]
    Broken {
        /// The library.
        path: PathBuf,
        /// The loader's words.
        why: String,
    },
}

/// The project's copy, under `target/ort/` of the checkout holding `from` or a folder above.
fn project_copy(from: &Path) -> Option<PathBuf> {
    from.ancestors()
        .find_map(|dir| library_in(&dir.join("target/ort")))
}

/// The newest `libonnxruntime.so*` in `folder` (PyPI's wheels put theirs in
/// `onnxruntime/capi/`, `scripts/setup.sh` in `target/ort/`).
pub fn library_in(folder: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libonnxruntime.so"))
        })
        .collect();
    found.sort();
    found.pop()
}

/// What an embedding program found: a library, and folders to look from.
static ALSO: std::sync::Mutex<(Option<PathBuf>, Vec<PathBuf>)> =
    std::sync::Mutex::new((None, Vec::new()));

/// An embedding program's finds (module doc): `library`, where it found one (taken after
/// `ORT_DYLIB_PATH`), and `folder`, to look for the project's copy from.
pub fn look_also(library: Option<PathBuf>, folder: PathBuf) {
    let mut also = ALSO.lock().unwrap_or_else(|p| p.into_inner());
    if library.is_some() {
        also.0 = library;
    }
    also.1.push(folder);
}

/// The library to load (module doc), or why there is none.
pub fn find() -> Result<PathBuf, RuntimeError> {
    if let Some(p) = std::env::var_os("ORT_DYLIB_PATH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let (library, folders) = ALSO.lock().unwrap_or_else(|p| p.into_inner()).clone();
    if let Some(p) = library {
        return Ok(p);
    }
    let exe = std::env::current_exe().ok();
    let places = exe
        .iter()
        .filter_map(|e| e.parent().map(Path::to_path_buf))
        .chain(std::env::current_dir().ok())
        .chain(folders);
    for place in places {
        if let Some(p) = project_copy(&place) {
            return Ok(p);
        }
    }
    Ok(PathBuf::from("libonnxruntime.so"))
}

/// Loads the library once and hands it to `ort`; the same answer every time after.
pub fn init() -> Result<PathBuf, RuntimeError> {
    static DONE: OnceLock<Result<PathBuf, RuntimeError>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = find()?;
        // SAFETY: loading a shared library runs its initialisers; ONNX Runtime's are what
        // `ort` would run itself. The handle is dropped again (ort loads it for good).
        let loaded = unsafe { libloading::Library::new(&path) };
        match loaded {
            Ok(lib) => {
                // SAFETY: the symbol is only looked up, not called.
                let api = unsafe { lib.get::<unsafe extern "C" fn()>(b"OrtGetApiBase\0") };
                if let Err(e) = api {
                    return Err(RuntimeError::Broken {
                        path,
                        why: e.to_string(),
                    });
                }
            }
            Err(_) if path == Path::new("libonnxruntime.so") => return Err(RuntimeError::Missing),
            Err(e) => {
                return Err(RuntimeError::Broken {
                    path,
                    why: e.to_string(),
                })
            }
        }
        let _ = ort::init_from(path.to_string_lossy()).commit();
        Ok(path)
    })
    .clone()
}

/// ONNX Runtime's build and where it was found, or why it can't be used (`framepipe
/// doctor`).
pub fn describe() -> Result<String, RuntimeError> {
    let path = init()?;
    let commit = ort::info()
        .split(", ")
        .find_map(|kv| kv.strip_prefix("git-commit-id="))
        .unwrap_or("?");
    Ok(format!("{} (build {commit})", path.display()))
}

/// The execution providers this ONNX Runtime offers besides the CPU's (`onnxruntime-gpu`'s
/// CUDA and TensorRT), in the order a session prefers them; empty where the library has
/// none or can't be loaded.
pub fn accelerators() -> Vec<&'static str> {
    use ort::execution_providers::{
        CUDAExecutionProvider, ExecutionProvider, TensorRTExecutionProvider,
    };
    if init().is_err() {
        return Vec::new();
    }
    let mut found = Vec::new();
    if TensorRTExecutionProvider::default()
        .is_available()
        .unwrap_or(false)
    {
        found.push("TensorRT");
    }
    if CUDAExecutionProvider::default()
        .is_available()
        .unwrap_or(false)
    {
        found.push("CUDA");
    }
    found
}
