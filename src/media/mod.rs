//! The media facts that sources and outputs share, below both of them: FFmpeg's time
//! arithmetic (`timebase`), what a file says of itself (`info`: rate, time base, rotation,
//! audio), a picture's tags (`tags`: aspect, interlacing, chroma siting, range), the packet
//! tap that hands an input's packets on untouched (`tap`), those packets laid out in a
//! container someone opened (`remux`), FFmpeg's log (`log`), its bitstream filters
//! (`bsf`), and the protocols a network input may open (`PROTOCOLS`).
//!
//! Invariants: nothing here opens an input or an output, or imports the rooms that do
//! (`source`, `output`, `display`); every figure is what `ffmpeg -i` would read.

#[cfg(feature = "ffmpeg")]
pub mod bsf;
#[cfg(feature = "ffmpeg")]
pub mod info;
#[cfg(feature = "ffmpeg")]
pub(crate) mod log;
#[cfg(feature = "ffmpeg")]
pub mod remux;
pub mod tags;
#[cfg(feature = "ffmpeg")]
pub mod tap;
#[cfg(feature = "ffmpeg")]
pub mod timebase;

#[cfg(feature = "ffmpeg")]
pub use info::{init, MediaInfo};

/// The protocols a network input may open, its own and those it opens within (an RTSP
/// session's RTP over UDP or TCP, an HLS playlist's segments over HTTP, AES-128 `crypto`):
/// FFmpeg's `protocol_whitelist` for every network input. `file`, `pipe`, `fd`, `unix`,
/// `concat`, `subfile` and `cache` are not among them.
pub const PROTOCOLS: &str =
    "rtsp,rtsps,rtmp,rtmps,rtmpt,rtmpts,rtmpe,rtmpte,srt,udp,rtp,srtp,tcp,tls,http,https,httpproxy,crypto,hls,data,ftp";
