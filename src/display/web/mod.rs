//! The browser view (`--serve [ADDR:]PORT`): a page that shows the processed video live
//! (Motion JPEG over HTTP, `multipart/x-mixed-replace`), its figures in plain words (the
//! overlay's in a tooltip), the last frames' timeline (`/timeline.svg`), and the run's
//! controls (filter presets with the running one marked, a chain typed as `--filter` takes
//! it, pause, save frame, stop; page-locked/pageable and bands on the CUDA backend only). With
//! several inputs it is handed the mosaic's labelled pictures, as the window is, passes a
//! click on the picture to the mosaic as the window does (a double click shows a tile's
//! input alone, `Ask::Pick`), and lists each input with its figures (`/stats`' `inputs`,
//! taken with `/metrics`'). Who is
//! answered is `access`; the HTTP server is `server` (hyper); the page is `page.html`; what
//! an orchestrator asks (`/healthz`, `/metrics`) is `health`; what programs ask (`/api/inputs`,
//! the recordings found by time and played, `/api/recordings`, the latest events with
//! their snapshots and clips, `/api/events`) is `api`, and the page draws a line of each
//! camera's recordings and plays them, and lists the latest events. The start line is the page's
//! whole address, token included, to open as it is; the figures read 0 fps while paused.
//!
//! Invariants: the pipeline never waits for a browser: the sink hands the newest frame to
//! the encoder thread only when it is idle (at most `MAX_FPS` a second while a client
//! watches, one every `UNWATCHED` otherwise, so that `/frame.jpg` is never older), and each viewer is sent the newest JPEG when its connection takes it,
//! so a slow or stalled viewer gets fewer frames and slows nothing else; at most
//! `MAX_CLIENTS` streams at once (more are refused with 503); every request passes
//! `access`'s checks first (host, token, origin; `/healthz` the host only, and it names no
//! input); nothing but the page, its stream, one frame, the figures, the timeline, the
//! controls, `/healthz`, `/metrics` and the API (files only as the recordings' index lists
//! them, or as the run's own events name them) is served (404); a chain from the page names no file
//! (`kernel:` is refused: the server's files are named on its command line only); an
//! input's name reaches the page without an address's user and password, and the page
//! shows it as text, never as markup; the server binds to 127.0.0.1
//! unless an address is given; it answers only once it has been given everything it
//! answers from (`bind`, then `start`: a request in between waits in the socket's
//! backlog), and a wall's input changes asked before its inputs are open are told to come
//! back (`taking_inputs`); `finish` stops the server and the encoder within a poll
//! (`POLL`).

pub mod access;
pub mod api;
pub mod health;
pub mod live;
pub(crate) mod reply;
mod server;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{unbounded, Receiver};

pub use access::{bind_address, Settings, TokenFrom};

use super::Display;
use super::{Flow, Frame, Knobs};
use crate::frame::FrameSize;
use crate::stats::Live;

/// The most frames a second sent to browsers.
pub const MAX_FPS: f64 = 25.0;
/// How often the newest frame is encoded while nobody watches the stream (`/frame.jpg`'s
/// picture is at most this old).
const UNWATCHED: Duration = Duration::from_millis(500);
/// The most browsers watching the stream at once.
pub const MAX_CLIENTS: usize = 32;
/// How often the encoder looks at the stop flag.
const POLL: Duration = Duration::from_millis(100);
/// How often the figures of `/healthz` and `/metrics` are taken.
const SNAPSHOT_EVERY: Duration = Duration::from_millis(250);
/// How often the timeline is drawn for the page.
const DRAW_EVERY: Duration = Duration::from_secs(1);

/// The keys the page's buttons send (the window's, `display::pipeline_key`).
const KEYS: &[u8] = b"123456789pbB ";
/// The longest filter chain the page's box may send.
const MAX_CHAIN: usize = 512;

/// What the page asks of the run.
pub(crate) enum Ask {
    /// A window key (`KEYS`).
    Key(u8),
    /// A filter chain typed in the page's box, checked as `--filter` checks it.
    Chain(crate::filter::Chain),
    /// Stop the run, as q does.
    Stop,
    /// A click on the picture at (x, y), the picture's own pixels: the mosaic selects the
    /// tile there, and a double click shows its input alone at its own size, and back (as
    /// a click in the window does).
    Pick { x: i32, y: i32, double: bool },
}

