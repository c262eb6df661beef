//! Packets written into a container as they came, neither decoded nor encoded: the streams
//! of an input laid out in an output someone else opened (`--record`'s files, `--codec
//! copy`'s file or stream), each packet's times made the output's.
//!
//! Invariants: the output's zero is `origin_us` of the input's time (packets a little
//! before it stay: the muxer shifts the file's times); a decoding time that does not rise
//! in the output's time base is nudged past the last one, as ffmpeg's muxing does, and the
//! packet kept; AAC in ADTS (as MPEG-TS carries it) becomes MP4's raw AAC where the output
//! is MP4 or MOV; video the container can't hold is an error, audio it can't hold is left
//! out and said once; nothing here opens or names a file.

use anyhow::{bail, Context, Result};
use ff::Rescale;
use ffmpeg_next as ff;

/// One stream of an input as it opened: what an output needs to hold it.
pub struct InStream {
    /// Its codec parameters (a copy).
    pub params: ff::codec::Parameters,
    /// Its packets' time base.
    pub time_base: ff::Rational,
    /// Video, audio, …
    pub kind: ff::media::Type,
}

// SAFETY: the parameters are a copy owned by the value, read by one thread at a time.
unsafe impl Send for InStream {}

impl InStream {
    /// Every stream of `input`, as it opened.
    pub fn all_of(input: &ff::format::context::Input) -> Vec<Self> {
        input
            .streams()
            .map(|s| InStream {
                params: s.parameters(),
                time_base: s.time_base(),
                kind: s.parameters().medium(),
            })
            .collect()
    }
}

/// An output being written with an input's packets (module doc).
pub struct Remux {
    out: ff::format::context::Output,
    /// What the output is called in messages (its file, or its URL).
    what: String,
    /// Per input stream: its stream in the output, if it has one.
    map: Vec<Option<usize>>,
    /// Per input stream: ADTS made raw AAC, where the output is MP4 or MOV (FFmpeg 5.1's
    /// muxer refuses ADTS and does not convert it).
    adts: Vec<Option<super::bsf::AdtsToAsc>>,
    /// The input's time (µs) that is the output's zero.
    pub origin_us: i64,
    /// The last decoding time written per input stream (in the output's time base).
    last_dts: Vec<Option<i64>>,
    /// Packets written.
    pub packets: u64,
}

impl Remux {
    /// Lays `streams` out in `out` (the video, `video`, and the audio where `audio`) and
    /// writes its header with `options`; the output's zero is `origin_us`.
    pub fn start(
        mut out: ff::format::context::Output,
        what: String,
        (streams, video, audio): (&[InStream], usize, bool),
        origin_us: i64,
        options: ff::Dictionary,
    ) -> Result<Self> {
        let map = add_streams(&mut out, streams, (video, audio), &what)?;
        let mp4 = matches!(muxer_name(&out).as_str(), "mp4" | "mov");
        let adts = streams
            .iter()
            .map(|s| match mp4 && s.params.id() == ff::codec::Id::AAC {
                true => super::bsf::AdtsToAsc::new(&s.params, s.time_base).map(Some),
                false => Ok(None),
            })
            .collect::<Result<_>>()?;
        out.write_header_with(options)
            .with_context(|| format!("writing the header of '{what}'"))?;
        Ok(Self {
            out,
            what,
            map,
            adts,
            origin_us,
            last_dts: vec![None; streams.len()],
            packets: 0,
        })
    }

    /// Writes `p` (its times made the output's); false where it is not written (a stream
    /// the output has not, audio the filter keeps for later).
    pub fn write(&mut self, mut p: ff::Packet, streams: &[InStream]) -> Result<bool> {
        let from = p.stream();
        let Some(to) = self.map.get(from).copied().flatten() else {
            return Ok(false);
        };
        let tb = streams[from].time_base;
        let shift = self.origin_us.rescale(ff::Rational::new(1, 1_000_000), tb);
        p.set_pts(p.pts().map(|t| t - shift));
        p.set_dts(p.dts().map(|t| t - shift));
        let out_tb = self.out.stream(to).context("remuxed stream")?.time_base();
        p.rescale_ts(tb, out_tb);
        if let Some(dts) = p.dts() {
            let dts = match self.last_dts[from] {
                Some(last) if dts <= last => {
                    p.set_dts(Some(last + 1));
                    if p.pts().is_some_and(|pts| pts <= last) {
                        p.set_pts(Some(last + 1));
                    }
                    last + 1
                }
                _ => dts,
            };
            self.last_dts[from] = Some(dts);
        }
        p.set_stream(to);
        p.set_position(-1);
        let p = match &mut self.adts[from] {
            Some(bsf) => match bsf.convert(p)? {
                Some(p) => p,
                None => return Ok(false),
            },
            None => p,
        };
        p.write_interleaved(&mut self.out)
            .with_context(|| format!("writing '{}'", self.what))?;
        match self.io_error(false) {
            0 => {
                self.packets += 1;
                Ok(true)
            }
            e => bail!("writing '{}': {}", self.what, ff::Error::from(e)),
        }
    }

