//! The fourth round of attacks (issue 58), each reproduced as it was run and now held:
//! lists and inputs that are no regular file or have no bound, an output that never
//! connects, an input named by URL that an output would replace, a chain typed into the
//! page that resizes the frames, secrets in what the page, the log and the summary show.
#![cfg(feature = "opencv")]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use common::run::{
    bin, framepipe, free_port, http, make_clip, require, stderr, wait_with_deadline, TempDir,
};

/// framepipe with `args`, headless, its log in `log` (read while it runs), once its stop
/// handler is in place.
fn start(dir: &Path, args: &[&str], log: &Path) -> Child {
    let child = Command::new(bin())
        .current_dir(dir)
        .arg("--headless")
        .args(args)
        .env_remove("DISPLAY")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap();
    common::run::wait_until_it_catches(child.id(), libc::SIGINT);
    child
}

/// Waits up to `limit` for `log` to hold `text`; how long it took.
fn wait_for_line(log: &Path, text: &str, limit: Duration) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::fs::read_to_string(log).is_ok_and(|l| l.contains(text)) {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A process's resident memory, MiB.
fn rss_mib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or(0)
        / 1024
}

/// Attacks 14 and 15: an inputs list that is a FIFO (it held `open` for ever), `/dev/zero`
/// (unbounded memory) or a file past the bound is refused in one line at the start; one
/// swapped for a link to `/dev/zero` while the run goes is refused and the inputs stay.
#[test]
fn an_inputs_list_is_a_regular_file_of_bounded_size() {
    let dir = TempDir::new("attack-lists");
    let fifo = dir.join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let huge = dir.join("huge.txt");
    let line = "pattern:16x16:1\n".repeat(1 << 16);
    let mut f = std::fs::File::create(&huge).unwrap();
    for _ in 0..18 {
        f.write_all(line.as_bytes()).unwrap(); // 18 MiB
    }
    drop(f);
    for (list, says) in [
        (fifo.display().to_string(), "not a regular file"),
        ("/dev/zero".to_string(), "not a regular file"),
        (huge.display().to_string(), "larger than 16 MiB"),
    ] {
        let started = Instant::now();
        let out = framepipe(&["--headless", "--inputs", &list], Duration::from_secs(20));
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{list}: {err}");
        assert!(
            err.contains(says) && err.lines().count() == 1,
            "{list}: {err}"
        );
        assert!(started.elapsed() < Duration::from_secs(10), "{list}: slow");
    }
    // Swapped while running: a link to /dev/zero (as a ConfigMap's link swap would).
    let list = dir.join("cams.txt");
    std::fs::write(&list, "a = pattern:64x48:i420:10\n").unwrap();
    let log = dir.join("run.log");
    let mut child = start(dir.path(), &["--inputs", list.to_str().unwrap()], &log);
    std::thread::sleep(Duration::from_millis(500));
    let link = dir.join("zero-link");
    std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
    std::fs::rename(&link, &list).unwrap();
    let said = wait_for_line(&log, "the inputs stay as they are", Duration::from_secs(5));
    let log_text = std::fs::read_to_string(&log).unwrap();
    assert!(said.is_some(), "{log_text}");
    assert!(log_text.contains("not a regular file"), "{log_text}");
    std::thread::sleep(Duration::from_secs(2));
    let rss = rss_mib(child.id());
    assert!(rss < 300, "{rss} MiB resident after the swap");
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended:\n{log_text}"
    );
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "swapped list");
    assert!(
        out.status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
}

