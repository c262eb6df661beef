#![deny(missing_docs)]
//! framepipe: live video through a banded, overlapped CUDA pipeline.
//!
//! The data path, one module per stage:
//! `source` (capture) → `ring` (page-locked slots) → `backend` (CUDA bands, or the CPU)
//! → `sink` (the consumers put together) → `output` (files, streams, recordings) and
//! `display` (window, browser view, mosaic), wired together by `pipeline`. `media` holds
//! what sources and outputs share of FFmpeg (time bases, a file's facts, picture tags, the
//! packet tap, the log, bitstream filters); `filter` defines every filter (its `reference`
//! is what both backends are tested against), `band` cuts frames, `tiles` lays out the
//! mosaic of several inputs that the backends compose, `trace` records where the time goes;
//! `plan` turns the flags into a run once, and `app`, `bench` and `doctor` are the commands
//! (with `check-kernel`).

pub mod app;
pub mod backend;
pub mod band;
pub mod bench;
pub mod budget;
pub mod cli;
pub mod desc;
pub mod detect;
pub mod display;
pub mod doctor;
pub mod error;
pub mod events;
pub mod filter;
pub mod frame;
#[cfg(feature = "ffmpeg")]
pub mod front;
pub mod host;
pub mod media;
pub mod msg;
pub mod output;
pub mod paint;
pub mod paths;
pub mod pipe;
pub mod pipeline;
pub mod pixel;
pub mod plan;
#[cfg(feature = "ffmpeg")]
pub mod record;
pub mod reload;
pub mod ring;
#[cfg(feature = "ffmpeg")]
pub mod rtsp;
pub mod secret;
pub mod sink;
pub mod source;
pub mod spelling;
pub mod stats;
pub mod stop;
pub mod tiles;
pub mod trace;
