//! The capture threads: one per input, each filling free slots of its own ring with its
//! source's frames and sending them on the filled channel; a late input's ring made once it
//! opens (`arrive`); a live source's patience for a burst before it drops (`Patience`), and
//! the end of a source drained, its frames passed on (`drain`, `pass_on`).
//!
//! Invariants: a capture thread never waits on another input; a live source waits for a
//! slot one frame's time (`LIVE_GRACE` at most), longer while its patience lasts, then
//! discards the frame and counts it dropped; any other source waits for its own ring only.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError};

use super::{Arrival, Counters, Input, Options, Shared, POLL};
use crate::desc::InputId;
use crate::frame::FrameSize;
use crate::pixel::Formats;
use crate::ring::{self, Slot};
use crate::source::{Read, Source};
use crate::stats::{ms, slow, ThreadCpu};
use crate::stop::Stop;

/// Starts every input's capture thread, each on its own free list (`free`: the receivers,
/// and the senders a late input refills).
pub(super) fn spawn_captures(
    inputs: Vec<Input>,
    (free_rxs, free_txs): (Vec<Receiver<Slot>>, &[Sender<Slot>]),
    filled: Sender<Slot>,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<Vec<thread::JoinHandle<Result<()>>>> {
    let several = inputs.len() > 1;
    let mut captures = Vec::with_capacity(inputs.len());
    for (i, (input, free_rx)) in inputs.into_iter().zip(free_rxs).enumerate() {
        let how = Capturing {
            input: i,
            frames: opts.frames,
            several,
        };
        let refill = (free_txs[i].clone(), input.ring);
        captures.push(spawn_capture(
            input.source,
            (free_rx, refill),
            filled.clone(),
            how,
            shared,
        )?);
    }
    Ok(captures)
}

/// Input `input`'s ring: slots for `size` frames in `formats`, tagged with the input (the
/// backend attaches each as it first passes `submit`).
pub(super) fn ring_of(
    input: InputId,
    ring: usize,
    (size, out): (FrameSize, FrameSize),
    formats: Formats,
) -> Vec<Slot> {
    let mut slots = ring::allocate_resized(ring, size, out, formats);
    for slot in &mut slots {
        slot.desc.input = input;
    }
    slots
}

/// What a capture thread needs to know of its run.
#[derive(Clone, Copy)]
pub(super) struct Capturing {
    /// Its input's index (`InputId`).
    pub(super) input: usize,
    /// Stop after this many frames.
    pub(super) frames: Option<u64>,
    /// Other inputs run beside it: reaching `frames` ends this input, not the run.
    pub(super) several: bool,
}

/// Starts an input's capture thread: free slots in, filled slots out, until the input ends,
/// `frames` are read or a stop; why it ended is kept in the input's counters.
pub(super) fn spawn_capture(
    source: Arrival,
    (free, refill): (Receiver<Slot>, (Sender<Slot>, usize)),
    filled: Sender<Slot>,
    how: Capturing,
    shared: &Arc<Shared>,
) -> Result<thread::JoinHandle<Result<()>>> {
    let shared = shared.clone();
    Ok(thread::Builder::new()
        .name(format!("capture {}", how.input))
        .spawn(move || {
            let cpu = ThreadCpu::now();
            let r = match arrive(source, refill, how.input, &shared) {
                Ok(Some(mut source)) => capture_loop(source.as_mut(), &free, filled, how, &shared),
                Ok(None) => Ok(()),
                Err(e) => Err(e),
            };
            let why = match &r {
                Ok(()) if shared.inputs[how.input].removed.load(Ordering::SeqCst) => {
                    "removed".to_string()
                }
                Ok(()) if shared.stop.is_requested() => "stopped".to_string(),
                Ok(()) => "ended".to_string(),
                Err(e) => format!("failed: {e:#}"),
            };
            if let Ok(mut ended) = shared.inputs[how.input].ended.lock() {
                *ended = Some(why);
            }
            shared.note_cpu(format!("capture {}", how.input), cpu);
            // The ring's slots (page-locked) go with the process where it leaves them.
            crate::backend::teardown::keep_or_drop(free);
            r
        })?)
}

/// The input's source once it is open (None: a stop came first); a late input's ring is
/// made here, its slots tagged with `input` and put in its free list (`refill`).
fn arrive(
    source: Arrival,
    (refill, ring): (Sender<Slot>, usize),
    input: usize,
    shared: &Shared,
) -> Result<Option<Box<dyn Source>>> {
    match source {
        Arrival::Open { source, .. } => Ok(Some(source)),
        Arrival::Late { name, open } => {
            // Its opening gives up on a stop of the run or on its leaving.
            let Some((source, formats)) = open(&shared.inputs[input].leave())? else {
                return Ok(None);
            };
            // Its reconnects count from now on, as an input open at the start's do.
            if let (Some(health), Ok(mut h)) = (source.health(), shared.inputs[input].health.lock())
            {
                *h = Some(health);
            }
            shared.inputs[input].open.store(true, Ordering::SeqCst);
            crate::info!(
                "{name} opened late and joins the run: {}",
                source.describe()
            );
            let (t, size) = (Instant::now(), source.size());
            let out = (shared.resize)(size);
            for slot in ring_of(InputId(input as u16), ring, (size, out), formats) {
                refill
                    .send(slot)
                    .expect("its free list has room for its ring");
            }
            slow(format_args!("input {input}: making its ring"), t.elapsed());
            Ok(Some(source))
        }
    }
}

/// The longest a live source waits for a free slot before it drops a frame, once its
/// patience is spent.
const LIVE_GRACE: Duration = Duration::from_millis(50);

/// A live source's patience: how long it may still wait for a free slot, in all, past a
/// frame's time (`Source::burst_budget`). A burst (the frames a camera buffered while it
/// was probed, decoded at once as a large wall joins) spends it and passes whole; it comes
/// back at a tenth of real time, so a pipeline that stays behind soon drops frames after a
/// frame's wait, and what comes out stays current.
struct Patience {
    budget: Duration,
    left: Duration,
    since: Instant,
}

impl Patience {
    fn new(budget: Duration) -> Self {
        Self {
            budget,
            left: budget,
            since: Instant::now(),
        }
    }

    /// How long to wait for the next free slot: `frame` (a frame's time), or longer while
    /// patience is left.
    fn wait(&mut self, frame: Duration) -> Duration {
        let now = Instant::now();
        self.left = (self.left + (now - self.since) / 10).min(self.budget);
        self.since = now;
        frame.max(self.left)
    }

    /// `waited` was spent waiting for a slot, of which a frame's time (`frame`) is free.
    fn spend(&mut self, waited: Duration, frame: Duration) {
        self.left = self.left.saturating_sub(waited.saturating_sub(frame));
    }
}

fn capture_loop(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: Sender<Slot>,
    how: Capturing,
    shared: &Shared,
) -> Result<()> {
    let captured = capture_frames(source, free, &filled, &how, shared)?;
    if shared.stop.is_requested() && source.is_live() && source.begin_drain() {
        drain(source, free, &filled, (&how, captured), shared)?;
    }
    Ok(())
}

/// The most frames read out of a live source after a stop (`drain`): a decoder's delay and
/// a demuxer's last packet are a few frames.
const DRAIN_MOST: u64 = 64;

/// After a stop: the frames still inside a live source (`Source::begin_drain`) are read and
/// sent on as any other, so that a camera's last frame and packet are not lost; each waits
/// at most `POLL` for a slot, and at most `DRAIN_MOST` are read.
fn drain(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: &Sender<Slot>,
    (how, mut captured): (&Capturing, u64),
    shared: &Shared,
) -> Result<()> {
    let mine = &shared.inputs[how.input];
    for _ in 0..DRAIN_MOST {
        if how.frames.is_some_and(|n| captured >= n) {
            return Ok(());
        }
        let Ok(mut slot) = free.recv_timeout(POLL) else {
            return Ok(());
        };
        if read_frame(source, &mut slot, (how.input, captured), true, mine)? == Read::End {
            return Ok(());
        }
        if !pass_on(slot, source, &mut captured, (mine, shared), filled) {
            return Ok(());
        }
    }
    Ok(())
}

/// Numbers a frame just read and sends it to the backend, counted; false where the backend
/// stopped (its error is reported by it).
fn pass_on(
    mut slot: Slot,
    source: &mut dyn Source,
    captured: &mut u64,
    (mine, shared): (&Counters, &Shared),
    filled: &Sender<Slot>,
) -> bool {
    slot.desc.index = *captured;
    slot.desc.pts = source.pts();
    *captured += 1;
    mine.captured.store(*captured, Ordering::SeqCst);
    // The run's count, kept here rather than summed over every input for each frame the
    // sink takes (`Progress`).
    shared.progress.0[0].fetch_add(1, Ordering::Relaxed);
    filled.send(slot).is_ok()
}

/// Reads `source` into free slots and sends them on until it ends, `how.frames` are read,
/// or a stop; the frames read.
fn capture_frames(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: &Sender<Slot>,
    how: &Capturing,
    shared: &Shared,
) -> Result<u64> {
    let live = source.is_live();
    shared.inputs[how.input].live.store(live, Ordering::Relaxed);
    // How long a live source waits for a free slot before it drops a frame: one frame's
    // time, so that a frame never waits longer than the next one would come, and longer
    // while its patience lasts (a source that buffers what arrives meanwhile): a burst (the
    // frames an input decoded while it was probed, a stall of the network) then goes
    // through at the pipeline's pace instead of being dropped.
    let grace = Duration::from_secs_f64(1.0 / source.fps().filter(|f| *f >= 1.0).unwrap_or(30.0))
        .min(LIVE_GRACE);
    let mut patience = Patience::new(source.burst_budget());
    let mine = &shared.inputs[how.input];
    let leave = mine.leave();
    let mut captured = 0;
    while !shared.stop.is_requested() && !mine.removed.load(Ordering::Relaxed) {
        if how.frames.is_some_and(|n| captured >= n) {
            if !how.several {
                shared.stop.request(); // --frames reached: a stop, not the end of the input
            }
            return Ok(captured);
        }
        // Paused: one frame goes through when a step was asked for.
        if shared.paused.load(Ordering::SeqCst) && !shared.step.swap(false, Ordering::SeqCst) {
            // Paused: a live source keeps being drained so that it resumes with fresh frames.
            if live && source.skip()? == Read::End {
                return Ok(captured);
            }
            if !live {
                thread::sleep(Duration::from_millis(10));
            }
            continue;
        }
        let mut slot = match free.try_recv() {
            Ok(slot) => slot,
            Err(TryRecvError::Disconnected) => return Ok(captured),
            Err(TryRecvError::Empty) if live => {
                match wait_live(free, grace, &mut patience, &shared.stop) {
                    Ok(slot) => slot,
                    Err(RecvTimeoutError::Disconnected) => return Ok(captured),
                    Err(RecvTimeoutError::Timeout) => {
                        // Ring full for a frame's time, patience spent: the pipeline is behind,
                        // and a live source drops this frame so that what is shown stays fresh.
                        if source.skip()? == Read::End {
                            return Ok(captured);
                        }
                        mine.dropped.fetch_add(1, Ordering::SeqCst);
                        continue;
                    }
                }
            }
            Err(TryRecvError::Empty) => match free.recv_timeout(POLL) {
                Ok(slot) => slot,
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => return Ok(captured),
            },
        };
        // A paced source sleeps until its frame is due, or its leaving or a stop.
        if let Some(due) = source.due() {
            if Stop::watch_all(&[&shared.stop, &leave]).sleep_until(due) {
                return Ok(captured);
            }
        }
        if read_frame(source, &mut slot, (how.input, captured), live, mine)? == Read::End {
            return Ok(captured);
        }
        if !pass_on(slot, source, &mut captured, (mine, shared), filled) {
            return Ok(captured);
        }
    }
    Ok(captured)
}

/// Reads `source`'s next frame into `slot` (frame `at.1` of input `at.0`), timing it: into
/// the slot's buffer, or described where it was left (a frame lent in device or page-locked
/// memory, whose lease is dropped once the backend has copied it).
fn read_frame(
    source: &mut dyn Source,
    slot: &mut Slot,
    at: (usize, u64),
    live: bool,
    mine: &Counters,
) -> Result<Read> {
    let t = Instant::now();
    slot.stamps.read_start = t;
    if source.read(&mut slot.input)? == Read::End {
        return Ok(Read::End);
    }
    slot.stamps.captured = Instant::now();
    let took = slot.stamps.captured - t;
    slot.stamps.capture_ms = ms(took);
    if !live {
        // (A live source's read waits for the network: its pace, not a stall.)
        slow(format_args!("input {}: reading frame {}", at.0, at.1), took);
    }
    mine.read_us
        .fetch_add(took.as_micros() as u64, Ordering::SeqCst);
    (slot.desc.memory, slot.desc.planes) = source.lent().unwrap_or_else(|| {
        (
            crate::desc::Memory::Host,
            crate::desc::Planes::packed(slot.desc.format, slot.desc.size),
        )
    });
    Ok(Read::Frame)
}

/// A free slot for a live source: waits a frame's time, or longer while `patience` lasts;
/// a stop ends the wait as a closed ring does (`Disconnected`), within `POLL`.
fn wait_live(
    free: &Receiver<Slot>,
    frame: Duration,
    patience: &mut Patience,
    stop: &Stop,
) -> Result<Slot, RecvTimeoutError> {
    let t = Instant::now();
    let limit = patience.wait(frame);
    let got = loop {
        let left = limit.saturating_sub(t.elapsed());
        match free.recv_timeout(left.min(POLL)) {
            Err(RecvTimeoutError::Timeout) if stop.is_requested() => {
                break Err(RecvTimeoutError::Disconnected)
            }
            Err(RecvTimeoutError::Timeout) if t.elapsed() < limit => continue,
            got => break got,
        }
    };
    patience.spend(t.elapsed(), frame);
    got
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patience_lets_a_burst_through_then_drops_after_a_frame() {
        let frame = Duration::from_millis(33);
        let mut p = Patience::new(Duration::from_secs(1));
        // A burst: a wait of 0.6 s is patient, and spends 0.6 s less a frame's time.
        assert!(p.wait(frame) >= Duration::from_millis(999));
        p.spend(Duration::from_millis(600), frame);
        let left = p.wait(frame);
        assert!(left > Duration::from_millis(420) && left < Duration::from_millis(450));
        // Spent: a frame's wait, no more.
        p.spend(Duration::from_secs(2), frame);
        assert_eq!(p.wait(frame), frame);
        // A frame's wait or less spends nothing.
        let mut q = Patience::new(Duration::from_millis(500));
        q.spend(frame, frame);
        assert!(q.wait(frame) >= Duration::from_millis(499));
        // None to start with (a camera): a frame's wait.
        assert_eq!(Patience::new(Duration::ZERO).wait(frame), frame);
    }

    #[test]
    fn patience_comes_back_at_a_tenth_of_real_time() {
        let frame = Duration::from_millis(20);
        let mut p = Patience::new(Duration::from_secs(1));
        p.spend(Duration::from_secs(5), frame);
        p.since -= Duration::from_secs(3); // three seconds later
        let w = p.wait(frame);
        assert!(
            w >= Duration::from_millis(300) && w < Duration::from_millis(320),
            "{w:?}"
        );
        p.since -= Duration::from_secs(60); // and never more than the budget
        assert!(p.wait(frame) <= Duration::from_secs(1));
    }
}
