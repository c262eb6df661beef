//! Events to an MQTT broker (`mqtt://HOST[:PORT]/PREFIX`): each event on
//! `PREFIX/INPUT/events`, each zone's count retained on `PREFIX/INPUT/zones/ZONE`, and
//! `PREFIX/available` retained `online` (`offline` as the last will, and at the end).
//!
//! With `?discovery=homeassistant`, Home Assistant's MQTT discovery (`discovery`): as each
//! camera begins to be watched, its device is described, retained, under the discovery
//! prefix: each zone an occupancy sensor and a count, each kind of event (per zone and
//! line) a device trigger, and a camera showing its latest event's frame, retained on
//! `PREFIX/INPUT/snapshot` as a JPEG (at most one a second).
//!
//! One thread drives rumqttc's event loop and keeps what it publishes until the broker
//! acknowledges it (QoS 1): a publication waits in `waiting` until the client is connected,
//! is `handed` to the client, becomes `inflight` under the packet id the loop gives it, and
//! is forgotten on its `PubAck`. When the connection drops, every publication not yet
//! acknowledged goes back to the head of `waiting`, in order, and rumqttc's own resend list
//! is emptied: this thread alone decides what is sent again, so a broker that was away for
//! the whole run, or for a while, gets every event once it answers.
//!
//! Invariants: publications go out in the order they were made (a camera's description
//! before its states; a retained state still waiting is replaced by a newer one in its place); at most `QUEUE` wait (the overflow is counted by `out`); the thread
//! ends once the run's end is told (`ended`) within a tick (`TICK`), giving back the events
//! not acknowledged; the retained states it set (zone counts, snapshots) are cleared (an
//! empty retained payload) as it ends with the broker there; the descriptions stay, so
//! Home Assistant keeps the entities, unavailable, until the next run.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, TryRecvError};
use rumqttc::{Client, Event, LastWill, MqttOptions, Outgoing, Packet, QoS};

use super::discovery::Discovery;
use super::message::{topic_part, Message, QUEUE};

/// How long one turn of the loop waits on the broker.
const TICK: Duration = Duration::from_millis(50);
/// How long one turn waits while a connection is being made.
const CONNECTING: Duration = Duration::from_millis(600);
/// Publications handed to the client and not yet acknowledged, at most.
const INFLIGHT: usize = 64;
/// The wait after a failed connection before the next try.
const RETRY: Duration = Duration::from_millis(500);
/// How long the end waits for the broker to acknowledge the cleared states.
const GOODBYE: Duration = Duration::from_millis(300);

/// A publication as made: its topic, payload, whether retained, and the event it carries.
type Made = (String, Vec<u8>, bool, Option<serde_json::Value>);

/// One publication, numbered in the order it was made.
#[derive(Clone, Debug)]
struct Publication {
    seq: u64,
    topic: String,
    payload: Vec<u8>,
    retain: bool,
    /// The event it carries (None: a count or the availability).
    event: Option<serde_json::Value>,
}

/// The broker, the topics' prefix, and Home Assistant's discovery prefix where asked.
pub(super) struct Broker {
    pub host: String,
    pub port: u16,
    pub prefix: String,
    pub discovery: Option<String>,
    /// What makes an event's picture the camera's snapshot, where one can be made.
    pub jpeg: Option<super::JpegMaker>,
}

/// The broker's thread (module doc): the events it could not deliver.
pub(super) fn run(
    broker: &Broker,
    rx: Receiver<Message>,
    ended: &AtomicBool,
) -> Vec<serde_json::Value> {
    let prefix = broker.prefix.as_str();
    let id = format!("framepipe-{}", std::process::id());
    let mut options = MqttOptions::new(id, &broker.host, broker.port);
    options.set_keep_alive(Duration::from_secs(10));
    let available = format!("{prefix}/available");
    options.set_last_will(LastWill::new(&available, "offline", QoS::AtLeastOnce, true));
    let (client, connection) = Client::new(options, INFLIGHT);
    let mut link = Link {
        client,
        connection,
        waiting: VecDeque::new(),
        handed: VecDeque::new(),
        inflight: BTreeMap::new(),
        connected: false,
        said: false,
        seq: 0,
        retained: BTreeSet::new(),
        discovery: broker
            .discovery
            .as_ref()
            .map(|d| Discovery::new(d, prefix, broker.jpeg.is_some())),
        jpeg: broker.jpeg,
    };
    let mut open = true;
    loop {
        open = open && link.take(&rx, prefix);
        if !open && link.is_empty() {
            break;
        }
        if ended.load(Ordering::SeqCst) {
            break;
        }
        link.hand();
        link.turn(&available, ended);
    }
    link.goodbye(&available);
    let mut unsent = link.unsent();
    unsent.extend(rx.try_iter().filter_map(Message::event));
    unsent
}

