//! `--inputs FILE` (or `--config`) while the run goes: the file is read again when it
//! changes (looked at every `LOOK_EVERY`, by its content, which also sees a Kubernetes
//! ConfigMap's symlink swap and an editor's rename) and at once on SIGHUP. Each change is
//! said in one line: what was added, removed or changed, and whether this process's share
//! changed. Where it did, the running wall takes the change in place (`service`: the inputs
//! gone leave, the new ones join, the others are not touched), once the run has adopted
//! its service (`Watch::adopt`); before that (the inputs still opening), the run is stopped
//! as the end of its inputs stops it and `main` starts the process again with the same
//! flags (`Ran::restart`). Where the share did not change, the run goes on untouched. A
//! file that no longer reads or parses is said once and the inputs stay as they are.
//!
//! Invariants: the watcher never stops a run whose share is unchanged, nor one whose
//! service takes the change; it stops the run at most once, and only through the process's
//! stop flag (a stop signal that comes after is still a stop, and `main` then does not
//! start again); it ends with the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use crate::plan::shard::{self, Change, Roster};
use crate::stop::Stop;

/// How often the file is read to see whether it changed.
pub const LOOK_EVERY: Duration = Duration::from_secs(1);

/// Set by SIGHUP: read the file now.
static READ_NOW: AtomicBool = AtomicBool::new(false);

fn read_now() {
    READ_NOW.store(true, Ordering::SeqCst);
}

/// The watcher of a run's inputs file (module doc).
pub struct Watch {
    /// The file watched.
    #[cfg_attr(not(feature = "ffmpeg"), allow(dead_code))]
    file: String,
    restart: Arc<AtomicBool>,
    done: Arc<AtomicBool>,
    // Without FFmpeg's libraries no run has a service to adopt.
    #[cfg_attr(not(feature = "ffmpeg"), allow(dead_code))]
    service: Adopted,
}

/// The running wall's service, once the run has one: changes go to it.
type Adopted = Arc<std::sync::OnceLock<super::Service>>;

impl Watch {
    /// Watches `roster`'s file, if it has one, with the `--input` `flags` listed before it;
    /// SIGHUP reads it again instead of stopping the run.
    pub fn start(flags: Vec<String>, roster: &Roster, stop: &Stop) -> Option<Self> {
        let path = roster.file.clone()?;
        crate::stop::on_hangup(read_now);
        let (restart, done) = (Arc::default(), Arc::<AtomicBool>::default());
        let service = Adopted::default();
        let file = path.clone();
        let mut watched = Watched {
            flags,
            path,
            roster: roster.clone(),
            text: shard::read_text(roster.file.as_deref()?).unwrap_or_default(),
            refused: None,
            service: service.clone(),
        };
        let (r, d, stop) = (Arc::clone(&restart), Arc::clone(&done), stop.clone());
        thread::Builder::new()
            .name("inputs file".into())
            .spawn(move || watched.run(&stop, &r, &d))
            .ok()?;
        Some(Self {
            file,
            restart,
            done,
            service,
        })
    }

    /// From now on, a changed share is taken by the running wall's `service` in place.
    #[cfg_attr(not(feature = "ffmpeg"), allow(dead_code))]
    pub fn adopt(&self, service: super::Service) {
        let _ = self.service.set(service);
    }

    /// The file watched (`--inputs`).
    #[cfg_attr(not(feature = "ffmpeg"), allow(dead_code))]
    pub fn file(&self) -> &str {
        &self.file
    }

    /// Whether the run was stopped to start again with a new share.
    pub fn restart(&self) -> bool {
        self.restart.load(Ordering::SeqCst)
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

/// What the watcher knows of the file.
struct Watched {
    flags: Vec<String>,
    path: String,
    roster: Roster,
    /// The file's text as last read.
    text: String,
    /// The text last refused, said once.
    refused: Option<String>,
    /// The running wall's service, once adopted.
    service: Adopted,
}

impl Watched {
    /// Looks at the file until the run ends, or until this share changed (the run is then
    /// stopped, `restart` set).
    fn run(&mut self, stop: &Stop, restart: &AtomicBool, done: &AtomicBool) {
        let mut looked = Instant::now();
        while !done.load(Ordering::SeqCst) && !stop.is_requested() {
            thread::sleep(Stop::TICK);
            let asked = READ_NOW.swap(false, Ordering::SeqCst);
            if !asked && looked.elapsed() < LOOK_EVERY {
                continue;
            }
            looked = Instant::now();
            if self.look(asked) {
                restart.store(true, Ordering::SeqCst);
                stop.request();
                return;
            }
        }
    }

    /// Reads the file; true where this process's share changed.
    fn look(&mut self, asked: bool) -> bool {
        let text = match shard::read_text(&self.path) {
            Ok(t) => t,
            Err(e) => return self.refuse(e.to_string(), "is refused"),
        };
        if text == self.text {
            if asked {
                crate::info!("SIGHUP: '{}' read again: no change", self.path);
            }
            return false;
        }
        let all = match shard::list(&self.flags, &self.path, &text) {
            Ok(all) => all,
            Err(e) => return self.refuse(e.to_string(), "is refused"),
        };
        self.text = text;
        self.refused = None;
        let new = Roster {
            all,
            ..self.roster.clone()
        };
        let change = Change::between(&self.roster.all, &new.all);
        let mine = Change::between(&self.roster.mine(), &new.mine());
        self.roster = new;
        if change.is_empty() {
            crate::info!("'{}' changed: the same inputs", self.path);
            return false;
        }
        if mine.is_empty() {
            crate::info!(
                "'{}' changed ({change}): this process's {} inputs stay as they are",
                self.path,
                self.roster.mine().len()
            );
            return false;
        }
        if let Some(service) = self.service.get() {
            crate::info!(
                "'{}' changed ({change}): this process's inputs change ({mine}) while the others run",
                self.path
            );
            super::hand_to(service, &self.roster.mine());
            return false;
        }
        crate::info!(
            "'{}' changed ({change}): this process's inputs change ({mine}); its run ends cleanly and starts again with {} inputs",
            self.path,
            self.roster.mine().len()
        );
        true
    }

    /// Says once that the file can't be taken now; the inputs stay as they are.
    fn refuse(&mut self, why: String, what: &str) -> bool {
        if self.refused.as_deref() != Some(why.as_str()) {
            crate::warn!(
                "'{}' {what} ({why}); the inputs stay as they are",
                self.path
            );
            self.refused = Some(why);
        }
        false
    }
}
