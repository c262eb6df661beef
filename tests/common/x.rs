//! A private X server for window tests, and what the tests do on it.
#![cfg(feature = "opencv")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::run::{have, stderr};

/// A private X server for one test. It picks a free display number itself and says it on
/// a pipe once it accepts connections (`-displayfd`), so two tests can't collide and a test
/// never waits on a socket that is not there; the guard exists from the moment of spawn and
/// ends the server with SIGTERM, so that it removes its lock and socket.
pub struct Xvfb {
    /// The server process (a test may freeze it: SIGSTOP).
    pub child: Child,
    /// Its display (`:N`).
    pub display: String,
}

impl Xvfb {
    /// A server with an 800x600 screen.
    pub fn start() -> Self {
        Self::with_screen("800x600")
    }

    /// A server with a screen of `size` (WxH).
    pub fn with_screen(size: &str) -> Self {
        assert!(
            have("Xvfb") && have("xdotool") && have("import"),
            "scripts/test.sh installs xvfb, xdotool and imagemagick"
        );
        let screen = format!("{size}x24");
        let child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                &screen,
                "-nolisten",
                "tcp",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut x = Self {
            child,
            display: String::new(),
        };
        let stdout = x.child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            let mut line = String::new();
            let _ = std::io::BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("Xvfb did not say its display within 20 s");
        let n: u32 = line
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("Xvfb did not start (it said {line:?})"));
        x.display = format!(":{n}");
        x
    }

    /// Runs `program` on this display (at most 20 s).
    pub fn cmd(&self, program: &str, args: &[&str]) -> std::process::Output {
        Command::new("timeout")
            .arg("20")
            .arg(program)
            .args(args)
            .env("DISPLAY", &self.display)
            .output()
            .unwrap()
    }

    /// The id of the visible window named `name` (a regex), once there is one.
    pub fn window(&self, name: &str) -> String {
        let found = self.cmd(
            "xdotool",
            &["search", "--sync", "--onlyvisible", "--name", name],
        );
        let id = String::from_utf8_lossy(&found.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .to_string();
        assert!(!id.is_empty(), "no window {name} appeared");
        id
    }

    /// Presses `key` in the window `id`.
    pub fn key(&self, id: &str, key: &str) {
        self.cmd("xdotool", &["windowfocus", "--sync", id]);
        let sent = self.cmd("xdotool", &["key", key]);
        assert!(sent.status.success(), "{}", stderr(&sent));
        std::thread::sleep(Duration::from_millis(150));
    }

    /// A screenshot of the window `id`'s picture (its client area).
    pub fn shot(&self, id: &str, path: &std::path::Path) -> opencv::core::Mat {
        let p = path.display().to_string();
        let grabbed = self.cmd("import", &["-window", id, &p]);
        assert!(grabbed.status.success(), "import: {}", stderr(&grabbed));
        opencv::imgcodecs::imread(&p, opencv::imgcodecs::IMREAD_COLOR).unwrap()
    }
}

impl Drop for Xvfb {
    fn drop(&mut self) {
        // SIGTERM: Xvfb removes its lock file and socket; SIGKILL only if it does not end.
        // SAFETY: kill with our child's pid has no memory preconditions.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
