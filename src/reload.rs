//! Live reload of the chain's user kernels: saving a `kernel:` file (or `r` in the window)
//! compiles it again and swaps it in between two frames.
//!
//! Invariants: the file is watched with `notify` (its folder, so that editors that save by
//! renaming are seen too); a reload is read, compiled and checked on this module's own
//! thread, never on the pipeline's; the pipeline only ever receives a finished chain as a
//! `Control::Chain`, which it applies with no frame in flight; a reload that fails leaves the
//! last good kernel running and says why on stderr and in the window's overlay.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError, Sender};
use notify::{EventKind, RecursiveMode, Watcher};

use crate::backend::Control;
use crate::filter::Chain;
pub use crate::stats::Reload;

/// Saves closer together than this are one reload (editors write a file in several steps).
const SETTLE: Duration = Duration::from_millis(150);

/// Why a reload was asked for.
#[derive(Clone, Debug, PartialEq)]
pub enum Why {
    /// A kernel file changed on disk.
    Saved(PathBuf),
    /// `r` in the window.
    Key,
}

/// Compiles and checks a chain before it is swapped in (the app passes
/// `backend::check::before_run`); the error is what to show the user.
pub type Prepare = Box<dyn Fn(&Chain) -> anyhow::Result<()> + Send + Sync>;

/// Why a reload did not swap the chain: a kernel file that can't be read or bound, or a
/// chain its check refused.
#[derive(Debug, thiserror::Error)]
enum ReloadError {
    /// A kernel's file.
    #[error(transparent)]
    Kernel(#[from] crate::filter::user::KernelError),
    /// The check (`Prepare`).
    #[error("{0:#}")]
    Prepare(anyhow::Error),
}

/// Watches the chain's kernel files and prepares reloads.
pub struct Reloader {
    chain: Chain,
    prepare: Prepare,
    watch: bool,
    log: Mutex<Vec<Reload>>,
    note: Mutex<Vec<String>>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Reloader({})", self.chain)
    }
}

impl Reloader {
    /// A reloader for `chain` (the command line's), which `prepare` checks before each swap;
    /// it watches the kernel files where `watch` says so (else only `r` reloads).
    pub fn new(chain: Chain, prepare: Prepare, watch: bool) -> Self {
        Self {
            chain,
            prepare,
            watch,
            log: Mutex::new(Vec::new()),
            note: Mutex::new(Vec::new()),
        }
    }

    /// The kernel files watched.
    pub fn files(&self) -> Vec<PathBuf> {
        self.chain
            .user_kernels()
            .map(|k| k.spec.path.clone())
            .collect()
    }

    /// The reloads so far.
    pub fn log(&self) -> Vec<Reload> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// What the window should show now: the last failed reload's message, until one works.
    pub fn note(&self) -> Vec<String> {
        self.note.lock().map(|n| n.clone()).unwrap_or_default()
    }

    /// Starts watching; reloads go to `controls` until the returned handle is dropped.
    pub fn start(self: &Arc<Self>, controls: Sender<Control>) -> Result<Running> {
        let (tx, rx) = unbounded::<Why>();
        let watcher = if self.watch {
            Some(watch(&self.files(), tx.clone())?)
        } else {
            None
        };
        let me = self.clone();
        let thread = std::thread::Builder::new()
            .name("reload".into())
            .spawn(move || me.serve(&rx, &controls))?;
        Ok(Running {
            requests: Some(tx),
            _watcher: watcher,
            thread: Some(thread),
        })
    }

