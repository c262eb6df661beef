//! Frames handed to a program that embeds framepipe (the Python package, `python/`): each
//! processed frame copied, with what it is (its input, place, time, size and format), into
//! a bounded channel that the program reads; or, where the CUDA backend lent it on the
//! device (nothing else reads the frames, and the program takes them as the run makes them,
//! `Shaping::plain`, or fitted and laid out for a model, which the backend does after the
//! chain, `Shaping::on_device`: `backend::lend`), its device buffer's lease sent instead
//! of bytes; the same for a frame the CPU backend lent in host memory (`backend::host_lend`,
//! frames taken as they are made).
//!
//! Invariants: a frame goes in whole and in order, or not at all; while the reader is slow
//! the channel is full and `consume` waits, so a file's frames wait for it and a live
//! input's are dropped at its capture (the ring fills), as for any slow output; a wait ends
//! when the run is asked to stop, and a reader that went away ends the run (`Closed`).
//! Frames reach the reader as it asked (`Shaping`): in a pixel format, converted through
//! BGR where the run negotiated another for its other consumers, or as a model's input
//! (RGB bytes, or normalised RGB planes of 32- or 16-bit floats), resized to a size by the
//! geometry filters' own arithmetic (`scale`, `pad`, `crop`, on the CPU as the frame is
//! handed over); each carries how many frames its input has dropped so far (from the
//! run's live figures, `Sink::status`).

use std::collections::HashMap;

use anyhow::Result;
use crossbeam_channel::{SendTimeoutError, Sender};

use super::{Flow, Frame, Sink};
use crate::desc::Memory;
pub use crate::filter::fit::{fitting, unfitting, Fit};
use crate::filter::Chain;
use crate::frame::FrameSize;
use crate::pixel::lookup::Lookup;
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
    /// Its size as handed (after `Shaping::size`).
    pub size: FrameSize,
    /// Its size as the pipeline made it (what marks are drawn on).
    pub source: FrameSize,
    /// How `bytes` lay the pixels out.
    pub layout: Layout,
    /// The pixels, packed (planes one after another for YUV and the float layouts;
    /// floats in the machine's byte order); empty where they are lent (`memory`).
    pub bytes: Vec<u8>,
    /// Where the pixels are: `bytes`, or a buffer the CUDA backend lends on the device or
    /// the CPU backend in host memory (laid out the same way), until the last copy of this
    /// is dropped.
    pub memory: Memory,
    /// Frames its input has dropped so far (a live input the pipeline or the reader did
    /// not keep up with).
    pub dropped: u64,
    /// Its input is live (a camera, a stream: frames are dropped rather than waited for);
    /// false for a file, whose every frame is handed over.
    pub live: bool,
    /// With `--detect`: the newest boxes found on its input as of this frame (in the
    /// pixels of `source`), and the frame they were found on (this one, for a file's
    /// detected frame; an earlier one, for a live input's); None before any.
    pub detections: Option<(u64, Vec<crate::detect::Detection>)>,
}

/// Where and how frames are handed over: the channel, the format the reader asked for,
/// and the run's stop (a wait for the reader ends with it).
#[derive(Clone)]
pub struct HandTo {
    /// The channel the embedding program reads.
    pub to: Sender<Handed>,
    /// What it asked for.
    pub shaping: Shaping,
    /// The run's stop.
    pub stop: Stop,
    /// The marks it asks to be drawn into each input's frames (`sink::marks`).
    pub marks: super::marks::Marks,
}

/// How the pixels of a handed frame lie in its bytes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Layout {
    /// A pixel format, as the command line writes it.
    Pixels(PixelFormat),
    /// RGB, a byte a channel, pixels interleaved: (height, width, 3).
    Rgb24,
    /// Planes of R, G and B as floats, `(value / 255 - mean) / std` a channel, computed in
    /// 32 bits and stored in 32 (`half` false) or 16: (3, height, width).
    Planar {
        /// Stored as IEEE half precision (rounded to nearest, ties to even).
        half: bool,
        /// Subtracted from each channel (R, G, B) after scaling to 0..1.
        mean: [f32; 3],
        /// Each channel is divided by it, then.
        std: [f32; 3],
    },
}

impl Layout {
    /// Its name: the pixel format's, "rgb24", "rgbf32" or "rgbf16".
    pub fn name(&self) -> String {
        match self {
            Layout::Pixels(f) => f.to_string(),
            Layout::Rgb24 => "rgb24".into(),
            Layout::Planar { half: false, .. } => "rgbf32".into(),
            Layout::Planar { half: true, .. } => "rgbf16".into(),
        }
    }

