//! The browser view's HTTP server: hyper's HTTP/1 on a single-threaded tokio runtime of its
//! own thread. hyper parses every request (a head arrives whole within `HEAD_WITHIN` or the
//! connection is closed), so a client that trickles bytes holds a socket, not a viewer's
//! place or anyone's answer.
//!
//! Invariants: every request passes `access` before anything is served (Host, then the
//! token, then where it comes from), except that `/healthz` needs the Host only (an
//! orchestrator's probe carries no token; it says healthy or how many inputs are down); at
//! most `MAX_CONNECTIONS` connections are open, at most `PER_CLIENT` of them from one client
//! address (an IPv4 address, an IPv6 /64), so that one client can't take every place from
//! the others (more are closed at once); at most `MAX_CLIENTS` of them watch the stream
//! (more get 503); a
//! viewer whose connection takes nothing for `CLIENT_TIMEOUT` while frames wait is closed,
//! and a slow one gets only the newest frame (nothing queues behind it); the server ends
//! when `Shared::shutdown` is notified, its connections with it.

use std::collections::HashMap;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use crossbeam_channel::Sender;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::sync::{Notify, Semaphore};

use super::access::CONTROL_HEADER;
use super::reply::{refusal, respond, Body, PLAIN};
use super::{Ask, Shared, MAX_CLIENTS};

/// The most connections open at once (viewers, figures, half-sent heads).
pub const MAX_CONNECTIONS: usize = 768;
/// The most connections open at once from one client address (`ClientKey`).
pub const PER_CLIENT: usize = 64;
/// How long a request's head may take to arrive whole.
pub const HEAD_WITHIN: Duration = Duration::from_secs(5);
/// How long a viewer's connection may take nothing while a frame waits for it.
pub const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `listener` until `shared.shutdown` is notified (runs on the server's thread).
pub fn run(listener: std::net::TcpListener, shared: Arc<Shared>, keys: Sender<Ask>) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            crate::warn!("the browser view could not start its server: {e}");
            return;
        }
    };
    runtime.block_on(accept(listener, shared, keys));
    runtime.shutdown_timeout(Duration::from_millis(50));
}

/// Accepts connections, each served by a task of its own.
async fn accept(listener: std::net::TcpListener, shared: Arc<Shared>, keys: Sender<Ask>) {
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        crate::warn!("the browser view could not listen");
        return;
    };
    let places = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let per_client = Arc::new(std::sync::Mutex::new(HashMap::new()));
    loop {
        let conn = tokio::select! {
            _ = shared.shutdown.notified() => return,
            conn = listener.accept() => conn,
        };
        let Ok((stream, peer)) = conn else {
            // Out of descriptors, most likely: wait a little rather than spin.
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let Some(client) = ClientPlace::take(&per_client, ClientKey::of(peer.ip())) else {
            continue; // dropped: this client holds its share already
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            continue; // dropped: the connection is closed at once
        };
        let (shared, keys) = (shared.clone(), keys.clone());
        // Where the viewer reached the view: a WebRTC session's host candidate.
        let local = stream
            .local_addr()
            .map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip());
        tokio::spawn(async move {
            let _place = (place, client);
            let kill = Arc::new(Notify::new());
            let service = {
                let kill = kill.clone();
                hyper::service::service_fn(move |req: Request<Incoming>| {
                    let (shared, keys, kill) = (shared.clone(), keys.clone(), kill.clone());
                    async move {
                        let (mut req, body) = req.into_parts();
                        // A WebSocket's (`/mse/…`) connection, handed over after the answer.
                        let upgrade = req.extensions.remove::<hyper::upgrade::OnUpgrade>();
                        let body = body_of(&req, body).await;
                        let to = (&shared, &keys, &kill, local);
                        Ok::<_, Infallible>(answer(&req, (body, upgrade), to))
                    }
                })
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_WITHIN)
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                _ = conn => {}
                _ = kill.notified() => {}
            }
        });
    }
}

/// Who a connection counts against (`PER_CLIENT`): its IPv4 address, or its IPv6
/// address's /64 (a host given a whole prefix is one client).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct ClientKey(u128);

