//! `--record`: each input's own packets written as they arrived, video and audio, without
//! decoding or encoding (what an NVR keeps of a camera), beside whatever the run makes of
//! its frames. `--segment` cuts the recording into files of about that length, each
//! starting on a video keyframe.
//!
//! The input hands every packet to a `Recording` (a `source::tap::PacketTap`) through a
//! bounded channel; a thread of the recording's own remuxes them, so a slow disk never
//! holds the input.
//!
//! Invariants: a file starts on a video keyframe, its timestamps counted from it (audio
//! that came after the keyframe but is timed just before it goes in too: every packet
//! after the first keyframe is in exactly one file, but one with no time at all, which no
//! muxer can place: an RTSP camera's parameter sets before its first picture); it is
//! written under a hidden `.NAME.part` name made with `create_new` (nothing is ever
//! replaced), fragmented where it is MP4 or MOV (so a crash loses at most the open
//! segment), and renamed to its own name, never over another file, once its trailer is
//! written; an input that reopens (a reconnect) starts a new file, as do timestamps that
//! go back; packets the channel can't take at once are counted as lost and said.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use crossbeam_channel::{Receiver, Sender};
use ff::packet::Mut;
use ff::Rescale;
use ffmpeg_next as ff;

/// Packets waiting for the recording's thread: about 8 s of a 1080p30 camera.
const QUEUE: usize = 2048;

/// `--record`'s setting for one input: the name (its `{n}` put in) and the segment length.
#[derive(Clone, Debug, PartialEq)]
pub struct RecordSpec {
    /// The file's name, or each segment's pattern (`{seg}`, `%Y%m%d-%H%M%S`).
    pub name: String,
    /// `--segment`: a new file from the first keyframe this long after the last began.
    pub segment: Option<Duration>,
}

/// The containers a recording is written in, by the extension of its name.
pub fn muxer_of(name: &str) -> Option<&'static str> {
    let ext = Path::new(name).extension()?.to_str()?.to_ascii_lowercase();
    Some(match ext.as_str() {
        "mp4" => "mp4",
        "mov" => "mov",
        "mkv" => "matroska",
        "ts" => "mpegts",
        _ => return None,
    })
}

/// Checks a `--record` name before the run: a container it is written in, a folder that
/// exists, and (with `--segment`) a name that changes from one segment to the next.
pub fn check(name: &str, segment: Option<Duration>) -> Result<()> {
    if muxer_of(name).is_none() {
        bail!("--record '{name}': a recording is written as .mp4, .mov, .mkv or .ts (the packets as they came, not re-encoded)");
    }
    let dir = Path::new(name)
        .parent()
        .filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = dir.filter(|d| !d.is_dir()) {
        bail!(
            "--record '{name}': the folder '{}' does not exist",
            dir.display()
        );
    }
    let varies = ["{seg}", "%Y", "%m", "%d", "%H", "%M", "%S"]
        .iter()
        .any(|t| name.contains(t));
    if segment.is_some() && !varies {
        bail!("--record '{name}' with --segment: put {{seg}} (the segment's number) or the time (%Y%m%d-%H%M%S) in the name, so that each segment has its own");
    }
    Ok(())
}

/// What went through a recording, for the run's end.
#[derive(Debug, Default)]
pub struct Recorded {
    /// The files closed, in order.
    pub files: Vec<PathBuf>,
    /// Packets written.
    pub packets: u64,
    /// Video packets written.
    pub video_packets: u64,
    /// Packets the queue could not take (the disk fell behind).
    pub lost: u64,
    /// Packets before the first keyframe (not decodable alone), left out.
    pub before_key: u64,
    /// Packets with no time (no file can place them), left out.
    pub untimed: u64,
    /// What ended the recording early, if anything did.
    pub error: Option<String>,
}

enum Msg {
    Open(Vec<InStream>, usize),
    Packet(ff::Packet),
    End,
}

/// One stream of the input as it opened.
struct InStream {
    params: ff::codec::Parameters,
    time_base: ff::Rational,
    kind: ff::media::Type,
}

