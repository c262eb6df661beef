//! The sink loop, on the calling thread: each processed frame to the run's `Sink`, the
//! newest mosaic picture before it, the live figures at most every 10 ms with several
//! inputs, traced frames' output spans, and what the sink asks for (quit, pause, a control)
//! acted on; the slot back to its input's free list.
//!
//! Invariants: each input's frames reach the sink in its capture order; the sink loop is the
//! stop watchdog's sign of progress (`stop::beat`); after a stop the sink drains what the
//! backend finished and is finished, so its files are finalized.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::{Counters, Options, Shared, POLL};
use crate::backend::{Control, Picture};
use crate::desc::Frame;
use crate::reload::{self, Reloader};
use crate::ring::Slot;
use crate::sink::{Flow, Sink};
use crate::stats::{
    ms, slow, InputLive, InputStats, Latency, LatencyNow, Live, SinkStats, ThreadCpu,
};
use crate::trace::{Kind, Recent, Span, Trace, Track, STRIP_FRAMES};

/// What the sink side of a run gives back: how its loop ended, its counts, each input's,
/// the trace, and the CPU its thread had at the start.
pub(super) struct Sunk {
    pub(super) result: Result<()>,
    pub(super) stats: SinkStats,
    pub(super) per_input: Vec<PerInput>,
    /// The figures of inputs that left and whose places were taken again.
    pub(super) retired: Vec<InputStats>,
    pub(super) trace: Option<Trace>,
    pub(super) cpu: Option<ThreadCpu>,
}

/// Runs the sink loop on the calling thread over `ends`, tracing as `opts` asks (the first
/// frames, or the last ones).
pub(super) fn sink_side(
    sink: &mut dyn Sink,
    ends: SinkEnds,
    shared: &Shared,
    (started, backend_tracks): (Instant, Vec<String>),
    (opts, joiner): (&Options, Option<&super::Joiner>),
) -> Sunk {
    let names = shared.in_use().iter().map(|c| c.name()).collect();
    let tracks = Trace::new(started, backend_tracks).with_inputs(names);
    let mut recent = Recent::new(&tracks, opts.trace_last as usize);
    let mut trace = (opts.trace_frames > 0).then_some(tracks);
    let mut stats = SinkStats::default();
    let mut per_input = vec![PerInput::default(); shared.in_use().len()];
    let mut retired = Vec::new();
    let cpu = ThreadCpu::now();
    let result = sink_loop(
        sink,
        (&ends, joiner),
        shared,
        (&mut stats, &mut per_input, &mut retired),
        Traces {
            first: trace.as_mut(),
            first_frames: opts.trace_frames,
            recent: &mut recent,
        },
    );
    if opts.trace_last > 0 {
        trace = Some(recent.last(opts.trace_last));
    }
    Sunk {
        result,
        stats,
        per_input,
        retired,
        trace,
        cpu,
    }
}

/// The sink thread's channel ends.
pub(super) struct SinkEnds<'a> {
    pub(super) done: &'a Receiver<Slot>,
    /// The mosaic as the backend composes it (where it does), newest last.
    pub(super) pictures: &'a Receiver<Picture>,
    /// Each input's free list, by `InputId`.
    pub(super) free: &'a [Sender<Slot>],
    pub(super) controls: Sender<Control>,
    /// The kernel file watcher, for `r`.
    pub(super) reload: Option<&'a reload::Running>,
    /// Its messages, for the overlay.
    pub(super) reloader: Option<&'a Reloader>,
}

/// Where the sink loop files traced frames' spans.
struct Traces<'a> {
    /// The first frames' trace, where asked for.
    first: Option<&'a mut Trace>,
    first_frames: u64,
    /// The most recent traced frames.
    recent: &'a mut Recent,
}

/// What the sink loop counts of one input.
#[derive(Clone, Default)]
pub(super) struct PerInput {
    /// Its frames the sink took.
    pub(super) consumed: u64,
    /// Capture → out of the sink, per frame.
    pub(super) latency: Latency,
    /// The times its place was taken when its live figures were last renewed (`refresh`).
    taken: u64,
}