impl ClientKey {
    fn of(ip: std::net::IpAddr) -> Self {
        match ip {
            std::net::IpAddr::V4(v4) => Self(u128::from(u32::from(v4))),
            std::net::IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => Self(u128::from(u32::from(v4))),
                None => Self(u128::from(v6) & !((1u128 << 64) - 1)),
            },
        }
    }
}

/// The connections open per client.
type PerClient = Arc<std::sync::Mutex<HashMap<ClientKey, usize>>>;

/// One of a client's places, given back when the connection ends.
struct ClientPlace(PerClient, ClientKey);

impl ClientPlace {
    /// A place for `key`, where it holds fewer than `PER_CLIENT`.
    fn take(all: &PerClient, key: ClientKey) -> Option<Self> {
        let mut open = all.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(key).or_insert(0);
        if *n >= PER_CLIENT {
            return None;
        }
        *n += 1;
        Some(Self(all.clone(), key))
    }
}

impl Drop for ClientPlace {
    fn drop(&mut self) {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

/// The most a request's body may hold (an input added through the API).
const MAX_BODY: usize = 64 * 1024;

/// A request's body, where it is one the API reads (a `POST` to `/api/`, a WHEP offer):
/// Some(Err) where it is larger than `MAX_BODY` or can't be read.
async fn body_of(req: &Req, body: Incoming) -> Option<Result<Bytes, ()>> {
    let path = req.uri.path();
    if req.method != Method::POST || !(path.starts_with("/api/") || path.starts_with("/whep/")) {
        return None;
    }
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    Some(
        limited
            .collect()
            .await
            .map(|b| b.to_bytes())
            .map_err(|_| ()),
    )
}

/// A request's head.
type Req = hyper::http::request::Parts;

/// A header's value as text.
fn text(req: &Req, name: impl header::AsHeaderName) -> Option<&str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

/// Answers one request (module doc: the checks come first).
fn answer(
    req: &Req,
    (body, upgrade): (Option<Result<Bytes, ()>>, Option<hyper::upgrade::OnUpgrade>),
    (shared, keys, kill, local): (&Arc<Shared>, &Sender<Ask>, &Arc<Notify>, std::net::IpAddr),
) -> Response<Body> {
    let host = match admit(req, shared) {
        ControlFlow::Continue(host) => host,
        ControlFlow::Break(answered) => return answered,
    };
    let origin = text(req, header::ORIGIN);
    let same_origin = shared
        .access
        .same_origin(host, origin, text(req, "sec-fetch-site"));
    match (&req.method, req.uri.path()) {
        (&Method::GET, "/" | "/index.html") => {
            respond(StatusCode::OK, "text/html; charset=utf-8", super::PAGE)
        }
        (&Method::GET, "/stats" | "/frame.jpg" | "/stream.mjpg" | "/metrics" | "/timeline.svg")
            if !same_origin =>
        {
            respond(StatusCode::FORBIDDEN, PLAIN, "not for another site's page")
        }
        (_, path)
            if (path.starts_with("/api/")
                || path.starts_with("/whep/")
                || path.starts_with("/mse/"))
                && !same_origin =>
        {
            refusal(path, StatusCode::FORBIDDEN, "not for another site's page")
        }
        (method, path) if path.starts_with("/api/") || path.starts_with("/whep/") => {
            // A change from a page: that page's own (its origin and its header), as the
            // controls; a program (no Origin) is admitted by its token.
            let changes = *method != Method::GET && *method != Method::HEAD;
            let marked = req.headers.contains_key(CONTROL_HEADER);
            if changes && origin.is_some() && !shared.access.control_allowed(host, origin, marked) {
                let why = "changes come from the page itself (its origin and its header) or from a program with the token";
                return refusal(path, StatusCode::FORBIDDEN, why);
            }
            if path.starts_with("/whep/") {
                let ice = (local, &shared.access.ice_servers[..]);
                return super::live::answer((method, path), body, ice, shared.live.get());
            }
            let asked = super::api::Asked {
                method,
                path,
                query: req.uri.query().unwrap_or_default(),
                range: text(req, header::RANGE),
                body,
            };
            super::api::answer(asked, shared)
                .unwrap_or_else(|| refusal(path, StatusCode::NOT_FOUND, "no such API endpoint"))
        }
        (&Method::GET, path) if path.starts_with("/mse/") => {
            let key = text(req, "sec-websocket-key");
            super::live::mse(path, key, upgrade, shared.live.get())
        }
        (&Method::GET, "/stream.mjpg") => stream(shared, kill),
        (&Method::GET, path @ ("/stats" | "/metrics" | "/frame.jpg" | "/timeline.svg")) => {
            figures(path, shared)
        }
        (&Method::POST, "/control" | "/chain" | "/stop") => control(req, shared, host, keys),
        _ => respond(StatusCode::NOT_FOUND, PLAIN, "not here"),
    }
}

/// The checks every request passes first: its Host (DNS rebinding refused), then the token
/// (`/healthz` is answered before it, saying healthy or not and no more). Goes on with the
/// Host, or breaks with the answer.
fn admit<'r>(req: &'r Req, shared: &Arc<Shared>) -> ControlFlow<Response<Body>, &'r str> {
    let rules = &shared.access;
    let host = text(req, header::HOST).or_else(|| req.uri.authority().map(|a| a.as_str()));
    if !rules.host_allowed(host) {
        let why = "this server answers only its own address (DNS rebinding is refused); name other hosts with --serve-host";
        return ControlFlow::Break(refusal(
            req.uri.path(),
            StatusCode::MISDIRECTED_REQUEST,
            why,
        ));
    }
    if req.method == Method::GET && req.uri.path() == "/healthz" {
        return ControlFlow::Break(healthz(shared));
    }
    let query = req.uri.query().unwrap_or_default();
    if !rules.token_ok(query, text(req, header::AUTHORIZATION)) {
        let why = "a token is needed: add ?token=... to the address";
        return ControlFlow::Break(refusal(req.uri.path(), StatusCode::UNAUTHORIZED, why));
    }
    ControlFlow::Continue(host.unwrap_or_default())
}

