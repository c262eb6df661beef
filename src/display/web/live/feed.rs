//! One stream as WebRTC viewers take it: H.264 access units in Annex B (start codes, the
//! parameter sets before each keyframe), each with its time on a 90 kHz clock, handed to
//! every viewer as they come, and its sound as Opus (a camera's Opus as it came, another
//! codec decoded and encoded to Opus once for all viewers, only while someone listens); the units since the last keyframe kept, so that a viewer who
//! comes (or asks for a picture again) starts from that keyframe at once instead of waiting
//! for the next one. An input's feed is a packet tap (the camera's own packets: no decode,
//! no encode); the view's picture has one fed by its encoder (`encode`).
//!
//! A stream whose pictures are reordered (B-frames) is MSE's only: WebRTC's receivers
//! expect pictures in the order they are shown (`not_webrtc`).
//!
//! Invariants: nothing here waits: a viewer's queue (`QUEUE` units) that is full loses the
//! unit, and the viewer is marked behind (`Place::behind`): it starts again from the last
//! keyframe; the kept units never hold
//! more than `KEPT_BYTES` (past it, none are kept until the next keyframe); a stream that is
//! not H.264 is said to be so (`refusal`), and no viewer is taken for it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TrySendError};
use ff::Rescale;
use ffmpeg_next as ff;

/// Units a viewer's queue holds (about 4 s of 30 fps).
pub const QUEUE: usize = 128;
/// The most bytes of units kept since the last keyframe (a 1080p GOP of several seconds).
pub const KEPT_BYTES: usize = 16 << 20;

/// One access unit, ready for a viewer.
#[derive(Debug)]
pub struct Unit {
    /// Annex B: each NAL unit after a start code.
    pub annexb: Vec<u8>,
    /// It starts a group of pictures (an IDR).
    pub key: bool,
    /// Its presentation time, 90 kHz ticks.
    pub pts90k: i64,
    /// Its decoding time, 90 kHz ticks.
    pub dts90k: i64,
}

/// A packet of sound for viewers: Opus, its time on a 48 kHz clock.
#[derive(Debug)]
pub struct Sound {
    /// One Opus packet.
    pub opus: Vec<u8>,
    /// Its time, 48 kHz ticks.
    pub t48k: i64,
}

/// A viewer's place at a feed: the units from the last keyframe when it came, the queue of
/// those to come, and the mark set when its queue was full and a unit was lost.
pub struct Place {
    /// The sound to come (a full queue loses packets: sound is not sent again).
    pub sound: Receiver<Arc<Sound>>,
    /// The units from the last keyframe, when the viewer came.
    pub kept: Vec<Arc<Unit>>,
    /// The units to come.
    pub units: Receiver<Arc<Unit>>,
    /// Set when a unit was lost: the viewer starts again from the last keyframe
    /// (`Feed::since_key`).
    pub behind: Arc<AtomicBool>,
}

/// A viewer, as the feed hands it units.
struct Viewer {
    tx: Sender<Arc<Unit>>,
    behind: Arc<AtomicBool>,
}

/// The feed's state.
#[derive(Default)]
struct State {
    /// Why no viewer can be taken, where the stream is not one WebRTC carries here.
    refusal: Option<String>,
    /// The stream's parameter sets (Annex B), from the container's header, put before each
    /// keyframe that does not carry its own.
    params: Vec<u8>,
    /// The video stream's index and time base, as the input last opened.
    video: Option<(usize, ff::Rational)>,
    /// The units since the last keyframe, and their bytes.
    kept: Vec<Arc<Unit>>,
    kept_bytes: usize,
    viewers: Vec<Viewer>,
    /// The viewers' sound queues.
    listeners: Vec<Sender<Arc<Sound>>>,
    /// When the last unit came.
    last: Option<Instant>,
    /// The pictures' size, where known.
    size: Option<(u16, u16)>,
    /// The stream has sound viewers can take.
    sounds: bool,
    /// Why WebRTC can't carry the stream though MSE can (its pictures are reordered:
    /// B-frames).
    not_webrtc: Option<String>,
    /// The last unit's presentation time (a later one shown earlier is reordering).
    last_pts: Option<i64>,
}

/// One stream's feed (module doc).
#[derive(Default)]
pub struct Feed(Mutex<State>);

impl Feed {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A viewer's place; Err with the reason where the stream can't be viewed this way.
    pub fn watch(&self) -> Result<Place, String> {
        let mut s = self.state();
        if let Some(why) = &s.refusal {
            return Err(why.clone());
        }
        let (tx, units) = crossbeam_channel::bounded(QUEUE);
        let (heard, sound) = crossbeam_channel::bounded(QUEUE * 2);
        s.listeners.push(heard);
        let behind = Arc::new(AtomicBool::new(false));
        s.viewers.push(Viewer {
            tx,
            behind: behind.clone(),
        });
        Ok(Place {
            sound,
            kept: s.kept.clone(),
            units,
            behind,
        })
    }