/// The largest coordinate a pick may name (past any picture's side).
const MAX_PICK: i32 = 1 << 16;

/// Refuses a chain that changes the frames' size or turns them: the outputs, the window
/// and the mosaic opened at the run's size, which a chain typed while it runs can't change
/// (a flip or a half turn, which keep every size, are taken).
fn refuse_resizing(chain: &crate::filter::Chain) -> Result<(), Refused> {
    use crate::frame::FrameSize;
    let kept = |s: FrameSize| chain.output_size(s) == Ok(s);
    match kept(FrameSize::new(1234, 566)) && kept(FrameSize::new(566, 1234)) {
        true => Ok(()),
        false => Err(Refused::Resizing(chain.to_string())),
    }
}

/// Why a control request is refused (400, the message as the body).
#[derive(Debug, thiserror::Error)]
enum Refused {
    /// A chain longer than the view takes.
    #[error("the chain is longer than {MAX_CHAIN} characters")]
    TooLong,
    /// A chain naming a kernel file.
    #[error("a kernel file is loaded from the command line only (--filter kernel:FILE)")]
    Kernel,
    /// A chain that doesn't parse.
    #[error(transparent)]
    Chain(#[from] crate::filter::FilterError),
    /// A chain that changes the frames' size.
    #[error("the chain {0} changes the frames' size, which the outputs opened at: give it with --filter when the run starts")]
    Resizing(String),
    /// A key the page has no button for.
    #[error("key: one of 1-9, p, b, B, space")]
    Key,
    /// A pick outside the picture.
    #[error("pick: X,Y in the picture's pixels, 0 to {MAX_PICK}")]
    Pick,
}

/// What a control request (`POST /control?key=K`, `/chain?chain=C`, `/stop`) asks, or why it
/// is refused (400). A chain with a kernel file is refused: the page may not name files on
/// the server (kernels come from the command line).
fn ask_of(path: &str, query: &str) -> Result<Ask, Refused> {
    match path {
        "/stop" => Ok(Ask::Stop),
        "/chain" => {
            let text = access::query_param(query, "chain").unwrap_or_default();
            if text.len() > MAX_CHAIN {
                return Err(Refused::TooLong);
            }
            let kernel = text
                .split(',')
                .any(|f| f.trim().to_ascii_lowercase().starts_with("kernel"));
            if kernel {
                return Err(Refused::Kernel);
            }
            let chain: crate::filter::Chain = text.parse()?;
            refuse_resizing(&chain)?;
            Ok(Ask::Chain(chain))
        }
        _ if access::query_param(query, "pick").is_some() => pick_of(query),
        _ => access::query_param(query, "key")
            .and_then(|k| decode_key(&k))
            .map(Ask::Key)
            .ok_or(Refused::Key),
    }
}

/// `pick=X,Y` (the picture's pixels) and `double=1` for a double click.
fn pick_of(query: &str) -> Result<Ask, Refused> {
    let pick = access::query_param(query, "pick").unwrap_or_default();
    let coordinate = |v: &str| {
        v.trim()
            .parse::<i32>()
            .ok()
            .filter(|v| (0..MAX_PICK).contains(v))
    };
    let (x, y) = pick
        .split_once(',')
        .and_then(|(x, y)| Some((coordinate(x)?, coordinate(y)?)))
        .ok_or(Refused::Pick)?;
    let double = access::query_param(query, "double").as_deref() == Some("1");
    Ok(Ask::Pick { x, y, double })
}

/// The page: the stream, the figures (polled twice a second), the buttons.
const PAGE: &str = include_str!("page.html");

/// The newest JPEG, numbered.
type Jpeg = (u64, Arc<Vec<u8>>);

/// What the server and the encoder share with the sink.
pub(crate) struct Shared {
    /// The newest JPEG; viewers wait on it.
    latest: tokio::sync::watch::Sender<Jpeg>,
    /// A BGR frame for the encoder (None: it is idle).
    mailbox: Mutex<Option<(FrameSize, Vec<u8>)>>,
    mail: Condvar,
    /// The overlay's figures, as JSON.
    stats: Mutex<String>,
    /// The figures `/healthz` and `/metrics` are made from.
    snapshot: Mutex<health::Snapshot>,
    /// The recent frames' timeline, as SVG (empty until one is drawn).
    timeline: Mutex<String>,
    clients: AtomicUsize,
    stop: AtomicBool,
    /// Ends the server.
    shutdown: tokio::sync::Notify,
    access: Settings,
    /// The recordings' indexes (`/api/recordings`), once the recordings started.
    recordings: std::sync::OnceLock<Vec<Arc<crate::record::index::Index>>>,
    /// The inputs recorded, by name.
    recorded: std::sync::OnceLock<Vec<String>>,
    /// The latest events (`/api/events`), where the run makes any.
    events: std::sync::OnceLock<Arc<crate::events::recent::Recent>>,
    /// WebRTC (`/whep/…`), once the view was given its inputs' feeds.
    live: std::sync::OnceLock<live::Live>,
    /// Each input's source as given (`/api/inputs` redacts it), by the pipeline's number.
    sources: Mutex<Vec<String>>,
    /// The run's inputs changed while it goes (`POST`/`DELETE /api/inputs`), where it takes
    /// them.
    control: std::sync::OnceLock<Arc<dyn api::Inputs>>,
    /// The run will take inputs once they are open (`taking_inputs`): until `control` is
    /// there, a change is told to come back, not that the run takes none.
    will_take_inputs: AtomicBool,
}

/// Tells the browser view of inputs that join the run while it goes (`Web::joined`).
#[derive(Clone)]
pub struct Joined(Arc<Shared>);

impl Joined {
    /// Input number `at` joined, reading `source`.
    pub fn source(&self, at: usize, source: &str) {
        if let Ok(mut s) = self.0.sources.lock() {
            if s.len() <= at {
                s.resize(at + 1, String::new());
            }
            s[at] = source.to_string();
        }
    }
}

/// The browser view's sink (module doc).
pub struct Web {
    shared: Arc<Shared>,
    keys: Receiver<Ask>,
    knobs: Knobs,
    last_handoff: Option<Instant>,
    address: String,
    threads: Vec<thread::JoinHandle<()>>,
    /// The socket and the keys' sender, until the server starts (`start`).
    unstarted: Option<(TcpListener, crossbeam_channel::Sender<Ask>)>,
    /// A spare buffer for the next frame handed to the encoder.
    spare: Vec<u8>,
    /// Each input's name, by the pipeline's input number, and those that failed to open.
    labels: (Vec<String>, Vec<String>),
    /// When the figures of `/healthz` and `/metrics` were last taken.
    snapped: Option<Instant>,
    /// Each input's figures for the page, taken with the snapshot (`health::inputs_json`).
    inputs: String,
    /// When the timeline was last drawn.
    drawn: Option<Instant>,
    /// Each preset as the backend names its chain (`filter::PRESETS`, parsed), to mark the
    /// one running.
    presets: Vec<String>,
}

impl Web {
    /// Serves the view as `settings` say. It opens before the run knows its pipeline's
    /// settings: until `with_knobs` gives them, the controls act on one band of a frame
    /// with no rows, page-locked.
    pub fn open(settings: Settings) -> Result<Self> {
        Self::bind(settings)?.start()
    }