// SAFETY: the parameters are a copy owned by the message, read by one thread at a time.
unsafe impl Send for InStream {}

/// One input's recording: the tap its source writes to, and the thread that writes files.
pub struct Recording {
    tx: Sender<Msg>,
    lost: Arc<AtomicU64>,
    said_lost: Mutex<bool>,
    what: String,
    thread: Mutex<Option<std::thread::JoinHandle<Recorded>>>,
}

impl Recording {
    /// Starts the recording of `what` (the input, for messages) to `spec`.
    pub fn start(spec: RecordSpec, what: String) -> Result<Arc<Self>> {
        crate::source::media::init();
        let (tx, rx) = crossbeam_channel::bounded(QUEUE);
        let label = what.clone();
        let thread = std::thread::Builder::new()
            .name("record".into())
            .spawn(move || Writer::new(spec, label).run(rx))?;
        Ok(Arc::new(Self {
            tx,
            lost: Arc::new(AtomicU64::new(0)),
            said_lost: Mutex::new(false),
            what,
            thread: Mutex::new(Some(thread)),
        }))
    }

    /// Ends the recording: the open file is finished and renamed; what was recorded.
    pub fn finish(&self) -> Recorded {
        let _ = self.tx.send_timeout(Msg::End, Duration::from_secs(1));
        let thread = self.thread.lock().ok().and_then(|mut t| t.take());
        let mut recorded = thread.and_then(|t| t.join().ok()).unwrap_or_default();
        recorded.lost += self.lost.load(Ordering::SeqCst);
        recorded
    }
}

impl crate::source::tap::PacketTap for Recording {
    fn open(&self, input: &ff::format::context::Input, video: usize, _from: f64) {
        let streams = input
            .streams()
            .map(|s| InStream {
                params: s.parameters(),
                time_base: s.time_base(),
                kind: s.parameters().medium(),
            })
            .collect();
        let _ = self.tx.try_send(Msg::Open(streams, video));
    }

    fn packet(&self, packet: ff::Packet) {
        // Disconnected: the recording stopped on an error, which it said.
        if let Err(crossbeam_channel::TrySendError::Full(_)) = self.tx.try_send(Msg::Packet(packet))
        {
            self.lost.fetch_add(1, Ordering::SeqCst);
            let mut said = self.said_lost.lock().unwrap_or_else(|e| e.into_inner());
            if !*said {
                *said = true;
                crate::warn!(
                    "recording {}: the disk fell behind and packets are lost (the summary counts them)",
                    self.what
                );
            }
        }
    }
}

/// The file being written.
struct Segment {
    out: ff::format::context::Output,
    part: PathBuf,
    name: PathBuf,
    /// Per input stream: its stream in the file, if it has one.
    map: Vec<Option<usize>>,
    /// Per input stream: AAC in ADTS (as MPEG-TS carries it) made MP4's raw AAC, where the
    /// file is MP4 or MOV (FFmpeg 5.1's muxer refuses ADTS and does not convert it).
    adts: Vec<Option<AdtsToAsc>>,
    /// The first keyframe's time (µs): the file's zero.
    origin_us: i64,
    /// The last decoding time written per input stream (its time base), to keep them rising.
    last_dts: Vec<Option<i64>>,
}

/// The recording's thread: takes packets, writes segments.
struct Writer {
    spec: RecordSpec,
    what: String,
    streams: Vec<InStream>,
    video: usize,
    segment: Option<Segment>,
    next_number: u32,
    recorded: Recorded,
}

impl Writer {
    fn new(spec: RecordSpec, what: String) -> Self {
        Self {
            spec,
            what,
            streams: Vec::new(),
            video: 0,
            segment: None,
            next_number: 0,
            recorded: Recorded::default(),
        }
    }

