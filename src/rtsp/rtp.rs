//! An input's packets as RTP: a thread of the path's own takes the packets its tap hands
//! on (never holding the input), lays each stream out as RTP with FFmpeg's `rtp` muxer (one
//! context a stream, its bytes written through a callback instead of a socket), describes
//! them in SDP (`av_sdp_create`) and hands every RTP and RTCP packet to the path's readers
//! (`Path::send`).
//!
//! Invariants: the input's video and its audio become tracks `0..n` in the order the input
//! lists them; a packet's times are made continuous across a reconnect
//! (`timebase::Timeline`) and its decoding time kept rising, as the muxer requires; a
//! reader gets nothing before the first video keyframe after it started playing, so that
//! its first picture decodes; an input that reopens with other streams is described anew;
//! AAC that came as ADTS (MPEG-TS has no AudioSpecificConfig) is described as MPEG-4 audio
//! with a config made from its stream's profile, rate and channels, each frame sent without
//! its ADTS header; where no SDP can be made with the sound, the video is served alone and a
//! line says why.

use std::ffi::{c_int, c_void};
use std::sync::Arc;

use anyhow::{bail, Result};
use crossbeam_channel::{Receiver, Sender};
use ff::packet::Mut;
use ffmpeg_next as ff;

use super::Path;
use crate::media::remux::InStream;

/// Packets waiting for the path's thread: about 8 s of a 1080p30 camera.
const QUEUE: usize = 2048;
/// The largest RTP packet made (under an Ethernet MTU with IP and UDP headers).
const PACKET: c_int = 1400;

enum Msg {
    Open(Vec<InStream>, usize),
    Packet(ff::Packet),
}

/// The tap an input hands its packets to (module doc).
pub struct Tap {
    tx: Sender<Msg>,
}

impl Tap {
    /// Starts the thread that makes `path`'s RTP.
    pub fn start(path: Arc<Path>) -> Result<Arc<Self>> {
        crate::media::info::init();
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        std::thread::Builder::new()
            .name("rtsp path".into())
            .spawn(move || Packetizer::new(path).run(rx))?;
        Ok(Arc::new(Self { tx }))
    }
}

impl crate::media::tap::PacketTap for Tap {
    fn open(&self, input: &ff::format::context::Input, video: usize, _from: f64) {
        let _ = self.tx.try_send(Msg::Open(InStream::all_of(input), video));
    }

    fn packet(&self, packet: ff::Packet) {
        // Full: the readers' side fell behind; the packet is not for them (counted by the
        // readers as a gap, as a lossy network would make one).
        let _ = self.tx.try_send(Msg::Packet(packet));
    }
}

/// One stream's RTP muxer, writing through `write_packet` to its track of the path.
struct Track {
    ctx: *mut ff::ffi::AVFormatContext,
    /// The callback's opaque: the path and the track's number, kept alive here.
    out: Box<Out>,
    /// The input stream it carries.
    from: usize,
    last_dts: Option<i64>,
    /// Its header was written (so its trailer is).
    header: bool,
    /// AAC given a config here: each packet's ADTS header is taken off.
    strip_adts: bool,
}

/// Where a track's RTP goes.
struct Out {
    path: Arc<Path>,
    track: usize,
}

/// Gives AAC that came as ADTS (no extradata) the AudioSpecificConfig its stream's profile,
/// rate and channels say: whether it did (each packet's ADTS header is then taken off).
///
/// # Safety
/// `par` points to a valid `AVCodecParameters` this thread owns (a muxer's stream's, before
/// its header is written).
unsafe fn configure_adts(par: *mut ff::ffi::AVCodecParameters) -> Result<bool> {
    // SAFETY: `par` is valid (the caller's condition); the extradata is allocated with
    // FFmpeg's allocator, zeroed and padded as FFmpeg requires, and handed to the
    // parameters, which free it.
    unsafe {
        if (*par).codec_id != ff::ffi::AVCodecID::AV_CODEC_ID_AAC || (*par).extradata_size != 0 {
            return Ok(false);
        }
        let config = asc_of(
            (*par).profile,
            (*par).sample_rate,
            (*par).ch_layout.nb_channels,
        )
        .ok_or_else(|| anyhow::anyhow!("AAC whose profile, rate or channels are not known"))?;
        let extradata = ff::ffi::av_mallocz(config.len() + 64) as *mut u8;
        if extradata.is_null() {
            bail!("no memory for an AAC config");
        }
        std::ptr::copy_nonoverlapping(config.as_ptr(), extradata, config.len());
        (*par).extradata = extradata;
        (*par).extradata_size = config.len() as c_int;
        Ok(true)
    }
}

