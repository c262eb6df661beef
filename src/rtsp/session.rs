//! One player's RTSP connection: its requests read and answered in order, its packets
//! written by a thread of its own (interleaved ones between the answers, whole), until the
//! player tears down, goes away or the server stops.
//!
//! Invariants: a request head over `MAX_HEAD` bytes, or slower than `HEAD_WITHIN`, ends the
//! connection, and so does silence: `HEAD_WITHIN` for a connection that neither plays nor
//! publishes, `SESSION_TIMEOUT` for one that does (any byte it sends counts); only the
//! publisher that gives the run's secret (`publish_key`) may ANNOUNCE; interleaved data a player sends (its RTCP receiver reports) is read and
//! dropped; with a token, nothing but OPTIONS is answered before the connection showed it
//! (once is enough: players send it with their first DESCRIBE); a player is removed from its
//! path when its connection ends, however it ends.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use base64::Engine;
use subtle::ConstantTimeEq;

use super::{Path, Player, Route, HEAD_WITHIN, MAX_HEAD, PLAYER_QUEUE, SESSION_TIMEOUT, TICK};

/// What every connection shares.
#[derive(Clone)]
pub(super) struct Shared {
    pub paths: Arc<Vec<Arc<Path>>>,
    pub token: Option<String>,
    /// The secret framepipe's own publisher gives (`?publish_key=`): nobody else publishes.
    pub publish_key: String,
    pub udp: Arc<(UdpSocket, UdpSocket)>,
    pub stop: Arc<AtomicBool>,
    pub connections: Arc<AtomicUsize>,
    /// Connections open by each client address.
    pub by_address: Arc<std::sync::Mutex<HashMap<std::net::IpAddr, usize>>>,
}

/// A path's name as it stands in a URL (each segment percent-encoded).
pub(super) fn url_path(name: &str) -> String {
    name.split('/')
        .map(|seg| {
            seg.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// One request.
struct Request {
    method: String,
    url: String,
    headers: HashMap<String, String>,
    body: String,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).map(String::as_str)
    }
}

/// The connection's state.
struct Conn<'a> {
    stream: TcpStream,
    peer: SocketAddr,
    shared: &'a Shared,
    buf: Vec<u8>,
    began: Option<Instant>,
    /// When it last sent anything (a request, RTCP, a publisher's RTP).
    heard: Instant,
    tx: crossbeam_channel::Sender<Vec<u8>>,
    authed: bool,
    session: String,
    player: Option<(Arc<Path>, Arc<Player>)>,
    /// What it publishes (ANNOUNCE, RECORD): framepipe's own encoder of the mosaic or the
    /// processed picture.
    publishing: Option<Publishing>,
    /// Its ANNOUNCE'd path and the channels its SETUPs gave, before RECORD.
    announced: Option<Publishing>,
}

/// A publisher's path and which track each interleaved channel carries.
#[derive(Clone)]
struct Publishing {
    path: Arc<Path>,
    /// (channel, track, RTCP) of each SETUP.
    channels: Vec<(u8, usize, bool)>,
    /// The track of its H.264 video, whose keyframes players start at.
    video: Option<usize>,
}

impl Publishing {
    /// An interleaved packet on `channel` to the path's players.
    fn relay(&self, channel: u8, bytes: &[u8]) {
        let Some(&(_, track, rtcp)) = self.channels.iter().find(|(c, _, _)| *c == channel) else {
            return;
        };
        if !rtcp && Some(track) == self.video && h264_key(bytes) {
            self.path.keyframe();
        }
        self.path.send(track, rtcp, bytes);
    }
}

/// Whether an RTP packet of H.264 (RFC 6184) begins an IDR picture or carries its
/// parameter sets: a single NAL unit of type 5 or 7, an aggregate holding one, or the first
/// fragment of one.
fn h264_key(rtp: &[u8]) -> bool {
    if rtp.len() < 13 {
        return false;
    }
    let cc = usize::from(rtp[0] & 0x0f);
    let mut at = 12 + 4 * cc;
    if rtp[0] & 0x10 != 0 {
        let Some(ext) = rtp.get(at + 2..at + 4) else {
            return false;
        };
        at += 4 + 4 * usize::from(u16::from_be_bytes([ext[0], ext[1]]));
    }
    let Some(payload) = rtp.get(at..).filter(|p| !p.is_empty()) else {
        return false;
    };
    let key = |t: u8| t == 5 || t == 7;
    match payload[0] & 0x1f {
        24 => {
            let mut rest = &payload[1..];
            while rest.len() > 2 {
                let len = usize::from(u16::from_be_bytes([rest[0], rest[1]]));
                if rest.len() > 2 && key(rest[2] & 0x1f) {
                    return true;
                }
                rest = rest.get(2 + len..).unwrap_or_default();
            }
            false
        }
        28 => payload
            .get(1)
            .is_some_and(|fu| fu & 0x80 != 0 && key(fu & 0x1f)),
        t => key(t),
    }
}

