//! The browser view (`--serve [ADDR:]PORT`): a page that shows the processed video live
//! (Motion JPEG over HTTP, `multipart/x-mixed-replace`), the overlay's live figures, and the
//! window's controls as buttons (filter presets, pause, page-locked/pageable, bands). With
//! several inputs it is handed the mosaic's labelled pictures, as the window is.
//!
//! Invariants: the pipeline never waits for a browser: the sink hands the newest frame to
//! the encoder thread only when it is idle (at most `MAX_FPS` a second, and only while a
//! client watches), and each client's thread sends the newest JPEG when its connection takes
//! it, so a slow or stalled client gets fewer frames and slows nothing else; at most
//! `MAX_CLIENTS` streams at once (more are refused with 503); with a token (`--serve-token`)
//! every request without it is refused with 401; nothing but the page, its stream, one
//! frame, the figures and the controls is served (404); the server binds to 127.0.0.1 unless
//! an address is given; every connection is answered on a thread of its own (at most
//! `MAX_CONNECTIONS`, more are answered 503), so a long-lived stream never holds up another
//! request, and a viewer whose connection takes nothing for `CLIENT_TIMEOUT` is closed;
//! `finish` stops the server and the encoder within a poll (`POLL`), leaving any client
//! thread blocked in a write to end with the process.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{unbounded, Receiver, Sender};
use opencv::core::{Mat, Vec3b, Vector};
use opencv::prelude::*;

use super::{Flow, Frame, Knobs, Sink};
use crate::frame::FrameSize;
use crate::stats::Live;

/// The most frames a second sent to browsers.
pub const MAX_FPS: f64 = 25.0;
/// The most browsers watching the stream at once.
pub const MAX_CLIENTS: usize = 32;
/// JPEG quality of the stream.
const QUALITY: i32 = 80;
/// How often the server and the encoder look at the stop flag.
const POLL: Duration = Duration::from_millis(100);

/// The keys the page's buttons send (the window's, `sink::pipeline_key`).
const KEYS: &[u8] = b"123456789pbB ";

/// The newest JPEG, numbered, and who waits for the next.
#[derive(Default)]
struct Latest {
    jpeg: Mutex<(u64, Arc<Vec<u8>>)>,
    changed: Condvar,
}

/// What the server threads share with the sink.
struct Shared {
    latest: Latest,
    /// A BGR frame for the encoder (None: it is idle).
    mailbox: Mutex<Option<(FrameSize, Vec<u8>)>>,
    mail: Condvar,
    /// The overlay's figures, as JSON.
    stats: Mutex<String>,
    clients: AtomicUsize,
    /// Connections being answered (each on a thread of its own).
    connections: AtomicUsize,
    stop: AtomicBool,
    token: Option<String>,
}

/// The browser view's sink (module doc).
pub struct Web {
    shared: Arc<Shared>,
    keys: Receiver<u8>,
    knobs: Knobs,
    last_handoff: Option<Instant>,
    address: String,
    threads: Vec<thread::JoinHandle<()>>,
    /// A spare buffer for the next frame handed to the encoder.
    spare: Vec<u8>,
}

/// Where `--serve` binds: `PORT` is 127.0.0.1:PORT, else the address as given.
pub fn bind_address(serve: &str) -> Result<std::net::SocketAddr, String> {
    let text = match serve.parse::<u16>() {
        Ok(port) => format!("127.0.0.1:{port}"),
        Err(_) => serve.to_string(),
    };
    use std::net::ToSocketAddrs;
    text.to_socket_addrs()
        .map_err(|e| format!("--serve '{serve}': not a port or ADDRESS:PORT ({e})"))?
        .next()
        .ok_or_else(|| format!("--serve '{serve}': the address names no host"))
}

