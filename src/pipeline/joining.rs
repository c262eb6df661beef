//! Inputs that join and leave a run while it goes (the service's cameras added and removed
//! through the API, a changed camera file or shard share): a run started with `Joins` keeps
//! that many places beside its inputs, each with its free list ready; `Joiner::join` takes
//! the next place for an input (as a late one: its capture thread opens it, makes its ring
//! and captures), `Joiner::remove` ends an input's capture as its source's end would.
//!
//! Invariants: a place is taken once (an input's `InputId` is never another's, so no frame
//! or slot of a removed input can reach one that joined after it); the inputs already running
//! are never touched by a join or a removal (their threads, rings and sinks go on); the
//! joiner holds a sender of the filled channel only while an input may still join: it lets it
//! go when the run stops or when every input has ended (`settle`), so that the run ends as
//! one without joiners does; every capture thread it started is handed to the run's end to
//! be joined (`finish`).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;

use anyhow::Result;
use crossbeam_channel::{Receiver, Sender};

use super::capture::{spawn_capture, Capturing};
use super::{Input, Options, Shared};
use crate::desc::InputId;
use crate::ring::Slot;

/// A run's places for inputs that join while it goes, and the joiner once it runs.
#[derive(Clone, Debug)]
pub struct Joins {
    /// How many inputs may join over the run's life.
    pub spare: usize,
    joiner: Arc<OnceLock<Arc<Joiner>>>,
}

impl Joins {
    /// `spare` places.
    pub fn new(spare: usize) -> Self {
        Self {
            spare,
            joiner: Arc::default(),
        }
    }

    /// The joiner, once the run started (None before, and in a run that had no places).
    pub fn joiner(&self) -> Option<Arc<Joiner>> {
        self.joiner.get().cloned()
    }

    /// Starts the run's joiner over its places' free lists and the filled channel.
    pub(super) fn start(
        &self,
        shared: &Arc<Shared>,
        (free_txs, free_rxs): (Vec<Sender<Slot>>, Vec<Receiver<Slot>>),
        filled: Sender<Slot>,
        opts: &Options,
    ) -> Arc<Joiner> {
        let first = shared.used.load(Ordering::SeqCst);
        let joiner = Arc::new(Joiner {
            shared: shared.clone(),
            first,
            free_txs,
            free_rxs: Mutex::new(free_rxs.into_iter().map(Some).collect()),
            filled: Mutex::new(Some(filled)),
            threads: Mutex::new(Vec::new()),
            frames: opts.frames,
        });
        let _ = self.joiner.set(joiner.clone());
        joiner
    }
}

/// The free lists of `spare` places (a joining input's ring is made when it opens).
pub(super) fn vacant(spare: usize) -> Vec<(Sender<Slot>, Receiver<Slot>)> {
    (0..spare).map(|_| crossbeam_channel::unbounded()).collect()
}

/// Why an input can't join.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// Every place was taken.
    #[error("this run has taken the {0} inputs it makes room for over its life; start it again to add more")]
    Full(usize),
    /// The run is ending.
    #[error("the run is ending")]
    Ending,
}

/// Takes inputs into a running pipeline and lets them go (module doc).
pub struct Joiner {
    shared: Arc<Shared>,
    /// The first place for a joining input.
    first: usize,
    /// Every input's free list, by `InputId` (the places' included).
    free_txs: Vec<Sender<Slot>>,
    /// The places' free lists, each taken by the input that takes the place.
    free_rxs: Mutex<Vec<Option<Receiver<Slot>>>>,
    /// The filled channel, while inputs may join.
    filled: Mutex<Option<Sender<Slot>>>,
    /// The capture threads of the inputs that joined.
    threads: Mutex<Vec<JoinHandle<Result<()>>>>,
    /// `--frames`, for each input.
    frames: Option<u64>,
}

impl std::fmt::Debug for Joiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Joiner({} places)", self.free_txs.len() - self.first)
    }
}

impl Joiner {
    /// Takes `input` (a late one: opened by its capture thread) into the run at the next
    /// place, named `name`: its `InputId`.
    pub fn join(&self, name: String, input: Input) -> Result<InputId, JoinError> {
        let filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let Some(filled) = filled.as_ref() else {
            return Err(JoinError::Ending);
        };
        let shared = &self.shared;
        let at = shared.used.load(Ordering::SeqCst);
        let mut rxs = self.free_rxs.lock().unwrap_or_else(|e| e.into_inner());
        let Some(free) = rxs.get_mut(at - self.first).and_then(Option::take) else {
            return Err(JoinError::Full(self.free_txs.len() - self.first));
        };
        let mine = &shared.inputs[at];
        let _ = mine.name.set(name);
        if let Some(r) = input.recording.clone() {
            let _ = mine.recording.set(r);
        }
        shared.used.store(at + 1, Ordering::SeqCst);
        let how = Capturing {
            input: at,
            frames: self.frames,
            several: true,
        };
        let refill = (self.free_txs[at].clone(), input.ring);
        match spawn_capture(input.source, (free, refill), filled.clone(), how, shared) {
            Ok(thread) => self
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(thread),
            Err(e) => {
                crate::warn!("input {at} could not start its capture thread: {e:#}");
                if let Ok(mut ended) = mine.ended.lock() {
                    *ended = Some(format!("failed: {e:#}"));
                }
            }
        }
        Ok(InputId(at as u16))
    }

    /// Asks input `id` to leave: its opening gives up, its capture ends after the frame it is
    /// reading (what it captured goes on to the outputs); false where it is not an input of
    /// the run or has ended already.
    pub fn remove(&self, id: InputId) -> bool {
        let Some(mine) = self.shared.in_use().get(id.0 as usize) else {
            return false;
        };
        let ended = mine.ended.lock().map(|e| e.is_some()).unwrap_or(true);
        if ended || mine.removed.swap(true, Ordering::SeqCst) {
            return false;
        }
        mine.leave.request();
        true
    }

    /// Whether input `id` has ended (its capture thread is done, or never started).
    pub fn has_ended(&self, id: InputId) -> bool {
        self.shared
            .in_use()
            .get(id.0 as usize)
            .is_none_or(|c| c.ended.lock().map(|e| e.is_some()).unwrap_or(true))
    }

    /// Lets the filled channel go once the run stops or every input has ended, so that the
    /// run ends (called by the sink loop as it turns).
    pub(super) fn settle(&self) {
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let all_ended = self
            .shared
            .in_use()
            .iter()
            .all(|c| c.ended.lock().map(|e| e.is_some()).unwrap_or(true));
        if all_ended || self.shared.stop.is_requested() {
            filled.take();
        }
    }

    /// The capture threads of the inputs that joined, for the run's end to join; no input
    /// joins after.
    pub(super) fn finish(&self) -> Vec<JoinHandle<Result<()>>> {
        self.filled.lock().unwrap_or_else(|e| e.into_inner()).take();
        std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
