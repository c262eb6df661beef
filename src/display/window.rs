//! The display: `imshow` + `waitKey` on the thread that runs the sink (the main thread).
//!
//! Keys: **q**/**Esc** (or closing the window) quit; **h** toggles the overlay of live
//! figures; **1**…**9** pick a filter preset; **p** toggles page-locked/pageable buffers;
//! **b**/**B** (or **-**/**=**) halve/double the bands; **space** pauses; **.** shows the
//! next frame and stays paused; **s** saves the shown frame as PNG (without the overlay or
//! the strip); **t** shows the last traced frames' timeline under the picture (`strip`);
//! **r** reloads the chain's kernel files (a failed reload's message stays on the picture
//! until one works); with several inputs, **Tab** (or **n**) or a click selects a tile of the
//! mosaic and **Enter** (**z**, or a double click) shows it alone (`mosaic`). A file plays at its own rate (the capture thread paces it) and its last
//! frame stays up until q. Overlay text sits on a darkened backdrop and is sized in screen
//! pixels, whatever the window's scale.
//!
//! Qt aborts the whole process when it cannot reach a display, so `check_display` must pass
//! before the first highgui call.

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use opencv::core::{Mat, Point, Rect, Scalar, Vec3b, Vector};
use opencv::prelude::*;
use opencv::{highgui, imgcodecs};

use super::Display;
use super::{strip, Flow, Frame, Knobs};
use crate::frame::FrameSize;
use crate::stats::Live;
use crate::stop::Stop;

/// The display window, with its keys and overlay.
pub struct Window {
    /// What it was opened as (fixed from then on).
    settings: Settings,
    shown: bool,
    knobs: Knobs,
    /// The figures drawn over the picture.
    text: Overlay,
    /// A copy of the last frame shown (for `s`, and to draw the overlay on).
    last: Mat,
    canvas: Mat,
    saved: u64,
    /// When a Shift key was last seen.
    shift_at: Option<Instant>,
    /// The frame size the window was last sized for.
    sized: Option<FrameSize>,
    /// The timeline strip is on (`t`).
    strip: bool,
    /// The last few traced frames, laid out (while the strip is on).
    timeline: Option<std::sync::Arc<crate::trace::Layout>>,
    /// The canvas height the window was last sized for (the picture, plus the strip).
    canvas_rows: i32,
    /// Left clicks on the picture not yet handed on (picture x, y, and whether double),
    /// filled by highgui's mouse callback during `wait_key`.
    clicks: std::sync::Arc<std::sync::Mutex<Vec<(i32, i32, bool)>>>,
}

/// What a window is opened as (its settings, apart from what showing frames changes).
struct Settings {
    title: String,
    /// Keep the last frame up at the end of the input until q, unless this stop is asked.
    hold: Option<Stop>,
    /// The screen's size, where the X server said.
    screen: Option<(u32, u32)>,
}

/// The text drawn over the picture.
#[derive(Default)]
struct Overlay {
    /// The figures are on (`h`).
    on: bool,
    lines: Vec<String>,
    /// A message shown whatever `on` says (a failed kernel reload).
    note: Vec<String>,
}

impl Window {
    /// Opens the window `title` (after `check_display` passed).
    pub fn open(title: &str, knobs: Knobs, hold: Option<Stop>) -> Result<Self> {
        // A resizable window (sized to each frame, or scaled down to fit the screen) keeping
        // the frame's aspect; the saved frame (`s`) stays full size.
        let flags = highgui::WINDOW_NORMAL | highgui::WINDOW_KEEPRATIO | highgui::WINDOW_GUI_NORMAL;
        highgui::named_window(title, flags).context("opening the window")?;
        let screen = std::env::var("DISPLAY")
            .ok()
            .and_then(|d| super::xscreen::screen_size(&d));
        let clicks = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = clicks.clone();
        highgui::set_mouse_callback(
            title,
            Some(Box::new(move |event, x, y, _flags| {
                let double = match event {
                    highgui::EVENT_LBUTTONDOWN => false,
                    highgui::EVENT_LBUTTONDBLCLK => true,
                    _ => return,
                };
                if let Ok(mut c) = seen.lock() {
                    c.push((x, y, double));
                }
            })),
        )
        .context("watching the window's mouse")?;
        Ok(Self {
            settings: Settings {
                title: title.to_string(),
                hold,
                screen,
            },
            shown: false,
            knobs,
            text: Overlay::default(),
            last: Mat::default(),
            canvas: Mat::default(),
            saved: 0,
            shift_at: None,
            sized: None,
            strip: false,
            timeline: None,
            canvas_rows: 0,
            clicks,
        })
    }

