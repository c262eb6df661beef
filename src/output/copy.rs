//! `--codec copy`: an output of an input's own packets, neither decoded nor encoded, as
//! `ffmpeg -c copy` writes it: a file (.mp4, .mov, .mkv, .ts, .flv) or a stream (MPEG-TS over
//! `udp://` or `srt://`, FLV to `rtmp://`, RTSP publishing). The input hands it every packet
//! (`media::tap::PacketTap`) through a bounded queue, and a thread of its own writes them
//! (`media::remux`), so a slow disk or peer never holds the input.
//!
//! Invariants: the output starts on the input's first video keyframe (what comes before it
//! can't be decoded alone: left out and counted), its time 0 that keyframe's; the input's
//! audio goes with it unless `--no-audio`; a file is claimed as every video file is
//! (`claim`: locked, nothing replaced without `-y`, a replacement renamed over the old file
//! only once finished, an empty one removed), and an MP4 or MOV of a live input (or with
//! `--fragmented`) is written in fragments, so a crash loses at most the last; an input that reopens (a reconnect) with the same
//! streams goes on in the same output, its times made continuous (`timebase::Timeline`),
//! and one whose streams changed ends the copy; a write that fails, or packets the queue
//! could not take, end the copy with an error, which fails the run (`finish`).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use crossbeam_channel::{Receiver, Sender};
use ff::Rescale;
use ffmpeg_next as ff;

use super::claim::{Overwrite, VideoClaim};
use super::codec::Container;
use crate::media::remux::{InStream, Remux};

/// Packets waiting for the copy's thread: about 8 s of a 1080p30 camera.
const QUEUE: usize = 2048;

/// What a copy writes to, decided by the plan.
#[derive(Clone, Debug, PartialEq)]
pub struct CopySpec {
    /// The file's path, or the stream's URL.
    pub path: String,
    /// Its container.
    pub container: Container,
    /// The input's audio goes with its video.
    pub audio: bool,
    /// What to do with a file that exists (`-y`, `-n`).
    pub overwrite: Overwrite,
    /// An MP4 or MOV is written in fragments (a live input, or `--fragmented`): a crash
    /// loses at most the last. Otherwise its index is written at the end, with the edit
    /// list that keeps a B-frame stream's first picture at time 0, as ffmpeg's is.
    pub fragmented: bool,
}

impl CopySpec {
    /// Whether it is sent to a peer (a stream), not written to a file.
    pub fn is_stream(&self) -> bool {
        matches!(
            self.container,
            Container::Ts | Container::Flv | Container::Rtsp
        )
    }
}

enum Msg {
    Open(Vec<InStream>, usize),
    Packet(ff::Packet),
    End,
}

/// What a copy wrote, for the run's end.
#[derive(Debug, Default)]
pub struct Copied {
    /// Packets written.
    pub packets: u64,
    /// Video packets written.
    pub video_packets: u64,
    /// Packets before the first keyframe, left out.
    pub before_key: u64,
}

/// One output copying an input's packets (module doc).
pub struct Copy {
    tx: Sender<Msg>,
    lost: Arc<AtomicU64>,
    what: String,
    thread: Mutex<Option<std::thread::JoinHandle<Result<Copied>>>>,
}