/// The MPEG-4 AudioSpecificConfig of AAC of `profile` (FFmpeg's: object type less one),
/// `rate` and `channels` (ISO 14496-3, 1.6.2.1): 5 bits of object type, 4 of the rate's index,
/// 4 of the channel configuration, 3 zero bits.
fn asc_of(profile: c_int, rate: c_int, channels: c_int) -> Option<[u8; 2]> {
    const RATES: [c_int; 13] = [
        96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350,
    ];
    let object = u8::try_from(profile.max(0) + 1)
        .ok()
        .filter(|&o| (1..31).contains(&o))?;
    let index = RATES.iter().position(|&r| r == rate)? as u8;
    let channels = u8::try_from(channels)
        .ok()
        .filter(|&c| (1..=7).contains(&c))?;
    let bits: u16 =
        (u16::from(object) << 11) | (u16::from(index) << 7) | (u16::from(channels) << 3);
    Some(bits.to_be_bytes())
}

/// The length of the ADTS header `frame` begins with (7 bytes, 9 with its CRC), or None
/// where it begins with none.
fn adts_header_len(frame: &[u8]) -> Option<usize> {
    if frame.len() < 7 || frame[0] != 0xFF || frame[1] & 0xF6 != 0xF0 {
        return None;
    }
    let n = if frame[1] & 0x01 == 1 { 7 } else { 9 };
    (frame.len() > n).then_some(n)
}

impl Drop for Track {
    fn drop(&mut self) {
        // SAFETY: the context and its byte stream were made in `Track::new` and are freed
        // once here: the trailer is written, then the buffer, the byte stream and the
        // context.
        unsafe {
            if self.header {
                ff::ffi::av_write_trailer(self.ctx);
            }
            let pb = (*self.ctx).pb;
            if !pb.is_null() {
                ff::ffi::av_freep(&mut (*pb).buffer as *mut *mut u8 as *mut c_void);
                let mut pb = pb;
                ff::ffi::avio_context_free(&mut pb);
                (*self.ctx).pb = std::ptr::null_mut();
            }
            ff::ffi::avformat_free_context(self.ctx);
        }
    }
}

// SAFETY: a track is made, used and dropped by its path's thread alone.
unsafe impl Send for Track {}

/// FFmpeg's writer of a track's bytes: one call a packet (the muxer flushes after each).
unsafe extern "C" fn write_packet(opaque: *mut c_void, buf: *mut u8, size: c_int) -> c_int {
    // SAFETY: opaque is the track's `Out`, alive as long as its context; buf holds size
    // bytes.
    let (out, bytes) = unsafe {
        (
            &*(opaque as *const Out),
            std::slice::from_raw_parts(buf, size.max(0) as usize),
        )
    };
    // RTCP's packet types are 200 to 204 (its sender reports).
    let rtcp = bytes.len() > 1 && (200..=204).contains(&bytes[1]);
    out.path.send(out.track, rtcp, bytes);
    size
}

