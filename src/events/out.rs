//! Where events go (`--events`, as many as given): a JSON Lines file, an HTTP endpoint (a
//! JSON POST an event: a webhook, `webhook`) and an MQTT broker (`mqtt`).
//!
//! Each destination has a thread and a bounded queue (`QUEUE` events): the detector never
//! waits on a slow or absent receiver. A receiver that is down is tried again and its
//! events kept meanwhile, so that they go out, in order, once it answers.
//!
//! Invariants: every event put in a queue goes out, in order, unless the queue was full or
//! the run ended before its receiver took it; the end (`Outputs::finish`) takes about a
//! second at most whatever the receivers do (`DRAIN`, then `GRACE`), and what was not
//! delivered is counted, said, written to the spool beside the first `--events` file
//! (`FILE.unsent.jsonl`: each line the destination and the event) where there is one, and
//! fails the run; a file is created new (replaced only with `-y`) and each line is written
//! whole and flushed.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender, TrySendError};

/// How long the end of a run leaves the destinations to send what they hold.
const DRAIN: Duration = Duration::from_millis(500);
/// How long a destination then has to give back what it holds, once told of the end.
const GRACE: Duration = Duration::from_millis(400);

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
    /// `mqtt://HOST[:PORT]/PREFIX[?discovery=homeassistant[&discovery_prefix=P]]`.
    Mqtt {
        /// Host.
        host: String,
        /// Port.
        port: u16,
        /// The topics' prefix.
        prefix: String,
        /// Home Assistant's discovery prefix, where its discovery is asked for.
        discovery: Option<String>,
    },
}

/// Why `--events` can't be read: each says what it takes.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum DestinationError {
    /// A port that is not a number.
    #[error("--events '{text}': '{port}' is not a port")]
    Port {
        /// The destination as given.
        text: String,
        /// What stood for the port.
        port: String,
    },
    /// No host before the port or path.
    #[error("--events '{0}': no host")]
    NoHost(String),
    /// An MQTT prefix with a wildcard.
    #[error("--events '{0}': a topic prefix has no '+' or '#'")]
    Wildcard(String),
    /// An MQTT option that is not one.
    #[error("--events '{text}': {why}")]
    Mqtt {
        /// The destination as given.
        text: String,
        /// What is wrong with its options.
        why: MqttOptionError,
    },
    /// A scheme not spoken.
    #[error("--events '{0}': events go to a FILE.jsonl, http://HOST[:PORT]/PATH or mqtt://HOST[:PORT]/PREFIX (https and mqtts: put a relay on loopback)")]
    Scheme(String),
}

/// What is wrong with an MQTT destination's options (`?discovery=homeassistant&…`).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum MqttOptionError {
    /// A discovery not known.
    #[error("discovery '{0}' is not known (homeassistant is: Home Assistant's MQTT discovery)")]
    Discovery(String),
    /// A discovery prefix that is no topic.
    #[error("'{0}' is no discovery prefix (a topic without '+' or '#')")]
    Prefix(String),
    /// A prefix given without the discovery.
    #[error("discovery_prefix without discovery=homeassistant")]
    PrefixAlone,
    /// A key not known, with the nearest known ones.
    #[error("'{key}' is not an MQTT option{hint} (discovery=homeassistant, discovery_prefix=P)")]
    Key {
        /// The key given.
        key: String,
        /// "; did you mean …?" where one is near.
        hint: String,
    },
}

impl Destination {
    /// `text` as `--events` takes it.
    pub fn parse(text: &str) -> Result<Self, DestinationError> {
        if let Some(rest) = text.strip_prefix("http://") {
            let (host, port, path) = host_port(text, rest, 80)?;
            return Ok(Destination::Http {
                addr: format!("{host}:{port}"),
                host,
                path: format!("/{path}"),
            });
        }
        if let Some(rest) = text.strip_prefix("mqtt://") {
            let (rest, query) = rest.split_once('?').unwrap_or((rest, ""));
            let (host, port, prefix) = host_port(text, rest, 1883)?;
            let prefix = match prefix.trim_matches('/') {
                "" => "framepipe".to_string(),
                p => p.to_string(),
            };
            if prefix.contains(['+', '#']) {
                return Err(DestinationError::Wildcard(text.into()));
            }
            let discovery = discovery_of(query).map_err(|why| DestinationError::Mqtt {
                text: text.into(),
                why,
            })?;
            return Ok(Destination::Mqtt {
                host,
                port,
                prefix,
                discovery,
            });
        }
        if text.contains("://") {
            return Err(DestinationError::Scheme(text.into()));
        }
        Ok(Destination::File(text.into()))
    }
}