/// What the page reads of the run: `/stats`, `/metrics` (both with secrets redacted), the
/// latest picture and the timeline.
fn figures(path: &str, shared: &Shared) -> Response<Body> {
    match path {
        "/stats" => {
            let stats = shared.stats.lock().map(|s| s.clone()).unwrap_or_default();
            let stats = crate::secret::redact(&stats).into_owned();
            respond(StatusCode::OK, "application/json", stats)
        }
        "/metrics" => {
            let text = super::health::metrics(&snapshot(shared));
            let text = crate::secret::redact(&text).into_owned();
            respond(
                StatusCode::OK,
                "text/plain; version=0.0.4; charset=utf-8",
                text,
            )
        }
        "/frame.jpg" => {
            let jpeg = shared.latest.borrow().1.clone();
            match jpeg.is_empty() {
                false => respond(StatusCode::OK, "image/jpeg", jpeg.to_vec()),
                true => respond(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "no frame yet"),
            }
        }
        _ => {
            let svg = shared
                .timeline
                .lock()
                .map(|s| s.clone())
                .unwrap_or_default();
            match svg.is_empty() {
                false => respond(StatusCode::OK, "image/svg+xml", svg),
                true => respond(StatusCode::SERVICE_UNAVAILABLE, PLAIN, "no timeline yet"),
            }
        }
    }
}

/// A control (`/control`, `/chain`, `/stop`): taken from the page itself only (its origin
/// and its header), refused with its reason where it asks for what the view can't do.
fn control(req: &Req, shared: &Shared, host: &str, keys: &Sender<Ask>) -> Response<Body> {
    let marked = req.headers.contains_key(CONTROL_HEADER);
    if !shared
        .access
        .control_allowed(host, text(req, header::ORIGIN), marked)
    {
        let why = "controls come from the page itself (its origin and its header)";
        return respond(StatusCode::FORBIDDEN, PLAIN, why);
    }
    let query = req.uri.query().unwrap_or_default();
    match super::ask_of(req.uri.path(), query) {
        Ok(ask) => {
            let _ = keys.send(ask);
            respond(StatusCode::OK, PLAIN, "ok")
        }
        Err(why) => respond(StatusCode::BAD_REQUEST, PLAIN, why.to_string()),
    }
}

