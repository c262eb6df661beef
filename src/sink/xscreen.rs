//! The size of the X display's first screen, read from the X11 connection setup reply (the
//! first message any X client receives), so that a frame larger than the screen opens a
//! window scaled to fit (OpenCV's highgui has no call for it); and, before Qt is given the
//! display, whether its server answers at all (one that accepts and never answers would hang
//! `XOpenDisplay` forever).
//!
//! Invariants: only the documented setup handshake is spoken (X11 protocol, "Connection
//! Setup"), with the display's MIT-MAGIC-COOKIE-1 from the Xauthority file where there is
//! one; every step waits at most the time it is given; any failure is None for the size
//! (the window then shows frames at their own size).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// What an X server said to the connection setup.
#[derive(Debug)]
pub enum Setup {
    /// It accepted: the reply's body.
    Accepted(Vec<u8>),
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
    let cookie = cookie(number);
    let local = host.is_empty() || host == "unix";
    let stream: Option<Box<dyn ReadWrite>> = if local {
        UnixStream::connect(format!("/tmp/.X11-unix/X{number}"))
            .ok()
            .map(|s| Box::new(s) as _)
    } else {
        use std::net::ToSocketAddrs;
        6000u16
            .checked_add(number)
            .and_then(|port| (host, port).to_socket_addrs().ok())
            .and_then(|mut a| a.next())
            .and_then(|addr| TcpStream::connect_timeout(&addr, timeout).ok())
            .map(|s| Box::new(s) as _)
    };
    let Some(mut stream) = stream else {
        return Setup::Unreachable;
    };
    stream.set_timeout(timeout);
    let silent = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Setup::Silent,
        _ => Setup::Unreachable,
    };
    if let Err(e) = stream.write_all(&setup_request(cookie.as_deref())) {
        return silent(e);
    }
    let mut head = [0u8; 8];
    if let Err(e) = stream.read_exact(&mut head) {
        return silent(e);
    }
    if head[0] != 1 {
        return Setup::Refused;
    }
    let len = usize::from(u16::from_le_bytes([head[6], head[7]])) * 4;
    let mut body = vec![0u8; len];
    match stream.read_exact(&mut body) {
        Ok(()) => Setup::Accepted(body),
        Err(e) => silent(e),
    }
}

/// Width and height in pixels of the first screen of `display` (`[host]:N[.screen]`).
pub fn screen_size(display: &str) -> Option<(u32, u32)> {
    match handshake(display, Duration::from_secs(2)) {
        Setup::Accepted(body) => parse_setup(&body),
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

const COOKIE: &[u8] = b"MIT-MAGIC-COOKIE-1";

/// The setup request, little-endian, protocol 11.0, with the cookie when there is one.
fn setup_request(cookie: Option<&[u8]>) -> Vec<u8> {
    let (name, data) = cookie.map_or((&b""[..], &b""[..]), |c| (COOKIE, c));
    let mut req = vec![b'l', 0, 11, 0, 0, 0];
    req.extend((name.len() as u16).to_le_bytes());
    req.extend((data.len() as u16).to_le_bytes());
    req.extend([0, 0]);
    for part in [name, data] {
        req.extend(part);
        req.resize(req.len().div_ceil(4) * 4, 0);
    }
    req
}

/// The first screen's size from the body of a successful setup reply (after its 8 bytes).
fn parse_setup(body: &[u8]) -> Option<(u32, u32)> {
    let u16_at = |i: usize| Some(u16::from_le_bytes([*body.get(i)?, *body.get(i + 1)?]));
    let vendor_len = usize::from(u16_at(16)?);
    let screens = *body.get(20)?;
    let formats = usize::from(*body.get(21)?);
    if screens == 0 {
        return None;
    }
    let screen = 32 + vendor_len.div_ceil(4) * 4 + formats * 8;
    let (w, h) = (u16_at(screen + 20)?, u16_at(screen + 22)?);
    (w > 0 && h > 0).then_some((u32::from(w), u32::from(h)))
}

/// The MIT-MAGIC-COOKIE-1 for local display `number` from `$XAUTHORITY` or
/// `~/.Xauthority`, when there is one.
fn cookie(number: u16) -> Option<Vec<u8>> {
    let path = std::env::var_os("XAUTHORITY")
        .map(std::path::PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| std::path::Path::new(&h).join(".Xauthority"))
        })?;
    let data = std::fs::read(path).ok()?;
    let want = number.to_string();
    let mut at = 0;
    // Entries: family (u16 BE), then address, number, name, data, each as u16 BE length + bytes.
    while at + 2 <= data.len() {
        at += 2;
        let mut field = || -> Option<&[u8]> {
            let len = usize::from(u16::from_be_bytes([*data.get(at)?, *data.get(at + 1)?]));
            let bytes = data.get(at + 2..at + 2 + len)?;
            at += 2 + len;
            Some(bytes)
        };
        let (_address, num, name, secret) = (field()?, field()?, field()?, field()?);
        if (num.is_empty() || num == want.as_bytes()) && name == COOKIE {
            return Some(secret.to_vec());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_setup_request_is_padded_and_the_reply_parsed() {
        let req = setup_request(Some(&[7; 16]));
        assert_eq!(req.len(), 12 + 20 + 16);
        assert_eq!(&req[..4], &[b'l', 0, 11, 0]);
        assert_eq!(setup_request(None).len(), 12);
        // A reply body with a 5-byte vendor (padded to 8), one format, one 1280x800 screen.
        let mut body = vec![0u8; 32];
        body[16] = 5;
        body[20] = 1;
        body[21] = 1;
        body.extend([b'X'; 8]);
        body.extend([0; 8]);
        let mut screen = vec![0u8; 40];
        screen[20..22].copy_from_slice(&1280u16.to_le_bytes());
        screen[22..24].copy_from_slice(&800u16.to_le_bytes());
        body.extend(screen);
        assert_eq!(parse_setup(&body), Some((1280, 800)));
        assert_eq!(parse_setup(&body[..40]), None);
        assert_eq!(screen_size("nonsense"), None);
    }
}