/// `rest` of destination `text` (after its scheme) as its host, port (`default` where not
/// given) and path.
fn host_port(
    text: &str,
    rest: &str,
    default: u16,
) -> Result<(String, u16, String), DestinationError> {
    let (hp, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (host, port) = match hp.rsplit_once(':') {
        Some((h, p)) => {
            let port = p.parse::<u16>().map_err(|_| DestinationError::Port {
                text: text.into(),
                port: p.into(),
            })?;
            (h, port)
        }
        None => (hp, default),
    };
    if host.is_empty() {
        return Err(DestinationError::NoHost(text.into()));
    }
    Ok((host.to_string(), port, path.to_string()))
}

/// The discovery an MQTT destination's query asks for (`discovery=homeassistant`, and
/// `discovery_prefix=P`, Home Assistant's own `homeassistant` where not given): its prefix.
fn discovery_of(query: &str) -> Result<Option<String>, MqttOptionError> {
    const KEYS: [&str; 2] = ["discovery", "discovery_prefix"];
    let (mut asked, mut prefix) = (false, None);
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match (key, value) {
            ("discovery", "homeassistant") => asked = true,
            ("discovery", other) => return Err(MqttOptionError::Discovery(other.into())),
            ("discovery_prefix", p) if !p.is_empty() && !p.contains(['+', '#']) => {
                prefix = Some(p.trim_matches('/').to_string());
            }
            ("discovery_prefix", p) => return Err(MqttOptionError::Prefix(p.into())),
            (other, _) => {
                let hint = crate::spelling::did_you_mean(other, &KEYS);
                return Err(MqttOptionError::Key {
                    key: other.into(),
                    hint,
                });
            }
        }
    }
    match (asked, prefix) {
        (true, p) => Ok(Some(p.unwrap_or_else(|| "homeassistant".into()))),
        (false, Some(_)) => Err(MqttOptionError::PrefixAlone),
        (false, None) => Ok(None),
    }
}

pub use super::message::{Message, Watched, QUEUE};

/// What one destination did not deliver by the run's end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lost {
    /// The destination, as said.
    pub to: String,
    /// Events it did not take, kept in the spool where there is one.
    pub unsent: u64,
    /// Events lost to its full queue.
    pub overflow: u64,
    /// The spool they were kept in, where they were.
    pub kept: Option<std::path::PathBuf>,
}

impl std::fmt::Display for Lost {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.unsent + self.overflow;
        write!(f, "events to {}: {n} event(s) not delivered", self.to)?;
        match (&self.kept, self.overflow) {
            (Some(spool), 0) => write!(f, " (kept in '{}')", spool.display()),
            (Some(spool), o) => write!(
                f,
                " ({} kept in '{}', {o} lost to a full queue)",
                self.unsent,
                spool.display()
            ),
            (None, _) => write!(f, " (lost)"),
        }
    }
}

/// The run's events were not all delivered: each destination that lost some.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct Undelivered(pub Vec<Lost>);

/// A destination's thread: it gives back the events it could not deliver.
type Thread = std::thread::JoinHandle<Vec<serde_json::Value>>;

/// One destination's running half.
struct Running {
    what: String,
    tx: Mutex<Option<Sender<Message>>>,
    /// The queue's other end, to take back what a thread left when it is not waited for.
    rx: Receiver<Message>,
    /// Set when the run ends: a receiver that is down is no longer waited for.
    ended: Arc<AtomicBool>,
    /// The event a thread is handing over now (a webhook's POST under way).
    current: Arc<Mutex<Option<serde_json::Value>>>,
    overflow: Arc<AtomicU64>,
    thread: Mutex<Option<Thread>>,
}

