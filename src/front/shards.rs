//! The shards as the front reaches them: their addresses (`--shards`, with a StatefulSet's
//! `{0..N-1}` written once), and one request to one shard over hyper's HTTP/1 client.
//!
//! Invariants: a shard's answer is awaited `ASK_WITHIN` at most, whole (connection, head
//! and body), and read up to `MAX_ANSWER` bytes: a slow, silent or flooding shard costs
//! the front one bounded wait, never a thread; the shards' token goes in `Authorization`
//! only, never in a URL; every change is marked with the page's control header, as a
//! shard's own page marks it; a request names the shard by the address it reached (`Host`),
//! so a shard needs no `--serve-host` for the names the front knows it by.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;

use super::FrontError;

/// How long the front waits for one shard's whole answer (a streamed one's head).
pub const ASK_WITHIN: Duration = Duration::from_secs(2);
/// How long a streamed answer (a segment) may wait for its next chunk from the shard.
const CHUNK_WITHIN: Duration = Duration::from_secs(10);
/// The largest answer read from a shard.
const MAX_ANSWER: usize = 16 << 20;
/// The most shards a front takes.
const MAX_SHARDS: usize = 256;

/// Why a shard gave no answer the front can use.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShardError {
    /// Nothing within `ASK_WITHIN`.
    #[error("no answer within {} s", ASK_WITHIN.as_secs())]
    Late,
    /// The connection or the exchange failed (the system's or hyper's words).
    #[error("{0}")]
    Unreached(String),
    /// Its answer's body could not be read whole (or was over `MAX_ANSWER`).
    #[error("its answer: {0}")]
    Answer(String),
    /// It answered, but not 200 (with its own reason, where it gave one).
    #[error("answered {code}{}", if .said.is_empty() { String::new() } else { format!(" {}", .said) })]
    Status {
        /// Its status.
        code: u16,
        /// Its `{"error": …}`, where it gave one.
        said: String,
    },
    /// Its answer is not JSON.
    #[error("its answer is not JSON")]
    NotJson,
}

/// One shard's address: `http://HOST[:PORT]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shard {
    /// As given, without a trailing '/'.
    pub url: String,
    host: String,
    port: u16,
}

impl Shard {
    /// `text` as `--shards` takes one shard: `http://HOST[:PORT]` (no path, no user).
    pub fn parse(text: &str) -> Result<Self, FrontError> {
        let bad = |why: &str| FrontError::Shard(text.to_string(), why.to_string());
        let rest = text
            .strip_prefix("http://")
            .ok_or_else(|| bad("a shard is http://HOST[:PORT] (its --serve)"))?;
        let rest = rest.trim_end_matches('/');
        if rest.contains(['/', '@', '?', '#']) || rest.is_empty() {
            return Err(bad("a shard's address has a host and a port, nothing else"));
        }
        let (host, port) = match rest.rsplit_once(':') {
            Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => {
                let port = p.parse().map_err(|_| bad("its port is not a number"))?;
                (h.to_string(), port)
            }
            _ => (rest.to_string(), 80),
        };
        Ok(Self {
            url: format!("http://{rest}"),
            host,
            port,
        })
    }

    /// Asks the shard `method path` (with `body` where given), with `token` as a bearer:
    /// its status and body, or why it did not answer (module doc: bounded in time and size).
    pub async fn ask(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        token: Option<&str>,
    ) -> Result<(u16, Bytes), ShardError> {
        let asked = async {
            let answer = self.send(method, path, body, (token, None)).await?;
            let status = answer.status().as_u16();
            let body = Limited::new(answer.into_body(), MAX_ANSWER)
                .collect()
                .await
                .map_err(|e| ShardError::Answer(e.to_string()))?
                .to_bytes();
            Ok((status, body))
        };
        match tokio::time::timeout(ASK_WITHIN, asked).await {
            Ok(answer) => answer,
            Err(_) => Err(ShardError::Late),
        }
    }