/// The run's figures as of now (`Snapshot::now`).
fn snapshot(shared: &Shared) -> super::health::Snapshot {
    let snap = shared.snapshot.lock().map(|s| s.clone());
    snap.unwrap_or_default().now()
}

/// `/healthz`: 200 while every input is live or down for less than the budget, 503 else.
fn healthz(shared: &Arc<Shared>) -> Response<Body> {
    let (ok, said) = super::health::verdict(&snapshot(shared), shared.access.health_budget);
    let code = match ok {
        true => StatusCode::OK,
        false => StatusCode::SERVICE_UNAVAILABLE,
    };
    respond(code, PLAIN, said)
}

/// A viewer's place among `MAX_CLIENTS`, given back when its stream ends.
struct Viewer(Arc<Shared>);

impl Drop for Viewer {
    fn drop(&mut self) {
        self.0.clients.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The Motion JPEG stream: the newest JPEG each time there is a newer one.
fn stream(shared: &Arc<Shared>, kill: &Arc<Notify>) -> Response<Body> {
    if shared.clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
        shared.clients.fetch_sub(1, Ordering::SeqCst);
        let why = format!("{MAX_CLIENTS} viewers already watch; try again later");
        return respond(StatusCode::SERVICE_UNAVAILABLE, PLAIN, why);
    }
    let viewer = Viewer(shared.clone());
    // When the last frame was taken; u64::MAX while the stream waits for a new one.
    let started = Instant::now();
    let taken = Arc::new(AtomicU64::new(u64::MAX));
    watch_for_stalls(taken.clone(), started, kill.clone());
    let frames = futures_util::stream::unfold(
        (shared.latest.subscribe(), viewer, taken),
        move |(mut rx, viewer, taken)| async move {
            taken.store(u64::MAX, Ordering::SeqCst);
            rx.changed().await.ok()?;
            let jpeg = rx.borrow_and_update().1.clone();
            taken.store(started.elapsed().as_millis() as u64, Ordering::SeqCst);
            let mut part = format!(
                "--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n",
                jpeg.len()
            )
            .into_bytes();
            part.extend_from_slice(&jpeg);
            part.extend_from_slice(b"\r\n");
            Some((Ok(Frame::data(Bytes::from(part))), (rx, viewer, taken)))
        },
    );
    let mut r = respond(
        StatusCode::OK,
        "multipart/x-mixed-replace; boundary=frame",
        "",
    );
    *r.body_mut() = BodyExt::boxed(StreamBody::new(frames));
    r
}

/// Closes a viewer's connection (`kill`) once the frame it was handed has not been taken
/// for `CLIENT_TIMEOUT`.
fn watch_for_stalls(taken: Arc<AtomicU64>, started: Instant, kill: Arc<Notify>) {
    let watching = Arc::downgrade(&taken);
    drop(taken);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let Some(taken) = watching.upgrade() else {
                return; // the stream ended
            };
            let at = taken.load(Ordering::SeqCst);
            let now = started.elapsed().as_millis() as u64;
            if at != u64::MAX && now.saturating_sub(at) > CLIENT_TIMEOUT.as_millis() as u64 {
                kill.notify_one();
                return;
            }
        }
    });
}

/// Raises this process's limit of open files to the most it may have, so that many viewers
/// and half-open connections meet `MAX_CONNECTIONS` before they meet the limit.
pub fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let now = getrlimit(Resource::Nofile);
    if now.current < now.maximum || (now.current.is_some() && now.maximum.is_none()) {
        let _ = setrlimit(
            Resource::Nofile,
            Rlimit {
                current: now.maximum,
                maximum: now.maximum,
            },
        );
    }
}