impl Running {
    fn is_running(&self) -> bool {
        self.thread
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// What it did not deliver: its thread's answer where it ended, else (a receiver that
    /// holds its POST past the end) the event under way and what its queue still holds.
    fn unsent(&self) -> Vec<serde_json::Value> {
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        match thread {
            Some(t) if t.is_finished() => t.join().unwrap_or_default(),
            Some(_) => {
                let current = self
                    .current
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                current
                    .into_iter()
                    .chain(self.rx.try_iter().filter_map(Message::event))
                    .collect()
            }
            None => Vec::new(),
        }
    }
}

/// Every destination (module doc), and the latest events kept for the browser view where it
/// shows them; shared by those who make events (the detector's thread, the run's own
/// states).
pub struct Outputs {
    running: Vec<Running>,
    recent: Option<Arc<super::recent::Recent>>,
    /// Where what was not delivered is kept: beside the first `--events` file.
    spool: Option<std::path::PathBuf>,
    /// What the end said, once it ran (Err: events not delivered).
    ended: Mutex<Option<Result<(), Undelivered>>>,
    /// Whether a destination shows events' pictures (`wants_pictures`).
    pictures: bool,
}

impl Outputs {
    /// Starts a thread for each of `to`; `replace`: a file may be replaced (`-y`); each
    /// event kept in `recent` too, where given.
    pub fn start(
        to: &[Destination],
        replace: bool,
        (recent, jpeg): (Option<Arc<super::recent::Recent>>, Option<super::JpegMaker>),
    ) -> Result<Self> {
        let mut running = Vec::new();
        let mut spool = None;
        for d in to {
            let (tx, rx) = crossbeam_channel::bounded(QUEUE);
            let ended = Arc::new(AtomicBool::new(false));
            let current = Arc::new(Mutex::new(None));
            let (what, thread) = match d {
                Destination::File(path) => {
                    let file = open_new(path, replace)?;
                    spool.get_or_insert_with(|| {
                        let mut name = path.clone().into_os_string();
                        name.push(".unsent.jsonl");
                        std::path::PathBuf::from(name)
                    });
                    let what = format!("'{}'", path.display());
                    let rx = rx.clone();
                    (what, spawn("events-file", move || to_file(file, rx))?)
                }
                Destination::Http { addr, host, path } => {
                    let what = format!("http://{host}{path}");
                    let (addr, host, path) = (addr.clone(), host.clone(), path.clone());
                    let (rx, end, now) = (rx.clone(), ended.clone(), current.clone());
                    let http = move || super::webhook::run((&addr, &host, &path), &rx, &end, &now);
                    (what, spawn("events-http", http)?)
                }
                Destination::Mqtt {
                    host,
                    port,
                    prefix,
                    discovery,
                } => {
                    let what = format!("mqtt://{host}:{port}/{prefix}");
                    let broker = super::mqtt::Broker {
                        host: host.clone(),
                        port: *port,
                        prefix: prefix.clone(),
                        discovery: discovery.clone(),
                        jpeg,
                    };
                    let (rx, end) = (rx.clone(), ended.clone());
                    let mqtt = move || super::mqtt::run(&broker, rx, &end);
                    (what, spawn("events-mqtt", mqtt)?)
                }
            };
            running.push(Running {
                what,
                tx: Mutex::new(Some(tx)),
                rx,
                ended,
                current,
                overflow: Arc::new(AtomicU64::new(0)),
                thread: Mutex::new(Some(thread)),
            });
        }
        let pictures = to.iter().any(|d| {
            jpeg.is_some()
                && matches!(
                    d,
                    Destination::Mqtt {
                        discovery: Some(_),
                        ..
                    }
                )
        });
        Ok(Self {
            running,
            recent,
            spool,
            ended: Mutex::new(None),
            pictures,
        })
    }

    /// Whether there is any destination (the browser view's list counts as one).
    pub fn is_empty(&self) -> bool {
        self.running.is_empty() && self.recent.is_none()
    }

    /// Whether a destination shows events' pictures (MQTT with Home Assistant's discovery:
    /// each camera's snapshot).
    pub fn wants_pictures(&self) -> bool {
        self.pictures
    }

