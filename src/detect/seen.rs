//! What the detector saw last on each input: written by the detector's thread, read by
//! whatever draws the boxes (the detecting sink into each frame, the mosaic into its
//! tiles) and by `/metrics` (counts by label, inference time, batch size, skipped frames).
//!
//! Invariants: boxes are in the pixels of the frame they were found on, whose size is kept
//! with them (a reader showing another size scales them); a reader never waits on the
//! detector for longer than a copy of one input's boxes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::Detection;
use crate::frame::FrameSize;

/// One input's last detected frame.
#[derive(Clone, Debug)]
pub struct Found {
    /// Its index in the input's frames.
    pub index: u64,
    /// Its size: the boxes' pixels.
    pub size: FrameSize,
    /// Its boxes.
    pub boxes: Vec<Detection>,
}

/// One input's figures since the run began.
#[derive(Clone, Debug, Default)]
pub struct Figures {
    /// Frames the detector ran on.
    pub detected: u64,
    /// Due frames skipped because the detector was busy.
    pub skipped: u64,
    /// Boxes found, by label.
    pub by_label: BTreeMap<String, u64>,
    /// Objects in each of its zones now (`--zone`).
    pub zones: BTreeMap<String, u64>,
}

/// Each input's last boxes and figures, and the detector's (module doc).
#[derive(Clone, Debug, Default)]
pub struct Seen(Arc<Mutex<State>>);

#[derive(Debug, Default)]
struct State {
    last: Vec<Option<Found>>,
    figures: Vec<Figures>,
    /// Seconds of the last inference, and how many frames it took.
    inference: Option<(f64, usize)>,
}

impl Seen {
    /// A store for `inputs` inputs.
    pub fn new(inputs: usize) -> Self {
        Self(Arc::new(Mutex::new(State {
            last: vec![None; inputs],
            figures: vec![Figures::default(); inputs],
            inference: None,
        })))
    }

    /// Makes room for `inputs` inputs (inputs that joined the run while it goes).
    pub fn grow(&self, inputs: usize) {
        let mut s = self.state();
        if s.last.len() < inputs {
            s.last.resize(inputs, None);
            s.figures.resize(inputs, Figures::default());
        }
    }

    /// Input `input` left the run: its boxes and figures go (another input may take its
    /// place).
    pub fn forget(&self, input: usize) {
        let mut s = self.state();
        if let Some(l) = s.last.get_mut(input) {
            *l = None;
        }
        if let Some(f) = s.figures.get_mut(input) {
            *f = Figures::default();
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `found` is input `input`'s newest detection.
    pub fn found(&self, input: usize, found: Found) {
        let mut s = self.state();
        if let Some(f) = s.figures.get_mut(input) {
            f.detected += 1;
            for d in &found.boxes {
                *f.by_label.entry(d.label.clone()).or_default() += 1;
            }
        }
        if let Some(l) = s.last.get_mut(input) {
            *l = Some(found);
        }
    }

    /// A due frame of `input` was skipped.
    pub fn skipped(&self, input: usize) {
        if let Some(f) = self.state().figures.get_mut(input) {
            f.skipped += 1;
        }
    }

    /// Input `input`'s zones hold `counts` objects now.
    pub fn zones(&self, input: usize, counts: BTreeMap<String, u64>) {
        if let Some(f) = self.state().figures.get_mut(input) {
            f.zones = counts;
        }
    }

    /// One inference took `seconds` for `batch` frames.
    pub fn inferred(&self, seconds: f64, batch: usize) {
        self.state().inference = Some((seconds, batch));
    }

    /// Input `input`'s newest detection, where it has one.
    pub fn last(&self, input: usize) -> Option<Found> {
        self.state().last.get(input).cloned().flatten()
    }

    /// Input `input`'s figures.
    pub fn figures(&self, input: usize) -> Figures {
        self.state().figures.get(input).cloned().unwrap_or_default()
    }

    /// The last inference's seconds and batch size.
    pub fn inference(&self) -> Option<(f64, usize)> {
        self.state().inference
    }
}
