//! The mosaic on the device: a run of several inputs shown (or recorded) as one picture has
//! each processed frame scaled into its tile of a device buffer (`kernels/compose.cu`,
//! queued by the lane set right after a band's filters), and only that picture comes down,
//! a few times a second, instead of every frame.
//!
//! Invariants:
//! - the device picture starts dark grey (16), as the CPU mosaic does; a frame writes every
//!   row of its tile (letterbox included), so a tile holds its input's last frame;
//! - a picture's download is queued after the tiles written so far (it waits on the streams
//!   they were written on), and the tiles written after it wait for it (`fence`): a picture
//!   never holds part of a frame;
//! - a picture's host buffer is page-locked, written only while the sink holds no reference
//!   to it, and handed on only once its download has completed;
//! - downloads come at most one per `PICTURE_EVERY`, and one more when the GPU goes idle
//!   with tiles written since the last (so the last frames of a run, or of a pause, show).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, Result};
use cudarc::driver::{CudaEvent, CudaSlice, CudaStream, DevicePtr};

use super::device::{Device, PinnedRange};
use super::lanes::FrameMosaic;
use super::{Fetch, Picture};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;
use crate::ring::{HostBuffer, Slot};
use crate::tiles::{picture_due, Compose, Scaler};

/// Host buffers pictures come down into (one downloading, one with the sink, one spare).
const PICTURES: usize = 3;

/// A picture's host side: its buffer, and the event after its download.
struct Slab {
    host: Picture,
    ready: CudaEvent,
}

/// The mosaic a `CudaBackend` composes (module doc).
pub(super) struct Composer {
    plan: Compose,
    canvas: CudaSlice<u8>,
    stream: Arc<CudaStream>,
    /// Host buffers no download and no sink holds (the sink may still hold one: checked by
    /// its reference count before reuse).
    idle: Vec<Slab>,
    /// Downloads queued, oldest first.
    coming: Vec<Slab>,
    /// Recorded after the last download: tiles written later wait on it.
    fence: CudaEvent,
    fenced: bool,
    /// Events recorded on the streams a frame's tile was written on.
    marks: Vec<CudaEvent>,
    /// Tiles were written since the last download was queued.
    stale: bool,
    last: Option<Instant>,
    /// Each (input, frame size)'s scaler into its tile.
    scalers: HashMap<(u16, FrameSize), Scaler>,
}

impl Composer {
    /// The device picture and host buffers of `plan`'s mosaic on `dev`.
    pub(super) fn new(dev: &Device, plan: &Compose) -> Result<Self> {
        let bytes = PixelFormat::Bgr24.bytes(plan.layout.canvas);
        let stream = dev.ctx.new_stream()?;
        let canvas = stream
            .clone_htod(&vec![16u8; bytes])
            .context("allocating the mosaic on the device")?;
        let idle = (0..PICTURES)
            .map(|_| {
                let mut host = HostBuffer::new(bytes);
                PinnedRange::lock(&dev.ctx, &mut host)?;
                Ok(Slab {
                    host: Arc::new(host),
                    ready: dev.sync_event()?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        stream.synchronize()?;
        Ok(Self {
            plan: plan.clone(),
            canvas,
            stream,
            idle,
            coming: Vec::new(),
            fence: dev.sync_event()?,
            fenced: false,
            marks: Vec::new(),
            stale: false,
            last: None,
            scalers: HashMap::new(),
        })
    }

    /// Where `slot`'s frame goes in the mosaic, for its lane set; None for an input with no
    /// tile.
    pub(super) fn target(&mut self, slot: &Slot) -> Result<Option<FrameMosaic<'_>>> {
        // Inputs joined or left: the picture is laid out again from dark grey, the tiles
        // written after waiting for it (a tile still being written in the old grid may
        // show until its input's next frame).
        if self.plan.refresh() {
            self.scalers.clear();
            let grey = vec![16u8; PixelFormat::Bgr24.bytes(self.plan.layout.canvas)];
            self.stream.memcpy_htod(&grey, &mut self.canvas)?;
            self.fence.record(&self.stream)?;
            self.fenced = true;
            self.stale = true;
        }
        let input = slot.desc.input.0;
        let Some(t) = self.plan.tile(input, slot.output_format)? else {
            return Ok(None);
        };
        let size = slot.size();
        let layout = self.plan.layout;
        let scaler = self
            .scalers
            .entry((input, size))
            .or_insert_with(|| Scaler::new(size, layout.picture_area(t, size)));
        let (canvas, _) = self.canvas.device_ptr(&self.stream);
        Ok(Some(FrameMosaic {
            canvas,
            canvas_width: layout.canvas.width,
            tile: layout.tile_area(t),
            scaler,
            download: self.plan.full.wants(usize::from(input)),
            fence: self.fenced.then_some(&self.fence),
        }))
    }

    /// A frame's tile was queued on the `streams` it names: a picture comes down after it
    /// where one is due (the streams are asked for only then).
    pub(super) fn written(
        &mut self,
        dev: &Device,
        streams: impl FnOnce() -> Vec<Arc<CudaStream>>,
    ) -> Result<()> {
        self.stale = true;
        if picture_due(self.last) {
            self.download(dev, &streams())?;
        }
        Ok(())
    }

    /// Queues the picture's download after the tiles written on `streams`, where a host
    /// buffer is free (none is while the sink holds them all: the picture is skipped).
    fn download(&mut self, dev: &Device, streams: &[Arc<CudaStream>]) -> Result<()> {
        let Some(at) = self
            .idle
            .iter()
            .position(|s| Arc::strong_count(&s.host) == 1)
        else {
            return Ok(());
        };
        let mut slab = self.idle.swap_remove(at);
        while self.marks.len() < streams.len() {
            self.marks.push(dev.sync_event()?);
        }
        for (s, mark) in streams.iter().zip(&self.marks) {
            mark.record(s)?;
            self.stream.wait(mark)?;
        }
        let host = Arc::get_mut(&mut slab.host).expect("no other reference (checked)");
        // The buffer is page-locked and held here until `ready` has completed.
        self.stream.memcpy_dtoh(&self.canvas, &mut host[..])?;
        slab.ready.record(&self.stream)?;
        self.fence.record(&self.stream)?;
        self.fenced = true;
        self.coming.push(slab);
        self.stale = false;
        self.last = Some(Instant::now());
        Ok(())
    }

    /// A picture whose download has completed (module doc, `Fetch`); `in_flight`: the
    /// frames on the GPU.
    pub(super) fn picture(
        &mut self,
        dev: &Device,
        fetch: Fetch,
        in_flight: usize,
    ) -> Result<Option<Picture>> {
        let quiet = in_flight == 0 && self.stale && self.coming.is_empty();
        if quiet && (fetch == Fetch::Last || (fetch == Fetch::Idle && picture_due(self.last))) {
            // Every frame has completed, so every tile is written: nothing to wait on.
            self.download(dev, &[])?;
        }
        let Some(first) = self.coming.first() else {
            return Ok(None);
        };
        if fetch == Fetch::Last {
            first
                .ready
                .synchronize()
                .context("waiting for the mosaic")?;
        } else if !first.ready.try_is_complete().context("polling the GPU")? {
            return Ok(None);
        }
        let slab = self.coming.remove(0);
        let picture = slab.host.clone();
        self.idle.push(slab);
        Ok(Some(picture))
    }
}
