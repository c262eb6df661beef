//! What a person looks at and steers the run from: the window (`window`, with its timeline
//! strip `strip` and the X screen's size `xscreen`), the browser view (`web`), and the
//! mosaic of several inputs (`mosaic`, labelled with `draw`'s font). A display shows frames,
//! the live figures and the mosaic's pictures, and answers with what the person asked for
//! (`Flow`: quit, pause, a filter preset, a tile; the keys both share are `pipeline_key`);
//! it writes nothing that must be finalized (that is an output's job: `output`). It becomes
//! one of the run's sinks through `boxed`.
//!
//! Invariants: a display is called on the sink loop's thread only (highgui calls stay on
//! one thread); `idle` keeps it responsive when no frame comes; `finish` is called once;
//! nothing here imports `source` (the media facts are `media`).

pub mod mosaic;
#[cfg(feature = "opencv")]
pub mod strip;
#[cfg(feature = "ffmpeg")]
pub mod web;
#[cfg(feature = "opencv")]
pub mod window;
#[cfg(feature = "opencv")]
mod xscreen;

use anyhow::Result;

use crate::pixel::PixelFormat;
pub use crate::sink::{bgr, Flow, Frame, Sink};

/// Why no window can be shown here, where none can: no display is named, or this build has
/// no window (no OpenCV).
pub fn why_no_window() -> Option<&'static str> {
    #[cfg(feature = "opencv")]
    let named = window::display_named();
    #[cfg(not(feature = "opencv"))]
    let named = crate::host::display_named(false);
    match (named, cfg!(feature = "opencv")) {
        (false, _) => Some("no display to show a window on (DISPLAY is not set)"),
        (true, false) => Some("this build has no window (it has no OpenCV)"),
        (true, true) => None,
    }
}

/// The settings the window's keys change, as the window last asked for them.
#[derive(Clone, Debug)]
pub struct Knobs {
    /// Ring buffers left pageable.
    pub pageable: bool,
    /// Bands of a frame that finds the GPU idle.
    pub bands: usize,
    /// Frame height (the most bands there can be).
    pub height: usize,
}

/// What a key that acts on the running pipeline asks for (the window's and the browser
/// view's keys share this table): **1**–**9** a filter preset, **p** page-locked ↔ pageable,
/// **b**/**-** and **B**/**+**/**=** halve and double the bands (`knobs` keeps the current
/// settings), **space** pause, **.** step, **r** reload; None for any other key.
pub fn pipeline_key(key: u8, knobs: &mut Knobs) -> Result<Option<Flow>> {
    use crate::backend::Control;
    let k = knobs;
    Ok(Some(match key {
        b'1'..=b'9' => {
            let chain: crate::filter::Chain =
                crate::filter::PRESETS[usize::from(key - b'1')].parse()?;
            Flow::Control(Control::Chain(chain))
        }
        b'p' | b'P' => {
            k.pageable = !k.pageable;
            Flow::Control(Control::Pageable(k.pageable))
        }
        b'b' | b'-' => {
            k.bands = (k.bands / 2).max(1);
            Flow::Control(Control::Bands(k.bands))
        }
        b'B' | b'+' | b'=' => {
            k.bands = (k.bands * 2).min(64).min(k.height);
            Flow::Control(Control::Bands(k.bands))
        }
        b' ' => Flow::TogglePause,
        b'.' => Flow::Step,
        b'r' | b'R' => Flow::Reload,
        _ => return Ok(None),
    }))
}

/// The formats a window takes (it shows BGR).
pub const WINDOW_TAKES: &[PixelFormat] = &[PixelFormat::Bgr24];

/// Something a person looks at and steers the run from (module doc).
pub trait Display {
    /// One word for the summary.
    fn verb(&self) -> &'static str {
        "shown"
    }
    /// One line for the log.
    fn describe(&self) -> String;
    /// Shows one processed frame (BGR: what the run negotiated for displays) and says what
    /// the person wants next.
    fn show(&mut self, frame: &Frame) -> Result<Flow>;
    /// Takes the mosaic as the backend composed it (packed BGR, the mosaic's size).
    fn composed(&mut self, _picture: &crate::backend::Picture) -> Result<()> {
        Ok(())
    }
    /// The live figures, before each frame.
    fn status(&mut self, _live: &crate::stats::Live) {}
    /// Whether `status` should carry the recent frames' timeline (the window's strip is on).
    fn wants_timeline(&self) -> bool {
        false
    }
    /// Called when no frame came for a while (keeps the display responsive).
    fn idle(&mut self) -> Result<Flow> {
        Ok(Flow::Continue)
    }
    /// Closes (a window may first keep its last frame up until q); called once.
    fn finish(&mut self) -> Result<()>;
}

/// `display` as one of the run's sinks.
pub fn boxed(display: impl Display + 'static) -> Box<dyn Sink> {
    Box::new(AsSink(display))
}

/// A display among the run's sinks.
struct AsSink<D>(D);

impl<D: Display> Sink for AsSink<D> {
    fn verb(&self) -> &'static str {
        self.0.verb()
    }
    fn describe(&self) -> String {
        self.0.describe()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        self.0.show(frame)
    }
    fn composed(&mut self, picture: &crate::backend::Picture) -> Result<()> {
        self.0.composed(picture)
    }
    fn status(&mut self, live: &crate::stats::Live) {
        self.0.status(live)
    }
    fn wants_timeline(&self) -> bool {
        self.0.wants_timeline()
    }
    fn idle(&mut self) -> Result<Flow> {
        self.0.idle()
    }
    fn finish(&mut self) -> Result<()> {
        self.0.finish()
    }
}
