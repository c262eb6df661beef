//! Sinks of a run: each input's own sinks (its output file, its window with `--no-mosaic`),
//! picked by the frame's `InputId`, one sink that sees every input's frames (the mosaic),
//! and, for a program that embeds framepipe, the sink that hands it every frame and the
//! marks it asks to be drawn (`Embedded`). A run of one input without a mosaic or an
//! embedding program is its own sinks alone (`by_input`).
//!
//! Invariants: a frame reaches only its own input's sinks and the shared ones, in the order
//! the pipeline hands it over (each input's frames in capture order); the embedding program
//! gets the frame as the pipeline made it, first, and the others get it with the input's
//! marks drawn (`sink::marks`); every sink is finished once, also after an error, the
//! inputs' own sinks (files) before the shared ones (a window that may keep its picture up
//! until q).

use anyhow::Result;

use super::marks::{Drawn, Marks};
use super::{Flow, Frame, Sink};
use crate::stats::Live;

/// What an embedding program adds to a run's sinks: the sink that hands it every frame,
/// and the marks it asks to be drawn into the frames the other sinks take.
pub struct Embedded {
    /// Takes every frame as the pipeline made it.
    pub first: Box<dyn Sink>,
    /// Each input's marks.
    pub marks: Marks,
}

/// The run's sink: `each` input's own sinks (by `InputId`) and the one that sees every
/// frame; one input's own sinks alone where nothing else looks (none: `null::Null`) and no
/// input may join (`joins`: frames of other inputs may come).
pub fn by_input(
    mut each: Vec<Option<Box<dyn Sink>>>,
    all: Option<Box<dyn Sink>>,
    embedded: Option<Embedded>,
    joins: bool,
) -> Box<dyn Sink> {
    if each.len() == 1 && all.is_none() && embedded.is_none() && !joins {
        return each
            .pop()
            .flatten()
            .unwrap_or_else(|| Box::new(super::null::Null));
    }
    let mut route = ByInput::new(each, all);
    route.embedded = embedded;
    Box::new(route)
}

/// Frames routed by input (module doc).
pub struct ByInput {
    /// Each input's sinks, by `InputId` (None: the input writes nowhere of its own).
    each: Vec<Option<Box<dyn Sink>>>,
    /// What sees every input's frames.
    all: Option<Box<dyn Sink>>,
    /// Frames each input's sinks took.
    consumed: Vec<u64>,
    /// An embedding program's sink, which takes every frame before its marks are drawn.
    embedded: Option<Embedded>,
    /// The copy the marks are drawn into.
    drawn: Drawn,
    /// Each input that left the run: its own sinks were finished then (`leave`).
    left: Vec<bool>,
}

impl ByInput {
    /// `each` input's own sinks (by `InputId`), and the sink fed every frame.
    pub fn new(each: Vec<Option<Box<dyn Sink>>>, all: Option<Box<dyn Sink>>) -> Self {
        let consumed = vec![0; each.len()];
        Self {
            each,
            all,
            consumed,
            embedded: None,
            drawn: Drawn::default(),
            left: Vec::new(),
        }
    }

    /// The sinks still taking frames (an input's own that left were finished then).
    fn sinks(&mut self) -> impl Iterator<Item = &mut Box<dyn Sink>> {
        let left = &self.left;
        self.each
            .iter_mut()
            .enumerate()
            .filter(|(i, _)| !left.get(*i).copied().unwrap_or(false))
            .filter_map(|(_, s)| s.as_mut())
            .chain(self.all.as_mut())
            .chain(self.embedded.as_mut().map(|e| &mut e.first))
    }

    /// The embedding program's sink, where there is one.
    fn first(&self) -> Option<&dyn Sink> {
        self.embedded.as_ref().map(|e| e.first.as_ref())
    }
}