    fn run(mut self, rx: Receiver<Msg>) -> Recorded {
        while let Ok(msg) = rx.recv() {
            let step = match msg {
                Msg::Open(streams, video) => {
                    let closed = self.close();
                    self.streams = streams;
                    self.video = video;
                    closed
                }
                Msg::Packet(p) => self.packet(p),
                Msg::End => break,
            };
            if let Err(e) = step {
                let why = format!("{e:#}");
                crate::warn!("recording {}: {why}; the recording stops here", self.what);
                self.recorded.error = Some(why);
                let _ = self.close();
                return self.recorded;
            }
        }
        if let Err(e) = self.close() {
            crate::warn!("recording {}: {e:#}", self.what);
            self.recorded.error = Some(format!("{e:#}"));
        }
        self.recorded
    }

    /// A packet's time in µs (its decoding time, else its presentation time).
    fn time_us(&self, p: &ff::Packet) -> Option<i64> {
        let tb = self.streams.get(p.stream())?.time_base;
        let t = p.dts().or(p.pts())?;
        Some(t.rescale(tb, ff::Rational::new(1, 1_000_000)))
    }

    fn packet(&mut self, p: ff::Packet) -> Result<()> {
        if p.stream() >= self.streams.len() {
            return Ok(());
        }
        // A packet with no time can't be placed in a file (its muxer refuses it, and the
        // recording would stop): an RTSP camera's parameter sets sent before its first
        // timed picture are one. The pictures after them carry what they need.
        if p.dts().is_none() && p.pts().is_none() {
            self.recorded.untimed += 1;
            return Ok(());
        }
        let key = p.stream() == self.video && p.is_key();
        if key {
            if let (Some(seg), Some(len), Some(t)) =
                (&self.segment, self.spec.segment, self.time_us(&p))
            {
                if t - seg.origin_us >= len.as_micros() as i64 {
                    self.close()?;
                }
            }
            if self.segment.is_none() {
                let origin = self.time_us(&p).unwrap_or(0);
                self.segment = Some(self.open(origin)?);
            }
        }
        let Some(seg) = &mut self.segment else {
            self.recorded.before_key += 1;
            return Ok(());
        };
        let video = p.stream() == self.video;
        match seg.write(p, &self.streams)? {
            Wrote::Yes => {
                self.recorded.packets += 1;
                self.recorded.video_packets += u64::from(video);
            }
            Wrote::Skipped => {}
            // The video's times went back (the camera restarted): a new file from its next
            // keyframe.
            Wrote::WentBack => self.close()?,
        }
        Ok(())
    }

    /// Opens the next file, its zero at `origin_us`.
    fn open(&mut self, origin_us: i64) -> Result<Segment> {
        let name = PathBuf::from(expand(&self.spec.name, self.next_number));
        self.next_number += 1;
        let part = claim_part(&name)?;
        let muxer = muxer_of(&self.spec.name).unwrap_or("matroska");
        let mut out = ff::format::output_as(&part, muxer)
            .with_context(|| format!("opening '{}'", part.display()))?;
        let map = add_streams(&mut out, &self.streams, self.video, &name)?;
        let mp4 = matches!(muxer, "mp4" | "mov");
        let adts = self
            .streams
            .iter()
            .map(|s| match mp4 && s.params.id() == ff::codec::Id::AAC {
                true => AdtsToAsc::new(&s.params, s.time_base).map(Some),
                false => Ok(None),
            })
            .collect::<Result<_>>()?;
        let mut options = ff::Dictionary::new();
        if matches!(muxer, "mp4" | "mov") {
            // delay_moov: the header waits for the first fragment, so that what a stream
            // only says in its packets (AAC's configuration from MPEG-TS) is in it.
            options.set(
                "movflags",
                "+frag_keyframe+empty_moov+delay_moov+default_base_moof",
            );
        }
        out.write_header_with(options)
            .with_context(|| format!("writing the header of '{}'", part.display()))?;
        Ok(Segment {
            out,
            part,
            name,
            map,
            adts,
            origin_us,
            last_dts: vec![None; self.streams.len()],
        })
    }