/// Attack 16: a line appended to a list of 99,990 inputs (none of them this shard's) was
/// noticed after 69 s: the comparison of the two lists was quadratic. Now within seconds.
#[test]
fn a_change_to_a_list_of_a_hundred_thousand_inputs_is_noticed_at_once() {
    use framepipe::plan::shard::owner;
    let dir = TempDir::new("attack-long-list");
    let others = (0..)
        .map(|i| format!("cam{i}"))
        .filter(|n| owner(n, 1000) != 0);
    let mut text = String::with_capacity(4 << 20);
    for name in others.take(99_990) {
        text.push_str(&format!("{name} = udp://127.0.0.1:9/{name}\n"));
    }
    let list = dir.join("cams.txt");
    std::fs::write(&list, &text).unwrap();
    let log = dir.join("run.log");
    let args = ["--inputs", list.to_str().unwrap(), "--shard", "0/1000"];
    let child = start(dir.path(), &args, &log);
    let waiting = wait_for_line(&log, "waiting", Duration::from_secs(20));
    assert!(
        waiting.is_some(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    let mine = (0..)
        .map(|i| format!("mine{i}"))
        .find(|n| owner(n, 1000) == 0)
        .unwrap();
    text.push_str(&format!("{mine} = pattern:64x48:i420:10\n"));
    let new = dir.join("cams.new");
    std::fs::write(&new, &text).unwrap();
    std::fs::rename(&new, &list).unwrap();
    let noticed = wait_for_line(
        &log,
        "this process's inputs change",
        Duration::from_secs(20),
    );
    let said = std::fs::read_to_string(&log).unwrap();
    let rss = rss_mib(child.id());
    common::run::interrupt(&child);
    let _ = wait_with_deadline(child, Duration::from_secs(15), "long list");
    let noticed = noticed.unwrap_or_else(|| panic!("not noticed in 20 s:\n{said}"));
    // Looked at every second; before, 69 s.
    assert!(
        noticed < Duration::from_secs(5),
        "noticed after {noticed:?}"
    );
    assert!(rss < 400, "{rss} MiB resident with the list");
}

/// Attack 5: an RTMP output that never connects exited 0, its totals "0 sent, 0 dropped"
/// beside its own line's "30 dropped". ffmpeg exits 1.
#[test]
fn an_output_that_never_connects_fails_the_run() {
    let out = framepipe(
        &[
            "--headless",
            "-i",
            "pattern:320x240:30",
            "--frames",
            "30",
            "--output",
            "rtmp://127.0.0.1:1/live/x",
        ],
        Duration::from_secs(30),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("never connected"), "{err}");
    let summary = out.summary.expect("a summary");
    assert_eq!(summary["ok"], false, "{summary}");
    let stream = &summary["streams"][0];
    let (sent, dropped, taken) = (&stream["sent"], &stream["dropped"], &stream["taken"]);
    assert_eq!(
        (sent.as_u64(), dropped.as_u64()),
        (Some(0), taken.as_u64()),
        "{summary}"
    );
}

/// Attack 10: an input named by URL (`file:`, `concat:`, an HLS playlist of `file://`
/// segments) was not recognised as the output, which replaced it; the plain path was refused.
#[test]
fn an_input_named_by_any_url_is_never_written_over() {
    let dir = TempDir::new("attack-url-input");
    let d = |n: &str| dir.join(n).display().to_string();
    let clip = make_clip(&d("victim_in.mp4"), "160x120", "10");
    let segment = make_clip(&d("i0.ts"), "160x120", "10");
    let playlist = format!(
        "#EXTM3U\n#EXT-X-TARGETDURATION:1\n#EXTINF:0.33,\nfile://{segment}\n#EXT-X-ENDLIST\n"
    );
    std::fs::write(d("in.m3u8"), playlist).unwrap();
    let cases = [
        (format!("file://{clip}"), clip.clone()),
        (format!("concat:file://{clip}"), clip.clone()),
        (format!("file://{}", d("in.m3u8")), segment.clone()),
        (d("in.m3u8"), segment.clone()),
    ];
    for (input, output) in cases {
        let before = std::fs::read(&output).unwrap();
        let out = framepipe(
            &["--headless", "-i", &input, "-o", &output, "-y"],
            Duration::from_secs(30),
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{input} -> {output}: {err}");
        assert!(err.contains("is the input file"), "{input}: {err}");
        assert_eq!(
            std::fs::read(&output).unwrap(),
            before,
            "{input}: written over"
        );
    }
}

/// Attack 11: a chain typed into the page that changes the frames' size answered `ok`, then
/// ended the run ("does not fit its slot") or wrote sheared pictures. Now refused with its
/// reason, and the run and its file go on whole.
#[test]
fn the_page_refuses_a_chain_that_resizes_the_frames() {
    require(&["ffprobe"]);
    let dir = TempDir::new("attack-chain");
    let port = free_port();
    let log = dir.join("run.log");
    let args = [
        "--backend",
        "cpu",
        "-i",
        "pattern:320x240:25",
        "--serve",
        &port.to_string(),
        "-o",
        "out.mp4",
    ];
    let child = start(dir.path(), &args, &log);
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::run::try_http(port, "GET", "/healthz", "").is_none() {
        assert!(Instant::now() < deadline, "the view did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let control = "X-Framepipe-Control: 1\r\n";
    for chain in [
        "scale:1280:720",
        "pad:32768:32768",
        "scale:320:180",
        "transpose",
    ] {
        let (status, body) = http(port, "POST", &format!("/chain?chain={chain}"), control);
        let body = String::from_utf8_lossy(&body);
        assert_eq!(status, 400, "{chain}: {body}");
        assert!(body.contains("changes the frames' size"), "{chain}: {body}");
    }
    let (status, _) = http(port, "POST", "/chain?chain=gray", control);
    assert_eq!(status, 200);
    std::thread::sleep(Duration::from_millis(500));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "chains");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(out.status.success(), "{said}");
    let (codec, frames) = common::probe::codec_and_frames(&dir.join("out.mp4"));
    assert!(
        codec == "h264" && frames > 20,
        "{codec}, {frames} frames\n{said}"
    );
}

/// Attack 12: a password and secret query parameters were shown by `/stats`, `/metrics`,
/// the log and the summary. None of the secrets below may appear anywhere.
#[test]
fn no_secret_reaches_the_page_the_log_or_the_summary() {
    let dir = TempDir::new("attack-secrets");
    let port = free_port();
    let secrets = [
        "S3cretPw",
        "TopSecret123",
        "Hunter2Pw",
        "tok3nValue",
        "k3yValue",
        "authValue9",
    ];
    let inputs = [
        "pattern:160x120:i420:10".to_string(),
        format!("http://admin:{}@127.0.0.1:1/a.ts", secrets[0]),
        format!("srt://127.0.0.1:1?passphrase={}&latency=20", secrets[1]),
        format!("rtsp://127.0.0.1:1/s?password={}&x=1", secrets[2]),
        format!(
            "http://127.0.0.1:1/b.m3u8?token={}&key={}&auth={}",
            secrets[3], secrets[4], secrets[5]
        ),
    ];
    let mut args: Vec<&str> = Vec::new();
    for i in &inputs {
        args.extend(["-i", i]);
    }
    let port_text = port.to_string();
    args.extend([
        "--serve",
        &port_text,
        "--summary-json",
        "summary.json",
        "-v",
    ]);
    let log = dir.join("run.log");
    let child = start(dir.path(), &args, &log);
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::run::try_http(port, "GET", "/healthz", "").is_none() {
        assert!(Instant::now() < deadline, "the view did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(2));
    let mut shown = String::new();
    for path in ["/", "/stats", "/metrics", "/healthz"] {
        let (_, body) = http(port, "GET", path, "");
        shown.push_str(&String::from_utf8_lossy(&body));
    }
    assert!(
        shown.contains("127.0.0.1:1"),
        "the inputs are not shown:\n{shown}"
    );
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "secrets");
    let _ = out;
    shown.push_str(&std::fs::read_to_string(&log).unwrap());
    shown.push_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap_or_default());
    for secret in secrets {
        assert!(!shown.contains(secret), "{secret} shown:\n{shown}");
    }
}

/// Video and audio packets ffprobe counts in `path`.
fn packets(path: &Path) -> (u64, u64) {
    let count = |stream: &str| -> u64 {
        let out = Command::new("ffprobe")
            .args(["-v", "error", "-select_streams", stream, "-count_packets"])
            .args(["-show_entries", "stream=nb_read_packets", "-of", "csv=p=0"])
            .arg(path)
            .output()
            .unwrap();
        // MPEG-TS lists its streams twice (programs, then streams): the first line.
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines()
            .next()
            .unwrap_or("")
            .trim()
            .parse()
            .unwrap_or(0)
    };
    (count("v:0"), count("a:0"))
}

/// The recorded files `prefix*` in `dir`, by name, and no `.part` left among them.
fn recorded(dir: &Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let parts = common::run::files_starting(dir, ".");
    assert!(
        parts
            .iter()
            .all(|p| !p.to_string_lossy().ends_with(".part")),
        "{parts:?}"
    );
    common::run::files_starting(dir, prefix)
}

/// Attacks 1 and 3: a looping input (`-stream_loop 6 … -c copy`, AAC beside H.264) lost its
/// recording at the first step back ("non monotonically increasing dts", 11 of 14 segments,
/// exit 0), and joined files lost a GOP at each jump (390 of 450 packets). Every packet is
/// now in a segment: each jump starts a new one at its keyframe, timed from there.
#[test]
fn timestamps_that_jump_lose_no_packet_of_a_recording() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("attack-record-jumps");
    let cam = dir.join("cam.mp4");
    crate::record::camera_clip(&cam, 10);
    let ffmpeg = |args: &[&str]| {
        let mut ffmpeg = Command::new("ffmpeg");
        ffmpeg.args(["-v", "error", "-y"]).args(args);
        assert!(ffmpeg.status().unwrap().success(), "{args:?}");
    };
    let cam_s = cam.display().to_string();
    let looped = dir.join("loop.ts").display().to_string();
    ffmpeg(&[
        "-stream_loop",
        "6",
        "-i",
        &cam_s,
        "-c",
        "copy",
        "-f",
        "mpegts",
        &looped,
    ]);
    let out = common::run::framepipe_in(
        dir.path(),
        &[
            "--headless",
            "-i",
            &looped,
            "--record",
            "lt-{seg}.mp4",
            "--segment",
            "5",
        ],
        Duration::from_secs(120),
    );
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("stops here"), "{err}");
    let files = recorded(dir.path(), "lt-");
    assert_eq!(files.len(), 14, "{files:?}\n{err}");
    let sum = files
        .iter()
        .map(|f| packets(f))
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    assert_eq!(sum, packets(Path::new(&looped)), "{err}");
    // Three copies of a 3 s clip, joined as `cat` joins them: each copy its own segment.
    let clip = dir.join("clip.ts").display().to_string();
    ffmpeg(&["-i", &cam_s, "-t", "3", "-c", "copy", "-f", "mpegts", &clip]);
    let one = std::fs::read(&clip).unwrap();
    let joined = dir.join("joined.ts");
    std::fs::write(&joined, [one.clone(), one.clone(), one].concat()).unwrap();
    let joined_s = joined.display().to_string();
    let args = [
        "--headless",
        "-i",
        &joined_s,
        "--record",
        "j-{seg}.mp4",
        "--segment",
        "60",
    ];
    let out = common::run::framepipe_in(dir.path(), &args, Duration::from_secs(60));
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let files = recorded(dir.path(), "j-");
    let (v, a) = packets(Path::new(&clip));
    assert_eq!(files.len(), 3, "{files:?}\n{err}");
    for f in &files {
        assert_eq!(packets(f), (v, a), "{}\n{err}", f.display());
    }
    // One file, no segments: every packet in it, its time going on across the jumps.
    let args = ["--headless", "-i", &joined_s, "--record", "j.mkv"];
    let out = common::run::framepipe_in(dir.path(), &args, Duration::from_secs(60));
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(packets(&dir.join("j.mkv")), (3 * v, 3 * a));
}

/// Attack 2: `--record` into a read-only folder ran and said ok; on a full disk it said a
/// warning, exit 0, `ok: true`, and left a `.part`. Now a read-only folder is refused
/// before capture; a full disk gives up the segment (no `.part`), turns `/healthz` 503 and
/// `/metrics`' recording gauge to 1 while it lasts, resumes once space is freed, and the
/// run ends failed with the reason.
#[test]
fn a_recording_that_cannot_write_fails_the_run_and_resumes_when_it_can() {
    use crate::trust::Tmpfs;
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("attack-record-disk");
    let cam = dir.join("cam.ts");
    crate::record::camera_clip(&cam, 12);
    let cam_s = cam.display().to_string();
    let Some(ro) = Tmpfs::mount("attack-record-ro", "ro,size=1m") else {
        return;
    };
    let name = ro.file("x-{seg}.mkv");
    let out = framepipe(
        &[
            "--headless",
            "-i",
            &cam_s,
            "--record",
            &name,
            "--segment",
            "2",
        ],
        Duration::from_secs(30),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("can't be written") && err.contains("Read-only"),
        "{err}"
    );
    assert_eq!(
        out.counts().map(|c| c[0]),
        Some(0),
        "captured before refusing:\n{err}"
    );
    // A disk with room for one segment, then full, then freed.
    let Some(small) = Tmpfs::mount("attack-record-full", "size=1m") else {
        return;
    };
    let filler = small.file("filler");
    std::fs::write(&filler, vec![0u8; 900 << 10]).unwrap();
    let port = free_port();
    let log = dir.join("run.log");
    let record = small.file("r-{seg}.mp4");
    let port_s = port.to_string();
    let args = [
        "--realtime",
        "-i",
        &cam_s,
        "--record",
        &record,
        "--segment",
        "1",
        "--serve",
        &port_s,
        "--summary-json",
        "s.json",
    ];
    let child = start(dir.path(), &args, &log);
    let (mut saw_503, mut saw_gauge) = (false, false);
    let deadline = Instant::now() + Duration::from_secs(8);
    while Instant::now() < deadline && !(saw_503 && saw_gauge) {
        if let Some((status, _)) = common::run::try_http(port, "GET", "/healthz", "") {
            saw_503 |= status == 503;
        }
        if let Some((_, body)) = common::run::try_http(port, "GET", "/metrics", "") {
            let metrics = String::from_utf8_lossy(&body);
            saw_gauge |= metrics
                .lines()
                .any(|l| l.starts_with("framepipe_recording_failing{") && l.ends_with(" 1"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    std::fs::remove_file(&filler).unwrap();
    let out = wait_with_deadline(child, Duration::from_secs(60), "full disk");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(
        saw_503,
        "/healthz never said 503 while the disk was full:\n{said}"
    );
    assert!(
        saw_gauge,
        "/metrics never showed the recording failing:\n{said}"
    );
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("No space left on device"), "{said}");
    assert!(
        said.contains("writing again"),
        "the recording did not resume:\n{said}"
    );
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    assert_eq!(summary["ok"], false, "{summary}");
    assert!(
        summary["error"].as_str().unwrap().contains("recording"),
        "{summary}"
    );
    let files = recorded(small.0.path(), "r-");
    assert!(files.len() >= 3, "{files:?}\n{said}");
    for f in &files {
        let (v, _) = packets(f);
        assert!(v > 0, "{} holds nothing", f.display());
    }
}

/// Attack 17: SIGHUP (read the list again) sent while the process re-executes itself for a
/// changed list (rewritten every 0.1 s) killed it (exit 129) after two or three rewrites:
/// the new image had no handler while it loaded. Now the signal is held across the `exec`
/// (a change while the inputs still open) and taken by the new image as the reload it is;
/// and a change once the run runs is taken in place, by one run.
#[test]
fn sighup_while_the_run_starts_again_is_a_reload_not_a_kill() {
    let dir = TempDir::new("attack-hup-exec");
    let list = dir.join("cams.txt");
    let one = "a = pattern:64x48:i420:10\n";
    std::fs::write(&list, one).unwrap();
    let log = dir.join("run.log");
    let summary = dir.join("summary.json");
    let child = start(
        dir.path(),
        &[
            "-q",
            "--inputs",
            list.to_str().unwrap(),
            "--summary-json",
            summary.to_str().unwrap(),
        ],
        &log,
    );
    let pid = child.id() as i32;
    std::thread::sleep(Duration::from_millis(800));
    let hup = || {
        // SAFETY: kill(2) on our own child's pid, with a signal number.
        unsafe { libc::kill(pid, libc::SIGHUP) };
    };
    for i in 0..40 {
        let text = match i % 2 {
            0 => format!("{one}b{i} = pattern:64x48:i420:10\n"),
            _ => one.to_string(),
        };
        let new = dir.join("cams.new");
        std::fs::write(&new, text).unwrap();
        std::fs::rename(&new, &list).unwrap();
        hup();
        std::thread::sleep(Duration::from_millis(50));
        hup();
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1000));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(15), "SIGHUP across exec");
    let said = std::fs::read_to_string(&log).unwrap();
    assert_eq!(out.status.code(), Some(0), "{:?}\n{said}", out.status);
    // One run took the changes: the inputs that joined and left are in its summary.
    let runs = said.matches("frames:").count();
    assert_eq!(runs, 1, "{said}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let inputs = summary["inputs"].as_array().unwrap();
    assert!(inputs.len() > 5, "{summary}");
    assert!(
        inputs[1..]
            .iter()
            .all(|i| i["ended"] == "removed" || i["ended"] == "stopped"),
        "{summary}"
    );
}

/// Attacks 7 and 8: two runs on one HLS playlist were both accepted and both wrote `a0.ts`,
/// `a1.ts`; playlists `x.m3u8` and `x1.m3u8` in one folder both named segments `x10.ts`,
/// so `x1.m3u8` listed camera x's video. A playlist is now claimed as a file is (a lock
/// naming the run that holds it), and stems whose segments can share a name are refused.
#[test]
fn one_writer_per_playlist_and_per_segment_name() {
    let dir = TempDir::new("attack-hls-claims");
    let d = |n: &str| dir.join(n).display().to_string();
    let log = dir.join("first.log");
    let first = start(
        dir.path(),
        &[
            "-i",
            "pattern:160x120:25",
            "--frames",
            "250",
            "-o",
            &d("a.m3u8"),
        ],
        &log,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while !dir.join("a0.ts").exists() {
        assert!(Instant::now() < deadline, "no first segment");
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = framepipe(
        &[
            "--headless",
            "-i",
            "pattern:160x120:25",
            "--frames",
            "25",
            "-o",
            &d("a.m3u8"),
            "-y",
        ],
        Duration::from_secs(30),
    );
    let err = stderr(&second);
    assert_eq!(second.status.code(), Some(1), "{err}");
    assert!(
        err.contains("being written by another run") && err.contains("pid"),
        "{err}"
    );
    common::run::interrupt(&first);
    let out = wait_with_deadline(first, Duration::from_secs(10), "first playlist");
    assert!(
        out.status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    // The lock goes with the run: the folder keeps the playlist and its segments only.
    assert!(
        !dir.join(".a.m3u8.lock").exists(),
        "the playlist's lock was left"
    );
    // Inputs x and x1 into h/{name}.m3u8.
    let list = dir.join("cams.txt");
    std::fs::write(&list, "x = pattern:160x120:25\nx1 = pattern:160x120:25\n").unwrap();
    let pattern = d("h/{name}.m3u8");
    let out = framepipe(
        &[
            "--headless",
            "--inputs",
            list.to_str().unwrap(),
            "--frames",
            "10",
            "-o",
            &pattern,
        ],
        Duration::from_secs(30),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("segments of the same names"), "{err}");
    assert!(!dir.join("h/x10.ts").exists());
}

/// Attack 19: a UDP input with no sender printed nothing and never gave up (60 s), where a
/// silent RTSP or HTTP source is given up after 10 s. Now every network input is: at its
/// opening, and mid-run once its sender stops (the frames it had sent all kept first).
#[test]
fn a_silent_udp_input_is_given_up_after_ten_seconds() {
    use crate::record::{camera_clip, send_to, udp_input};
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("attack-udp-silent");
    let started = Instant::now();
    let quiet = udp_input(free_port());
    let out = framepipe(&["--headless", "-i", &quiet], Duration::from_secs(30));
    let (took, err) = (started.elapsed(), stderr(&out));
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("timed out: nothing came for 10 s"), "{err}");
    assert!(
        took >= Duration::from_secs(9) && took < Duration::from_secs(16),
        "{took:?}"
    );
    // A sender of 2 s (60 frames), then silence: every frame it sent, then the error.
    let clip = dir.join("cam.ts");
    camera_clip(&clip, 2);
    let port = free_port();
    let out_file = dir.join("out.mkv");
    let args = [
        "-i".into(),
        udp_input(port),
        "-o".into(),
        out_file.display().to_string(),
    ];
    let child = crate::record::start(&args);
    let mut sender = send_to(&clip, &format!("udp://127.0.0.1:{port}?pkt_size=1316"));
    assert!(sender.wait().unwrap().success());
    let out = wait_with_deadline(child, Duration::from_secs(30), "silent mid-run");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("timed out: nothing came for 10 s"), "{err}");
    assert_eq!(
        common::run::frames_in(out_file.to_str().unwrap()),
        60,
        "{err}"
    );
}

/// Attack 4: six UDP cameras each sending 300 frames, stopped 2 s after the last: 299
/// captured and 299 recorded of each (the MPEG-TS demuxer keeps the last packet until it
/// reads an error or the end, and the decoder its delay). A stop now reads them out.
#[test]
fn a_stop_keeps_a_live_cameras_last_frame_and_packet() {
    use crate::record::{camera_clip, send_to, udp_input};
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("attack-udp-drain");
    let clip = dir.join("cam.ts");
    camera_clip(&clip, 3);
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut args: Vec<String> = Vec::new();
    for p in &ports {
        args.extend(["-i".into(), udp_input(*p)]);
    }
    args.extend([
        "--record".into(),
        dir.join("rec-{n}.ts").display().to_string(),
    ]);
    args.extend([
        "--summary-json".into(),
        dir.join("s.json").display().to_string(),
    ]);
    let log = dir.join("run.log");
    let child = start(
        dir.path(),
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &log,
    );
    std::thread::sleep(Duration::from_millis(600));
    let senders: Vec<Child> = ports
        .iter()
        .map(|p| send_to(&clip, &format!("udp://127.0.0.1:{p}?pkt_size=1316")))
        .collect();
    for mut s in senders {
        assert!(s.wait().unwrap().success());
    }
    std::thread::sleep(Duration::from_secs(2));
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "drain");
    let said = std::fs::read_to_string(&log).unwrap();
    assert!(out.status.success(), "{said}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("s.json")).unwrap()).unwrap();
    let (sent, _) = packets(&clip);
    for (n, input) in summary["inputs"].as_array().unwrap().iter().enumerate() {
        assert_eq!(input["captured"], sent, "input {n}: {input}\n{said}");
        let rec = dir.join(&format!("rec-{n}.ts"));
        assert_eq!(packets(&rec).0, sent, "input {n}'s recording\n{said}");
    }
}

/// Attack 9: joined `.ts` files with audio to `.mp4` failed ("writing an audio packet:
/// Invalid argument", exit 1, no file) and `.mkv` kept 150 of 162 frames: only the video's
/// times were offset across a jump. The audio's now are too: every frame of both.
#[test]
fn joined_files_keep_their_audio_across_the_jump() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("attack-joined-audio");
    let clip = dir.join("clip.ts");
    crate::record::camera_clip(&clip, 2);
    let one = std::fs::read(&clip).unwrap();
    let joined = dir.join("joined.ts");
    std::fs::write(&joined, [one.clone(), one.clone(), one].concat()).unwrap();
    let (v, a) = packets(&clip);
    for ext in ["mp4", "mkv"] {
        let written = |input: &Path, name: &str| {
            let out = dir.join(&format!("{name}.{ext}"));
            let (input, out_s) = (input.to_str().unwrap(), out.to_str().unwrap());
            let run = framepipe(
                &["--headless", "-i", input, "-o", out_s],
                Duration::from_secs(60),
            );
            let err = stderr(&run);
            assert!(run.status.success(), "{ext}: {err}");
            (packets(&out), err)
        };
        // The audio is cut at the end of the last frame written: the clip alone shows by
        // how much. Each stream goes on from its own last packet at a join, so the audio
        // may end up to a packet a join later than the video, and lose that much at the
        // end (a packet is 21 ms).
        let ((_, a_alone), _) = written(&clip, "alone");
        let (got, err) = written(&joined, "joined");
        let whole = 2 * a + a_alone;
        assert_eq!(got.0, 3 * v, "{ext}: {err}");
        assert!(
            got.1 <= whole && got.1 + 2 >= whole,
            "{ext}: {got:?} of {whole}\n{err}"
        );
    }
}

/// Attack 13: 800 clients trickling a header line every 2 s and reopening when closed left
/// 11 of 54 real `/healthz` requests answered in 30 s; 768 keep-alive connections re-sending
/// a request every 2 s left none. One cap for all, none per client. Now each client address
/// holds at most its share of the places: real requests from another address are answered
/// while both attacks go on (here 450 of each, from 127.0.0.2 and 127.0.0.3).
#[test]
fn one_client_cannot_take_every_place_of_the_view() {
    use std::io::Write as _;
    use std::net::{Ipv4Addr, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let dir = TempDir::new("attack-per-client");
    let port = free_port();
    let log = dir.join("run.log");
    let port_s = port.to_string();
    let child = start(
        dir.path(),
        &["-i", "pattern:160x120:10", "--serve", &port_s],
        &log,
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while common::run::try_http(port, "GET", "/healthz", "").is_none() {
        assert!(Instant::now() < deadline, "the view did not listen");
        std::thread::sleep(Duration::from_millis(50));
    }
    // 900 connections in all, past the 768 the view holds: the test's descriptors raised.
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit with a valid struct, for this process.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit);
        limit.rlim_cur = limit.rlim_max.min(8192);
        libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
    }
    let done = Arc::new(AtomicBool::new(false));
    let attack = |from: Ivp4, line: &'static [u8]| {
        let done = done.clone();
        std::thread::spawn(move || {
            let connect = || common::run::connect_from(from, port).ok();
            let mut conns: Vec<Option<TcpStream>> = (0..450).map(|_| connect()).collect();
            while !done.load(Ordering::SeqCst) {
                for c in conns.iter_mut() {
                    let alive = c.as_mut().is_some_and(|s| s.write_all(line).is_ok());
                    if !alive {
                        *c = connect(); // closed: open again at once
                    }
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        })
    };
    type Ivp4 = Ipv4Addr;
    let trickle = attack(Ipv4Addr::new(127, 0, 0, 2), b"X-Slow: 1\r\n");
    let keep = attack(
        Ipv4Addr::new(127, 0, 0, 3),
        b"GET /stats HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    );
    std::thread::sleep(Duration::from_secs(2));
    let mut answered = 0;
    for _ in 0..20 {
        let asked = Instant::now();
        if let Some((200, _)) = common::run::try_http(port, "GET", "/healthz", "") {
            answered += u32::from(asked.elapsed() < Duration::from_secs(2));
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    done.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
    keep.join().unwrap();
    common::run::interrupt(&child);
    let out = wait_with_deadline(child, Duration::from_secs(10), "per client");
    assert!(
        out.status.success(),
        "{}",
        std::fs::read_to_string(&log).unwrap()
    );
    assert_eq!(
        answered, 20,
        "real requests answered while the attacks went on"
    );
}

/// An RTSP server that answers OPTIONS, then a DESCRIBE with `Content-Length: 2000000000`
/// and a body that never ends; its port.
fn endless_rtsp_server() -> u16 {
    use std::io::{BufRead, BufReader};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut out = conn;
                let (mut first, mut cseq) = (String::new(), String::new());
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).unwrap_or(0) == 0 {
                        return;
                    }
                    let line = line.trim_end().to_string();
                    if first.is_empty() {
                        first = line;
                        continue;
                    }
                    if let Some(v) = line.strip_prefix("CSeq:") {
                        cseq = v.trim().to_string();
                    }
                    if !line.is_empty() {
                        continue;
                    }
                    if first.starts_with("OPTIONS") {
                        let reply = format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nPublic: DESCRIBE, SETUP, PLAY\r\n\r\n");
                        let _ = out.write_all(reply.as_bytes());
                        first.clear();
                        continue;
                    }
                    let head = format!("RTSP/1.0 200 OK\r\nCSeq: {cseq}\r\nContent-Type: application/sdp\r\nContent-Length: 2000000000\r\n\r\n");
                    let _ = out.write_all(head.as_bytes());
                    let chunk = vec![b'v'; 1 << 16];
                    while out.write_all(&chunk).is_ok() {}
                    return;
                }
            });
        }
    });
    port
}

/// Attack 18: an RTSP server whose DESCRIBE answer announces 2 GB and sends for ever had no
/// time-out, and the answer was allocated and filled (2.03 GB resident after 40 s). FFmpeg's
/// allocations are now bounded (512 MiB each) and a network input's opening to 10 s.
#[test]
fn an_rtsp_answer_of_two_gigabytes_is_refused() {
    let port = endless_rtsp_server();
    let url = format!("rtsp://127.0.0.1:{port}/cam");
    let child = Command::new(bin())
        .args(["--headless", "-i", &url])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let started = Instant::now();
    let mut most = 0;
    while started.elapsed() < Duration::from_secs(15) {
        most = most.max(rss_mib(pid));
        if !Path::new(&format!("/proc/{pid}/status")).exists() || rss_mib(pid) == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = wait_with_deadline(child, Duration::from_secs(15), "endless RTSP answer");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&url) && err.lines().count() == 1, "{err}");
    assert!(most < 600, "{most} MiB resident while it read the answer");
}

