//! A stream out: MPEG-TS over `udp://` or `srt://`, FLV to `rtmp://`, RTSP publishing, or an
//! HLS playlist with rolling segments, encoded and muxed by `av::AvFile` on a thread of its
//! own, with the input's audio copied where the stream's container carries its codec
//! (`output::audio`).
//!
//! Invariants: the pipeline never waits for the peer: a frame is handed over through a queue
//! of `QUEUE` frames and dropped (and counted) when the queue is full; a peer that goes away
//! (a failed write or connection) is connected to again with a growing pause
//! (`FIRST_WAIT` doubling to `LONGEST_WAIT`), the frames meanwhile dropped and counted, and
//! the run's other outputs go on, but a peer never reached in the whole run fails it (exit 1,
//! as ffmpeg's); frames still queued at the end count as dropped; an HLS output is files, not a peer: a write that fails
//! stops it (said, its frames dropped, the run's result an error), and it is never opened
//! again over its own segments; `finish` sends what is queued and ends the stream (the
//! muxer's trailer: an HLS playlist gets its end tag; a peer lost meanwhile is not connected
//! to again, and not said after the run's own lines) within `FINISH_WITHIN` of
//! `begin_finish`, after which a write still blocked is interrupted (FFmpeg's interrupt
//! callback) and the thread is left to end on its own. Several streams begin finishing
//! together, so that their waits overlap: a run's stop takes one `FINISH_WITHIN`, not one
//! each.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};

use super::av::AvFile;
use super::Frame;
use super::{Output, Taken};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// Frames waiting for the stream's thread at most.
pub const QUEUE: usize = 8;
/// The first pause before connecting again.
pub const FIRST_WAIT: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
pub const LONGEST_WAIT: Duration = Duration::from_secs(8);
/// How long `finish` waits for the stream to end, from `begin_finish`.
pub const FINISH_WITHIN: Duration = Duration::from_millis(450);
/// How long an interrupted write is given to return.
const INTERRUPTED_WITHIN: Duration = Duration::from_millis(150);

/// One frame for the stream's thread.
struct Queued {
    bytes: Vec<u8>,
    format: PixelFormat,
    size: FrameSize,
    at: Option<f64>,
}

/// What the stream's thread counts.
#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    dropped: AtomicU64,
    reconnects: AtomicU64,
    /// A connection was made at least once (a later one is a reconnect).
    connected: AtomicBool,
    /// The run is finishing the stream (`begin_finish`): a lost peer is not connected to
    /// again, and nothing more is said of it after the run's own lines.
    ending: AtomicBool,
}

/// A stream out (module doc).
pub struct Stream {
    url: String,
    what: String,
    tx: Option<Sender<Queued>>,
    /// Buffers coming back from the thread, to be filled again.
    spare: Receiver<Vec<u8>>,
    counts: Arc<Counts>,
    abort: Arc<AtomicBool>,
    thread: Option<thread::JoinHandle<()>>,
    /// The frames handed over and the ones dropped here (queue full).
    taken: u64,
    /// When the stream was told to finish (`begin_finish`).
    finishing: Option<Instant>,
    /// An HLS output's files, once its muxer opened (the thread sets it).
    hls: Arc<std::sync::OnceLock<Arc<super::hls::Files>>>,
    /// A network peer, not HLS files.
    network: bool,
}

impl Stream {
    /// Starts the stream to `url` (its container from its scheme, or `.m3u8`) of `size`
    /// frames at the rate `timing` says, encoded with `codec` and `encoding`. The first
    /// connection is made on the stream's thread at once, so that a peer that is slow to
    /// answer never holds up the run's start (a refusal is said, and the stream connects
    /// again).
    pub fn open(settings: super::av::Settings) -> Result<Self> {
        let abort = Arc::new(AtomicBool::new(false));
        let settings = super::av::Settings {
            quality: None,
            fragmented: false,
            ..settings
        };
        let (url, codec) = (settings.path.as_str(), settings.codec);
        let opener = {
            let (settings, abort) = (settings.clone(), abort.clone());
            move || AvFile::open_stream(&settings, abort.clone())
        };
        let (tx, rx) = bounded::<Queued>(QUEUE);
        let (spare_tx, spare) = bounded::<Vec<u8>>(QUEUE + 2);
        let counts = Arc::new(Counts::default());
        let hls = Arc::new(std::sync::OnceLock::new());
        let network = super::Container::of_path(url).is_some_and(|c| c.is_network());
        let tap = match &settings.timing.audio {
            Some(super::audio::Audio::Fed(tap)) => Some(tap.clone()),
            _ => None,
        };
        let thread = {
            let (counts, abort, url) = (counts.clone(), abort.clone(), url.to_string());
            let hls = hls.clone();
            thread::Builder::new()
                .name("stream out".into())
                .spawn(move || {
                    let mut run = Link {
                        url,
                        open: Box::new(opener),
                        out: None,
                        wait: FIRST_WAIT,
                        retry_at: Instant::now(),
                        counts,
                        abort,
                        network,
                        hls,
                        stopped: false,
                        recent: std::collections::VecDeque::new(),
                        tap,
                        lost: false,
                    };
                    run.connect();
                    for q in rx {
                        run.send(&q);
                        let _ = spare_tx.try_send(q.bytes);
                    }
                    run.end();
                })?
        };
        Ok(Self {
            url: url.to_string(),
            what: format!("stream {url} ({})", codec.name()),
            tx: Some(tx),
            spare,
            counts,
            abort,
            thread: Some(thread),
            taken: 0,
            finishing: None,
            hls,
            network,
        })
    }
}