fn sink_loop(
    sink: &mut dyn Sink,
    (ends, joiner): (&SinkEnds, Option<&super::Joiner>),
    shared: &Shared,
    (st, per_input, retired): (&mut SinkStats, &mut Vec<PerInput>, &mut Vec<InputStats>),
    mut traces: Traces,
) -> Result<()> {
    let mut live = Live::default();
    live.input = shared.input();
    let mut told: Option<Instant> = None;
    let mut left: Vec<bool> = Vec::new();
    let mut looked = Instant::now();
    let take_pictures = |sink: &mut dyn Sink| -> Result<()> {
        match ends.pictures.try_iter().last() {
            Some(p) => sink.composed(&p),
            None => Ok(()),
        }
    };
    loop {
        // The watchdog of a signalled stop sees this loop turn (a sink call that blocks
        // stops it).
        crate::stop::beat();
        take_pictures(sink)?;
        if shared.stop.is_requested() {
            shared.leave_all();
        }
        shared.give_up_down();
        // Inputs that joined or left (a look at every input's state, at most every
        // `JOINS_EVERY`).
        if let Some(joiner) = joiner.filter(|_| looked.elapsed() >= JOINS_EVERY) {
            looked = Instant::now();
            joiner.settle();
            // Inputs that joined since are counted from their first frame.
            per_input.resize_with(shared.in_use().len(), PerInput::default);
            leave_drained(sink, (shared, joiner), per_input, (&mut left, retired))?;
        }
        match ends.done.recv_timeout(POLL) {
            Ok(mut slot) => {
                if status_due(&mut told, per_input.len()) {
                    refresh(&mut live, shared, per_input);
                    if let Ok(b) = shared.backend.lock() {
                        live.backend.clone_from(&b);
                    }
                    if let Some(r) = ends.reloader {
                        live.note = r.note();
                    }
                    sink.status(&live);
                }
                let (flow, t, end) = consume(sink, &mut slot, &mut live, shared)?;
                st.sink_ms += ms(end - t);
                st.consumed += 1;
                let at = slot.desc.input.0 as usize;
                if at >= per_input.len() {
                    per_input.resize_with(at + 1, PerInput::default);
                }
                let mine = &mut per_input[at];
                mine.consumed += 1;
                mine.latency.record(ms(end - slot.stamps.captured));
                if !slot.spans.is_empty() {
                    trace_output(&mut slot, (t, end), &mut traces);
                    live.timeline = sink
                        .wants_timeline()
                        .then(|| traces.recent.layout(STRIP_FRAMES).map(Arc::new))
                        .flatten();
                }
                let _ = ends.free[slot.desc.input.0 as usize].send(slot);
                act(flow, shared, ends);
            }
            Err(RecvTimeoutError::Timeout) => {
                refresh(&mut live, shared, per_input);
                sink.status(&live);
                act(sink.idle()?, shared, ends);
            }
            // The backend is done: the picture it brought down last goes to the sink.
            Err(RecvTimeoutError::Disconnected) => return take_pictures(sink),
        }
    }
}

/// Tells the sink of each input that left the run (`Joiner::remove`) once its capture ended
/// and its last frame was taken (`Sink::leave`: its own outputs are finished then, and it
/// forgets the input); a joined input's place is then made vacant (`Joiner::vacate`), its
/// figures kept for the summary (`retired`) and its own here started anew (its entry in the
/// live figures is renewed once another input takes the place: `refresh`).
fn leave_drained(
    sink: &mut dyn Sink,
    (shared, joiner): (&Shared, &super::Joiner),
    per_input: &mut [PerInput],
    (left, retired): (&mut Vec<bool>, &mut Vec<InputStats>),
) -> Result<()> {
    let inputs = shared.in_use();
    left.resize(inputs.len(), false);
    for (i, (c, mine)) in inputs.iter().zip(per_input.iter_mut()).enumerate() {
        let drained = !left[i]
            && !c.vacant.load(Ordering::SeqCst)
            && c.removed.load(Ordering::SeqCst)
            && c.has_ended()
            && mine.consumed >= c.captured.load(Ordering::SeqCst);
        if !drained {
            continue;
        }
        left[i] = true;
        sink.leave(i)?;
        if joiner.vacate(i) {
            if retired.len() >= RETIRED_KEPT {
                retired.remove(0);
            }
            retired.push(input_stats(c, mine, None));
            *mine = PerInput::default();
            left[i] = false;
        }
    }
    Ok(())
}

