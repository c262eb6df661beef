//! Running the real binary with a deadline, and temporary folders.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_framepipe")
}

/// A fresh folder removed when dropped.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        let p = std::env::temp_dir().join(format!("framepipe-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Self(p)
    }
    pub fn join(&self, s: &str) -> PathBuf {
        self.0.join(s)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits for `child` at most `limit`; kills it and panics on a hang.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what}: still running after {limit:?} (hang); stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs framepipe with `args` and no display, at most `limit`.
pub fn framepipe(args: &[&str], limit: Duration) -> Output {
    let child = Command::new(bin())
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_with_deadline(child, limit, &format!("framepipe {args:?}"))
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The counts of the summary line "frames: A captured, B processed, C <verb>, D dropped".
pub fn summary_counts(err: &str) -> Option<[u64; 4]> {
    let line = err.lines().find(|l| l.starts_with("frames: "))?;
    let nums: Vec<u64> = line
        .trim_start_matches("frames: ")
        .split(", ")
        .filter_map(|part| part.split(' ').next()?.parse().ok())
        .collect();
    nums.try_into().ok()
}
