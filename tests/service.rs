//! The wall as a service, with real parts: recordings indexed in SQLite and found by time
//! through the browser view's API (`/api/recordings`, its VOD playlist read by ffmpeg and
//! played by headless Chromium), the index made again from the files, retention keeping a
//! budget without touching a file put there by hand, and the API's refusals.
#![cfg(feature = "opencv")]

use crate::common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::run::{bin, ffmpeg_made, free_port, http, http_post, stderr};
use common::run::{live_server_of, wait_with_deadline, TempDir};

/// A 12 s clip of the test pattern, H.264 with a keyframe every second.
fn clip(dir: &TempDir) -> String {
    clip_of(dir, 12)
}

/// A clip of the test pattern `seconds` long, H.264 with a keyframe every second.
fn clip_of(dir: &TempDir, seconds: u32) -> String {
    let path = dir.join("clip.mp4");
    let t = seconds.to_string();
    let options = [
        "-t", &t, "-c:v", "libx264", "-g", "25", "-pix_fmt", "yuv420p",
    ];
    ffmpeg_made(&path, &["testsrc=size=320x240:rate=25"], &options);
    path.display().to_string()
}

/// framepipe recording `clip.mp4` (served, so played at its own rate) into
/// `rec/cam-{seg}.mp4` in 1 s segments, with `extra` flags.
fn record(dir: &TempDir, port: u16, extra: &[&str]) -> Child {
    let args = [
        &["--backend", "cpu", "--input", "clip.mp4"][..],
        &RECORD[..],
        extra,
    ]
    .concat();
    common::run::served(dir.path(), port, &args)
}

/// Each camera's packets recorded in 1 s segments.
const RECORD: [&str; 4] = ["--record", "rec/cam-{seg}.mp4", "--segment", "1"];

/// `GET path` as JSON.
fn json(port: u16, path: &str) -> serde_json::Value {
    let (status, body) = http(port, "GET", path, "");
    assert_eq!(status, 200, "{path}: {}", String::from_utf8_lossy(&body));
    serde_json::from_slice(&body).unwrap()
}

