//! `--rtsp-serve [ADDR:]PORT`: an RTSP server (RFC 2326) of each input's own packets, as
//! go2rtc and MediaMTX serve a camera: `rtsp://host:port/NAME` (the input's name as shown,
//! `names`) or `rtsp://host:port/N` (its number), its video and audio as they came (no
//! decoding, no encoding), to any number of players at once, over TCP (interleaved) or UDP.
//!
//! The processed picture of one input (where a filter changes it) and the mosaic of several
//! are encoded once, by a stream output the plan adds, which publishes them to this server
//! from loopback with the run's secret (`/picture`, `/mosaic`: RTSP's ANNOUNCE and RECORD,
//! as to MediaMTX); their RTP is relayed to the players as it comes.
//!
//! The input hands its packets to a tap (`rtp::Tap`) whose thread makes RTP of them; each
//! player's connection is a thread (`session`) that answers OPTIONS, DESCRIBE, SETUP, PLAY,
//! GET_PARAMETER and TEARDOWN (and the publisher's ANNOUNCE and RECORD), and is sent the RTP
//! of the path it plays.
//!
//! Invariants: nothing here holds an input (a tap's queue drops what it can't take, a
//! player's queue drops what its connection can't take, counted); a player starts at a
//! video keyframe and gets every packet after it while its connection keeps up; the server
//! answers only with the token where one is set (`?token=`, `Authorization: Bearer`, or
//! Basic credentials whose password is the token: `rtsp://any:TOKEN@host/…`), and listens
//! beyond loopback only with a token or `--serve-insecure` (the plan checks); only
//! framepipe's own encoder, which gives the run's secret (`publish_key`), publishes; at most
//! `MAX_CONNECTIONS` connections and `MAX_PER_ADDRESS` a client address, each request head
//! at most `MAX_HEAD` bytes and `HEAD_WITHIN` to arrive, a connection silent past
//! `HEAD_WITHIN` (playing or publishing: `SESSION_TIMEOUT`) closed; a stop ends the server
//! and every connection within `TICK`.

mod rtp;
mod session;

use std::net::{SocketAddr, TcpListener, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use crossbeam_channel::Sender;

pub use rtp::Tap;

/// Connections served at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 64;
/// The longest request head (request line and headers).
pub const MAX_HEAD: usize = 8192;
/// How long a request head may take to arrive once begun.
pub const HEAD_WITHIN: Duration = Duration::from_secs(10);
/// How long a player or publisher may send nothing (its session's announced 60 s, and a
/// margin).
pub const SESSION_TIMEOUT: Duration = Duration::from_secs(75);
/// Connections one client address may hold at once.
pub const MAX_PER_ADDRESS: usize = 16;
/// How often the server and its connections look at the stop flag.
pub const TICK: Duration = Duration::from_millis(100);
/// Interleaved packets a TCP player's queue holds (about 2 s of 1080p30).
const PLAYER_QUEUE: usize = 1024;

/// What `--rtsp-serve` asks for, checked by the plan.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The token every request must carry, if any.
    pub token: Option<String>,
    /// The secret framepipe's own publisher gives (`?publish_key=`).
    pub publish_key: String,
}

/// A new secret for framepipe's own publisher: 128 bits from the system's random source,
/// in hex.
pub fn new_publish_key() -> String {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    let read = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if read.is_err() {
        // No random source: the clock and the process, which no other local user knows
        // ahead of the run.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        bytes = (nanos ^ (u128::from(std::process::id()) << 64)).to_le_bytes();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One input as served: its SDP (once it opened) and its players.
pub struct Path {
    /// Its name, as the URL says it.
    pub name: String,
    /// Its number among the paths (the inputs first, in `--input` order).
    pub n: usize,
    /// Published by framepipe's own encoder (the mosaic, the processed picture), not an
    /// input's packets.
    pub published: bool,
    /// A publisher is on it.
    publisher: AtomicBool,
    sdp: Mutex<Option<String>>,
    players: Mutex<Vec<Arc<Player>>>,
}

impl Path {
    fn new(name: String, n: usize, published: bool) -> Self {
        Self {
            name,
            n,
            published,
            publisher: AtomicBool::new(false),
            sdp: Mutex::new(None),
            players: Mutex::new(Vec::new()),
        }
    }

    /// A publisher takes the path with `sdp`; false where one already has it.
    fn publish(&self, sdp: &str) -> bool {
        if self.publisher.swap(true, Ordering::SeqCst) {
            return false;
        }
        self.describe(Some(sdp.to_string()));
        true
    }

    /// Its publisher went away.
    fn unpublish(&self) {
        self.describe(None);
        self.publisher.store(false, Ordering::SeqCst);
    }

    /// Its SDP: None while its input is not open.
    pub fn sdp(&self) -> Option<String> {
        self.sdp.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The input (re)opened with `sdp`, or went away (None).
    fn describe(&self, sdp: Option<String>) {
        *self.sdp.lock().unwrap_or_else(|e| e.into_inner()) = sdp;
    }

    /// A video keyframe comes next: every player that plays starts with it.
    fn keyframe(&self) {
        for p in self
            .players
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            if p.playing.load(Ordering::SeqCst) {
                p.started.store(true, Ordering::SeqCst);
            }
        }
    }

    /// One RTP (or, where `rtcp`, RTCP) packet of `track` to every player that started.
    fn send(&self, track: usize, rtcp: bool, bytes: &[u8]) {
        for p in self
            .players
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            if p.started.load(Ordering::SeqCst) {
                p.send(track, rtcp, bytes);
            }
        }
    }

    fn add(&self, player: Arc<Player>) {
        self.players
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(player);
    }

    fn remove(&self, id: u64) {
        self.players
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|p| p.id != id);
    }
}