    fn serve(&self, requests: &Receiver<Why>, controls: &Sender<Control>) {
        let started = Instant::now();
        let mut current = self.chain.clone();
        while let Ok(mut why) = requests.recv() {
            // Let the editor finish writing; a key press wins over saves for the message.
            loop {
                match requests.recv_timeout(SETTLE) {
                    Ok(Why::Key) => why = Why::Key,
                    Ok(_) => {}
                    Err(RecvTimeoutError::Timeout) => break,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            let cause = match &why {
                Why::Saved(p) => format!("{} saved", p.display()),
                Why::Key => "r pressed".to_string(),
            };
            let outcome = current
                .reloaded()
                .map_err(ReloadError::from)
                .and_then(|chain| {
                    (self.prepare)(&chain)
                        .map(|()| chain)
                        .map_err(ReloadError::Prepare)
                });
            let mut swap = None;
            let mut entry = Reload {
                at_s: started.elapsed().as_secs_f64(),
                cause: cause.clone(),
                chain: None,
                error: None,
            };
            match outcome {
                Ok(chain) if chain == current && matches!(why, Why::Saved(_)) => {
                    // Saved without a change (a touch, an editor's second write), or back
                    // to the version running after a failed one.
                    if let Ok(mut n) = self.note.lock() {
                        n.clear();
                    }
                    continue;
                }
                Ok(chain) => {
                    crate::info!("{cause}: reloaded; {chain} runs from the next frame");
                    entry.chain = Some(chain.to_string());
                    swap = Some(chain.clone());
                    current = chain;
                    if let Ok(mut n) = self.note.lock() {
                        n.clear();
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    crate::warn!("{cause}: reload failed; the last good kernel keeps running\n{e}");
                    if let Ok(mut n) = self.note.lock() {
                        *n = std::iter::once("reload failed; the last good kernel runs:".into())
                            .chain(e.lines().take(6).map(str::to_string))
                            .collect();
                    }
                    entry.error = Some(e);
                }
            }
            // Logged before it is handed over: whoever sees the swap sees it in the log.
            if let Ok(mut log) = self.log.lock() {
                log.push(entry);
            }
            if let Some(chain) = swap {
                let _ = controls.send(Control::Chain(chain));
            }
        }
    }
}

/// A started reloader: ask for a reload with `request`; dropping it stops watching.
pub struct Running {
    requests: Option<Sender<Why>>,
    _watcher: Option<notify::RecommendedWatcher>,
    thread: Option<JoinHandle<()>>,
}

impl Running {
    /// Asks for a reload (the `r` key).
    pub fn request(&self, why: Why) {
        if let Some(tx) = &self.requests {
            let _ = tx.send(why);
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        self.requests = None;
        // The watcher's own sender goes with `_watcher` after this; the thread ends when
        // both are gone, at the latest after the reload it is doing.
        let _ = self.thread.take();
    }
}

/// Watches the folders of `files` and sends `Why::Saved` when one of them changes.
pub fn watch(files: &[PathBuf], tx: Sender<Why>) -> Result<notify::RecommendedWatcher> {
    let targets: Vec<(PathBuf, std::ffi::OsString)> = files
        .iter()
        .map(|f| {
            let folder = folder_of(f)
                .canonicalize()
                .with_context(|| format!("watching {}", f.display()))?;
            let name = f
                .file_name()
                .with_context(|| format!("watching {}: no file name", f.display()))?;
            Ok((folder, name.to_os_string()))
        })
        .collect::<Result<_>>()?;
    let wanted = targets.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if matches!(event.kind, EventKind::Access(_) | EventKind::Remove(_)) {
            return;
        }
        for path in &event.paths {
            let hit = wanted.iter().find(|(folder, name)| {
                path.file_name() == Some(name.as_os_str()) && path.parent() == Some(folder)
            });
            if let Some((folder, name)) = hit {
                let _ = tx.send(Why::Saved(folder.join(name)));
            }
        }
    })
    .context("starting the file watcher")?;
    let mut folders: Vec<&PathBuf> = targets.iter().map(|(f, _)| f).collect();
    folders.dedup();
    for folder in folders {
        watcher
            .watch(folder, RecursiveMode::NonRecursive)
            .with_context(|| format!("watching {}", folder.display()))?;
    }
    Ok(watcher)
}

fn folder_of(file: &Path) -> &Path {
    file.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_saved_file_is_a_reload_request_and_its_neighbours_are_not() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let file = dir.join("k.cu");
        std::fs::write(&file, "// v1\n").unwrap();
        let (tx, rx) = unbounded();
        let _w = watch(std::slice::from_ref(&file), tx).unwrap();
        std::fs::write(dir.join("other.cu"), "x").unwrap();
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        std::fs::write(&file, "// v2\n").unwrap();
        let why = rx.recv_timeout(Duration::from_secs(5)).expect("a request");
        assert_eq!(why, Why::Saved(dir.canonicalize().unwrap().join("k.cu")));
        // An editor that saves by writing a new file and renaming it over the old one.
        while rx.try_recv().is_ok() {}
        std::fs::write(dir.join(".k.cu.swp"), "// v3\n").unwrap();
        std::fs::rename(dir.join(".k.cu.swp"), &file).unwrap();
        assert!(rx.recv_timeout(Duration::from_secs(5)).is_ok());
    }
}
