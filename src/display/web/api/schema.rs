//! The API's answers as types (`serde` for the answers, `utoipa` for their description): the
//! server answers with values of these, and the OpenAPI document it serves at
//! `/api/openapi.json` is made from the same types and the paths below, so the document and
//! the answers can't part.
//!
//! Invariants: every JSON answer of `/api/*` is one of these types, an error's too
//! (`ApiError`, with the status); the document lists every endpoint `api::answer` routes.

use serde::Serialize;
use utoipa::{OpenApi, ToSchema};

/// A refusal or a failure: the status says which, `error` why, in one line.
#[derive(Serialize, ToSchema)]
pub struct ApiError {
    /// Why, in one line.
    pub error: String,
}

/// An input's latency from capture to its outputs, milliseconds.
#[derive(Serialize, ToSchema)]
pub struct Latency {
    /// The mean.
    pub mean: f64,
    /// The 99th percentile.
    pub p99: f64,
    /// The largest.
    pub max: f64,
}

/// What retention deleted of an input's recording.
#[derive(Serialize, ToSchema)]
pub struct Deleted {
    /// Segments.
    pub segments: u64,
    /// Their files (sidecars too).
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// An input's recording.
#[derive(Serialize, ToSchema)]
pub struct Recording {
    /// `recording`, or `failing: WHY`.
    pub state: String,
    /// Segments written.
    pub segments: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Writes that failed.
    pub failures: u64,
    /// What retention deleted.
    pub deleted: Deleted,
}

/// An input as it stands.
#[derive(Serialize, ToSchema)]
pub struct Input {
    /// Its number in the run (its place; none yet for one just added).
    pub input: Option<usize>,
    /// Its name.
    pub name: String,
    /// Its source, without its address's user and password (`GET /api/inputs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Frames captured.
    pub captured: u64,
    /// Frames processed.
    pub processed: u64,
    /// Frames dropped.
    pub dropped: u64,
    /// Times its stream was opened again.
    pub reconnects: u64,
    /// Its latency.
    pub latency_ms: Latency,
    /// `running`, `down N s`, `starting`, or how it ended.
    pub state: String,
    /// Its recording, where it is recorded.
    pub recording: Option<Recording>,
}

/// `GET /api/inputs`.
#[derive(Serialize, ToSchema)]
pub struct InputList {
    /// Every input the run has (those removed left out).
    pub inputs: Vec<Input>,
}

/// `POST /api/inputs`'s body: a camera file's keys, in JSON.
#[derive(Serialize, ToSchema)]
#[allow(dead_code)]
pub struct NewInput {
    /// Its name: letters, digits, `.`, `-`, `_`.
    pub name: String,
    /// A network stream or the test pattern, as `--input` takes it.
    pub source: String,
    /// Whether `--record` records it.
    pub record: Option<bool>,
    /// Its own `--segment`.
    pub segment: Option<String>,
    /// Its own `--retain`.
    pub retain: Option<String>,
    /// Whether `--detect` runs on it.
    pub detect: Option<bool>,
    /// Its own `--detect-fps`.
    pub detect_fps: Option<f64>,
    /// Its own `--decode`: cpu, gpu or auto.
    pub decode: Option<String>,
    /// Its zones: names to points (x, y, x, y, …; relative from 0 to 1, or pixels).
    #[schema(value_type = Option<Object>)]
    pub zones: Option<serde_json::Value>,
    /// Its lines, as `zones`.
    #[schema(value_type = Option<Object>)]
    pub lines: Option<serde_json::Value>,
    /// The labels that make its events.
    pub event_labels: Option<Vec<String>>,
    /// Its own `--stay`, seconds.
    pub stay: Option<f64>,
    /// Its filters: labels to `min_score`, `min_area`, `max_area`.
    #[schema(value_type = Option<Object>)]
    pub filters: Option<serde_json::Value>,
}

/// `DELETE /api/inputs/NAME`.
#[derive(Serialize, ToSchema)]
pub struct Removed {
    /// The input removed.
    pub removed: String,
}

/// A recorded segment.
#[derive(Serialize, ToSchema)]
pub struct Segment {
    /// Its id (`/api/recordings/segment/ID`).
    pub id: String,
    /// Its input's name.
    pub input: String,
    /// Its first frame's wall-clock time, RFC 3339.
    pub start: String,
    /// Its end, RFC 3339.
    pub end: String,
    /// Its start, Unix seconds.
    pub start_unix: f64,
    /// Its end, Unix seconds.
    pub end_unix: f64,
    /// Seconds.
    pub duration: f64,
    /// Its first frame's time in the file, seconds.
    pub media_start: f64,
    /// Its bytes.
    pub bytes: u64,
    /// Its file, under the recordings' root.
    pub file: String,
    /// Where it is served.
    pub url: String,
    /// Where its detections are served, where it has them.
    pub detections: Option<String>,
}

/// `GET /api/recordings`.
#[derive(Serialize, ToSchema)]
pub struct RecordingList {
    /// The segments found, in time order.
    pub recordings: Vec<Segment>,
}

/// `GET /api/events`.
#[derive(Serialize, ToSchema)]
pub struct EventList {
    /// The newest events first: each its `type`, `input`, `name`, `time` and what the event
    /// says (zone, line, track, box, snapshot, clip).
    #[schema(value_type = Vec<Object>)]
    pub events: Vec<serde_json::Value>,
}

/// The endpoints as `utoipa` describes them: each a function of no body, its description in
/// its attribute (the answers themselves are made in `api` and its files).
#[allow(dead_code)]
mod endpoints {
    use super::*;