/// The stream's thread's side: the muxer, and connecting again when it fails.
struct Link {
    url: String,
    open: Box<dyn FnMut() -> Result<AvFile> + Send>,
    out: Option<AvFile>,
    wait: Duration,
    retry_at: Instant,
    counts: Arc<Counts>,
    abort: Arc<AtomicBool>,
    /// A network peer (connected to again when it fails), not HLS files.
    network: bool,
    /// An HLS output's files, for `Stream` to read their state.
    hls: Arc<std::sync::OnceLock<Arc<super::hls::Files>>>,
    /// A failed HLS output: nothing more is written.
    stopped: bool,
    /// When the frames of the last `UNCONFIRMED` were handed to the connection (SRT).
    recent: std::collections::VecDeque<Instant>,
    /// The input's audio for this stream, held while the peer is away.
    tap: Option<Arc<super::audio::AudioTap>>,
    /// The connection was lost: the next one starts its audio at its first frame.
    lost: bool,
}

/// How long an SRT peer may be gone before a write fails (SRT's peer idle timeout, which
/// FFmpeg 5's libsrt options leave at its default): frames handed over in that time before
/// a failure were never acknowledged, and are counted as lost, not sent.
const UNCONFIRMED: Duration = Duration::from_secs(5);

impl Link {
    /// Connects (opens the muxer), saying why where it fails the first time.
    fn connect(&mut self) {
        match (self.open)() {
            Ok(out) => {
                if self.counts.connected.swap(true, Ordering::SeqCst) {
                    self.counts.reconnects.fetch_add(1, Ordering::SeqCst);
                    crate::info!("{}: connected again", self.url);
                }
                self.wait = FIRST_WAIT;
                if let Some(files) = out.hls() {
                    let _ = self.hls.set(files);
                }
                self.out = Some(out);
            }
            Err(e) => {
                self.lost = true;
                if let Some(tap) = &self.tap {
                    tap.hold(true);
                }
                if !self.network {
                    crate::warn!("{}: {e:#}; nothing is written to it", self.url);
                    self.stopped = true;
                } else if !self.counts.connected.load(Ordering::SeqCst) && self.wait == FIRST_WAIT {
                    crate::warn!("{}: {e:#}; the run goes on, connecting again", self.url);
                } else {
                    crate::debug!("{}: {e:#}", self.url);
                }
                self.retry_at = Instant::now() + self.wait;
                self.wait = (self.wait * 2).min(LONGEST_WAIT);
            }
        }
    }

    fn send(&mut self, q: &Queued) {
        if self.abort.load(Ordering::SeqCst) || self.stopped {
            self.counts.dropped.fetch_add(1, Ordering::SeqCst);
            return;
        }
        let ending = self.counts.ending.load(Ordering::SeqCst);
        if self.out.is_none() && Instant::now() >= self.retry_at && !ending {
            self.connect();
        }
        let Some(out) = &mut self.out else {
            self.counts.dropped.fetch_add(1, Ordering::SeqCst);
            return;
        };
        if std::mem::take(&mut self.lost) {
            if let Some(t) = q.at {
                out.skip_audio_before(t);
            }
            if let Some(tap) = &self.tap {
                tap.hold(false);
            }
        }
        let written = out.write(&q.bytes, q.format, q.size, q.at);
        let files_failed = self.hls.get().is_some_and(|f| f.failure().is_some());
        if written.is_ok() && !files_failed {
            self.counts.sent.fetch_add(1, Ordering::SeqCst);
            self.note_sent();
            return;
        }
        self.counts.dropped.fetch_add(1, Ordering::SeqCst);
        self.out = None; // dropped: the connection or the files are closed
        if !self.network {
            // Files that can't be written: the output stops (the failure was said).
            self.stopped = true;
            return;
        }
        self.uncount_unconfirmed();
        // The audio that comes while the peer is away is let go (module `audio`).
        self.lost = true;
        if let Some(tap) = &self.tap {
            tap.hold(true);
        }
        if let Err(e) = written {
            if !self.abort.load(Ordering::SeqCst) && !ending {
                crate::warn!("{}: {e:#}; connecting again", self.url);
            }
        }
        self.retry_at = Instant::now() + self.wait;
    }

    /// Keeps the times of an SRT stream's frames of the last `UNCONFIRMED`.
    fn note_sent(&mut self) {
        if !self.url.to_ascii_lowercase().starts_with("srt://") {
            return;
        }
        let now = Instant::now();
        self.recent.push_back(now);
        while self.recent.front().is_some_and(|t| now - *t > UNCONFIRMED) {
            self.recent.pop_front();
        }
    }

