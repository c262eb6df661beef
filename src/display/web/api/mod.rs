//! The browser view's API for programs and the page (`/api/…`): each input as it stands
//! (`GET /api/inputs`) and the recordings found by time (`recordings`). Asked with the
//! view's token (`?token=` or `Authorization: Bearer`), and from no other site's page (the
//! same origin rules as `/stats`).
//!
//! Invariants: every answer is JSON or a file the recordings' index lists (never a path a
//! request names); an input's source reaches the answer without its address's user and
//! password; a bad request is a 4xx with a one-line reason.

use std::sync::Arc;

use hyper::{Method, Response, StatusCode};

use super::server::{respond, Body, PLAIN};
use super::Shared;

pub mod recordings;

/// Answers a request to `/api/…` (`path`, its `query`): None where no endpoint is there.
pub(super) fn answer(
    method: &Method,
    path: &str,
    query: &str,
    range: Option<&str>,
    shared: &Arc<Shared>,
) -> Option<Response<Body>> {
    let rest = path.strip_prefix("/api/")?;
    if method != Method::GET && method != Method::HEAD {
        let why = "the API takes GET here (adding and removing inputs while the run goes is not built yet)";
        return Some(respond(StatusCode::METHOD_NOT_ALLOWED, PLAIN, why));
    }
    match rest {
        "inputs" => Some(inputs(shared)),
        "recordings" => Some(recordings::list(query, shared)),
        _ => recordings::answer(rest.strip_prefix("recordings/")?, query, range, shared),
    }
}

/// `GET /api/inputs`: each input's name, source (no password), state, frames, drops,
/// latency and recording (`health::inputs_json`, with the sources).
fn inputs(shared: &Shared) -> Response<Body> {
    let snap = shared
        .snapshot
        .lock()
        .map(|s| s.clone())
        .unwrap_or_default()
        .now();
    let mut rows = super::health::inputs_json(&snap);
    let sources = shared.sources.get().cloned().unwrap_or_default();
    if let Some(rows) = rows.as_array_mut() {
        for (row, source) in rows.iter_mut().zip(sources) {
            row["source"] = crate::secret::redact(&source).into_owned().into();
        }
    }
    let body = serde_json::json!({ "inputs": rows }).to_string();
    respond(StatusCode::OK, "application/json", body)
}

/// A 4xx answer with its reason.
fn refuse(code: StatusCode, why: impl Into<String>) -> Response<Body> {
    respond(code, PLAIN, why.into())
}
