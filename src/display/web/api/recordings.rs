//! The recordings found by time, from the recordings' index (`record::index`):
//! `GET /api/recordings?input=&from=&to=` lists the segments (JSON), `GET
//! /api/recordings/{input}.m3u8?from=&to=` is a VOD HLS playlist over the untouched segments
//! (fragmented MP4: each file's own header as its `EXT-X-MAP`, its fragments as a byte range;
//! MPEG-TS: the files), `GET /api/recordings/segment/{id}` one segment (byte ranges taken),
//! `…/{id}/detections` its detections sidecar. `from` and `to` are RFC 3339 times or Unix
//! seconds.
//!
//! Invariants: a file is named by the index's number for it, never by a path from the
//! request, so nothing outside the recordings the index lists is ever read; an unknown
//! input, a time that doesn't parse, a range that runs backwards or a segment no longer
//! listed is a 4xx with its reason; a file is sent in chunks (`CHUNK`), never read whole.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};

use super::super::access::query_param;
use super::super::reply::{respond, Body};
use super::super::Shared;
use super::refuse;
use crate::record::index::{Index, Segment};

/// How much of a file one chunk of an answer carries.
const CHUNK: usize = 256 * 1024;

/// A listing's question: one input or all, and the time range (µs since the epoch).
struct Asked {
    input: Option<String>,
    from: Option<i64>,
    to: Option<i64>,
}

/// Why a question about the recordings can't be answered (4xx, the message as the body).
#[derive(Debug, thiserror::Error)]
enum Refused {
    /// A time that doesn't parse.
    #[error("{0}: '{1}' is not a time (RFC 3339, 2026-12-06T10:00:00Z, or Unix seconds)")]
    Time(&'static str, String),
    /// `to` before `from`.
    #[error("the range runs backwards: 'to' is before 'from'")]
    Backwards,
    /// An input nothing records.
    #[error("no input named '{0}' is recorded here")]
    Input(String),
}

impl Refused {
    fn answer(&self) -> Response<Body> {
        let code = match self {
            Refused::Input(_) => StatusCode::NOT_FOUND,
            _ => StatusCode::BAD_REQUEST,
        };
        refuse(code, self.to_string())
    }
}

/// Reads `input`, `from` and `to` of `query`; refused where one doesn't parse, the range
/// runs backwards, or no recording has the input.
fn asked(query: &str, shared: &Shared) -> Result<Asked, Refused> {
    let time = |name: &'static str| {
        query_param(query, name)
            .map(|t| moment(&t).ok_or(Refused::Time(name, t)))
            .transpose()
    };
    let (from, to) = (time("from")?, time("to")?);
    if let (Some(f), Some(t)) = (from, to) {
        if t < f {
            return Err(Refused::Backwards);
        }
    }
    let input = query_param(query, "input").filter(|i| !i.is_empty());
    if let Some(name) = &input {
        if !recorded(shared, name) {
            return Err(Refused::Input(name.clone()));
        }
    }
    Ok(Asked { input, from, to })
}

/// Whether input `name` is recorded (listed by an index, or recording now).
fn recorded(shared: &Shared, name: &str) -> bool {
    let recording = shared
        .recorded
        .get()
        .is_some_and(|r| r.iter().any(|n| n == name));
    recording
        || indexes(shared)
            .iter()
            .any(|i| i.list(Some(name), None, None).is_ok_and(|l| !l.is_empty()))
}

fn indexes(shared: &Shared) -> &[Arc<Index>] {
    shared.recordings.get().map_or(&[], |r| r.as_slice())
}

/// A time as the API takes it: RFC 3339, or Unix seconds; µs since the epoch.
fn moment(text: &str) -> Option<i64> {
    if let Ok(s) = text.trim().parse::<f64>() {
        return (s.is_finite() && s.abs() < 1e11).then_some((s * 1e6) as i64);
    }
    chrono::DateTime::parse_from_rfc3339(text.trim())
        .ok()
        .map(|t| t.timestamp_micros())
}

/// A moment as RFC 3339 in UTC, to the millisecond.
fn rfc3339(us: i64) -> String {
    chrono::DateTime::<chrono::Utc>::from_timestamp_micros(us).map_or_else(String::new, |t| {
        t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    })
}

