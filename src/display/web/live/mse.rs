//! Media Source Extensions over a WebSocket, WebRTC's fallback (as go2rtc's): `GET
//! /mse/{name}` upgraded to a WebSocket (RFC 6455, spoken by tungstenite on the connection
//! hyper hands over) sends the MIME type the page hands `MediaSource.addSourceBuffer` (a
//! text message first), then as binary messages the init segment and one fragment a unit
//! (`fmp4`), from the last keyframe kept: the same units WebRTC sends.
//!
//! Invariants: the feed's units reach the connection through a queue that drops (a viewer
//! that stalls loses its own fragments and starts again from a keyframe, nothing else
//! waits); the queue holds at most `QUEUE` messages and `QUEUE_BYTES`; a viewer whose queue
//! stays full, or whose socket takes no byte, for `STALLED` is cut (its connection closed),
//! and while it waits its thread sleeps (no CPU spent on a viewer that reads nothing); a
//! client's messages are read (pings answered, at most `CLIENT_MESSAGE` bytes each) and
//! dropped; a connection ends with a close when the client closes, the feed's stream
//! changes size, or the view stops.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use super::super::reply::{respond, Body, PLAIN};
use super::feed::{Feed, Place, Unit};
use super::fmp4;

/// Messages waiting for a connection's socket.
const QUEUE: usize = 256;
/// Bytes waiting for a connection's socket, at most.
const QUEUE_BYTES: usize = 4 << 20;
/// How long a viewer may read nothing before it is cut.
const STALLED: Duration = Duration::from_secs(10);
/// How often a viewer whose queue is full looks for room.
const WAIT: Duration = Duration::from_millis(100);

/// Bytes queued for one connection's socket (the viewer's thread adds, the writer takes).
type Queued = Arc<std::sync::atomic::AtomicUsize>;

/// The largest message a client may send (it has nothing to say but pings and a close).
const CLIENT_MESSAGE: usize = 64 << 10;

/// A message's bytes, as the queue counts them.
fn size_of(m: &Message) -> usize {
    m.len()
}

/// Answers `GET /mse/NAME`: 101 and the stream, on a task of its own, once the connection
/// is handed over (`upgrade`); a 4xx where it is not a WebSocket request.
pub fn answer(
    key: Option<&str>,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    feed: Arc<Feed>,
    stop: Arc<AtomicBool>,
) -> Response<Body> {
    let (Some(key), Some(upgrade)) = (key, upgrade) else {
        let why = "/mse/NAME is a WebSocket (Upgrade: websocket, Sec-WebSocket-Key)";
        return respond(StatusCode::BAD_REQUEST, PLAIN, why);
    };
    let place = match feed.watch() {
        Ok(p) => p,
        Err(why) => return respond(StatusCode::UNSUPPORTED_MEDIA_TYPE, PLAIN, why),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Message>(QUEUE);
    let ended = Arc::new(AtomicBool::new(false));
    let queued = Queued::default();
    let fragments = {
        let (ended, queued) = (ended.clone(), queued.clone());
        std::thread::Builder::new()
            .name("mse-viewer".into())
            .spawn(move || {
                let out = Out {
                    tx: &tx,
                    queued: &queued,
                };
                fragments_of(place, &feed, &out, (&ended, &stop));
            })
    };
    if fragments.is_err() {
        return respond(
            StatusCode::SERVICE_UNAVAILABLE,
            PLAIN,
            "no thread for the viewer",
        );
    }
    tokio::spawn(async move {
        if let Ok(upgraded) = upgrade.await {
            let config = WebSocketConfig::default()
                .max_message_size(Some(CLIENT_MESSAGE))
                .max_frame_size(Some(CLIENT_MESSAGE));
            let io = TokioIo::new(upgraded);
            let ws = WebSocketStream::from_raw_socket(io, Role::Server, Some(config)).await;
            send(ws, rx, &queued).await;
        }
        ended.store(true, Ordering::SeqCst);
    });
    let mut r = respond(StatusCode::SWITCHING_PROTOCOLS, PLAIN, "");
    let h = r.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    if let Ok(v) = HeaderValue::from_str(&derive_accept_key(key.trim().as_bytes())) {
        h.insert("sec-websocket-accept", v);
    }
    r.headers_mut().remove(header::CONTENT_TYPE);
    r
}

/// Sends the queue's messages on the WebSocket, reading (and dropping) what the client
/// sends, until either side ends, or a message waits `STALLED` for a socket that takes
/// nothing; the end is a close where the socket still takes one.
async fn send<S>(
    ws: WebSocketStream<S>,
    mut rx: tokio::sync::mpsc::Receiver<Message>,
    queued: &Queued,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (mut sink, mut client) = ws.split();
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Some(m) => {
                    let n = size_of(&m);
                    let written = tokio::time::timeout(STALLED, sink.send(m)).await;
                    queued.fetch_sub(n, Ordering::SeqCst);
                    if !matches!(written, Ok(Ok(()))) {
                        return;
                    }
                }
                None => break,
            },
            said = client.next() => match said {
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                // A ping's pong goes with the next write; the rest is dropped.
                Some(Ok(_)) => {}
            },
        }
    }
    let close = async {
        let _ = sink.send(Message::Close(None)).await;
        let _ = sink.close().await;
    };
    let _ = tokio::time::timeout(Duration::from_secs(1), close).await;
}