    /// Finishes the open file (trailer, rename), if one is open.
    fn close(&mut self) -> Result<()> {
        let Some(mut seg) = self.segment.take() else {
            return Ok(());
        };
        // A fragmented MP4's trailer answers the size of its index, not 0 (ffmpeg-next's
        // `write_trailer` calls that an error): only a negative answer is one.
        // SAFETY: the context is open, its header was written, and this is its one trailer.
        let ret = unsafe { ff::ffi::av_write_trailer(seg.out.as_mut_ptr()) };
        if ret < 0 {
            bail!(
                "finishing '{}': {}",
                seg.part.display(),
                ff::Error::from(ret)
            );
        }
        drop(seg.out);
        let name = rename_without_replacing(&seg.part, &seg.name)?;
        crate::debug!("recording {}: '{}' closed", self.what, name.display());
        self.recorded.files.push(name);
        Ok(())
    }
}

enum Wrote {
    Yes,
    Skipped,
    WentBack,
}

impl Segment {
    fn write(&mut self, mut p: ff::Packet, streams: &[InStream]) -> Result<Wrote> {
        let from = p.stream();
        let Some(to) = self.map[from] else {
            return Ok(Wrote::Skipped);
        };
        let tb = streams[from].time_base;
        let shift = self.origin_us.rescale(ff::Rational::new(1, 1_000_000), tb);
        p.set_pts(p.pts().map(|t| t - shift));
        p.set_dts(p.dts().map(|t| t - shift));
        let video = streams[from].kind == ff::media::Type::Video;
        if let Some(dts) = p.dts() {
            let rises = self.last_dts[from].is_none_or(|last| dts > last);
            if !rises && video {
                return Ok(Wrote::WentBack);
            }
            // Audio out of order (a packet again): left out. Audio a little before the
            // file's zero (sent after the keyframe, timed before it) stays: the muxer
            // shifts the file's times to start at 0.
            if !rises {
                return Ok(Wrote::Skipped);
            }
            self.last_dts[from] = Some(dts);
        }
        let out_tb = self.out.stream(to).context("recorded stream")?.time_base();
        p.rescale_ts(tb, out_tb);
        p.set_stream(to);
        p.set_position(-1);
        let p = match &mut self.adts[from] {
            Some(bsf) => match bsf.convert(p)? {
                Some(p) => p,
                None => return Ok(Wrote::Skipped),
            },
            None => p,
        };
        p.write_interleaved(&mut self.out)
            .with_context(|| format!("writing '{}'", self.part.display()))?;
        Ok(Wrote::Yes)
    }
}

/// FFmpeg's `aac_adtstoasc` bitstream filter on one stream: ADTS frames in, raw AAC out, the
/// stream's AudioSpecificConfig given to the muxer as new extradata on the first packet.
/// (ffmpeg-sys-next has no bindings for `libavcodec/bsf.h`: the few calls are declared here.)
struct AdtsToAsc(*mut bsf::AVBSFContext);

// SAFETY: the filter is used by the recording's one thread.
unsafe impl Send for AdtsToAsc {}

mod bsf {
    use ffmpeg_next::ffi::{AVCodecParameters, AVPacket, AVRational};
    use std::ffi::{c_char, c_int, c_void};

    /// The head of libavcodec's `AVBSFContext`, as declared from FFmpeg 4.0 to 7.1.
    #[repr(C)]
    pub struct AVBSFContext {
        pub av_class: *const c_void,
        pub filter: *const c_void,
        pub priv_data: *mut c_void,
        pub par_in: *mut AVCodecParameters,
        pub par_out: *mut AVCodecParameters,
        pub time_base_in: AVRational,
        pub time_base_out: AVRational,
    }

    extern "C" {
        pub fn av_bsf_get_by_name(name: *const c_char) -> *const c_void;
        pub fn av_bsf_alloc(filter: *const c_void, ctx: *mut *mut AVBSFContext) -> c_int;
        pub fn av_bsf_init(ctx: *mut AVBSFContext) -> c_int;
        pub fn av_bsf_send_packet(ctx: *mut AVBSFContext, pkt: *mut AVPacket) -> c_int;
        pub fn av_bsf_receive_packet(ctx: *mut AVBSFContext, pkt: *mut AVPacket) -> c_int;
        pub fn av_bsf_free(ctx: *mut *mut AVBSFContext);
    }
}