    /// Writes the trailer; an error where it, or a write before it, failed.
    pub fn finish(&mut self) -> Result<()> {
        // A fragmented MP4's trailer answers the size of its index, not 0 (ffmpeg-next's
        // `write_trailer` calls that an error): only a negative answer is one.
        // SAFETY: the context is open, its header was written, and this is its one trailer.
        let ret = unsafe { ff::ffi::av_write_trailer(self.out.as_mut_ptr()) };
        // A write that failed in FFmpeg's buffer (a full disk) is kept in the I/O context,
        // not always answered by the trailer.
        let ret = if ret < 0 { ret } else { self.io_error(true) };
        match ret < 0 {
            true => bail!("finishing '{}': {}", self.what, ff::Error::from(ret)),
            false => Ok(()),
        }
    }

    /// The error the output's I/O context holds (0: none), after its buffer is written out
    /// where `flush` (a packet's write only fills the buffer, whose own flushes record
    /// their errors there).
    fn io_error(&mut self, flush: bool) -> i32 {
        // SAFETY: the context is open; its `pb` (opened by `output_as`) is valid or null,
        // and flushing it only writes its buffer.
        unsafe {
            let pb = (*self.out.as_mut_ptr()).pb;
            if pb.is_null() {
                return 0;
            }
            if flush {
                ff::ffi::avio_flush(pb);
            }
            (*pb).error.min(0)
        }
    }
}

/// The name of `out`'s muxer ("mp4", "mpegts", …).
fn muxer_name(out: &ff::format::context::Output) -> String {
    // SAFETY: `out` is an open output context, so its oformat and its name are valid.
    unsafe {
        std::ffi::CStr::from_ptr((*(*out.as_ptr()).oformat).name)
            .to_string_lossy()
            .into_owned()
    }
}

/// The input's video and (where `audio`) audio streams as streams of `out`: per input
/// stream, its index in the output (module doc).
fn add_streams(
    out: &mut ff::format::context::Output,
    streams: &[InStream],
    (video, audio): (usize, bool),
    what: &str,
) -> Result<Vec<Option<usize>>> {
    let mut map = vec![None; streams.len()];
    for (i, s) in streams.iter().enumerate() {
        let is_video = i == video;
        let wanted = is_video || (audio && s.kind == ff::media::Type::Audio);
        if !wanted {
            continue;
        }
        let id = s.params.id();
        if !holds(out, id) {
            if is_video {
                bail!(
                    "'{what}' can't hold the input's {} video (.mkv holds any codec)",
                    id.name()
                );
            }
            crate::warn!(
                "'{what}' can't hold the input's {} audio (stream {i}): it is left out (.mkv holds any audio)",
                id.name()
            );
            continue;
        }
        let mut ost = out.add_stream(ff::encoder::find(ff::codec::Id::None))?;
        ost.set_parameters(s.params.clone());
        ost.set_time_base(s.time_base);
        // SAFETY: the stream's parameters were just set; a zero tag lets the muxer choose
        // its own for the codec.
        unsafe { (*ost.parameters().as_mut_ptr()).codec_tag = 0 };
        map[i] = Some(ost.index());
    }
    Ok(map)
}

/// Whether `out`'s container holds `id` (MPEG-TS answers no query: it holds what it has a
/// stream type for, which is every codec a camera sends).
fn holds(out: &ff::format::context::Output, id: ff::codec::Id) -> bool {
    // SAFETY: `out` is an open output context, so its oformat is valid.
    let answer = unsafe {
        ff::ffi::avformat_query_codec(
            (*out.as_ptr()).oformat,
            id.into(),
            ff::ffi::FF_COMPLIANCE_NORMAL,
        )
    };
    answer == 1 || muxer_name(out) == "mpegts"
}