    /// Asks the shard `GET path` (with the viewer's `range`) and hands its answer on as it
    /// comes: the status, the headers a file's answer has, and the body chunk by chunk
    /// (each within `CHUNK_WITHIN`; a shard that stalls or fails ends it).
    pub async fn pass(
        &self,
        path: &str,
        range: Option<&str>,
        token: Option<&str>,
    ) -> Result<hyper::Response<crate::display::web::reply::Body>, ShardError> {
        let head = self.send(Method::GET, path, None, (token, range));
        let answer = tokio::time::timeout(ASK_WITHIN, head)
            .await
            .map_err(|_| ShardError::Late)??;
        let (parts, body) = answer.into_parts();
        let chunks = futures_util::stream::unfold(body, |mut body| async move {
            loop {
                let next = tokio::time::timeout(CHUNK_WITHIN, body.frame()).await;
                match next {
                    Ok(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => {
                            let frame = hyper::body::Frame::data(data);
                            return Some((Ok::<_, std::convert::Infallible>(frame), body));
                        }
                        Err(_) => continue, // trailers: not handed on
                    },
                    _ => return None,
                }
            }
        });
        let kind = parts
            .headers
            .get(hyper::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/octet-stream")
            .to_string();
        let mut r = crate::display::web::reply::respond(parts.status, &kind, "");
        *r.body_mut() = http_body_util::BodyExt::boxed(http_body_util::StreamBody::new(chunks));
        for name in [
            hyper::header::CONTENT_LENGTH,
            hyper::header::CONTENT_RANGE,
            hyper::header::ACCEPT_RANGES,
        ] {
            if let Some(v) = parts.headers.get(&name) {
                r.headers_mut().insert(name, v.clone());
            }
        }
        Ok(r)
    }

    /// One request on a connection of its own: the answer's head, its body to come.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Bytes>,
        (token, range): (Option<&str>, Option<&str>),
    ) -> Result<hyper::Response<hyper::body::Incoming>, ShardError> {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        let stream = tokio::net::TcpStream::connect((host, self.port))
            .await
            .map_err(unreached)?;
        // The shard is named by the address reached (a shard answers its addresses without
        // being told its names, as a browser's rebinding page can't make it).
        let reached = stream.peer_addr().map_err(unreached)?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(unreached)?;
        tokio::spawn(conn);
        let mut req = Request::builder()
            .method(method)
            .uri(path)
            .header(hyper::header::HOST, reached.to_string())
            .header(crate::display::web::access::CONTROL_HEADER, "1");
        if let Some(t) = token {
            req = req.header(hyper::header::AUTHORIZATION, format!("Bearer {t}"));
        }
        if body.is_some() {
            req = req.header(hyper::header::CONTENT_TYPE, "application/json");
        }
        if let Some(r) = range {
            req = req.header(hyper::header::RANGE, r);
        }
        let req = req
            .body(Full::new(body.unwrap_or_default()))
            .map_err(unreached)?;
        sender.send_request(req).await.map_err(unreached)
    }
}

/// A failed connection or exchange, in its own words.
fn unreached(e: impl std::fmt::Display) -> ShardError {
    ShardError::Unreached(e.to_string())
}

/// `text` (`--shards`: comma-separated, each `http://HOST[:PORT]`, where `{A..B}` stands
/// for each number from A to B) as shards, in order.
pub fn parse_all(text: &str) -> Result<Vec<Shard>, FrontError> {
    let mut shards = Vec::new();
    for one in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        for url in expand(one)? {
            shards.push(Shard::parse(&url)?);
            if shards.len() > MAX_SHARDS {
                return Err(FrontError::Shards(format!("more than {MAX_SHARDS} shards")));
            }
        }
    }
    if shards.is_empty() {
        return Err(FrontError::Shards("no shard given".into()));
    }
    for (k, s) in shards.iter().enumerate() {
        if shards[..k].contains(s) {
            return Err(FrontError::Shards(format!("{} is given twice", s.url)));
        }
    }
    Ok(shards)
}

/// `text` with its one `{A..B}` written out (as a shell's brace expansion).
fn expand(text: &str) -> Result<Vec<String>, FrontError> {
    let Some((head, rest)) = text.split_once('{') else {
        return Ok(vec![text.to_string()]);
    };
    let bad = || FrontError::Shards(format!("'{text}': a range is {{A..B}}, A ≤ B"));
    let (range, tail) = rest.split_once('}').ok_or_else(bad)?;
    let (a, b) = range.split_once("..").ok_or_else(bad)?;
    let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
    if a > b || b - a >= MAX_SHARDS {
        return Err(bad());
    }
    Ok((a..=b).map(|k| format!("{head}{k}{tail}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_are_read_with_their_ranges_and_bad_ones_refused() {
        let all = parse_all("http://wall-{0..2}.wall:8080, http://10.0.0.9").unwrap();
        let urls: Vec<&str> = all.iter().map(|s| s.url.as_str()).collect();
        assert_eq!(
            urls,
            [
                "http://wall-0.wall:8080",
                "http://wall-1.wall:8080",
                "http://wall-2.wall:8080",
                "http://10.0.0.9"
            ]
        );
        assert_eq!((all[3].host.as_str(), all[3].port), ("10.0.0.9", 80));
        let v6 = Shard::parse("http://[::1]:9000/").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("[::1]", 9000));
        for bad in [
            "",
            "https://a:1",
            "http://a:1/api",
            "http://u:p@a:1",
            "http://a:x",
            "http://a-{2..1}",
            "http://a-{0..9999}",
            "http://a:1,http://a:1",
        ] {
            assert!(parse_all(bad).is_err(), "{bad}");
        }
    }
}
