//! The view's picture (the mosaic, or the one input's processed picture) encoded once for
//! every WebRTC viewer: libx264 with the `veryfast` preset and `zerolatency` tune (no frame
//! held back), no B-frames, a keyframe every `GOP_SECONDS`, the parameter sets before each
//! one; its units go to the picture's feed, which every viewer of `/whep/mosaic` takes.
//!
//! Invariants: the sink hands a frame only while someone watches and the encoder is idle
//! (the newest wins, as the JPEG encoder's mailbox); an encoder made after nobody watched
//! starts with a keyframe; the thread ends within `POLL` of the stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ffmpeg_next as ff;

use super::feed::{Feed, Unit};
use crate::frame::FrameSize;

/// Seconds between keyframes.
const GOP_SECONDS: u32 = 2;
/// How often the thread looks at its stop flag.
const POLL: Duration = Duration::from_millis(100);
/// An encoder idle this long is ended (the next viewer's first picture is a keyframe).
const IDLE: Duration = Duration::from_secs(2);

/// The newest picture waiting for the encoder.
#[derive(Default)]
pub struct Mailbox {
    frame: Mutex<Option<(FrameSize, Vec<u8>)>>,
    mail: Condvar,
}

impl Mailbox {
    /// Hands `bgr` over where the encoder is idle; false where it is busy (it misses it).
    pub fn offer(&self, size: FrameSize, bgr: &[u8]) -> bool {
        let Ok(mut slot) = self.frame.try_lock() else {
            return false;
        };
        if slot.is_some() {
            return false;
        }
        *slot = Some((size, bgr.to_vec()));
        self.mail.notify_one();
        true
    }
}

/// Starts the encoder's thread: frames from `mailbox` into `feed`, until `stop`.
pub fn start(mailbox: Arc<Mailbox>, feed: Arc<Feed>, stop: Arc<AtomicBool>) -> Result<()> {
    std::thread::Builder::new()
        .name("whep-encoder".into())
        .spawn(move || encode_loop(&mailbox, &feed, &stop))?;
    Ok(())
}

fn encode_loop(mailbox: &Mailbox, feed: &Feed, stop: &AtomicBool) {
    let mut encoder: Option<Encoder> = None;
    let mut refused: Option<FrameSize> = None;
    while !stop.load(Ordering::SeqCst) {
        let taken = {
            let slot = mailbox.frame.lock().unwrap_or_else(|p| p.into_inner());
            let (mut slot, _) = mailbox
                .mail
                .wait_timeout(slot, POLL)
                .unwrap_or_else(|p| p.into_inner());
            slot.take()
        };
        if encoder.as_ref().is_some_and(|e| e.last.elapsed() > IDLE) {
            encoder = None; // nobody watched: the next one starts on a keyframe
        }
        let Some((size, bgr)) = taken else { continue };
        if encoder.as_ref().map(|e| e.size) != Some(size) && refused != Some(size) {
            encoder = Encoder::new(size)
                .map_err(|e| {
                    crate::warn!("WebRTC of the view's picture: {e:#}");
                    refused = Some(size);
                })
                .ok();
        }
        if let Some(e) = &mut encoder {
            if let Err(err) = e.encode(&bgr, feed) {
                crate::warn!("WebRTC of the view's picture: {err:#}");
                encoder = None;
            }
        }
    }
}

/// libx264 of one picture size, and its BGR to I420 conversion.
struct Encoder {
    size: FrameSize,
    encoder: ff::encoder::Video,
    scaler: ff::software::scaling::Context,
    started: Instant,
    last: Instant,
}

impl Encoder {
    fn new(size: FrameSize) -> Result<Self> {
        let (w, h) = (size.width as u32 & !1, size.height as u32 & !1);
        let codec = ff::encoder::find_by_name("libx264").context("no libx264 in this build")?;
        let mut ctx = ff::codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()?;
        ctx.set_width(w);
        ctx.set_height(h);
        ctx.set_format(ff::format::Pixel::YUV420P);
        ctx.set_time_base(ff::Rational::new(1, 90_000));
        ctx.set_gop(25 * GOP_SECONDS);
        ctx.set_max_b_frames(0);
        let mut opts = ff::Dictionary::new();
        opts.set("preset", "veryfast");
        opts.set("tune", "zerolatency");
        opts.set("x264-params", "repeat-headers=1");
        let encoder = ctx
            .open_as_with(codec, opts)
            .with_context(|| format!("opening libx264 for {w}x{h}"))?;
        let scaler = ff::software::scaling::Context::get(
            ff::format::Pixel::BGR24,
            size.width as u32,
            size.height as u32,
            ff::format::Pixel::YUV420P,
            w,
            h,
            ff::software::scaling::Flags::BILINEAR,
        )?;
        let now = Instant::now();
        Ok(Self {
            size,
            encoder,
            scaler,
            started: now,
            last: now,
        })
    }

    /// Encodes `bgr` (a `size` picture) and hands its units to `feed`.
    fn encode(&mut self, bgr: &[u8], feed: &Feed) -> Result<()> {
        let (w, h) = (self.size.width, self.size.height);
        let mut src = ff::frame::Video::new(ff::format::Pixel::BGR24, w as u32, h as u32);
        let stride = src.stride(0);
        for (row, line) in bgr.chunks_exact(w * 3).take(h).enumerate() {
            src.data_mut(0)[row * stride..row * stride + w * 3].copy_from_slice(line);
        }
        let mut yuv = ff::frame::Video::empty();
        self.scaler.run(&src, &mut yuv)?;
        let now = Instant::now();
        yuv.set_pts(Some((now - self.started).as_micros() as i64 * 9 / 100));
        self.last = now;
        self.encoder.send_frame(&yuv)?;
        let mut packet = ff::Packet::empty();
        while self.encoder.receive_packet(&mut packet).is_ok() {
            let Some(data) = packet.data() else { continue };
            let pts = packet.pts().unwrap_or(0);
            feed.set_size(self.encoder.width(), self.encoder.height());
            feed.push(Unit {
                annexb: data.to_vec(),
                key: packet.is_key(),
                pts90k: pts,
                dts90k: packet.dts().unwrap_or(pts),
            });
        }
        Ok(())
    }
}
