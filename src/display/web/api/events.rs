//! `/api/events`: the run's latest events (`events::recent`), newest first, each with the
//! address of its snapshot and its clip where they are written; `/api/events/ID/snapshot.jpg`
//! and `/api/events/ID/clip` hand those files out (a clip with byte ranges, so a `<video>`
//! seeks in it).
//!
//! Invariants: a file is found by the event's id among the events kept, never by a path the
//! request names; without events in the run every address here is a 404 with its reason.

use std::sync::Arc;

use hyper::{Response, StatusCode};

use super::super::reply::{respond, Body};
use super::super::Shared;
use super::refuse;
use crate::events::recent::{File, Recent, KEPT};

/// How many events a listing gives where `limit` is not asked.
const LISTED: usize = 50;

/// The run's latest events, or the 404 of a run that makes none.
fn recent(shared: &Shared) -> Result<&Arc<Recent>, Box<Response<Body>>> {
    shared.events.get().ok_or_else(|| {
        Box::new(refuse(
            StatusCode::NOT_FOUND,
            "this run makes no events (--events, --motion, --zone or --line)",
        ))
    })
}

/// `GET /api/events[?limit=N]`: the newest events as JSON.
pub(super) fn list(query: &str, shared: &Shared) -> Response<Body> {
    let recent = match recent(shared) {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let mut limit = LISTED;
    for (k, v) in form_urlencoded::parse(query.as_bytes()) {
        if k == "limit" {
            match v.parse::<usize>() {
                Ok(n) => limit = n.min(KEPT),
                Err(_) => {
                    let why = format!("limit '{v}' is not a number of events");
                    return refuse(StatusCode::BAD_REQUEST, why);
                }
            }
        }
    }
    let events = recent.newest(limit, "/api/events");
    let body = serde_json::to_string(&super::schema::EventList { events }).unwrap_or_default();
    respond(StatusCode::OK, "application/json", body)
}

/// `GET /api/events/ID/snapshot.jpg` or `/api/events/ID/clip`: the event's file.
pub(super) fn file(rest: &str, range: Option<&str>, shared: &Shared) -> Response<Body> {
    let recent = match recent(shared) {
        Ok(r) => r,
        Err(answer) => return *answer,
    };
    let (id, what) = match rest.rsplit_once('/') {
        Some((id, "snapshot.jpg")) => (id, File::Snapshot),
        Some((id, "clip")) => (id, File::Clip),
        _ => {
            let why = "an event's files are /api/events/ID/snapshot.jpg and /api/events/ID/clip";
            return refuse(StatusCode::NOT_FOUND, why);
        }
    };
    match recent.file(id, what) {
        Some(path) => super::recordings::send_file(&path, range),
        None => refuse(
            StatusCode::NOT_FOUND,
            format!("event '{id}' has no such file (not kept, or not written yet)"),
        ),
    }
}