/// Serves one connection until it ends (module doc).
pub(super) fn serve(stream: TcpStream, peer: SocketAddr, shared: &Shared) {
    let Ok(out) = stream.try_clone() else { return };
    let _ = stream.set_nodelay(true);
    let _ = stream.set_read_timeout(Some(TICK));
    let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(PLAYER_QUEUE);
    let stop = shared.stop.clone();
    let writer = std::thread::Builder::new()
        .name("rtsp writer".into())
        .spawn(move || write_all(out, rx, stop));
    let mut conn = Conn {
        stream,
        peer,
        shared,
        buf: Vec::new(),
        began: None,
        heard: Instant::now(),
        tx,
        authed: shared.token.is_none(),
        session: session_id(),
        player: None,
        publishing: None,
        announced: None,
    };
    while !shared.stop.load(Ordering::SeqCst) {
        match conn.next() {
            Ok(Some(req)) => {
                if !conn.answer(&req) {
                    break;
                }
            }
            Ok(None) => {}
            Err(()) => break,
        }
    }
    // The player leaves its path first (it holds the writer's queue too), then what is
    // queued (a TEARDOWN's answer) is written before the connection closes.
    if let Some((path, player)) = conn.player.take() {
        path.remove(player.id);
    }
    if let Some(p) = conn.publishing.take().or(conn.announced.take()) {
        p.path.unpublish();
    }
    let stream = conn.stream.try_clone();
    drop(conn);
    if let Ok(w) = writer {
        let _ = w.join();
    }
    if let Ok(s) = stream {
        let _ = s.shutdown(std::net::Shutdown::Both);
    }
}

/// The writer's loop: each message written whole, until the connection ends.
fn write_all(mut out: TcpStream, rx: crossbeam_channel::Receiver<Vec<u8>>, stop: Arc<AtomicBool>) {
    let _ = out.set_write_timeout(Some(std::time::Duration::from_secs(5)));
    while !stop.load(Ordering::SeqCst) {
        match rx.recv_timeout(TICK) {
            Ok(bytes) => {
                if out.write_all(&bytes).is_err() {
                    let _ = out.shutdown(std::net::Shutdown::Both);
                    return;
                }
            }
            Err(crossbeam_channel::RecvTimeoutError::Timeout) => {}
            Err(crossbeam_channel::RecvTimeoutError::Disconnected) => return,
        }
    }
}

/// A new session's id: 16 hex digits from the clock and a counter.
fn session_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "{:016X}",
        nanos.rotate_left(17) ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15)
    )
}