    /// The units from the last keyframe (a viewer that asked for a picture again).
    pub fn since_key(&self) -> Vec<Arc<Unit>> {
        self.state().kept.clone()
    }

    /// Why WebRTC can't carry the stream, where it can't (MSE can).
    pub fn not_webrtc(&self) -> Option<String> {
        self.state().not_webrtc.clone()
    }

    /// Whether the stream has sound viewers can take (an offer's audio line is answered
    /// only then: a browser waits for sound it was promised before it shows the picture).
    pub fn sounds(&self) -> bool {
        self.state().sounds
    }

    /// Whether anyone listens (as the last sound found them).
    pub fn heard(&self) -> bool {
        !self.state().listeners.is_empty()
    }

    /// Hands `sound` to every viewer (a full queue loses it).
    pub fn push_sound(&self, sound: Sound) {
        let sound = Arc::new(sound);
        self.state().listeners.retain(|l| {
            !matches!(
                l.try_send(sound.clone()),
                Err(TrySendError::Disconnected(_))
            )
        });
    }

    /// Viewers, as the last unit found them (one gone since is counted until the next).
    pub fn viewers(&self) -> usize {
        self.state().viewers.len()
    }

    /// Whether a unit came in the last `seconds`.
    pub fn flowing(&self, seconds: f64) -> bool {
        self.state()
            .last
            .is_some_and(|t| t.elapsed().as_secs_f64() < seconds)
    }

    /// The pictures' size, where known.
    pub fn size(&self) -> Option<(u16, u16)> {
        self.state().size
    }

    /// The pictures are `width`x`height`.
    pub fn set_size(&self, width: u32, height: u32) {
        let clamp = |v: u32| u16::try_from(v).unwrap_or(u16::MAX);
        self.state().size = Some((clamp(width), clamp(height)));
    }

    /// Says that viewers can't be taken, and why.
    pub fn refuse(&self, why: String) {
        let mut s = self.state();
        s.refusal = Some(why);
        s.viewers.clear();
    }

    /// The stream's parameter sets (Annex B), put before keyframes that lack them.
    pub fn set_params(&self, params: Vec<u8>) {
        let mut s = self.state();
        s.params = params;
        s.refusal = None;
    }

    /// Hands `unit` to every viewer, and keeps it.
    pub fn push(&self, mut unit: Unit) {
        let mut s = self.state();
        if unit.key && !has_parameter_sets(&unit.annexb) && !s.params.is_empty() {
            let mut with = s.params.clone();
            with.extend_from_slice(&unit.annexb);
            unit.annexb = with;
        }
        let unit = Arc::new(unit);
        if unit.key {
            s.kept.clear();
            s.kept_bytes = 0;
        }
        if !s.kept.is_empty() || unit.key {
            s.kept_bytes += unit.annexb.len();
            match s.kept_bytes <= KEPT_BYTES {
                true => s.kept.push(unit.clone()),
                false => s.kept.clear(), // until the next keyframe
            }
        }
        s.last = Some(Instant::now());
        s.viewers.retain(|v| match v.tx.try_send(unit.clone()) {
            Ok(()) => true,
            Err(TrySendError::Disconnected(_)) => false,
            Err(TrySendError::Full(_)) => {
                v.behind.store(true, Ordering::SeqCst);
                true
            }
        });
    }
}

/// Whether Annex B `data` holds a sequence parameter set.
fn has_parameter_sets(data: &[u8]) -> bool {
    nal_units(data).any(|n| n.first().is_some_and(|b| b & 0x1f == 7))
}

/// The NAL units of Annex B `data`, without their start codes.
pub fn nal_units(data: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut starts = Vec::new();
    let mut k = 0;
    while k + 3 <= data.len() {
        if data[k] == 0 && data[k + 1] == 0 && data[k + 2] == 1 {
            starts.push((k, k + 3));
            k += 3;
        } else {
            k += 1;
        }
    }
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .map(|&(s, _)| if s > 0 && data[s - 1] == 0 { s - 1 } else { s })
        .chain(std::iter::once(data.len()))
        .collect();
    starts
        .into_iter()
        .zip(ends)
        .map(move |((_, from), to)| &data[from..to.max(from)])
}

/// Annex B of `packet` as the container holds it: as it is where it is Annex B already
/// (MPEG-TS, raw H.264), or its NAL units' lengths (`length` bytes each, MP4's avcC)
/// replaced by start codes.
fn annexb_of(data: &[u8], length: Option<usize>) -> Vec<u8> {
    let Some(n) = length else {
        return data.to_vec();
    };
    let mut out = Vec::with_capacity(data.len() + 16);
    let mut k = 0;
    while k + n <= data.len() {
        let len = data[k..k + n]
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
        k += n;
        if len == 0 || k + len > data.len() {
            break;
        }
        out.extend_from_slice(&[0, 0, 0, 1]);
        out.extend_from_slice(&data[k..k + len]);
        k += len;
    }
    out
}

