//! A video output's copy of the input's audio, packet for packet (no decode, no encode),
//! interleaved with the video it writes: files, streams and HLS alike. The packets come from
//! the input's own demuxer as it reads them (`AudioTap`, a `media::tap::PacketTap` attached
//! before the run reads a frame, one per output), so the input is opened once; only a source
//! that reads no packets itself (OpenCV's capture, `--decode opencv`) has its file opened a
//! second time, by a demuxer of the copy's own (`Audio::File`).
//!
//! Invariants: every audio packet of a kept stream is written, in the order read, with its
//! timestamps moved by the file's start so that audio and video share the output's zero,
//! and kept going forward across a jump (joined files: `timebase::Timeline`), as the
//! video's are;
//! audio is written up to the end of the last video frame written (`pump`); the tap never
//! blocks the input (its queue is unbounded; a file input is read at most a ring ahead of
//! its writer, so it holds at most that much audio), and once the copy is gone what the tap
//! is given is let go. A stream that lost its peer holds the tap (`AudioTap::hold`): what
//! comes meanwhile is let go, and the connection made again starts its audio at its first
//! frame (`AudioCopy::skip_before`), so that sound and picture stay together.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use crossbeam_channel::{Receiver, Sender, TryRecvError};
use ffmpeg_next as ff;

use super::codec::Container;
use crate::media::info as media;
use crate::media::timebase::seconds;

/// Where a file output's audio comes from.
#[derive(Clone)]
pub enum Audio {
    /// Handed on by the input's demuxer as it reads (the input is read once).
    Fed(Arc<AudioTap>),
    /// Read from the file by a demuxer of the copy's own, these streams (a source that
    /// reads no packets: OpenCV's capture).
    File(PathBuf, Vec<usize>),
}

impl std::fmt::Debug for Audio {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Audio::Fed(tap) => write!(f, "Fed({:?})", tap.streams),
            Audio::File(path, streams) => write!(f, "File({}, {streams:?})", path.display()),
        }
    }
}

/// The input's audio streams, where it has any: their file and indices.
pub fn audio_of(info: &media::MediaInfo) -> Option<(PathBuf, Vec<usize>)> {
    (!info.audio.is_empty()).then(|| (info.path.clone(), info.audio.iter().map(|a| a.0).collect()))
}

/// An audio stream of the input, as the demuxer opened it.
struct Opened {
    index: usize,
    params: ff::codec::Parameters,
    time_base: ff::Rational,
}

/// What the input's demuxer said when the tap was attached, and the queue of its packets.
struct Fed {
    streams: Vec<Opened>,
    /// The input file's start, seconds (its timeline's zero), moved by `--ss`.
    start: f64,
    /// `--ss` cut the input's start: the packets before the zero are let go.
    trimmed: bool,
    /// Read by the one output the tap is for (by each of its connections in turn).
    packets: Receiver<ff::Packet>,
}

/// A tap on the input's demuxer that queues the packets of `streams` for one video output.
pub struct AudioTap {
    streams: Vec<usize>,
    tx: Sender<ff::Packet>,
    fed: Mutex<Fed>,
    /// The output can't take audio now (a stream between connections): packets are let go.
    held: std::sync::atomic::AtomicBool,
}

