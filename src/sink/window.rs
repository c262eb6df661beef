//! The display: `imshow` + `waitKey` on the thread that runs the sink (the main thread).
//! **q**, **Esc** or closing the window ask to quit.
//!
//! Qt aborts the whole process when it cannot reach a display, so `check_display` must pass
//! before the first highgui call.

use std::io::ErrorKind;
use std::net::{TcpStream, ToSocketAddrs};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use anyhow::{Context, Result};
use opencv::core::{Mat, Vec3b};
use opencv::highgui;

use super::{Flow, Sink};
use crate::frame::FrameSize;

pub struct Window {
    title: String,
    shown: bool,
}

impl Window {
    pub fn open(title: &str) -> Result<Self> {
        highgui::named_window(title, highgui::WINDOW_AUTOSIZE | highgui::WINDOW_GUI_NORMAL)
            .context("opening the window")?;
        Ok(Self {
            title: title.to_string(),
            shown: false,
        })
    }

    /// Reads keys and the window's state; `delay_ms` keeps the GUI responsive meanwhile.
    fn poll(&mut self, delay_ms: i32) -> Result<Flow> {
        let key = highgui::wait_key(delay_ms)?;
        if key >= 0 && matches!(key & 0xff, 27 | 0x71 | 0x51) {
            return Ok(Flow::Quit); // Esc, q, Q
        }
        if self.shown {
            let visible = highgui::get_window_property(&self.title, highgui::WND_PROP_VISIBLE)?;
            if visible < 1.0 {
                return Ok(Flow::Quit); // closed by the user
            }
        }
        Ok(Flow::Continue)
    }
}

impl Sink for Window {
    fn verb(&self) -> &'static str {
        "shown"
    }
    fn describe(&self) -> String {
        format!("window '{}' (q or Esc quits)", self.title)
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        let mat =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, frame)?;
        highgui::imshow(&self.title, &mat).context("showing a frame")?;
        self.shown = true;
        self.poll(1)
    }
    fn idle(&mut self) -> Result<Flow> {
        self.poll(5)
    }
    fn finish(&mut self) -> Result<()> {
        highgui::destroy_all_windows()?;
        let _ = highgui::wait_key(1);
        Ok(())
    }
}

/// Checks that a window can be opened here, with a message that says what to do if not.
pub fn check_display() -> Result<(), String> {
    if let Ok(p) = std::env::var("QT_QPA_PLATFORM") {
        if matches!(p.as_str(), "offscreen" | "minimal" | "vnc") {
            return Ok(());
        }
    }
    let display = std::env::var("DISPLAY").unwrap_or_default();
    if display.is_empty() {
        return Err(
            "no display to show a window on (DISPLAY is not set); run with --headless, optionally with --output FILE"
                .into(),
        );
    }
    if x_server_reachable(&display) {
        Ok(())
    } else {
        Err(format!(
            "cannot reach the X display '{display}'; run with --headless, optionally with --output FILE"
        ))
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
    fn unreachable_displays_are_detected() {
        assert!(!x_server_reachable(":4711"));
        assert!(!x_server_reachable("nonsense"));
    }
}