    /// Reads keys and the window's state; `delay_ms` keeps the GUI responsive meanwhile.
    fn poll(&mut self, delay_ms: i32) -> Result<Flow> {
        let key = highgui::wait_key(delay_ms)?;
        if key >= 0 {
            let mut code = (key & 0xff) as u8;
            // OpenCV's Qt windows report Shift as a key of its own (0xe1, 0xe2 from the X
            // keysyms Shift_L/Shift_R) and the letter in lower case: a letter soon after a
            // Shift is taken as upper case.
            if matches!(code, 0xe1 | 0xe2) {
                self.shift_at = Some(Instant::now());
                return Ok(Flow::Continue);
            }
            let shifted = self
                .shift_at
                .take()
                .is_some_and(|t| t.elapsed() < Duration::from_millis(1500));
            if shifted {
                code = code.to_ascii_uppercase();
            }
            let flow = self.key(code)?;
            if flow != Flow::Continue {
                return Ok(flow);
            }
        }
        let click = self.clicks.lock().ok().and_then(|mut c| c.pop());
        if let Some((x, y, double)) = click {
            return Ok(Flow::Pick { x, y, double });
        }
        if self.closed()? {
            return Ok(Flow::Quit);
        }
        Ok(Flow::Continue)
    }

    /// Whether the user closed the window once it showed a frame. Asked before each frame
    /// too: highgui's `imshow` shows a hidden window again, so a close that Qt handled in
    /// another highgui call than `poll`'s `wait_key` would otherwise be undone unseen.
    fn closed(&self) -> Result<bool> {
        Ok(self.shown
            && highgui::get_window_property(&self.settings.title, highgui::WND_PROP_VISIBLE)? < 1.0)
    }

    fn key(&mut self, key: u8) -> Result<Flow> {
        if let Some(flow) = super::pipeline_key(key, &mut self.knobs)? {
            return Ok(flow);
        }
        Ok(match key {
            27 | b'q' | b'Q' => Flow::Quit,
            b'\t' | b'n' | b'N' => Flow::NextTile,
            b'\r' | b'\n' | b'z' | b'Z' => Flow::Alone,
            b'h' | b'H' => {
                self.text.on = !self.text.on;
                self.redraw()?;
                Flow::Continue
            }
            b't' | b'T' => {
                self.strip = !self.strip;
                self.redraw()?;
                Flow::Continue
            }
            b's' | b'S' => {
                self.save()?;
                Flow::Continue
            }
            _ => Flow::Continue,
        })
    }

    /// Saves the last frame shown (without the overlay) as framepipe-PID-N.png.
    fn save(&mut self) -> Result<()> {
        if self.last.empty() {
            return Ok(());
        }
        let path = format!("framepipe-{}-{}.png", std::process::id(), self.saved);
        if !imgcodecs::imwrite(&path, &self.last, &Vector::new())? {
            anyhow::bail!("could not write {path}");
        }
        self.saved += 1;
        crate::info!("saved {path}");
        Ok(())
    }

    /// Window pixels per canvas pixel: the image area's width over the frame's (the window
    /// may be scaled to fit the screen, or resized by the user).
    fn scale(&self) -> f64 {
        let frame_w = f64::from(self.last.cols().max(1));
        match highgui::get_window_image_rect(&self.settings.title) {
            Ok(r) if r.width > 0 => f64::from(r.width) / frame_w,
            _ => self.sized.map_or(1.0, |s| {
                f64::from(fit(s, self.settings.screen).0) / s.width as f64
            }),
        }
    }

