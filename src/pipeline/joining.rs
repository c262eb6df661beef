//! Inputs that join and leave a run while it goes (the service's cameras added and removed
//! through the API, a changed camera file or shard share): a run started with `Joins` keeps
//! that many places beside its inputs, each with its free list ready; `Joiner::join` takes
//! a place for an input (as a late one: its capture thread opens it, makes its ring and
//! captures), `Joiner::remove` ends an input's capture as its source's end would, and once
//! the sink has taken its last frame and let it go (`Sink::leave`), `Joiner::vacate` makes
//! its place vacant again: it is taken again, after `REUSE_AFTER` where a place never
//! taken is left, so that however many cameras come and go, a run takes as many at once as
//! it has places.
//!
//! Invariants: a place holds one input at a time, and is taken again only once its last
//! input's capture thread was joined, every frame it captured was taken by the sink, the
//! sink let it go, and its ring's slots were dropped (and, while a place never taken is
//! left, `REUSE_AFTER` passed: what works on its frames off the sink's thread, a detector,
//! has finished with them); a place is taken again oldest vacant first, its counts from
//! zero (its last input's figures go to the summary: `sink::leave_drained`); only the
//! places kept for joining inputs are taken again (an input of the run's start keeps its
//! own outputs and labels); the inputs already running are never touched by a join or a
//! removal (their threads, rings and sinks go on); the joiner holds a sender of the filled
//! channel only while an input may still join: it lets it go when the run stops or when
//! every input has ended (`settle`), so that the run ends as one without joiners does;
//! every capture thread it started is joined, by `vacate` or at the run's end (`finish`).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{Receiver, Sender};

use super::capture::{spawn_capture, Capturing};
use super::{Counters, Input, Options, Shared};
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
            free_rxs,
            vacant: Mutex::new(VecDeque::new()),
            filled: Mutex::new(Some(filled)),
            threads: Mutex::new(Vec::new()),
            failed: Mutex::new(Vec::new()),
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
    #[error("this run holds {0} inputs beside those it started with, and every place is taken; remove one first")]
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
    /// The places' free lists (from `first`), kept for each input that takes the place.
    free_rxs: Vec<Receiver<Slot>>,
    /// Places made vacant again, and since when, oldest first.
    vacant: Mutex<VecDeque<(usize, Instant)>>,
    /// The filled channel, while inputs may join.
    filled: Mutex<Option<Sender<Slot>>>,
    /// The capture threads of the inputs that joined, by place.
    threads: Mutex<Vec<Capture>>,
    /// Why the capture of inputs that left failed, where one did (said at the run's end).
    failed: Mutex<Vec<anyhow::Error>>,
    /// `--frames`, for each input.
    frames: Option<u64>,
}

/// A capture thread, and its input's place.
pub(super) type Capture = (usize, JoinHandle<Result<()>>);

/// How long a place whose input left stays vacant before another input takes it, where a
/// place never taken is left (what works on a frame off the sink's thread, the detector, is
/// done with its input's last frames well within it).
pub const REUSE_AFTER: Duration = Duration::from_secs(2);

impl Drop for Joiner {
    /// The slots still in the places' free lists go as a capture thread's ring does
    /// (`keep_or_drop`: left to the kernel at the process's end where CUDA registered them).
    fn drop(&mut self) {
        for rx in &self.free_rxs {
            let slots: Vec<Slot> = rx.try_iter().collect();
            crate::backend::teardown::keep_or_drop(slots);
        }
    }
}

impl std::fmt::Debug for Joiner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Joiner({} places)", self.free_txs.len() - self.first)
    }
}

impl Joiner {
    /// Takes `input` (a late one: opened by its capture thread) into the run at a place (a
    /// vacant one that was left long enough, else the next never taken), named `name`: its
    /// `InputId`.
    pub fn join(&self, name: String, input: Input) -> Result<InputId, JoinError> {
        let filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let Some(filled) = filled.as_ref() else {
            return Err(JoinError::Ending);
        };
        let shared = &self.shared;
        let at = self.place()?;
        shared.inputs[at].take(name, input.recording.clone());
        if at == shared.used.load(Ordering::SeqCst) {
            shared.used.store(at + 1, Ordering::SeqCst);
        }
        let how = Capturing {
            input: at,
            frames: self.frames,
            several: true,
        };
        let free = self.free_rxs[at - self.first].clone();
        let refill = (self.free_txs[at].clone(), input.ring);
        match spawn_capture(input.source, (free, refill), filled.clone(), how, shared) {
            Ok(thread) => self
                .threads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((at, thread)),
            Err(e) => {
                crate::warn!("input {at} could not start its capture thread: {e:#}");
                if let Ok(mut ended) = shared.inputs[at].ended.lock() {
                    *ended = Some(format!("failed: {e:#}"));
                }
            }
        }
        Ok(InputId(at as u16))
    }

