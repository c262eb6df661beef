#![deny(missing_docs)]
//! framepipe: live video through a banded, overlapped CUDA pipeline.
//!
//! The data path, one module per stage:
//! `source` (capture) → `ring` (page-locked slots) → `backend` (CUDA bands, or the CPU)
//! → `sink` (window or file), wired together by `pipeline`. `filter` defines every filter
//! (its `reference` is what both backends are tested against), `band` cuts frames, `tiles`
//! lays out the mosaic of several inputs that the backends compose, `trace`
//! records where the time goes, `timebase` is FFmpeg's time arithmetic for the sources and
//! the writer; `app`, `bench` and `doctor` are the commands (with `check-kernel`).

pub mod app;
pub mod backend;
pub mod band;
pub mod bench;
pub mod budget;
pub mod cli;
pub mod desc;
pub mod doctor;
pub mod error;
pub mod filter;
pub mod frame;
pub mod msg;
pub mod paths;
pub mod pipe;
pub mod pipeline;
pub mod pixel;
pub mod plan;
pub mod reload;
pub mod ring;
pub mod secret;
pub mod sink;
pub mod source;
pub mod stats;
pub mod stop;
pub mod tiles;
#[cfg(feature = "ffmpeg")]
pub mod timebase;
pub mod trace;