impl Web {
    /// Serves the view at `serve` (`bind_address`), requiring `token` where given; `knobs`
    /// are the pipeline's settings the controls change.
    pub fn open(serve: &str, token: Option<String>, knobs: Knobs) -> Result<Self> {
        let addr = bind_address(serve).map_err(anyhow::Error::msg)?;
        let server = TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("--serve {addr}: can't listen there ({e})"))?;
        server.set_nonblocking(true)?;
        let address = server
            .local_addr()
            .map_or(addr.to_string(), |a| a.to_string());
        let shared = Arc::new(Shared {
            latest: Latest::default(),
            mailbox: Mutex::new(None),
            mail: Condvar::new(),
            stats: Mutex::new("{}".into()),
            clients: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            token,
        });
        let (key_tx, keys) = unbounded();
        let serving = {
            let shared = shared.clone();
            thread::Builder::new()
                .name("web server".into())
                .spawn(move || accept_connections(&server, &shared, &key_tx))?
        };
        let encoding = {
            let shared = shared.clone();
            thread::Builder::new()
                .name("web encoder".into())
                .spawn(move || encode_frames(&shared))?
        };
        crate::info!(
            "the browser view is at http://{address}/{}",
            match &shared.token {
                Some(_) => "?token=…",
                None => "",
            }
        );
        Ok(Self {
            shared,
            keys,
            knobs,
            last_handoff: None,
            address,
            threads: vec![serving, encoding],
            spare: Vec::new(),
        })
    }

    /// The pipeline's answer to the buttons pressed since the last frame (one a frame).
    fn pressed(&mut self) -> Result<Flow> {
        while let Ok(key) = self.keys.try_recv() {
            if let Some(flow) = super::pipeline_key(key, &mut self.knobs)? {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }
}

impl Sink for Web {
    fn verb(&self) -> &'static str {
        "served"
    }
    fn describe(&self) -> String {
        format!("the browser view at http://{}/", self.address)
    }
    fn consume(&mut self, frame: &Frame) -> Result<Flow> {
        let (size, bgr) = (frame.size(), super::bgr(frame, "the browser view")?);
        let due = self
            .last_handoff
            .is_none_or(|t| t.elapsed().as_secs_f64() >= 1.0 / MAX_FPS);
        if due && self.shared.clients.load(Ordering::SeqCst) > 0 {
            if let Ok(mut mailbox) = self.shared.mailbox.try_lock() {
                if mailbox.is_none() {
                    // The encoder is idle: it gets this frame; a busy one misses it.
                    let mut bytes = std::mem::take(&mut self.spare);
                    bytes.clear();
                    bytes.extend_from_slice(bgr);
                    *mailbox = Some((size, bytes));
                    self.shared.mail.notify_one();
                    self.last_handoff = Some(Instant::now());
                }
            }
        }
        self.pressed()
    }
    fn status(&mut self, live: &Live) {
        let json = serde_json::json!({
            "fps": live.fps,
            "frames": live.frames,
            "dropped": live.dropped,
            "paused": live.paused,
            // The window's key help is not the page's (it has buttons).
            "lines": live
                .lines()
                .into_iter()
                .filter(|l| !l.starts_with("h overlay"))
                .collect::<Vec<_>>(),
            "clients": self.shared.clients.load(Ordering::SeqCst),
        });
        if let Ok(mut s) = self.shared.stats.lock() {
            *s = json.to_string();
        }
    }
    fn idle(&mut self) -> Result<Flow> {
        self.pressed()
    }
    fn finish(&mut self) -> Result<()> {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.shared.mail.notify_all();
        self.shared.latest.changed.notify_all();
        let deadline = Instant::now() + 2 * POLL;
        for t in self.threads.drain(..) {
            while !t.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        Ok(())
    }
}

/// The encoder thread: JPEG of each frame the sink hands over, published as the newest.
fn encode_frames(shared: &Shared) {
    let params = Vector::<i32>::from_slice(&[opencv::imgcodecs::IMWRITE_JPEG_QUALITY, QUALITY]);
    let mut out = Vector::<u8>::new();
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok(mailbox) = shared.mailbox.lock() else {
            return;
        };
        let Ok((mut mailbox, _)) = shared.mail.wait_timeout(mailbox, POLL) else {
            return;
        };
        let Some((size, bytes)) = mailbox.as_ref() else {
            continue;
        };
        let encoded =
            Mat::new_rows_cols_with_bytes::<Vec3b>(size.height as i32, size.width as i32, bytes)
                .and_then(|mat| opencv::imgcodecs::imencode(".jpg", &mat, &mut out, &params));
        *mailbox = None;
        drop(mailbox);
        if let Ok(true) = encoded {
            if let Ok(mut latest) = shared.latest.jpeg.lock() {
                *latest = (latest.0 + 1, Arc::new(out.to_vec()));
            }
            shared.latest.changed.notify_all();
        }
    }
}