impl AdtsToAsc {
    fn new(params: &ff::codec::Parameters, time_base: ff::Rational) -> Result<Self> {
        // SAFETY: the filter is looked up by a static name and allocated by libavcodec; its
        // input parameters are a copy of `params` (valid while this runs) and its time base
        // is set before av_bsf_init, as bsf.h requires; on failure it is freed here.
        unsafe {
            let filter = bsf::av_bsf_get_by_name(c"aac_adtstoasc".as_ptr());
            if filter.is_null() {
                bail!("this FFmpeg has no aac_adtstoasc filter to write AAC from MPEG-TS into MP4");
            }
            let mut ctx = std::ptr::null_mut();
            if bsf::av_bsf_alloc(filter, &mut ctx) < 0 {
                bail!("allocating the aac_adtstoasc filter");
            }
            let this = Self(ctx);
            ff::ffi::avcodec_parameters_copy((*ctx).par_in, params.as_ptr());
            (*ctx).time_base_in = time_base.into();
            let ret = bsf::av_bsf_init(ctx);
            if ret < 0 {
                bail!(
                    "starting the aac_adtstoasc filter: {}",
                    ff::Error::from(ret)
                );
            }
            Ok(this)
        }
    }

    /// The packet as raw AAC (None where the filter keeps it for later).
    fn convert(&mut self, mut p: ff::Packet) -> Result<Option<ff::Packet>> {
        let mut out = ff::Packet::empty();
        // SAFETY: the context is initialised; send takes the packet's reference (leaving
        // it blank), receive fills `out`, both owned here.
        let ret = unsafe {
            let sent = bsf::av_bsf_send_packet(self.0, p.as_mut_ptr());
            if sent < 0 {
                sent
            } else {
                bsf::av_bsf_receive_packet(self.0, out.as_mut_ptr())
            }
        };
        match ret {
            0 => Ok(Some(out)),
            e if e == ff::ffi::AVERROR(libc::EAGAIN) => Ok(None),
            e => bail!("converting ADTS audio for MP4: {}", ff::Error::from(e)),
        }
    }
}

impl Drop for AdtsToAsc {
    fn drop(&mut self) {
        // SAFETY: the context was allocated by av_bsf_alloc and is freed once.
        unsafe { bsf::av_bsf_free(&mut self.0) };
    }
}