    /// The array's shape for a `size` frame: (height, width, 3) for BGR and RGB,
    /// (height, width) for gray, (height * 3 / 2, width) for I420 and NV12 (their planes one
    /// after another), (3, height, width) for the float planes.
    pub fn dims(&self, size: FrameSize) -> Vec<usize> {
        let (w, h) = (size.width, size.height);
        match self {
            Layout::Pixels(PixelFormat::Bgr24) | Layout::Rgb24 => vec![h, w, 3],
            Layout::Pixels(PixelFormat::Gray) => vec![h, w],
            Layout::Pixels(f) => vec![f.bytes(size) / w.max(1), w],
            Layout::Planar { .. } => vec![3, h, w],
        }
    }

    /// The bytes a `size` frame takes, laid out so.
    pub fn bytes(&self, size: FrameSize) -> usize {
        match self {
            Layout::Pixels(f) => f.bytes(size),
            _ => self.dims(size).iter().product::<usize>() * usize::from(self.element().1 / 8),
        }
    }

    /// A model's layout as lookup tables (`pixel::lookup`): RGB bytes, or RGB planes of
    /// `(value / 255 - mean) / std` computed in 32 bits and stored as 32- or 16-bit floats
    /// (NumPy's `astype(float16)`); None for a pixel format.
    pub fn lookup(&self) -> Option<Lookup> {
        match *self {
            Layout::Pixels(_) => None,
            Layout::Rgb24 => Some(Lookup::rgb24()),
            Layout::Planar { half, mean, std } => {
                let value = move |c: usize, v: u8| (f32::from(v) / 255.0 - mean[c]) / std[c];
                Some(match half {
                    true => Lookup::planes(move |c, v| f16_bits(value(c, v)).to_ne_bytes()),
                    false => Lookup::planes(move |c, v| value(c, v).to_ne_bytes()),
                })
            }
        }
    }

    /// An element's kind and bits: (false, 8) for bytes, (true, 32 or 16) for floats.
    pub fn element(&self) -> (bool, u8) {
        match self {
            Layout::Planar { half, .. } => (true, if *half { 16 } else { 32 }),
            _ => (false, 8),
        }
    }
}

/// What the reader asked for: a size (and how to fit a frame to it), and a layout.
#[derive(Clone, Debug, PartialEq)]
pub struct Shaping {
    /// Every frame resized to this size, fitted as it says.
    pub size: Option<(FrameSize, Fit)>,
    /// How the pixels are laid out.
    pub layout: Layout,
}

impl Shaping {
    /// Frames as the run makes them, in a pixel format and size of their own: what the
    /// CUDA backend can lend on the device as they are.
    pub fn plain(&self) -> bool {
        self.size.is_none() && matches!(self.layout, Layout::Pixels(_))
    }

    /// Frames fitted to a size and laid out for a model (RGB bytes or float planes): what
    /// the CUDA backend can make on the device, after the chain, and lend there.
    pub fn on_device(&self) -> Option<crate::backend::Shape> {
        let (size, fit) = self.size?;
        let lookup = self.layout.lookup()?;
        Some(crate::backend::Shape { size, fit, lookup })
    }

    /// The format the run is asked for, for this consumer: the pixel format asked for,
    /// else BGR, which the resizing and the model layouts start from.
    pub fn format(&self) -> PixelFormat {
        match (self.size, self.layout) {
            (None, Layout::Pixels(f)) => f,
            _ => PixelFormat::Bgr24,
        }
    }
}

/// `fitting`'s chain, checked: it makes its size, and its largest frame between steps
/// (a crop's scaled frame) takes at most a quarter of the memory available now.
fn fitted(size: FrameSize, to: FrameSize, fit: Fit) -> Result<Chain, FitError> {
    let chain = fitting(size, to, fit);
    chain.output_size(size)?;
    let most = chain.largest_frame(size) as u64;
    match crate::host::memory_available() {
        Some(free) if most > free / 4 => Err(FitError::TooLarge {
            chain: chain.to_string(),
            most,
            free,
        }),
        _ => Ok(chain),
    }
}

