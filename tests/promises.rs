//! The promises, attacked the way users hit them (issue 18): a second stop, a crash and
//! kill -9, an existing output, two runs on one output, a URL that is a file, a full
//! standard output, a link planted during a run, every stop signal, a frozen or silent X
//! server, a reader that stops reading, FIFOs and devices as outputs, hostile kernel files,
//! and messages that name the cause. Each on the real binary, with real files, servers and
//! signals.
#![cfg(feature = "opencv")]

use crate::common;

use std::io::BufRead;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{bin, framepipe, frames_in, make_clip, stderr, wait_with_deadline, TempDir};

/// Starts framepipe with `args` in `dir`, no display, standard error piped. It is killed
/// when the test's thread ends (a failed assertion never leaves it running).
fn spawn_in(dir: &Path, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(bin());
    // SAFETY: prctl(PR_SET_PDEATHSIG) is async-signal-safe and touches no memory of ours.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
    cmd.args(args)
        .current_dir(dir)
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Sends `sig` to framepipe's `child`: a stop signal once its handler catches it
/// (`common::run::signal`), SIGKILL at once.
fn send(child: &Child, sig: i32) {
    if sig == libc::SIGKILL {
        // SAFETY: kill with a child's pid has no memory preconditions.
        assert_eq!(unsafe { libc::kill(child.id() as i32, sig) }, 0);
    } else {
        common::run::signal(child, sig);
    }
}

/// Waits until `path` exists and holds at least `bytes`, or panics after `limit`.
fn wait_for_file(path: &Path, bytes: u64, limit: Duration) {
    let start = Instant::now();
    while std::fs::metadata(path).map_or(0, |m| m.len()) < bytes {
        assert!(start.elapsed() < limit, "{} never grew", path.display());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Video packets ffprobe counts in `path` (what a player gets), and whether ffprobe
/// complained about the file's structure ("moov atom not found" and the like).
fn probe(path: &Path) -> (u64, String) {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            "v:0",
            "-count_packets",
            "-show_entries",
            "stream=nb_read_packets",
            "-of",
            "csv=p=0",
        ])
        .arg(path)
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0);
    (n, String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_second_stop_during_finalizing_still_leaves_a_playable_file() {
    let dir = TempDir::new("second-stop");
    let clip = make_clip(
        &dir.join("clip.mkv").display().to_string(),
        "1280x720",
        "900",
    );
    for ext in ["mp4", "mov", "webm"] {
        let out = dir.join(&format!("out.{ext}"));
        let summary = dir.join(&format!("summary-{ext}.json"));
        let child = spawn_in(
            dir.path(),
            &[
                "-i",
                &clip,
                "--headless",
                "-o",
                out.to_str().unwrap(),
                "--summary-json",
                summary.to_str().unwrap(),
            ],
        );
        wait_for_file(&out, 200_000, Duration::from_secs(30));
        send(&child, libc::SIGINT);
        // The encoder is flushing: people press again.
        std::thread::sleep(Duration::from_millis(150));
        send(&child, libc::SIGINT);
        let o = wait_with_deadline(child, Duration::from_secs(60), "second SIGINT");
        let err = stderr(&o);
        assert!(
            matches!(o.status.code(), Some(0) | Some(130)),
            "{ext}: {:?}\n{err}",
            o.status
        );
        let (held, complaint) = probe(&out);
        assert!(
            !complaint.contains("moov atom not found") && held > 0,
            "{ext}: unplayable ({held} packets): {complaint}\n{err}"
        );
        assert_eq!(frames_in(out.to_str().unwrap()), held, "{ext}:\n{err}");
        // An abort is a failure, whenever it came: never `ok: true` beside exit 130.
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        let ok = o.status.code() == Some(0);
        assert_eq!(json["ok"], ok, "{ext}: exit {:?}: {json}\n{err}", o.status);
        println!(
            "{ext}: second SIGINT, exit {:?}, {held} frames kept",
            o.status.code()
        );
    }
}

#[test]
fn kill_9_keeps_all_but_the_last_second_of_a_live_recording() {
    let dir = TempDir::new("kill9");
    for ext in ["mp4", "mov"] {
        let out = dir.join(&format!("live.{ext}"));
        let mut child = spawn_in(
            dir.path(),
            &[
                "-i",
                "pattern",
                "--size",
                "320x240",
                "--fps",
                "30",
                "--headless",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        // The clock starts when the file has its header: frames are being written.
        wait_for_file(&out, 1, Duration::from_secs(20));
        let started = Instant::now();
        std::thread::sleep(Duration::from_secs(4));
        let ran = started.elapsed().as_secs_f64();
        send(&child, libc::SIGKILL);
        let _ = child.wait();
        let (held, complaint) = probe(&out);
        let due = ((ran - 1.0) * 30.0) as u64;
        assert!(
            held >= due,
            "{ext}: {held} frames kept after {ran:.2} s at 30 fps (at least {due} expected): {complaint}"
        );
        println!("{ext}: kill -9 after {ran:.2} s kept {held} frames");
    }
}

#[test]
fn kill_9_never_leaves_a_truncated_image() {
    let dir = TempDir::new("kill9-png");
    for round in 0..3 {
        let seq = dir.join(&format!("r{round}"));
        let pattern = seq.join("%05d.png");
        let mut child = spawn_in(
            dir.path(),
            &[
                "-i",
                "pattern",
                "--size",
                "1920x1080",
                "--fps",
                "0",
                "--headless",
                "-o",
                pattern.to_str().unwrap(),
            ],
        );
        wait_for_file(&seq.join("00003.png"), 1, Duration::from_secs(60));
        std::thread::sleep(Duration::from_millis(137 * (round + 1)));
        send(&child, libc::SIGKILL);
        let _ = child.wait();
        let mut checked = 0;
        for entry in std::fs::read_dir(&seq).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a temporary file that was never renamed into place
            }
            let bytes = std::fs::read(entry.path()).unwrap();
            assert!(
                bytes.len() > 12
                    && bytes[bytes.len() - 12..].starts_with(&[0, 0, 0, 0, b'I', b'E', b'N', b'D']),
                "{name} is truncated ({} bytes)",
                bytes.len()
            );
            checked += 1;
        }
        assert!(checked >= 4);
        println!("round {round}: {checked} whole images after kill -9");
    }
}

#[test]
fn an_existing_output_is_replaced_only_with_y_and_only_by_a_finished_file() {
    let dir = TempDir::new("overwrite");
    let precious = dir.join("precious.mp4");
    let p = precious.to_str().unwrap();
    std::fs::write(&precious, b"the user's video").unwrap();
    let keep = |what: &str| {
        assert_eq!(
            std::fs::read(&precious).unwrap(),
            b"the user's video",
            "{what} touched the existing file"
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n != "precious.mp4")
            .collect();
        assert!(leftovers.is_empty(), "{what} left {leftovers:?}");
    };
    let pattern = [
        "-i",
        "pattern",
        "--size",
        "64x48",
        "--frames",
        "5",
        "--headless",
    ];
    // Without -y, and with -n: refused, untouched.
    for flag in [None, Some("-n")] {
        let mut args = pattern.to_vec();
        args.extend(flag);
        args.extend(["-o", p]);
        let o = framepipe(&args, Duration::from_secs(30));
        assert_eq!(o.status.code(), Some(1));
        let err = stderr(&o);
        assert!(err.contains("already exists"), "{err}");
        keep(&format!("{flag:?}"));
    }
    // -y with an encoder that can't open (HEVC needs 16x16): the old file stays.
    let o = framepipe(
        &[
            "-i",
            "pattern",
            "--size",
            "8x8",
            "--frames",
            "5",
            "--headless",
            "-y",
            "--codec",
            "hevc",
            "-o",
            p,
        ],
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("at least 16x16"), "{}", stderr(&o));
    keep("a failed encoder");
    // -y with standard input cut inside frame 0: the old file stays.
    let mut child = Command::new(bin())
        .args(["-i", "-", "--headless", "-y", "-o", p])
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(b"YUV4MPEG2 W64 H48 F30:1 C420jpeg\nFRAME\n0123456789")
            .unwrap();
    }
    let o = wait_with_deadline(child, Duration::from_secs(30), "cut stdin");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    keep("standard input cut inside frame 0");
    // -y that finishes: replaced, with every frame.
    let mut args = pattern.to_vec();
    args.extend(["-y", "-o", p]);
    let o = framepipe(&args, Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frames_in(p), 5);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    // An image sequence: existing frames are refused without -y, replaced with it.
    let seq = dir.join("seq");
    std::fs::create_dir(&seq).unwrap();
    std::fs::write(seq.join("00001.png"), b"old").unwrap();
    let s = seq.join("%05d.png");
    let mut args = pattern.to_vec();
    args.extend(["-o", s.to_str().unwrap()]);
    let o = framepipe(&args, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("already exist"), "{}", stderr(&o));
    assert_eq!(std::fs::read(seq.join("00001.png")).unwrap(), b"old");
    args.push("-y");
    assert!(framepipe(&args, Duration::from_secs(30)).status.success());
    assert_ne!(std::fs::read(seq.join("00001.png")).unwrap(), b"old");
}

#[test]
fn a_second_run_on_the_same_output_is_refused_naming_the_first() {
    let dir = TempDir::new("two-runs");
    for (name, extra) in [
        ("same.mkv", None),
        ("same.mp4", Some("-y")),
        ("sq/%04d.png", None),
    ] {
        let out = dir.join(name);
        let o = out.to_str().unwrap();
        let mut args = vec!["-i", "pattern", "--size", "160x120", "--headless", "-o", o];
        args.extend(extra);
        let first = spawn_in(dir.path(), &args);
        let file = if name.contains('%') {
            dir.join("sq/0001.png")
        } else {
            out.clone()
        };
        wait_for_file(&file, 1, Duration::from_secs(20));
        let mut second = args.clone();
        if extra.is_none() {
            second.push("-y");
        }
        let o2 = framepipe(&second, Duration::from_secs(30));
        let err = stderr(&o2);
        assert_eq!(
            o2.status.code(),
            Some(1),
            "{name}: the second run must be refused:\n{err}"
        );
        assert!(
            err.contains("being written by another run")
                && err.contains(&format!("pid {}", first.id())),
            "{name}: {err}"
        );
        send(&first, libc::SIGINT);
        let o1 = wait_with_deadline(first, Duration::from_secs(20), "first run");
        assert!(o1.status.success(), "{name}: {}", stderr(&o1));
        if !name.contains('%') {
            let (held, complaint) = probe(&out);
            assert!(held > 0 && complaint.is_empty(), "{name}: {complaint}");
        }
    }
}

/// A local HTTP server with byte ranges over `dir`; killed when dropped.
pub(crate) struct HttpFiles(Child, pub(crate) u16);

impl HttpFiles {
    pub(crate) fn serve(dir: &Path) -> Self {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/http_files.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port = line.trim().parse().unwrap();
        Self(child, port)
    }
}

impl Drop for HttpFiles {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_video_file_at_an_http_url_is_read_as_a_file() {
    let dir = TempDir::new("http-file");
    make_clip(
        &dir.join("clip.mp4").display().to_string(),
        "640x360",
        "240",
    );
    let server = HttpFiles::serve(dir.path());
    let url = format!("http://127.0.0.1:{}/clip.mp4", server.1);
    let out = dir.join("out.mkv");
    let o = framepipe(
        &["-i", &url, "--headless", "-o", out.to_str().unwrap()],
        Duration::from_secs(120),
    );
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("is a file"), "{err}");
    let [captured, _, written, dropped] = o.counts().unwrap();
    assert_eq!((captured, written, dropped), (240, 240, 0), "{err}");
    assert_eq!(frames_in(out.to_str().unwrap()), 240);
}

#[test]
fn a_live_http_stream_says_so_and_warns_about_drops() {
    let dir = TempDir::new("http-live");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://127.0.0.1:{port}");
    // ffmpeg's own server, one client, real time: a live stream.
    let mut server = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-re",
            "-f",
            "lavfi",
            "-i",
            "testsrc2=size=320x240:rate=30",
            "-t",
            "20",
        ])
        .args(["-c:v", "mpeg2video", "-f", "mpegts", "-listen", "1", &url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    common::run::wait_bound(port, "ffmpeg's server");
    let o = framepipe(
        &[
            "-i",
            &url,
            "--headless",
            "--frames",
            "30",
            "-o",
            dir.join("o.mkv").to_str().unwrap(),
        ],
        Duration::from_secs(60),
    );
    let _ = server.kill();
    let _ = server.wait();
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(err.contains("is read live"), "{err}");
    assert!(
        err.contains("audio, if any, goes to --record only"),
        "{err}"
    );
}

#[test]
fn written_counts_only_what_standard_output_took_whole() {
    // /dev/full takes nothing.
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let summary = TempDir::new("dev-full");
    let json = summary.join("s.json");
    let o = Command::new(bin())
        .args([
            "-i",
            "pattern",
            "--size",
            "64x48",
            "--frames",
            "30",
            "--fps",
            "0",
            "--headless",
            "-o",
            "-",
        ])
        .arg("--summary-json")
        .arg(&json)
        .stdout(full)
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(s["frames"]["written"], 0, "{s}");
}

#[test]
fn a_link_planted_during_a_sequence_is_replaced_not_followed() {
    let dir = TempDir::new("planted-link");
    let input = dir.join("input.ts");
    std::fs::write(&input, b"the user's input").unwrap();
    let seq = dir.join("sq");
    std::fs::create_dir(&seq).unwrap();
    let child = spawn_in(
        dir.path(),
        &[
            "-i",
            "pattern",
            "--size",
            "64x48",
            "--fps",
            "30",
            "--frames",
            "60",
            "--headless",
            "-o",
            "sq/%05d.png",
        ],
    );
    wait_for_file(&seq.join("00002.png"), 1, Duration::from_secs(20));
    std::os::unix::fs::symlink("../input.ts", seq.join("00050.png")).unwrap();
    let o = wait_with_deadline(child, Duration::from_secs(30), "sequence run");
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(std::fs::read(&input).unwrap(), b"the user's input");
    let meta = std::fs::symlink_metadata(seq.join("00050.png")).unwrap();
    assert!(
        meta.file_type().is_file(),
        "frame 50 replaced the link with its own file"
    );
}

#[test]
fn every_stop_signal_stops_cleanly_even_before_the_first_frame() {
    let dir = TempDir::new("signals");
    for (sig, name) in [
        (libc::SIGQUIT, "SIGQUIT"),
        (libc::SIGUSR1, "SIGUSR1"),
        (libc::SIGUSR2, "SIGUSR2"),
        (libc::SIGALRM, "SIGALRM"),
        (libc::SIGTERM, "SIGTERM"),
        (libc::SIGHUP, "SIGHUP"),
    ] {
        let out = dir.join(&format!("{name}.mp4"));
        let child = spawn_in(
            dir.path(),
            &[
                "-i",
                "pattern",
                "--size",
                "160x120",
                "--headless",
                "-o",
                out.to_str().unwrap(),
            ],
        );
        wait_for_file(&out, 1, Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(500));
        send(&child, sig);
        let stopped = Instant::now();
        let o = wait_with_deadline(child, Duration::from_secs(10), name);
        assert_eq!(o.status.code(), Some(0), "{name}: {}", stderr(&o));
        assert!(stopped.elapsed() < Duration::from_secs(3), "{name}");
        let (held, complaint) = probe(&out);
        assert!(
            held > 0 && complaint.is_empty(),
            "{name}: {held} {complaint}"
        );
    }
    // A signal at once, before any frame: a stop, not a kill (143).
    for sig in [libc::SIGTERM, libc::SIGQUIT, libc::SIGUSR1] {
        let child = spawn_in(
            dir.path(),
            &["-i", "pattern", "--headless", "--frames", "100000"],
        );
        // Once framepipe's first code has run: before that the dynamic loader maps the
        // 250-odd shared libraries OpenCV brings and no code of the process runs (README,
        // exit codes), 0.17-0.26 s on the 2-core machine, more under a loaded test run.
        send(&child, sig);
        let o = wait_with_deadline(child, Duration::from_secs(10), "early signal");
        assert_eq!(
            o.status.code(),
            Some(0),
            "signal {sig}: {:?} {}",
            o.status,
            stderr(&o)
        );
    }
}

#[test]
fn a_reader_that_stops_reading_does_not_hold_the_stop() {
    let dir = TempDir::new("stalled-reader");
    let out = dir.join("also.json");
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "exec {} -i pattern --fps 0 --headless -o - --summary-json {} | sleep 25",
            bin(),
            out.display()
        ))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let pid = Command::new("pgrep")
        .args(["-P", &child.id().to_string(), "framepipe"])
        .output()
        .unwrap();
    let pid: i32 = String::from_utf8_lossy(&pid.stdout).trim().parse().unwrap();
    // SAFETY: kill with a pid has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let stopped = Instant::now();
    while Path::new(&format!("/proc/{pid}")).exists()
        && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
    {
        assert!(
            stopped.elapsed() < Duration::from_secs(3),
            "framepipe alive 3 s after SIGINT"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    assert_eq!(s["ok"], false, "{s}");
}

#[test]
fn special_files_as_outputs_are_refused_at_once() {
    let dir = TempDir::new("fifo-out");
    let fifo = dir.join("f.mkv");
    let fifo_json = dir.join("f.json");
    for f in [&fifo, &fifo_json] {
        let c = std::ffi::CString::new(f.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    }
    let null_link = dir.join("null.mkv");
    std::os::unix::fs::symlink("/dev/null", &null_link).unwrap();
    let base = [
        "-i",
        "pattern",
        "--size",
        "64x48",
        "--frames",
        "3",
        "--headless",
    ];
    for (flag, path, says) in [
        ("-o", &fifo, "pipe (FIFO)"),
        ("--summary-json", &fifo_json, "pipe (FIFO)"),
        ("-o", &null_link, "character device"),
    ] {
        let mut args = base.to_vec();
        args.extend([flag, path.to_str().unwrap()]);
        let o = framepipe(&args, Duration::from_secs(10));
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        assert!(
            err.contains(says) && err.contains("not a regular file"),
            "{err}"
        );
    }
}

#[test]
fn hostile_kernel_files_are_refused_in_bounded_time() {
    let dir = TempDir::new("hostile-kernel");
    let many = dir.join("many.cu");
    std::fs::write(&many, "__global__ ".repeat(90_000)).unwrap();
    for file in ["/proc/self/pagemap".to_string(), many.display().to_string()] {
        let started = Instant::now();
        let o = framepipe(
            &[
                "-i",
                "pattern",
                "--headless",
                "--frames",
                "1",
                "--filter",
                &format!("kernel:{file}"),
            ],
            Duration::from_secs(20),
        );
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{file}: {:?}",
            started.elapsed()
        );
        assert!(stderr(&o).len() < 2000, "{}", stderr(&o));
    }
}

#[test]
fn messages_name_the_cause() {
    let dir = TempDir::new("messages");
    let d = |n: &str| dir.join(n).display().to_string();
    let base = ["-i", "pattern", "--size", "64x48", "--headless"];
    let long = format!("{}.mkv", "x".repeat(260));
    let chain = vec!["gauss:2"; 2000].join(",") + ",nonsense";
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["--frames".into(), "0".into()], "--frames 0"),
        (vec!["--fps".into(), "1e7".into()], "out of range"),
        (vec!["--fps".into(), "1e-300".into()], "out of range"),
        (
            vec!["-o".into(), d("v%dx.mp4")],
            "numbers the files of an image sequence",
        ),
        (
            vec!["-o".into(), d(&long)],
            "the file name is 264 bytes long",
        ),
        (
            vec![
                "--trace".into(),
                d("x.json"),
                "--summary-json".into(),
                d("x.json"),
            ],
            "both name",
        ),
        (vec!["-f".into(), chain], "characters left out"),
    ];
    for (extra, says) in cases {
        let mut args: Vec<&str> = base.to_vec();
        if !extra.contains(&"--frames".to_string()) {
            args.extend(["--frames", "2"]);
        }
        args.extend(extra.iter().map(String::as_str));
        let o = framepipe(&args, Duration::from_secs(30));
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{extra:?}:\n{err}");
        assert!(
            err.contains(says),
            "{extra:?}: expected {says:?} in:\n{err}"
        );
        assert!(
            err.len() < 2000,
            "{extra:?}: {} bytes of message",
            err.len()
        );
    }
    // A '%' that is not a frame number is a plain file name.
    let mut args = base.to_vec();
    let pct = d("100%.mkv");
    args.extend(["--frames", "2", "-o", &pct]);
    let o = framepipe(&args, Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frames_in(&pct), 2);
    // A Y4M stream given as raw frames.
    let o = Command::new(bin())
        .args([
            "-i",
            "-",
            "--input-format",
            "i420",
            "--size",
            "64x48",
            "--headless",
        ])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            let mut i = c.stdin.take().unwrap();
            let _ = i.write_all(b"YUV4MPEG2 W64 H48 F30:1 C420jpeg\nFRAME\n");
            let _ = i.write_all(&[0u8; 64 * 48 * 3 / 2]);
            drop(i);
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("is a YUV4MPEG2 stream, not raw frames"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_silent_x_server_is_refused_within_seconds() {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/silent_x.py");
    let mut x = Command::new("python3")
        .arg(script)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(x.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let started = Instant::now();
    let child = Command::new(bin())
        .args(["-i", "pattern", "--frames", "5"])
        .env("DISPLAY", format!(":{}", line.trim()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let o = wait_with_deadline(child, Duration::from_secs(20), "silent X server");
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("did not answer"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    // A stop while the display is being asked ends the run at once.
    let child = Command::new(bin())
        .args(["-i", "pattern", "--frames", "5"])
        .env("DISPLAY", format!(":{}", line.trim()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(800));
    send(&child, libc::SIGTERM);
    let stopped = Instant::now();
    let o = wait_with_deadline(
        child,
        Duration::from_secs(10),
        "stop while asking the display",
    );
    let _ = x.kill();
    let _ = x.wait();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stopped.elapsed() < Duration::from_secs(1),
        "{:?}",
        stopped.elapsed()
    );
}

#[test]
fn quiet_runs_print_only_framepipe_s_own_lines() {
    let dir = TempDir::new("quiet");
    let notes = dir.join("notes.mp4");
    std::fs::write(&notes, b"not a video").unwrap();
    for input in [
        notes.display().to_string(),
        "videotestsrc num-buffers=5 ! nonexistentelement ! appsink".to_string(),
    ] {
        let o = framepipe(&["-q", "-i", &input, "--headless"], Duration::from_secs(30));
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(1), "{err}");
        let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines.len(), 1, "{input}: {err}");
        assert!(lines[0].starts_with("framepipe: error:"), "{err}");
    }
}

#[test]
fn newcomers_first_commands_work_from_any_folder() {
    let dir = TempDir::new("newcomer");
    make_clip(&dir.join("clip.mkv").display().to_string(), "64x48", "4");
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/run.sh");
    let o = Command::new("bash")
        .args([
            script,
            "--input",
            "clip.mkv",
            "--headless",
            "--output",
            "out.mkv",
            "-q",
        ])
        .current_dir(dir.path())
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(frames_in(dir.join("out.mkv").to_str().unwrap()), 4);
    // --help lists only the formats --output-format writes; a read-only one says why.
    let help = Command::new(bin()).arg("--help").output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    let line = help
        .lines()
        .skip_while(|l| !l.contains("--output-format"))
        .take(4)
        .collect::<String>();
    assert!(!line.contains("yuv422p"), "{line}");
    let o = framepipe(
        &[
            "-i",
            "pattern",
            "--headless",
            "-o",
            "-",
            "--output-format",
            "yuv422p",
        ],
        Duration::from_secs(10),
    );
    assert!(
        stderr(&o).contains("is read, not written"),
        "{}",
        stderr(&o)
    );
    // A 4:2:2 input written as 4:2:0 says so before it starts.
    let o = Command::new(bin())
        .args(["-i", "-", "--headless", "-o", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            let mut i = c.stdin.take().unwrap();
            let _ = i.write_all(b"YUV4MPEG2 W64 H48 F30:1 C422\nFRAME\n");
            let _ = i.write_all(&[128u8; 64 * 48 * 2]);
            drop(i);
            c.wait_with_output()
        })
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("half of its colour resolution is dropped"),
        "{}",
        stderr(&o)
    );
}
