//! Where events go (`--events`, as many as given): a JSON Lines file, an HTTP endpoint (a
//! JSON POST an event: a webhook) and an MQTT broker (`mqtt://HOST[:PORT]/PREFIX`: each
//! event on `PREFIX/INPUT/events`, each zone's count retained on `PREFIX/INPUT/zones/ZONE`,
//! and `PREFIX/available` saying `online`, or `offline` as the broker's last will).
//!
//! Each destination has a thread and a bounded queue (`QUEUE` events): the detector never
//! waits on a slow or absent receiver. An HTTP receiver that is down is retried with
//! back-off (`BACKOFF` doubling to `BACKOFF_MAX`), the event kept at the queue's head, so
//! events go out in order and none is lost while the queue holds them; what overflows is
//! counted and said. MQTT publishes at QoS 2 (exactly once), rumqttc reconnecting.
//!
//! Invariants: every event put in a queue goes out, in order, unless the queue was full
//! (counted) or the run ended while its receiver was down (counted at the end); a file is
//! created new (replaced only with `-y`) and each line is written whole and flushed.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, Sender, TrySendError};

/// Events a destination's queue holds.
pub const QUEUE: usize = 10_000;
/// The first wait before an HTTP receiver is tried again.
const BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait between tries.
const BACKOFF_MAX: Duration = Duration::from_secs(2);
/// How long the end of a run leaves the destinations to send what they hold.
const DRAIN: Duration = Duration::from_millis(500);

/// A destination, as `--events` names it.
#[derive(Clone, Debug, PartialEq)]
pub enum Destination {
    /// A JSON Lines file.
    File(std::path::PathBuf),
    /// `http://HOST[:PORT]/PATH`.
    Http {
        /// Host and port, to connect to.
        addr: String,
        /// Host, for the `Host` header.
        host: String,
        /// The path posted to.
        path: String,
    },
    /// `mqtt://HOST[:PORT]/PREFIX`.
    Mqtt {
        /// Host.
        host: String,
        /// Port.
        port: u16,
        /// The topics' prefix.
        prefix: String,
    },
}

impl Destination {
    /// `text` as `--events` takes it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let hostport = |rest: &str, default: u16| -> Result<(String, u16, String), String> {
            let (hp, path) = rest.split_once('/').unwrap_or((rest, ""));
            let (host, port) = match hp.rsplit_once(':') {
                Some((h, p)) => (
                    h,
                    p.parse::<u16>()
                        .map_err(|_| format!("--events '{text}': '{p}' is not a port"))?,
                ),
                None => (hp, default),
            };
            if host.is_empty() {
                return Err(format!("--events '{text}': no host"));
            }
            Ok((host.to_string(), port, path.to_string()))
        };
        if let Some(rest) = text.strip_prefix("http://") {
            let (host, port, path) = hostport(rest, 80)?;
            return Ok(Destination::Http {
                addr: format!("{host}:{port}"),
                host,
                path: format!("/{path}"),
            });
        }
        if let Some(rest) = text.strip_prefix("mqtt://") {
            let (host, port, prefix) = hostport(rest, 1883)?;
            let prefix = match prefix.trim_matches('/') {
                "" => "framepipe".to_string(),
                p => p.to_string(),
            };
            if prefix.contains(['+', '#']) {
                return Err(format!(
                    "--events '{text}': a topic prefix has no '+' or '#'"
                ));
            }
            return Ok(Destination::Mqtt { host, port, prefix });
        }
        if text.contains("://") {
            return Err(format!(
                "--events '{text}': events go to a FILE.jsonl, http://HOST[:PORT]/PATH or mqtt://HOST[:PORT]/PREFIX (https and mqtts: put a relay on loopback)"
            ));
        }
        Ok(Destination::File(text.into()))
    }
}

/// What goes out: an event (its input's name for MQTT's topic), or a zone's count.
#[derive(Clone, Debug)]
pub enum Message {
    /// An event, as JSON, and its input's name.
    Event(String, serde_json::Value),
    /// Input `.0`'s zone `.1` holds `.2` objects now.
    Count(String, String, u64),
}

/// One destination's running half.
struct Running {
    what: String,
    tx: std::sync::Mutex<Option<Sender<Message>>>,
    /// Set when the run ends: a receiver that is down is no longer waited for.
    ended: Arc<std::sync::atomic::AtomicBool>,
    overflow: Arc<AtomicU64>,
    thread: std::sync::Mutex<Option<std::thread::JoinHandle<u64>>>,
}