/// The most connections answered at once (viewers and every other request); more are
/// answered 503 at once.
const MAX_CONNECTIONS: usize = MAX_CLIENTS + 32;
/// The longest request head read.
const MAX_HEAD: usize = 8192;
/// How long a request's head may take to come, and a write to a viewer may block, before
/// the connection is closed.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server thread: accepts connections, each answered on a thread of its own (a viewer's
/// stream lasts as long as it watches, so no connection waits for another).
fn accept_connections(server: &TcpListener, shared: &Arc<Shared>, keys: &Sender<u8>) {
    while !shared.stop.load(Ordering::SeqCst) {
        let mut conn = match server.accept() {
            Ok((conn, _)) => conn,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
            Err(_) => {
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let _ = conn.set_nonblocking(false);
        let _ = conn.set_read_timeout(Some(CLIENT_TIMEOUT));
        let _ = conn.set_write_timeout(Some(CLIENT_TIMEOUT));
        if shared.connections.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            shared.connections.fetch_sub(1, Ordering::SeqCst);
            let _ = respond(&mut conn, 503, "text/plain", b"too many connections");
            continue;
        }
        let (shared, keys) = (shared.clone(), keys.clone());
        let spawned = thread::Builder::new()
            .name("web client".into())
            .spawn(move || {
                answer(conn, &shared, &keys);
                shared.connections.fetch_sub(1, Ordering::SeqCst);
            });
        if spawned.is_err() {
            crate::warn!("the browser view could not start a connection's thread");
        }
    }
}

/// A request's method, path, query and `Authorization` header, read and parsed (httparse);
/// None for anything that is not one.
fn read_request(conn: &mut TcpStream) -> Option<(String, String, String, Option<String>)> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut buf).ok().filter(|&n| n > 0)?;
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return None;
        }
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    req.parse(&head).ok()?;
    let (method, target) = (req.method?.to_string(), req.path?.to_string());
    let auth = req
        .headers
        .iter()
        .find(|h| h.name.eq_ignore_ascii_case("authorization"))
        .and_then(|h| std::str::from_utf8(h.value).ok())
        .map(|v| v.trim_start_matches("Bearer ").trim().to_string());
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p.to_string(), q.to_string()),
        None => (target, String::new()),
    };
    Some((method, path, query, auth))
}

/// Writes a whole response and closes.
fn respond(conn: &mut TcpStream, code: u16, kind: &str, body: &[u8]) -> std::io::Result<()> {
    let reason = match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        404 => "Not Found",
        _ => "Service Unavailable",
    };
    write!(
        conn,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
        body.len()
    )?;
    conn.write_all(body)?;
    conn.flush()
}

/// Answers one connection's request.
fn answer(mut conn: TcpStream, shared: &Shared, keys: &Sender<u8>) {
    let Some((method, path, query, auth)) = read_request(&mut conn) else {
        let _ = respond(&mut conn, 400, "text/plain", b"not an HTTP request");
        return;
    };
    let param = |name: &str| {
        query
            .split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.to_string())
    };
    if let Some(token) = &shared.token {
        if param("token").or(auth).as_deref() != Some(token.as_str()) {
            let _ = respond(
                &mut conn,
                401,
                "text/plain",
                b"a token is needed: add ?token=... to the address",
            );
            return;
        }
    }
    let plain = "text/plain; charset=utf-8";
    let _ = match (method.as_str(), path.as_str()) {
        ("GET", "/" | "/index.html") => {
            respond(&mut conn, 200, "text/html; charset=utf-8", PAGE.as_bytes())
        }
        ("GET", "/stats") => {
            let stats = shared.stats.lock().map(|s| s.clone()).unwrap_or_default();
            respond(&mut conn, 200, "application/json", stats.as_bytes())
        }
        ("GET", "/frame.jpg") => {
            let jpeg = shared.latest.jpeg.lock().map(|l| l.1.clone());
            match jpeg {
                Ok(j) if !j.is_empty() => respond(&mut conn, 200, "image/jpeg", &j),
                _ => respond(&mut conn, 503, plain, b"no frame yet"),
            }
        }
        ("GET", "/stream.mjpg") => {
            if shared.clients.fetch_add(1, Ordering::SeqCst) >= MAX_CLIENTS {
                shared.clients.fetch_sub(1, Ordering::SeqCst);
                let why = format!("{MAX_CLIENTS} viewers already watch; try again later");
                let _ = respond(&mut conn, 503, plain, why.as_bytes());
                return;
            }
            stream_to(&mut conn, shared);
            shared.clients.fetch_sub(1, Ordering::SeqCst);
            Ok(())
        }
        ("POST", "/control") => match param("key").and_then(|k| decode_key(&k)) {
            Some(key) => {
                let _ = keys.send(key);
                respond(&mut conn, 200, plain, b"ok")
            }
            None => respond(&mut conn, 400, plain, b"key: one of 1-9, p, b, B, space"),
        },
        _ => respond(&mut conn, 404, plain, b"not here"),
    };
}