impl Conn<'_> {
    /// The next request: None where none is whole yet; Err where the connection ends.
    fn next(&mut self) -> Result<Option<Request>, ()> {
        loop {
            // Interleaved data from the player (its RTCP): read and dropped.
            if self.buf.first() == Some(&b'$') {
                if self.buf.len() < 4 {
                    return self.fill();
                }
                let len = usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]]));
                if self.buf.len() < 4 + len {
                    return self.fill();
                }
                if let Some(publishing) = &self.publishing {
                    publishing.relay(self.buf[1], &self.buf[4..4 + len]);
                }
                self.buf.drain(..4 + len);
                // A whole packet: the next head's time counts from here (a publisher's
                // stream of packets is not a head that takes too long).
                self.began = None;
                continue;
            }
            let Some(end) = self.buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                if self.buf.len() > MAX_HEAD {
                    return Err(());
                }
                return self.fill();
            };
            let head = String::from_utf8_lossy(&self.buf[..end]).into_owned();
            let mut req = parse(&head).ok_or(())?;
            let body: usize = req
                .header("content-length")
                .and_then(|l| l.trim().parse().ok())
                .unwrap_or(0);
            if body > MAX_HEAD {
                return Err(());
            }
            if self.buf.len() < end + 4 + body {
                return self.fill();
            }
            req.body = String::from_utf8_lossy(&self.buf[end + 4..end + 4 + body]).into_owned();
            self.buf.drain(..end + 4 + body);
            self.began = None;
            return Ok(Some(req));
        }
    }

    /// Reads what has come (at most a `TICK`'s wait): Ok(None) to look again, Err where
    /// the connection ended or a head took too long.
    fn fill(&mut self) -> Result<Option<Request>, ()> {
        if !self.buf.is_empty()
            && self.began.get_or_insert_with(Instant::now).elapsed() > HEAD_WITHIN
        {
            return Err(());
        }
        // Silent too long: a connection that plays or publishes within its session's
        // timeout, any other within a head's.
        let busy = self.player.is_some() || self.publishing.is_some() || self.announced.is_some();
        let patience = if busy { SESSION_TIMEOUT } else { HEAD_WITHIN };
        if self.heard.elapsed() > patience {
            return Err(());
        }
        let mut chunk = [0u8; 4096];
        match self.stream.read(&mut chunk) {
            Ok(0) => Err(()),
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                self.heard = Instant::now();
                Ok(None)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                Ok(None)
            }
            Err(_) => Err(()),
        }
    }

    /// Answers `req`; false where the connection ends after it.
    fn answer(&mut self, req: &Request) -> bool {
        let cseq = req.header("cseq").unwrap_or("0").trim().to_string();
        if req.method != "OPTIONS" && !self.authed {
            if !self.token_ok(req) {
                self.reply(
                    &cseq,
                    "401 Unauthorized",
                    "WWW-Authenticate: Basic realm=\"framepipe\"\r\n",
                    "",
                );
                return true;
            }
            self.authed = true;
        }
        match req.method.as_str() {
            "OPTIONS" => self.reply(
                &cseq,
                "200 OK",
                "Public: OPTIONS, DESCRIBE, SETUP, PLAY, GET_PARAMETER, SET_PARAMETER, TEARDOWN, ANNOUNCE, RECORD\r\n",
                "",
            ),
            "DESCRIBE" => self.describe(&cseq, &req.url),
            "SETUP" if self.announced.is_some() => self.setup_record(&cseq, req),
            "SETUP" => self.setup(&cseq, req),
            "PLAY" => self.play(&cseq, &req.url),
            "ANNOUNCE" => self.announce(&cseq, req),
            "RECORD" => match self.announced.take() {
                Some(p) => {
                    self.publishing = Some(p);
                    let session = format!("Session: {}\r\n", self.session);
                    self.reply(&cseq, "200 OK", &session, "")
                }
                None => self.reply(&cseq, "455 Method Not Valid in This State", "", ""),
            },
            "GET_PARAMETER" | "SET_PARAMETER" => {
                let session = format!("Session: {}\r\n", self.session);
                self.reply(&cseq, "200 OK", &session, "")
            }
            "TEARDOWN" => {
                let session = format!("Session: {}\r\n", self.session);
                self.reply(&cseq, "200 OK", &session, "");
                return false;
            }
            _ => self.reply(&cseq, "501 Not Implemented", "", ""),
        }
        true
    }

    /// Whether `req` carries the token (module doc).
    fn token_ok(&self, req: &Request) -> bool {
        let Some(token) = &self.shared.token else {
            return true;
        };
        let same = |given: &str| bool::from(given.as_bytes().ct_eq(token.as_bytes()));
        let query = req.url.split_once('?').map_or("", |(_, q)| q);
        let from_query = form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "token")
            .is_some_and(|(_, v)| same(&v));
        let from_header = req.header("authorization").is_some_and(|a| {
            let Some((scheme, value)) = a.trim().split_once(' ') else {
                return false;
            };
            let value = value.trim();
            if scheme.eq_ignore_ascii_case("bearer") {
                return same(value);
            }
            scheme.eq_ignore_ascii_case("basic")
                && base64::engine::general_purpose::STANDARD
                    .decode(value)
                    .ok()
                    .and_then(|d| String::from_utf8(d).ok())
                    .and_then(|d| d.split_once(':').map(|(_, p)| same(p)))
                    .unwrap_or(false)
        });
        from_query || from_header
    }

    fn reply(&self, cseq: &str, status: &str, headers: &str, body: &str) {
        let mut text =
            format!("RTSP/1.0 {status}\r\nCSeq: {cseq}\r\nServer: framepipe\r\n{headers}");
        if !body.is_empty() {
            text.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        text.push_str("\r\n");
        text.push_str(body);
        let _ = self
            .tx
            .send_timeout(text.into_bytes(), std::time::Duration::from_secs(1));
    }

    /// The path a URL names (its name, or its number), and the track where it ends in
    /// `streamid=N`.
    fn path_of(&self, url: &str) -> Option<(Arc<Path>, Option<usize>)> {
        let path = url_only_path(url);
        let (name, track) = match path.rsplit_once('/') {
            Some((p, last)) if last.starts_with("streamid=") => {
                (p.to_string(), last["streamid=".len()..].parse().ok())
            }
            _ => (path, None),
        };
        let name = name.trim_matches('/');
        self.shared
            .paths
            .iter()
            .find(|p| p.name == name || p.n.to_string() == name)
            .map(|p| (p.clone(), track))
    }

    fn describe(&self, cseq: &str, url: &str) {
        let Some((path, _)) = self.path_of(url) else {
            return self.reply(cseq, "404 Not Found", "", "");
        };
        let Some(sdp) = path.sdp() else {
            return self.reply(cseq, "503 Service Unavailable", "", "");
        };
        let sdp = sdp.replacen("s=No Name", &format!("s={}", path.name), 1);
        let base = url.split('?').next().unwrap_or(url).trim_end_matches('/');
        let headers = format!("Content-Base: {base}/\r\nContent-Type: application/sdp\r\n");
        self.reply(cseq, "200 OK", &headers, &sdp);
    }

    fn setup(&mut self, cseq: &str, req: &Request) {
        let Some((path, track)) = self.path_of(&req.url) else {
            return self.reply(cseq, "404 Not Found", "", "");
        };
        let tracks = path.sdp().map_or(0, |s| s.matches("\nm=").count());
        let track = track.unwrap_or(0);
        if track >= tracks {
            return self.reply(cseq, "404 Not Found", "", "");
        }
        let Some((route, transport)) = self.transport(req.header("transport"), track) else {
            return self.reply(cseq, "461 Unsupported Transport", "", "");
        };
        let player = match &self.player {
            Some((p, player)) if Arc::ptr_eq(p, &path) => player.clone(),
            Some(_) => return self.reply(cseq, "459 Aggregate Operation Not Allowed", "", ""),
            None => {
                let player = Arc::new(Player {
                    id: self.shared.connections.load(Ordering::Relaxed) as u64
                        ^ u64::from_str_radix(&self.session, 16).unwrap_or(0),
                    playing: AtomicBool::new(false),
                    started: AtomicBool::new(false),
                    routes: Mutex::new(vec![None; tracks]),
                    tcp: self.tx.clone(),
                    udp: self.shared.udp.clone(),
                    dropped: AtomicU64::new(0),
                });
                path.add(player.clone());
                self.player = Some((path.clone(), player.clone()));
                player
            }
        };
        if let Some(r) = player
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_mut(track)
        {
            *r = Some(route);
        }
        let headers = format!(
            "Transport: {transport}\r\nSession: {};timeout=60\r\n",
            self.session
        );
        self.reply(cseq, "200 OK", &headers, "");
    }

    /// The route a `Transport` header asks for, and the header that answers it.
    fn transport(&self, header: Option<&str>, track: usize) -> Option<(Route, String)> {
        for spec in header?.split(',') {
            let parts: Vec<&str> = spec.split(';').map(str::trim).collect();
            let param = |name: &str| {
                parts
                    .iter()
                    .find_map(|p| p.strip_prefix(name)?.strip_prefix('='))
            };
            let ports = |v: &str| -> Option<(u16, u16)> {
                let (a, b) = v.split_once('-').unwrap_or((v, ""));
                let a: u16 = a.parse().ok()?;
                Some((a, b.parse().unwrap_or(a.wrapping_add(1))))
            };
            if parts.iter().any(|p| p.eq_ignore_ascii_case("multicast")) {
                continue;
            }
            let profile = parts.first()?.to_ascii_uppercase();
            if profile == "RTP/AVP/TCP" {
                let (a, b) = param("interleaved")
                    .and_then(ports)
                    .unwrap_or((2 * track as u16, 2 * track as u16 + 1));
                let a = u8::try_from(a).ok()?;
                return Some((
                    Route::Tcp { rtp: a },
                    format!("RTP/AVP/TCP;unicast;interleaved={a}-{b}"),
                ));
            }
            if profile == "RTP/AVP" || profile == "RTP/AVP/UDP" {
                let (a, b) = param("client_port").and_then(ports)?;
                let ip = self.peer.ip();
                let (s0, s1) = (
                    self.shared.udp.0.local_addr().ok()?.port(),
                    self.shared.udp.1.local_addr().ok()?.port(),
                );
                return Some((
                    Route::Udp {
                        rtp: SocketAddr::new(ip, a),
                        rtcp: SocketAddr::new(ip, b),
                    },
                    format!("RTP/AVP;unicast;client_port={a}-{b};server_port={s0}-{s1}"),
                ));
            }
        }
        None
    }

    /// ANNOUNCE: framepipe's own encoder (from this machine) publishes a path kept for it,
    /// one publisher at a time.
    fn announce(&mut self, cseq: &str, req: &Request) {
        let Some((path, _)) = self.path_of(&req.url) else {
            return self.reply(cseq, "404 Not Found", "", "");
        };
        // Framepipe's own encoder gives the run's secret; from loopback alone is not enough
        // (any local process connects from there).
        let query = req.url.split_once('?').map_or("", |(_, q)| q);
        let keyed = form_urlencoded::parse(query.as_bytes())
            .find(|(k, _)| k == "publish_key")
            .is_some_and(|(_, v)| {
                bool::from(v.as_bytes().ct_eq(self.shared.publish_key.as_bytes()))
            });
        if !keyed {
            return self.reply(cseq, "401 Unauthorized", "", "");
        }
        if !path.published || !self.peer.ip().is_loopback() || !path.publish(&req.body) {
            return self.reply(cseq, "403 Forbidden", "", "");
        }
        let video = req
            .body
            .split("\nm=")
            .skip(1)
            .position(|m| m.starts_with("video") && m.contains("H264"));
        self.announced = Some(Publishing {
            path,
            channels: Vec::new(),
            video,
        });
        self.reply(cseq, "200 OK", "", "");
    }

    /// A publisher's SETUP: the interleaved channels of one track.
    fn setup_record(&mut self, cseq: &str, req: &Request) {
        let track = self.path_of(&req.url).and_then(|(_, t)| t).unwrap_or(0);
        let channels = req.header("transport").and_then(|t| {
            let (_, v) = t
                .split(';')
                .find_map(|p| p.trim().split_once("interleaved="))?;
            let (a, b) = v.split_once('-').unwrap_or((v, ""));
            let a: u8 = a.trim().parse().ok()?;
            Some((a, b.trim().parse().unwrap_or(a.wrapping_add(1))))
        });
        let (Some((a, b)), Some(p)) = (channels, self.announced.as_mut()) else {
            return self.reply(cseq, "461 Unsupported Transport", "", "");
        };
        p.channels.push((a, track, false));
        p.channels.push((b, track, true));
        let headers = format!(
            "Transport: RTP/AVP/TCP;unicast;interleaved={a}-{b};mode=record\r\nSession: {};timeout=60\r\n",
            self.session
        );
        self.reply(cseq, "200 OK", &headers, "");
    }

    fn play(&self, cseq: &str, _url: &str) {
        let Some((_, player)) = &self.player else {
            return self.reply(cseq, "455 Method Not Valid in This State", "", "");
        };
        player.playing.store(true, Ordering::SeqCst);
        let headers = format!("Session: {}\r\nRange: npt=0.000-\r\n", self.session);
        self.reply(cseq, "200 OK", &headers, "");
    }
}