/// An avcC record's NAL length size and its parameter sets in Annex B; None where
/// `extradata` is not an avcC (Annex B streams carry theirs in band).
fn avcc(extradata: &[u8]) -> Option<(usize, Vec<u8>)> {
    if extradata.len() < 7 || extradata[0] != 1 {
        return None;
    }
    let length = usize::from(extradata[4] & 3) + 1;
    let mut out = Vec::new();
    let mut k = 5;
    for kind in 0..2 {
        let count = match kind {
            0 => usize::from(*extradata.get(k)? & 0x1f),
            _ => usize::from(*extradata.get(k)?),
        };
        k += 1;
        for _ in 0..count {
            let len = usize::from(u16::from_be_bytes([
                *extradata.get(k)?,
                *extradata.get(k + 1)?,
            ]));
            k += 2;
            out.extend_from_slice(&[0, 0, 0, 1]);
            out.extend_from_slice(extradata.get(k..k + len)?);
            k += len;
        }
    }
    Some((length, out))
}

/// An input's feed, as its source's packet tap.
pub struct InputFeed {
    /// The feed viewers take.
    pub feed: Arc<Feed>,
    /// The input's name, for what is said.
    name: String,
    /// The NAL length size of an avcC stream (None: Annex B).
    length: Mutex<Option<usize>>,
    /// The input's sound, where it has some WebRTC can carry.
    audio: Mutex<Option<Audio>>,
}

/// An input's sound stream, as it goes to viewers.
struct Audio {
    stream: usize,
    tb: ff::Rational,
    /// Encoded again to Opus (None: Opus as it came).
    again: Option<Box<crate::output::reencode::Reencode>>,
    /// Someone listened to the last packet (one who comes after a silence restarts the
    /// encoder's clock).
    heard: bool,
}

impl Audio {
    /// The input's best sound stream: Opus as it is, else decoded and encoded to Opus.
    fn of(input: &ff::format::context::Input) -> Option<Self> {
        let stream = input.streams().best(ff::media::Type::Audio)?;
        let params = stream.parameters();
        let again = match params.id() {
            ff::codec::Id::OPUS => None,
            _ => {
                use crate::output::reencode::{Reencode, Target};
                Some(Box::new(Reencode::new(params, Target::Opus, false).ok()??))
            }
        };
        Some(Self {
            stream: stream.index(),
            tb: stream.time_base(),
            again,
            heard: false,
        })
    }

    /// `packet` (of this stream) to `feed`'s listeners, as Opus.
    fn packet(&mut self, packet: &ff::Packet, feed: &Feed) {
        let heard = feed.heard();
        let restart = heard && !self.heard;
        self.heard = heard;
        if !heard {
            return; // nobody listens: nothing is decoded or encoded
        }
        let Some(again) = &mut self.again else {
            if let (Some(data), Some(t)) = (packet.data(), packet.pts()) {
                let t48k = t.rescale(self.tb, ff::Rational::new(1, 48_000));
                let opus = data.to_vec();
                feed.push_sound(Sound { opus, t48k });
            }
            return;
        };
        if restart {
            again.restart();
        }
        let rate = again.rate().max(1);
        let put = &mut |p: &mut ff::Packet| {
            if let Some(data) = p.data() {
                let t = p.pts().unwrap_or(0);
                let t48k = t.rescale(
                    ff::Rational::new(1, rate as i32),
                    ff::Rational::new(1, 48_000),
                );
                feed.push_sound(Sound {
                    opus: data.to_vec(),
                    t48k,
                });
            }
            Ok(())
        };
        let _ = again.feed_to(packet, self.tb, put);
    }
}

impl InputFeed {
    /// Why WebRTC can't carry this input's pictures.
    fn reordered(&self) -> String {
        format!(
            "{}'s video has B-frames (pictures sent out of order), which WebRTC does not carry; MSE plays it (/mse/NAME)",
            self.name
        )
    }

    /// The feed of input `name`.
    pub fn new(name: String) -> Arc<Self> {
        Arc::new(Self {
            feed: Arc::new(Feed::default()),
            name,
            length: Mutex::new(None),
            audio: Mutex::new(None),
        })
    }
}

