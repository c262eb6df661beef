//! Frames from standard input (or a named pipe, read the same way): a YUV4MPEG2 stream
//! (what `ffmpeg -i ANY -f yuv4mpegpipe -` writes, so that framepipe reads every codec and
//! container ffmpeg reads), or headerless frames of a format and size given with
//! `--input-format` and `--size`.
//!
//! Invariants: the header is read and checked before the pipeline starts (a bad one is an
//! error naming what is wrong); frames are read into the ring's page-locked buffers in
//! their own format (the backend converts them): from a pipe through a 128 KiB buffer hot
//! in the cache (`pipe`: the pipe's lock is held for less), from a file straight; only the
//! bytes that come in with a FRAME line and a frame's last few pass through the reader's
//! 8 KiB line buffer besides; a stream that ends inside a frame is an error naming the
//! frame, after the frames before it went through; the end of the stream between frames is
//! the end.

use std::io::{BufRead, BufReader, Read};

use anyhow::{bail, Context, Result};

use super::{PictureTags, Range, Read as Got, Siting, Source};
use crate::frame::FrameSize;
use crate::pixel::PixelFormat;

/// The longest header or frame line accepted.
const MAX_LINE: usize = 4096;
/// The reader's own buffer, in bytes: twice the longest line.
const LINE_BUFFER: usize = 8192;

/// What `--input -` reads: a Y4M stream, or headerless frames of any pixel format (with the
/// pixel formats' own names and aliases, so the two lists can't drift).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputFormat {
    /// A YUV4MPEG2 stream (size, rate and chroma from its header).
    Y4m,
    /// Headerless frames of this format (`--size` needed).
    Raw(PixelFormat),
}

impl InputFormat {
    /// Y4M, then every pixel format, in `PixelFormat::ALL`'s order.
    pub const ALL: [InputFormat; 8] = {
        let mut all = [InputFormat::Y4m; 8];
        let mut i = 0;
        while i < PixelFormat::ALL.len() {
            all[i + 1] = InputFormat::Raw(PixelFormat::ALL[i]);
            i += 1;
        }
        all
    };

    /// The pixel format of raw frames; None for Y4M (its header says).
    pub fn pixel(self) -> Option<PixelFormat> {
        match self {
            InputFormat::Y4m => None,
            InputFormat::Raw(f) => Some(f),
        }
    }
}

/// A Y4M stream's header, as read.
#[derive(Clone, Debug, PartialEq)]
pub struct Header {
    /// Frame size.
    pub size: FrameSize,
    /// Frames per second as a fraction.
    pub rate: Option<(i32, i32)>,
    /// The frames' layout.
    pub format: PixelFormat,
    /// What the header says that framepipe reads differently (interlacing, full range,
    /// chroma siting), for the log.
    pub notes: Vec<String>,
    /// Pixel aspect ratio and interlacing, which a Y4M output keeps.
    pub tags: PictureTags,
}

/// Reads one line (without its newline) of at most `MAX_LINE` bytes; None at the end of
/// the stream before any byte.
fn line(r: &mut impl BufRead, what: &str, from: &str) -> Result<Option<String>> {
    let mut buf = Vec::new();
    let n = r
        .by_ref()
        .take(MAX_LINE as u64 + 1)
        .read_until(b'\n', &mut buf)
        .with_context(|| format!("reading {what} from {from}"))?;
    if n == 0 {
        return Ok(None);
    }
    if buf.last() != Some(&b'\n') {
        bail!("{from}: {what} is not a line of at most {MAX_LINE} bytes (is this a YUV4MPEG2 stream?)");
    }
    buf.pop();
    String::from_utf8(buf)
        .map(Some)
        .map_err(|_| anyhow::anyhow!("{from}: {what} is not text (is this a YUV4MPEG2 stream?)"))
}

/// The widest and highest frame a Y4M header may give.
pub const MAX_Y4M_SIDE: usize = 16384;

/// A YUV4MPEG2 header framepipe can't read.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    /// Not `YUV4MPEG2` at the start (`{0}`: what was read, standard input or a pipe).
    #[error("{0} is not a YUV4MPEG2 stream (it does not start with 'YUV4MPEG2'); pipe one with ffmpeg -i IN -f yuv4mpegpipe -, or give --input-format for raw frames")]
    NotY4m(String),
    /// A tag's value that does not parse (`what`: the tag's meaning).
    #[error("Y4M header: bad {what} '{value}'{hint}")]
    Bad {
        /// The tag's meaning ("width", "rate", …).
        what: &'static str,
        /// As given.
        value: String,
        /// What framepipe reads, where it helps.
        hint: &'static str,
    },
    /// A colour space framepipe does not read.
    #[error("Y4M colour space '{0}' is not supported (8-bit 420jpeg, 420mpeg2, 420paldv, 422, 444 and mono are): convert with ffmpeg -pix_fmt yuv420p")]
    Colour(String),
    /// No `W` or no `H`.
    #[error("Y4M header: no width (W) or height (H)")]
    NoSize,
    /// A size the format can't hold.
    #[error(transparent)]
    Format(#[from] crate::pixel::FormatError),
}