/// Every destination (module doc), and the latest events kept for the browser view where it
/// shows them; shared by those who make events (the detector's thread, the run's own
/// states).
pub struct Outputs(Vec<Running>, Option<Arc<super::recent::Recent>>);

impl Outputs {
    /// Starts a thread for each of `to`; `replace`: a file may be replaced (`-y`); each
    /// event kept in `recent` too, where given.
    pub fn start(
        to: &[Destination],
        replace: bool,
        recent: Option<Arc<super::recent::Recent>>,
    ) -> Result<Self> {
        let mut all = Vec::new();
        for d in to {
            let (tx, rx) = crossbeam_channel::bounded(QUEUE);
            let ended = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let (what, thread) = match d {
                Destination::File(path) => {
                    let file = open_new(path, replace)?;
                    let what = format!("'{}'", path.display());
                    (what, spawn("events-file", move || to_file(file, rx))?)
                }
                Destination::Http { addr, host, path } => {
                    let what = format!("http://{host}{path}");
                    let (addr, host, path) = (addr.clone(), host.clone(), path.clone());
                    let end = ended.clone();
                    let http = move || to_http((&addr, &host, &path), rx, &end);
                    (what, spawn("events-http", http)?)
                }
                Destination::Mqtt { host, port, prefix } => {
                    let what = format!("mqtt://{host}:{port}/{prefix}");
                    let (host, port, prefix) = (host.clone(), *port, prefix.clone());
                    (
                        what,
                        spawn("events-mqtt", move || to_mqtt(&host, port, &prefix, rx))?,
                    )
                }
            };
            all.push(Running {
                what,
                tx: std::sync::Mutex::new(Some(tx)),
                ended,
                overflow: Arc::new(AtomicU64::new(0)),
                thread: std::sync::Mutex::new(Some(thread)),
            });
        }
        Ok(Self(all, recent))
    }

    /// Whether there is any destination (the browser view's list counts as one).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty() && self.1.is_none()
    }

    /// Puts `m` in every destination's queue (a full one counts it).
    pub fn send(&self, m: &Message) {
        if let (Some(recent), Message::Event(_, e)) = (&self.1, m) {
            recent.push(e);
        }
        for r in &self.0 {
            let tx = r.tx.lock().unwrap_or_else(|p| p.into_inner()).clone();
            let Some(tx) = tx else { continue };
            if let Err(TrySendError::Full(_)) = tx.try_send(m.clone()) {
                if r.overflow.fetch_add(1, Ordering::Relaxed) == 0 {
                    crate::warn!(
                        "events to {}: the queue is full ({QUEUE}); events are lost (counted)",
                        r.what
                    );
                }
            }
        }
    }

    /// Ends every destination within about a second (`DRAIN` to send what they hold,
    /// then a receiver still down is given up): what each could not send is said.
    pub fn finish(&self) {
        for r in &self.0 {
            *r.tx.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let running = |r: &Running| {
            r.thread
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
                .is_some_and(|t| !t.is_finished())
        };
        let until = Instant::now() + DRAIN;
        while Instant::now() < until && self.0.iter().any(running) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for r in &self.0 {
            r.ended.store(true, Ordering::SeqCst);
            let thread = r.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
            let Some(thread) = thread else { continue };
            let lost = thread.join().unwrap_or(0) + r.overflow.load(Ordering::Relaxed);
            if lost > 0 {
                crate::warn!("events to {}: {lost} event(s) could not be sent", r.what);
            }
        }
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        self.finish();
    }
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.0.iter().map(|r| &r.what))
            .finish()
    }
}

fn spawn(
    name: &str,
    f: impl FnOnce() -> u64 + Send + 'static,
) -> Result<std::thread::JoinHandle<u64>> {
    Ok(std::thread::Builder::new().name(name.into()).spawn(f)?)
}

/// `path`, created new, or replaced where `replace`.
fn open_new(path: &std::path::Path, replace: bool) -> Result<std::fs::File> {
    let mut open = std::fs::OpenOptions::new();
    open.write(true);
    match replace {
        true => open.create(true).truncate(true),
        false => open.create_new(true),
    };
    open.open(path).with_context(|| {
        format!(
            "--events '{}' can't be created (-y replaces it)",
            path.display()
        )
    })
}

/// A file's thread: each event a line, flushed; what could not be written.
fn to_file(mut file: std::fs::File, rx: Receiver<Message>) -> u64 {
    let mut lost = 0;
    for m in rx {
        if let Message::Event(_, json) = m {
            if writeln!(file, "{json}")
                .and_then(|()| file.flush())
                .is_err()
            {
                lost += 1;
            }
        }
    }
    lost
}