/// Where a viewer's messages go: its queue, and the bytes in it.
struct Out<'a> {
    tx: &'a tokio::sync::mpsc::Sender<Message>,
    queued: &'a Queued,
}

impl Out<'_> {
    /// Queues `m`, where the queue has room for it (messages and bytes).
    fn try_send(&self, m: Message) -> bool {
        let n = size_of(&m);
        if self.queued.load(Ordering::SeqCst) + n > QUEUE_BYTES {
            return false;
        }
        self.queued.fetch_add(n, Ordering::SeqCst);
        if self.tx.try_send(m).is_err() {
            self.queued.fetch_sub(n, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// Whether the queue has room again (a tenth of its bytes and a message).
    fn has_room(&self) -> bool {
        self.tx.capacity() > 0 && self.queued.load(Ordering::SeqCst) < QUEUE_BYTES / 10 * 9
    }
}

/// The viewer's thread: its units made fragments, the first ones from the last keyframe;
/// one lost at the queue (the socket is slow) starts it again from a keyframe once there is
/// room, the thread sleeping meanwhile; a viewer whose queue stays full for `STALLED` is
/// let go.
fn fragments_of(place: Place, feed: &Feed, out: &Out, (ended, stop): (&AtomicBool, &AtomicBool)) {
    // MSE carries the video only: its sound queue is let go at once, so that no sound is
    // encoded for it.
    let Place {
        kept,
        units,
        behind,
        ..
    } = place;
    let mut muxer: Option<Muxer> = None;
    let mut pending: Vec<Arc<Unit>> = kept;
    let mut full_since: Option<std::time::Instant> = None;
    while !ended.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
        if let Some(since) = full_since {
            // Behind: what comes meanwhile is dropped; again from a keyframe once there is
            // room, or the viewer is let go.
            while units.try_recv().is_ok() {}
            if since.elapsed() > STALLED {
                crate::debug!(
                    "mse: a viewer read nothing for {} s: cut",
                    STALLED.as_secs()
                );
                return;
            }
            if !out.has_room() {
                std::thread::sleep(WAIT);
                continue;
            }
            full_since = None;
            pending = feed.since_key();
        }
        if pending.is_empty() {
            match units.recv_timeout(WAIT) {
                Ok(u) => pending.push(u),
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => continue,
                Err(_) => return,
            }
        }
        for unit in std::mem::take(&mut pending) {
            if muxer.is_none() {
                muxer = Muxer::first(&unit, out, feed.size());
            }
            let Some(m) = muxer.as_mut() else {
                continue; // not a keyframe with its parameter sets yet
            };
            if !out.try_send(Message::binary(m.fragment(&unit))) {
                // Behind (a fragment lost is a hole).
                full_since = Some(std::time::Instant::now());
                break;
            }
        }
        if behind.swap(false, Ordering::SeqCst) {
            while units.try_recv().is_ok() {}
            pending = feed.since_key();
        }
    }
}

/// One connection's fragments: their numbers and decode times.
struct Muxer {
    sequence: u32,
    /// The first unit's decode time (the stream's time zero here), and the last one's.
    zero: i64,
    last: Option<i64>,
    duration: u32,
}

impl Muxer {
    /// Starts on `unit` where it is a keyframe with its parameter sets: the MIME type and
    /// the init segment sent first.
    fn first(unit: &Unit, out: &Out, size: Option<(u16, u16)>) -> Option<Self> {
        if !unit.key {
            return None;
        }
        let (sps, pps) = fmp4::parameter_sets(unit)?;
        let size = size.unwrap_or((0, 0));
        let mime = format!("video/mp4; codecs=\"{}\"", fmp4::codecs(&sps));
        out.try_send(Message::text(mime)).then_some(())?;
        out.try_send(Message::binary(fmp4::init(&sps, &pps, size)))
            .then_some(())?;
        Some(Self {
            sequence: 0,
            zero: unit.dts90k,
            last: None,
            duration: 3600,
        })
    }

    fn fragment(&mut self, unit: &Unit) -> Vec<u8> {
        self.sequence += 1;
        // A decode time that does not grow (a burst again from the keyframe) follows the
        // last one instead.
        let mut decode = unit.dts90k - self.zero;
        if let Some(last) = self.last {
            if decode <= last {
                decode = last + i64::from(self.duration);
                self.zero = unit.dts90k - decode;
            } else {
                self.duration = u32::try_from(decode - last)
                    .unwrap_or(3600)
                    .clamp(1, 90_000);
            }
        }
        self.last = Some(decode);
        fmp4::fragment(unit, self.sequence, decode.max(0) as u64, self.duration)
    }
}