/// The client, its event loop and what it holds (module doc).
struct Link {
    client: Client,
    connection: rumqttc::Connection,
    waiting: VecDeque<Publication>,
    handed: VecDeque<Publication>,
    inflight: BTreeMap<u16, Publication>,
    connected: bool,
    said: bool,
    seq: u64,
    /// The retained topics set (zone counts, snapshots), cleared at the end.
    retained: BTreeSet<String>,
    /// Home Assistant's discovery, where asked.
    discovery: Option<Discovery>,
    /// What makes a snapshot's JPEG.
    jpeg: Option<super::JpegMaker>,
}

impl Link {
    /// Takes what the run made since the last turn, up to `QUEUE` held; false once the
    /// run's senders are gone.
    fn take(&mut self, rx: &Receiver<Message>, prefix: &str) -> bool {
        while self.held() < QUEUE {
            let m = match rx.try_recv() {
                Ok(m) => m,
                Err(TryRecvError::Empty) => return true,
                Err(TryRecvError::Disconnected) => return false,
            };
            for publication in self.publications(m, prefix) {
                self.push(publication);
            }
        }
        true
    }

    /// What message `m` publishes: its topic, payload, whether retained, and the event.
    fn publications(&mut self, m: Message, prefix: &str) -> Vec<Made> {
        match m {
            Message::Event(input, json) => {
                let topic = format!("{prefix}/{}/events", topic_part(&input));
                vec![(topic, json.to_string().into_bytes(), false, Some(json))]
            }
            Message::Count(input, zone, n) => {
                let topic = format!(
                    "{prefix}/{}/zones/{}",
                    topic_part(&input),
                    topic_part(&zone)
                );
                self.retained.insert(topic.clone());
                vec![(topic, n.to_string().into_bytes(), true, None)]
            }
            Message::Camera(input, watched) => match &mut self.discovery {
                Some(d) => d.described(&input, &watched),
                None => Vec::new(),
            },
            Message::Picture(input, picture) => {
                let made = self.jpeg.and_then(|make| make(&picture));
                let (Some(_), Some(jpeg)) = (&self.discovery, made) else {
                    return Vec::new();
                };
                let topic = format!("{prefix}/{}/snapshot", topic_part(&input));
                self.retained.insert(topic.clone());
                vec![(topic, jpeg, true, None)]
            }
        }
    }

    /// Queues a publication; a retained state (a count, a snapshot, a description) still
    /// waiting for the same topic takes the newer payload in its place instead, so that a
    /// broker away for long is owed only the newest of each.
    fn push(&mut self, (topic, payload, retain, event): Made) {
        if retain && event.is_none() {
            let same = self
                .waiting
                .iter_mut()
                .find(|p| p.retain && p.event.is_none() && p.topic == topic);
            if let Some(p) = same {
                p.payload = payload;
                return;
            }
        }
        self.seq += 1;
        self.waiting.push_back(Publication {
            seq: self.seq,
            topic,
            payload,
            retain,
            event,
        });
    }

    fn held(&self) -> usize {
        self.waiting.len() + self.handed.len() + self.inflight.len()
    }

    fn is_empty(&self) -> bool {
        self.held() == 0
    }