/// One input's figures, as its place's counts and the sink's have them (`stored`: what
/// its own outputs hold).
pub(super) fn input_stats(c: &Counters, mine: &PerInput, stored: Option<u64>) -> InputStats {
    InputStats {
        name: c.name(),
        captured: c.captured.load(Ordering::SeqCst),
        dropped: c.dropped.load(Ordering::SeqCst),
        read_ms: c.read_us.load(Ordering::SeqCst) as f64 / 1000.0,
        consumed: mine.consumed,
        stored,
        latency: mine.latency.clone(),
        ended: c.ended.lock().ok().and_then(|e| e.clone()),
        reconnects: c.health().map_or(0, |h| h.reconnects()),
        recorded: None,
    }
}

/// The inputs that left the run whose figures the summary keeps (the newest).
const RETIRED_KEPT: usize = super::MAX_INPUTS;

/// How often the sink loop looks for inputs that joined or left the run.
const JOINS_EVERY: Duration = Duration::from_millis(20);

/// How often the sink is told a run's figures with several inputs (`status_due`).
const STATUS_EVERY: Duration = Duration::from_millis(10);

/// Whether the sink is told the figures before this frame: before every frame of a run of
/// one input; with several, at most every `STATUS_EVERY` (`told`: when it last was), since
/// reading every input's figures, and the mosaic's and the browser view's use of them, cost
/// in proportion to the inputs, and their frames come as many times as often (at 150
/// cameras the sink thread spent 0.3 ms a frame and was the run's bound).
fn status_due(told: &mut Option<Instant>, inputs: usize) -> bool {
    let due = inputs <= 1 || told.is_none_or(|t| t.elapsed() >= STATUS_EVERY);
    if due {
        *told = Some(Instant::now());
    }
    due
}

/// `live`'s counts as the threads have them now (each input's latency figures at most every
/// `LatencyNow::EVERY`: a quantile walks its histogram).
fn refresh(live: &mut Live, shared: &Shared, per_input: &mut [PerInput]) {
    live.dropped = shared.total(|c| &c.dropped);
    live.frames = shared.progress.0[1].load(Ordering::Relaxed);
    live.paused = shared.paused.load(Ordering::SeqCst);
    let latencies = live.latencies_due();
    // Each input that took a place has its entry (those that joined since the last look
    // get theirs now).
    let inputs = shared.in_use();
    for c in &inputs[live.inputs.len().min(inputs.len())..] {
        live.inputs.push(InputLive {
            name: c.name(),
            ..InputLive::default()
        });
    }
    if live.inputs.len() > 1 {
        live.input = shared.input();
    }
    for ((l, c), mine) in live.inputs.iter_mut().zip(inputs).zip(per_input.iter_mut()) {
        // Another input took the place: its figures start anew.
        let taken = c.taken.load(Ordering::SeqCst);
        if taken != mine.taken {
            mine.taken = taken;
            *l = InputLive {
                name: c.name(),
                ..InputLive::default()
            };
        }
        l.captured = c.captured.load(Ordering::Relaxed);
        l.dropped = c.dropped.load(Ordering::Relaxed);
        l.live = c.live.load(Ordering::Relaxed);
        l.processed = mine.consumed;
        if l.ended.is_none() {
            l.ended = c.ended.lock().ok().and_then(|e| e.clone());
        }
        let health = c.health();
        let health = health.as_deref();
        l.state = health.and_then(|h| h.state());
        l.reconnects = health.map_or(0, |h| h.reconnects());
        l.down = match (&l.ended, c.open.load(Ordering::SeqCst)) {
            (Some(_), _) => None,
            // Not open yet: down since the process began opening it.
            (None, false) => Some(crate::stop::process_start().elapsed()),
            (None, true) => health.and_then(|h| h.down_for()),
        };
        if latencies {
            l.latency = LatencyNow::of(&mine.latency);
        }
        l.recording = c.recording().map(|r| r.now());
    }
}

/// A frame the backend passed on where its source lent it (`Memory::HostLent`: nothing
/// changed it, and the CPU backend left it in its decoder's buffer) packed into the slot's
/// output, for a sink that reads its pixels.
fn pack_lent(slot: &mut Slot) {
    if !std::mem::take(&mut slot.passed_as_lent) {
        return;
    }
    let Some(from) = slot.output_memory.host_frame() else {
        return;
    };
    let (format, size) = (slot.output_format, slot.size());
    // (The backend passes a frame on so only where it fits the slot's output.)
    if let Some(to) = slot.output.get_mut(..format.bytes(size)) {
        slot.desc.planes.pack(format, size, from, to);
    }
    slot.output_memory = crate::desc::Memory::Host;
}

