//! Opens every input of the run side by side, each on a helper thread, while CUDA warms
//! up, and settles each opened input's `Plan`.
//!
//! Invariants: a stop while inputs are opening ends the run at once (None); an input that
//! can't be opened is kept with its error, and the others run (a run of one input fails
//! with that error); in a run of several inputs, one slow to open holds the others up at
//! most `LATE_AFTER` (a quarter of a second) after the first one opened, then joins the run when it opens (only one
//! without outputs of its own: theirs are made for its frames before the run, so such an
//! input is waited for); such a network stream that is down at the start is tried again
//! until it comes up, and joins then; so is one that reconnects when lost (`--reconnect`, a
//! camera of an `--inputs` list) where it is alone, and the run starts when it is up.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::recordings::{Recordings, Tap};
use crate::info;
use crate::pipeline::{self, Arrival};
use crate::plan::{Engine, InputPlan, Plan, RunPlan};
use crate::source::open::{self, Opened};
use crate::stop::Stop;

/// How long the run waits for the other inputs once one has opened: those still opening then
/// (and allowed to) join the run when they open. Short, so that an input already open does
/// not hold its frames while a wall of cameras opens (its latency would be the wait); long
/// enough that inputs opening together start together.
const LATE_AFTER: Duration = Duration::from_millis(250);

/// An input that opened: its place among `--input`s, the source (and its media), its plan.
pub(super) struct Running {
    pub at: usize,
    pub opened: Opened,
    pub plan: Plan,
}

/// Every input of the run as it starts.
pub(super) struct Inputs {
    /// Open, in `--input` order (their `InputId`s are 0, 1, …).
    pub running: Vec<Running>,
    /// Still opening: they join when open (`InputId`s after the running ones).
    pub late: Vec<(usize, pipeline::Opener)>,
    /// Could not be opened: why.
    pub failed: Vec<(usize, anyhow::Error)>,
}

impl Inputs {
    /// Those that could not be opened, taken out: each one's place and why.
    pub fn take_failed(&mut self) -> Vec<(usize, String)> {
        std::mem::take(&mut self.failed)
            .into_iter()
            .map(|(i, e)| (i, format!("failed: {e:#}")))
            .collect()
    }

    /// The run's inputs by `InputId`: their places among the `--input`s.
    pub fn order(&self) -> Vec<usize> {
        let late = self.late.iter().map(|(i, _)| *i);
        self.running.iter().map(|r| r.at).chain(late).collect()
    }

    /// The pipeline's inputs: those open, then those joining late (rings of `ring` slots).
    pub fn into_pipeline(
        self,
        names: &[String],
        ring: usize,
        recordings: &Recordings,
    ) -> Vec<pipeline::Input> {
        let open = self.running.into_iter().map(|r| pipeline::Input {
            recording: recordings.live(r.at),
            source: Arrival::Open {
                source: r.opened.0,
                formats: r.plan.backend.formats,
            },
            ring: r.plan.ring,
        });
        let late = self.late.into_iter().map(|(i, open)| pipeline::Input {
            source: Arrival::Late {
                name: names[i].clone(),
                open,
            },
            ring,
            recording: recordings.live(i),
        });
        open.chain(late).collect()
    }
}

/// Opens every input of `plan` (module doc); None when a stop came first.
pub(super) fn open(stop: &Stop, plan: &RunPlan, recordings: &Recordings) -> Result<Option<Inputs>> {
    let several = plan.several();
    let Some(openings) = open_all(stop, plan.inputs()) else {
        return Ok(None);
    };
    let mut inputs = Inputs {
        running: Vec::new(),
        late: Vec::new(),
        failed: Vec::new(),
    };
    say_late(plan.inputs(), &openings);
    for (at, opening) in openings.into_iter().enumerate() {
        let input = &plan.inputs()[at];
        match opening {
            Opening::Late(rx) => {
                let engine = plan.engine().clone();
                let tap = recordings.tap(at);
                inputs
                    .late
                    .push((at, late_opener(rx, engine, input.clone(), at, tap)));
            }
            Opening::Done(Ok(mut opened)) => {
                recordings.attach(at, opened.0.as_mut())?;
                inputs
                    .running
                    .push(settle(plan.engine(), input, at, opened, several)?)
            }
            Opening::Done(Err(e)) if !several => return Err(e),
            Opening::Done(Err(e)) => {
                crate::warn!(
                    "input {at} ({}) could not be opened: {e:#}; the other inputs go on",
                    input.name
                );
                inputs.failed.push((at, e));
            }
        }
    }
    let rings: Vec<_> = inputs
        .running
        .iter()
        .map(|r| (r.plan.ring, r.plan.backend.size))
        .collect();
    crate::budget::check_rings(&rings, crate::host::memory_available())?;
    if inputs.running.is_empty() {
        anyhow::bail!(
            "none of the {} inputs could be opened ({})",
            plan.inputs().len(),
            why_failed(&inputs.failed)
        );
    }
    Ok(Some(inputs))
}

/// Says in one line which inputs are still opening as the run starts without them.
fn say_late(inputs: &[InputPlan], openings: &[Opening]) {
    let late: Vec<String> = (0..openings.len())
        .filter(|&i| matches!(openings[i], Opening::Late(_)))
        .map(|i| format!("{i} ({})", inputs[i].name))
        .collect();
    const NAMED: usize = 8;
    let names = match late.len() {
        0 => return,
        n if n <= NAMED => late.join(", "),
        n => format!("{} and {} more", late[..NAMED].join(", "), n - NAMED),
    };
    match late.len() {
        1 => info!("input {names} is still opening; the others start, and it joins when it opens"),
        _ => info!(
            "inputs {names} are still opening; the others start, and each joins when it opens"
        ),
    }
}