    /// The view bound to its address as `settings` say, not answering yet: what it is
    /// given before `start` (`with_events`, `with_recordings`, `with_live`, `opening`) is
    /// there from its first answer (a request in between would be told the run has none).
    pub fn bind(settings: Settings) -> Result<Self> {
        let addr = settings.addr;
        let server = TcpListener::bind(addr)
            .map_err(|e| anyhow::anyhow!("--serve {addr}: can't listen there ({e})"))?;
        server.set_nonblocking(true)?;
        let address = server
            .local_addr()
            .map_or(addr.to_string(), |a| a.to_string());
        server::raise_open_files_limit();
        let shared = Arc::new(Shared {
            latest: tokio::sync::watch::Sender::new((0, Arc::new(Vec::new()))),
            mailbox: Mutex::new(None),
            mail: Condvar::new(),
            stats: Mutex::new("{}".into()),
            snapshot: Mutex::new(health::Snapshot::default()),
            timeline: Mutex::new(String::new()),
            clients: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            shutdown: tokio::sync::Notify::new(),
            access: settings,
            recordings: std::sync::OnceLock::new(),
            recorded: std::sync::OnceLock::new(),
            events: std::sync::OnceLock::new(),
            live: std::sync::OnceLock::new(),
            sources: Mutex::new(Vec::new()),
            control: std::sync::OnceLock::new(),
            will_take_inputs: AtomicBool::new(false),
        });
        let (key_tx, keys) = unbounded();
        Ok(Self {
            shared,
            keys,
            knobs: Knobs {
                pageable: false,
                bands: 1,
                height: 0,
            },
            last_handoff: None,
            address,
            threads: Vec::new(),
            unstarted: Some((server, key_tx)),
            spare: Vec::new(),
            labels: (Vec::new(), Vec::new()),
            snapped: None,
            inputs: "[]".to_string(),
            drawn: None,
            presets: crate::filter::PRESETS
                .iter()
                .map(|p| {
                    p.parse::<crate::filter::Chain>()
                        .map_or_else(|_| p.to_string(), |c| c.to_string())
                })
                .collect(),
        })
    }

