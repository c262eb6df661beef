//! The one quit signal every thread checks: set by Ctrl-C (SIGINT, SIGTERM, SIGHUP), the q
//! key, the end of the input, or an error. A second Ctrl-C aborts at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Stop(Arc<AtomicBool>);

impl Stop {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn request(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_requested(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Routes Ctrl-C and termination signals to this flag.
    pub fn install_signal_handler(&self) -> anyhow::Result<()> {
        let flag = self.clone();
        ctrlc::set_handler(move || {
            if flag.is_requested() {
                eprintln!("framepipe: aborted");
                std::process::exit(130);
            }
            eprintln!("framepipe: stopping; finishing the frames in flight (Ctrl-C again aborts)");
            flag.request();
        })?;
        Ok(())
    }
}
