//! The packets of a decoded input, handed on untouched as the demuxer reads them: `--record`
//! writes them (`record`), and each video output (file or stream) copies the audio from them
//! (`output::audio`), so the input is read once. An input has as many taps as are attached. A
//! tap is told each time the input opens (its streams, which may differ after a reconnect),
//! then given every packet of every stream, in read order.
//!
//! Invariants: a tap never blocks the input (a recording counts what it can't take at once
//! as lost, and says so; the audio copy queues, a file being read at most a ring ahead of
//! its writer); the packets read while the input opened, before the run read its first
//! frame, are handed to each tap attached by then first, so a recording starts at the
//! input's first keyframe and a copy misses no audio.

use std::sync::Arc;

use ffmpeg_next as ff;

/// Where an input's packets go.
pub trait PacketTap: Send + Sync {
    /// The input (re)opened with these streams; `video` is the decoded one's index; the
    /// run's time 0 is `from` seconds after the input's start (`--ss`), and packets before
    /// it may come (the seek lands on the keyframe before).
    fn open(&self, input: &ff::format::context::Input, video: usize, from: f64);
    /// A packet as read (its stream index is the input's).
    fn packet(&self, packet: ff::Packet);
}

/// A tap shared by an input and the sources that replace it on a reconnect.
pub type Tap = Arc<dyn PacketTap>;