    /// Starts answering (once): the server's and the encoder's threads, and the address
    /// said.
    pub fn start(mut self) -> Result<Self> {
        let Some((server, key_tx)) = self.unstarted.take() else {
            return Ok(self);
        };
        let serving = {
            let shared = self.shared.clone();
            thread::Builder::new()
                .name("web server".into())
                .spawn(move || server::run(server, shared, key_tx))?
        };
        let encoding = {
            let shared = self.shared.clone();
            thread::Builder::new()
                .name("web encoder".into())
                .spawn(move || encode_frames(&shared))?
        };
        self.threads = vec![serving, encoding];
        // The whole address, token included: the user opens it as it is (the token is in
        // this process's own log, which only its user reads), so it is not redacted.
        if crate::msg::enabled(crate::msg::Level::Normal) {
            crate::msg::stderr_as_is(format_args!(
                "framepipe: the browser view is at http://{}/{}\n",
                self.address,
                self.shared.access.page_query()
            ));
        }
        Ok(self)
    }

    /// Names the inputs in `/healthz` and `/metrics`: `labels` by the pipeline's input
    /// number, and those that `failed` to open at the start (down for good).
    pub fn with_inputs(mut self, labels: Vec<String>, failed: Vec<String>) -> Self {
        self.labels = (labels, failed);
        self
    }

    /// The view opened before the inputs are (`/healthz` answers while they open): the
    /// inputs `labels` names, each down until the run says otherwise.
    pub fn opening(self, labels: &[String]) -> Self {
        if let Ok(mut s) = self.shared.snapshot.lock() {
            *s = health::Snapshot::opening(labels);
        }
        self
    }

    /// WebRTC of the inputs (their names and, where they have packets, their feeds) and of
    /// the view's picture (`/whep/…`).
    pub fn with_live(self, inputs: Vec<(String, Option<Arc<live::feed::Feed>>)>) -> Result<Self> {
        let _ = self.shared.live.set(live::Live::start(inputs)?);
        Ok(self)
    }

    /// The latest events, for `/api/events` and the page's list.
    pub fn with_events(self, recent: Arc<crate::events::recent::Recent>) -> Self {
        let _ = self.shared.events.set(recent);
        self
    }

    /// The recordings' `indexes` and the inputs `recorded` (by name), for
    /// `/api/recordings`; each input's source, for `/api/inputs`.
    pub fn with_recordings(
        self,
        indexes: Vec<Arc<crate::record::index::Index>>,
        recorded: Vec<String>,
        sources: Vec<String>,
    ) -> Self {
        let _ = self.shared.recordings.set(indexes);
        let _ = self.shared.recorded.set(recorded);
        if let Ok(mut s) = self.shared.sources.lock() {
            *s = sources;
        }
        self
    }

    /// The run takes inputs while it goes, once its inputs are open (`with_control`).
    pub fn taking_inputs(self) -> Self {
        self.shared.will_take_inputs.store(true, Ordering::SeqCst);
        self
    }

    /// The run's inputs, changed through `/api/inputs` (`control`); an input that joins is
    /// said with `joined` (its name and source, numbered after the others).
    pub fn with_control(self, control: Arc<dyn api::Inputs>) -> Self {
        let _ = self.shared.control.set(control);
        self
    }

