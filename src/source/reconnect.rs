//! A live network input that comes back: when the stream ends or fails (the server went
//! away, the stream stalled past the read timeout), it is opened again with a growing pause
//! (`FIRST_WAIT` doubling to `LONGEST_WAIT`) until it answers or the run stops.
//!
//! Invariants: the frames after a reconnect have the size and format of the first ones (a
//! stream that comes back otherwise ends the input with an error naming both, since its
//! ring and lanes are made for the first); every pause and every open answers a stop within
//! a tick (the pause sleeps until the stop wakes it, `Stop::watch_all`, and FFmpeg's
//! interrupt callback answers the process stop);
//! reconnects and the current state are kept in a `Health` the pipeline reads while a
//! reconnect blocks the capture thread; the lost stream is closed before it is opened again
//! (a UDP camera's port, held by the lost socket, is free for the new one).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Result};

use super::{PictureTags, Read, Source};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;
use crate::stop::Stop;

/// The first pause before opening a lost stream again.
pub const FIRST_WAIT: Duration = Duration::from_millis(250);
/// The longest pause between two attempts.
pub const LONGEST_WAIT: Duration = Duration::from_secs(8);

/// How a reconnecting input is doing, read by the pipeline while the input's capture thread
/// may be blocked in a reconnect.
#[derive(Debug, Default)]
pub struct Health {
    /// Times the stream was opened again and gave frames.
    pub reconnects: AtomicU64,
    /// "reconnecting (…)" while the stream is lost, and since when; None while it runs.
    pub state: Mutex<Option<(String, Instant)>>,
    /// Set by the run: a stream lost now is given up, not opened again (`--frames`, once
    /// every other input has ended).
    given_up: Stop,
}

impl Health {
    /// Times the stream came back.
    pub fn reconnects(&self) -> u64 {
        self.reconnects.load(Ordering::SeqCst)
    }

    /// Gives the stream up: lost, it is not opened again (its input ends).
    pub fn give_up(&self) {
        self.given_up.request();
    }

    fn given_up(&self) -> bool {
        self.given_up.is_requested()
    }

    /// The current state ("reconnecting …"), None while frames come.
    pub fn state(&self) -> Option<String> {
        self.state
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|(t, _)| t.clone()))
    }

    /// How long the stream has been lost (None while frames come).
    pub fn down_for(&self) -> Option<Duration> {
        self.state
            .lock()
            .ok()?
            .as_ref()
            .map(|(_, since)| since.elapsed())
    }

    /// The state now; a stream already lost stays lost since it was first lost.
    fn set(&self, state: Option<String>) {
        if let Ok(mut s) = self.state.lock() {
            *s = match (state, s.take()) {
                (Some(text), Some((_, since))) => Some((text, since)),
                (Some(text), None) => Some((text, Instant::now())),
                (None, _) => None,
            };
        }
    }
}

/// Opens the stream again.
pub type Reopen = Box<dyn FnMut() -> Result<Box<dyn Source>> + Send>;

/// A source that reopens itself when lost (module doc).
pub struct Reconnecting {
    inner: Box<dyn Source>,
    reopen: Reopen,
    health: Arc<Health>,
    stop: Stop,
    /// What the messages call it (the URL).
    name: String,
    size: FrameSize,
    format: PixelFormat,
    /// Where the packets go (`--record`), given again to each source that replaces the lost
    /// one.
    #[cfg(feature = "ffmpeg")]
    taps: Vec<crate::media::tap::Tap>,
}

impl Reconnecting {
    /// `inner`, opened again by `reopen` whenever it ends or fails, until `stop`.
    pub fn new(inner: Box<dyn Source>, reopen: Reopen, name: String, stop: Stop) -> Self {
        Self {
            size: inner.size(),
            format: inner.format(),
            inner,
            reopen,
            health: Arc::new(Health::default()),
            stop,
            name,
            #[cfg(feature = "ffmpeg")]
            taps: Vec::new(),
        }
    }

