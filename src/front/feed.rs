//! The wall's events as one stream (`GET /api/events/stream`, server-sent events): every
//! shard's newest events asked every `POLL`, and each not sent before handed on, oldest
//! first, as one `data:` line of the event's JSON with its `shard`.
//!
//! Invariants: an event goes out once (its shard and id remembered, the last `REMEMBERED`
//! of them); events made before the stream opened are not replayed; a comment line keeps a
//! quiet stream open (`KEEP_ALIVE`); at most `MAX_STREAMS` streams at once; a stream ends
//! when its client goes or a stop signal comes.

use std::collections::{HashSet, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use serde_json::Value;

use super::Front;
use crate::display::web::reply::{refusal, respond, Body};

/// How often the shards are asked for their newest events.
const POLL: Duration = Duration::from_millis(250);
/// How long a stream may go without a line before a comment is sent.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// Events remembered as sent.
const REMEMBERED: usize = 10_000;
/// Streams open at once.
const MAX_STREAMS: usize = 64;

/// Streams open now.
static OPEN: AtomicUsize = AtomicUsize::new(0);

/// One stream's place among `MAX_STREAMS`, given back when it ends.
struct Place;

impl Drop for Place {
    fn drop(&mut self) {
        OPEN.fetch_sub(1, Ordering::SeqCst);
    }
}

/// What one stream knows: the events sent, those waiting to go, and when it last spoke.
struct Stream {
    front: Arc<Front>,
    sent: HashSet<String>,
    order: VecDeque<String>,
    waiting: VecDeque<Value>,
    spoke: Instant,
    started: bool,
    _place: Place,
}

impl Stream {
    /// The shards' newest events; those not sent before wait to go, oldest first (the
    /// first time, they are only remembered).
    async fn poll(&mut self) {
        let asked = "/api/events?limit=200";
        let answers = self.front.ask_all(asked).await;
        let merged = super::merge::events(&self.front.urls(), &answers, usize::MAX);
        let mut new: Vec<Value> = Vec::new();
        for e in merged["events"].as_array().into_iter().flatten() {
            let key = format!("{}/{}", e["shard"], e["id"].as_str().unwrap_or_default());
            if self.sent.insert(key.clone()) {
                self.order.push_back(key);
                new.push(e.clone());
            }
        }
        while self.order.len() > REMEMBERED {
            if let Some(old) = self.order.pop_front() {
                self.sent.remove(&old);
            }
        }
        if std::mem::replace(&mut self.started, true) {
            self.waiting.extend(new.into_iter().rev());
        }
    }

    /// The next line to send, waiting for one (None: the front stops).
    async fn next(mut self) -> Option<(Bytes, Self)> {
        loop {
            if crate::stop::signalled() {
                return None;
            }
            if let Some(e) = self.waiting.pop_front() {
                self.spoke = Instant::now();
                return Some((Bytes::from(format!("data: {e}\n\n")), self));
            }
            if self.spoke.elapsed() > KEEP_ALIVE {
                self.spoke = Instant::now();
                return Some((Bytes::from_static(b": still here\n\n"), self));
            }
            if self.started {
                tokio::time::sleep(POLL).await;
            }
            self.poll().await;
        }
    }
}

/// Answers `GET /api/events/stream` (module doc).
pub fn answer(front: Arc<Front>) -> Response<Body> {
    if OPEN.fetch_add(1, Ordering::SeqCst) >= MAX_STREAMS {
        OPEN.fetch_sub(1, Ordering::SeqCst);
        let why = format!("{MAX_STREAMS} event streams are open already; try again later");
        return refusal("/api/events/stream", StatusCode::SERVICE_UNAVAILABLE, &why);
    }
    let stream = Stream {
        front,
        sent: HashSet::new(),
        order: VecDeque::new(),
        waiting: VecDeque::new(),
        spoke: Instant::now(),
        started: false,
        _place: Place,
    };
    // A first comment, so the client knows the stream is open before any event.
    let opened =
        futures_util::stream::once(async { Bytes::from_static(b": events of every shard\n\n") });
    let lines =
        futures_util::StreamExt::chain(opened, futures_util::stream::unfold(stream, Stream::next));
    let frames = futures_util::StreamExt::map(lines, |b| Ok(Frame::data(b)));
    let mut r = respond(StatusCode::OK, "text/event-stream", "");
    *r.body_mut() = BodyExt::boxed(StreamBody::new(frames));
    r
}
