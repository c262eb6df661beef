//! Where each input's due frame waits for the detector: one slot an input, so that the
//! detector takes every waiting input's frame as one batch (DeepStream's `nvstreammux`), a
//! stalled camera holds no batch back (its slot is simply empty), and a camera faster than
//! the detector has its older waiting frame replaced by the newer (the older is skipped).
//!
//! Invariants: a slot holds one frame at most; a live input never waits here; a file's
//! frame waits for its slot to empty, and never once the detector has ended (`close`), so
//! a failed detector can't hold the pipeline; a batch is at most the slots' `most` frames
//! (the model's `batch_most`: 32 on a GPU provider, 16 on the CPU), taken round the inputs
//! from where the last batch stopped, so that no input waits for ever.

use std::sync::{Condvar, Mutex};

/// Each input's waiting job, and whether the detector ended (module doc).
pub struct Slots<J> {
    state: Mutex<State<J>>,
    changed: Condvar,
    /// The most frames one batch takes.
    most: usize,
}

struct State<J> {
    waiting: Vec<Option<J>>,
    /// Where the next batch starts taking.
    next: usize,
    /// The sink ended (no more jobs) or the detector did (no more taking).
    closed: bool,
}

impl<J> Slots<J> {
    /// Slots for `inputs` inputs, taken `most` frames at most a batch.
    pub fn new(inputs: usize, most: usize) -> Self {
        Self {
            most: most.max(1),
            state: Mutex::new(State {
                waiting: (0..inputs).map(|_| None).collect(),
                next: 0,
                closed: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// Makes room for `inputs` inputs (inputs that joined the run while it goes).
    pub fn grow(&self, inputs: usize) {
        let mut s = self.lock();
        while s.waiting.len() < inputs {
            s.waiting.push(None);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State<J>> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A live input's job: it replaces the one waiting, if any (true: one was replaced).
    pub fn replace(&self, input: usize, job: J) -> bool {
        let mut s = self.lock();
        let Some(slot) = s.waiting.get_mut(input) else {
            return false;
        };
        let replaced = slot.replace(job).is_some();
        self.changed.notify_all();
        replaced
    }

    /// A file's job: waits for its input's slot to empty first (false: the detector ended,
    /// and the job is dropped).
    pub fn wait_to_put(&self, input: usize, job: J) -> bool {
        let mut s = self.lock();
        while !s.closed && s.waiting.get(input).is_some_and(Option::is_some) {
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        if s.closed || input >= s.waiting.len() {
            return false;
        }
        s.waiting[input] = Some(job);
        self.changed.notify_all();
        true
    }

    /// The next batch: every waiting job (at most `most`), with its input, once there is
    /// one; None once closed with nothing waiting.
    pub fn take(&self) -> Option<Vec<(usize, J)>> {
        let mut s = self.lock();
        loop {
            let n = s.waiting.len();
            let start = s.next;
            let mut batch = Vec::new();
            for k in (0..n).map(|k| (start + k) % n) {
                if batch.len() == self.most {
                    break;
                }
                if let Some(job) = s.waiting[k].take() {
                    batch.push((k, job));
                }
            }
            if let Some(&(last, _)) = batch.last() {
                s.next = (last + 1) % n;
                self.changed.notify_all();
                return Some(batch);
            }
            if s.closed {
                return None;
            }
            s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// No more jobs come, or no more are taken: waiters wake, `take` ends once empty.
    pub fn close(&self) {
        self.lock().closed = true;
        self.changed.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_BATCH: usize = crate::detect::CPU_BATCH;

    #[test]
    fn every_waiting_input_goes_in_one_batch_and_a_newer_frame_replaces_an_older() {
        let s = Slots::new(3, MAX_BATCH);
        assert!(!s.replace(0, "a0"));
        assert!(s.replace(0, "a1"), "the older is replaced (skipped)");
        assert!(!s.replace(2, "c0"));
        assert_eq!(s.take(), Some(vec![(0, "a1"), (2, "c0")]));
        s.close();
        assert_eq!(s.take(), None);
        assert!(!s.wait_to_put(1, "b0"), "nothing is put once closed");
    }

    #[test]
    fn a_batch_is_bounded_and_the_next_starts_where_it_stopped() {
        let n = MAX_BATCH + 4;
        let s = Slots::new(n, MAX_BATCH);
        for k in 0..n {
            s.replace(k, k);
        }
        let first = s.take().unwrap();
        assert_eq!(first.len(), MAX_BATCH);
        assert_eq!(first[0].0, 0);
        let second = s.take().unwrap();
        assert_eq!(
            second.iter().map(|b| b.0).collect::<Vec<_>>(),
            [16, 17, 18, 19]
        );
        // After the last input, round to the first again.
        s.replace(1, 100);
        s.replace(0, 101);
        assert_eq!(s.take().unwrap()[0].0, 0);
    }

    #[test]
    fn a_file_waits_for_its_slot_and_never_once_the_detector_ended() {
        let s = std::sync::Arc::new(Slots::new(1, MAX_BATCH));
        assert!(s.wait_to_put(0, 1));
        let put = {
            let s = s.clone();
            std::thread::spawn(move || s.wait_to_put(0, 2))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(s.take(), Some(vec![(0, 1)]));
        assert!(put.join().unwrap());
        let blocked = {
            let s = s.clone();
            std::thread::spawn(move || s.wait_to_put(0, 3))
        };
        std::thread::sleep(std::time::Duration::from_millis(50));
        s.close();
        assert!(
            !blocked.join().unwrap(),
            "the detector ended: the file goes on"
        );
    }
}