impl Track {
    /// An RTP muxer of `stream` (input stream `from`), track `track` of `path`.
    fn new(path: &Arc<Path>, track: usize, (stream, from): (&InStream, usize)) -> Result<Self> {
        let out = Box::new(Out {
            path: path.clone(),
            track,
        });
        // SAFETY: every pointer made here is checked, owned by the `Track` returned (freed
        // in its Drop, also when a later step fails: the Track exists from the context on),
        // and the opaque is the boxed `Out` the Track keeps; `configure_adts` is given the
        // new stream's parameters, before the header is written.
        unsafe {
            let mut ctx = std::ptr::null_mut();
            let r = ff::ffi::avformat_alloc_output_context2(
                &mut ctx,
                std::ptr::null_mut(),
                c"rtp".as_ptr(),
                c"rtp://0.0.0.0".as_ptr(),
            );
            if r < 0 || ctx.is_null() {
                bail!("no RTP muxer: {}", ff::Error::from(r));
            }
            let mut track = Track {
                ctx,
                out,
                from,
                last_dts: None,
                header: false,
                strip_adts: false,
            };
            let st = ff::ffi::avformat_new_stream(ctx, std::ptr::null());
            if st.is_null() {
                bail!("no RTP stream");
            }
            ff::ffi::avcodec_parameters_copy((*st).codecpar, stream.params.as_ptr());
            (*(*st).codecpar).codec_tag = 0;
            track.strip_adts = configure_adts((*st).codecpar)?;
            (*st).time_base = stream.time_base.into();
            let buffer = ff::ffi::av_malloc(PACKET as usize) as *mut u8;
            let opaque = &mut *track.out as *mut Out as *mut c_void;
            let pb = ff::ffi::avio_alloc_context(
                buffer,
                PACKET,
                1,
                opaque,
                None,
                Some(write_packet),
                None,
            );
            if buffer.is_null() || pb.is_null() {
                bail!("no memory for an RTP stream");
            }
            (*pb).max_packet_size = PACKET;
            (*ctx).pb = pb;
            (*ctx).packet_size = PACKET as u32;
            let r = ff::ffi::avformat_write_header(ctx, std::ptr::null_mut());
            if r < 0 {
                bail!(
                    "RTP can't carry the input's {}: {}",
                    ff::codec::Id::from((*(*st).codecpar).codec_id).name(),
                    ff::Error::from(r)
                );
            }
            track.header = true;
            Ok(track)
        }
    }

    /// Writes `p` (of the input's time base `tb`), its decoding time kept rising.
    fn write(&mut self, mut p: ff::Packet, tb: ff::Rational) {
        if self.strip_adts {
            if let Some(Some(n)) = p.data().map(adts_header_len) {
                let mut raw = ff::Packet::copy(&p.data().unwrap_or_default()[n..]);
                raw.set_pts(p.pts());
                raw.set_dts(p.dts());
                raw.set_duration(p.duration());
                raw.set_flags(p.flags());
                p = raw;
            }
        }
        // SAFETY: the context is open with one stream.
        let out_tb: ff::Rational = unsafe { (*(*(*self.ctx).streams)).time_base.into() };
        p.rescale_ts(tb, out_tb);
        if let Some(dts) = p.dts() {
            if let Some(last) = self.last_dts.filter(|&l| dts <= l) {
                p.set_dts(Some(last + 1));
                if p.pts().is_some_and(|pts| pts <= last) {
                    p.set_pts(Some(last + 1));
                }
            }
            self.last_dts = p.dts();
        }
        p.set_stream(0);
        p.set_position(-1);
        // SAFETY: the packet is valid and the context open; a failed write loses the packet
        // (a reader sees a gap), never the path.
        unsafe {
            ff::ffi::av_write_frame(self.ctx, p.as_mut_ptr());
        }
    }
}

/// The path's thread: the tracks of the input as it last opened.
struct Packetizer {
    path: Arc<Path>,
    streams: Vec<InStream>,
    video: usize,
    tracks: Vec<Track>,
    times: Vec<crate::media::timebase::Timeline>,
}

impl Packetizer {
    fn new(path: Arc<Path>) -> Self {
        Self {
            path,
            streams: Vec::new(),
            video: 0,
            tracks: Vec::new(),
            times: Vec::new(),
        }
    }

    fn run(mut self, rx: Receiver<Msg>) {
        while let Ok(msg) = rx.recv() {
            match msg {
                Msg::Open(streams, video) => self.opened(streams, video),
                Msg::Packet(p) => self.packet(p),
            }
        }
        self.tracks.clear();
        self.path.describe(None);
    }

