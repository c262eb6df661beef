//! Watching live at WebRTC latency: WHEP (RFC 9725, the WebRTC-HTTP egress protocol) on the
//! browser view's server. `POST /whep/{input}` (its name or number) with an SDP offer is
//! answered `201 Created` with the SDP answer and the session's address (`Location`),
//! `DELETE` on that address ends it; `/whep/mosaic` (or `/whep/picture`) is what the view
//! shows, the mosaic or the one input's processed picture. The STUN and TURN servers
//! viewers may use (`--ice-server`) are given as `Link` headers of the answer and at
//! `GET /whep/` (what the page reads before it offers).
//!
//! A camera's own H.264 goes out as it came, no decode, no encode: its packets are tapped
//! as `--record` taps them (`feed::InputFeed`). The view's picture is encoded once for all
//! its viewers (`encode`). Each viewer is a str0m session on threads of its own
//! (`viewer`), started from the last keyframe kept in memory (`feed`).
//!
//! Invariants: every request passed the view's checks (host, token, origin; an offer from a
//! page only from the page itself, as the controls); a bad offer (not SDP, no video, no
//! H.264, a stream that is not H.264) is a 4xx with a one-line reason; at most
//! `MAX_VIEWERS` sessions at once (more: 503); a viewer that stalls or goes costs nothing
//! to the others or the pipeline (its queue drops); `stop` ends every session within
//! `viewer::TICK`.

pub mod encode;
pub mod feed;
mod fmp4;
mod mse;
mod viewer;

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use hyper::header::{self, HeaderValue};
use hyper::{Method, Response, StatusCode};

use super::reply::{respond, Body, PLAIN};
use feed::Feed;

/// WebRTC sessions at once.
pub const MAX_VIEWERS: usize = 64;

/// The feeds viewers can take, and the sessions running (module doc).
pub struct Live {
    /// Each input's feed, by the run's input order, with its name.
    inputs: Vec<(String, Option<Arc<Feed>>)>,
    /// The view's picture, encoded once.
    picture: Arc<Feed>,
    /// Its encoder's mailbox.
    mailbox: Arc<encode::Mailbox>,
    /// Running sessions by id: the feed's name and the session.
    sessions: Mutex<HashMap<String, (String, viewer::Session)>>,
    stop: Arc<AtomicBool>,
}

impl Live {
    /// WebRTC of `inputs` (their names, and their feeds where they have packets) and of the
    /// view's picture (its encoder started).
    pub fn start(inputs: Vec<(String, Option<Arc<Feed>>)>) -> anyhow::Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let picture = Arc::new(Feed::default());
        let mailbox = Arc::new(encode::Mailbox::default());
        encode::start(mailbox.clone(), picture.clone(), stop.clone())?;
        Ok(Self {
            inputs,
            picture,
            mailbox,
            sessions: Mutex::new(HashMap::new()),
            stop,
        })
    }

    /// Hands the view's picture to its encoder, where someone watches it over WebRTC.
    pub fn show(&self, size: crate::frame::FrameSize, bgr: &[u8]) {
        if self.picture.viewers() > 0 {
            self.mailbox.offer(size, bgr);
        }
    }

    /// Sessions now (those ended are forgotten).
    pub fn viewers(&self) -> usize {
        let mut s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        s.retain(|_, (_, session)| !session.ended.load(Ordering::SeqCst));
        s.len()
    }

    /// Ends every session and the encoder.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
    }

    /// The feed `name` names: `mosaic` or `picture`, an input's name, or its number.
    fn feed(&self, name: &str) -> Result<Arc<Feed>, String> {
        if name == "mosaic" || name == "picture" {
            return Ok(self.picture.clone());
        }
        let at = self.inputs.iter().position(|(n, _)| n == name).or_else(|| {
            name.parse::<usize>()
                .ok()
                .filter(|&k| k < self.inputs.len())
        });
        let Some(at) = at else {
            return Err(format!(
                "no input '{name}' (an input's name or number, or mosaic)"
            ));
        };
        self.inputs[at].1.clone().ok_or_else(|| {
            format!(
                "input '{}' has no packets to send as they came (a camera device's frames); watch the mosaic",
                self.inputs[at].0
            )
        })
    }
}

