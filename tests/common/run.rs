//! Running the real binary with a deadline, and temporary folders.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The binary under test: cargo's, or `FRAMEPIPE_BIN` where the tests run elsewhere (the
/// GPU machine runs a bundle built here).
pub fn bin() -> String {
    std::env::var("FRAMEPIPE_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_framepipe").to_string())
}

/// A fresh folder removed when dropped.
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    /// A new empty folder under the system's temporary folder, named for the test, removed
    /// when dropped (`tempfile`: a unique name, made atomically).
    pub fn new(name: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("framepipe-test-{name}-"))
            .tempdir()
            .unwrap();
        Self(dir)
    }
    pub fn join(&self, s: &str) -> PathBuf {
        self.0.path().join(s)
    }
    pub fn path(&self) -> &Path {
        self.0.path()
    }
}

/// Whether `child` ends within `limit` (it is left running where it does not).
pub fn ends_within(child: &mut Child, limit: Duration) -> bool {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits for `child` at most `limit`; kills it and panics on a hang.
pub fn wait_with_deadline(mut child: Child, limit: Duration, what: &str) -> Output {
    if !ends_within(&mut child, limit) {
        let _ = child.kill();
        let out = child.wait_with_output().unwrap();
        panic!(
            "{what}: still running after {limit:?} (hang); stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    child.wait_with_output().unwrap()
}

/// A `--summary-json` file for one run, in the temporary folder, removed when dropped:
/// tests read what a run did from it, not from the human-readable summary.
pub struct SummaryFile(PathBuf);

impl SummaryFile {
    pub fn new() -> Self {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::SeqCst);
        Self(
            std::env::temp_dir().join(format!("framepipe-summary-{}-{n}.json", std::process::id())),
        )
    }

    /// Adds `--summary-json FILE` to `cmd` (before any other argument).
    pub fn add_to<'a>(&self, cmd: &'a mut Command) -> &'a mut Command {
        cmd.arg("--summary-json").arg(&self.0)
    }

    /// The summary, once the run wrote it (it does unless it was refused before running).
    pub fn read(&self) -> Option<serde_json::Value> {
        serde_json::from_str(&std::fs::read_to_string(&self.0).ok()?).ok()
    }

    /// (captured, processed, written, dropped); "written" is what the output really holds.
    pub fn counts(&self) -> Option<[u64; 4]> {
        counts_of(&self.read()?)
    }
}

impl Default for SummaryFile {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for SummaryFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A child killed where the test ends before it took it back (`take`): a failed assertion
/// leaves no process running.
pub struct Owned(Option<Child>);

impl Owned {
    /// Owns `child`.
    pub fn new(child: Child) -> Self {
        Self(Some(child))
    }

    /// The child, to be ended by the test itself.
    pub fn take(&mut self) -> Child {
        self.0.take().expect("taken once")
    }

