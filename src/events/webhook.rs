//! Events to an HTTP receiver (`http://HOST[:PORT]/PATH`): each event a JSON POST, in
//! order, retried with back-off (`BACKOFF` doubling to `BACKOFF_MAX`) while the receiver is
//! down or answers other than 2xx, the event kept meanwhile.
//!
//! Invariants: the event being posted is kept in `current` until the receiver took it, so
//! that the run's end, which never waits on a slow receiver longer than its second, knows
//! what was not delivered (`out::Outputs::finish`); once the end is told (`ended`) no other
//! event is taken from the queue.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use crossbeam_channel::Receiver;

use super::message::Message;

/// The first wait before a receiver is tried again.
const BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long one POST may take (connecting, and each read or write).
const TIMEOUT: Duration = Duration::from_secs(5);

/// The receiver's thread (module doc): the events it could not deliver, in order (the run
/// ended while its receiver was down).
pub(super) fn run(
    (addr, host, path): (&str, &str, &str),
    rx: &Receiver<Message>,
    ended: &AtomicBool,
    current: &Mutex<Option<serde_json::Value>>,
) -> Vec<serde_json::Value> {
    let mut wait = BACKOFF;
    let mut said = false;
    let keep = |json: Option<serde_json::Value>| {
        *current.lock().unwrap_or_else(|p| p.into_inner()) = json;
    };
    while !ended.load(Ordering::SeqCst) {
        let m = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => break,
        };
        let Message::Event(_, json) = m else { continue };
        let body = json.to_string();
        keep(Some(json.clone()));
        loop {
            match post(addr, host, path, &body) {
                Ok(()) => {
                    keep(None);
                    wait = BACKOFF;
                    if std::mem::take(&mut said) {
                        crate::info!("events to http://{host}{path}: delivered again");
                    }
                    break;
                }
                Err(e) => {
                    if !said {
                        said = true;
                        crate::warn!("events to http://{host}{path}: {e:#}; kept and tried again");
                    }
                    let until = Instant::now() + wait;
                    while Instant::now() < until && !ended.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if ended.load(Ordering::SeqCst) {
                        let mut unsent = vec![json];
                        unsent.extend(rx.try_iter().filter_map(Message::event));
                        keep(None);
                        return unsent;
                    }
                    wait = (wait * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
    rx.try_iter().filter_map(Message::event).collect()
}

/// One POST of `body`; an error unless the receiver answered 2xx.
fn post(addr: &str, host: &str, path: &str, body: &str) -> Result<()> {
    use std::net::ToSocketAddrs;
    let to = addr
        .to_socket_addrs()
        .with_context(|| format!("resolving {addr}"))?
        .next()
        .with_context(|| format!("{addr} has no address"))?;
    let mut s = std::net::TcpStream::connect_timeout(&to, Duration::from_secs(2))
        .with_context(|| format!("connecting to {addr}"))?;
    s.set_read_timeout(Some(TIMEOUT))?;
    s.set_write_timeout(Some(TIMEOUT))?;
    write!(
        s,
        "POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\nUser-Agent: framepipe\r\n\r\n{body}",
        body.len()
    )?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head)?;
    let line = String::from_utf8_lossy(&head[..n]);
    let status = line.split_whitespace().nth(1).unwrap_or("");
    if !status.starts_with('2') {
        bail!(
            "the receiver answered {:?}",
            line.lines().next().unwrap_or("")
        );
    }
    Ok(())
}