/// The input's video and audio streams as streams of `out`: per input stream, its index in
/// the file. Audio the container can't hold is left out (said once); video it can't hold
/// is an error.
fn add_streams(
    out: &mut ff::format::context::Output,
    streams: &[InStream],
    video: usize,
    name: &Path,
) -> Result<Vec<Option<usize>>> {
    let mut map = vec![None; streams.len()];
    for (i, s) in streams.iter().enumerate() {
        let is_video = i == video;
        if !is_video && s.kind != ff::media::Type::Audio {
            continue;
        }
        let id = s.params.id();
        if !holds(out, id) {
            if is_video {
                bail!(
                    "'{}' can't hold the input's {} video (.mkv holds any codec)",
                    name.display(),
                    id.name()
                );
            }
            crate::warn!(
                "'{}' can't hold the input's {} audio (stream {i}): it is left out (.mkv holds any audio)",
                name.display(),
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
    let (answer, name) = unsafe {
        let format = (*out.as_ptr()).oformat;
        (
            ff::ffi::avformat_query_codec(format, id.into(), ff::ffi::FF_COMPLIANCE_NORMAL),
            std::ffi::CStr::from_ptr((*format).name).to_bytes() == b"mpegts",
        )
    };
    answer == 1 || name
}

/// The name of segment `number`: `{seg}` as five digits, and the local time's `%Y %m %d %H
/// %M %S` (and `%%`) as strftime writes them.
fn expand(pattern: &str, number: u32) -> String {
    let now = local_time();
    let mut out = String::new();
    let numbered = pattern.replace("{seg}", &format!("{number:05}"));
    let mut chars = numbered.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.peek().copied() {
            Some('Y') => out.push_str(&format!("{:04}", now.tm_year + 1900)),
            Some('m') => out.push_str(&format!("{:02}", now.tm_mon + 1)),
            Some('d') => out.push_str(&format!("{:02}", now.tm_mday)),
            Some('H') => out.push_str(&format!("{:02}", now.tm_hour)),
            Some('M') => out.push_str(&format!("{:02}", now.tm_min)),
            Some('S') => out.push_str(&format!("{:02}", now.tm_sec)),
            Some('%') => out.push('%'),
            _ => {
                out.push('%');
                continue;
            }
        }
        chars.next();
    }
    out
}

/// The local time now, broken down.
fn local_time() -> libc::tm {
    // SAFETY: time(NULL) only returns the time; localtime_r writes into the `tm` given.
    unsafe {
        let t = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&t, &mut tm);
        tm
    }
}

/// A new hidden file beside `name` to write it under (`.NAME.part`, or `.NAME.K.part` where
/// that is taken), made with `create_new` so that nothing is replaced.
fn claim_part(name: &Path) -> Result<PathBuf> {
    let dir = name.parent().unwrap_or(Path::new(""));
    let file = name
        .file_name()
        .context("a recording needs a file name")?
        .to_string_lossy();
    for k in 0..1000 {
        let part = match k {
            0 => dir.join(format!(".{file}.part")),
            k => dir.join(format!(".{file}.{k}.part")),
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&part)
        {
            Ok(_) => return Ok(part),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating '{}'", part.display())),
        }
    }
    bail!(
        "'{}': a thousand unfinished recordings are in the way",
        name.display()
    )
}

/// Renames `part` to `name`, or to `NAME-K.EXT` where `name` is taken (never over a file);
/// the name it got.
fn rename_without_replacing(part: &Path, name: &Path) -> Result<PathBuf> {
    let stem = name
        .file_stem()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let ext = name
        .extension()
        .map(|e| format!(".{}", e.to_string_lossy()))
        .unwrap_or_default();
    for k in 0..1000 {
        let to = match k {
            0 => name.to_path_buf(),
            k => name.with_file_name(format!("{stem}-{k}{ext}")),
        };
        match rustix::fs::renameat_with(
            rustix::fs::CWD,
            part,
            rustix::fs::CWD,
            &to,
            rustix::fs::RenameFlags::NOREPLACE,
        ) {
            Ok(()) => return Ok(to),
            Err(rustix::io::Errno::EXIST) => continue,
            Err(e) => {
                return Err(std::io::Error::from(e)).with_context(|| {
                    format!("renaming '{}' to '{}'", part.display(), to.display())
                })
            }
        }
    }
    bail!(
        "'{}': a thousand files of that name are in the way",
        name.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_name_takes_its_number_and_the_time() {
        let name = expand("cam-0-{seg}.mp4", 7);
        assert_eq!(name, "cam-0-00007.mp4");
        let name = expand("cam-%Y%m%d-%H%M%S-%%.ts", 0);
        assert_eq!(name.len(), "cam-20261202-061500-%.ts".len(), "{name}");
        assert!(
            name.starts_with("cam-20") && name.ends_with("-%.ts"),
            "{name}"
        );
    }

    #[test]
    fn a_name_that_does_not_change_is_refused_with_segments() {
        let seg = Some(Duration::from_secs(60));
        assert!(check("cam.mp4", seg).is_err());
        assert!(check("cam-{seg}.mp4", seg).is_ok());
        assert!(check("cam-%H%M%S.mkv", seg).is_ok());
        assert!(check("cam.mp4", None).is_ok());
        assert!(check("cam.avi", None).is_err());
    }

    #[test]
    fn nothing_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let name = dir.path().join("a.mp4");
        std::fs::write(&name, b"keep").unwrap();
        let part = claim_part(&name).unwrap();
        let again = claim_part(&name).unwrap();
        assert_ne!(part, again);
        let got = rename_without_replacing(&part, &name).unwrap();
        assert_eq!(got, dir.path().join("a-1.mp4"));
        assert_eq!(std::fs::read(&name).unwrap(), b"keep");
    }
}