/// Every index's segments that answer `asked`, each with its index's number, by start.
fn found(shared: &Shared, asked: &Asked) -> anyhow::Result<Vec<(usize, Segment)>> {
    let mut all = Vec::new();
    for (k, index) in indexes(shared).iter().enumerate() {
        let listed = index.list(asked.input.as_deref(), asked.from, asked.to)?;
        // A row whose file was deleted behind the index's back (or swapped for a link) is
        // not listed; the index drops it when it next opens.
        all.extend(
            listed
                .into_iter()
                .filter(|s| index.file_of(&s.file).is_some())
                .map(|s| (k, s)),
        );
    }
    all.sort_by_key(|(_, s)| (s.start_us, s.id));
    Ok(all)
}

/// The segments `query` asks for, each with its index's number; or the answer that
/// refuses it (a 4xx), or says the index could not be read (500).
fn answering(query: &str, shared: &Shared) -> Result<Vec<(usize, Segment)>, Box<Response<Body>>> {
    let asked = asked(query, shared).map_err(|refused| Box::new(refused.answer()))?;
    found(shared, &asked).map_err(|e| {
        let why = format!("{e:#}");
        Box::new(refuse(StatusCode::INTERNAL_SERVER_ERROR, why))
    })
}

/// `GET /api/recordings`: the segments as JSON.
pub(super) fn list(query: &str, shared: &Shared) -> Response<Body> {
    let segments = match answering(query, shared) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    let recordings: Vec<super::schema::Segment> = segments
        .iter()
        .map(|(k, s)| {
            let id = format!("{k}-{}", s.id);
            let url = format!("/api/recordings/segment/{id}{}", extension(&s.file));
            super::schema::Segment {
                detections: s
                    .sidecar
                    .as_ref()
                    .map(|_| format!("/api/recordings/segment/{id}/detections")),
                id,
                input: s.input.clone(),
                start: rfc3339(s.start_us),
                end: rfc3339(s.end_us),
                start_unix: s.start_us as f64 / 1e6,
                end_unix: s.end_us as f64 / 1e6,
                duration: s.duration_us() as f64 / 1e6,
                media_start: s.media_us as f64 / 1e6,
                bytes: s.bytes,
                file: s.file.to_string_lossy().into_owned(),
                url,
            }
        })
        .collect();
    let body = serde_json::to_string(&super::schema::RecordingList { recordings });
    respond(StatusCode::OK, "application/json", body.unwrap_or_default())
}

/// `/api/recordings/…` past the listing: a playlist, a segment, its detections.
pub(super) fn answer(
    rest: &str,
    query: &str,
    range: Option<&str>,
    shared: &Shared,
) -> Option<Response<Body>> {
    if let Some(input) = rest.strip_suffix(".m3u8") {
        let input = percent_decoded(input);
        let query = format!(
            "{query}&input={}",
            form_urlencoded::byte_serialize(input.as_bytes()).collect::<String>()
        );
        return Some(playlist(&query, shared));
    }
    let rest = rest.strip_prefix("segment/")?;
    let (id, detections) = match rest.strip_suffix("/detections") {
        Some(id) => (id, true),
        None => (rest, false),
    };
    // A segment's address ends with its file's extension, which players look for.
    let id = id.split_once('.').map_or(id, |(id, _)| id);
    let Some((index, seg)) = segment(shared, id) else {
        return Some(refuse(
            StatusCode::NOT_FOUND,
            format!("no segment '{id}' is listed (deleted, or never recorded)"),
        ));
    };
    let (file, sidecar) = match index.owned(&seg) {
        Ok(files) => files,
        Err(not_ours) => {
            crate::warn!("recordings: segment {id} refused: {not_ours}");
            return Some(refuse(
                StatusCode::NOT_FOUND,
                format!("segment '{id}' is not a recording of this run's to serve"),
            ));
        }
    };
    let file = match (detections, sidecar) {
        (false, _) => file,
        (true, Some(sidecar)) => sidecar,
        (true, None) => {
            return Some(refuse(
                StatusCode::NOT_FOUND,
                "this segment has no detections",
            ))
        }
    };
    Some(send_file(&file, range))
}

/// A path's part as the browser sent it, percent-decoded.
pub(crate) fn percent_decoded(text: &str) -> String {
    form_urlencoded::parse(format!("x={}", text.replace('+', "%2B")).as_bytes())
        .next()
        .map_or_else(String::new, |(_, v)| v.into_owned())
}

/// The index and row a segment's id (`K-ID`) names.
fn segment<'s>(shared: &'s Shared, id: &str) -> Option<(&'s Arc<Index>, Segment)> {
    let (k, id) = id.split_once('-')?;
    let index = indexes(shared).get(k.parse::<usize>().ok()?)?;
    let seg = index.get(id.parse().ok()?).ok()??;
    Some((index, seg))
}

