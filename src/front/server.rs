//! The front's HTTP server: hyper on a tokio runtime of the calling thread, each request
//! admitted as a shard's door admits it (`admit`), then answered from every shard at once
//! or from the camera's owner (`route`).
//!
//! Invariants: at most `MAX_CONNECTIONS` connections, each request head within
//! `HEAD_WITHIN` and each body up to `MAX_BODY`; `/healthz` is answered before the token,
//! saying whether each shard is up and no more; a stop signal ends the server within
//! `STOP_POLL` and the runtime within a tenth of a second more.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};

use super::merge;
use super::Front;
use crate::display::web::access::CONTROL_HEADER;
use crate::display::web::reply::{refusal, respond, Body, JSON, PLAIN};

/// Connections served at once.
const MAX_CONNECTIONS: usize = 512;
/// How long a request's head may take to arrive whole.
const HEAD_WITHIN: Duration = Duration::from_secs(5);
/// The most a request's body may hold (an input added).
const MAX_BODY: usize = 64 * 1024;
/// How often the server looks for a stop signal.
const STOP_POLL: Duration = Duration::from_millis(50);
/// The events `/api/events` gives where no `limit` is asked, and the most it gives.
const EVENTS: (usize, usize) = (50, 200);

/// A request's head.
type Req = hyper::http::request::Parts;

/// Serves `listener` until a stop signal.
pub fn serve(listener: std::net::TcpListener, front: Arc<Front>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(accept(listener, front))?;
    runtime.shutdown_timeout(Duration::from_millis(100));
    Ok(())
}

async fn accept(listener: std::net::TcpListener, front: Arc<Front>) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::from_std(listener)?;
    let places = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let mut poll = tokio::time::interval(STOP_POLL);
    loop {
        let conn = tokio::select! {
            _ = poll.tick() => {
                if crate::stop::signalled() {
                    return Ok(());
                }
                continue;
            }
            conn = listener.accept() => conn,
        };
        let Ok((stream, _)) = conn else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        let Ok(place) = places.clone().try_acquire_owned() else {
            continue; // dropped: the connection is closed at once
        };
        let front = front.clone();
        tokio::spawn(async move {
            let _place = place;
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                let front = front.clone();
                async move {
                    let (req, body) = req.into_parts();
                    Ok::<_, Infallible>(answer(&req, body, front).await)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEAD_WITHIN)
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// A header's value as text.
fn text(req: &Req, name: impl header::AsHeaderName) -> Option<&str> {
    req.headers.get(name).and_then(|v| v.to_str().ok())
}

async fn answer(req: &Req, body: Incoming, front: Arc<Front>) -> Response<Body> {
    let host = match admit(req, &front).await {
        ControlFlow::Continue(host) => host,
        ControlFlow::Break(answered) => return answered,
    };
    let path = req.uri.path();
    let origin = text(req, header::ORIGIN);
    if !front
        .serve
        .same_origin(host, origin, text(req, "sec-fetch-site"))
    {
        return refusal(path, StatusCode::FORBIDDEN, "not for another site's page");
    }
    let changes = req.method != Method::GET && req.method != Method::HEAD;
    let marked = req.headers.contains_key(CONTROL_HEADER);
    if changes && origin.is_some() && !front.serve.control_allowed(host, origin, marked) {
        let why = "changes come from the page itself (its origin and its header) or from a program with the token";
        return refusal(path, StatusCode::FORBIDDEN, why);
    }
    let body = match changes {
        true => match Limited::new(body, MAX_BODY).collect().await {
            Ok(b) => Some(b.to_bytes()),
            Err(_) => {
                let why = format!("a request's body is {MAX_BODY} bytes at most");
                return refusal(path, StatusCode::PAYLOAD_TOO_LARGE, &why);
            }
        },
        false => None,
    };
    route(req, body, &front).await
}

/// The checks every request passes first: its Host (DNS rebinding refused), then the
/// token (`/healthz` is answered before it). Goes on with the Host, or breaks with the
/// answer.
async fn admit<'r>(req: &'r Req, front: &Front) -> ControlFlow<Response<Body>, &'r str> {
    let host = text(req, header::HOST).or_else(|| req.uri.authority().map(|a| a.as_str()));
    if !front.serve.host_allowed(host) {
        let why = "this server answers only its own address (DNS rebinding is refused); name other hosts with --serve-host";
        let answer = refusal(req.uri.path(), StatusCode::MISDIRECTED_REQUEST, why);
        return ControlFlow::Break(answer);
    }
    if req.method == Method::GET && req.uri.path() == "/healthz" {
        return ControlFlow::Break(healthz(front).await);
    }
    let query = req.uri.query().unwrap_or_default();
    if !front
        .serve
        .token_ok(query, text(req, header::AUTHORIZATION))
    {
        let why = "a token is needed: add ?token=... to the address";
        return ControlFlow::Break(refusal(req.uri.path(), StatusCode::UNAUTHORIZED, why));
    }
    ControlFlow::Continue(host.unwrap_or_default())
}

/// The wall's health: whether each shard is up and healthy, no more.
async fn healthz(front: &Front) -> Response<Body> {
    let answers = front.ask_all("/healthz").await;
    let (code, full) = merge::health(&front.urls(), &answers);
    let shards: Vec<serde_json::Value> = full["shards"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|s| serde_json::json!({"shard": s["shard"], "up": s["up"], "healthy": s["status"] == 200}))
        .collect();
    let body = serde_json::json!({"status": full["status"], "shards": shards});
    let code = StatusCode::from_u16(code).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
    respond(code, JSON, body.to_string())
}

async fn route(req: &Req, body: Option<Bytes>, front: &Arc<Front>) -> Response<Body> {
    if req.method == Method::GET && req.uri.path() == "/api/events/stream" {
        return super::feed::answer(front.clone());
    }
    if let Some(rest) = req.uri.path().strip_prefix("/api/recordings/segment/") {
        return segment(front, rest, text(req, header::RANGE)).await;
    }
    let path = req.uri.path();
    let query = req.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
    let urls = front.urls();
    let json = |v: serde_json::Value| respond(StatusCode::OK, JSON, v.to_string());
    match (&req.method, path) {
        (&Method::GET, "/metrics") => {
            let answers = front.ask_all("/metrics").await;
            respond(
                StatusCode::OK,
                "text/plain; version=0.0.4",
                merge::metrics(&answers),
            )
        }
        (&Method::GET, "/api/inputs") => {
            json(merge::rows("inputs", &urls, &front.ask_all(path).await))
        }
        (&Method::GET, "/api/events") => {
            let limit = crate::display::web::access::query_param(
                req.uri.query().unwrap_or_default(),
                "limit",
            )
            .and_then(|l| l.parse().ok())
            .unwrap_or(EVENTS.0)
            .min(EVENTS.1);
            let asked = format!("/api/events?limit={}", EVENTS.1);
            json(merge::events(&urls, &front.ask_all(&asked).await, limit))
        }
        (&Method::GET, "/api/recordings") => {
            let asked = format!("{path}{query}");
            let answers = front.ask_all(&asked).await;
            json(merge::recordings(&urls, &answers))
        }
        (&Method::POST, "/api/inputs") => {
            let name = body
                .as_ref()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(b).ok())
                .and_then(|v| v["name"].as_str().map(str::to_string));
            let Some(name) = name else {
                let why = "the body is a JSON object with the camera's name and source";
                return refusal(path, StatusCode::BAD_REQUEST, why);
            };
            to_owner(front, &name, (Method::POST, path.to_string()), body).await
        }
        (&Method::DELETE, p) if p.starts_with("/api/inputs/") => {
            let name = percent_decoded(&p["/api/inputs/".len()..]);
            to_owner(front, &name, (Method::DELETE, p.to_string()), None).await
        }
        (_, p) if p.starts_with("/api/") => refusal(
            p,
            StatusCode::NOT_FOUND,
            "no such API endpoint of the front",
        ),
        _ => respond(
            StatusCode::NOT_FOUND,
            PLAIN,
            "the front serves /api/…, /healthz and /metrics",
        ),
    }
}

