//! The input's audio encoded again where a container can't hold its codec (Opus, Vorbis or
//! PCM to an RTMP server, an MPEG-TS stream or an MP4; AAC to a WebM file): decoded by
//! libavcodec, converted by libswresample to 32-bit float (to 48 kHz where the encoder has
//! no profile for the input's rate), cut into the encoder's frames and encoded to AAC, or to
//! Opus for WebM (libopus), as ffmpeg does when a container takes no stream copy. The same
//! encoder, without an output, makes a camera's Opus for WebRTC (`Reencode::new`,
//! `feed_to`: the packets to whoever takes them).
//!
//! Invariants: every decoded sample is encoded once, in order (the last partial frame at
//! `finish`), but where `restart` says packets were left out; the encoded frames are timed by the samples before them, from the first
//! decoded frame's time on the output's timeline, so the sound stays where the copy would
//! have put it; a packet that fails to decode is skipped and counted (said at `finish`).

use anyhow::{Context, Result};
use ffmpeg_next as ff;

/// AAC's sampling rates (ISO 14496-3); another rate is converted to 48 kHz.
const AAC_RATES: [u32; 12] = [
    96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000,
];

/// Opus's sampling rates (libopus); another rate is converted to 48 kHz.
const OPUS_RATES: [u32; 5] = [48000, 24000, 16000, 12000, 8000];

/// What the audio is encoded to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// AAC, FFmpeg's own encoder (float planes).
    Aac,
    /// Opus, libopus (interleaved float).
    Opus,
}

impl Target {
    /// Its codec.
    pub fn id(self) -> ff::codec::Id {
        match self {
            Target::Aac => ff::codec::Id::AAC,
            Target::Opus => ff::codec::Id::OPUS,
        }
    }

    fn encoder(self) -> Option<ff::Codec> {
        match self {
            Target::Aac => ff::encoder::find(ff::codec::Id::AAC),
            Target::Opus => ff::encoder::find_by_name("libopus"),
        }
    }

    /// The encoder's rate for an input of `rate`.
    fn rate(self, rate: u32) -> u32 {
        let rates: &[u32] = match self {
            Target::Aac => &AAC_RATES,
            Target::Opus => &OPUS_RATES,
        };
        match rates.contains(&rate) {
            true => rate,
            false => 48000,
        }
    }

    /// The samples it takes: float planes (AAC) or interleaved float (libopus).
    fn sample(self) -> ff::format::Sample {
        use ff::format::sample::Type;
        match self {
            Target::Aac => ff::format::Sample::F32(Type::Planar),
            Target::Opus => ff::format::Sample::F32(Type::Packed),
        }
    }
}

/// Where an encoded packet goes (its time in samples of the encoder's rate).
pub type Put<'a> = dyn FnMut(&mut ff::Packet) -> Result<()> + 'a;

/// `packet` (its time in samples at `rate`) written as output stream `to` of `out`.
fn write_to(
    out: &mut ff::format::context::Output,
    (to, rate): (usize, u32),
    packet: &mut ff::Packet,
) -> Result<()> {
    let out_tb = out.stream(to).context("audio stream")?.time_base();
    packet.set_stream(to);
    packet.rescale_ts((1, rate as i32), out_tb);
    packet
        .write_interleaved(out)
        .context("writing an audio packet")
}

/// One audio stream decoded and encoded again into the output's stream `to` (or, made
/// `new`, into whatever takes its packets: WebRTC's Opus).
pub struct Reencode {
    decoder: ff::decoder::Audio,
    encoder: ff::encoder::Audio,
    resampler: Option<ff::software::resampling::Context>,
    /// The output stream.
    to: usize,
    /// The encoder's rate, channels and frame length (samples).
    rate: u32,
    layout: ff::ChannelLayout,
    frame: usize,
    /// Samples decoded and converted, not yet encoded, one vector a channel.
    fifo: Vec<Vec<f32>>,
    /// What it encodes to.
    target: Target,
    /// The next encoded frame's time, samples on the output's timeline.
    next: Option<i64>,
    /// Packets that failed to decode.
    failed: u64,
}