impl HeaderError {
    /// The same error, naming `from` (a pipe's name) where it names the stream.
    fn read_from(self, from: &str) -> Self {
        match self {
            HeaderError::NotY4m(_) => HeaderError::NotY4m(from.into()),
            other => other,
        }
    }

    fn bad(what: &'static str, value: &str) -> Self {
        HeaderError::Bad {
            what,
            value: value.into(),
            hint: "",
        }
    }
}

/// Parses a YUV4MPEG2 header line (without its newline).
pub fn parse_header(text: &str) -> Result<Header, HeaderError> {
    let mut tokens = text.split(' ').filter(|t| !t.is_empty());
    if tokens.next() != Some("YUV4MPEG2") {
        return Err(HeaderError::NotY4m("standard input".into()));
    }
    let (mut w, mut h, mut rate, mut format) = (None, None, None, PixelFormat::I420);
    let mut notes = Vec::new();
    let mut tags = PictureTags::default();
    for t in tokens {
        let (tag, value) = t.split_at(1);
        match tag {
            "W" => w = Some(side("width", value)?),
            "H" => h = Some(side("height", value)?),
            "F" => rate = frame_rate(value)?.or(rate),
            "C" => format = colour(value, &mut tags, &mut notes)?,
            "A" => {
                tags.aspect = aspect(value)?;
                if tags.aspect.0 != tags.aspect.1 {
                    notes.push(format!(
                        "pixels {}:{} wide: filtered as stored, the ratio kept in a Y4M output",
                        tags.aspect.0, tags.aspect.1
                    ));
                }
            }
            "I" => tags.interlace = interlacing(value, &mut notes)?,
            "X" if value.eq_ignore_ascii_case("COLORRANGE=FULL") => {
                tags.range = Some(Range::Full);
                notes.push(
                    "full range: filters read it as video range; `copy` keeps it, and says so in a Y4M output"
                        .into(),
                )
            }
            "X" if value.eq_ignore_ascii_case("COLORRANGE=LIMITED") => {
                tags.range = Some(Range::Limited)
            }
            _ => {} // comments (X) and the rest change nothing here
        }
    }
    let (Some(w), Some(h)) = (w, h) else {
        return Err(HeaderError::NoSize);
    };
    let size = FrameSize::new(w, h);
    format.check(size)?;
    Ok(Header {
        size,
        rate,
        format,
        notes,
        tags,
    })
}

/// A `W` or `H` tag's value: 1 to `MAX_Y4M_SIDE` pixels.
fn side(which: &'static str, value: &str) -> Result<usize, HeaderError> {
    const READS: &str = " (framepipe reads 1 to 16384 pixels)";
    const _: () = assert!(MAX_Y4M_SIDE == 16384, "READS names the limit");
    value
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=MAX_Y4M_SIDE).contains(n))
        .ok_or(HeaderError::Bad {
            what: which,
            value: value.into(),
            hint: READS,
        })
}

/// An `F` tag's value, `N:D` (None for `0:…`, an unknown rate).
fn frame_rate(value: &str) -> Result<Option<(i32, i32)>, HeaderError> {
    let bad = || HeaderError::bad("rate", value);
    let (n, d) = value.split_once(':').ok_or_else(bad)?;
    match (n.parse::<i32>(), d.parse::<i32>()) {
        (Ok(n), Ok(d)) if n > 0 && d > 0 => Ok(Some((n, d))),
        (Ok(0), _) => Ok(None),
        _ => Err(bad()),
    }
}

