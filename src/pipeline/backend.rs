//! The backend thread: slots in from every capture thread, in capture order across inputs,
//! out to the sink once processed; the mosaic's pictures on a short queue of their own that
//! never waits; controls (keys) applied only once no frame is held.
//!
//! Invariants: a control reaches the backend only with no frame in flight; on a stop the
//! backend finishes what it holds, then ends; when the GPU goes idle, and at the end, what
//! the last frames composed is brought down, so the last picture holds every input's last
//! frame.

use std::sync::Arc;
use std::thread;
use std::time::Instant;

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, TrySendError};

use super::{Options, Shared, CAPTURE_GRACE, POLL};
use crate::backend::{Backend, Control, Fetch, Picture};
use crate::ring::Slot;
use crate::stats::{slow, ProcessStats, ThreadCpu};

/// The backend thread's channels: filled slots in, processed slots out, the mosaic's
/// pictures out (with a receiver of the queue's own, to drop the oldest picture when it is
/// full), controls in.
pub(super) struct BackendEnds {
    /// Filled slots from every capture thread.
    pub(super) filled: Receiver<Slot>,
    /// Processed slots to the sink.
    pub(super) done: Sender<Slot>,
    /// The mosaic's pictures to the sink.
    pub(super) pictures: Sender<Picture>,
    /// The pictures' queue, read here only to drop its oldest.
    pub(super) older: Receiver<Picture>,
    /// The sink's controls (keys).
    pub(super) controls: Receiver<Control>,
}

/// Starts the backend thread: filled slots in, processed slots out in order, controls
/// applied between frames; an error stops the run.
pub(super) fn spawn_backend(
    mut backend: Box<dyn Backend>,
    ends: BackendEnds,
    opts: &Options,
    shared: &Arc<Shared>,
) -> Result<thread::JoinHandle<(ProcessStats, Result<()>)>> {
    let shared = shared.clone();
    let keep = opts.keep_frame_times;
    Ok(thread::Builder::new()
        .name("backend".into())
        .spawn(move || {
            let cpu = ThreadCpu::now();
            let mut side = BackendSide {
                backend: backend.as_mut(),
                ends,
                keep,
                st: ProcessStats::default(),
            };
            let r = side.run(&shared);
            let st = side.st;
            if r.is_err() {
                shared.stop.request();
            }
            shared.note_cpu("backend".into(), cpu);
            crate::backend::teardown::keep_or_drop(backend);
            (st, r)
        })?)
}

/// Pictures of the mosaic queued between the backend and the sink thread.
pub(super) const PICTURES_QUEUED: usize = 2;

/// The backend thread's state: the backend, its channels, and what it counted.
struct BackendSide<'a> {
    backend: &'a mut dyn Backend,
    ends: BackendEnds,
    /// Keep each frame's times (for the latency's quantiles).
    keep: bool,
    st: ProcessStats,
}

impl BackendSide<'_> {
    /// The thread's loop: frames submitted as they come while the backend has room,
    /// completed frames handed on at once, controls applied between frames; after a stop,
    /// what was captured before it within `CAPTURE_GRACE`, then what is in flight.
    fn run(&mut self, shared: &Shared) -> Result<()> {
        let mut input_open = true;
        let mut stop_seen: Option<Instant> = None;
        loop {
            if input_open && shared.stop.is_requested() {
                // Take what was captured before the stop; don't wait long for the rest.
                let since = *stop_seen.get_or_insert_with(Instant::now);
                if self.ends.filled.is_empty() && since.elapsed() >= CAPTURE_GRACE {
                    input_open = false;
                }
            }
            while let Some(slot) = self.backend.complete(false)? {
                self.forward(slot);
            }
            self.pass_pictures(Fetch::Ready)?;
            if let Ok(control) = self.ends.controls.try_recv() {
                self.apply(&control, shared)?;
            }
            let busy = self.backend.in_flight();
            if !input_open || busy >= self.backend.capacity() {
                let t = Instant::now();
                let completed = self.backend.complete(true)?;
                slow(
                    format_args!("backend: waiting for a frame on the GPU"),
                    t.elapsed(),
                );
                match completed {
                    Some(slot) => self.forward(slot),
                    None if !input_open => return self.pass_pictures(Fetch::Last),
                    None => {}
                }
                continue;
            }
            input_open = self.take_input(busy > 0)?;
        }
    }

    /// Takes the next filled slot, if any; false once every capture thread has ended. With
    /// frames on the GPU it polls without sleeping, so that a finished frame is handed on at
    /// once (a timed sleep costs its timer slack, tens of microseconds, on every frame of a
    /// live source); with none, the last frames' tiles come down before it waits.
    fn take_input(&mut self, busy: bool) -> Result<bool> {
        if busy {
            match self.ends.filled.try_recv() {
                Ok(slot) => submit(self.backend, slot)?,
                Err(TryRecvError::Empty) => thread::yield_now(),
                Err(TryRecvError::Disconnected) => return Ok(false),
            }
            return Ok(true);
        }
        self.pass_pictures(Fetch::Idle)?;
        match self.ends.filled.recv_timeout(POLL) {
            Ok(slot) => submit(self.backend, slot)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return Ok(false),
        }
        Ok(true)
    }

    /// Finishes what is in flight, then changes the backend between two frames.
    fn apply(&mut self, control: &Control, shared: &Shared) -> Result<()> {
        while let Some(slot) = self.backend.complete(true)? {
            self.forward(slot);
        }
        self.backend
            .control(control)
            .with_context(|| format!("applying {control:?}"))?;
        self.st.controls.push(format!(
            "{} from frame {}",
            describe_control(control),
            self.st.processed
        ));
        if let Ok(mut b) = shared.backend.lock() {
            *b = self.backend.describe();
        }
        Ok(())
    }

    /// A processed slot counted and handed to the sink (a closed sink only happens on
    /// shutdown; the slot is then simply freed).
    fn forward(&mut self, slot: Slot) {
        self.st.record(
            slot.stamps.submitted,
            slot.stamps.done,
            slot.gpu.as_ref(),
            self.keep,
        );
        let _ = self.ends.done.send(slot);
    }

    /// The mosaic's pictures the backend composed (where it does): those come down are
    /// passed on; `Fetch::Idle` and `Fetch::Last` bring down what the last frames composed.
    /// The newest picture always gets in: where the queue is full, its oldest is dropped
    /// (the sink shows only the newest anyway), so the run's last picture is never lost.
    fn pass_pictures(&mut self, fetch: Fetch) -> Result<()> {
        while let Some(p) = self.backend.picture(fetch)? {
            if let Err(TrySendError::Full(p)) = self.ends.pictures.try_send(p) {
                let _ = self.ends.older.try_recv();
                let _ = self.ends.pictures.try_send(p);
            }
        }
        Ok(())
    }
}

/// Hands `slot` to the backend (told with `-v` where that was slow).
fn submit(backend: &mut dyn Backend, slot: Slot) -> Result<()> {
    let (t, input) = (Instant::now(), slot.desc.input.0);
    backend.submit(slot)?;
    slow(
        format_args!("backend: taking a frame of input {input}"),
        t.elapsed(),
    );
    Ok(())
}

fn describe_control(c: &Control) -> String {
    match c {
        Control::Chain(chain) => format!("filter {chain}"),
        Control::Pageable(true) => "pageable".into(),
        Control::Pageable(false) => "page-locked".into(),
        Control::Bands(n) => format!("{n} bands"),
    }
}