/// `GET /api/recordings/{input}.m3u8`: the VOD playlist of the input's segments in range.
fn playlist(query: &str, shared: &Shared) -> Response<Body> {
    let segments = match answering(query, shared) {
        Ok(s) => s,
        Err(answer) => return *answer,
    };
    if segments.is_empty() {
        return refuse(
            StatusCode::NOT_FOUND,
            "nothing of this input is recorded in that range",
        );
    }
    // The token the playlist was asked with goes on to the files it names.
    let token = query_param(query, "token").map_or_else(String::new, |t| {
        format!(
            "?token={}",
            form_urlencoded::byte_serialize(t.as_bytes()).collect::<String>()
        )
    });
    let indexes = indexes(shared);
    let mut entries = Vec::new();
    for (k, seg) in &segments {
        let path = indexes[*k].path_of(&seg.file);
        let kind = match Kind::of(&path) {
            Some(kind) => kind,
            None => {
                return refuse(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "a recording in .mkv can't be played as HLS: record .mp4, .mov or .ts",
                )
            }
        };
        let init = match kind {
            Kind::Fragmented => match init_length(&path) {
                Some(n) => Some(n),
                None => continue, // not whole (deleted meanwhile, or damaged): left out
            },
            Kind::Ts => None,
        };
        let id = format!("{k}-{}{}", seg.id, extension(&seg.file));
        entries.push(Entry {
            id,
            seg: seg.clone(),
            init,
        });
    }
    respond(
        StatusCode::OK,
        "application/vnd.apple.mpegurl",
        m3u8(&entries, &token),
    )
}

/// A file's extension with its dot ("" without one).
fn extension(file: &Path) -> String {
    file.extension()
        .map_or_else(String::new, |e| format!(".{}", e.to_string_lossy()))
}

/// How a segment's container plays in HLS.
enum Kind {
    /// Fragmented MP4 or MOV: its header, then fragments.
    Fragmented,
    /// MPEG-TS, as it is.
    Ts,
}

impl Kind {
    fn of(path: &Path) -> Option<Self> {
        match crate::record::muxer_of(&path.to_string_lossy())? {
            "mp4" | "mov" => Some(Kind::Fragmented),
            "mpegts" => Some(Kind::Ts),
            _ => None,
        }
    }
}

/// One segment of a playlist: its address under `segment/`, its row, its header's length
/// where it has one.
struct Entry {
    id: String,
    seg: Segment,
    init: Option<u64>,
}

/// The playlist's text (HLS version 7: a header per segment, byte ranges).
fn m3u8(entries: &[Entry], token: &str) -> String {
    let longest = entries
        .iter()
        .map(|e| e.seg.duration_us())
        .max()
        .unwrap_or(0);
    let mut out = format!(
        "#EXTM3U\n#EXT-X-VERSION:7\n#EXT-X-PLAYLIST-TYPE:VOD\n#EXT-X-TARGETDURATION:{}\n#EXT-X-MEDIA-SEQUENCE:0\n#EXT-X-INDEPENDENT-SEGMENTS\n",
        (longest as f64 / 1e6).ceil().max(1.0) as u64
    );
    for (i, e) in entries.iter().enumerate() {
        // Each file's times start at its own 0.
        if i > 0 {
            out.push_str("#EXT-X-DISCONTINUITY\n");
        }
        let uri = format!("segment/{}{token}", e.id);
        out.push_str(&format!(
            "#EXT-X-PROGRAM-DATE-TIME:{}\n",
            rfc3339(e.seg.start_us)
        ));
        if let Some(init) = e.init {
            out.push_str(&format!(
                "#EXT-X-MAP:URI=\"{uri}\",BYTERANGE=\"{init}@0\"\n"
            ));
        }
        out.push_str(&format!(
            "#EXTINF:{:.3},\n",
            e.seg.duration_us() as f64 / 1e6
        ));
        if let Some(init) = e.init {
            out.push_str(&format!(
                "#EXT-X-BYTERANGE:{}@{init}\n",
                e.seg.bytes.saturating_sub(init)
            ));
        }
        out.push_str(&uri);
        out.push('\n');
    }
    out.push_str("#EXT-X-ENDLIST\n");
    out
}