// SAFETY: the codec and resampler contexts are used by the writer that owns this, on one
// thread at a time (moved whole into the stream's thread).
unsafe impl Send for Reencode {}

impl Reencode {
    /// Adds to `out` a stream of `target` for the input's stream of `params`; None where
    /// this FFmpeg has no encoder for it.
    pub fn open(
        out: &mut ff::format::context::Output,
        params: ff::codec::Parameters,
        target: Target,
    ) -> Result<Option<Self>> {
        let global = out
            .format()
            .flags()
            .contains(ff::format::Flags::GLOBAL_HEADER);
        let Some(mut me) = Self::new(params, target, global)? else {
            return Ok(None);
        };
        let codec = me.encoder.codec().context("the audio encoder's codec")?;
        let mut ost = out.add_stream(codec)?;
        ost.set_parameters(&me.encoder);
        ost.set_time_base((1, me.rate as i32));
        me.to = ost.index();
        Ok(Some(me))
    }

    /// The stream of `params` decoded and encoded again to `target` (its parameter sets
    /// apart where `global`); None where this FFmpeg has no encoder for it.
    pub fn new(
        params: ff::codec::Parameters,
        target: Target,
        global: bool,
    ) -> Result<Option<Self>> {
        let Some(codec) = target.encoder() else {
            return Ok(None);
        };
        let decoder = ff::codec::context::Context::from_parameters(params)?
            .decoder()
            .audio()
            .context("opening the audio's decoder")?;
        let rate = target.rate(decoder.rate());
        let layout = match decoder.channel_layout() {
            l if l.is_empty() => ff::ChannelLayout::default(i32::from(decoder.channels())),
            l => l,
        };
        let mut enc = ff::codec::context::Context::new_with_codec(codec)
            .encoder()
            .audio()?;
        enc.set_rate(rate as i32);
        enc.set_channel_layout(layout);
        enc.set_channels(layout.channels());
        enc.set_format(target.sample());
        enc.set_bit_rate(64_000 * layout.channels().max(1) as usize);
        enc.set_time_base((1, rate as i32));
        if global {
            enc.set_flags(ff::codec::Flags::GLOBAL_HEADER);
        }
        let encoder = enc
            .open_as(codec)
            .with_context(|| format!("opening the {} encoder", target.id().name()))?;
        let frame = (encoder.frame_size() as usize).max(1);
        Ok(Some(Self {
            decoder,
            encoder,
            resampler: None,
            to: usize::MAX,
            rate,
            layout,
            frame,
            fifo: vec![Vec::new(); layout.channels().max(1) as usize],
            target,
            next: None,
            failed: 0,
        }))
    }

    /// Decodes `packet` (its time already moved to the output's timeline, in `tb`) and
    /// writes what fills whole frames.
    pub fn feed(
        &mut self,
        out: &mut ff::format::context::Output,
        packet: &ff::Packet,
        tb: ff::Rational,
    ) -> Result<()> {
        let to = (self.to, self.rate);
        self.feed_to(packet, tb, &mut |p| write_to(out, to, p))
    }

    /// Decodes `packet` (its time in `tb`) and hands `put` each packet encoded of what fills
    /// whole frames (its time in samples of the encoder's rate, `rate`).
    pub fn feed_to(&mut self, packet: &ff::Packet, tb: ff::Rational, put: &mut Put) -> Result<()> {
        if self.decoder.send_packet(packet).is_err() {
            self.failed += 1;
            return Ok(());
        }
        let mut decoded = ff::frame::Audio::empty();
        while self.decoder.receive_frame(&mut decoded).is_ok() {
            if self.next.is_none() {
                let at = decoded.pts().or(packet.pts()).unwrap_or(0);
                let seconds = crate::media::timebase::seconds(at, tb);
                self.next = Some((seconds * f64::from(self.rate)).round() as i64);
            }
            self.convert(&decoded)?;
            self.encode_whole(put, false)?;
        }
        Ok(())
    }