/// Answers a request to `/whep/…` (`local`: the address the viewer reached the view on,
/// the session's host candidate).
pub(super) fn answer(
    (method, path): (&Method, &str),
    body: Option<Result<bytes::Bytes, ()>>,
    (local, ice): (IpAddr, &[super::access::IceServer]),
    live: Option<&Live>,
) -> Response<Body> {
    let Some(live) = live else {
        return respond(StatusCode::NOT_FOUND, PLAIN, "this view serves no WebRTC");
    };
    let rest = path.strip_prefix("/whep/").unwrap_or_default();
    let rest = super::api::recordings::percent_decoded(rest);
    match (method, rest.split_once('/')) {
        (&Method::GET, None) if rest.is_empty() => {
            // What a page needs before it offers: the ICE servers (`--ice-server`).
            let servers: Vec<serde_json::Value> = ice.iter().map(|s| s.json()).collect();
            let body = serde_json::json!({ "ice_servers": servers }).to_string();
            respond(StatusCode::OK, "application/json", body)
        }
        (&Method::POST, None) => {
            let mut r = offer(live, &rest, body, local);
            if r.status() == StatusCode::CREATED {
                for s in ice {
                    if let Ok(v) = HeaderValue::from_str(&s.link()) {
                        r.headers_mut().append(header::LINK, v);
                    }
                }
            }
            r
        }
        (&Method::DELETE, Some((name, id))) => end(live, name, id),
        (&Method::PATCH, Some(_)) => respond(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "candidates are not trickled: offer once ICE gathering is complete",
        ),
        _ => respond(
            StatusCode::METHOD_NOT_ALLOWED,
            PLAIN,
            "WHEP takes POST /whep/NAME with an SDP offer and DELETE on the session's address",
        ),
    }
}

/// Answers `GET /mse/NAME` (a WebSocket: `mse`).
pub(super) fn mse(
    path: &str,
    key: Option<&str>,
    upgrade: Option<hyper::upgrade::OnUpgrade>,
    live: Option<&Live>,
) -> Response<Body> {
    let Some(live) = live else {
        return respond(
            StatusCode::NOT_FOUND,
            PLAIN,
            "this view serves no live video",
        );
    };
    let name =
        super::api::recordings::percent_decoded(path.strip_prefix("/mse/").unwrap_or_default());
    match live.feed(&name) {
        Ok(feed) => mse::answer(key, upgrade, feed, live.stop.clone()),
        Err(why) => respond(StatusCode::NOT_FOUND, PLAIN, why),
    }
}

/// `POST /whep/NAME`: the offer taken, the answer and the session's address.
fn offer(
    live: &Live,
    name: &str,
    body: Option<Result<bytes::Bytes, ()>>,
    local: IpAddr,
) -> Response<Body> {
    let Some(Ok(body)) = body else {
        return respond(StatusCode::BAD_REQUEST, PLAIN, "no offer, or one too large");
    };
    let Ok(sdp) = std::str::from_utf8(&body) else {
        return respond(StatusCode::BAD_REQUEST, PLAIN, "the offer is not text");
    };
    let feed = match live.feed(name) {
        Ok(f) => f,
        Err(why) => return respond(StatusCode::NOT_FOUND, PLAIN, why),
    };
    if live.viewers() >= MAX_VIEWERS {
        let why = format!("{MAX_VIEWERS} viewers already watch over WebRTC; try later");
        return respond(StatusCode::SERVICE_UNAVAILABLE, PLAIN, why);
    }
    let (answer, session) = match viewer::start(feed, sdp, local, live.stop.clone()) {
        Ok(a) => a,
        Err(e) => {
            let code = match e {
                viewer::Refused::Bad(_) => StatusCode::BAD_REQUEST,
                viewer::Refused::Unmatched(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            };
            return respond(code, PLAIN, e.to_string());
        }
    };
    let id = session_id();
    let location = format!("/whep/{}/{id}", percent_encoded(name));
    live.sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(id, (name.to_string(), session));
    let mut r = respond(StatusCode::CREATED, "application/sdp", answer);
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// `DELETE /whep/NAME/ID`: the session ended.
fn end(live: &Live, name: &str, id: &str) -> Response<Body> {
    let mut sessions = live.sessions.lock().unwrap_or_else(|p| p.into_inner());
    match sessions.get(id) {
        Some((of, _)) if of == name => {
            if let Some((_, session)) = sessions.remove(id) {
                session.end.store(true, Ordering::SeqCst);
            }
            respond(StatusCode::OK, PLAIN, "ended")
        }
        _ => respond(StatusCode::NOT_FOUND, PLAIN, "no such session"),
    }
}

/// A session's id: 64 random bits (std's randomly keyed hasher), in hex.
fn session_id() -> String {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(std::process::id().into());
    format!("{:016x}", h.finish())
}

/// `name` as a path segment.
fn percent_encoded(name: &str) -> String {
    name.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            b => format!("%{b:02X}"),
        })
        .collect()
}
