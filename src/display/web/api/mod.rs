//! The browser view's API for programs and the page (`/api/…`): the inputs as they stand,
//! added and removed while the run goes (`GET`, `POST /api/inputs`, `DELETE
//! /api/inputs/{name}`), the recordings found by time (`recordings`), and the latest events
//! with their snapshots and clips (`events`). Asked with the
//! view's token (`?token=` or `Authorization: Bearer`); from no other site's page (the same
//! origin rules as `/stats`), and a change from a page only from the page itself (its origin
//! and its header, as the controls).
//!
//! Invariants: every answer is JSON (an error's too: `{"error": …}` with its status, the
//! types of `schema`, which `/api/openapi.json` describes), a file the recordings' index
//! lists or one the run's own events name (never a path a request names); an input's source reaches the answer without its address's user and
//! password; an input added here names a network stream or the test pattern, never a file,
//! a device or a pipeline of the server's; a bad request is a 4xx with a one-line reason.

use std::sync::Arc;

use bytes::Bytes;
use hyper::{Method, Response, StatusCode};

use super::reply::{respond, Body, JSON};
use super::Shared;

pub mod events;
pub mod recordings;
pub mod schema;

/// A request to the API: its method, path, query, `Range` and body (a `POST`'s, read
/// whole up to a limit: Err where it could not be).
pub(super) struct Asked<'r> {
    pub method: &'r Method,
    pub path: &'r str,
    pub query: &'r str,
    pub range: Option<&'r str>,
    pub body: Option<Result<Bytes, ()>>,
}

/// What the run does with inputs added and removed through the API (the app's service).
pub trait Inputs: Send + Sync {
    /// Adds input `name` reading `source`, with its own `settings` (a camera file's keys:
    /// record, segment, retain, detect, detect_fps, decode, as text).
    fn add(&self, name: &str, source: &str, settings: &[(String, String)]) -> Result<(), Refused>;
    /// Removes input `name`: its outputs and recording are finished.
    fn remove(&self, name: &str) -> Result<(), Refused>;
}

/// Why the API refuses a change (its status and reason).
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    /// The request is wrong (400).
    #[error("{0}")]
    Bad(String),
    /// No such input (404).
    #[error("{0}")]
    Missing(String),
    /// It clashes with an input there (409).
    #[error("{0}")]
    Taken(String),
    /// The run can't take it now (503).
    #[error("{0}")]
    Unable(String),
}

impl Refused {
    fn answer(&self) -> Response<Body> {
        let code = match self {
            Refused::Bad(_) => StatusCode::BAD_REQUEST,
            Refused::Missing(_) => StatusCode::NOT_FOUND,
            Refused::Taken(_) => StatusCode::CONFLICT,
            Refused::Unable(_) => StatusCode::SERVICE_UNAVAILABLE,
        };
        refuse(code, self.to_string())
    }
}

/// Answers a request to `/api/…`: None where no endpoint is there.
pub(super) fn answer(asked: Asked, shared: &Arc<Shared>) -> Option<Response<Body>> {
    let rest = asked.path.strip_prefix("/api/")?;
    let method = asked.method;
    match (method, rest) {
        (&Method::GET | &Method::HEAD, "openapi.json") => {
            Some(answer_json(StatusCode::OK, schema::document()))
        }
        (&Method::GET | &Method::HEAD, "inputs") => Some(inputs(shared)),
        (&Method::POST, "inputs") => Some(add(asked.body, shared)),
        (&Method::DELETE, name) if name.starts_with("inputs/") => {
            let name = recordings::percent_decoded(&name["inputs/".len()..]);
            Some(change(
                shared,
                |c| c.remove(&name),
                |_| {
                    let removed = schema::Removed {
                        removed: name.clone(),
                    };
                    answer_json(
                        StatusCode::OK,
                        serde_json::to_string(&removed).unwrap_or_default(),
                    )
                },
            ))
        }
        (&Method::GET | &Method::HEAD, "recordings") => Some(recordings::list(asked.query, shared)),
        (&Method::GET | &Method::HEAD, "events") => Some(events::list(asked.query, shared)),
        (&Method::GET | &Method::HEAD, rest) if rest.starts_with("events/") => {
            Some(events::file(&rest["events/".len()..], asked.range, shared))
        }
        (&Method::GET | &Method::HEAD, rest) => recordings::answer(
            rest.strip_prefix("recordings/")?,
            asked.query,
            asked.range,
            shared,
        ),
        _ => Some(refuse(
            StatusCode::METHOD_NOT_ALLOWED,
            "the API takes GET, POST /api/inputs and DELETE /api/inputs/NAME",
        )),
    }
}

