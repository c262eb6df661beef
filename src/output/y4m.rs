//! `--output -`: a YUV4MPEG2 stream (I420 as `C420jpeg`, as ffmpeg's `yuv4mpegpipe` writes
//! it, or as the input's chroma siting where the samples pass untouched; or gray as
//! `Cmono`) on standard output, for `… | ffmpeg -f yuv4mpegpipe -i - …` to encode with any
//! codec; or headerless NV12 or BGR frames, which Y4M can't hold (`--output-format`).
//!
//! Invariants: a frame goes to a pipe through a 128 KiB buffer hot in the cache (`pipe`:
//! the pipe's lock is held for less), to a file straight from the slot; nothing else is
//! ever written to standard output (messages and the progress bar go to standard error),
//! and it is closed as soon as the last frame is written (its reader finishes while
//! framepipe releases the GPU); a reader that goes away (`| head`) ends the run cleanly, as
//! a stop; a frame counts as written only once standard output accepted all of its bytes;
//! frames come from the backend in the format written (converted on the GPU), or in BGR
//! where a window shares them, converted here exactly as OpenCV's `cvtColor`
//! (`COLOR_BGR2YUV_I420`) does.

use std::fs::File;
use std::io::{ErrorKind, Write};

use anyhow::{Context, Result};

use super::Frame;
use super::{Output, Taken};
use crate::frame::FrameSize;
use crate::pixel::{self, PixelFormat};

/// What standard output writes, and the format its frames come in.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The frames written: i420 or gray (Y4M), nv12 or bgr24 (headerless).
    pub write: PixelFormat,
    /// The frames the sink is given: `write`, or BGR (converted here).
    pub given: PixelFormat,
    /// Aspect ratio, interlacing and chroma siting for the header (the input's, where it
    /// said; the siting centred where the chroma samples don't pass untouched:
    /// `app::y4m_tags`).
    pub tags: crate::media::tags::PictureTags,
}

impl Layout {
    /// The Y4M colour tag of the written frames; None for a headerless stream.
    fn y4m_tag(self) -> Option<&'static str> {
        match self.write {
            PixelFormat::I420 => Some(self.tags.chroma.y4m()),
            PixelFormat::Gray => Some("Cmono"),
            _ => None,
        }
    }
}

/// Standard output, counting the bytes it accepted.
struct Counted {
    file: File,
    accepted: u64,
}

impl Write for Counted {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.file.write(buf)?;
        self.accepted += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.file.flush()
    }
}

/// Frames whose ends `Y4mOut` keeps: more than a pipe's largest buffer (1 MiB by default,
/// `pipe::prepare` asks for it) holds of the smallest frames.
const TAKEN_KEPT: usize = 4096;

/// A Y4M (or headerless) stream on standard output.
pub struct Y4mOut {
    out: std::io::BufWriter<Counted>,
    /// Where each frame handed to `out` ends, in bytes from the stream's start: a frame
    /// counts as written once standard output accepted all of it.
    ends: std::collections::VecDeque<u64>,
    /// Bytes handed to `out` so far.
    queued: u64,
    /// Frames standard output accepted whole.
    stored: u64,
    /// Where each of the last frames accepted whole ends (the pipe holds at most this many
    /// unread), for `uncount_unread`.
    taken_ends: std::collections::VecDeque<u64>,
    size: FrameSize,
    rate: (i32, i32),
    layout: Layout,
    /// A frame converted from BGR, where frames come as BGR.
    converted: Vec<u8>,
    /// What a frame is copied into, a piece at a time, to be written to a pipe
    /// (`pipe::prepare`: empty for a file, written straight from the slot).
    stage: Vec<u8>,
    started: bool,
    closed: bool,
    written: u64,
}

impl Y4mOut {
    /// Standard output, for `size` frames at `rate` frames per second, laid out as `layout`.
    pub fn new(size: FrameSize, rate: (i32, i32), layout: Layout) -> Result<Self> {
        layout
            .write
            .check(size)
            .map_err(|e| anyhow::anyhow!("--output -: {e}"))?;
        anyhow::ensure!(
            (layout.write.writable() && layout.given == PixelFormat::Bgr24)
                || layout.given == layout.write,
            "--output -: can't write {} frames given {} ones",
            layout.write,
            layout.given
        );
        use std::os::fd::AsFd;
        // Our own handle on fd 1, unbuffered by Rust's line buffering (frames are binary).
        let fd = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("--output -: standard output")?;
        Ok(Self {
            out: std::io::BufWriter::with_capacity(
                1 << 20,
                Counted {
                    file: File::from(fd),
                    accepted: 0,
                },
            ),
            ends: std::collections::VecDeque::new(),
            queued: 0,
            stored: 0,
            taken_ends: std::collections::VecDeque::new(),
            size,
            rate,
            layout,
            converted: if layout.given == layout.write {
                Vec::new()
            } else {
                vec![0; layout.write.bytes(size)]
            },
            stage: crate::pipe::prepare(std::io::stdout().as_fd()),
            started: false,
            closed: false,
            written: 0,
        })
    }