impl crate::media::tap::PacketTap for InputFeed {
    fn open(&self, input: &ff::format::context::Input, video: usize, _from: f64) {
        let Some(stream) = input.stream(video) else {
            return;
        };
        let params = stream.parameters();
        if params.id() != ff::codec::Id::H264 {
            let why = format!(
                "{}'s video is {:?}; WebRTC here carries a camera's own H.264 (watch the mosaic, which is encoded to H.264)",
                self.name,
                params.id()
            );
            self.feed.refuse(why);
            return;
        }
        // SAFETY: the parameters are the open stream's own, alive for this call; their
        // extradata pointer and size, the picture's size and its reordering delay are
        // FFmpeg's, read here (the extradata copied below).
        let (extradata, width, height, delay) = unsafe {
            let p = params.as_ptr();
            let extradata = match (*p).extradata.is_null() {
                true => &[][..],
                false => std::slice::from_raw_parts((*p).extradata, (*p).extradata_size as usize),
            };
            (extradata, (*p).width, (*p).height, (*p).video_delay)
        };
        let not_webrtc = (delay > 0).then(|| self.reordered());
        let mut state = self.feed.state();
        (state.not_webrtc, state.last_pts) = (not_webrtc, None);
        drop(state);
        self.feed
            .set_size(width.max(0) as u32, height.max(0) as u32);
        let (length, sets) = match avcc(extradata) {
            Some((n, sets)) => (Some(n), sets),
            None => (None, Vec::new()),
        };
        *self.length.lock().unwrap_or_else(|p| p.into_inner()) = length;
        let audio = Audio::of(input);
        self.feed.state().sounds = audio.is_some();
        *self.audio.lock().unwrap_or_else(|p| p.into_inner()) = audio;
        self.feed.set_params(sets);
        self.feed.state().video = Some((video, stream.time_base()));
    }

    fn packet(&self, packet: ff::Packet) {
        let Some((video, tb)) = self.feed.state().video else {
            return;
        };
        if packet.stream() != video {
            let mut audio = self.audio.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(a) = audio.as_mut().filter(|a| a.stream == packet.stream()) {
                a.packet(&packet, &self.feed);
            }
            return;
        }
        let (Some(data), Some(t)) = (packet.data(), packet.pts().or(packet.dts())) else {
            return;
        };
        let length = *self.length.lock().unwrap_or_else(|p| p.into_inner());
        let ticks = |t: i64| t.rescale(tb, ff::Rational::new(1, 90_000));
        {
            // A picture (not a keyframe: a file read again from its start begins with one)
            // shown before the one decoded ahead of it: reordered, though the header did not
            // say so.
            let mut s = self.feed.state();
            let pts = ticks(t);
            let back = s.last_pts.is_some_and(|last| pts < last) && !packet.is_key();
            if back && s.not_webrtc.is_none() {
                s.not_webrtc = Some(self.reordered());
            }
            s.last_pts = Some(pts);
        }
        self.feed.push(Unit {
            annexb: annexb_of(data, length),
            key: packet.is_key(),
            pts90k: ticks(t),
            dts90k: ticks(packet.dts().unwrap_or(t)),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn avcc_packets_become_annex_b_with_their_parameter_sets() {
        // avcC: version 1, profile 66, length size 4, one SPS [0x67, 1, 2], one PPS [0x68, 3].
        let avc = [1, 66, 0, 30, 0xff, 0xe1, 0, 3, 0x67, 1, 2, 1, 0, 2, 0x68, 3];
        let (n, sets) = avcc(&avc).unwrap();
        assert_eq!(n, 4);
        assert_eq!(sets, [0, 0, 0, 1, 0x67, 1, 2, 0, 0, 0, 1, 0x68, 3]);
        let packet = [0, 0, 0, 2, 0x65, 9, 0, 0, 0, 1, 0x06];
        let annexb = annexb_of(&packet, Some(4));
        assert_eq!(annexb, [0, 0, 0, 1, 0x65, 9, 0, 0, 0, 1, 0x06]);
        let units: Vec<&[u8]> = nal_units(&annexb).collect();
        assert_eq!(units, [&[0x65, 9][..], &[0x06][..]]);
        // A keyframe gets the sets before it; a viewer who comes later starts from it.
        let feed = Feed::default();
        feed.set_params(sets.clone());
        feed.push(Unit {
            annexb: annexb.clone(),
            key: true,
            pts90k: 0,
            dts90k: 0,
        });
        feed.push(Unit {
            annexb: vec![0, 0, 1, 0x41, 7],
            key: false,
            pts90k: 3600,
            dts90k: 3600,
        });
        let place = feed.watch().unwrap();
        assert_eq!(place.kept.len(), 2);
        assert!(has_parameter_sets(&place.kept[0].annexb));
        assert_eq!(feed.viewers(), 1);
        drop(place);
        feed.push(Unit {
            annexb: vec![0, 0, 1, 0x41, 8],
            key: false,
            pts90k: 7200,
            dts90k: 7200,
        });
        assert_eq!(feed.viewers(), 0);
        feed.refuse("hevc".into());
        assert!(feed.watch().is_err());
    }
}