/// Why an input's frames can't be fitted to the size a program asked for.
#[derive(Debug, thiserror::Error)]
enum FitError {
    /// The fitting chain can't take the input's size.
    #[error(transparent)]
    Geometry(#[from] crate::filter::geometry::GeometryError),
    /// A frame on the way would take too much of the memory.
    #[error("{chain} makes a frame of {} on the way, more than a quarter of the available memory ({})", crate::budget::human(*most), crate::budget::human(*free))]
    TooLarge {
        /// The chain.
        chain: String,
        /// Its largest frame's bytes.
        most: u64,
        /// The memory available.
        free: u64,
    },
}

/// The output that hands frames over (module doc).
pub struct Handover {
    to: Sender<Handed>,
    shaping: Shaping,
    stop: Stop,
    /// A BGR frame between a negotiated format and the asked one.
    bgr: Vec<u8>,
    /// The resized BGR frame.
    resized: Vec<u8>,
    /// The fitting chain for each input size met, or why there is none.
    fits: HashMap<FrameSize, Result<Chain, FitError>>,
    /// Each input's frames dropped so far, and whether it is live, from the run's live
    /// figures.
    dropped: Vec<(u64, bool)>,
    /// Each input's newest boxes (`--detect`).
    seen: Option<crate::detect::seen::Seen>,
}

impl Handover {
    /// Hands frames as `h` says.
    pub fn new(h: HandTo) -> Self {
        Self {
            to: h.to,
            shaping: h.shaping,
            stop: h.stop,
            bgr: Vec::new(),
            resized: Vec::new(),
            fits: HashMap::new(),
            dropped: Vec::new(),
            seen: None,
        }
    }

    /// Each frame handed with its input's newest boxes, kept in `seen` (`--detect`).
    pub fn with_detections(mut self, seen: Option<crate::detect::seen::Seen>) -> Self {
        self.seen = seen;
        self
    }