impl Sink for ByInput {
    fn verb(&self) -> &'static str {
        let mut sinks = self
            .each
            .iter()
            .flatten()
            .chain(&self.all)
            .map(|s| s.as_ref())
            .chain(self.first());
        sinks.next().map_or("consumed", |s| s.verb())
    }
    fn describe(&self) -> String {
        // A run of one input that others may join: its own sinks, as without them.
        let alone = self.each.len() == 1 && self.all.is_none();
        let mut parts: Vec<String> = self
            .each
            .iter()
            .enumerate()
            .filter_map(|(i, s)| {
                let own = s.as_ref()?.describe();
                Some(match alone {
                    true => own,
                    false => format!("input {i}: {own}"),
                })
            })
            .collect();
        if let Some(all) = &self.all {
            parts.push(all.describe());
        }
        if let Some(first) = self.first() {
            parts.push(first.describe());
        }
        if parts.is_empty() {
            return "nowhere (processed and discarded)".into();
        }
        parts.join("; ")
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let i = usize::from(frame.desc.input.0);
        let mut flow = Flow::Continue;
        if let Some(e) = &mut self.embedded {
            flow = e.first.consume(frame)?;
        }
        let marks = self.embedded.as_ref().and_then(|e| e.marks.of(i));
        let drawn = marks.and_then(|m| self.drawn.draw(frame, &m));
        let frame = drawn.as_ref().unwrap_or(frame);
        if let Some(Some(own)) = self.each.get_mut(i) {
            flow = flow.merge(own.consume(frame)?);
            self.consumed[i] += 1;
        }
        if let Some(all) = &mut self.all {
            flow = flow.merge(all.consume(frame)?);
        }
        Ok(flow)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.all
            .as_mut()
            .map_or(Ok(()), |all| all.composed(picture))
    }
    fn status(&mut self, live: &Live) {
        self.sinks().for_each(|s| s.status(live));
    }
    fn wants_timeline(&self) -> bool {
        self.each
            .iter()
            .flatten()
            .chain(&self.all)
            .any(|s| s.wants_timeline())
    }
    fn idle(&mut self) -> Result<Flow> {
        let mut flow = Flow::Continue;
        for s in self.sinks() {
            flow = flow.merge(s.idle()?);
        }
        Ok(flow)
    }
    fn begin_finish(&mut self) {
        self.sinks().for_each(|s| s.begin_finish());
    }
    fn leave(&mut self, input: usize) -> Result<()> {
        if let Some(all) = &mut self.all {
            all.leave(input)?;
        }
        if self.left.get(input).copied().unwrap_or(false) {
            return Ok(());
        }
        if self.left.len() <= input {
            self.left.resize(input + 1, false);
        }
        self.left[input] = true;
        match self.each.get_mut(input) {
            Some(Some(own)) => {
                own.begin_finish();
                own.finish()
            }
            _ => Ok(()),
        }
    }
    fn finish(&mut self) -> Result<()> {
        self.begin_finish();
        let mut first_err = None;
        for s in self.sinks() {
            if let Err(e) = s.finish() {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
    /// Every input's output holds, summed: what each checked, else what it took (None where
    /// no input's output checks); each input's own; every stream; the mosaic's recording.
    fn report(&self) -> super::SinkReport {
        let each: Vec<_> = self
            .each
            .iter()
            .map(|s| s.as_ref().map(|s| s.report()))
            .collect();
        let checked = each.iter().flatten().any(|r| r.stored.is_some());
        let stored = checked.then(|| {
            each.iter()
                .zip(&self.consumed)
                .map(|(r, &n)| r.as_ref().and_then(|r| r.stored).unwrap_or(n))
                .sum()
        });
        let all = self.all.as_ref().map(|s| s.report());
        let streams = each
            .iter()
            .flatten()
            .chain(all.as_ref())
            .flat_map(|r| r.streams.clone())
            .chain(self.first().into_iter().flat_map(|s| s.report().streams))
            .collect();
        super::SinkReport {
            stored,
            inputs: each
                .iter()
                .map(|r| r.as_ref().and_then(|r| r.stored))
                .collect(),
            streams,
            mosaic: all.and_then(|r| r.mosaic),
            detection: None,
        }
    }
}