/// A `C` tag's colour space: its pixel format, and its chroma siting in `tags` (said in
/// `notes` where it is not centred).
fn colour(
    value: &str,
    tags: &mut PictureTags,
    notes: &mut Vec<String>,
) -> Result<PixelFormat, HeaderError> {
    let format = match value {
        "420jpeg" | "420" | "420mpeg2" | "420paldv" => PixelFormat::I420,
        "422" => PixelFormat::Yuv422p,
        "444" => PixelFormat::Yuv444p,
        "mono" => PixelFormat::Gray,
        other => return Err(HeaderError::Colour(other.into())),
    };
    tags.chroma = match value {
        "420mpeg2" => Siting::Left,
        "420paldv" => Siting::TopLeft,
        _ => Siting::Center,
    };
    if matches!(value, "420mpeg2" | "420paldv") {
        notes.push(format!(
            "chroma sited as {value}: converted as centred (as OpenCV does), kept as {value} where it passes untouched"
        ));
    }
    Ok(format)
}

/// An `A` tag's pixel aspect ratio, `N:D`.
fn aspect(value: &str) -> Result<(u32, u32), HeaderError> {
    value
        .split_once(':')
        .and_then(|(n, d)| Some((n.parse::<u32>().ok()?, d.parse::<u32>().ok()?)))
        .ok_or_else(|| HeaderError::bad("aspect ratio", value))
}

/// An `I` tag's interlacing (`p`, `t`, `b`, `m`, `?`), said in `notes` where fields are
/// interlaced.
fn interlacing(value: &str, notes: &mut Vec<String>) -> Result<char, HeaderError> {
    if !matches!(value, "p" | "t" | "b" | "m" | "?") {
        return Err(HeaderError::bad("interlacing", value));
    }
    if !matches!(value, "p" | "?") {
        notes.push(format!(
            "interlaced ({}): fields are processed as one frame, the tag kept in a Y4M output",
            match value {
                "t" => "top field first",
                "b" => "bottom field first",
                _ => "mixed",
            }
        ));
    }
    Ok(value.chars().next().unwrap_or('p'))
}

/// Frames from standard input, or from a named pipe read the same way.
pub struct Stdin {
    reader: BufReader<Box<dyn Read + Send>>,
    /// "standard input", or "pipe 'PATH'": what the messages name.
    name: String,
    y4m: bool,
    format: PixelFormat,
    size: FrameSize,
    rate: Option<(i32, i32)>,
    /// A Y4M header's aspect ratio and interlacing.
    tags: Option<PictureTags>,
    /// Where a skipped frame goes (allocated on the first skip).
    skipped: Vec<u8>,
    /// What a pipe's bytes are read into before they are copied into the slot
    /// (`pipe::prepare`: empty for a file, read straight into the slot).
    stage: Vec<u8>,
    frames: u64,
    what: String,
}