    fn put(&mut self, frame: &[u8]) -> std::io::Result<()> {
        let tag = self.layout.y4m_tag();
        if !self.started {
            let (n, d) = self.rate;
            if let Some(tag) = tag {
                let t = self.layout.tags;
                let range = t.range.map(|r| format!(" {}", r.y4m())).unwrap_or_default();
                let header = format!(
                    "YUV4MPEG2 W{} H{} F{n}:{d} I{} A{}:{} {tag}{range}\n",
                    self.size.width, self.size.height, t.interlace, t.aspect.0, t.aspect.1
                );
                self.queued += header.len() as u64;
                self.out.write_all(header.as_bytes())?;
            }
            self.started = true;
        }
        let frame = if self.converted.is_empty() {
            frame
        } else {
            pixel::from_bgr(self.layout.write, self.size, frame, &mut self.converted);
            &self.converted
        };
        self.queued += frame.len() as u64 + if tag.is_some() { 6 } else { 0 };
        self.ends.push_back(self.queued);
        if tag.is_some() {
            self.out.write_all(b"FRAME\n")?;
        }
        let result = if self.stage.is_empty() {
            self.out.write_all(frame)
        } else {
            // To a pipe, through the staging buffer (`pipe`), after the FRAME line.
            self.out.flush().and_then(|()| {
                for chunk in frame.chunks(self.stage.len()) {
                    self.stage[..chunk.len()].copy_from_slice(chunk);
                    self.out.get_mut().write_all(&self.stage[..chunk.len()])?;
                }
                Ok(())
            })
        };
        self.count_accepted();
        result
    }

    /// Closes standard output once the last frame is written, so that its reader sees the
    /// end at once and finishes (an encoder writes its last frames and its trailer) while
    /// framepipe releases the GPU and reports: fd 1 is pointed at /dev/null (nothing is
    /// written to it again; a later stray write can't reach a file opened in its place) and
    /// the sink's own handle is swapped for /dev/null too, so no descriptor of the pipe is
    /// left open. Where /dev/null can't be opened, standard output stays open until exit.
    fn close_standard_output(&mut self) {
        use std::os::fd::AsRawFd;
        let Ok(null) = std::fs::OpenOptions::new().write(true).open("/dev/null") else {
            return;
        };
        // SAFETY: dup2 onto fd 1 only makes fd 1 another handle of /dev/null, which stays
        // open as `null` while it runs; fd 1 is the process's, never owned by a File here.
        if unsafe { libc::dup2(null.as_raw_fd(), 1) } < 0 {
            return;
        }
        // Dropping the old File closes the sink's duplicate of the pipe.
        self.out.get_mut().file = null;
    }

    /// Moves the frames standard output has accepted whole from `ends` to `stored`.
    fn count_accepted(&mut self) {
        let accepted = self.out.get_ref().accepted;
        while let Some(end) = self.ends.front().copied().filter(|&end| end <= accepted) {
            self.ends.pop_front();
            self.stored += 1;
            self.taken_ends.push_back(end);
            if self.taken_ends.len() > TAKEN_KEPT {
                self.taken_ends.pop_front();
            }
        }
    }

    /// Once the reader of a pipe went away: the frames it never read (still in the pipe,
    /// which keeps its bytes until the writer closes too) are taken back from `stored`, so
    /// that it counts what the reader took.
    fn uncount_unread(&mut self) {
        let fd = std::os::fd::AsRawFd::as_raw_fd(&self.out.get_ref().file);
        let mut unread: libc::c_int = 0;
        // SAFETY: fstat and FIONREAD on our own open descriptor write only the values given.
        let is_pipe = unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            libc::fstat(fd, &mut st) == 0 && st.st_mode & libc::S_IFMT == libc::S_IFIFO
        };
        // SAFETY: as above.
        if !is_pipe || unsafe { libc::ioctl(fd, libc::FIONREAD, &mut unread) } != 0 {
            return;
        }
        let read = self
            .out
            .get_ref()
            .accepted
            .saturating_sub(unread.max(0) as u64);
        let taken = self.taken_ends.iter().filter(|&&end| end <= read).count() as u64;
        self.stored = self.stored.min(taken);
    }
}

impl Output for Y4mOut {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        let what = match self.layout.y4m_tag() {
            Some(_) => "YUV4MPEG2",
            None => "headerless",
        };
        let converted = if self.converted.is_empty() {
            ""
        } else {
            ", converted from BGR on the CPU"
        };
        format!(
            "standard output ({what}, {}, {}{converted})",
            self.layout.write, self.size
        )
    }
    fn consume(&mut self, frame: &Frame) -> Result<Taken> {
        if self.closed {
            return Ok(Taken::Closed);
        }
        let size = frame.size();
        anyhow::ensure!(size == self.size, "frame size changed to {size}");
        crate::ensure_kept!(
            frame.format() == self.layout.given,
            "standard output was promised {} frames and given {}",
            self.layout.given,
            frame.format()
        );
        match self.put(frame.bytes) {
            Ok(()) => {
                self.written += 1;
                Ok(Taken::Kept)
            }
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                self.count_accepted();
                self.uncount_unread();
                crate::info!(
                    "standard output was closed by its reader: stopping; it took {} frames",
                    self.stored
                );
                Ok(Taken::Closed)
            }
            Err(e) => Err(e).context("writing to standard output"),
        }
    }
    fn finish(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        let flushed = self.out.flush();
        self.count_accepted();
        if flushed
            .as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::BrokenPipe)
        {
            self.uncount_unread();
        }
        if flushed.is_ok() {
            self.close_standard_output();
        }
        match flushed {
            Err(e) if e.kind() != ErrorKind::BrokenPipe => {
                Err(e).context("writing to standard output")
            }
            _ => Ok(()),
        }
    }
    fn stored(&self) -> Option<u64> {
        // A frame counts once standard output accepted all of its bytes (a full disk or a
        // closed pipe took only part of the last ones).
        Some(self.stored)
    }
}
