//! How the browser view's server answers: a whole response with the headers every answer
//! carries (no caching, no sniffing, no framing by another site), shared by the server and
//! the API.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

/// An answer's body.
pub(crate) type Body = BoxBody<Bytes, Infallible>;

/// Plain text, the type of every refusal but the API's.
pub(crate) const PLAIN: &str = "text/plain; charset=utf-8";

/// JSON, the type of the API's answers (its refusals too).
pub(crate) const JSON: &str = "application/json";

/// A refusal of a request for `path`: JSON (`{"error": …}`) under `/api/`, plain text
/// elsewhere.
pub(crate) fn refusal(path: &str, code: StatusCode, why: &str) -> Response<Body> {
    match path.starts_with("/api/") {
        true => {
            let error = super::api::schema::ApiError { error: why.into() };
            respond(
                code,
                JSON,
                serde_json::to_string(&error).unwrap_or_default(),
            )
        }
        false => respond(code, PLAIN, why.to_string()),
    }
}

/// A whole response.
pub(crate) fn respond(code: StatusCode, kind: &str, body: impl Into<Bytes>) -> Response<Body> {
    let mut r = Response::new(Full::new(body.into()).boxed());
    *r.status_mut() = code;
    let h = r.headers_mut();
    if let Ok(v) = HeaderValue::from_str(kind) {
        h.insert(header::CONTENT_TYPE, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // No other site may frame the page and click its buttons.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("frame-ancestors 'none'"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    r
}