/// `GET /api/inputs`: each input's name, source (no password), state, frames, drops,
/// latency and recording (`health::inputs_json`, with the sources); those removed are left
/// out.
fn inputs(shared: &Shared) -> Response<Body> {
    let inputs = rows(shared, &snapshot(shared));
    let list = schema::InputList { inputs };
    answer_json(
        StatusCode::OK,
        serde_json::to_string(&list).unwrap_or_default(),
    )
}

/// The run's figures now.
fn snapshot(shared: &Shared) -> super::health::Snapshot {
    let snap = shared.snapshot.lock().map(|s| s.clone());
    snap.unwrap_or_default().now()
}

/// The inputs of `snap` as `GET /api/inputs` shows them, with their sources (no password).
fn rows(shared: &Shared, snap: &super::health::Snapshot) -> Vec<schema::Input> {
    let mut rows = super::health::input_rows(snap);
    let sources = shared.sources.lock().map(|s| s.clone()).unwrap_or_default();
    for (row, source) in rows.iter_mut().zip(sources) {
        row.source = Some(crate::secret::redact(&source).into_owned());
    }
    rows.retain(|row| row.state != "removed");
    rows
}

/// Input `name` as `GET /api/inputs` shows it: from the figures where they list it already,
/// else as it starts (no figures yet, no number).
fn added(shared: &Shared, name: &str, source: &str) -> schema::Input {
    rows(shared, &snapshot(shared))
        .into_iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| super::health::starting(name, &crate::secret::redact(source)))
}

/// `POST /api/inputs` with `{"name": …, "source": …}` and a camera file's keys.
fn add(body: Option<Result<Bytes, ()>>, shared: &Shared) -> Response<Body> {
    let Some(Ok(body)) = body else {
        return refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "the body is larger than 64 KiB or could not be read",
        );
    };
    let json: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(v @ serde_json::Value::Object(_)) => v,
        _ => {
            return refuse(
                StatusCode::BAD_REQUEST,
                "the body is a JSON object: {\"name\": …, \"source\": …}",
            )
        }
    };
    let text = |key: &str| json.get(key).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(name), Some(source)) = (text("name"), text("source")) else {
        return refuse(StatusCode::BAD_REQUEST, "name and source are strings");
    };
    let mut settings = Vec::new();
    for (key, value) in json.as_object().into_iter().flatten() {
        if key == "name" || key == "source" {
            continue;
        }
        // A camera's own zones, lines, labels, stay and filters, as the camera file writes them.
        if let Some(pairs) = crate::events::camera::settings_of(key, value) {
            match pairs {
                Ok(pairs) => settings.extend(pairs),
                Err(why) => return refuse(StatusCode::BAD_REQUEST, why.to_string()),
            }
            continue;
        }
        let value = match value {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Bool(b) => if *b { "on" } else { "off" }.to_string(),
            serde_json::Value::Number(n) => n.to_string(),
            _ => {
                return refuse(
                    StatusCode::BAD_REQUEST,
                    format!("{key}: a string, a number or true/false"),
                )
            }
        };
        settings.push((key.clone(), value));
    }
    change(
        shared,
        |c| c.add(&name, &source, &settings),
        |shared| {
            let row = added(shared, &name, &source);
            answer_json(
                StatusCode::CREATED,
                serde_json::to_string(&row).unwrap_or_default(),
            )
        },
    )
}

/// A change through the run's inputs, answered as `done` says, or refused.
fn change(
    shared: &Shared,
    with: impl FnOnce(&dyn Inputs) -> Result<(), Refused>,
    done: impl FnOnce(&Shared) -> Response<Body>,
) -> Response<Body> {
    let Some(control) = shared.control.get() else {
        if shared
            .will_take_inputs
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            return refuse(
                StatusCode::SERVICE_UNAVAILABLE,
                "the run is still opening its inputs: ask again in a moment",
            );
        }
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "this run takes no inputs while it goes (it is not a wall: give --inputs, --config or --serve with several inputs)");
    };
    match with(control.as_ref()) {
        Ok(()) => done(shared),
        Err(refused) => refused.answer(),
    }
}

/// A JSON answer.
fn answer_json(code: StatusCode, body: String) -> Response<Body> {
    respond(code, JSON, body)
}

/// A refusal or failure with its reason, as JSON (`schema::ApiError`).
pub(super) fn refuse(code: StatusCode, why: impl Into<String>) -> Response<Body> {
    let error = schema::ApiError { error: why.into() };
    answer_json(code, serde_json::to_string(&error).unwrap_or_default())
}