/// A request head: its line and headers (names lower-cased).
fn parse(head: &str) -> Option<Request> {
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let (method, url, version) = (first.next()?, first.next()?, first.next()?);
    if !version.starts_with("RTSP/") {
        return None;
    }
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    Some(Request {
        method: method.to_ascii_uppercase(),
        url: url.to_string(),
        headers,
        body: String::new(),
    })
}

/// The path of an `rtsp://host:port/path?query` URL, percent-decoded.
fn url_only_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let path = rest.find('/').map_or("", |at| &rest[at..]);
    let path = path.split('?').next().unwrap_or(path);
    percent_decode(path)
}

/// `%XX` sequences as their bytes.
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).copied().and_then(hex),
            b.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_paths_and_tracks() {
        assert_eq!(
            url_only_path("rtsp://h:8554/front%20door/streamid=1?token=x"),
            "/front door/streamid=1"
        );
        assert_eq!(
            url_path("10.0.0.5/Streaming/front door"),
            "10.0.0.5/Streaming/front%20door"
        );
        let r =
            parse("SETUP rtsp://h/a RTSP/1.0\r\nCSeq: 3\r\nTransport: RTP/AVP;unicast").unwrap();
        assert_eq!((r.method.as_str(), r.header("cseq")), ("SETUP", Some("3")));
        assert!(parse("GET / HTTP/1.1\r\nHost: x").is_none());
    }
}