/// Hands `slot`'s processed frame to the sink (without its bytes where none were brought
/// down; packed first where it was passed on where its decoder lent it and the sink reads
/// pixels), counting it in the progress and `live`, then lets go of what was lent with it;
/// what the sink asked for, and when its call began and ended.
fn consume(
    sink: &mut dyn Sink,
    slot: &mut Slot,
    live: &mut Live,
    shared: &Shared,
) -> Result<(Flow, Instant, Instant)> {
    let t = Instant::now();
    let progress = &shared.progress.0;
    progress[1].fetch_add(1, Ordering::Relaxed);
    progress[3].store(live.dropped, Ordering::Relaxed);
    if sink.reads_pixels() {
        pack_lent(slot);
    }
    let desc = slot.output_desc();
    let bytes: &[u8] = match slot.output_skipped {
        true => &[],
        false => &slot.output,
    };
    let flow = sink.consume(&Frame { desc: &desc, bytes })?;
    // A frame lent (on the device, or where its decoder left it) is the sink's now, or
    // given back.
    slot.output_memory = crate::desc::Memory::Host;
    slot.passed_as_lent = false;
    let end = Instant::now();
    slow(format_args!("output: taking a frame"), end - t);
    progress[2].fetch_add(1, Ordering::Relaxed);
    let s = &slot.stamps;
    live.update(
        s.capture_ms,
        ms(s.done - s.submitted),
        slot.gpu.as_ref(),
        ms(end - t),
    );
    Ok((flow, t, end))
}

/// A traced frame (its backend spans are there): its capture and output (`t`..`end`) spans
/// join them, in the first frames' trace and in the ring.
fn trace_output(slot: &mut Slot, (t, end): (Instant, Instant), traces: &mut Traces) {
    let (seq, input) = (slot.seq(), slot.desc.input.0);
    let span = |track, kind, start, end| Span {
        track,
        kind,
        input,
        frame: seq,
        band: None,
        start,
        end,
    };
    let s = &slot.stamps;
    let mut spans = std::mem::take(&mut slot.spans);
    spans.push(span(
        Track::Capture(input),
        Kind::Capture,
        s.read_start,
        s.captured,
    ));
    spans.push(span(Track::Output, Kind::Output, t, end));
    if let Some(first) = traces
        .first
        .as_deref_mut()
        .filter(|_| seq < traces.first_frames)
    {
        first.spans.extend(spans.iter().cloned());
    }
    traces.recent.push(seq, spans);
}

/// Does what the sink asked for: quit, pause, step, a control for the backend, a reload.
fn act(flow: Flow, shared: &Shared, ends: &SinkEnds) {
    match flow {
        // The mosaic's own keys reach here only without a mosaic.
        Flow::Continue | Flow::NextTile | Flow::Alone | Flow::Pick { .. } => {}
        Flow::Quit => shared.stop.request(),
        Flow::Step => {
            // A step pauses first, so that exactly one frame goes through.
            if !shared.paused.swap(true, Ordering::SeqCst) {
                shared.pauses.fetch_add(1, Ordering::SeqCst);
            }
            shared.step.store(true, Ordering::SeqCst);
        }
        Flow::TogglePause => {
            if !shared.paused.fetch_xor(true, Ordering::SeqCst) {
                shared.pauses.fetch_add(1, Ordering::SeqCst);
            }
        }
        Flow::Control(c) => {
            let _ = ends.controls.send(c);
        }
        Flow::Reload => match ends.reload {
            Some(r) => r.request(reload::Why::Key),
            None => crate::info!("r: the chain has no kernel file to reload"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sink_is_told_the_figures_of_several_inputs_at_most_every_10_ms() {
        let mut told = None;
        // One input: before every frame.
        assert!((0..3).all(|_| status_due(&mut told, 1)));
        // Several: the first frame, then not again within STATUS_EVERY.
        let mut told = None;
        assert!(status_due(&mut told, 150));
        assert!(!status_due(&mut told, 150));
        told = told.map(|t| t - STATUS_EVERY);
        assert!(status_due(&mut told, 150));
    }
}