/// Attack 20: an HTTP file (MPEG-TS, which states no duration) sent to a live output was
/// read as fast as it came: 50 of 300 frames sent in 0.03 s, 250 dropped. A file served
/// with a size is read as a file now: paced to its rate, every frame sent.
#[test]
fn an_http_file_is_paced_like_a_local_file() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("attack-http-pace");
    let clip = dir.join("long.ts");
    let made = Command::new("ffmpeg")
        .args([
            "-v",
            "error",
            "-f",
            "lavfi",
            "-i",
            "testsrc=size=320x240:rate=30",
        ])
        .args(["-t", "3", "-c:v", "libx264", "-g", "30", "-f", "mpegts"])
        .arg(&clip)
        .status()
        .unwrap();
    assert!(made.success());
    let server = crate::promises::HttpFiles::serve(dir.path());
    let url = format!("http://127.0.0.1:{}/long.ts", server.1);
    let out_url = format!("udp://127.0.0.1:{}", free_port());
    let run = framepipe(
        &["--headless", "--realtime", "-i", &url, "-o", &out_url],
        Duration::from_secs(30),
    );
    let err = stderr(&run);
    assert!(run.status.success(), "{err}");
    let summary = run.summary.expect("a summary");
    let stream = &summary["streams"][0];
    assert_eq!(
        (stream["sent"].as_u64(), stream["dropped"].as_u64()),
        (Some(90), Some(0)),
        "{summary}"
    );
    let elapsed = summary["elapsed_s"].as_f64().unwrap();
    assert!(elapsed > 2.5, "read in {elapsed} s: not paced\n{err}");
}