    /// Runs `op` on the stream, reconnecting as long as it ends or fails; End only on a stop.
    fn keep_up(&mut self, mut op: impl FnMut(&mut dyn Source) -> Result<Read>) -> Result<Read> {
        loop {
            let why = match op(self.inner.as_mut()) {
                Ok(Read::Frame) => return Ok(Read::Frame),
                Ok(Read::End) => "the stream ended".to_string(),
                Err(e) => format!("{e:#}"),
            };
            if self.stop.is_requested() {
                return Ok(Read::End);
            }
            if self.health.given_up() {
                crate::info!(
                    "{}: {why}; given up (every other input has ended)",
                    self.name
                );
                return Ok(Read::End);
            }
            crate::warn!("{}: {why}; reconnecting", self.name);
            // Closed first: what it holds (a UDP port, a connection) is free for the next.
            let lost = Lost {
                was: self.inner.describe(),
                fps: self.inner.fps(),
            };
            drop(std::mem::replace(&mut self.inner, Box::new(lost)));
            match self.reconnect()? {
                Some(inner) => self.replace(inner),
                None => {
                    if self.health.given_up() && !self.stop.is_requested() {
                        crate::info!("{}: given up (every other input has ended)", self.name);
                    }
                    return Ok(Read::End);
                }
            }
        }
    }

    /// Reads from `inner` from now on, its packets going where the lost one's went.
    fn replace(&mut self, inner: Box<dyn Source>) {
        self.inner = inner;
        #[cfg(feature = "ffmpeg")]
        for tap in &self.taps {
            let _ = self.inner.tap(tap.clone());
        }
    }

    /// Opens the stream again, pausing longer after each failure; None on a stop.
    fn reconnect(&mut self) -> Result<Option<Box<dyn Source>>> {
        let mut wait = FIRST_WAIT;
        for attempt in 1.. {
            self.health.set(Some(match attempt {
                1 => "reconnecting".to_string(),
                n => format!("reconnecting (attempt {n})"),
            }));
            // Asleep until the next try, or woken by a stop or the run giving it up.
            let until = Instant::now() + wait;
            if Stop::watch_all(&[&self.stop, &self.health.given_up]).sleep_until(until) {
                return Ok(None);
            }
            if self.health.given_up() {
                return Ok(None);
            }
            match (self.reopen)() {
                Ok(s) if s.size() == self.size && s.format() == self.format => {
                    self.health.reconnects.fetch_add(1, Ordering::SeqCst);
                    self.health.set(None);
                    crate::info!("{}: reconnected (attempt {attempt})", self.name);
                    return Ok(Some(s));
                }
                Ok(s) => bail!(
                    "{} came back as {} {}, not the {} {} it started with",
                    self.name,
                    s.size(),
                    s.format(),
                    self.size,
                    self.format
                ),
                Err(_) if self.stop.is_requested() || self.health.given_up() => return Ok(None),
                Err(e) => {
                    crate::debug!("{}: attempt {attempt}: {e:#}", self.name);
                    wait = (wait * 2).min(LONGEST_WAIT);
                }
            }
        }
        unreachable!("the attempts never run out")
    }
}

/// Where a lost stream was, while it is opened again: what it was, and nothing to read.
struct Lost {
    was: String,
    fps: Option<f64>,
}

impl Source for Lost {
    fn describe(&self) -> String {
        self.was.clone()
    }
    fn size(&self) -> FrameSize {
        FrameSize::new(0, 0)
    }
    fn fps(&self) -> Option<f64> {
        self.fps
    }
    fn is_live(&self) -> bool {
        true
    }
    fn read(&mut self, _: &mut [u8]) -> Result<Read> {
        Ok(Read::End)
    }
    fn skip(&mut self) -> Result<Read> {
        Ok(Read::End)
    }
}