    /// Converts `decoded` to float planes at the encoder's rate, onto the FIFO.
    fn convert(&mut self, decoded: &ff::frame::Audio) -> Result<()> {
        let want = ff::format::Sample::F32(ff::format::sample::Type::Planar);
        let resampler = match &mut self.resampler {
            Some(r) => r,
            None => self
                .resampler
                .insert(ff::software::resampling::Context::get(
                    decoded.format(),
                    match decoded.channel_layout() {
                        l if l.is_empty() => {
                            ff::ChannelLayout::default(i32::from(decoded.channels()))
                        }
                        l => l,
                    },
                    decoded.rate(),
                    want,
                    self.layout,
                    self.rate,
                )?),
        };
        let room = decoded.samples() * self.rate as usize / decoded.rate().max(1) as usize + 256;
        let mut converted = ff::frame::Audio::new(want, room, self.layout);
        resampler.run(decoded, &mut converted)?;
        for (ch, fifo) in self.fifo.iter_mut().enumerate() {
            fifo.extend_from_slice(&converted.plane::<f32>(ch)[..converted.samples()]);
        }
        Ok(())
    }

    /// Encodes the FIFO's whole frames (and, `last`, what is left).
    fn encode_whole(&mut self, put: &mut Put, last: bool) -> Result<()> {
        loop {
            let have = self.fifo[0].len();
            let n = match (have >= self.frame, last && have > 0) {
                (true, _) => self.frame,
                (false, true) => have,
                (false, false) => return Ok(()),
            };
            let mut f = ff::frame::Audio::new(self.target.sample(), n, self.layout);
            self.take_into(&mut f, n);
            f.set_rate(self.rate);
            let pts = self.next.unwrap_or(0);
            f.set_pts(Some(pts));
            self.next = Some(pts + n as i64);
            self.encoder.send_frame(&f).context("encoding audio")?;
            self.drain(put)?;
        }
    }

    /// Moves `n` samples of each channel from the FIFO into `f`, in its layout.
    fn take_into(&mut self, f: &mut ff::frame::Audio, n: usize) {
        let channels = self.fifo.len();
        match self.target {
            Target::Aac => {
                for (ch, fifo) in self.fifo.iter().enumerate() {
                    f.plane_mut::<f32>(ch)[..n].copy_from_slice(&fifo[..n]);
                }
            }
            Target::Opus => {
                // SAFETY: a packed frame's one plane holds `n * channels` samples, as
                // `Audio::new` allocated it for `n` samples of the layout.
                let all = unsafe {
                    std::slice::from_raw_parts_mut(
                        f.data_mut(0).as_mut_ptr().cast::<f32>(),
                        n * channels,
                    )
                };
                for (ch, fifo) in self.fifo.iter().enumerate() {
                    for (i, v) in fifo[..n].iter().enumerate() {
                        all[i * channels + ch] = *v;
                    }
                }
            }
        }
        for fifo in &mut self.fifo {
            fifo.drain(..n);
        }
    }

    /// Starts again after packets were left out: what was decoded is dropped, and the next
    /// packet's time is the encoded sound's again.
    pub fn restart(&mut self) {
        self.decoder.flush();
        for fifo in &mut self.fifo {
            fifo.clear();
        }
        self.next = None;
    }

    /// The encoder's rate: its packets' times are counted in its samples.
    pub fn rate(&self) -> u32 {
        self.rate
    }

    /// Hands the encoder's packets to `put`.
    fn drain(&mut self, put: &mut Put) -> Result<()> {
        let mut packet = ff::Packet::empty();
        while self.encoder.receive_packet(&mut packet).is_ok() {
            put(&mut packet)?;
        }
        Ok(())
    }

    /// Encodes what is left and ends the encoder.
    pub fn finish(&mut self, out: &mut ff::format::context::Output) -> Result<()> {
        let to = (self.to, self.rate);
        let put = &mut |p: &mut ff::Packet| write_to(out, to, p);
        self.encode_whole(put, true)?;
        self.encoder.send_eof().context("ending the audio")?;
        self.drain(put)?;
        if self.failed > 0 {
            crate::info!(
                "{} audio packet(s) could not be decoded and were skipped",
                self.failed
            );
        }
        Ok(())
    }
}