    /// Hands waiting publications to the client while it is connected and has room.
    fn hand(&mut self) {
        while self.connected && self.handed.len() + self.inflight.len() < INFLIGHT {
            let Some(p) = self.waiting.pop_front() else {
                return;
            };
            let sent = self.client.try_publish(
                p.topic.clone(),
                QoS::AtLeastOnce,
                p.retain,
                p.payload.clone(),
            );
            match sent {
                Ok(()) => self.handed.push_back(p),
                Err(_) => {
                    self.waiting.push_front(p);
                    return;
                }
            }
        }
    }

    /// One turn of the event loop: a connection made, a publication sent or acknowledged,
    /// or the connection lost (what was not acknowledged waits again).
    fn turn(&mut self, available: &str, ended: &AtomicBool) {
        // A connection being made is given longer than a tick (a broker a few hundred
        // milliseconds away must get to answer), within the stop's second.
        let wait = if self.connected { TICK } else { CONNECTING };
        match self.connection.recv_timeout(wait) {
            Ok(Ok(Event::Incoming(Packet::ConnAck(_)))) => {
                self.connected = true;
                if std::mem::take(&mut self.said) {
                    crate::info!("events to MQTT: connected again; what waited goes out");
                }
                // Said first, ahead of what waits.
                self.waiting.push_front(Publication {
                    seq: 0,
                    topic: available.to_string(),
                    payload: b"online".to_vec(),
                    retain: true,
                    event: None,
                });
            }
            Ok(Ok(Event::Outgoing(Outgoing::Publish(pkid)))) => {
                if let Some(p) = self.handed.pop_front() {
                    self.inflight.insert(pkid, p);
                }
            }
            Ok(Ok(Event::Incoming(Packet::PubAck(ack)))) => {
                self.inflight.remove(&ack.pkid);
            }
            Ok(Ok(_)) | Err(rumqttc::RecvTimeoutError::Timeout) => {}
            Ok(Err(e)) => {
                if !self.said {
                    self.said = true;
                    crate::warn!("events to MQTT: {e}; kept, and sent once it answers");
                }
                self.lost_connection();
                let until = Instant::now() + RETRY;
                while Instant::now() < until && !ended.load(Ordering::SeqCst) {
                    std::thread::sleep(TICK);
                }
            }
            Err(rumqttc::RecvTimeoutError::Disconnected) => self.lost_connection(),
        }
    }

    /// The connection is gone: what was handed or in flight waits again, in order, and
    /// rumqttc's own resend list is dropped (this thread sends it again).
    fn lost_connection(&mut self) {
        self.connected = false;
        self.connection.eventloop.pending.clear();
        let mut again: Vec<Publication> =
            std::mem::take(&mut self.inflight).into_values().collect();
        again.extend(self.handed.drain(..));
        again.sort_by_key(|p| p.seq);
        for p in again.into_iter().rev() {
            self.waiting.push_front(p);
        }
        // The availability is said again on the next connection.
        self.waiting.retain(|p| p.seq != 0);
    }

    /// The end, with the broker there: the retained counts cleared and `offline` said,
    /// waited for a moment; then the client disconnects.
    fn goodbye(&mut self, available: &str) {
        if self.connected {
            for topic in std::mem::take(&mut self.retained) {
                let _ = self
                    .client
                    .try_publish(topic, QoS::AtLeastOnce, true, Vec::new());
            }
            let _ = self
                .client
                .try_publish(available, QoS::AtLeastOnce, true, "offline");
            let until = Instant::now() + GOODBYE;
            while Instant::now() < until && self.connected {
                match self.connection.recv_timeout(TICK) {
                    Ok(Ok(Event::Incoming(Packet::PubAck(ack)))) => {
                        self.inflight.remove(&ack.pkid);
                    }
                    Ok(Err(_)) => self.connected = false,
                    _ => {}
                }
            }
        }
        let _ = self.client.try_disconnect();
        let _ = self.connection.recv_timeout(TICK);
    }

    /// The events not acknowledged, in order.
    fn unsent(&mut self) -> Vec<serde_json::Value> {
        let mut all: Vec<Publication> = std::mem::take(&mut self.inflight).into_values().collect();
        all.extend(self.handed.drain(..));
        all.extend(self.waiting.drain(..));
        all.sort_by_key(|p| p.seq);
        all.into_iter().filter_map(|p| p.event).collect()
    }
}