/// The length of a fragmented MP4's header: its boxes before the first `moof`.
fn init_length(path: &Path) -> Option<u64> {
    let mut file = std::fs::File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    let mut at = 0u64;
    while at + 8 <= len {
        file.seek(SeekFrom::Start(at)).ok()?;
        let mut head = [0u8; 16];
        file.read_exact(&mut head[..8]).ok()?;
        let size = u64::from(u32::from_be_bytes(head[..4].try_into().ok()?));
        let size = match size {
            1 => {
                file.read_exact(&mut head[8..]).ok()?;
                u64::from_be_bytes(head[8..].try_into().ok()?)
            }
            0 => len - at,
            s => s,
        };
        if &head[4..8] == b"moof" {
            return Some(at);
        }
        if size < 8 {
            return None;
        }
        at += size;
    }
    None
}

/// A file as the answer, whole or the byte range asked (`Range: bytes=…`), in chunks.
pub(super) fn send_file(path: &PathBuf, range: Option<&str>) -> Response<Body> {
    let Ok(mut file) = std::fs::File::open(path) else {
        return refuse(StatusCode::NOT_FOUND, "the file is gone");
    };
    let len = file.metadata().map_or(0, |m| m.len());
    let (start, end, partial) = match range.map(|r| byte_range(r, len)) {
        None => (0, len, false),
        Some(Some((s, e))) => (s, e, true),
        Some(None) => {
            let mut r = refuse(
                StatusCode::RANGE_NOT_SATISFIABLE,
                "the range asked is not in the file",
            );
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
            return r;
        }
    };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return refuse(StatusCode::NOT_FOUND, "the file can't be read");
    }
    let kind = match path.extension().and_then(|e| e.to_str()) {
        Some("mp4") => "video/mp4",
        Some("mov") => "video/quicktime",
        Some("ts") => "video/mp2t",
        Some("mkv") => "video/x-matroska",
        Some("jpg") => "image/jpeg",
        _ => "application/x-ndjson",
    };
    let chunks = futures_util::stream::unfold((file, end - start), |(mut file, left)| async move {
        if left == 0 {
            return None;
        }
        let mut buf = vec![0u8; CHUNK.min(left as usize)];
        let n = file.read(&mut buf).ok().filter(|&n| n > 0)?;
        buf.truncate(n);
        Some((Ok(Frame::data(Bytes::from(buf))), (file, left - n as u64)))
    });
    let code = match partial {
        true => StatusCode::PARTIAL_CONTENT,
        false => StatusCode::OK,
    };
    let mut r = respond(code, kind, "");
    *r.body_mut() = BodyExt::boxed(StreamBody::new(chunks));
    let h = r.headers_mut();
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    if let Ok(v) = HeaderValue::from_str(&(end - start).to_string()) {
        h.insert(header::CONTENT_LENGTH, v);
    }
    if partial {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{}/{len}", end - 1)) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    r
}

/// A `Range: bytes=A-B` (or `A-`, or `-N`) of a file of `len` bytes: its start and end
/// (exclusive); None where it is not in the file.
fn byte_range(range: &str, len: u64) -> Option<(u64, u64)> {
    let spec = range.trim().strip_prefix("bytes=")?;
    let (a, b) = spec.split(',').next()?.trim().split_once('-')?;
    let (start, end) = match (a.trim(), b.trim()) {
        ("", n) => {
            let n: u64 = n.parse().ok()?;
            (len.saturating_sub(n), len)
        }
        (a, "") => (a.parse().ok()?, len),
        (a, b) => (
            a.parse().ok()?,
            b.parse::<u64>().ok()?.saturating_add(1).min(len),
        ),
    };
    (start < end && end <= len).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_ranges_as_browsers_ask_them() {
        assert_eq!(byte_range("bytes=0-99", 1000), Some((0, 100)));
        assert_eq!(byte_range("bytes=900-", 1000), Some((900, 1000)));
        assert_eq!(byte_range("bytes=-100", 1000), Some((900, 1000)));
        assert_eq!(byte_range("bytes=0-5000", 1000), Some((0, 1000)));
        assert_eq!(byte_range("bytes=1000-", 1000), None);
        assert_eq!(byte_range("lines=1-2", 1000), None);
    }

    #[test]
    fn times_are_rfc3339_or_unix_seconds() {
        assert_eq!(moment("1765000000.5"), Some(1_765_000_000_500_000));
        assert_eq!(moment("2026-12-06T10:00:00Z"), Some(1_796_551_200_000_000));
        assert_eq!(
            moment("2026-12-06T11:00:00+01:00"),
            Some(1_796_551_200_000_000)
        );
        assert_eq!(moment("yesterday"), None);
    }
}