impl Source for Reconnecting {
    fn describe(&self) -> String {
        format!("{} (reconnects when lost)", self.inner.describe())
    }
    fn size(&self) -> FrameSize {
        self.size
    }
    fn format(&self) -> PixelFormat {
        self.format
    }
    fn picture_tags(&self) -> Option<PictureTags> {
        self.inner.picture_tags()
    }
    fn fps(&self) -> Option<f64> {
        self.inner.fps()
    }
    fn is_live(&self) -> bool {
        true
    }
    fn burst_budget(&self) -> Duration {
        self.inner.burst_budget()
    }
    fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
        self.keep_up(|s| s.read(frame))
    }
    fn skip(&mut self) -> Result<Read> {
        self.keep_up(|s| s.skip())
    }
    fn begin_drain(&mut self) -> bool {
        self.inner.begin_drain()
    }
    fn due(&mut self) -> Option<Instant> {
        self.inner.due()
    }
    fn pts(&self) -> Option<crate::desc::Timestamp> {
        self.inner.pts()
    }
    fn lent(&mut self) -> Option<(crate::desc::Memory, crate::desc::Planes)> {
        self.inner.lent()
    }
    fn health(&self) -> Option<Arc<Health>> {
        Some(self.health.clone())
    }
    #[cfg(feature = "ffmpeg")]
    fn tap(
        &mut self,
        tap: crate::media::tap::Tap,
    ) -> std::result::Result<(), crate::media::tap::Tap> {
        self.inner.tap(tap.clone())?;
        self.taps.push(tap);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::pattern::Pattern;

    /// A pattern that fails after `left` frames.
    struct Flaky {
        inner: Pattern,
        left: u32,
    }

    impl Source for Flaky {
        fn describe(&self) -> String {
            "flaky".into()
        }
        fn size(&self) -> FrameSize {
            self.inner.size()
        }
        fn fps(&self) -> Option<f64> {
            None
        }
        fn is_live(&self) -> bool {
            true
        }
        fn read(&mut self, frame: &mut [u8]) -> Result<Read> {
            if self.left == 0 {
                bail!("connection reset");
            }
            self.left -= 1;
            self.inner.read(frame)
        }
        fn skip(&mut self) -> Result<Read> {
            let mut scratch = vec![0; PixelFormat::Bgr24.bytes(self.size())];
            self.read(&mut scratch)
        }
    }

    fn flaky(size: FrameSize, left: u32) -> Box<dyn Source> {
        Box::new(Flaky {
            inner: Pattern::new(size, 0.0),
            left,
        })
    }

    #[test]
    fn a_lost_stream_is_opened_again_and_counted() {
        let size = FrameSize::new(64, 48);
        let mut opens = 0;
        let reopen: Reopen = Box::new(move || {
            opens += 1;
            match opens {
                1 => bail!("connection refused"), // the server is still down
                _ => Ok(flaky(size, 3)),
            }
        });
        let mut s = Reconnecting::new(flaky(size, 2), reopen, "test".into(), Stop::new());
        let health = s.health().unwrap();
        let mut frame = vec![0; PixelFormat::Bgr24.bytes(size)];
        for _ in 0..5 {
            assert_eq!(s.read(&mut frame).unwrap(), Read::Frame);
        }
        assert_eq!(health.reconnects(), 1);
        assert_eq!(health.state(), None);
    }

    #[test]
    fn a_stream_that_comes_back_at_another_size_ends_with_an_error() {
        let reopen: Reopen = Box::new(|| Ok(flaky(FrameSize::new(32, 32), 3)));
        let size = FrameSize::new(64, 48);
        let mut s = Reconnecting::new(flaky(size, 0), reopen, "cam".into(), Stop::new());
        let mut frame = vec![0; PixelFormat::Bgr24.bytes(size)];
        let e = s.read(&mut frame).unwrap_err().to_string();
        assert!(e.contains("came back as 32x32"), "{e}");
    }

    #[test]
    fn a_stop_ends_the_wait() {
        let stop = Stop::new();
        let reopen: Reopen = Box::new(|| bail!("connection refused"));
        let size = FrameSize::new(64, 48);
        let mut s = Reconnecting::new(flaky(size, 0), reopen, "cam".into(), stop.clone());
        let t = Instant::now();
        let stopper = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(600));
            stop.request();
        });
        let mut frame = vec![0; PixelFormat::Bgr24.bytes(size)];
        assert_eq!(s.read(&mut frame).unwrap(), Read::End);
        assert!(
            t.elapsed() < Duration::from_millis(1200),
            "{:?}",
            t.elapsed()
        );
        stopper.join().unwrap();
    }
}