    /// The input (re)opened: its video and audio become tracks, described in SDP.
    fn opened(&mut self, streams: Vec<InStream>, video: usize) {
        let same = self.streams.len() == streams.len()
            && self
                .streams
                .iter()
                .zip(&streams)
                .all(|(a, b)| a.params.id() == b.params.id());
        if same && !self.tracks.is_empty() {
            return;
        }
        self.tracks.clear();
        self.times = vec![Default::default(); streams.len()];
        let wanted = streams
            .iter()
            .enumerate()
            .filter(|(i, s)| *i == video || s.kind == ff::media::Type::Audio);
        for (i, s) in wanted {
            match Track::new(&self.path, self.tracks.len(), (s, i)) {
                Ok(t) => self.tracks.push(t),
                Err(e) if i == video => {
                    crate::warn!("rtsp {}: {e:#}; it is not served", self.path.name);
                    self.tracks.clear();
                    break;
                }
                Err(e) => crate::info!("rtsp {}: {e:#}; its audio is left out", self.path.name),
            }
        }
        self.streams = streams;
        self.video = video;
        let mut sdp = self.sdp();
        if sdp.is_none() && self.tracks.len() > 1 {
            // The sound can't be described: the video alone, said.
            crate::info!(
                "rtsp {}: its sound can't be described in SDP; the video is served alone",
                self.path.name
            );
            self.tracks.retain(|t| t.from == video);
            for (n, t) in self.tracks.iter_mut().enumerate() {
                t.out.track = n;
            }
            sdp = self.sdp();
        }
        self.path.describe(sdp);
    }

    /// The tracks in SDP, each with its control (`streamid=N`).
    fn sdp(&mut self) -> Option<String> {
        if self.tracks.is_empty() {
            return None;
        }
        let mut ctxs: Vec<*mut ff::ffi::AVFormatContext> =
            self.tracks.iter().map(|t| t.ctx).collect();
        let mut buf = vec![0 as std::ffi::c_char; 16384];
        // SAFETY: the contexts are open; the buffer's size is given.
        let r = unsafe {
            ff::ffi::av_sdp_create(
                ctxs.as_mut_ptr(),
                ctxs.len() as c_int,
                buf.as_mut_ptr(),
                buf.len() as c_int,
            )
        };
        if r < 0 {
            return None;
        }
        // SAFETY: av_sdp_create wrote a NUL-terminated string into the buffer.
        let sdp = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
        Some(sdp.to_string_lossy().into_owned())
    }

    fn packet(&mut self, mut p: ff::Packet) {
        let s = p.stream();
        let Some(stream) = self.streams.get(s) else {
            return;
        };
        let tb = stream.time_base;
        if p.dts().is_none() && p.pts().is_none() {
            return;
        }
        if let Some(t) = self.times.get_mut(s) {
            t.carry(&mut p, tb);
        }
        if s == self.video && p.is_key() {
            self.path.keyframe();
        }
        if let Some(track) = self.tracks.iter_mut().find(|t| t.from == s) {
            track.write(p, tb);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_adts_stream_gets_the_config_its_header_says() {
        // AAC LC (profile 1), 48 kHz, stereo: 0x11 0x90, as FFmpeg's aac_adtstoasc makes it.
        assert_eq!(asc_of(1, 48000, 2), Some([0x11, 0x90]));
        // AAC LC, 44.1 kHz, mono: 0x12 0x08.
        assert_eq!(asc_of(1, 44100, 1), Some([0x12, 0x08]));
        assert_eq!(asc_of(1, 12345, 2), None);
        assert_eq!(asc_of(1, 48000, 0), None);
        assert_eq!(adts_header_len(&[0xFF, 0xF1, 0, 0, 0, 0, 0, 1]), Some(7));
        assert_eq!(
            adts_header_len(&[0xFF, 0xF0, 0, 0, 0, 0, 0, 0, 0, 1]),
            Some(9)
        );
        assert_eq!(adts_header_len(&[0x21, 0x10, 0, 0, 0, 0, 0, 1]), None);
    }
}