impl Stdin {
    /// Opens standard input as `format` (Y4M reads its header now; raw formats need `size`).
    pub fn open(format: InputFormat, size: Option<FrameSize>, fps: Option<f64>) -> Result<Self> {
        use std::io::IsTerminal;
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            bail!("--input -: standard input is a terminal; pipe frames into it (ffmpeg -i IN -f yuv4mpegpipe - | framepipe --input -)");
        }
        use std::os::fd::AsFd;
        let stage = crate::pipe::prepare(stdin.as_fd());
        let name = "standard input".into();
        Self::from_reader(Box::new(stdin), name, stage, format, size, fps)
    }

    /// Opens the named pipe `path` (waiting for its writer, as a FIFO's open does) and reads
    /// it as standard input is read.
    pub fn open_pipe(
        path: &std::path::Path,
        format: InputFormat,
        size: Option<FrameSize>,
        fps: Option<f64>,
    ) -> Result<Self> {
        let name = format!("pipe '{}'", path.display());
        let file = std::fs::File::open(path).with_context(|| format!("opening {name}"))?;
        use std::os::fd::AsFd;
        let stage = crate::pipe::prepare(file.as_fd());
        Self::from_reader(Box::new(file), name, stage, format, size, fps)
    }

    fn from_reader(
        reader: Box<dyn Read + Send>,
        name: String,
        stage: Vec<u8>,
        format: InputFormat,
        size: Option<FrameSize>,
        fps: Option<f64>,
    ) -> Result<Self> {
        // A small buffer: it holds the header and FRAME lines; a frame's bytes are read
        // into the slot (through `stage` from a pipe) past it (`BufReader` passes a read at
        // least its capacity past an empty buffer), and only the bytes read with a line, or
        // a frame's last few, go through it. (With 1 MiB, a third of each 1080p frame did.)
        let mut reader = BufReader::with_capacity(LINE_BUFFER, reader);
        let mut tags = None;
        let (pixel, size, rate, y4m, notes) = match format {
            InputFormat::Y4m => {
                let text = line(&mut reader, "the YUV4MPEG2 header", &name)?
                    .with_context(|| format!("{name} is empty: no YUV4MPEG2 header came"))?;
                let h = parse_header(&text).map_err(|e| e.read_from(&name))?;
                tags = Some(h.tags);
                (h.format, h.size, h.rate, true, h.notes)
            }
            raw => {
                let pixel = raw.pixel().unwrap_or(PixelFormat::Bgr24);
                // A Y4M stream read as raw frames would be filtered as noise, its header and
                // FRAME lines taken for pixels.
                use std::io::BufRead;
                if reader
                    .fill_buf()
                    .is_ok_and(|b| b.starts_with(b"YUV4MPEG2 "))
                {
                    bail!("--input-format {pixel}: {name} is a YUV4MPEG2 stream, not raw frames; leave --input-format out (or give y4m) and its header gives the size, rate and format");
                }
                let size = size.context("--input-format for raw frames needs --size WxH")?;
                pixel.check(size)?;
                let rate = fps.filter(|f| *f > 0.0).map(crate::frame::ratio_of);
                (pixel, size, rate, false, Vec::new())
            }
        };
        for note in &notes {
            crate::info!("{name}: {note}");
        }
        Ok(Self {
            reader,
            y4m,
            format: pixel,
            size,
            rate,
            tags,
            skipped: Vec::new(),
            stage,
            frames: 0,
            what: format!(
                "{name} ({}, {pixel})",
                if y4m { "YUV4MPEG2" } else { "raw" }
            ),
            name,
        })
    }

    /// Reads the next frame's bytes into `frame`; false at the end between frames.
    fn next_raw(&mut self, frame: &mut [u8]) -> Result<bool> {
        if self.y4m {
            let Some(tag) = line(&mut self.reader, "a FRAME line", &self.name)? else {
                return Ok(false);
            };
            if !tag.starts_with("FRAME") {
                bail!(
                    "{}: frame {} does not start with 'FRAME' (the stream is damaged, or its frames are not the header's size)",
                    self.name,
                    self.frames
                );
            }
        }
        let mut got = 0;
        while got < frame.len() {
            let read = if self.stage.is_empty() {
                self.reader.read(&mut frame[got..])
            } else {
                let want = (frame.len() - got).min(self.stage.len());
                self.reader.read(&mut self.stage[..want]).inspect(|&n| {
                    frame[got..got + n].copy_from_slice(&self.stage[..n]);
                })
            };
            match read {
                Ok(0) if got == 0 && !self.y4m => return Ok(false),
                Ok(0) => bail!(
                    "{} ended inside frame {}: {got} of its {} bytes came (the {} frames before it were processed)",
                    self.name,
                    self.frames,
                    frame.len(),
                    self.frames
                ),
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e).with_context(|| format!("reading {}", self.name)),
            }
        }
        Ok(true)
    }
}

