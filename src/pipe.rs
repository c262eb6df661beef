//! The pipes at the ends (`--input -`, a named pipe, `--output -`): their size, and how a
//! frame's bytes cross them.
//!
//! Invariants: a pipe's writer and reader copy its bytes under the pipe's lock, one at a
//! time, so the time either copy takes is time the other end waits; framepipe's ends copy
//! a pipe's bytes through a `CHUNK`-byte buffer of their own that stays in the core's cache
//! (as `cat` does) and copy between it and the frame's slot outside the lock, where that
//! copy runs beside the other end's next one. A frame-sized slot is cold by the time it is
//! read into or written from again (eight frames later), and copying straight between it
//! and the pipe held the lock longer: on the H200, 1080p I420 through
//! `ffmpeg | framepipe --filter gauss:2 --output - | cat`, staging both ends made the run
//! 11–25 % faster than straight copies in each of five interleaved rounds
//! (BENCHMARKS.md, "The pipe hop"). Ends that are not pipes (a file on standard input or
//! output) are read and written straight, one copy.

use std::os::fd::{AsRawFd, BorrowedFd};

/// The staging buffer's size: `cat`'s, and a small part of a core's cache.
pub const CHUNK: usize = 128 << 10;

/// The pipe buffer asked for: a third of a 1080p I420 frame (1 MiB, Linux's default
/// `pipe-max-size` for a user).
const SIZE: libc::c_int = 1 << 20;

/// Whether `fd` is a pipe or a FIFO.
pub fn is_pipe(fd: BorrowedFd) -> bool {
    use std::os::unix::fs::FileTypeExt;
    fd.try_clone_to_owned()
        .map(std::fs::File::from)
        .and_then(|f| f.metadata())
        .is_ok_and(|m| m.file_type().is_fifo())
}

/// Readies the end `fd` of a run: a pipe gets a larger buffer (where the system allows), so
/// that one end can run ahead of the other by a part of a frame, and the staging buffer its
/// bytes are copied through, `CHUNK` bytes; anything else is left as it is and gets none
/// (straight copies).
pub fn prepare(fd: BorrowedFd) -> Vec<u8> {
    if !is_pipe(fd) {
        return Vec::new();
    }
    // SAFETY: fcntl with F_SETPIPE_SZ on an open pipe's descriptor only resizes its buffer
    // (a refusal changes nothing).
    unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETPIPE_SZ, SIZE) };
    vec![0; CHUNK]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn pipes_are_staged_and_files_are_not() {
        let (reader, writer) = std::io::pipe().unwrap();
        assert!(is_pipe(reader.as_fd()) && is_pipe(writer.as_fd()));
        assert_eq!(prepare(reader.as_fd()).len(), CHUNK);
        let file = std::fs::File::open("Cargo.toml").unwrap();
        assert!(!is_pipe(file.as_fd()));
        assert!(prepare(file.as_fd()).is_empty());
    }
}
