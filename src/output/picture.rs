//! One BGR picture encoded as an image file by libavcodec's image encoders (PNG, PPM, BMP,
//! TIFF, JPEG): what an image sequence writes and what the browser view sends, in every
//! build with FFmpeg's libraries (OpenCV's `imencode` is not needed for them).
//!
//! Invariants: the lossless formats (PNG, PPM, BMP, TIFF) hold the frame's pixels exactly
//! (BGR to RGB is a reordering of bytes, no arithmetic); a JPEG is full-range 4:2:0, as
//! OpenCV's and ffmpeg's are; an encoder is made for one size and reused for every picture
//! of it.

use anyhow::{Context, Result};
use ffmpeg_next as ff;

use crate::frame::FrameSize;

/// An image format libavcodec writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFormat {
    /// PNG (lossless, RGB).
    Png,
    /// Binary PPM (P6).
    Ppm,
    /// BMP (lossless, BGR).
    Bmp,
    /// TIFF (lossless, RGB).
    Tiff,
    /// JPEG (full-range 4:2:0, at `JPEG_QUALITY`).
    Jpeg,
}

impl ImageFormat {
    /// The format a file extension names (`png`, `ppm`, `bmp`, `tif`/`tiff`, `jpg`/`jpeg`).
    pub fn of_extension(ext: &str) -> Option<Self> {
        Some(match ext.to_ascii_lowercase().as_str() {
            "png" => Self::Png,
            "ppm" => Self::Ppm,
            "bmp" => Self::Bmp,
            "tif" | "tiff" => Self::Tiff,
            "jpg" | "jpeg" => Self::Jpeg,
            _ => return None,
        })
    }

    /// Its usual extension, as `doctor` names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Png => "png",
            Self::Ppm => "ppm",
            Self::Bmp => "bmp",
            Self::Tiff => "tiff",
            Self::Jpeg => "jpeg",
        }
    }

    /// Whether this FFmpeg has its encoder.
    pub fn available(self) -> bool {
        crate::media::info::init();
        ff::encoder::find(self.encoder().0).is_some()
    }

    /// The encoder and the pixel format it is handed.
    fn encoder(self) -> (ff::codec::Id, ff::format::Pixel) {
        use ff::format::Pixel;
        match self {
            Self::Png => (ff::codec::Id::PNG, Pixel::RGB24),
            Self::Ppm => (ff::codec::Id::PPM, Pixel::RGB24),
            Self::Bmp => (ff::codec::Id::BMP, Pixel::BGR24),
            Self::Tiff => (ff::codec::Id::TIFF, Pixel::RGB24),
            Self::Jpeg => (ff::codec::Id::MJPEG, Pixel::YUVJ420P),
        }
    }
}

/// JPEG quality as OpenCV's `IMWRITE_JPEG_QUALITY` counts it (0–100) for `Jpeg`.
pub const JPEG_QUALITY: u8 = 80;

/// An encoder of BGR pictures of one size into one image format.
pub struct PictureEncoder {
    format: ImageFormat,
    size: FrameSize,
    encoder: ff::encoder::Video,
    /// The picture as given (BGR24), and as the encoder takes it where that differs.
    bgr: ff::frame::Video,
    converted: Option<(ff::software::scaling::Context, ff::frame::Video)>,
    packet: ff::Packet,
}

// SAFETY: the encoder and the scaler are used by the one thread that holds the
// `PictureEncoder` at a time (an image sequence's sink, the browser view's encoder thread);
// FFmpeg's contexts may move between threads when not used concurrently.
unsafe impl Send for PictureEncoder {}

impl PictureEncoder {
    /// An encoder of `size` BGR pictures into `format`.
    pub fn new(format: ImageFormat, size: FrameSize) -> Result<Self> {
        crate::media::info::init();
        let (id, pixel) = format.encoder();
        let codec = ff::encoder::find(id)
            .with_context(|| format!("this FFmpeg has no {id:?} encoder for {format:?} images"))?;
        let (w, h) = (size.width as u32, size.height as u32);
        let mut ctx = ff::codec::context::Context::new_with_codec(codec)
            .encoder()
            .video()?;
        ctx.set_width(w);
        ctx.set_height(h);
        ctx.set_format(pixel);
        ctx.set_time_base(ff::Rational::new(1, 25));
        if format == ImageFormat::Jpeg {
            ctx.set_color_range(ff::color::Range::JPEG);
            // OpenCV's quality 80 is about libavcodec's fixed quantiser 7 (31 to 1 for 0 to 100).
            let q = 31 - i32::from(JPEG_QUALITY) * 30 / 100;
            ctx.set_flags(ff::codec::Flags::QSCALE);
            ctx.set_global_quality(q * ff::ffi::FF_QP2LAMBDA);
        }
        let mut options = ff::Dictionary::new();
        if format == ImageFormat::Png {
            // zlib's fastest level with each row predicted from its neighbours (Paeth): on
            // 1080p frames several times smaller and faster than no prediction, and smaller
            // and faster than OpenCV's `imwrite` (BENCHMARKS.md, "The ends").
            options.set("compression_level", "1");
            options.set("pred", "paeth");
        }
        let encoder = ctx
            .open_as_with(codec, options)
            .with_context(|| format!("opening the {format:?} encoder for {size} pictures"))?;
        let converted = match pixel {
            ff::format::Pixel::BGR24 => None,
            to => Some((
                ff::software::scaling::Context::get(
                    ff::format::Pixel::BGR24,
                    w,
                    h,
                    to,
                    w,
                    h,
                    ff::software::scaling::Flags::BILINEAR
                        | ff::software::scaling::Flags::ACCURATE_RND,
                )?,
                ff::frame::Video::new(to, w, h),
            )),
        };
        Ok(Self {
            format,
            size,
            encoder,
            bgr: ff::frame::Video::new(ff::format::Pixel::BGR24, w, h),
            converted,
            packet: ff::Packet::empty(),
        })
    }

    /// The size this encoder takes.
    pub fn size(&self) -> FrameSize {
        self.size
    }

    /// The image file of one packed BGR picture of the encoder's size.
    pub fn encode(&mut self, bgr: &[u8]) -> Result<Vec<u8>> {
        let row = self.size.stride();
        if bgr.len() != row * self.size.height {
            return Err(crate::bug!(
                "a {} picture of {} bytes",
                self.size,
                bgr.len()
            ));
        }
        let stride = self.bgr.stride(0);
        let data = self.bgr.data_mut(0);
        for (y, line) in bgr.chunks_exact(row).enumerate() {
            data[y * stride..y * stride + row].copy_from_slice(line);
        }
        let frame = match &mut self.converted {
            Some((scaler, to)) => {
                scaler.run(&self.bgr, to)?;
                &*to
            }
            None => &self.bgr,
        };
        self.encoder.send_frame(frame)?;
        self.encoder
            .receive_packet(&mut self.packet)
            .with_context(|| format!("encoding a {:?} picture", self.format))?;
        Ok(self.packet.data().unwrap_or_default().to_vec())
    }
}
