//! The mosaic on the CPU backend: each processed frame scaled into its tile of a host
//! picture (`tiles::Scaler`, the nearest-neighbour maps `kernels/compose.cu` computes on the
//! device), and the picture handed on at most once a `tiles::PICTURE_EVERY`, as the CUDA
//! backend's `compose` does, so that the mosaic sink takes one kind of picture from either.
//!
//! Invariants: the picture starts dark grey (16); a frame of a new size for its input
//! clears its tile to black first (the letterbox), so the picture equals the device's byte
//! for byte; a picture handed on is a buffer of its own, written again only once the sink
//! has let go of it.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;

use super::{Fetch, Picture};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;
use crate::ring::{HostBuffer, Slot};
use crate::tiles::{self, picture_due, Compose, Scaler};

/// Host buffers pictures are handed on in: one with the sink, two queued to it, one spare.
const PICTURES: usize = 4;

/// The mosaic a `CpuBackend` composes (module doc).
pub(super) struct Canvas {
    plan: Compose,
    picture: Vec<u8>,
    scalers: HashMap<u16, Scaler>,
    handed: Vec<Picture>,
    /// Frames were drawn since the last picture was handed on.
    stale: bool,
    last: Option<Instant>,
}

impl Canvas {
    /// The picture of `plan`'s mosaic.
    pub(super) fn new(plan: &Compose) -> Self {
        Self {
            plan: plan.clone(),
            picture: vec![16; PixelFormat::Bgr24.bytes(plan.layout.canvas)],
            scalers: HashMap::new(),
            handed: Vec::new(),
            stale: false,
            last: None,
        }
    }

    /// Draws `slot`'s processed frame (BGR, as the mosaic negotiates) into its tile.
    pub(super) fn draw(&mut self, slot: &Slot) -> Result<()> {
        // Inputs joined or left: the picture is laid out again from dark grey.
        if self.plan.refresh() {
            self.picture.fill(16);
            self.scalers.clear();
            self.stale = true;
        }
        let input = slot.desc.input.0;
        let Some(t) = self.plan.tile(input, slot.output_format)? else {
            return Ok(());
        };
        let size: FrameSize = slot.size();
        let layout = self.plan.layout;
        let stride = layout.canvas.width * 3;
        let scaler = match self.scalers.get(&input) {
            Some(s) if s.from == size => s,
            _ => {
                tiles::clear(&mut self.picture, stride, layout.tile_area(t));
                let s = Scaler::new(size, layout.picture_area(t, size));
                self.scalers.insert(input, s);
                &self.scalers[&input]
            }
        };
        scaler.draw(&slot.output[..size.bytes()], &mut self.picture, stride);
        self.stale = true;
        Ok(())
    }

    /// The picture, where frames were drawn since the last was handed on and one is due
    /// (`PICTURE_EVERY` apart, or now for `Fetch::Last`); None where the sink holds every
    /// buffer.
    pub(super) fn picture(&mut self, fetch: Fetch) -> Option<Picture> {
        if !self.stale || !(picture_due(self.last) || fetch == Fetch::Last) {
            return None;
        }
        let at = match self.handed.iter().position(|p| Arc::strong_count(p) == 1) {
            Some(at) => at,
            None if self.handed.len() < PICTURES => {
                self.handed
                    .push(Arc::new(HostBuffer::new(self.picture.len())));
                self.handed.len() - 1
            }
            None => return None,
        };
        let buf = Arc::get_mut(&mut self.handed[at]).expect("no other reference (checked)");
        buf.copy_from_slice(&self.picture);
        self.stale = false;
        self.last = Some(Instant::now());
        Some(self.handed[at].clone())
    }
}