impl Copy {
    /// Claims `spec`'s file (a stream has none) and starts the thread that writes it.
    pub fn start(spec: CopySpec) -> Result<Arc<Self>> {
        crate::media::info::init();
        let claim = match spec.is_stream() {
            true => None,
            false => Some(VideoClaim::new("--output", &spec.path, spec.overwrite)?),
        };
        let what = crate::secret::redact(&spec.path).into_owned();
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let writer = Writer {
            spec,
            claim,
            what: what.clone(),
            streams: Vec::new(),
            video: 0,
            times: Vec::new(),
            remux: None,
            copied: Copied::default(),
        };
        let thread = std::thread::Builder::new()
            .name("copy".into())
            .spawn(move || writer.run(rx))?;
        Ok(Arc::new(Self {
            tx,
            lost: Arc::new(AtomicU64::new(0)),
            what,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Ends the copy: the output finished (a file's claim committed); what it wrote, or
    /// why it failed.
    pub fn finish(&self) -> Result<Copied> {
        let _ = self.tx.send_timeout(Msg::End, Duration::from_secs(1));
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        let Some(thread) = thread else {
            bail!("'{}': the copy was already finished", self.what);
        };
        let copied = thread
            .join()
            .map_err(|_| anyhow!("'{}': the copy's thread panicked", self.what))??;
        match self.lost.load(Ordering::SeqCst) {
            0 => Ok(copied),
            n => bail!(
                "'{}': {n} packets could not be queued (the output fell behind)",
                self.what
            ),
        }
    }

    /// What it writes to, for messages.
    pub fn describe(&self) -> &str {
        &self.what
    }
}

impl crate::media::tap::PacketTap for Copy {
    fn open(&self, input: &ff::format::context::Input, video: usize, _from: f64) {
        let _ = self.tx.try_send(Msg::Open(InStream::all_of(input), video));
    }

    fn packet(&self, packet: ff::Packet) {
        // Disconnected: the copy ended on an error, which `finish` returns.
        if let Err(crossbeam_channel::TrySendError::Full(_)) = self.tx.try_send(Msg::Packet(packet))
        {
            self.lost.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// The copy's thread: takes packets, writes them.
struct Writer {
    spec: CopySpec,
    claim: Option<VideoClaim>,
    what: String,
    streams: Vec<InStream>,
    video: usize,
    /// Each input stream's timeline, made continuous across a reconnect.
    times: Vec<crate::media::timebase::Timeline>,
    remux: Option<Remux>,
    copied: Copied,
}

impl Writer {
    fn run(mut self, rx: Receiver<Msg>) -> Result<Copied> {
        let result = self.take(rx);
        let finished = self.finish();
        result.and(finished)?;
        Ok(self.copied)
    }

    fn take(&mut self, rx: Receiver<Msg>) -> Result<()> {
        while let Ok(msg) = rx.recv() {
            match msg {
                Msg::Open(streams, video) => self.opened(streams, video)?,
                Msg::Packet(p) => self.packet(p)?,
                Msg::End => break,
            }
        }
        Ok(())
    }

    /// The input (re)opened: the first time, its streams are the copy's; after, they
    /// must be the same.
    fn opened(&mut self, streams: Vec<InStream>, video: usize) -> Result<()> {
        if self.remux.is_some() {
            let same = streams.len() == self.streams.len()
                && video == self.video
                && streams
                    .iter()
                    .zip(&self.streams)
                    .all(|(a, b)| a.params.id() == b.params.id());
            if !same {
                bail!(
                    "'{}': the input came back with other streams, which a copy can't go on with",
                    self.what
                );
            }
        } else {
            self.times = vec![Default::default(); streams.len()];
        }
        self.streams = streams;
        self.video = video;
        Ok(())
    }

    fn packet(&mut self, mut p: ff::Packet) -> Result<()> {
        let s = p.stream();
        if s >= self.streams.len() || (p.dts().is_none() && p.pts().is_none()) {
            return Ok(());
        }
        let tb = self.streams[s].time_base;
        if let Some(t) = self.times.get_mut(s) {
            t.carry(&mut p, tb);
        }
        if self.remux.is_none() {
            if !(s == self.video && p.is_key()) {
                self.copied.before_key += 1;
                return Ok(());
            }
            let origin = p.pts().or(p.dts()).unwrap_or(0);
            self.remux = Some(self.start(origin.rescale(tb, ff::Rational::new(1, 1_000_000)))?);
        }
        let Some(remux) = &mut self.remux else {
            return Ok(());
        };
        if remux.write(p, &self.streams)? {
            self.copied.packets += 1;
            self.copied.video_packets += u64::from(s == self.video);
        }
        Ok(())
    }

    /// Opens the output, its zero at `origin_us` of the input's time.
    fn start(&mut self, origin_us: i64) -> Result<Remux> {
        let path = match &self.claim {
            Some(claim) => claim.writing.clone(),
            None => self.spec.path.clone(),
        };
        let (out, options) = match self.spec.is_stream() {
            true => (
                super::av::open_output(
                    &path,
                    self.spec.container,
                    None,
                    super::av::protocol_options(&path),
                )?,
                super::av::stream_options(self.spec.container, &path)?,
            ),
            false => (
                super::av::open_output(&path, self.spec.container, None, ff::Dictionary::new())?,
                super::av::muxer_options(self.spec.fragmented && self.spec.container.fragments()),
            ),
        };
        let streams = (self.streams.as_slice(), self.video, self.spec.audio);
        Remux::start(out, self.what.clone(), streams, origin_us, options)
            .with_context(|| format!("copying the input's packets to '{}'", self.what))
    }

    /// Finishes the output and commits a file's claim (an output with no packet is an
    /// error: no keyframe came).
    fn finish(&mut self) -> Result<()> {
        let finished = match self.remux.as_mut() {
            Some(remux) => remux.finish(),
            None => Ok(()),
        };
        self.remux = None;
        if let Some(claim) = self.claim.as_mut() {
            let committed = claim.commit(self.copied.video_packets);
            finished?;
            committed?;
        } else {
            finished?;
        }
        if self.copied.video_packets == 0 {
            bail!(
                "'{}': no video keyframe came, so nothing was copied",
                self.what
            );
        }
        Ok(())
    }
}
