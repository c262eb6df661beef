//! The size of the X display's first screen, read from the X11 connection setup reply (the
//! first message any X client receives), so that a frame larger than the screen opens a
//! window scaled to fit (OpenCV's highgui has no call for it); and, before Qt is given the
//! display, whether its server answers at all (one that accepts and never answers would hang
//! `XOpenDisplay` forever).
//!
//! The handshake is x11rb-protocol's (`Connect`: the setup request with the display's
//! Xauthority entry, the reply parsed into a `Setup`), spoken here over a socket with a
//! deadline, since an X client library would wait forever on a silent server.
//!
//! Invariants: only the setup handshake is spoken; every step waits at most the time it is
//! given; any failure is None for the size (the window then shows frames at their own size).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use x11rb_protocol::connect::Connect;
use x11rb_protocol::xauth::Family;

/// What an X server said to the connection setup.
#[derive(Debug)]
pub enum Setup {
    /// It accepted: its setup (screens, formats, vendor).
    Accepted(Box<x11rb_protocol::protocol::xproto::Setup>),
    /// It answered, refusing (authentication, a protocol it doesn't speak).
    Refused,
    /// It took the connection and said nothing within the time allowed.
    Silent,
    /// Nothing listens there, or the name is not a display.
    Unreachable,
}

/// Speaks the setup handshake with `display` (`[host]:N[.screen]`), waiting at most
/// `timeout` for each step.
pub fn handshake(display: &str, timeout: Duration) -> Setup {
    let Some((host, rest)) = display.rsplit_once(':') else {
        return Setup::Unreachable;
    };
    let Some(number) = rest.split('.').next().and_then(|n| n.parse::<u16>().ok()) else {
        return Setup::Unreachable;
    };
    let local = host.is_empty() || host == "unix";
    let (stream, family, address): (Option<Box<dyn ReadWrite>>, _, _) = if local {
        let stream = UnixStream::connect(format!("/tmp/.X11-unix/X{number}"))
            .ok()
            .map(|s| Box::new(s) as _);
        (stream, Family::LOCAL, hostname())
    } else {
        use std::net::ToSocketAddrs;
        let addr = 6000u16
            .checked_add(number)
            .and_then(|port| (host, port).to_socket_addrs().ok())
            .and_then(|mut a| a.next());
        let stream = addr
            .and_then(|addr| TcpStream::connect_timeout(&addr, timeout).ok())
            .map(|s| Box::new(s) as _);
        let address = match addr.map(|a| a.ip()) {
            Some(std::net::IpAddr::V4(ip)) => ip.octets().to_vec(),
            Some(std::net::IpAddr::V6(ip)) => ip.octets().to_vec(),
            None => Vec::new(),
        };
        (stream, Family::INTERNET, address)
    };
    let Some(mut stream) = stream else {
        return Setup::Unreachable;
    };
    // The display's Xauthority entry where there is one (none, or no file: no
    // authorization, which a server without access control takes).
    let (name, data) = x11rb_protocol::xauth::get_auth(family, &address, number)
        .ok()
        .flatten()
        .unwrap_or_default();
    let (mut connect, request) = Connect::with_authorization(name, data);
    stream.set_timeout(timeout);
    let silent = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Setup::Silent,
        _ => Setup::Unreachable,
    };
    if let Err(e) = stream.write_all(&request) {
        return silent(e);
    }
    loop {
        match stream.read(connect.buffer()) {
            Ok(0) => return Setup::Unreachable,
            Ok(n) => match connect.advance(n) {
                true => break,
                false => continue,
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return silent(e),
        }
    }
    match connect.into_setup() {
        Ok(setup) => Setup::Accepted(Box::new(setup)),
        Err(_) => Setup::Refused,
    }
}

/// This machine's name: a local display's Xauthority entries are kept under it.
fn hostname() -> Vec<u8> {
    std::fs::read("/proc/sys/kernel/hostname")
        .map(|mut n| {
            n.retain(|b| !b.is_ascii_whitespace());
            n
        })
        .unwrap_or_default()
}

/// Width and height in pixels of the first screen of `display` (`[host]:N[.screen]`).
pub fn screen_size(display: &str) -> Option<(u32, u32)> {
    match handshake(display, Duration::from_secs(2)) {
        Setup::Accepted(setup) => {
            let screen = setup.roots.first()?;
            let (w, h) = (screen.width_in_pixels, screen.height_in_pixels);
            (w > 0 && h > 0).then_some((u32::from(w), u32::from(h)))
        }
        _ => None,
    }
}

trait ReadWrite: Read + Write {
    fn set_timeout(&self, d: Duration);
}

impl ReadWrite for UnixStream {
    fn set_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
        let _ = self.set_write_timeout(Some(d));
    }
}

impl ReadWrite for TcpStream {
    fn set_timeout(&self, d: Duration) {
        let _ = self.set_read_timeout(Some(d));
        let _ = self.set_write_timeout(Some(d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_that_is_no_display_is_unreachable() {
        assert!(matches!(
            handshake("nonsense", Duration::from_millis(100)),
            Setup::Unreachable
        ));
        assert!(matches!(
            handshake(":65000", Duration::from_millis(100)),
            Setup::Unreachable
        ));
        assert_eq!(screen_size("nonsense"), None);
    }
}
