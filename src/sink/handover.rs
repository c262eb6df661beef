//! Frames handed to a program that embeds framepipe (the Python package, `python/`): each
//! processed frame copied, with what it is (its input, place, time, size and format), into
//! a bounded channel that the program reads.
//!
//! Invariants: a frame goes in whole and in order, or not at all; while the reader is slow
//! the channel is full and `consume` waits, so a file's frames wait for it and a live
//! input's are dropped at its capture (the ring fills), as for any slow output; a wait ends
//! when the run is asked to stop, and a reader that went away ends the run (`Closed`).
//! Frames reach the reader in the format it asked for (`Handover::format`), converted
//! through BGR where the run negotiated another for its other consumers; each carries how
//! many frames its input has dropped so far (from the run's live figures, `Sink::status`).

use anyhow::Result;
use crossbeam_channel::{SendTimeoutError, Sender};

use super::{Flow, Frame, Sink};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;
use crate::stop::Stop;

/// One frame as the embedding program gets it.
#[derive(Debug)]
pub struct Handed {
    /// Which input (its `InputId`: the order of the inputs as given).
    pub input: usize,
    /// Its place in its input (0, 1, 2, …).
    pub index: u64,
    /// Its time as the source gave it: ticks and the seconds a tick lasts, as a fraction.
    pub pts: Option<(i64, (i32, i32))>,
    /// The same in seconds.
    pub seconds: Option<f64>,
    /// Its size and format.
    pub size: FrameSize,
    /// The format of `bytes`.
    pub format: PixelFormat,
    /// The pixels, packed (planes one after another for YUV).
    pub bytes: Vec<u8>,
    /// Frames its input has dropped so far (a live input the pipeline or the reader did
    /// not keep up with).
    pub dropped: u64,
}

/// Where and how frames are handed over: the channel, the format the reader asked for,
/// and the run's stop (a wait for the reader ends with it).
#[derive(Clone)]
pub struct HandTo {
    /// The channel the embedding program reads.
    pub to: Sender<Handed>,
    /// The format it asked for.
    pub format: PixelFormat,
    /// The run's stop.
    pub stop: Stop,
}

/// The output that hands frames over (module doc).
pub struct Handover {
    to: Sender<Handed>,
    format: PixelFormat,
    stop: Stop,
    /// A BGR frame between a negotiated format and the asked one.
    bgr: Vec<u8>,
    /// Each input's frames dropped so far, from the run's live figures.
    dropped: Vec<u64>,
}

impl Handover {
    /// Hands frames as `h` says.
    pub fn new(h: HandTo) -> Self {
        Self {
            to: h.to,
            format: h.format,
            stop: h.stop,
            bgr: Vec::new(),
            dropped: Vec::new(),
        }
    }

    /// `frame`'s pixels in the asked format.
    fn pixels(&mut self, frame: &Frame) -> Vec<u8> {
        let (size, from) = (frame.size(), frame.format());
        if from == self.format {
            return frame.bytes.to_vec();
        }
        let bgr = match from {
            PixelFormat::Bgr24 => frame.bytes,
            other => {
                self.bgr.resize(size.bytes(), 0);
                other.to_bgr(size, frame.bytes, &mut self.bgr);
                &self.bgr
            }
        };
        let mut out = vec![0; self.format.bytes(size)];
        match self.format {
            PixelFormat::Bgr24 => out.copy_from_slice(bgr),
            to => to.from_bgr(size, bgr, &mut out),
        }
        out
    }
}

impl Sink for Handover {
    fn verb(&self) -> &'static str {
        "handed over"
    }
    fn describe(&self) -> String {
        format!("frames handed to the embedding program ({})", self.format)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.dropped.clear();
        match live.inputs.is_empty() {
            true => self.dropped.push(live.dropped),
            false => self.dropped.extend(live.inputs.iter().map(|i| i.dropped)),
        }
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let d = frame.desc;
        let input = usize::from(d.input.0);
        let mut handed = Handed {
            input,
            index: d.index,
            pts: d.pts.map(|t| (t.ticks, t.base)),
            seconds: d.seconds(),
            size: frame.size(),
            format: self.format,
            bytes: self.pixels(frame),
            dropped: self.dropped.get(input).copied().unwrap_or(0),
        };
        loop {
            match self.to.send_timeout(handed, Stop::TICK) {
                Ok(()) => return Ok(Flow::Continue),
                Err(SendTimeoutError::Disconnected(_)) => return Ok(Flow::Quit),
                Err(SendTimeoutError::Timeout(back)) if !self.stop.is_requested() => handed = back,
                Err(SendTimeoutError::Timeout(_)) => return Ok(Flow::Continue),
            }
        }
    }
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
}