    /// A lost SRT peer: the frames handed over in the `UNCONFIRMED` before the failure were
    /// never acknowledged; they move from sent to dropped, and the run says so.
    fn uncount_unconfirmed(&mut self) {
        let now = Instant::now();
        let lost = self
            .recent
            .iter()
            .filter(|t| now - **t <= UNCONFIRMED)
            .count() as u64;
        self.recent.clear();
        if lost == 0 {
            return;
        }
        self.counts.sent.fetch_sub(lost, Ordering::SeqCst);
        self.counts.dropped.fetch_add(lost, Ordering::SeqCst);
        crate::info!(
            "{}: the peer was lost; the {lost} frames sent in the {} s before it was found gone were never acknowledged and count as dropped",
            self.url,
            UNCONFIRMED.as_secs()
        );
    }

    fn end(&mut self) {
        if self.stopped {
            return;
        }
        if let Some(mut out) = self.out.take() {
            if let Err(e) = out.finish() {
                if !self.abort.load(Ordering::SeqCst) {
                    crate::warn!("{}: ending the stream: {e:#}", self.url);
                }
            }
        }
    }
}

impl Output for Stream {
    fn verb(&self) -> &'static str {
        "sent"
    }
    fn describe(&self) -> String {
        self.what.clone()
    }
    fn consume(&mut self, frame: &Frame) -> Result<Taken> {
        let Some(tx) = &self.tx else {
            return Ok(Taken::Kept);
        };
        self.taken += 1;
        if tx.is_full() {
            // The peer (or the encoder) is slower than the run: this frame is not sent.
            self.counts.dropped.fetch_add(1, Ordering::SeqCst);
            return Ok(Taken::Kept);
        }
        let mut bytes = self.spare.try_recv().unwrap_or_default();
        bytes.clear();
        bytes.extend_from_slice(frame.bytes);
        let q = Queued {
            bytes,
            format: frame.format(),
            size: frame.size(),
            at: frame.desc.seconds(),
        };
        match tx.try_send(q) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counts.dropped.fetch_add(1, Ordering::SeqCst);
            }
        }
        Ok(Taken::Kept)
    }
    fn begin_finish(&mut self) {
        self.counts.ending.store(true, Ordering::SeqCst);
        drop(self.tx.take());
        self.finishing.get_or_insert_with(Instant::now);
    }
    fn finish(&mut self) -> Result<()> {
        self.begin_finish();
        let begun = self.finishing.unwrap_or_else(Instant::now);
        if let Some(thread) = self.thread.take() {
            let wait_until = |t: Instant| {
                while !thread.is_finished() && Instant::now() < t {
                    thread::sleep(Duration::from_millis(5));
                }
            };
            wait_until(begun + FINISH_WITHIN);
            if !thread.is_finished() {
                // A write blocked on the peer: interrupt it, and don't wait for more.
                self.abort.store(true, Ordering::SeqCst);
                wait_until(begun + FINISH_WITHIN + INTERRUPTED_WITHIN);
            }
            if thread.is_finished() {
                let _ = thread.join();
            }
        }
        let c = &self.counts;
        // Frames still queued when the thread ended (or was left to end) were never sent:
        // the totals count them as this line does.
        let unsent = self
            .taken
            .saturating_sub(c.sent.load(Ordering::SeqCst) + c.dropped.load(Ordering::SeqCst));
        c.dropped.fetch_add(unsent, Ordering::SeqCst);
        let (sent, dropped, again) = (
            c.sent.load(Ordering::SeqCst),
            c.dropped.load(Ordering::SeqCst),
            c.reconnects.load(Ordering::SeqCst),
        );
        crate::info!(
            "{}: {sent} of {} frames sent, {dropped} dropped (the peer was slow or away), {again} reconnect(s)",
            self.url,
            self.taken
        );
        if self.network && self.taken > 0 && !c.connected.load(Ordering::SeqCst) {
            anyhow::bail!(
                "{}: never connected; 0 of {} frames sent",
                self.url,
                self.taken
            );
        }
        let Some(files) = self.hls.get() else {
            return Ok(());
        };
        if let Some(why) = files.failure() {
            let (segments, seconds) = files.listed();
            anyhow::bail!(
                "HLS '{}': {why}; {sent} of {} frames reached the muxer, and the playlist lists the {segments} whole segment(s) written before ({seconds:.1} s)",
                self.url,
                self.taken
            );
        }
        match files.missing() {
            0 => Ok(()),
            n => anyhow::bail!(
                "HLS '{}': {n} segment(s) were removed by something else during the run while the playlist listed them",
                self.url
            ),
        }
    }
    fn stored(&self) -> Option<u64> {
        Some(self.counts.sent.load(Ordering::SeqCst))
    }
    fn streams(&self) -> Vec<crate::stats::StreamStats> {
        let c = &self.counts;
        vec![crate::stats::StreamStats {
            url: self.url.clone(),
            taken: self.taken,
            sent: c.sent.load(Ordering::SeqCst),
            dropped: c.dropped.load(Ordering::SeqCst),
            reconnects: c.reconnects.load(Ordering::SeqCst),
        }]
    }
}
