//! What a picture says of itself beyond its size and format, as YUV4MPEG2 headers and
//! FFmpeg's frames carry it: the pixel aspect ratio, the interlacing, where 4:2:0 chroma
//! samples sit and the samples' range. Read by the sources, written by the Y4M output.
//!
//! Invariant: a tag that framepipe did not read is the default Y4M writes (square,
//! progressive, centred chroma, no range), never a guess.

/// What a YUV4MPEG2 header says of its pictures beyond their size and rate: the pixel
/// aspect ratio (`A`, 0:0 unknown), the interlacing (`I`: p, t, b, m or ?), where 4:2:0
/// chroma samples sit (`C420jpeg`, `C420mpeg2`, `C420paldv`) and the range where said
/// (`XCOLORRANGE`); a decoded file's pictures say what ffmpeg's `yuv4mpegpipe` would.
/// framepipe filters frames as stored and keeps the tags in a Y4M output (the siting and
/// the range only where the samples pass untouched).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PictureTags {
    /// Pixel aspect ratio, width:height.
    pub aspect: (u32, u32),
    /// Interlacing: `p` progressive, `t` top field first, `b` bottom first, `m` mixed.
    pub interlace: char,
    /// Where the 4:2:0 chroma samples sit.
    pub chroma: Siting,
    /// The samples' range, where the input says it.
    pub range: Option<Range>,
}

/// A YUV picture's sample range.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Range {
    /// Video range (16–235 luma): what framepipe's conversions write.
    Limited,
    /// Full range (0–255; JPEG).
    Full,
}

impl Range {
    /// The Y4M header's tag for it.
    pub fn y4m(self) -> &'static str {
        match self {
            Range::Limited => "XCOLORRANGE=LIMITED",
            Range::Full => "XCOLORRANGE=FULL",
        }
    }
}

impl Default for PictureTags {
    /// What framepipe's Y4M output says when its input said nothing: square, progressive,
    /// chroma centred.
    fn default() -> Self {
        Self {
            aspect: (1, 1),
            interlace: 'p',
            chroma: Siting::Center,
            range: None,
        }
    }
}

/// Where a 4:2:0 picture's chroma samples sit against its luma samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Siting {
    /// Between the four luma samples (JPEG, MPEG-1; Y4M's `420jpeg`): what framepipe's own
    /// conversions from BGR are written as.
    #[default]
    Center,
    /// Beside the left two (MPEG-2, H.264, HEVC; `420mpeg2`).
    Left,
    /// On the top-left one (DV PAL; `420paldv`).
    TopLeft,
}

impl Siting {
    /// The Y4M colour tag of an I420 stream sited so.
    pub fn y4m(self) -> &'static str {
        match self {
            Siting::Center => "C420jpeg XYSCSS=420JPEG",
            Siting::Left => "C420mpeg2 XYSCSS=420MPEG2",
            Siting::TopLeft => "C420paldv XYSCSS=420PALDV",
        }
    }
}