/// A key from the page (`%20` is space), if it is one the page may send.
fn decode_key(k: &str) -> Option<u8> {
    let k = match k {
        "%20" | "+" | "space" => " ",
        k => k,
    };
    match k.as_bytes() {
        [b] if KEYS.contains(b) => Some(*b),
        _ => None,
    }
}

/// Sends the newest JPEG each time there is a newer one, until the client goes or the run
/// stops.
fn stream_to(out: &mut TcpStream, shared: &Shared) {
    let head = "HTTP/1.1 200 OK\r\nContent-Type: multipart/x-mixed-replace; boundary=frame\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n";
    // Said at once, not with the first frame: the viewer knows it is being served.
    if out
        .write_all(head.as_bytes())
        .and_then(|_| out.flush())
        .is_err()
    {
        return;
    }
    let mut seen = 0;
    while !shared.stop.load(Ordering::SeqCst) {
        let jpeg = {
            let Ok(latest) = shared.latest.jpeg.lock() else {
                return;
            };
            let Ok((latest, _)) = shared
                .latest
                .changed
                .wait_timeout_while(latest, POLL, |l| l.0 == seen)
            else {
                return;
            };
            if latest.0 == seen {
                continue;
            }
            seen = latest.0;
            latest.1.clone()
        };
        let part = format!(
            "--frame\r\nContent-Type: image/jpeg\r\nContent-Length: {}\r\n\r\n",
            jpeg.len()
        );
        let sent = out
            .write_all(part.as_bytes())
            .and_then(|_| out.write_all(&jpeg))
            .and_then(|_| out.write_all(b"\r\n"))
            .and_then(|_| out.flush());
        if sent.is_err() {
            return; // the client went away
        }
    }
}

/// The page: the stream, the figures (polled twice a second), the buttons.
const PAGE: &str = r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>framepipe</title>
<style>
body{margin:0;background:#111;color:#eee;font:14px system-ui,sans-serif;display:flex;gap:16px;padding:12px}
#view{max-width:75vw;max-height:92vh;background:#000}
#side{min-width:260px}
button{margin:2px;padding:6px 10px;background:#333;color:#eee;border:1px solid #555;border-radius:4px;cursor:pointer}
button:hover{background:#444}
pre{white-space:pre-wrap;font-size:12px;color:#ff5}
h1{font-size:16px;margin:0 0 8px}
</style></head>
<body>
<img id="view" alt="the processed video">
<div id="side">
<h1>framepipe</h1>
<div id="fps">-</div>
<pre id="lines"></pre>
<div id="presets"></div>
<div>
<button data-key=" ">pause / resume</button>
<button data-key="p">page-locked / pageable</button>
<button data-key="b">bands ÷2</button>
<button data-key="B">bands ×2</button>
</div>
</div>
<script>
const token = new URLSearchParams(location.search).get("token");
const q = (path, more) => path + "?" + new URLSearchParams(Object.assign(token ? {token} : {}, more || {})).toString();
document.getElementById("view").src = q("stream.mjpg");
const presets = ["copy","invert","gray","gain:1.5,10","blur:5","gauss:2","sobel","sharpen:1","median3"];
const box = document.getElementById("presets");
presets.forEach((name, i) => {
  const b = document.createElement("button");
  b.textContent = (i + 1) + " " + name; b.dataset.key = String(i + 1); b.id = "preset-" + (i + 1);
  box.appendChild(b);
});
document.querySelectorAll("button[data-key]").forEach(b =>
  b.addEventListener("click", () => fetch(q("control", {key: b.dataset.key}), {method: "POST"})));
async function poll() {
  try {
    const s = await (await fetch(q("stats"))).json();
    document.getElementById("fps").textContent = (s.fps || 0).toFixed(1) + " fps, " + (s.frames || 0) + " frames, " + (s.dropped || 0) + " dropped" + (s.paused ? ", PAUSED" : "");
    document.getElementById("lines").textContent = (s.lines || []).join("\n");
  } catch (e) {}
  setTimeout(poll, 500);
}
poll();
</script>
</body></html>
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binds_to_loopback_unless_told() {
        assert_eq!(bind_address("8080").unwrap().to_string(), "127.0.0.1:8080");
        assert_eq!(
            bind_address("0.0.0.0:9000").unwrap().to_string(),
            "0.0.0.0:9000"
        );
        assert!(bind_address("nonsense").is_err());
        assert_eq!(decode_key("%20"), Some(b' '));
        assert_eq!(decode_key("3"), Some(b'3'));
        assert_eq!(decode_key("q"), None, "quitting is not a button");
    }
}