    /// Shows the last frame, with the overlay, the note and the strip where they are on.
    /// They are drawn on a copy (`canvas`): the frame `s` saves never holds them.
    fn redraw(&mut self) -> Result<()> {
        if self.last.empty() {
            return Ok(());
        }
        let scale = self.scale();
        let ink = strip::Ink::new(scale);
        let strip_rows = self.timeline.as_ref().map_or(0, |l| l.rows.len()).max(3);
        let strip_h = if self.strip {
            strip::height(&ink, strip_rows)
        } else {
            0
        };
        let rows = self.last.rows() + strip_h;
        if rows != self.canvas_rows {
            // The strip goes under the picture: the window grows by its height, at the
            // window's scale, so the picture keeps its size.
            if self.canvas_rows != 0 {
                let w = (f64::from(self.last.cols()) * scale).round() as i32;
                let h = (f64::from(rows) * scale).round() as i32;
                highgui::resize_window(&self.settings.title, w.max(1), h.max(1))?;
            }
            self.canvas_rows = rows;
        }
        if !self.text.on && self.text.note.is_empty() && !self.strip {
            highgui::imshow(&self.settings.title, &self.last).context("showing a frame")?;
            return Ok(());
        }
        if self.strip {
            let mut below = Mat::new_rows_cols_with_default(
                strip_h,
                self.last.cols(),
                self.last.typ(),
                Scalar::new(28.0, 28.0, 28.0, 0.0),
            )?;
            let mut both = Vector::<Mat>::new();
            both.push(self.last.clone());
            both.push(std::mem::take(&mut below));
            opencv::core::vconcat(&both, &mut self.canvas)?;
            strip::draw(
                &mut self.canvas,
                self.last.rows(),
                &ink,
                self.timeline.as_deref(),
            )?;
        } else {
            self.last.copy_to(&mut self.canvas)?;
        }
        let yellow = Scalar::new(80.0, 255.0, 255.0, 0.0);
        let red = Scalar::new(80.0, 80.0, 255.0, 0.0);
        let overlay = self
            .text
            .lines
            .iter()
            .filter(|_| self.text.on)
            .map(|l| (l, yellow));
        let lines: Vec<_> = overlay
            .chain(self.text.note.iter().map(|l| (l, red)))
            .collect();
        if !lines.is_empty() {
            let widest = lines
                .iter()
                .map(|(l, _)| ink.text_width(l))
                .collect::<Result<Vec<_>>>()?
                .into_iter()
                .max()
                .unwrap_or(0);
            let h = ink.line() * lines.len() as i32 + ink.px(10.0);
            strip::backdrop(&mut self.canvas, Rect::new(0, 0, widest + ink.px(20.0), h))?;
        }
        for (i, (line, ink_colour)) in lines.into_iter().enumerate() {
            let at = Point::new(ink.px(10.0), ink.px(18.0) + ink.line() * i as i32);
            ink.text(&mut self.canvas, line, at, ink_colour)?;
        }
        highgui::imshow(&self.settings.title, &self.canvas).context("showing a frame")?;
        Ok(())
    }
}

impl Display for Window {
    fn verb(&self) -> &'static str {
        "shown"
    }
    fn describe(&self) -> String {
        format!(
            "window '{}' (q quits, h shows figures and keys)",
            self.settings.title
        )
    }
    fn status(&mut self, live: &Live) {
        if self.text.on {
            self.text.lines = live.lines();
        }
        self.text.note.clone_from(&live.note);
        if self.strip && live.timeline.is_some() {
            self.timeline.clone_from(&live.timeline);
        }
    }
    fn wants_timeline(&self) -> bool {
        self.strip
    }
    fn show(&mut self, frame: &Frame) -> Result<Flow> {
        if self.closed()? {
            return Ok(Flow::Quit);
        }
        let (size, frame) = (frame.size(), super::bgr(frame, "the window")?);
        let mat =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, frame)?;
        mat.copy_to(&mut self.last)?;
        if self.sized != Some(size) {
            let (w, h) = fit(size, self.settings.screen);
            highgui::resize_window(&self.settings.title, w as i32, h as i32)?;
            self.sized = Some(size);
        }
        self.redraw()?;
        self.shown = true;
        self.poll(1)
    }
    fn idle(&mut self) -> Result<Flow> {
        self.poll(5)
    }
    fn finish(&mut self) -> Result<()> {
        // The input ended (nobody asked to stop): keep the last frame up, like a player.
        if let Some(stop) = self
            .settings
            .hold
            .take()
            .filter(|s| self.shown && !s.is_requested())
        {
            crate::info!(
                "end of the input: the last frame stays up (q closes, --exit-at-end skips this)"
            );
            while !stop.is_requested() {
                if self.poll(30)? == Flow::Quit {
                    break;
                }
            }
        }
        highgui::destroy_all_windows()?;
        let _ = highgui::wait_key(1);
        Ok(())
    }
}

/// The window size for `size` frames: the frame's own, or scaled down (keeping the aspect)
/// to 90 % of the screen where it is larger.
fn fit(size: FrameSize, screen: Option<(u32, u32)>) -> (u32, u32) {
    let (w, h) = fit_within(size, screen);
    (w.max(1), h.max(1))
}

/// The largest picture a window shows unscaled on this display: 90 % of the screen (None
/// where the X server did not say).
pub fn unscaled_area() -> Option<FrameSize> {
    let (w, h) = std::env::var("DISPLAY")
        .ok()
        .and_then(|d| super::xscreen::screen_size(&d))?;
    Some(FrameSize::new(
        (0.9 * f64::from(w)) as usize,
        (0.9 * f64::from(h)) as usize,
    ))
}

fn fit_within(size: FrameSize, screen: Option<(u32, u32)>) -> (u32, u32) {
    let (w, h) = (size.width as f64, size.height as f64);
    let Some((sw, sh)) = screen else {
        return (w as u32, h as u32);
    };
    let scale = (0.9 * f64::from(sw) / w)
        .min(0.9 * f64::from(sh) / h)
        .min(1.0);
    ((w * scale) as u32, (h * scale) as u32)
}