/// `GET /api/recordings/segment/K-ID[/detections]`: shard K's segment ID (as the front's
/// listing names it, `merge::recordings`), handed on as it comes, the viewer's range asked.
async fn segment(front: &Front, rest: &str, range: Option<&str>) -> Response<Body> {
    let path = format!("/api/recordings/segment/{rest}");
    let Some((k, shard)) = rest
        .split_once('-')
        .and_then(|(k, _)| k.parse::<usize>().ok())
        .and_then(|k| front.shards.get(k).map(|s| (k, s)))
    else {
        return refusal(
            &path,
            StatusCode::NOT_FOUND,
            "a segment here is K-ID, K a shard",
        );
    };
    let asked = format!(
        "/api/recordings/segment/{}",
        &rest[rest.find('-').unwrap_or(0) + 1..]
    );
    match shard
        .pass(&asked, range, front.shard_token.as_deref())
        .await
    {
        Ok(answer) => answer,
        Err(why) => {
            let why = format!("shard {k} ({}) did not answer: {why}", shard.url);
            refusal(&path, StatusCode::BAD_GATEWAY, &why)
        }
    }
}

/// `text` percent-decoded (a camera's name in a path).
fn percent_decoded(text: &str) -> String {
    form_urlencoded::parse(format!("n={text}").as_bytes())
        .next()
        .map_or_else(|| text.to_string(), |(_, v)| v.into_owned())
}

/// The request handed to the shard that owns camera `name`: its answer, with `shard`
/// added where it is a JSON object.
async fn to_owner(
    front: &Front,
    name: &str,
    (method, path): (Method, String),
    body: Option<Bytes>,
) -> Response<Body> {
    let k = crate::plan::shard::owner(name, front.shards.len());
    let token = front.shard_token.as_deref();
    match front.shards[k].ask(method, &path, body, token).await {
        Ok((code, answer)) => {
            let mut v: serde_json::Value = serde_json::from_slice(&answer).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("shard".into(), k.into());
            }
            let code = StatusCode::from_u16(code).unwrap_or(StatusCode::BAD_GATEWAY);
            respond(code, JSON, v.to_string())
        }
        Err(why) => {
            let why = format!(
                "shard {k} ({}), which owns '{name}', did not answer: {why}",
                front.shards[k].url
            );
            refusal(&path, StatusCode::BAD_GATEWAY, &why)
        }
    }
}