/// "input 0: why; input 2: why".
fn why_failed(failed: &[(usize, anyhow::Error)]) -> String {
    let each: Vec<String> = failed
        .iter()
        .map(|(i, e)| format!("input {i}: {e:#}"))
        .collect();
    each.join("; ")
}

/// The plan of input `at`, opened (`Plan::settle`: beside others, its ring is smaller).
fn settle(
    engine: &Engine,
    input: &InputPlan,
    at: usize,
    opened: Opened,
    several: bool,
) -> Result<Running> {
    let source = opened.0.as_ref();
    let plan = match several {
        true => {
            info!("input {at}: {}", source.describe());
            Plan::settle(engine, input, source)
                .with_context(|| format!("input {at} ({})", input.name))?
        }
        false => {
            let plan = Plan::settle(engine, input, source)?;
            info!("input: {}", source.describe());
            plan
        }
    };
    Ok(Running { at, opened, plan })
}

/// An input's opening, as the run starts.
enum Opening {
    /// Opened, or failed.
    Done(Result<Opened>),
    /// Still opening: its answer comes on this channel.
    Late(open::Opening),
}

/// Opens every input at once, each on its own helper thread (a slow one doesn't hold the
/// others' opening up), and waits until each has opened or failed; those that may join
/// late (`InputPlan::may_join_late`) are waited for at most `LATE_AFTER` after the first
/// input opened. None when a stop came first.
fn open_all(stop: &Stop, inputs: &[InputPlan]) -> Option<Vec<Opening>> {
    let mut openings: Vec<Opening> = inputs
        .iter()
        .enumerate()
        .map(|(at, i)| match start_opening(at, i, &Stop::new()) {
            Ok(rx) => Opening::Late(rx),
            Err(e) => Opening::Done(Err(e.context("starting its opening thread"))),
        })
        .collect();
    let mut first_open: Option<Instant> = None;
    loop {
        crate::stop::beat();
        wait_for_one(&openings);
        for opening in &mut openings {
            let Opening::Late(rx) = opening else { continue };
            let Some(result) = open::answer(rx) else {
                continue;
            };
            if result.is_ok() {
                first_open.get_or_insert_with(Instant::now);
            }
            *opening = Opening::Done(result);
        }
        // An open that gave up because of a stop is a stop, not a failure.
        if stop.is_requested() {
            return None;
        }
        let waiting = |i: &usize| matches!(openings[*i], Opening::Late(_));
        let late_now = first_open.is_some_and(|t| t.elapsed() >= LATE_AFTER);
        let mut still = (0..openings.len()).filter(waiting).peekable();
        if still.peek().is_none() || (late_now && still.all(|i| inputs[i].may_join_late)) {
            return Some(openings);
        }
    }
}

/// Starts opening input `at`: a live network stream that may join late (beside others, with no
/// outputs of its own), or that reconnects (`--reconnect`, a listed camera), is tried again
/// until it comes up (`open::start_until_open`), so a camera that is down at the start joins
/// the run when it comes up (or starts it, where it is the only one); any other is opened
/// once.
pub(super) fn start_opening(at: usize, input: &InputPlan, until: &Stop) -> Result<open::Opening> {
    // A live stream's protocols (a file served over HTTP that is missing fails as before).
    let live = [
        "udp://", "rtp://", "rtsp://", "rtsps://", "srt://", "rtmp://", "tcp://",
    ];
    let network = matches!(&input.spec, crate::source::InputSpec::Stream(url)
        if live.iter().any(|p| url.to_ascii_lowercase().starts_with(p)));
    if !((input.may_join_late || input.asked.reconnect) && network) {
        return open::start(input.spec.clone(), input.asked);
    }
    let (name, late) = (input.name.clone(), input.may_join_late);
    let down = Box::new(move |e: &anyhow::Error| {
        match late {
        true => crate::warn!(
            "input {at} ({name}) is down ({e:#}); the others go on, and it joins the run when it comes up"
        ),
        false => crate::warn!(
            "input {at} ({name}) is down ({e:#}); it is tried again until it comes up"
        ),
    }
    });
    open::start_until_open(input.spec.clone(), input.asked, down, until.clone())
}

/// Waits until one of the openings still under way answers, or `Stop::TICK` passes.
fn wait_for_one(openings: &[Opening]) {
    let mut select = crossbeam_channel::Select::new();
    let mut any = false;
    for opening in openings {
        if let Opening::Late(rx) = opening {
            select.recv(rx);
            any = true;
        }
    }
    if any {
        // Only readiness: the answer is taken by `open::answer`.
        let _ = select.ready_timeout(Stop::TICK);
    }
}

/// What a late input's capture thread waits on (`pipeline::Arrival::Late`): its opening's
/// answer, then its plan's formats (as an input open at the start gets them).
pub(super) fn late_opener(
    answer: open::Opening,
    engine: Engine,
    input: InputPlan,
    i: usize,
    tap: Option<Tap>,
) -> pipeline::Opener {
    Box::new(move |stop: &Stop| {
        let Some((mut source, _media)) =
            open::wait(stop, &answer).context("it could not be opened")?
        else {
            return Ok(None);
        };
        super::recordings::attach(tap, source.as_mut())?;
        let plan = Plan::settle(&engine, &input, source.as_ref())
            .with_context(|| format!("input {i} ({})", input.name))?;
        Ok(Some((source, plan.backend.formats)))
    })
}