    /// A handle that tells the view of an input that joined the run: its source, by the
    /// pipeline's number.
    pub fn joined(&self) -> Joined {
        Joined(self.shared.clone())
    }

    /// The pipeline's settings the controls change, once the run knows them.
    pub fn with_knobs(mut self, knobs: Knobs) -> Self {
        self.knobs = knobs;
        self
    }

    /// Takes the figures of `/healthz` and `/metrics` from `live`, at most every
    /// `SNAPSHOT_EVERY` (the sink calls `status` for every frame).
    fn snap(&mut self, live: &Live) {
        if self.snapped.is_some_and(|t| t.elapsed() < SNAPSHOT_EVERY) {
            return;
        }
        self.snapped = Some(Instant::now());
        let snap = health::Snapshot::of(live, &self.labels.0, &self.labels.1);
        self.inputs = health::inputs_json(&snap).to_string();
        if let Ok(mut s) = self.shared.snapshot.lock() {
            *s = snap;
        }
    }

    /// Draws the recent frames' timeline for `/timeline.svg`, at most every `DRAW_EVERY`.
    fn draw(&mut self, live: &Live) {
        let Some(layout) = &live.timeline else { return };
        if self.drawn.is_some_and(|t| t.elapsed() < DRAW_EVERY) {
            return;
        }
        self.drawn = Some(Instant::now());
        let svg = crate::trace::layouts_svg(&[("the last frames", (**layout).clone())]);
        if let Ok(mut t) = self.shared.timeline.lock() {
            *t = svg;
        }
    }

    /// The pipeline's answer to what the page asked since the last frame (one a frame).
    fn pressed(&mut self) -> Result<Flow> {
        while let Ok(ask) = self.keys.try_recv() {
            let flow = match ask {
                Ask::Key(key) => super::pipeline_key(key, &mut self.knobs)?,
                Ask::Chain(chain) => Some(Flow::Control(crate::backend::Control::Chain(chain))),
                Ask::Pick { x, y, double } => Some(Flow::Pick { x, y, double }),
                Ask::Stop => {
                    crate::info!("the browser view asked to stop");
                    Some(Flow::Quit)
                }
            };
            if let Some(flow) = flow {
                return Ok(flow);
            }
        }
        Ok(Flow::Continue)
    }
}

impl Drop for Web {
    /// A view dropped unfinished (the run stopped while its inputs opened) stops its server
    /// and encoder all the same.
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(live) = self.shared.live.get() {
            live.stop();
        }
        self.shared.shutdown.notify_one();
        self.shared.mail.notify_all();
    }
}