    /// Puts `m` in every destination's queue (a full one counts it).
    pub fn send(&self, m: &Message) {
        if let (Some(recent), Message::Event(_, e)) = (&self.recent, m) {
            recent.push(e);
        }
        for r in &self.running {
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

    /// Ends every destination within about a second (`DRAIN` to send what they hold, then
    /// `GRACE` to give back what they could not): what each did not deliver is said, kept
    /// in the spool where there is one, and makes the answer an Err naming it. Once: a
    /// later call gives the same answer.
    pub fn finish(&self) -> Result<(), Undelivered> {
        let mut ended = self.ended.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(answer) = ended.as_ref() {
            return answer.clone();
        }
        for r in &self.running {
            *r.tx.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        let until = Instant::now() + DRAIN;
        while Instant::now() < until && self.running.iter().any(Running::is_running) {
            std::thread::sleep(Duration::from_millis(20));
        }
        for r in &self.running {
            r.ended.store(true, Ordering::SeqCst);
        }
        let until = Instant::now() + GRACE;
        while Instant::now() < until && self.running.iter().any(Running::is_running) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let mut failed = Vec::new();
        for r in &self.running {
            let unsent = r.unsent();
            let overflow = r.overflow.load(Ordering::Relaxed);
            if unsent.is_empty() && overflow == 0 {
                continue;
            }
            let lost = Lost {
                to: r.what.clone(),
                unsent: unsent.len() as u64,
                overflow,
                kept: self.keep(&r.what, &unsent),
            };
            crate::warn!("{lost}");
            failed.push(lost);
        }
        let answer = match failed.is_empty() {
            true => Ok(()),
            false => Err(Undelivered(failed)),
        };
        *ended = Some(answer.clone());
        answer
    }

    /// Appends `events` not delivered to `what` to the spool: where it was written.
    fn keep(&self, what: &str, events: &[serde_json::Value]) -> Option<std::path::PathBuf> {
        let spool = self.spool.as_ref().filter(|_| !events.is_empty())?;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(spool)
            .ok()?;
        let mut text = String::new();
        for event in events {
            let line = serde_json::json!({ "to": crate::secret::redact(what), "event": event });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        file.write_all(text.as_bytes())
            .and_then(|()| file.flush())
            .ok()?;
        Some(spool.clone())
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

impl std::fmt::Debug for Outputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.running.iter().map(|r| &r.what))
            .finish()
    }
}

fn spawn(
    name: &str,
    f: impl FnOnce() -> Vec<serde_json::Value> + Send + 'static,
) -> Result<Thread> {
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

/// A file's thread: each event a line, flushed; the events that could not be written.
fn to_file(mut file: std::fs::File, rx: Receiver<Message>) -> Vec<serde_json::Value> {
    let mut lost = Vec::new();
    for m in rx {
        if let Message::Event(_, json) = m {
            if writeln!(file, "{json}")
                .and_then(|()| file.flush())
                .is_err()
            {
                lost.push(json);
            }
        }
    }
    lost
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
                prefix: "site/a".into(),
                discovery: None,
            }
        );
        let asked = |q: &str| match Destination::parse(&format!("mqtt://h/site?{q}")) {
            Ok(Destination::Mqtt { discovery, .. }) => Ok(discovery),
            Ok(other) => panic!("{other:?}"),
            Err(e) => Err(e.to_string()),
        };
        assert_eq!(
            asked("discovery=homeassistant"),
            Ok(Some("homeassistant".into()))
        );
        assert_eq!(
            asked("discovery=homeassistant&discovery_prefix=ha/"),
            Ok(Some("ha".into()))
        );
        assert_eq!(asked(""), Ok(None));
        let said = asked("discovry=homeassistant").unwrap_err();
        assert!(said.contains("did you mean 'discovery'"), "{said}");
        for bad in [
            "discovery=frigate",
            "discovery_prefix=ha",
            "discovery=homeassistant&discovery_prefix=a/#",
        ] {
            assert!(asked(bad).is_err(), "{bad}");
        }
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
        assert_eq!(
            super::super::message::topic_part("cam 1/a+b#"),
            "cam_1_a_b_"
        );
    }
}
