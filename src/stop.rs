//! The one quit signal every thread checks: set by Ctrl-C (SIGINT, SIGTERM, SIGHUP), the q
//! key, the end of the input, or an error. A second signal aborts at once (exit 130).
//!
//! Invariants: the signal handler sets the flag before it does anything else, and its message
//! is written best effort, so a closed standard error (`| head -1`, a closed terminal) can't
//! keep a stop from happening; every wait that may be long (pacing) wakes within
//! `Stop::TICK` of a stop.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

static ABORTING: AtomicBool = AtomicBool::new(false);

/// Whether the process is ending because of a second Ctrl-C (exit handlers say so).
pub fn aborting() -> bool {
    ABORTING.load(Ordering::SeqCst)
}

/// The shared quit flag.
#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    /// The longest a `sleep` goes without looking at the flag.
    pub const TICK: Duration = Duration::from_millis(20);

    /// A flag not yet set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every thread to stop.
    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Whether a stop was asked for.
    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Sleeps until `deadline`, or less when a stop is asked for; true when it was.
    pub fn sleep_until(&self, deadline: Instant) -> bool {
        loop {
            if self.is_requested() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            std::thread::sleep((deadline - now).min(Self::TICK));
        }
    }

    /// Routes Ctrl-C and termination signals to this flag.
    pub fn install_signal_handler(&self) -> anyhow::Result<()> {
        let flag = self.clone();
        let signalled = AtomicBool::new(false);
        ctrlc::set_handler(move || {
            // The flag first, the message after, so the stop never waits on a write.
            flag.request();
            if signalled.swap(true, Ordering::SeqCst) {
                ABORTING.store(true, Ordering::SeqCst);
                crate::say!("framepipe: aborted");
                std::process::exit(130);
            }
            crate::info!("stopping; finishing the frames in flight (Ctrl-C again aborts)");
        })?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleep_wakes_on_a_stop() {
        let stop = Stop::new();
        let s = stop.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            s.request();
        });
        let start = Instant::now();
        assert!(stop.sleep_until(start + Duration::from_secs(3600)));
        assert!(start.elapsed() < Duration::from_secs(2));
        t.join().unwrap();
        assert!(!Stop::new().sleep_until(Instant::now() + Duration::from_millis(5)));
    }
}