impl Source for Stdin {
    fn describe(&self) -> String {
        let rate = self
            .rate
            .map(|(n, d)| format!(", {n}/{d} fps"))
            .unwrap_or_default();
        format!("{} ({}{rate})", self.what, self.size)
    }
    fn size(&self) -> FrameSize {
        self.size
    }
    fn fps(&self) -> Option<f64> {
        self.rate.map(|(n, d)| f64::from(n) / f64::from(d))
    }
    fn is_live(&self) -> bool {
        false
    }
    fn format(&self) -> PixelFormat {
        self.format
    }
    fn picture_tags(&self) -> Option<PictureTags> {
        self.tags
    }
    fn read(&mut self, frame: &mut [u8]) -> Result<Got> {
        if !self.next_raw(frame)? {
            return Ok(Got::End);
        }
        self.frames += 1;
        Ok(Got::Frame)
    }
    fn skip(&mut self) -> Result<Got> {
        let mut scratch = std::mem::take(&mut self.skipped);
        scratch.resize(self.format.bytes(self.size), 0);
        let got = self.next_raw(&mut scratch);
        self.skipped = scratch;
        Ok(if got? { Got::Frame } else { Got::End })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_headers_as_ffmpeg_writes_them() {
        let h = parse_header("YUV4MPEG2 W1920 H1080 F30000:1001 Ip A1:1 C420jpeg XYSCSS=420JPEG")
            .unwrap();
        assert_eq!(h.size, FrameSize::new(1920, 1080));
        assert_eq!(h.rate, Some((30000, 1001)));
        assert_eq!(h.format, PixelFormat::I420);
        assert!(h.notes.is_empty());
        let h = parse_header("YUV4MPEG2 W64 H48 F25:1 It A0:0 C422 XCOLORRANGE=FULL").unwrap();
        assert_eq!(h.format, PixelFormat::Yuv422p);
        assert_eq!(h.notes.len(), 2, "{:?}", h.notes);
        assert_eq!(
            h.tags,
            PictureTags {
                aspect: (0, 0),
                interlace: 't',
                chroma: Siting::Center,
                range: Some(Range::Full),
            }
        );
        let h = parse_header("YUV4MPEG2 W720 H480 F30000:1001 Ip A10:11 C420mpeg2").unwrap();
        assert_eq!(h.tags.aspect, (10, 11));
        assert_eq!(h.tags.chroma, Siting::Left);
        assert!(
            h.notes.iter().any(|n| n.contains("10:11 wide")),
            "{:?}",
            h.notes
        );
        assert_eq!(
            parse_header("YUV4MPEG2 W7 H8 Cmono").unwrap().format,
            PixelFormat::Gray
        );
        for (bad, says) in [
            ("P6 640 480", "not a YUV4MPEG2 stream"),
            ("YUV4MPEG2 W640", "no width (W) or height (H)"),
            ("YUV4MPEG2 W0 H480", "bad width"),
            ("YUV4MPEG2 W640 H480 Fx", "bad rate"),
            ("YUV4MPEG2 W640 H480 A4", "bad aspect ratio"),
            ("YUV4MPEG2 W640 H480 Iq", "bad interlacing"),
            ("YUV4MPEG2 W640 H480 C420p10", "'420p10' is not supported"),
            (
                "YUV4MPEG2 W641 H480 C420jpeg",
                "need an even width and height",
            ),
        ] {
            let err = parse_header(bad).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    /// A reader over `data` that notes how many bytes each read asked for and got.
    struct Noted {
        data: std::io::Cursor<Vec<u8>>,
        reads: std::sync::Arc<std::sync::Mutex<Vec<(usize, usize)>>>,
    }

    impl Read for Noted {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            // At most 64 KiB a call, as a pipe gives what it holds.
            let n = buf.len().min(64 << 10);
            let got = self.data.read(&mut buf[..n])?;
            self.reads.lock().unwrap().push((buf.len(), got));
            Ok(got)
        }
    }

    #[test]
    fn frames_are_read_into_the_slot_past_the_line_buffer() {
        // Straight (a file), and through the staging buffer (a pipe).
        for stage in [Vec::new(), vec![0; crate::pipe::CHUNK]] {
            read_past_the_line_buffer(stage);
        }
    }

    fn read_past_the_line_buffer(stage: Vec<u8>) {
        let staged = !stage.is_empty();
        let (w, h, frames) = (640usize, 480usize, 4);
        let size = w * h * 3 / 2;
        let mut data = format!("YUV4MPEG2 W{w} H{h} F30:1 C420jpeg\n").into_bytes();
        for f in 0..frames {
            data.extend_from_slice(b"FRAME\n");
            data.extend((0..size).map(|i| (i * 7 + f) as u8));
        }
        let reads = std::sync::Arc::default();
        let noted = Noted {
            data: std::io::Cursor::new(data),
            reads: std::sync::Arc::clone(&reads),
        };
        let mut input = Stdin::from_reader(
            Box::new(noted),
            "standard input".into(),
            stage,
            InputFormat::Y4m,
            None,
            None,
        )
        .unwrap();
        let mut frame = vec![0u8; size];
        for f in 0..frames {
            assert!(input.next_raw(&mut frame).unwrap());
            assert!(frame
                .iter()
                .enumerate()
                .all(|(i, &b)| b == (i * 7 + f) as u8));
        }
        assert!(!input.next_raw(&mut frame).unwrap());
        // The reader's own buffer takes in only the lines and a frame's last bytes: the
        // bytes that came through it, copied twice, are at most two buffers a frame (with
        // the 1 MiB buffer of before, every byte of these frames was).
        let buffered: usize = reads
            .lock()
            .unwrap()
            .iter()
            .filter(|(asked, _)| *asked == LINE_BUFFER)
            .map(|(_, got)| got)
            .sum();
        assert!(
            buffered <= (frames + 1) * 2 * LINE_BUFFER && buffered < frames * size / 10,
            "{buffered} bytes of {} went through the buffer",
            frames * size
        );
        // Through the staging buffer, no read asks for more than it holds.
        let largest = reads.lock().unwrap().iter().map(|(asked, _)| *asked).max();
        assert_eq!(
            largest.unwrap() <= crate::pipe::CHUNK,
            staged,
            "largest read {largest:?}"
        );
    }
}
