//! `--output -`: a YUV4MPEG2 stream (I420, `C420jpeg`, as ffmpeg's `yuv4mpegpipe` writes it)
//! on standard output, for `… | ffmpeg -f yuv4mpegpipe -i - …` to encode with any codec.
//!
//! Invariants: nothing else is ever written to standard output (messages and the progress
//! bar go to standard error); a reader that goes away (`| head`) ends the run cleanly, as
//! a stop; frames are converted exactly as OpenCV's `cvtColor(COLOR_BGR2YUV_I420)` does.

use std::fs::File;
use std::io::{ErrorKind, Write};

use anyhow::{Context, Result};

use super::{Flow, Sink};
use crate::frame::FrameSize;
use crate::pixel::{self, PixelFormat};

/// A Y4M stream on standard output.
pub struct Y4mOut {
    out: std::io::BufWriter<File>,
    size: FrameSize,
    rate: (i32, i32),
    yuv: Vec<u8>,
    started: bool,
    closed: bool,
    written: u64,
}

impl Y4mOut {
    /// Standard output, for `size` frames at `rate` frames per second.
    pub fn new(size: FrameSize, rate: (i32, i32)) -> Result<Self> {
        PixelFormat::I420
            .check(size)
            .map_err(|e| anyhow::anyhow!("--output -: {e}"))?;
        use std::os::fd::AsFd;
        // Our own handle on fd 1, unbuffered by Rust's line buffering (frames are binary).
        let fd = std::io::stdout()
            .as_fd()
            .try_clone_to_owned()
            .context("--output -: standard output")?;
        Ok(Self {
            out: std::io::BufWriter::with_capacity(1 << 20, File::from(fd)),
            size,
            rate,
            yuv: vec![0; PixelFormat::I420.bytes(size)],
            started: false,
            closed: false,
            written: 0,
        })
    }

    fn put(&mut self, frame: &[u8]) -> std::io::Result<()> {
        if !self.started {
            let (n, d) = self.rate;
            writeln!(
                self.out,
                "YUV4MPEG2 W{} H{} F{n}:{d} Ip A1:1 C420jpeg XYSCSS=420JPEG",
                self.size.width, self.size.height
            )?;
            self.started = true;
        }
        pixel::from_bgr(PixelFormat::I420, self.size, frame, &mut self.yuv);
        self.out.write_all(b"FRAME\n")?;
        self.out.write_all(&self.yuv)
    }
}

impl Sink for Y4mOut {
    fn verb(&self) -> &'static str {
        "written"
    }
    fn describe(&self) -> String {
        format!("standard output (YUV4MPEG2, I420, {})", self.size)
    }
    fn consume(&mut self, frame: &[u8], size: FrameSize) -> Result<Flow> {
        if self.closed {
            return Ok(Flow::Quit);
        }
        anyhow::ensure!(size == self.size, "frame size changed to {size}");
        match self.put(frame) {
            Ok(()) => {
                self.written += 1;
                Ok(Flow::Continue)
            }
            Err(e) if e.kind() == ErrorKind::BrokenPipe => {
                self.closed = true;
                crate::info!(
                    "standard output was closed by its reader: stopping after {} frames",
                    self.written
                );
                Ok(Flow::Quit)
            }
            Err(e) => Err(e).context("writing to standard output"),
        }
    }
    fn finish(&mut self) -> Result<()> {
        if self.closed {
            return Ok(());
        }
        match self.out.flush() {
            Err(e) if e.kind() != ErrorKind::BrokenPipe => {
                Err(e).context("writing to standard output")
            }
            _ => Ok(()),
        }
    }
    fn stored(&self) -> Option<u64> {
        // A frame counts once it was handed to the pipe (a closed pipe took the rest).
        Some(self.written)
    }
}