impl AudioTap {
    /// A tap for the input's audio streams `streams` (indices in the input).
    pub fn new(streams: Vec<usize>) -> Self {
        let (tx, rx) = crossbeam_channel::unbounded();
        Self {
            streams,
            tx,
            fed: Mutex::new(Fed {
                streams: Vec::new(),
                start: 0.0,
                trimmed: false,
                packets: rx,
            }),
            held: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Lets go of what comes while `held` (a stream that lost its peer), keeping what comes
    /// after; what was queued before is let go too.
    pub fn hold(&self, held: bool) {
        self.held.store(held, std::sync::atomic::Ordering::SeqCst);
        if held {
            let fed = self.fed();
            while fed.packets.try_recv().is_ok() {}
        }
    }

    fn fed(&self) -> std::sync::MutexGuard<'_, Fed> {
        self.fed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl crate::media::tap::PacketTap for AudioTap {
    fn open(&self, input: &ff::format::context::Input, _video: usize, from: f64) {
        let mut fed = self.fed();
        fed.start = crate::media::timebase::file_start(input).unwrap_or(0.0) + from;
        fed.trimmed = from > 0.0;
        fed.streams = input
            .streams()
            .filter(|s| self.streams.contains(&s.index()))
            .map(|s| Opened {
                index: s.index(),
                // A copy of its own: the stream's are the input's, on the input's thread.
                params: s.parameters().clone(),
                time_base: s.time_base(),
            })
            .collect();
    }

    fn packet(&self, packet: ff::Packet) {
        if self.streams.contains(&packet.stream())
            && !self.held.load(std::sync::atomic::Ordering::SeqCst)
        {
            // A copy that is gone (its file finished or failed) takes nothing more.
            let _ = self.tx.send(packet);
        }
    }
}

/// Where the copy reads its packets.
enum Packets {
    /// From the input's demuxer (`AudioTap`).
    Fed(Receiver<ff::Packet>),
    /// From a demuxer of its own.
    Own(ff::format::context::Input),
}

impl Packets {
    /// The next packet; None when there is none yet (`Fed`) or none more (`done`).
    fn next(&mut self, done: &mut bool) -> Option<ff::Packet> {
        match self {
            Packets::Fed(rx) => match rx.try_recv() {
                Ok(p) => Some(p),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => {
                    *done = true;
                    None
                }
            },
            Packets::Own(input) => {
                let mut p = ff::Packet::empty();
                match p.read(input) {
                    Ok(()) => Some(p),
                    Err(ff::Error::Eof) => {
                        *done = true;
                        None
                    }
                    Err(e) => {
                        crate::warn!(
                            "reading the input's audio: {e}; the rest of the audio is left out"
                        );
                        *done = true;
                        None
                    }
                }
            }
        }
    }
}

/// Where one of the input's audio streams goes.
enum Route {
    /// Copied into the output's stream.
    Copy(usize),
    /// Decoded and encoded to AAC or Opus (the container can't hold its codec).
    Encode(Box<super::reencode::Reencode>),
}

/// The input's audio, copied packet for packet (or encoded again where it must be).
pub struct AudioCopy {
    packets: Packets,
    /// Per input stream: where it goes, and the input's time base.
    map: Vec<Option<(Route, ff::Rational)>>,
    /// Per input stream: its timeline, made continuous across a jump (joined files), as the
    /// video's frames are (`source::continuity`).
    times: Vec<crate::media::timebase::Timeline>,
    /// The input file's start, seconds (its timeline's zero).
    start: f64,
    /// A packet read but later than what was written so far.
    pending: Option<ff::Packet>,
    done: bool,
    /// Packets before this time (output timeline, seconds) are let go: a stream connected
    /// again starts its audio with its first frame.
    skip_before: Option<f64>,
}

impl AudioCopy {
    /// Lets go of the packets before `t` seconds (output timeline).
    pub fn skip_before(&mut self, t: f64) {
        self.skip_before = Some(t);
    }

    /// Writes every audio packet that starts before `until` seconds (output timeline).
    pub fn pump(&mut self, out: &mut ff::format::context::Output, until: f64) -> Result<()> {
        loop {
            let packet = match self.pending.take() {
                Some(p) => p,
                None if self.done => return Ok(()),
                None => match self.packets.next(&mut self.done) {
                    Some(mut p) => {
                        self.carry(&mut p);
                        p
                    }
                    None => return Ok(()),
                },
            };
            let Some(Some((route, tb))) = self.map.get_mut(packet.stream()) else {
                continue;
            };
            let tb = *tb;
            let Some(ts) = packet.pts().or(packet.dts()) else {
                continue;
            };
            let at = seconds(ts, tb) - self.start;
            if at >= until {
                self.pending = Some(packet);
                return Ok(());
            }
            if self.skip_before.is_some_and(|t| at < t) {
                continue;
            }
            let packet = shifted(packet, self.start, tb);
            match route {
                Route::Copy(to) => write(out, packet, *to, tb)?,
                Route::Encode(e) => e.feed(out, &packet, tb)?,
            }
        }
    }

    /// Puts a packet just read on its stream's continuous timeline (once: a pending packet
    /// is already on it).
    fn carry(&mut self, packet: &mut ff::Packet) {
        let s = packet.stream();
        if let (Some(Some((_, tb))), Some(timeline)) = (self.map.get(s), self.times.get_mut(s)) {
            timeline.carry(packet, *tb);
        }
    }

    /// Ends the audio encoded again (what is left of it is encoded).
    pub fn finish(&mut self, out: &mut ff::format::context::Output) -> Result<()> {
        for (route, _) in self.map.iter_mut().flatten() {
            if let Route::Encode(e) = route {
                e.finish(out)?;
            }
        }
        Ok(())
    }
}

/// `packet` with its timestamps moved by the file's `start` (seconds; `tb` its time base).
fn shifted(mut packet: ff::Packet, start: f64, tb: ff::Rational) -> ff::Packet {
    let shift = (start * f64::from(tb.denominator()) / f64::from(tb.numerator())).round() as i64;
    packet.set_pts(packet.pts().map(|v| v - shift));
    packet.set_dts(packet.dts().map(|v| v - shift));
    packet
}

/// One packet (on the output's timeline, in `tb`) into the output's stream `to`.
fn write(
    out: &mut ff::format::context::Output,
    mut packet: ff::Packet,
    to: usize,
    tb: ff::Rational,
) -> Result<()> {
    let out_tb = out.stream(to).context("audio stream")?.time_base();
    packet.rescale_ts(tb, out_tb);
    packet.set_stream(to);
    packet.set_position(-1);
    packet
        .write_interleaved(out)
        .context("writing an audio packet")
}

/// Whether an MPEG-TS file or stream (and an HLS playlist's segments) carries audio of `id`
/// (what libavformat's muxer writes streams of).
fn ts_holds_audio(id: ff::codec::Id) -> bool {
    use ff::codec::Id;
    matches!(
        id,
        Id::AAC | Id::MP2 | Id::MP3 | Id::AC3 | Id::EAC3 | Id::OPUS | Id::DTS
    )
}

/// Whether RTP (an RTSP publisher's packets) carries audio of `id` (libavformat's RTP
/// packetisers).
fn rtp_holds_audio(id: ff::codec::Id) -> bool {
    use ff::codec::Id;
    matches!(
        id,
        Id::AAC
            | Id::MP2
            | Id::MP3
            | Id::AC3
            | Id::OPUS
            | Id::PCM_MULAW
            | Id::PCM_ALAW
            | Id::PCM_S16BE
    )
}

/// Adds to `out` a stream for each of the input's audio streams (`audio`) that the
/// container holds, warning about each it can't; the copier that feeds them, and how many
/// were copied as they are (those encoded again say so as they are added).
pub fn copy(
    out: &mut ff::format::context::Output,
    audio: &Audio,
    container: Container,
    path: &str,
) -> Result<(Option<AudioCopy>, usize)> {
    let (packets, streams, (start, trimmed)) = match audio {
        Audio::Fed(tap) => {
            let fed = tap.fed();
            // The tap is this output's alone; a stream's connections read it in turn.
            let rx = fed.packets.clone();
            let streams: Vec<_> = fed
                .streams
                .iter()
                .map(|s| (s.index, s.params.clone(), s.time_base))
                .collect();
            (Packets::Fed(rx), streams, (fed.start, fed.trimmed))
        }
        Audio::File(from, indices) => {
            let input = ff::format::input(&from)
                .with_context(|| format!("reading the audio of {}", from.display()))?;
            let start = crate::media::timebase::file_start(&input).unwrap_or(0.0);
            let streams: Vec<_> = input
                .streams()
                .filter(|s| indices.contains(&s.index()))
                .map(|s| (s.index(), s.parameters().clone(), s.time_base()))
                .collect();
            (Packets::Own(input), streams, (start, false))
        }
    };
    let mut map: Vec<Option<(Route, ff::Rational)>> =
        (0..streams.iter().map(|s| s.0 + 1).max().unwrap_or(0))
            .map(|_| None)
            .collect();
    for (index, params, tb) in streams {
        if let Some(route) = add_stream(out, params, tb, index, container, path)? {
            map[index] = Some((route, tb));
        }
    }
    let kept = map.iter().flatten().count();
    let copied = map
        .iter()
        .flatten()
        .filter(|(route, _)| matches!(route, Route::Copy(_)))
        .count();
    let copy = (kept > 0).then_some(AudioCopy {
        packets,
        times: vec![Default::default(); map.len()],
        map,
        start,
        pending: None,
        done: false,
        skip_before: trimmed.then_some(0.0),
    });
    Ok((copy, copied))
}

/// Whether `out` (of `container`) holds audio of codec `id`.
fn holds(out: &ff::format::context::Output, container: Container, id: ff::codec::Id) -> bool {
    // SAFETY: `out` is an open output context, so its oformat is valid.
    let asked = unsafe {
        ff::ffi::avformat_query_codec(
            (*out.as_ptr()).oformat,
            id.into(),
            ff::ffi::FF_COMPLIANCE_NORMAL,
        )
    };
    // libavformat's MPEG-TS, HLS and RTSP muxers answer no query (they have no codec
    // tags): the audio codecs they carry are named here.
    match container {
        Container::TsFile | Container::Ts | Container::Hls => ts_holds_audio(id),
        Container::Rtsp => rtp_holds_audio(id),
        Container::Avi if id == ff::codec::Id::AAC => false,
        _ => asked == 1,
    }
}

/// Where the input's audio stream `index` goes: copied where the container holds its codec,
/// else encoded to AAC where it holds AAC; None, said, where neither.
fn add_stream(
    out: &mut ff::format::context::Output,
    params: ff::codec::Parameters,
    tb: ff::Rational,
    index: usize,
    container: Container,
    path: &str,
) -> Result<Option<Route>> {
    let id = params.id();
    if !holds(out, container, id) {
        use super::reencode::{Reencode, Target};
        // AAC where the container holds it, else Opus (WebM), as ffmpeg's defaults.
        let target = [Target::Aac, Target::Opus]
            .into_iter()
            .find(|t| holds(out, container, t.id()));
        if let Some(target) = target {
            if let Some(e) = Reencode::open(out, params, target)? {
                crate::info!(
                    "'{path}' can't hold the input's {} audio (stream {index}): it is encoded to {}",
                    id.name(),
                    match target {
                        Target::Aac => "AAC",
                        Target::Opus => "Opus",
                    }
                );
                return Ok(Some(Route::Encode(Box::new(e))));
            }
        }
        let (what, hint) = if container.is_stream() {
            (
                "this stream".to_string(),
                "a .mkv file beside it holds any audio",
            )
        } else {
            (
                format!("a .{} file", container.extension()),
                ".mkv holds any audio",
            )
        };
        crate::warn!(
            "{what} can't hold the input's {} audio (stream {index}): it is left out of '{path}' ({hint}; --no-audio says you meant it)",
            id.name(),
        );
        return Ok(None);
    }
    let mut ost = out.add_stream(ff::encoder::find(ff::codec::Id::None))?;
    ost.set_parameters(params);
    ost.set_time_base(tb);
    // SAFETY: the stream's parameters were just set; a zero tag lets the muxer choose
    // its own for the codec.
    unsafe { (*ost.parameters().as_mut_ptr()).codec_tag = 0 };
    Ok(Some(Route::Copy(ost.index())))
}