    /// `frame`'s pixels as asked, and their size; an error where its size can't be
    /// fitted to the one asked for (a crop of a frame thousands of times wider than high
    /// would scale it past the largest side).
    fn pixels(&mut self, frame: &Frame) -> Result<(Vec<u8>, FrameSize)> {
        let (size, from) = (frame.size(), frame.format());
        if let (None, Layout::Pixels(f)) = (self.shaping.size, self.shaping.layout) {
            if f == from {
                return Ok((frame.bytes.to_vec(), size));
            }
        }
        if from != PixelFormat::Bgr24 {
            self.bgr.resize(size.bytes(), 0);
            from.to_bgr(size, frame.bytes, &mut self.bgr);
        }
        let bgr = match from {
            PixelFormat::Bgr24 => frame.bytes,
            _ => &self.bgr[..],
        };
        let (bgr, size) = match self.shaping.size {
            None => (bgr, size),
            Some((to, fit)) => {
                let chain = self
                    .fits
                    .entry(size)
                    .or_insert_with(|| fitted(size, to, fit));
                let chain = chain.as_ref().map_err(|e| {
                    anyhow::anyhow!(
                        "fitting input {}'s {size} frames to {to} ({fit:?}): {e}",
                        frame.desc.input.0
                    )
                })?;
                self.resized.resize(to.bytes(), 0);
                chain.apply_reference(size, bgr, &mut self.resized);
                (&self.resized[..], to)
            }
        };
        Ok((laid_out(self.shaping.layout, size, bgr), size))
    }
}

/// A `size` BGR frame laid out as `layout` says.
fn laid_out(layout: Layout, size: FrameSize, bgr: &[u8]) -> Vec<u8> {
    match (layout, layout.lookup()) {
        (Layout::Pixels(PixelFormat::Bgr24), _) => bgr.to_vec(),
        (_, Some(lookup)) => lookup.apply(size, bgr),
        (Layout::Pixels(to), None) => {
            let mut out = vec![0; to.bytes(size)];
            to.from_bgr(size, bgr, &mut out);
            out
        }
        (_, None) => unreachable!("every model layout is a lookup"),
    }
}

/// The IEEE half-precision bits nearest `v` (ties to even), as NumPy's `astype(float16)`
/// (the `half` crate's conversion).
pub fn f16_bits(v: f32) -> u16 {
    half::f16::from_f32(v).to_bits()
}

impl Sink for Handover {
    fn verb(&self) -> &'static str {
        "handed over"
    }
    fn describe(&self) -> String {
        format!(
            "frames handed to the embedding program ({})",
            self.shaping.layout.name()
        )
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.dropped.clear();
        match live.inputs.is_empty() {
            true => self.dropped.push((live.dropped, false)),
            false => self
                .dropped
                .extend(live.inputs.iter().map(|i| (i.dropped, i.live))),
        }
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let d = frame.desc;
        let input = usize::from(d.input.0);
        let (bytes, size) = match d.memory {
            Memory::Host => self.pixels(frame)?,
            Memory::HostLent { .. } | Memory::Device { .. } => {
                let as_made = self.shaping.plain() && self.shaping.format() == d.format;
                // (Whether the layout is a model's, without making its tables for every frame.)
                let model = matches!(self.shaping.layout, Layout::Rgb24 | Layout::Planar { .. });
                let shaped = model && self.shaping.size.is_some_and(|(to, _)| to == d.size);
                crate::ensure_kept!(
                    as_made || shaped,
                    "a {} {} frame lent for a reader that asked for {:?}",
                    d.size,
                    d.format,
                    self.shaping
                );
                (Vec::new(), frame.size())
            }
        };
        let mut handed = Handed {
            input,
            index: d.index,
            pts: d.pts.map(|t| (t.ticks, t.base)),
            seconds: d.seconds(),
            size,
            source: frame.size(),
            layout: self.shaping.layout,
            bytes,
            memory: d.memory.clone(),
            dropped: self.dropped.get(input).map_or(0, |d| d.0),
            live: self.dropped.get(input).is_some_and(|d| d.1),
            detections: self
                .seen
                .as_ref()
                .and_then(|s| s.last(input))
                .map(|f| (f.index, f.boxes)),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn halves_round_as_ieee_says() {
        for (v, bits) in [
            (0.0f32, 0x0000u16),
            (-0.0, 0x8000),
            (1.0, 0x3c00),
            (-2.0, 0xc000),
            (0.1, 0x2e66),
            (65504.0, 0x7bff),
            (65520.0, 0x7c00), // halfway past the largest: to infinity (even)
            (f32::INFINITY, 0x7c00),
            (5.960_464_5e-8, 0x0001), // the smallest subnormal
            (2.980_232_2e-8, 0x0000), // half of it: a tie, to even (zero)
            (4.470_348_4e-8, 0x0001), // three quarters of it: up
            (6.103_515_6e-5, 0x0400), // the smallest normal
            (1.000_488_3, 0x3c00),    // halfway between 1 and the next half: to even
            (1.001_464_8, 0x3c02),    // halfway between the next two: to even (up)
        ] {
            assert_eq!(f16_bits(v), bits, "{v}");
        }
        assert_eq!(f16_bits(f32::NAN) & 0x7e00, 0x7e00);
    }

    #[test]
    fn fits_keep_the_aspect_and_centre() {
        let hd = FrameSize::new(1920, 1080);
        let text = |to, fit| fitting(hd, to, fit).to_string();
        let chain = |s: &str| s.parse::<Chain>().unwrap().to_string();
        let sq = FrameSize::new(640, 640);
        assert_eq!(
            text(sq, Fit::Letterbox),
            chain("scale:640:360,pad:640:640:0:140")
        );
        assert_eq!(text(sq, Fit::Crop), chain("scale:1138:640,crop:640:640"));
        assert_eq!(text(sq, Fit::Stretch), chain("scale:640:640"));
        // A portrait target, and one wider than the frame.
        let tall = FrameSize::new(360, 1280);
        assert_eq!(
            text(tall, Fit::Letterbox),
            chain("scale:360:203,pad:360:1280:0:538")
        );
        assert_eq!(
            text(tall, Fit::Crop),
            chain("scale:2276:1280,crop:360:1280")
        );
        let wide = FrameSize::new(1000, 100);
        assert_eq!(
            text(wide, Fit::Letterbox),
            chain("scale:178:100,pad:1000:100:411:0")
        );
        assert_eq!(text(wide, Fit::Crop), chain("scale:1000:563,crop:1000:100"));
        // Every fit makes the size asked for, down to one pixel.
        for to in [
            sq,
            tall,
            wide,
            FrameSize::new(1, 1),
            FrameSize::new(1, 4000),
        ] {
            for fit in [Fit::Letterbox, Fit::Crop, Fit::Stretch] {
                let chain = fitting(hd, to, fit);
                assert_eq!(chain.output_size(hd), Ok(to), "{chain} for {to}");
            }
        }
    }

    #[test]
    fn planes_are_rgb_normalised() {
        let size = FrameSize::new(2, 1);
        let bgr = [0u8, 128, 255, 10, 20, 30];
        let layout = Layout::Planar {
            half: false,
            mean: [0.5; 3],
            std: [0.25; 3],
        };
        let out = laid_out(layout, size, &bgr);
        let f: Vec<f32> = out
            .chunks_exact(4)
            .map(|b| f32::from_ne_bytes(b.try_into().unwrap()))
            .collect();
        let want = |v: u8| (f32::from(v) / 255.0 - 0.5) / 0.25;
        assert_eq!(
            f,
            [want(255), want(30), want(128), want(20), want(0), want(10)]
        );
        let rgb = laid_out(Layout::Rgb24, size, &bgr);
        assert_eq!(rgb, [255, 128, 0, 30, 20, 10]);
    }
}