    #[utoipa::path(get, path = "/api/inputs", responses(
        (status = 200, body = InputList), (status = 401, body = ApiError)))]
    pub(super) fn get_inputs() {}

    #[utoipa::path(post, path = "/api/inputs", request_body = NewInput, responses(
        (status = 201, body = Input, description = "the input as GET shows it"),
        (status = 400, body = ApiError), (status = 409, body = ApiError),
        (status = 413, body = ApiError), (status = 503, body = ApiError)))]
    pub(super) fn post_inputs() {}

    #[utoipa::path(delete, path = "/api/inputs/{name}", params(("name" = String, Path)), responses(
        (status = 200, body = Removed), (status = 404, body = ApiError), (status = 503, body = ApiError)))]
    pub(super) fn delete_input() {}

    #[utoipa::path(get, path = "/api/recordings", params(
        ("input" = Option<String>, Query), ("from" = Option<String>, Query), ("to" = Option<String>, Query)),
        responses((status = 200, body = RecordingList), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
    pub(super) fn get_recordings() {}

    #[utoipa::path(get, path = "/api/recordings/{input}.m3u8", params(("input" = String, Path)), responses(
        (status = 200, content_type = "application/vnd.apple.mpegurl", description = "an HLS VOD playlist"),
        (status = 404, body = ApiError)))]
    pub(super) fn get_playlist() {}

    #[utoipa::path(get, path = "/api/recordings/segment/{id}", params(("id" = String, Path)), responses(
        (status = 200, content_type = "video/mp4", description = "the segment's file (byte ranges)"),
        (status = 404, body = ApiError)))]
    pub(super) fn get_segment() {}

    #[utoipa::path(get, path = "/api/events", params(("limit" = Option<usize>, Query)), responses(
        (status = 200, body = EventList), (status = 400, body = ApiError), (status = 404, body = ApiError)))]
    pub(super) fn get_events() {}

    #[utoipa::path(get, path = "/api/events/{id}/snapshot.jpg", params(("id" = String, Path)), responses(
        (status = 200, content_type = "image/jpeg"), (status = 404, body = ApiError)))]
    pub(super) fn get_snapshot() {}

    #[utoipa::path(get, path = "/api/events/{id}/clip", params(("id" = String, Path)), responses(
        (status = 200, content_type = "video/mp4", description = "the clip (byte ranges)"),
        (status = 404, body = ApiError)))]
    pub(super) fn get_clip() {}
}

/// The API's OpenAPI document (`/api/openapi.json`).
#[derive(OpenApi)]
#[openapi(
    info(
        title = "framepipe",
        description = "A framepipe run's API: its inputs, recordings and events. Asked with the view's token (?token= or Authorization: Bearer)."
    ),
    paths(
        endpoints::get_inputs,
        endpoints::post_inputs,
        endpoints::delete_input,
        endpoints::get_recordings,
        endpoints::get_playlist,
        endpoints::get_segment,
        endpoints::get_events,
        endpoints::get_snapshot,
        endpoints::get_clip
    ),
    components(schemas(
        ApiError,
        Input,
        InputList,
        NewInput,
        Removed,
        Segment,
        RecordingList,
        EventList,
        Latency,
        Recording,
        Deleted
    ))
)]
pub struct Document;

/// The document as JSON.
pub fn document() -> String {
    Document::openapi()
        .to_json()
        .unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