impl Display for Web {
    fn verb(&self) -> &'static str {
        "served"
    }
    fn describe(&self) -> String {
        format!("the browser view at http://{}/", self.address)
    }
    fn show(&mut self, frame: &Frame) -> Result<Flow> {
        let (size, bgr) = (frame.size(), super::bgr(frame, "the browser view")?);
        if let Some(live) = self.shared.live.get() {
            live.show(size, bgr);
        }
        let since = self.last_handoff.map(|t| t.elapsed());
        let due = since.is_none_or(|t| t.as_secs_f64() >= 1.0 / MAX_FPS);
        let watched = self.shared.clients.load(Ordering::SeqCst) > 0;
        // Unwatched, a picture every `UNWATCHED` all the same: `/frame.jpg` stays current.
        let refresh = since.is_none_or(|t| t >= UNWATCHED);
        if (due && watched) || refresh {
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
    fn wants_timeline(&self) -> bool {
        true
    }
    fn status(&mut self, live: &Live) {
        self.snap(live);
        self.draw(live);
        // The running chain, as the backend names it ("…; filter gauss:13,2; …").
        let chain = live
            .backend
            .split("; ")
            .find_map(|part| part.strip_prefix("filter "))
            .unwrap_or_default();
        let preset = self.presets.iter().position(|p| p == chain).map(|i| i + 1);
        let json = serde_json::json!({
            // Paused, no frame comes: 0, not the rate before the pause.
            "fps": if live.paused { 0.0 } else { live.fps },
            "frames": live.frames,
            "dropped": live.dropped,
            "paused": live.paused,
            "chain": chain,
            "preset": preset,
            // Page-locking and bands are the GPU pipeline's: the CPU backend has neither.
            "gpu": live.backend.starts_with("cuda"),
            "ms": {
                "capture": live.capture_ms,
                "process": live.latency_ms,
                "output": live.output_ms,
            },
            // The overlay's figures, for those who want the words of the trade (a tooltip).
            // The window's key help is not the page's (it has buttons).
            "lines": live
                .lines()
                .into_iter()
                .filter(|l| !l.starts_with("h overlay"))
                .collect::<Vec<_>>(),
            "clients": self.shared.clients.load(Ordering::SeqCst),
        });
        // Each input's figures, as last taken for `/metrics`, are spliced in as serialized
        // then (a hundred cameras' rows are not built again for every frame).
        let mut stats = json.to_string();
        stats.pop(); // the object's closing brace
        stats.push_str(",\"inputs\":");
        stats.push_str(&self.inputs);
        stats.push('}');
        if let Ok(mut s) = self.shared.stats.lock() {
            *s = stats;
        }
    }
    fn idle(&mut self) -> Result<Flow> {
        self.pressed()
    }
    fn finish(&mut self) -> Result<()> {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(live) = self.shared.live.get() {
            live.stop();
        }
        self.shared.shutdown.notify_one();
        self.shared.mail.notify_all();
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

/// The encoder thread: JPEG of each frame the sink hands over, published as the newest
/// (libavcodec's encoder, made again when the picture's size changes).
fn encode_frames(shared: &Shared) {
    use crate::output::picture::{ImageFormat, PictureEncoder};
    let mut encoder: Option<PictureEncoder> = None;
    // A size no encoder could be made for (said once).
    let mut refused: Option<FrameSize> = None;
    while !shared.stop.load(Ordering::SeqCst) {
        let Ok(mailbox) = shared.mailbox.lock() else {
            return;
        };
        let Ok((mut mailbox, _)) = shared.mail.wait_timeout(mailbox, POLL) else {
            return;
        };
        let Some((size, bytes)) = mailbox.take() else {
            continue;
        };
        drop(mailbox);
        let made = encoder.as_ref().map(PictureEncoder::size);
        if made != Some(size) && refused != Some(size) {
            encoder = PictureEncoder::new(ImageFormat::Jpeg, size)
                .map_err(|e| {
                    crate::warn!("--serve: {e:#}; the view shows no picture of this size");
                    refused = Some(size);
                })
                .ok();
        }
        if let Some(Ok(jpeg)) = encoder.as_mut().map(|e| e.encode(&bytes)) {
            let jpeg = Arc::new(jpeg);
            shared
                .latest
                .send_modify(|latest| *latest = (latest.0 + 1, jpeg));
        }
    }
}

/// A key from the page (already percent-decoded: `space` or `+` is space too), if it is one
/// the page may send.
fn decode_key(k: &str) -> Option<u8> {
    let k = match k {
        "+" | "space" => " ",
        k => k,
    };
    match k.as_bytes() {
        [b] if KEYS.contains(b) => Some(*b),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pick_names_a_point_of_the_picture() {
        let Ok(Ask::Pick { x, y, double }) = ask_of("/control", "pick=12%2C34&double=1") else {
            panic!("a pick was refused");
        };
        assert_eq!((x, y, double), (12, 34, true));
        for bad in ["pick=12", "pick=-1,3", "pick=a,b", "pick=70000,1"] {
            assert!(ask_of("/control", bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_chain_that_resizes_the_frames_is_refused() {
        for resizing in [
            "scale:1280:720",
            "pad:32768:32768",
            "scale:320:180",
            "transpose",
            "crop:10:10",
        ] {
            let said = ask_of("/chain", &format!("chain={resizing}"));
            assert!(
                said.is_err_and(|e| e.to_string().contains("changes the frames' size")),
                "{resizing}"
            );
        }
        for kept in ["gray", "hflip,gauss:2", "vflip", "gray,gain:1.5,10"] {
            assert!(ask_of("/chain", &format!("chain={kept}")).is_ok(), "{kept}");
        }
    }

    #[test]
    fn only_the_pages_keys_are_taken() {
        assert_eq!(decode_key(" "), Some(b' '));
        assert_eq!(decode_key("3"), Some(b'3'));
        assert_eq!(decode_key("q"), None, "quitting is not a button");
    }
}