/// The minor lines of issue 58: a 60000² PNG's error spanned two lines (OpenCV's message
/// ends in a line of codes); a 120 KB `text:` filter was echoed whole, twice, in the
/// summary.
#[test]
fn errors_are_one_line_and_a_huge_chain_is_not_echoed_whole() {
    let dir = TempDir::new("attack-minor-lines");
    let png = dir.join("huge.png");
    // A PNG whose header says 60000 x 60000, made by Python's zlib.
    let script = r#"
import struct, sys, zlib
def chunk(t, d): return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
ihdr = struct.pack(">IIBBBBB", 60000, 60000, 8, 2, 0, 0, 0)
body = chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(bytes(31))) + chunk(b"IEND", b"")
open(sys.argv[1], "wb").write(b"\x89PNG\r\n\x1a\n" + body)
"#;
    let made = Command::new("python3")
        .args(["-c", script])
        .arg(&png)
        .status();
    assert!(made.unwrap().success());
    let out = framepipe(
        &["--headless", "-i", png.to_str().unwrap(), "--frames", "1"],
        Duration::from_secs(30),
    );
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let text = format!("text:{}", "A".repeat(120_000));
    let out = framepipe(
        &[
            "--headless",
            "-i",
            "pattern:64x48",
            "--frames",
            "2",
            "--filter",
            &text,
        ],
        Duration::from_secs(30),
    );
    let said = stderr(&out);
    assert!(out.status.success(), "{}", &said[..said.len().min(2000)]);
    assert!(said.len() < 4000, "{} bytes said", said.len());
}
