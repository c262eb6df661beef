//! The threads and the channels between them: capture → backend → sink, and back to the
//! free list.
//!
//! ```text
//! free ──> capture thread ──filled──> backend thread ──done──> sink (calling thread) ──┐
//!  ^                                                                                     │
//!  └─────────────────────────────── slot returned ──────────────────────────────────────┘
//! ```
//!
//! Invariants: the ring's slots are the only frame buffers (allocated and attached to the
//! backend before the first frame); frames reach the sink in capture order; a live source
//! never waits for a slot (it discards the frame and counts it dropped), any other source
//! does; on any stop the capture thread ends first, then the backend finishes what it holds,
//! then the sink drains and is finished, and every thread is joined.

use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use crossbeam_channel::{bounded, Receiver, RecvTimeoutError, Sender, TryRecvError};

use crate::backend::Backend;
use crate::ring::{self, Slot};
use crate::sink::{Flow, Sink};
use crate::source::{Read, Source};
use crate::stats::{CaptureStats, ProcessStats, SinkStats, Summary};
use crate::stop::Stop;

/// How the pipeline runs, apart from its three stages.
#[derive(Clone, Debug)]
pub struct Options {
    /// Slots in the ring (frames that exist at once).
    pub ring: usize,
    /// Stop after this many captured frames.
    pub frames: Option<u64>,
    /// Keep every frame's submit/done instants (benchmarks).
    pub keep_frame_times: bool,
}

/// Runs until the input ends, `opts.frames` are captured, or `stop` is requested; the sink
/// runs on the calling thread and is always finished.
pub fn run(
    mut source: Box<dyn Source>,
    mut backend: Box<dyn Backend>,
    sink: &mut dyn Sink,
    opts: &Options,
    stop: &Stop,
) -> Result<Summary> {
    let size = source.size();
    let mut slots = ring::allocate(opts.ring, size);
    for slot in &mut slots {
        for buf in slot.buffers_mut() {
            backend.attach(buf)?;
        }
    }
    let backend_name = backend.describe();
    let (free_tx, free_rx) = bounded::<Slot>(opts.ring);
    let (filled_tx, filled_rx) = bounded::<Slot>(opts.ring);
    let (done_tx, done_rx) = bounded::<Slot>(opts.ring);
    for slot in slots {
        free_tx.send(slot).expect("free list has room for the ring");
    }
    let started = Instant::now();

    let capture = {
        let stop = stop.clone();
        let frames = opts.frames;
        thread::Builder::new()
            .name("capture".into())
            .spawn(move || capture_loop(source.as_mut(), &free_rx, filled_tx, frames, &stop))?
    };
    let process = {
        let stop = stop.clone();
        let keep = opts.keep_frame_times;
        thread::Builder::new()
            .name("backend".into())
            .spawn(move || {
                let r = backend_loop(backend.as_mut(), filled_rx, done_tx, keep);
                if r.is_err() {
                    stop.request();
                }
                r
            })?
    };

    let sink_result = sink_loop(sink, &done_rx, &free_tx, stop);
    if sink_result.is_err() {
        stop.request();
        // Keep slots moving so that the other threads can finish.
        while let Ok(slot) = done_rx.recv() {
            let _ = free_tx.send(slot);
        }
    }
    let finish_result = sink.finish();
    drop(free_tx);
    let capture_result = capture
        .join()
        .map_err(|_| anyhow!("the capture thread panicked"))?;
    let process_result = process
        .join()
        .map_err(|_| anyhow!("the backend thread panicked"))?;
    let elapsed = started.elapsed();

    let capture_stats = capture_result.context("capture")?;
    let process_stats = process_result.context("processing")?;
    let sink_stats = sink_result?;
    finish_result.context("finishing the output")?;
    Ok(Summary {
        backend: backend_name,
        sink: sink.verb().to_string(),
        elapsed,
        capture: capture_stats,
        process: process_stats,
        sink_stats,
    })
}

const POLL: Duration = Duration::from_millis(20);

fn capture_loop(
    source: &mut dyn Source,
    free: &Receiver<Slot>,
    filled: Sender<Slot>,
    frames: Option<u64>,
    stop: &Stop,
) -> Result<CaptureStats> {
    let mut st = CaptureStats::default();
    let live = source.is_live();
    let result = (|| -> Result<()> {
        while !stop.is_requested() && frames.is_none_or(|n| st.captured < n) {
            let mut slot = match free.try_recv() {
                Ok(slot) => slot,
                Err(TryRecvError::Disconnected) => return Ok(()),
                Err(TryRecvError::Empty) if live => {
                    // Ring full: a live source drops this frame so that what is shown stays fresh.
                    if source.skip()? == Read::End {
                        return Ok(());
                    }
                    st.dropped += 1;
                    continue;
                }
                Err(TryRecvError::Empty) => match free.recv_timeout(POLL) {
                    Ok(slot) => slot,
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return Ok(()),
                },
            };
            let t = Instant::now();
            if source.read(&mut slot.input)? == Read::End {
                return Ok(());
            }
            slot.stamps.captured = Instant::now();
            slot.stamps.capture_ms = crate::stats::ms(slot.stamps.captured - t);
            st.read_ms += slot.stamps.capture_ms;
            slot.seq = st.captured;
            st.captured += 1;
            if filled.send(slot).is_err() {
                return Ok(()); // the backend stopped (its error is reported by it)
            }
        }
        Ok(())
    })();
    result.map(|_| st)
}

fn backend_loop(
    backend: &mut dyn Backend,
    filled: Receiver<Slot>,
    done: Sender<Slot>,
    keep: bool,
) -> Result<ProcessStats> {
    let mut st = ProcessStats::default();
    let forward = |slot: Slot, st: &mut ProcessStats| {
        st.record(
            slot.stamps.submitted,
            slot.stamps.done,
            slot.gpu.as_ref(),
            keep,
        );
        // A closed sink only happens on shutdown; the slot is then simply freed.
        let _ = done.send(slot);
    };
    let mut input_open = true;
    loop {
        while let Some(slot) = backend.complete(false)? {
            forward(slot, &mut st);
        }
        let busy = backend.in_flight();
        if !input_open || busy >= backend.capacity() {
            match backend.complete(true)? {
                Some(slot) => forward(slot, &mut st),
                None if !input_open => return Ok(st),
                None => {}
            }
            continue;
        }
        // Wait briefly for input while frames are on the GPU, longer when it is idle.
        let wait = if busy > 0 {
            Duration::from_micros(20)
        } else {
            POLL
        };
        match filled.recv_timeout(wait) {
            Ok(slot) => backend.submit(slot)?,
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => input_open = false,
        }
    }
}

fn sink_loop(
    sink: &mut dyn Sink,
    done: &Receiver<Slot>,
    free: &Sender<Slot>,
    stop: &Stop,
) -> Result<SinkStats> {
    let mut st = SinkStats::default();
    loop {
        match done.recv_timeout(POLL) {
            Ok(slot) => {
                let t = Instant::now();
                let flow = sink.consume(&slot.output, slot.size)?;
                st.sink_ms += crate::stats::ms(t.elapsed());
                st.consumed += 1;
                let _ = free.send(slot);
                if flow == Flow::Quit {
                    stop.request();
                }
            }
            Err(RecvTimeoutError::Timeout) => {
                if sink.idle()? == Flow::Quit {
                    stop.request();
                }
            }
            Err(RecvTimeoutError::Disconnected) => return Ok(st),
        }
    }
}