/// The segments listed, once at least `n` are (within 20 s).
fn listed(port: u16, n: usize) -> Vec<serde_json::Value> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let all = json(port, "/api/recordings?input=clip")["recordings"]
            .as_array()
            .unwrap()
            .clone();
        if all.len() >= n {
            return all;
        }
        assert!(
            Instant::now() < deadline,
            "only {} segments listed",
            all.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The packets' hashes of `input`, as ffmpeg reads them (stream copy, framemd5).
fn packets(input: &str) -> Vec<String> {
    let out = Command::new("ffmpeg")
        .args([
            "-v", "error", "-i", input, "-map", "0:v", "-c", "copy", "-f", "framemd5", "-",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "ffmpeg {input}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.rsplit(',').next().unwrap().trim().to_string())
        .collect()
}

fn end(child: Child) -> std::process::Output {
    common::run::interrupt(&child);
    wait_with_deadline(child, Duration::from_secs(10), "recording")
}

#[test]
fn recordings_are_found_by_time_played_as_hls_and_indexed_again_from_the_files() {
    let dir = TempDir::new("service-index");
    clip(&dir);
    std::fs::create_dir(dir.join("rec")).unwrap();
    // A file put there by hand, named as a segment would be: never listed, never touched.
    std::fs::copy(dir.join("clip.mp4"), dir.join("rec/cam-99999.mp4")).unwrap();
    let port = free_port();
    let child = record(&dir, port, &[]);
    let segments = listed(port, 5);
    // Each segment starts where the one before ended (within a frame).
    for pair in segments.windows(2) {
        let gap = pair[1]["start_unix"].as_f64().unwrap() - pair[0]["end_unix"].as_f64().unwrap();
        assert!(gap.abs() <= 0.041, "a gap of {gap} s between {pair:?}");
    }
    assert!(segments.iter().all(|s| s["file"] != "cam-99999.mp4"));
    // A range finds the segments that overlap it.
    let (from, to) = (
        segments[1]["start_unix"].as_f64().unwrap() + 0.5,
        segments[2]["start_unix"].as_f64().unwrap() + 0.5,
    );
    let some = json(
        port,
        &format!("/api/recordings?input=clip&from={from}&to={to}"),
    );
    let ids: Vec<&serde_json::Value> = some["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| &s["id"])
        .collect();
    assert_eq!(ids, [&segments[1]["id"], &segments[2]["id"]]);
    // The playlist of the first five, read by ffmpeg: the very packets of their files.
    let to = segments[4]["end_unix"].as_f64().unwrap() - 0.1;
    let playlist = format!("http://127.0.0.1:{port}/api/recordings/clip.m3u8?to={to}");
    let played = packets(&playlist);
    let files: Vec<String> = segments[..5]
        .iter()
        .flat_map(|s| {
            packets(
                &dir.join(&format!("rec/{}", s["file"].as_str().unwrap()))
                    .display()
                    .to_string(),
            )
        })
        .collect();
    assert_eq!(played.len(), files.len());
    assert_eq!(played, files);
    // Headless Chromium plays it (the page's player: Media Source Extensions).
    let shown = chromium_plays(&dir, port, "clip");
    assert!(shown >= 25, "Chromium showed {shown} frames");
    let out = end(child);
    assert!(out.status.success(), "{}", stderr(&out));
    let before = json_file(&dir.join("summary.json"));
    let recorded = before["inputs"][0]["recorded"]["files"]
        .as_array()
        .unwrap()
        .len();
    assert!(recorded >= 10, "{before}");

    // The index deleted: the next run makes it again from the files.
    std::fs::remove_file(dir.join("rec/framepipe-index.sqlite")).unwrap();
    let port = free_port();
    let child = record(&dir, port, &[]);
    let again = json(port, "/api/recordings?input=clip");
    let again = again["recordings"].as_array().unwrap();
    for s in &segments {
        let found = again
            .iter()
            .find(|a| a["file"] == s["file"])
            .unwrap_or_else(|| panic!("{s} is not indexed again"));
        for key in ["start_unix", "end_unix", "media_start", "bytes"] {
            assert_eq!(found[key], s[key], "{key} of {}", s["file"]);
        }
    }
    assert!(again.iter().all(|s| s["file"] != "cam-99999.mp4"));
    let _ = end(child);
    assert!(dir.join("rec/cam-99999.mp4").is_file());
}

/// Frames headless Chromium shows of `input`'s recordings in 3 s, played by the page.
fn chromium_plays(dir: &TempDir, port: u16, input: &str) -> u64 {
    let (chromium, devtools) = crate::web::chromium_at(dir, port);
    let play = format!("eval:framepipe.play('{input}').then(() => new Promise(r => setTimeout(() => r(framepipe.shown), 3000)))");
    let out = Command::new("timeout")
        .args(["60", "/usr/bin/python3", crate::web::CDP])
        .args([&devtools.to_string(), "sleep:1", &play])
        .output()
        .unwrap();
    drop(chromium);
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "cdp: {said}{}", stderr(&out));
    said.trim()
        .parse()
        .unwrap_or_else(|_| panic!("cdp said {said}"))
}

fn json_file(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The bytes framepipe's recordings hold in `rec`: its segments, and its index's file and
/// log (its 32 KiB shared-memory map left out, as `--retain-size` leaves it).
fn held_in(rec: &Path) -> u64 {
    std::fs::read_dir(rec)
        .unwrap()
        .flatten()
        .filter(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name.starts_with("cam-") && name != "cam-00000-7.mp4")
                || (name.starts_with("framepipe-index.sqlite") && !name.ends_with("-shm"))
        })
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

#[test]
fn retention_keeps_the_budget_deleting_the_oldest_and_nothing_else() {
    let dir = TempDir::new("service-retain");
    // Two minutes of recording (the soak's ten, on a 50 MB disk, is scripts/bench).
    clip_of(&dir, 120);
    std::fs::create_dir(dir.join("rec")).unwrap();
    std::fs::write(dir.join("rec/cam-00000-7.mp4"), b"mine, not framepipe's").unwrap();
    std::fs::write(dir.join("rec/notes.txt"), b"kept").unwrap();
    let port = free_port();
    // The budget holds the index too (its file and its log).
    let child = record(&dir, port, &["--retain-size", "100k"]);
    // While it runs: the deletions are counted in /metrics.
    let deadline = Instant::now() + Duration::from_secs(20);
    let deleted = loop {
        let (_, body) = http(port, "GET", "/metrics", "");
        let text = String::from_utf8_lossy(&body).to_string();
        let n = text
            .lines()
            .find(|l| l.starts_with("framepipe_retention_deleted_files_total{"))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap_or(0.0);
        if n >= 2.0 {
            break n;
        }
        assert!(Instant::now() < deadline, "nothing was deleted:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(deleted >= 2.0);
    // To the clip's end: the closed segments never hold more than the budget and the one
    // just closed.
    let mut child = child;
    let deadline = Instant::now() + Duration::from_secs(180);
    while child.try_wait().unwrap().is_none() {
        let held = held_in(&dir.join("rec"));
        assert!(held <= 130_000, "{held} bytes held");
        assert!(Instant::now() < deadline, "the two minutes did not end");
        std::thread::sleep(Duration::from_millis(250));
    }
    let out = child.wait_with_output().unwrap();
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    let summary = json_file(&dir.join("summary.json"));
    let files: Vec<String> = summary["inputs"][0]["recorded"]["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    let gone: Vec<&String> = files.iter().filter(|f| !dir.join(f).exists()).collect();
    let kept: Vec<&String> = files.iter().filter(|f| dir.join(f).exists()).collect();
    // The deletions are said once a minute and at the end, each counted ("retention: deleted
    // N segments (…)"), and the deleted are the oldest: what is left is the newest.
    let told: usize = said
        .lines()
        .filter_map(|l| {
            l.split("retention: deleted ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert_eq!(told, gone.len(), "{said}");
    let lines = said
        .lines()
        .filter(|l| l.contains("retention: deleted"))
        .count();
    assert!(
        lines <= 3,
        "{lines} lines of deletions in two minutes:\n{said}"
    );
    assert!(!gone.is_empty() && !kept.is_empty());
    assert_eq!(
        &files[files.len() - kept.len()..],
        kept.iter().map(|s| s.as_str()).collect::<Vec<_>>()
    );
    let bytes = held_in(&dir.join("rec"));
    assert!(bytes <= 100_000, "{bytes} bytes kept");
    // What framepipe did not write is there as it was.
    assert_eq!(
        std::fs::read(dir.join("rec/cam-00000-7.mp4")).unwrap(),
        b"mine, not framepipe's"
    );
    assert_eq!(std::fs::read(dir.join("rec/notes.txt")).unwrap(), b"kept");
}

#[test]
fn the_api_refuses_what_it_cannot_answer_and_other_sites() {
    let dir = TempDir::new("service-refusals");
    clip(&dir);
    std::fs::create_dir(dir.join("rec")).unwrap();
    let port = free_port();
    let child = record(&dir, port, &["--serve-token", "sesame"]);
    let t = "token=sesame";
    let status = |path: &str, headers: &str| http(port, "GET", path, headers).0;
    assert_eq!(status("/api/recordings", ""), 401);
    assert_eq!(
        status("/api/recordings", "Authorization: Bearer sesame\r\n"),
        200
    );
    assert_eq!(
        status(&format!("/api/recordings?{t}&input=nobody"), ""),
        404
    );
    assert_eq!(
        status(&format!("/api/recordings?{t}&from=20&to=10"), ""),
        400
    );
    assert_eq!(
        status(&format!("/api/recordings?{t}&from=yesterday"), ""),
        400
    );
    assert_eq!(
        status(&format!("/api/recordings/segment/0-999999.mp4?{t}"), ""),
        404
    );
    assert_eq!(
        status(
            &format!("/api/recordings/segment/..%2F..%2Fclip.mp4?{t}"),
            ""
        ),
        404
    );
    assert_eq!(
        status(&format!("/api/recordings/segment/../../clip.mp4?{t}"), ""),
        404
    );
    assert_eq!(status(&format!("/api/recordings/nobody.m3u8?{t}"), ""), 404);
    assert_eq!(status(&format!("/api/nothing?{t}"), ""), 404);
    let foreign = "Origin: http://evil.example\r\nSec-Fetch-Site: cross-site\r\n";
    assert_eq!(status(&format!("/api/inputs?{t}"), foreign), 403);
    // The inputs as they stand (once the run runs: while it opens, the input is down and
    // records nothing yet), the source's password never in it.
    let deadline = Instant::now() + Duration::from_secs(20);
    let inputs = loop {
        let inputs = json(port, &format!("/api/inputs?{t}"));
        if inputs["inputs"][0]["recording"].is_object() {
            break inputs;
        }
        assert!(Instant::now() < deadline, "{inputs}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let first = &inputs["inputs"][0];
    assert_eq!(first["name"], "clip");
    assert_eq!(first["source"], "clip.mp4");
    let out = end(child);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn the_camera_file_says_what_each_camera_does_and_a_bad_edit_keeps_the_run() {
    let dir = TempDir::new("service-cameras");
    clip(&dir);
    std::fs::create_dir(dir.join("rec")).unwrap();
    let cameras = dir.join("cameras.toml");
    let good = "[[camera]]\nname = \"front\"\nsource = \"clip.mp4\"\nsegment = \"1s\"\nretain = \"30d\"\noutputs = [\"out-{name}.mkv\"]\n\n[[camera]]\nname = \"back\"\nsource = \"clip.mp4\"\nrecord = false\n";
    std::fs::write(&cameras, good).unwrap();
    // A mistake at the start: one line naming the camera and the key, and no run.
    let bad = dir.join("bad.toml");
    std::fs::write(&bad, good.replace("retain", "retian")).unwrap();
    let out = Command::new(bin())
        .current_dir(dir.path())
        .args([
            "--headless",
            "--config",
            "bad.toml",
            "--record",
            "rec/{name}-{seg}.mp4",
        ])
        .output()
        .unwrap();
    let said = stderr(&out);
    assert!(!out.status.success());
    assert!(
        said.contains("camera 'front'") && said.contains("'retian'"),
        "{said}"
    );
    assert_eq!(said.trim().lines().count(), 1, "{said}");
    assert!(std::fs::read_dir(dir.join("rec")).unwrap().next().is_none());

    let mut child = Command::new(bin())
        .current_dir(dir.path())
        .args([
            "--headless",
            "--backend",
            "cpu",
            "--realtime",
            "--config",
            "cameras.toml",
        ])
        .args(["--record", "rec/{name}-{seg}.mp4", "--segment", "4"])
        .args(["--summary-json", "summary.json"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // An edit that doesn't read: said, and the run goes on as it was.
    std::fs::write(
        &cameras,
        good.replace("segment = \"1s\"", "segment = \"soon\""),
    )
    .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the run ended on a bad edit"
    );
    let out = end(child);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("camera 'front'") && said.contains("segment"),
        "{said}"
    );
    let summary = json_file(&dir.join("summary.json"));
    let inputs = summary["inputs"].as_array().unwrap();
    let (front, back) = (&inputs[0], &inputs[1]);
    // The camera's own 1 s segments, not the command line's 4 s; the other not recorded.
    assert!(
        front["recorded"]["files"].as_array().unwrap().len() >= 4,
        "{front}"
    );
    assert!(back["recorded"].is_null(), "{back}");
    // The camera's own output holds its frames (the other has none).
    let written = common::run::frames_in(&dir.join("out-front.mkv").display().to_string());
    assert!(written >= 100, "out-front.mkv holds {written} frames");
    assert!(!dir.join("out-back.mkv").exists());
}

/// The inputs `/api/inputs` lists, by name: (state, captured, dropped).
fn inputs_now(port: u16) -> Vec<(String, String, u64, u64)> {
    let all = json(port, "/api/inputs")["inputs"]
        .as_array()
        .unwrap()
        .clone();
    all.iter()
        .map(|i| {
            (
                i["name"].as_str().unwrap().to_string(),
                i["state"].as_str().unwrap_or_default().to_string(),
                i["captured"].as_u64().unwrap_or(0),
                i["dropped"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// Waits (10 s at most) until `/api/inputs` answers as `until` wants.
fn wait_for(port: u16, what: &str, until: impl Fn(&[(String, String, u64, u64)]) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let now = inputs_now(port);
        if until(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "{what}: {now:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn inputs_join_and_leave_a_running_wall_and_the_others_never_notice() {
    let dir = TempDir::new("service-joins");
    std::fs::create_dir(dir.join("rec")).unwrap();
    let ports: Vec<u16> = (0..6).map(|_| free_port()).collect();
    let cameras: Vec<Killed> = ports
        .iter()
        .map(|&p| Killed(live_server_of(p, "160x120")))
        .collect();
    let list: String = ports
        .iter()
        .enumerate()
        .map(|(k, p)| format!("cam{k} = http://127.0.0.1:{p}/live.ts\n"))
        .collect();
    std::fs::write(dir.join("wall.txt"), &list).unwrap();
    let port = free_port();
    let args = ["--backend", "cpu", "--inputs", "wall.txt"];
    let record = ["--record", "rec/{name}-{seg}.mp4", "--segment", "1"];
    let child = common::run::served(dir.path(), port, &[&args[..], &record[..]].concat());
    wait_for(port, "the six cameras run", |all| {
        all.len() == 6 && all.iter().all(|i| i.1 == "running" && i.2 > 10)
    });
    // 100 inputs added and removed through the API while the six run.
    for k in 0..100 {
        let body = format!(
            "{{\"name\": \"extra{}\", \"source\": \"pattern:64x48:25\"}}",
            k % 3
        );
        let (status, said) = http_post(port, "/api/inputs", &body);
        assert_eq!(status, 201, "join {k}: {}", String::from_utf8_lossy(&said));
        std::thread::sleep(Duration::from_millis(40));
        let (status, said) = http(port, "DELETE", &format!("/api/inputs/extra{}", k % 3), "");
        assert_eq!(status, 200, "leave {k}: {}", String::from_utf8_lossy(&said));
    }
    // A camera's own decoder through the API: one it may name joins; OpenCV's capture (the
    // whole run's choice) is refused, saying why.
    let own = |decode: &str| {
        let body = format!(
            "{{\"name\": \"own\", \"source\": \"pattern:64x48:25\", \"decode\": \"{decode}\"}}"
        );
        let (status, said) = http_post(port, "/api/inputs", &body);
        (status, String::from_utf8_lossy(&said).into_owned())
    };
    let (status, said) = own("cpu");
    assert_eq!(status, 201, "{said}");
    assert_eq!(http(port, "DELETE", "/api/inputs/own", "").0, 200);
    let (status, said) = own("opencv");
    assert!(
        status == 400 && said.contains("--decode opencv"),
        "{status} {said}"
    );
    // The same through the inputs file: a line added, then taken away.
    std::fs::write(
        dir.join("wall.txt"),
        format!("{list}late = pattern:64x48:25\n"),
    )
    .unwrap();
    wait_for(port, "the line added joins", |all| {
        all.iter().any(|i| i.0 == "late" && i.2 > 0)
    });
    std::fs::write(dir.join("wall.txt"), &list).unwrap();
    wait_for(port, "the line taken away leaves", |all| all.len() == 6);
    // The six ran through it all without a frame dropped, in this same process.
    let segments: Vec<Vec<serde_json::Value>> = (0..6)
        .map(|k| {
            json(port, &format!("/api/recordings?input=cam{k}"))["recordings"]
                .as_array()
                .unwrap()
                .clone()
        })
        .collect();
    let out = end(child);
    drop(cameras);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        !said.contains("starts again"),
        "the process started again: {said}"
    );
    let summary = json_file(&dir.join("summary.json"));
    let inputs = summary["inputs"].as_array().unwrap();
    // The six, the hundred through the API, `own` and the line `late`.
    assert_eq!(inputs.len(), 6 + 100 + 1 + 1, "{summary}");
    for (k, cam) in inputs[..6].iter().enumerate() {
        assert_eq!(cam["dropped"], 0, "cam{k}: {cam}");
        assert!(cam["captured"].as_u64().unwrap() > 100, "cam{k}: {cam}");
        assert_eq!(cam["ended"], "stopped", "cam{k}: {cam}");
        // Its segments follow each other, numbered without a gap, each where the last ended.
        let files: Vec<&str> = cam["recorded"]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f.as_str().unwrap())
            .collect();
        for (n, f) in files.iter().enumerate() {
            assert_eq!(
                *f,
                format!("rec/cam{k}-{n:05}.mp4"),
                "cam{k}'s segments: {files:?}"
            );
        }
        for pair in segments[k].windows(2) {
            let gap =
                pair[1]["start_unix"].as_f64().unwrap() - pair[0]["end_unix"].as_f64().unwrap();
            assert!(
                gap.abs() <= 0.041,
                "cam{k}: a gap of {gap} s between {pair:?}"
            );
        }
    }
    assert!(
        inputs[6..].iter().all(|i| i["ended"] == "removed"),
        "{summary}"
    );
}

/// A child killed when dropped.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_camera_file_of_a_shard_changes_its_share_in_place() {
    use framepipe::plan::shard::owner;
    let dir = TempDir::new("service-shard");
    // Names this shard (0 of 2) takes, and one the other takes.
    let mine: Vec<String> = (0..)
        .map(|k| format!("cam{k}"))
        .filter(|n| owner(n, 2) == 0)
        .take(3)
        .collect();
    let theirs = (0..)
        .map(|k| format!("other{k}"))
        .find(|n| owner(n, 2) == 1)
        .unwrap();
    let camera =
        |name: &str| format!("[[camera]]\nname = \"{name}\"\nsource = \"pattern:64x48:25\"\n\n");
    let file = |names: &[&str]| names.iter().map(|n| camera(n)).collect::<String>();
    std::fs::write(dir.join("cams.toml"), file(&[&mine[0], &mine[1]])).unwrap();
    let port = free_port();
    let args = [
        "--backend",
        "cpu",
        "--config",
        "cams.toml",
        "--shard",
        "0/2",
    ];
    let child = common::run::served(dir.path(), port, &args);
    let names = |all: &[(String, String, u64, u64)]| -> Vec<String> {
        let mut n: Vec<String> = all.iter().map(|i| i.0.clone()).collect();
        n.sort();
        n
    };
    wait_for(port, "the share runs", |all| {
        all.len() == 2 && all.iter().all(|i| i.2 > 0)
    });
    // A camera of another shard: nothing changes here.
    std::fs::write(dir.join("cams.toml"), file(&[&mine[0], &mine[1], &theirs])).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(names(&inputs_now(port)), [mine[0].clone(), mine[1].clone()]);
    // One of this shard's joins, one leaves: in place, the one that stays untouched.
    std::fs::write(dir.join("cams.toml"), file(&[&mine[0], &mine[2], &theirs])).unwrap();
    wait_for(port, "the share changes", |all| {
        names(all) == [mine[0].clone(), mine[2].clone()] && all.iter().all(|i| i.2 > 0)
    });
    let out = end(child);
    let said = stderr(&out);
    assert!(out.status.success(), "{said}");
    assert!(!said.contains("starts again"), "{said}");
    let summary = json_file(&dir.join("summary.json"));
    let inputs = summary["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 3, "{summary}");
    assert_eq!(inputs[0]["ended"], "stopped");
    assert_eq!(inputs[0]["dropped"], 0);
    assert_eq!(inputs[1]["ended"], "removed");
}

#[test]
fn after_a_kill_the_index_lists_every_whole_segment_and_nothing_else() {
    let dir = TempDir::new("service-kill");
    clip(&dir);
    std::fs::create_dir(dir.join("rec")).unwrap();
    let port = free_port();
    let child = record(&dir, port, &[]);
    listed(port, 3);
    // SIGKILL: no finishing, a segment left half written under its hidden .part name.
    let mut child = child;
    child.kill().unwrap();
    let _ = wait_with_deadline(child, Duration::from_secs(5), "killed");
    let whole: Vec<String> = std::fs::read_dir(dir.join("rec"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("cam-") && n.ends_with(".mp4"))
        .collect();
    let port = free_port();
    let child = record(&dir, port, &[]);
    let listed: Vec<String> = json(port, "/api/recordings?input=clip")["recordings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["file"].as_str().unwrap().to_string())
        .collect();
    let _ = end(child);
    for name in &whole {
        assert!(listed.contains(name), "{name} is not listed: {listed:?}");
    }
    assert!(listed.iter().all(|n| !n.starts_with('.')), "{listed:?}");
    for name in &listed {
        let path = dir.join(&format!("rec/{name}"));
        assert!(
            common::run::frames_in(&path.display().to_string()) > 0,
            "{name}"
        );
    }
}

/// Whether `value` is what `schema` (of OpenAPI 3.1, its `$ref`s in `doc`) describes: its
/// types, required properties, properties, items and `oneOf`/`anyOf`/`allOf`; Err says where
/// it is not.
fn conforms(
    doc: &serde_json::Value,
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
) -> Result<(), String> {
    use serde_json::Value;
    if let Some(r) = schema["$ref"].as_str() {
        let name = r.trim_start_matches("#/components/schemas/");
        return conforms(doc, &doc["components"]["schemas"][name], value, at);
    }
    for (key, any) in [("oneOf", true), ("anyOf", true), ("allOf", false)] {
        if let Some(list) = schema[key].as_array() {
            let fits: Vec<bool> = list
                .iter()
                .map(|s| conforms(doc, s, value, at).is_ok())
                .collect();
            let ok = if any {
                fits.iter().any(|f| *f)
            } else {
                fits.iter().all(|f| *f)
            };
            if !ok {
                return Err(format!("{at}: {value} fits no {key} of {schema}"));
            }
        }
    }
    let types: Vec<&str> = match &schema["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let of_type = |t: &str| match t {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => true,
    };
    if !types.is_empty() && !types.iter().any(|t| of_type(t)) {
        return Err(format!("{at}: {value} is not {types:?}"));
    }
    if let Some(required) = schema["required"].as_array() {
        for r in required.iter().filter_map(Value::as_str) {
            if value.get(r).is_none() {
                return Err(format!("{at}: '{r}' missing in {value}"));
            }
        }
    }
    if let (Some(props), Some(object)) = (schema["properties"].as_object(), value.as_object()) {
        for (k, v) in object {
            let Some(s) = props.get(k) else {
                return Err(format!("{at}: '{k}' is not in the document"));
            };
            conforms(doc, s, v, &format!("{at}.{k}"))?;
        }
    }
    if let (Some(items), Some(list)) = (schema.get("items"), value.as_array()) {
        for (i, v) in list.iter().enumerate() {
            conforms(doc, items, v, &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

/// Every answer of `/api/*` is JSON, errors too, and matches the OpenAPI document the server
/// serves at `/api/openapi.json` (issue 80 item 2); `POST /api/inputs` answers 201 with the
/// camera as `GET` shows it.
#[test]
fn every_api_answer_is_json_and_matches_the_openapi_document() {
    let dir = TempDir::new("service-openapi");
    std::fs::write(
        dir.join("cams.toml"),
        "[[camera]]\nname = \"one\"\nsource = \"pattern:64x48:10\"\n",
    )
    .unwrap();
    let port = free_port();
    let args = [
        "--backend",
        "cpu",
        "--config",
        "cams.toml",
        "--serve-token",
        "tok",
        "--motion",
    ];
    let mut child = common::run::Owned::new(common::run::served(dir.path(), port, &args));
    let bearer = "Authorization: Bearer tok\r\n";
    let ask = |method: &str, path: &str, body: &str, headers: &str| {
        let headers = format!("{headers}Content-Type: application/json\r\n");
        let (status, said) = common::run::http_body(port, method, path, &headers, body);
        let json: serde_json::Value = serde_json::from_slice(&said).unwrap_or_else(|e| {
            panic!(
                "{method} {path}: {status} not JSON ({e}): {}",
                String::from_utf8_lossy(&said)
            )
        });
        (status, json)
    };
    let (status, doc) = ask("GET", "/api/openapi.json", "", bearer);
    assert_eq!(status, 200, "{doc}");
    assert!(
        doc["openapi"].as_str().unwrap_or("").starts_with("3."),
        "{doc}"
    );
    let check = |method: &str, path: &str, body: &str, headers: &str, want: u16| {
        let (status, json) = ask(method, path, body, headers);
        assert_eq!(status, want, "{method} {path}: {json}");
        let template = doc["paths"].as_object().unwrap().keys().find(|p| {
            let (pp, qp): (Vec<&str>, Vec<&str>) = (
                p.split('/').collect(),
                path.split('?').next().unwrap().split('/').collect(),
            );
            pp.len() == qp.len()
                && pp
                    .iter()
                    .zip(&qp)
                    .all(|(a, b)| a == b || a.starts_with('{'))
        });
        let template = template.unwrap_or_else(|| panic!("{path}: not in the document"));
        let op = &doc["paths"][template][method.to_lowercase()];
        let schema = &op["responses"][status.to_string()]["content"]["application/json"]["schema"];
        assert!(
            !schema.is_null(),
            "{method} {template} {status}: no schema in the document"
        );
        conforms(&doc, schema, &json, &format!("{method} {path}")).unwrap();
        json
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let inputs = check("GET", "/api/inputs", "", bearer, 200);
        if inputs["inputs"].as_array().is_some_and(|l| l.len() == 1) {
            break;
        }
        assert!(Instant::now() < deadline, "{inputs}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let new = r#"{"name": "two", "source": "pattern:64x48:10", "zones": {"bay": [0, 0, 0.5, 0, 0.5, 0.5]}}"#;
    let added = check("POST", "/api/inputs", new, bearer, 201);
    assert_eq!(added["name"], "two", "{added}");
    assert_eq!(added["source"], "pattern:64x48:10", "{added}");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let listed = check("GET", "/api/inputs", "", bearer, 200);
        if listed["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .any(|i| i["name"] == "two")
        {
            break;
        }
        assert!(Instant::now() < deadline, "{listed}");
        std::thread::sleep(Duration::from_millis(100));
    }
    check("POST", "/api/inputs", new, bearer, 409);
    check("POST", "/api/inputs", "[1]", bearer, 400);
    check(
        "POST",
        "/api/inputs",
        r#"{"name": "x", "source": "file:///etc/passwd"}"#,
        bearer,
        400,
    );
    check("GET", "/api/recordings?input=one", "", bearer, 404);
    check("GET", "/api/recordings?from=yesterday-ish", "", bearer, 400);
    check("GET", "/api/events?limit=3", "", bearer, 200);
    check("GET", "/api/events?limit=many", "", bearer, 400);
    check("GET", "/api/events/nosuch/clip", "", bearer, 404);
    check("GET", "/api/inputs", "", "", 401);
    check("DELETE", "/api/inputs/two", "", bearer, 200);
    check("DELETE", "/api/inputs/two", "", bearer, 404);
    let (status, json) = ask("GET", "/api/nosuch", "", bearer);
    assert_eq!(status, 404);
    assert!(json["error"].is_string(), "{json}");
    let out = end(child.take());
    assert!(out.status.success(), "{}", stderr(&out));
}