    /// Its process id.
    pub fn id(&self) -> u32 {
        self.0.as_ref().map_or(0, Child::id)
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// (captured, processed, written, dropped) of a `--summary-json` document.
pub fn counts_of(summary: &serde_json::Value) -> Option<[u64; 4]> {
    let f = &summary["frames"];
    Some([
        f["captured"].as_u64()?,
        f["processed"].as_u64()?,
        f["written"].as_u64()?,
        f["dropped"].as_u64()?,
    ])
}

/// A finished run of the binary: its output, and its `--summary-json` when it wrote one.
pub struct Run {
    pub output: Output,
    pub summary: Option<serde_json::Value>,
}

impl std::ops::Deref for Run {
    type Target = Output;
    fn deref(&self) -> &Output {
        &self.output
    }
}

impl Run {
    /// (captured, processed, written, dropped) from the run's summary file.
    pub fn counts(&self) -> Option<[u64; 4]> {
        counts_of(self.summary.as_ref()?)
    }
}

/// Runs framepipe with `args` and no display, at most `limit`; a pipeline run also writes
/// its summary as JSON, which `Run::counts` reads.
pub fn framepipe(args: &[&str], limit: Duration) -> Run {
    run_in(None, args, limit)
}

/// `framepipe`, working in `dir` (where relative paths the arguments name land).
pub fn framepipe_in(dir: &Path, args: &[&str], limit: Duration) -> Run {
    run_in(Some(dir), args, limit)
}

fn run_in(dir: Option<&Path>, args: &[&str], limit: Duration) -> Run {
    let file = SummaryFile::new();
    let mut cmd = Command::new(bin());
    let subcommand = matches!(
        args.first(),
        Some(&"bench") | Some(&"doctor") | Some(&"check-kernel")
    );
    if !subcommand && !args.contains(&"--summary-json") {
        file.add_to(&mut cmd);
    }
    if let Some(dir) = dir {
        cmd.current_dir(dir);
    }
    let child = cmd
        .args(args)
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let output = wait_with_deadline(child, limit, &format!("framepipe {args:?}"));
    Run {
        output,
        summary: file.read(),
    }
}

/// Writes `frames` frames of the test pattern at `size` to `path` (a video, whose container
/// picks the codec, at the pattern's 30 fps; or an image sequence); returns `path`.
pub fn make_clip(path: &str, size: &str, frames: &str) -> String {
    let made = framepipe(
        &[
            "-i",
            "pattern",
            "--size",
            size,
            "--fps",
            "0",
            "--frames",
            frames,
            "--headless",
            "-o",
            path,
            "-q",
        ],
        Duration::from_secs(120),
    );
    assert!(made.status.success(), "{}", stderr(&made));
    path.to_string()
}

/// Frames OpenCV decodes from the video `path`, one by one (0 when it does not open).
#[cfg(feature = "opencv")]
pub fn frames_in(path: &str) -> u64 {
    use opencv::prelude::*;
    use opencv::videoio::{VideoCapture, CAP_FFMPEG};
    let Ok(mut cap) = VideoCapture::from_file(path, CAP_FFMPEG) else {
        return 0;
    };
    if !cap.is_opened().unwrap_or(false) {
        return 0;
    }
    let mut m = opencv::core::Mat::default();
    let mut n = 0;
    while cap.read(&mut m).unwrap_or(false) && !m.empty() {
        n += 1;
    }
    n
}

/// Whether `tool` is on the PATH.
pub fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Gives an MP4's video track a display matrix turning it `degrees` clockwise (as a phone
/// writes it), where this ffmpeg has no `-display_rotation` (FFmpeg 5).
pub fn set_rotation(path: &Path, degrees: u32) {
    let mut data = std::fs::read(path).unwrap();
    let at = data
        .windows(4)
        .position(|w| w == b"tkhd")
        .expect("an mp4 track header");
    let version = data[at + 4];
    let times = if version == 1 {
        8 + 8 + 4 + 4 + 8
    } else {
        4 + 4 + 4 + 4 + 4
    };
    let matrix = at + 4 + 4 + times + 8 + 2 + 2 + 2 + 2;
    let (one, minus) = (0x10000u32, 0xFFFF_0000u32);
    let m: [u32; 6] = match degrees {
        90 => [0, one, 0, minus, 0, 0],
        180 => [minus, 0, 0, 0, minus, 0],
        270 => [0, minus, 0, one, 0, 0],
        _ => [one, 0, 0, 0, one, 0],
    };
    for (i, v) in m.iter().chain(&[0, 0, 0x4000_0000]).enumerate() {
        data[matrix + 4 * i..matrix + 4 * i + 4].copy_from_slice(&v.to_be_bytes());
    }
    std::fs::write(path, data).unwrap();
}

/// Sends SIGINT (Ctrl-C) to framepipe's `child` (`signal`).
pub fn interrupt(child: &std::process::Child) {
    signal(child, libc::SIGINT);
}

/// Sends `sig` to framepipe's `child` once its own handler catches it. Before that the
/// dynamic loader maps the 250-odd shared libraries OpenCV brings and no code of the process
/// runs (README, exit codes): a signal then ends it the default way, which is not what a test
/// of a stop means to send.
pub fn signal(child: &std::process::Child, sig: i32) {
    wait_until_it_catches(child.id(), sig);
    // SAFETY: kill with a child's pid has no memory preconditions.
    assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
}

/// A loopback TCP port nobody listens on now (bound, then let go).
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// Whether process `pid` has its own handler for `sig` installed (`/proc/PID/status`'s
/// SigCgt): from then on framepipe's code runs, and a stop signal is a stop.
pub fn catches(pid: u32, sig: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << (sig - 1)) != 0)
}

/// Waits (at most 20 s) until process `pid` catches `sig` (`catches`).
pub fn wait_until_it_catches(pid: u32, sig: i32) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !catches(pid, sig) {
        assert!(
            Instant::now() < deadline,
            "pid {pid} never caught signal {sig}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A GET (or POST) on the view: (status, body).
pub fn http(port: u16, method: &str, path: &str, headers: &str) -> (u16, Vec<u8>) {
    try_http(port, method, path, headers).expect("the server answers")
}

/// `http`, or None where nothing listens on `port` (yet).
pub fn try_http(port: u16, method: &str, path: &str, headers: &str) -> Option<(u16, Vec<u8>)> {
    let headers = format!("Content-Length: 0\r\n{headers}");
    try_http_with(port, method, path, &headers, "")
}

/// A request with `headers` (each ending in CRLF) and `body`: (status, body), or None where
/// nothing listens on `port`.
fn try_http_with(
    port: u16,
    method: &str,
    path: &str,
    headers: &str,
    body: &str,
) -> Option<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n{headers}\r\n{body}"
    )
    .ok()?;
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let text = String::from_utf8_lossy(&all);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = match all.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => all[i + 4..].to_vec(),
        None => Vec::new(),
    };
    Some((status, body))
}

