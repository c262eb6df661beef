//! What the host has that a run sizes itself by: its cores, its available memory and
//! whether a display is named. Every room asks here instead of the system (`plan::Machine`
//! gathers them with CUDA for the plan). The cores and the display are read once per
//! process and kept; the available memory changes, so it is read when asked (once per
//! check: a process of Python runs many).
//!
//! Invariants: nothing here fails (a fact the system does not give reads as one core, no
//! figure, no display); nothing here imports another room of framepipe.

use std::sync::OnceLock;

/// The cores this process may run on (at least 1).
pub fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// `MemAvailable` from /proc/meminfo now, in bytes (None where the kernel does not say).
pub fn memory_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    parse_meminfo(&text, "MemAvailable:")
}

/// Whether a display is named: `DISPLAY`, or (`qt` true, for OpenCV's window) a Qt platform
/// that needs none.
pub fn display_named(qt: bool) -> bool {
    static DISPLAY: OnceLock<bool> = OnceLock::new();
    static HEADLESS_QT: OnceLock<bool> = OnceLock::new();
    let display =
        *DISPLAY.get_or_init(|| std::env::var_os("DISPLAY").is_some_and(|d| !d.is_empty()));
    let headless_qt = *HEADLESS_QT.get_or_init(|| {
        std::env::var("QT_QPA_PLATFORM")
            .is_ok_and(|p| matches!(p.as_str(), "offscreen" | "minimal" | "vnc"))
    });
    display || (qt && headless_qt)
}

fn parse_meminfo(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    let kib: u64 = line[key.len()..]
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_meminfo() {
        let text = "MemTotal:       24000000 kB\nMemAvailable:   1000 kB\n";
        assert_eq!(parse_meminfo(text, "MemAvailable:"), Some(1_024_000));
        assert_eq!(parse_meminfo("", "MemAvailable:"), None);
        assert!(memory_available().is_some());
        assert!(cores() >= 1);
    }
}