/// Where a track's packets go to a player.
#[derive(Clone, Copy, Debug)]
enum Route {
    /// Interleaved in its RTSP connection, on channel `rtp` (RTCP on `rtp + 1`).
    Tcp { rtp: u8 },
    /// Sent over UDP to these ports.
    Udp { rtp: SocketAddr, rtcp: SocketAddr },
}

/// One player of a path (a SETUP'd session).
pub struct Player {
    id: u64,
    playing: AtomicBool,
    started: AtomicBool,
    routes: Mutex<Vec<Option<Route>>>,
    tcp: Sender<Vec<u8>>,
    udp: Arc<(UdpSocket, UdpSocket)>,
    /// Packets its connection could not take.
    dropped: AtomicU64,
}

impl Player {
    fn send(&self, track: usize, rtcp: bool, bytes: &[u8]) {
        let route = self
            .routes
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(track)
            .copied()
            .flatten();
        match route {
            Some(Route::Tcp { rtp }) => {
                let mut frame = Vec::with_capacity(bytes.len() + 4);
                frame.push(b'$');
                frame.push(rtp + u8::from(rtcp));
                frame.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                frame.extend_from_slice(bytes);
                if self.tcp.try_send(frame).is_err() {
                    self.dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
            Some(Route::Udp { rtp, rtcp: to_rtcp }) => {
                let (socket, to) = match rtcp {
                    true => (&self.udp.1, to_rtcp),
                    false => (&self.udp.0, rtp),
                };
                let _ = socket.send_to(bytes, to);
            }
            None => {}
        }
    }
}

/// The running server (module doc).
pub struct Server {
    paths: Arc<Vec<Arc<Path>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
    addr: SocketAddr,
}

impl Server {
    /// Listens on `settings.addr` for the inputs called `names` (in `--input` order), and
    /// the paths framepipe's own encoder publishes (`published`: the mosaic, the picture).
    pub fn start(settings: &Settings, names: &[String], published: &[&str]) -> Result<Self> {
        let listener = TcpListener::bind(settings.addr)
            .with_context(|| format!("--rtsp-serve {}: can't listen", settings.addr))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let udp_at = SocketAddr::new(addr.ip(), 0);
        let udp = Arc::new((UdpSocket::bind(udp_at)?, UdpSocket::bind(udp_at)?));
        let all = names
            .iter()
            .map(|n| (n.as_str(), false))
            .chain(published.iter().map(|n| (*n, true)));
        let paths: Arc<Vec<Arc<Path>>> = Arc::new(
            all.enumerate()
                .map(|(n, (name, published))| Arc::new(Path::new(name.to_string(), n, published)))
                .collect(),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let shared = session::Shared {
            paths: paths.clone(),
            token: settings.token.clone(),
            publish_key: settings.publish_key.clone(),
            by_address: Arc::default(),
            udp,
            stop: stop.clone(),
            connections: Arc::new(AtomicUsize::new(0)),
        };
        let thread = std::thread::Builder::new()
            .name("rtsp server".into())
            .spawn(move || accept(listener, shared))?;
        for p in paths.iter() {
            let what = match p.published {
                true => format!("the {}", p.name),
                false => format!("input {}", p.n),
            };
            crate::info!(
                "rtsp: {what} at rtsp://{addr}/{}",
                session::url_path(&p.name)
            );
        }
        Ok(Self {
            paths,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The tap input `at` hands its packets to.
    pub fn tap(&self, at: usize) -> Result<Arc<Tap>> {
        let path = self
            .paths
            .get(at)
            .context("an input the RTSP server does not serve")?;
        Tap::start(path.clone())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Counts a connection of `ip`: false where it holds `MAX_PER_ADDRESS` already.
fn take_place(shared: &session::Shared, ip: std::net::IpAddr) -> bool {
    let mut by = shared.by_address.lock().unwrap_or_else(|e| e.into_inner());
    let n = by.entry(ip).or_default();
    if *n >= MAX_PER_ADDRESS {
        return false;
    }
    *n += 1;
    true
}

/// A connection of `ip` ended.
fn leave_place(shared: &session::Shared, ip: std::net::IpAddr) {
    let mut by = shared.by_address.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = by.get_mut(&ip) {
        *n = n.saturating_sub(1);
        if *n == 0 {
            by.remove(&ip);
        }
    }
}

/// The listener's loop: each connection a thread, up to `MAX_CONNECTIONS` in all and
/// `MAX_PER_ADDRESS` a client address.
fn accept(listener: TcpListener, shared: session::Shared) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, peer)) => {
                if shared.connections.load(Ordering::SeqCst) >= MAX_CONNECTIONS
                    || !take_place(&shared, peer.ip())
                {
                    continue;
                }
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let conn = shared.clone();
                let spawned = std::thread::Builder::new()
                    .name("rtsp player".into())
                    .spawn(move || {
                        session::serve(stream, peer, &conn);
                        conn.connections.fetch_sub(1, Ordering::SeqCst);
                        leave_place(&conn, peer.ip());
                    });
                if spawned.is_err() {
                    shared.connections.fetch_sub(1, Ordering::SeqCst);
                    leave_place(&shared, peer.ip());
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::thread::sleep(TICK / 4),
            Err(_) => std::thread::sleep(TICK / 4),
        }
    }
}