/// Fails the test where a tool `scripts/test.sh` installs is missing: a test that needs
/// ffmpeg never passes by skipping (the one skip idiom is for what a machine may lack for
/// good: a GPU, root, a display).
pub fn require(tools: &[&str]) {
    for tool in tools {
        assert!(
            have(tool),
            "{tool} is not installed: scripts/test.sh installs it"
        );
    }
}

/// A TCP connection to `port` on 127.0.0.1 from the loopback address `from` (another
/// client, as the server counts them: 127.0.0.0/8 is all loopback).
pub fn connect_from(from: std::net::Ipv4Addr, port: u16) -> std::io::Result<std::net::TcpStream> {
    use socket2::{Domain, Socket, Type};
    let socket = Socket::new(Domain::IPV4, Type::STREAM, None)?;
    socket.bind(&std::net::SocketAddr::from((from, 0)).into())?;
    socket.connect(&std::net::SocketAddr::from(([127, 0, 0, 1], port)).into())?;
    Ok(socket.into())
}

/// The files in `dir` whose names start with `prefix`, by name.
pub fn files_starting(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let mut files: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with(prefix))
        .collect();
    files.sort();
    files
}

/// A clip made by ffmpeg from lavfi sources: `sources` are its `-f lavfi -i` graphs,
/// `options` the encoding options before `path`; panics with ffmpeg's words if it fails.
pub fn ffmpeg_made(path: &Path, sources: &[&str], options: &[&str]) {
    let mut cmd = Command::new("ffmpeg");
    cmd.args(["-v", "error", "-y"]);
    for s in sources {
        cmd.args(["-f", "lavfi", "-i", s]);
    }
    let out = cmd.args(options).arg(path).output().unwrap();
    assert!(out.status.success(), "ffmpeg {sources:?}: {}", stderr(&out));
}

/// ffmpeg serving a live MPEG-TS of its test pattern (MPEG-4, 320x240, 25 fps) at
/// `http://127.0.0.1:PORT/live.ts`, for one client.
pub fn live_server(port: u16) -> std::process::Child {
    live_server_of(port, "320x240")
}

/// `live_server` with pictures of `size` (WxH), once it listens (a camera not yet there at
/// the start of a run is one that could not be opened).
pub fn live_server_of(port: u16, size: &str) -> std::process::Child {
    let server = Command::new("ffmpeg")
        .args(["-v", "error", "-re", "-f", "lavfi", "-i"])
        .arg(format!("testsrc2=size={size}:rate=25"))
        .args(["-c:v", "mpeg4", "-g", "10", "-f", "mpegts", "-listen", "1"])
        .arg(format!("http://127.0.0.1:{port}/live.ts"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_bound(port, "the live server");
    server
}

/// Whether a socket is bound to local `port`: a TCP one listening, or any UDP one. Read from
/// `/proc/net`, so a server of one client (ffmpeg's `-listen 1`) is not spent by the asking.
pub fn bound(port: u16) -> bool {
    let tables = [
        ("tcp", Some("0A")),
        ("tcp6", Some("0A")),
        ("udp", None),
        ("udp6", None),
    ];
    tables.iter().any(|(table, state)| {
        let text = std::fs::read_to_string(format!("/proc/net/{table}")).unwrap_or_default();
        text.lines().skip(1).any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields
                .get(1)
                .and_then(|a| a.rsplit(':').next())
                .and_then(|p| u16::from_str_radix(p, 16).ok());
            local_port == Some(port) && state.is_none_or(|s| fields.get(3) == Some(&s))
        })
    })
}

/// Waits until `bound(port)` (30 s at most: a loaded machine starts ffmpeg slowly).
pub fn wait_bound(port: u16, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !bound(port) {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not bind port {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// framepipe in `dir`, headless, with `args`, serving the browser view on `port` (its summary
/// in `dir/summary.json`), once the view listens; its standard output and error piped.
pub fn served(dir: &Path, port: u16, args: &[&str]) -> std::process::Child {
    let child = Command::new(bin())
        .current_dir(dir)
        .arg("--headless")
        .args(args)
        .args([
            "--serve",
            &port.to_string(),
            "--summary-json",
            "summary.json",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_listening(port, "the view");
    child
}

/// Waits until something listens on `port` (20 s at most).
pub fn wait_listening(port: u16, what: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "{what} did not listen"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A POST of `body` (JSON) to the view: (status, body).
/// A request with `headers` (each ending in CRLF) and `body` (its length given): (status,
/// body).
pub fn http_body(port: u16, method: &str, path: &str, headers: &str, body: &str) -> (u16, Vec<u8>) {
    let headers = format!("{headers}Content-Length: {}\r\n", body.len());
    try_http_with(port, method, path, &headers, body).expect("the server answers")
}

pub fn http_post(port: u16, path: &str, body: &str) -> (u16, Vec<u8>) {
    let headers = format!(
        "Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    try_http_with(port, "POST", path, &headers, body).expect("the server answers")
}