/// What `check_display` says when a stop came while the display was being asked.
pub const STOPPED_WAITING: &str = "stopped while waiting for the X display to answer";

/// How long an X server may take to answer the connection setup before the display is
/// called frozen.
const DISPLAY_ANSWER: std::time::Duration = std::time::Duration::from_secs(3);

/// Whether a display is named at all: DISPLAY, or a Qt platform that needs none.
pub fn display_named() -> bool {
    crate::host::display_named(true)
}

/// Why no window can be opened here; each message says what to do instead.
#[derive(Debug, thiserror::Error)]
pub enum DisplayError {
    /// DISPLAY is not set.
    #[error("no display to show a window on (DISPLAY is not set); run with --headless, optionally with --output FILE")]
    NotSet,
    /// Nothing listens at DISPLAY.
    #[error(
        "cannot reach the X display '{0}'; run with --headless, optionally with --output FILE"
    )]
    Unreachable(String),
    /// The probe's thread could not start.
    #[error("probing the X display: {0}")]
    Probe(std::io::Error),
    /// A stop came while waiting.
    #[error("{STOPPED_WAITING}")]
    Stopped,
    /// A server that accepts and does not answer.
    #[error("the X display '{display}' accepted a connection but did not answer within {} s (a frozen X server?); run with --headless, optionally with --output FILE", DISPLAY_ANSWER.as_secs())]
    Silent {
        /// DISPLAY.
        display: String,
    },
}

/// Checks that a window can be opened here, with a message that says what to do if not.
pub fn check_display() -> Result<(), DisplayError> {
    if let Ok(p) = std::env::var("QT_QPA_PLATFORM") {
        if matches!(p.as_str(), "offscreen" | "minimal" | "vnc") {
            return Ok(());
        }
    }
    let display = std::env::var("DISPLAY").unwrap_or_default();
    if display.is_empty() {
        return Err(DisplayError::NotSet);
    }
    if !x_server_reachable(&display) {
        return Err(DisplayError::Unreachable(display));
    }
    // Qt's XOpenDisplay waits forever on a server that accepts and never answers: ask first,
    // on a helper thread, so that a stop meanwhile is answered at once.
    use super::xscreen::{handshake, Setup};
    let (tx, rx) = crossbeam_channel::bounded(1);
    let asked = display.clone();
    std::thread::Builder::new()
        .name("display probe".into())
        .spawn(move || {
            let _ = tx.send(handshake(&asked, DISPLAY_ANSWER));
        })
        .map_err(DisplayError::Probe)?;
    let stop = crate::stop::Stop::process();
    let answer = loop {
        match rx.recv_timeout(crate::stop::Stop::TICK) {
            Ok(answer) => break answer,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) if !stop.is_requested() => {}
            Err(_) => return Err(DisplayError::Stopped),
        }
    };
    match answer {
        Setup::Silent => Err(DisplayError::Silent { display }),
        _ => Ok(()),
    }
}

/// Whether an X server answers at `display` (`[host]:N[.screen]`).
fn x_server_reachable(display: &str) -> bool {
    let Some((host, rest)) = display.rsplit_once(':') else {
        return false;
    };
    let Ok(number) = rest.split('.').next().unwrap_or("").parse::<u16>() else {
        return false;
    };
    if host.is_empty() || host == "unix" {
        let path = format!("/tmp/.X11-unix/X{number}");
        return match UnixStream::connect(&path) {
            Ok(_) => true,
            // Some servers listen only on the abstract socket; the file still marks them.
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => false,
            Err(_) => std::path::Path::new(&path).exists() && abstract_socket_exists(&path),
        };
    }
    let Some(port) = 6000u16.checked_add(number) else {
        return false;
    };
    (host, port)
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|addr| TcpStream::connect_timeout(&addr, Duration::from_secs(1)).is_ok())
}

fn abstract_socket_exists(path: &str) -> bool {
    std::fs::read_to_string("/proc/net/unix")
        .map(|t| t.lines().any(|l| l.ends_with(&format!("@{path}"))))
        .unwrap_or(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_frames_are_scaled_to_fit_the_screen() {
        assert_eq!(fit(FrameSize::new(640, 480), Some((1280, 800))), (640, 480));
        assert_eq!(
            fit(FrameSize::new(3840, 2160), Some((1280, 800))),
            (1152, 648)
        );
        assert_eq!(fit(FrameSize::new(3840, 2160), None), (3840, 2160));
    }

    #[test]
    fn unreachable_displays_are_detected() {
        assert!(!x_server_reachable(":4711"));
        assert!(!x_server_reachable("nonsense"));
    }
}