    /// The place the next joining input takes (module doc).
    fn place(&self) -> Result<usize, JoinError> {
        let mut vacant = self.vacant.lock().unwrap_or_else(|e| e.into_inner());
        let aged = vacant
            .front()
            .is_some_and(|(_, since)| since.elapsed() >= REUSE_AFTER);
        let fresh = self.shared.used.load(Ordering::SeqCst);
        match vacant.pop_front() {
            Some((at, _)) if aged || fresh >= self.free_txs.len() => Ok(at),
            other => {
                if let Some(back) = other {
                    vacant.push_front(back);
                }
                match fresh < self.free_txs.len() {
                    true => Ok(fresh),
                    false => Err(JoinError::Full(self.free_txs.len() - self.first)),
                }
            }
        }
    }

    /// Asks input `id` to leave: its opening gives up, its capture ends after the frame it is
    /// reading (what it captured goes on to the outputs); false where it is not an input of
    /// the run or has ended already.
    pub fn remove(&self, id: InputId) -> bool {
        let Some(mine) = self.shared.in_use().get(id.0 as usize) else {
            return false;
        };
        if mine.has_ended() || mine.removed.swap(true, Ordering::SeqCst) {
            return false;
        }
        mine.leave().request();
        true
    }

    /// Whether input `id` has ended (its capture thread is done, or never started).
    pub fn has_ended(&self, id: InputId) -> bool {
        self.shared
            .in_use()
            .get(id.0 as usize)
            .is_none_or(Counters::has_ended)
    }

    /// Place `at`, whose input left, ended and was let go by the sink (the sink loop's
    /// `leave_drained`), becomes vacant: its capture thread joined (a failure kept for the
    /// run's end), its ring's slots dropped; it is taken again after `REUSE_AFTER`. A place
    /// of the run's start stays as it is, and a place vacant already too (false).
    pub(super) fn vacate(&self, at: usize) -> bool {
        if at < self.first || self.shared.inputs[at].vacant.load(Ordering::SeqCst) {
            return false;
        }
        let thread = {
            let mut threads = self.threads.lock().unwrap_or_else(|e| e.into_inner());
            let k = threads.iter().position(|(p, _)| *p == at);
            k.map(|k| threads.swap_remove(k).1)
        };
        if let Some(thread) = thread {
            let name = self.shared.inputs[at].name();
            let joined = match thread.join() {
                Ok(r) => r,
                Err(_) => Err(anyhow::anyhow!("the capture thread panicked")),
            };
            if let Err(e) = joined {
                let e = e.context(format!("input {at} ({name}), which left"));
                self.failed
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .push(e);
            }
        }
        self.shared.inputs[at].vacant.store(true, Ordering::SeqCst);
        // Its ring's slots, back in its free list, go now.
        for slot in self.free_rxs[at - self.first].try_iter() {
            drop(slot);
        }
        self.vacant
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back((at, Instant::now()));
        true
    }

    /// Lets the filled channel go once the run stops or every input has ended, so that the
    /// run ends (called by the sink loop as it turns).
    pub(super) fn settle(&self) {
        let mut filled = self.filled.lock().unwrap_or_else(|e| e.into_inner());
        let all_ended = self.shared.in_use().iter().all(Counters::has_ended);
        if all_ended || self.shared.stop.is_requested() {
            filled.take();
        }
    }

    /// The capture threads of the inputs that joined and are still in their places, for the
    /// run's end to join, and the failures of those that left; no input joins after.
    pub(super) fn finish(&self) -> (Vec<Capture>, Vec<anyhow::Error>) {
        self.filled.lock().unwrap_or_else(|e| e.into_inner()).take();
        let threads = std::mem::take(&mut *self.threads.lock().unwrap_or_else(|e| e.into_inner()));
        let failed = std::mem::take(&mut *self.failed.lock().unwrap_or_else(|e| e.into_inner()));
        (threads, failed)
    }
}