/// An HTTP receiver's thread: each event POSTed in order, retried with back-off while the
/// receiver is down; what was left unsent when the run ended.
fn to_http(
    (addr, host, path): (&str, &str, &str),
    rx: Receiver<Message>,
    ended: &std::sync::atomic::AtomicBool,
) -> u64 {
    let mut wait = BACKOFF;
    let mut said = false;
    while let Ok(m) = rx.recv() {
        let Message::Event(_, json) = m else { continue };
        let body = json.to_string();
        loop {
            match post(addr, host, path, &body) {
                Ok(()) => {
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
                    // Ended while the receiver is down: what waits is lost, counted.
                    let until = Instant::now() + wait;
                    while Instant::now() < until && !ended.load(Ordering::SeqCst) {
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if ended.load(Ordering::SeqCst) {
                        return 1 + rx.len() as u64;
                    }
                    wait = (wait * 2).min(BACKOFF_MAX);
                }
            }
        }
    }
    0
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
    s.set_read_timeout(Some(Duration::from_secs(5)))?;
    s.set_write_timeout(Some(Duration::from_secs(5)))?;
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

/// An MQTT broker's thread: events and retained counts published at QoS 2, the client's
/// event loop driven here; what was left unsent when the run ended.
fn to_mqtt(host: &str, port: u16, prefix: &str, rx: Receiver<Message>) -> u64 {
    use rumqttc::{Client, LastWill, MqttOptions, QoS};
    let id = format!("framepipe-{}", std::process::id());
    let mut options = MqttOptions::new(id, host, port);
    options.set_keep_alive(Duration::from_secs(10));
    let available = format!("{prefix}/available");
    options.set_last_will(LastWill::new(&available, "offline", QoS::AtLeastOnce, true));
    let (client, mut connection) = Client::new(options, 1024);
    let _ = client.try_publish(&available, QoS::AtLeastOnce, true, "online");
    let driver = std::thread::Builder::new()
        .name("events-mqtt-loop".into())
        .spawn(move || {
            let mut said = false;
            for n in connection.iter() {
                match n {
                    Err(e) if !said => {
                        said = true;
                        crate::warn!("events to MQTT: {e}; reconnecting");
                        std::thread::sleep(BACKOFF);
                    }
                    Err(_) => std::thread::sleep(BACKOFF),
                    Ok(rumqttc::Event::Incoming(rumqttc::Packet::ConnAck(_))) => said = false,
                    Ok(rumqttc::Event::Outgoing(rumqttc::Outgoing::Disconnect)) => break,
                    Ok(_) => {}
                }
            }
        });
    let mut lost = 0;
    for m in rx {
        let (topic, payload, retain) = match m {
            Message::Event(input, json) => (
                format!("{prefix}/{}/events", topic_part(&input)),
                json.to_string(),
                false,
            ),
            Message::Count(input, zone, n) => (
                format!(
                    "{prefix}/{}/zones/{}",
                    topic_part(&input),
                    topic_part(&zone)
                ),
                n.to_string(),
                true,
            ),
        };
        // Never blocking: with the broker away, what its client can't hold is counted.
        if client
            .try_publish(topic, QoS::ExactlyOnce, retain, payload)
            .is_err()
        {
            lost += 1;
        }
    }
    let _ = client.try_publish(&available, QoS::AtLeastOnce, true, "offline");
    // The queued publications go out before the disconnect, within a moment.
    std::thread::sleep(Duration::from_millis(200));
    let _ = client.try_disconnect();
    if let Ok(d) = driver {
        let until = Instant::now() + Duration::from_millis(200);
        while !d.is_finished() && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    lost
}

/// `name` as one level of a topic: '/', '+', '#' and spaces written '_'.
fn topic_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, '/' | '+' | '#' | ' ') || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations_are_read_from_their_names() {
        assert_eq!(
            Destination::parse("mqtt://127.0.0.1:1884/site/a").unwrap(),
            Destination::Mqtt {
                host: "127.0.0.1".into(),
                port: 1884,
                prefix: "site/a".into()
            }
        );
        assert_eq!(
            Destination::parse("http://localhost:8080/hook").unwrap(),
            Destination::Http {
                addr: "localhost:8080".into(),
                host: "localhost".into(),
                path: "/hook".into()
            }
        );
        assert_eq!(
            Destination::parse("ev.jsonl").unwrap(),
            Destination::File("ev.jsonl".into())
        );
        for bad in [
            "https://x/y",
            "mqtt://:1883/p",
            "mqtt://h:port/p",
            "mqtt://h/a/#",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(topic_part("cam 1/a+b#"), "cam_1_a_b_");
    }
}
