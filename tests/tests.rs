//! Every integration test, in one binary (ripgrep's shape): each file of `tests/` is a
//! module here, `common/` holds what they share (running the binary, media, X servers). A
//! module that needs OpenCV, or FFmpeg without it, says so in its first line (`#![cfg]`).
//! Run one module with a filter: `cargo test --release --test tests several::`.

mod common;

mod attacks;

mod copy;
mod cpu_backend;
mod decode;
mod detect;
mod doors;
mod encode;
mod entry;
mod errors;
mod events;
mod ffmpeg_only;
mod files;
mod formats;
mod front;
mod fuzz_args;
mod geometry;
mod gpu;
mod gpu_kernels;
mod gst_yuv;
mod kernels;
mod live;
mod media;
mod outputs;
mod promises;
mod python;
mod readme;
mod record;
mod rtsp;
mod service;
mod several;
mod shards;
mod stdio;
mod streams;
mod text;
mod trace;
mod trust;
mod web;
mod whep;
mod yuv;
mod yuv_geometry;
