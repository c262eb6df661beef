//! From boxes to events (`--zone`, `--line`, `--events`), with the real PP-OCRv4 detector on
//! a scene the test controls: two words moving across a white picture on known paths
//! (ffmpeg's drawtext, 150 px/s right and 130 px/s left). Each word keeps one track id for its
//! whole path; a line across their paths is crossed once by each, each the way it went,
//! within one detection interval of the frame where the path crosses it; a zone is entered
//! and left once; the same events reach a JSON Lines file, Debian's mosquitto (started here on
//! loopback: each event exactly once, in order, the zone's count retained) and a webhook
//! receiver that was down when the first events came (they are delivered once it is up).
#![cfg(feature = "ffmpeg")]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::run::{bin, free_port, require, stderr, TempDir};

use crate::detect::model;

/// `name`: `seconds` of a white 640x360 picture at 25 fps (keyframe every second), with
/// each of `words` drawn on it in black 64 px text (a drawtext's own options: its text, its
/// place as a function of `t`), and a sine tone as AAC where `audio`.
pub(crate) fn words(
    dir: &TempDir,
    name: &str,
    seconds: u32,
    words: &[&str],
    audio: bool,
) -> PathBuf {
    let font = Path::new(env!("CARGO_MANIFEST_DIR")).join("assets/fonts/DejaVuSansMono-Bold.ttf");
    let vf: Vec<String> = words
        .iter()
        .map(|w| {
            format!(
                "drawtext=fontfile={}:fontsize=64:fontcolor=black:{w}",
                font.display()
            )
        })
        .collect();
    let clip = dir.join(name);
    let mut ffmpeg = Command::new("ffmpeg");
    ffmpeg.args(["-v", "error", "-y", "-f", "lavfi", "-i"]);
    ffmpeg.arg(format!("color=white:s=640x360:r=25:d={seconds}"));
    if audio {
        ffmpeg
            .args(["-f", "lavfi", "-i"])
            .arg(format!("sine=f=440:d={seconds}"));
        ffmpeg.args(["-c:a", "aac", "-shortest"]);
    }
    let out = ffmpeg
        .args(["-vf", &vf.join(","), "-c:v", "libx264", "-g", "25"])
        .arg(&clip)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    clip
}

/// 4 s: GATE moving right from x = 40 at 150 px/s (y 80), DOCK moving left from x = 560 at
/// 130 px/s (y 250).
fn scene(dir: &TempDir) -> PathBuf {
    let gate = "text=GATE:x=40+t*150:y=80";
    words(
        dir,
        "moving.mp4",
        4,
        &[gate, "text=DOCK:x=560-t*130:y=250"],
        false,
    )
}

/// The run's arguments: the scene, 5 detections a second, a line at x = 320 drawn upwards
/// (walking up it, its left is the picture's left), a zone over x 400-600 of the upper half.
fn args<'a>(clip: &'a Path, model: &'a Path) -> Vec<String> {
    [
        "--headless",
        "-i",
        clip.to_str().unwrap(),
        "--detect",
        model.to_str().unwrap(),
        "--detect-fps",
        "5",
        "--line",
        "door:320,360,320,0",
        "--zone",
        "bay:400,0,600,0,600,200,400,200",
    ]
    .map(String::from)
    .to_vec()
}

pub(crate) fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The frame at which a word's box middle, starting at `x0` (its left) and `w` wide, moving
/// `speed` px/s (negative: leftwards), reaches `x`.
fn frame_at(x0: f64, w: f64, speed: f64, x: f64) -> f64 {
    (x - (x0 + w / 2.0)) / speed * 25.0
}

#[test]
fn moving_words_cross_enter_and_leave_once_each_with_one_track_each() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("events");
    let clip = scene(&dir);
    let (events, det) = (dir.join("ev.jsonl"), dir.join("det.jsonl"));
    let mut a = args(&clip, &model);
    a.extend(["--events", events.to_str().unwrap()].map(String::from));
    a.extend(["--detections", det.to_str().unwrap()].map(String::from));
    a.extend(["--summary-json", dir.join("s.json").to_str().unwrap()].map(String::from));
    let out = Command::new(bin()).args(&a).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    // One id for each word's whole path.
    let mut ids = std::collections::BTreeMap::<u64, Vec<f64>>::new();
    for line in lines(&det) {
        for d in line["detections"].as_array().unwrap() {
            let top = d["box"][1].as_f64().unwrap();
            ids.entry(d["track"].as_u64().unwrap())
                .or_default()
                .push(top);
        }
    }
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert!(
        ids[&1].iter().all(|&t| t < 150.0),
        "track 1 is GATE's: {ids:?}"
    );
    assert!(
        ids[&2].iter().all(|&t| t > 200.0),
        "track 2 is DOCK's: {ids:?}"
    );
    let ev = lines(&events);
    let kinds: Vec<(&str, u64)> = ev
        .iter()
        .map(|e| (e["type"].as_str().unwrap(), e["track"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [("cross", 1), ("enter", 1), ("cross", 2), ("leave", 1)],
        "{ev:?}"
    );
    // The crossings, each its way, within one detection interval (5 frames) after the
    // frame where the path crosses (GATE is 154 px wide, DOCK as wide).
    let interval = 5.0;
    for (e, want, way) in [
        (&ev[0], frame_at(40.0, 154.0, 150.0, 320.0), "left-to-right"),
        (
            &ev[2],
            frame_at(560.0, 154.0, -130.0, 320.0),
            "right-to-left",
        ),
    ] {
        let f = e["frame"].as_f64().unwrap();
        assert_eq!(e["direction"], way, "{e}");
        assert_eq!(e["line"], "door");
        assert!(
            f >= want - 1.0 && f <= want + interval,
            "{e}: the path crosses at {want:.1}"
        );
    }
    assert_eq!(ev[1]["zone"], "bay");
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("s.json")).unwrap()).unwrap();
    let counts = &summary["detection"]["events"];
    assert_eq!(counts["cross"], 2, "{summary}");
    assert_eq!(counts["enter"], 1);
    assert_eq!(counts["leave"], 1);
    assert!(
        stderr(&out).contains("events: 2 cross, 1 enter, 1 leave"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn bad_zones_and_lines_are_one_line_before_the_first_frame() {
    let model = model();
    let dir = TempDir::new("events-bad");
    let clip = dir.join("c.mp4");
    crate::common::run::ffmpeg_made(
        &clip,
        &["testsrc2=s=320x240:r=25:d=0.2"],
        &["-c:v", "libx264"],
    );
    for (flag, value, says) in [
        (
            "--zone",
            "bay:0,0,10,10",
            "a zone has three points at least",
        ),
        ("--line", "door:0,0,10", "the coordinates come in pairs"),
        (
            "--zone",
            "bay:0,0,400,0,400,100",
            "is outside input 0 (c)'s 320x240 picture",
        ),
        ("--line", "door:0,0,10,10@7", "no input '7'"),
        ("--events", "https://example.com/hook", "https and mqtts"),
    ] {
        let out = Command::new(bin())
            .args(["--headless", "-i", clip.to_str().unwrap(), "--detect"])
            .arg(&model)
            .args([flag, value])
            .output()
            .unwrap();
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{value}: {err}");
        assert!(err.contains(says), "{value}: {err}");
        assert!(
            !err.contains("frames:"),
            "{value}: a frame went through: {err}"
        );
    }
    // Without a detector, there is nothing to follow.
    let out = Command::new(bin())
        .args([
            "--headless",
            "-i",
            clip.to_str().unwrap(),
            "--line",
            "door:0,0,10,10",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("follow what --detect finds"),
        "{}",
        stderr(&out)
    );
}

/// A mosquitto broker on a free loopback port, anonymous, for the test's life.
struct Broker(std::process::Child, u16);

impl Broker {
    fn start(dir: &TempDir) -> Self {
        let port = free_port();
        let conf = dir.join("mosquitto.conf");
        std::fs::write(
            &conf,
            format!("listener {port} 127.0.0.1\nallow_anonymous true\n"),
        )
        .unwrap();
        let child = Command::new("mosquitto")
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let until = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "mosquitto did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker(child, port)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn mqtt_and_a_webhook_that_was_down_receive_every_event_once_in_order() {
    require(&["ffmpeg", "mosquitto", "mosquitto_sub"]);
    let model = model();
    let dir = TempDir::new("events-out");
    let clip = scene(&dir);
    let broker = Broker::start(&dir);
    let port = broker.1.to_string();
    let mut sub = Command::new("mosquitto_sub")
        .args([
            "-h",
            "127.0.0.1",
            "-p",
            &port,
            "-t",
            "site/#",
            "-v",
            "-q",
            "2",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The webhook's port is closed until the first event was written to the file.
    let hook_port = free_port();
    let events = dir.join("ev.jsonl");
    let received = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let hook = {
        let received = received.clone();
        let events = events.clone();
        std::thread::spawn(move || {
            let until = Instant::now() + Duration::from_secs(30);
            while std::fs::read_to_string(&events).map_or(true, |t| t.is_empty()) {
                assert!(Instant::now() < until, "no event came");
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(300));
            let listener = std::net::TcpListener::bind(("127.0.0.1", hook_port)).unwrap();
            listener.set_nonblocking(true).unwrap();
            let until = Instant::now() + Duration::from_secs(15);
            while Instant::now() < until {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                let mut r = BufReader::new(s.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut line = String::new();
                    r.read_line(&mut line).unwrap();
                    if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                    if line == "\r\n" || line.is_empty() {
                        break;
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                received
                    .lock()
                    .unwrap()
                    .push(String::from_utf8(body).unwrap());
                let _ = s.write_all(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n");
            }
        })
    };
    let mut a = args(&clip, &model);
    a.extend(
        [
            "--realtime",
            "--events",
            events.to_str().unwrap(),
            "--events",
            &format!("mqtt://127.0.0.1:{port}/site"),
            "--events",
            &format!("http://127.0.0.1:{hook_port}/hook"),
        ]
        .map(String::from),
    );
    let out = Command::new(bin()).args(&a).output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(
        err.contains("kept and tried again"),
        "the webhook was never down? {err}"
    );
    let want: Vec<serde_json::Value> = lines(&events);
    assert_eq!(want.len(), 4, "{want:?}");
    // The webhook: every event, once, in order, though it was down when the first came.
    let until = Instant::now() + Duration::from_secs(5);
    while received.lock().unwrap().len() < want.len() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(50));
    }
    let posted: Vec<serde_json::Value> = received
        .lock()
        .unwrap()
        .iter()
        .map(|b| serde_json::from_str(b).unwrap())
        .collect();
    assert_eq!(posted, want, "{err}");
    // MQTT: the events on site/moving/events, once each, in order; the zone's count retained.
    std::thread::sleep(Duration::from_millis(500));
    let _ = sub.kill();
    let mut got = String::new();
    sub.stdout.take().unwrap().read_to_string(&mut got).unwrap();
    let _ = sub.wait();
    let published: Vec<serde_json::Value> = got
        .lines()
        .filter_map(|l| l.strip_prefix("site/moving/events "))
        .map(|j| serde_json::from_str(j).unwrap())
        .collect();
    assert_eq!(published, want, "{got}");
    assert!(got.lines().any(|l| l == "site/moving/zones/bay 1"), "{got}");
    assert!(got.lines().any(|l| l == "site/moving/zones/bay 0"), "{got}");
    assert!(got.lines().any(|l| l == "site/available online"), "{got}");
    drop(hook);
}

/// `mosquitto_sub` on `port` for `topics`, each message a line: topic, retained (0/1) and
/// the payload in hex (`once`: the retained messages alone, then it ends).
fn subscriber(port: u16, topics: &[&str], once: bool) -> std::process::Child {
    let mut sub = Command::new("mosquitto_sub");
    sub.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-q", "1"]);
    sub.args(["-F", "%t\t%r\t%x"]);
    for t in topics {
        sub.args(["-t", t]);
    }
    if once {
        sub.args(["--retained-only", "-W", "2"]);
    }
    sub.stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// What a subscriber printed (`subscriber`): topic, retained, payload.
fn received(mut sub: std::process::Child, kill: bool) -> Vec<(String, bool, Vec<u8>)> {
    if kill {
        let _ = sub.kill();
    }
    let mut got = String::new();
    sub.stdout.take().unwrap().read_to_string(&mut got).unwrap();
    let _ = sub.wait();
    let hex = |h: &str| {
        (0..h.len() / 2)
            .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
            .collect()
    };
    got.lines()
        .filter_map(|l| {
            let mut f = l.split('\t');
            Some((
                f.next()?.to_string(),
                f.next()? == "1",
                hex(f.next().unwrap_or("")),
            ))
        })
        .collect()
}

#[test]
fn home_assistant_discovers_each_cameras_zones_triggers_and_snapshot() {
    require(&["ffmpeg", "mosquitto", "mosquitto_sub"]);
    let model = model();
    let dir = TempDir::new("events-discovery");
    let clip = scene(&dir);
    let broker = Broker::start(&dir);
    let sub = subscriber(broker.1, &["site/#", "homeassistant/#"], false);
    std::thread::sleep(Duration::from_millis(300));
    let mut a = args(&clip, &model);
    let to = format!("mqtt://127.0.0.1:{}/site?discovery=homeassistant", broker.1);
    a.extend(["--realtime", "--events", &to].map(String::from));
    let out = Command::new(bin()).args(&a).output().unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    std::thread::sleep(Duration::from_millis(300));
    let got = received(sub, true);
    let json = |topic: &str| -> serde_json::Value {
        let (_, _, p) = got
            .iter()
            .find(|(t, _, _)| t == topic)
            .unwrap_or_else(|| panic!("no {topic}"));
        serde_json::from_slice(p).unwrap()
    };
    let node = "framepipe_site_moving";
    let occupancy = json(&format!(
        "homeassistant/binary_sensor/{node}/bay_occupancy/config"
    ));
    assert_eq!(occupancy["device_class"], "occupancy");
    assert_eq!(occupancy["state_topic"], "site/moving/zones/bay");
    assert_eq!(occupancy["availability_topic"], "site/available");
    assert_eq!(occupancy["device"]["identifiers"][0], node);
    let count = json(&format!("homeassistant/sensor/{node}/bay_count/config"));
    assert_eq!(count["state_topic"], "site/moving/zones/bay");
    let camera = json(&format!("homeassistant/camera/{node}/snapshot/config"));
    assert_eq!(camera["topic"], "site/moving/snapshot");
    // Every description came before the camera's first state; every one parses.
    let first_state = got
        .iter()
        .position(|(t, _, _)| t.starts_with("site/moving/"))
        .unwrap();
    let configs: Vec<usize> = (0..got.len())
        .filter(|&i| got[i].0.starts_with("homeassistant/"))
        .collect();
    assert!(configs.iter().all(|&i| i < first_state), "{got:?}");
    for &i in &configs {
        serde_json::from_slice::<serde_json::Value>(&got[i].2).unwrap();
    }
    // Each event is matched by a trigger as Home Assistant reads it (`type:zone-or-line`).
    let triggers: Vec<String> = configs
        .iter()
        .map(|&i| serde_json::from_slice::<serde_json::Value>(&got[i].2).unwrap())
        .filter(|c| c["automation_type"] == "trigger")
        .map(|c| c["payload"].as_str().unwrap().to_string())
        .collect();
    let events: Vec<serde_json::Value> = got
        .iter()
        .filter(|(t, _, _)| t == "site/moving/events")
        .map(|(_, _, p)| serde_json::from_slice(p).unwrap())
        .collect();
    assert_eq!(events.len(), 4, "{err}");
    for e in &events {
        let place = e["zone"].as_str().or(e["line"].as_str()).unwrap_or("");
        let said = format!("{}:{place}", e["type"].as_str().unwrap());
        assert!(triggers.contains(&said), "{said}: {triggers:?}");
    }
    // The snapshot: a JPEG of an event's frame, retained while the run lasted.
    let shot = got
        .iter()
        .find(|(t, _, p)| t == "site/moving/snapshot" && !p.is_empty());
    let (_, _, jpeg) = shot.expect("no snapshot");
    assert_eq!(&jpeg[..3], b"\xff\xd8\xff");
    // After the run: the descriptions stay retained, the states are cleared, offline said.
    let left = received(
        subscriber(broker.1, &["site/#", "homeassistant/#"], true),
        false,
    );
    let kept: Vec<&str> = left.iter().map(|(t, _, _)| t.as_str()).collect();
    assert!(
        kept.iter().any(|t| t.ends_with("/bay_occupancy/config")),
        "{kept:?}"
    );
    assert!(
        !kept
            .iter()
            .any(|t| t.contains("/zones/") || t.ends_with("/snapshot")),
        "{kept:?}"
    );
    assert!(
        left.iter()
            .any(|(t, _, p)| t == "site/available" && p == b"offline"),
        "{left:?}"
    );
}

/// Each packet of `file`'s `stream` (v or a): presentation time, keyframe, data hash.
fn packets(file: &Path, stream: &str) -> Vec<(f64, bool, String)> {
    let out = Command::new("ffprobe")
        .args([
            "-v",
            "error",
            "-select_streams",
            stream,
            "-show_packets",
            "-show_data_hash",
            "MD5",
        ])
        .args(["-of", "json"])
        .arg(file)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    json["packets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["pts_time"]
                    .as_str()
                    .and_then(|t| t.parse().ok())
                    .unwrap_or(f64::NAN),
                p["flags"].as_str().unwrap_or("").starts_with('K'),
                p["data_hash"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[test]
fn a_clip_holds_the_cameras_own_packets_from_a_keyframe_before_the_event() {
    require(&["ffmpeg", "ffprobe"]);
    let model = model();
    let dir = TempDir::new("events-clip");
    let clip = words(&dir, "cam.mp4", 4, &["text=GATE:x=40+t*150:y=80"], true);
    let events = dir.join("ev.jsonl");
    let out = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "-i", clip.to_str().unwrap(), "--detect"])
        .arg(&model)
        .args(["--detect-fps", "5", "--line", "door:320,360,320,0"])
        .args(["--events", events.to_str().unwrap()])
        .args([
            "--clip",
            "clips/{name}-{event}-{track}.mp4",
            "--pre",
            "1",
            "--post",
            "1",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let ev = lines(&events);
    assert_eq!(ev.len(), 1, "{ev:?}");
    let at = ev[0]["seconds"].as_f64().unwrap();
    let made = dir.join("clips/cam-cross-door-1.mp4");
    assert!(made.is_file(), "{err}");
    // The camera's own packets: the clip's video is a run of the source's, from a keyframe
    // at or before 1 s before the event to 1 s after it (less a frame); its audio, the
    // source's audio packets of that time.
    let (source, theirs) = (packets(&clip, "v"), packets(&made, "v"));
    let first = source.iter().position(|p| p.2 == theirs[0].2).unwrap();
    assert!(source[first].1, "the clip starts on a keyframe");
    let run: Vec<&String> = source[first..first + theirs.len()]
        .iter()
        .map(|p| &p.2)
        .collect();
    assert_eq!(run, theirs.iter().map(|p| &p.2).collect::<Vec<_>>());
    let start = source[first].0;
    assert!(
        start <= at - 1.0 + 1e-6,
        "starts at {start}, the event at {at}"
    );
    assert!(
        start > at - 1.0 - 1.0 - 1e-6,
        "not a keyframe earlier than needed: {start}"
    );
    let end = source[first..first + theirs.len()]
        .iter()
        .map(|p| p.0)
        .fold(f64::MIN, f64::max);
    assert!(
        end >= at + 1.0 - 0.04 - 1e-6,
        "ends at {end}, the event at {at}"
    );
    let audio = packets(&made, "a");
    let source_audio: Vec<String> = packets(&clip, "a").into_iter().map(|p| p.2).collect();
    assert!(audio.len() > 20, "{audio:?}");
    assert!(
        audio.iter().all(|p| source_audio.contains(&p.2)),
        "audio packets as they came"
    );
    // It decodes whole.
    let decoded = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(&made)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    assert!(
        decoded.status.success() && decoded.stderr.is_empty(),
        "{}",
        stderr(&decoded)
    );
    assert!(
        err.contains("clip of cam: 'clips/cam-cross-door-1.mp4'"),
        "{err}"
    );
    // The event names its clip, and its snapshot beside it: its frame with its box drawn.
    assert_eq!(ev[0]["clip"], "clips/cam-cross-door-1.mp4", "{ev:?}");
    assert_eq!(ev[0]["snapshot"], "clips/cam-cross-door-1.jpg", "{ev:?}");
    let b: Vec<f64> = (0..4).map(|k| ev[0]["box"][k].as_f64().unwrap()).collect();
    drawn_only_around(&dir.join("clips/cam-cross-door-1.jpg"), (640, 360), &b);
}

/// The pixels of JPEG `file` (`size` big) that are coloured (the picture it was made from is
/// black and white): there are some, and all within 40 px of `b` (left, top, right,
/// bottom), where its outline and label are drawn.
fn drawn_only_around(file: &Path, (w, h): (usize, usize), b: &[f64]) {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(file)
        .args(["-f", "rawvideo", "-pix_fmt", "rgb24", "-"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(out.stdout.len(), w * h * 3, "a {w}x{h} picture");
    let mut coloured = 0;
    for (k, px) in out.stdout.chunks(3).enumerate() {
        let (lo, hi) = (px.iter().min().unwrap(), px.iter().max().unwrap());
        if hi - lo < 80 {
            continue;
        }
        coloured += 1;
        let (x, y) = ((k % w) as f64, (k / w) as f64);
        assert!(
            x > b[0] - 40.0 && x < b[2] + 40.0 && y > b[1] - 40.0 && y < b[3] + 40.0,
            "a coloured pixel at {x},{y}, away from the box {b:?}"
        );
    }
    assert!(coloured > 100, "{coloured} coloured pixels: no box drawn");
}

#[test]
fn a_camera_lost_and_back_is_an_event_on_the_same_channel() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("events-camera");
    let port = free_port();
    let mut server = crate::common::run::live_server(port);
    let events = dir.join("ev.jsonl");
    let child = Command::new(bin())
        .args(["--headless", "-q", "--reconnect"])
        .args(["--input", &format!("http://127.0.0.1:{port}/live.ts")])
        .arg("--detect")
        .arg(&model)
        .args(["--detect-fps", "1", "--events", events.to_str().unwrap()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    server.kill().unwrap();
    server.wait().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let mut server = crate::common::run::live_server(port);
    let until = Instant::now() + Duration::from_secs(15);
    let kinds = || -> Vec<String> {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["type"].to_string())
            .collect()
    };
    while !kinds().contains(&"\"camera-up\"".to_string()) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(200));
    }
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "camera");
    let _ = server.kill();
    let _ = server.wait();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        kinds(),
        ["\"camera-down\"", "\"camera-up\""],
        "{}",
        stderr(&out)
    );
}

/// 15 s of the still picture, a word moving across it from 1 s to 3 s only.
pub(crate) fn moving_once(dir: &TempDir, seconds: u32) -> PathBuf {
    let moving = "text=GATE:x=40+(t-1)*150:y=80:enable='between(t,1,3)'";
    words(dir, "still.mp4", seconds, &[moving], false)
}

#[test]
fn motion_alone_makes_its_events_clip_and_snapshot_without_a_detector() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("events-motion-alone");
    let clip = moving_once(&dir, 5);
    let events = dir.join("ev.jsonl");
    let out = Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "-i", clip.to_str().unwrap(), "--motion"])
        .args(["--events", events.to_str().unwrap()])
        .args([
            "--clip",
            "clips/{name}-{event}.mp4",
            "--pre",
            "1",
            "--post",
            "1",
        ])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains("detection: ran"), "no detector ran: {err}");
    let ev = lines(&events);
    let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["motion-start", "motion-end"], "{ev:?}");
    let start = ev[0]["frame"].as_u64().unwrap();
    assert!((25..=29).contains(&start), "motion seen at frame {start}");
    assert_ne!(ev[0]["id"], ev[1]["id"]);
    assert_eq!(ev[0]["clip"], "clips/still-motion.mp4", "{ev:?}");
    assert_eq!(ev[0]["snapshot"], "clips/still-motion.jpg", "{ev:?}");
    let b: Vec<f64> = (0..4).map(|k| ev[0]["box"][k].as_f64().unwrap()).collect();
    drawn_only_around(&dir.join("clips/still-motion.jpg"), (640, 360), &b);
    // The clip: from the keyframe at or before 1 s before the motion, whole.
    let (source, theirs) = (
        packets(&clip, "v"),
        packets(&dir.join("clips/still-motion.mp4"), "v"),
    );
    let first = source.iter().position(|p| p.2 == theirs[0].2).unwrap();
    assert!(source[first].1, "the clip starts on a keyframe");
    assert!(source[first].0 <= ev[0]["seconds"].as_f64().unwrap() - 1.0 + 1e-6);
    assert!(theirs.len() >= 40, "{} packets", theirs.len());
}

#[test]
fn motion_is_an_event_and_the_detector_runs_only_while_there_is_some() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("events-motion");
    // Still for 1 s, a word moving from 1 s to 3 s, still again to 5 s.
    let moving = "text=GATE:x=40+(t-1)*150:y=80:enable='between(t,1,3)'";
    let clip = words(&dir, "still.mp4", 5, &[moving], false);
    let (events, det) = (dir.join("ev.jsonl"), dir.join("det.jsonl"));
    let out = Command::new(bin())
        .args(["--headless", "-i", clip.to_str().unwrap(), "--detect"])
        .arg(&model)
        .args([
            "--detect-fps",
            "5",
            "--motion",
            "--events",
            events.to_str().unwrap(),
        ])
        .args(["--detections", det.to_str().unwrap()])
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    let ev = lines(&events);
    let kinds: Vec<&str> = ev.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["motion-start", "motion-end"], "{ev:?}");
    let start = ev[0]["frame"].as_u64().unwrap();
    assert!((25..=29).contains(&start), "motion seen at frame {start}");
    let end = ev[1]["seconds"].as_f64().unwrap();
    assert!((3.0..=5.0).contains(&end), "motion ended at {end} s");
    let frames: Vec<u64> = lines(&det)
        .iter()
        .map(|l| l["frame"].as_u64().unwrap())
        .collect();
    assert!(frames.len() >= 8, "{frames:?}");
    assert!(
        frames
            .iter()
            .all(|&f| f >= start && (f as f64) / 25.0 <= end),
        "{frames:?}"
    );
}

/// (The browser's helpers are `web.rs`', in the build with OpenCV.)
#[cfg(feature = "opencv")]
#[test]
fn the_page_lists_the_events_with_their_snapshots_and_plays_their_clips() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("events-page");
    let clip = moving_once(&dir, 15);
    let port = free_port();
    let args = [
        "-q",
        "-i",
        clip.to_str().unwrap(),
        "--motion",
        "--clip",
        "clips/{name}-{event}.mp4",
        "--pre",
        "1",
        "--post",
        "1",
    ];
    let child = crate::common::run::served(dir.path(), port, &args);
    // The API: the events with their files' addresses, those files, and nothing else.
    let deadline = Instant::now() + Duration::from_secs(10);
    let listed = loop {
        let (code, body) = crate::common::run::try_http(port, "GET", "/api/events", "").unwrap();
        assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
        let json: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let first = json["events"][0].clone();
        if first["clip_url"].is_string() {
            break first;
        }
        assert!(Instant::now() < deadline, "no clip listed: {json}");
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(listed["type"], "motion-start", "{listed}");
    let shot = listed["snapshot_url"].as_str().unwrap();
    let (code, jpeg) = crate::common::run::try_http(port, "GET", shot, "").unwrap();
    assert_eq!((code, &jpeg[..2]), (200, &[0xff, 0xd8][..]));
    for bad in [
        "/api/events/nope/clip",
        "/api/events/../../etc/passwd",
        "/api/events/%2e%2e%2fclips/clip",
    ] {
        let (code, _) = crate::common::run::try_http(port, "GET", bad, "").unwrap();
        assert_eq!(code, 404, "{bad}");
    }
    // The page: the event with its snapshot shown, and a click plays its clip.
    let (chromium, devtools) = crate::web::chromium_at(&dir, port);
    let play = "eval:new Promise(ok => { const t0 = Date.now(); const tick = () => { \
        const e = window.framepipe && framepipe.events.find(e => e.clip_url); \
        const img = e && document.querySelector(`.ev[data-id=\"${e.id}\"] img`); \
        if (img && img.complete && img.naturalWidth > 0) { \
          document.querySelector(`.ev[data-id=\"${e.id}\"]`).click(); \
          setTimeout(() => { const v = document.getElementById('ev-clip'); \
            ok(JSON.stringify({type: e.type, shot: img.naturalWidth, at: v.currentTime, width: v.videoWidth, said: document.getElementById('ev-said').textContent})); }, 2000); \
        } else if (Date.now() - t0 > 12000) ok(JSON.stringify({none: document.body.innerText})); \
        else setTimeout(tick, 200); }; tick(); })";
    let out = Command::new("timeout")
        .args(["60", "/usr/bin/python3", crate::web::CDP])
        .args([&devtools.to_string(), "sleep:1", play])
        .output()
        .unwrap();
    drop(chromium);
    crate::common::run::interrupt(&child);
    let ended = crate::common::run::wait_with_deadline(child, Duration::from_secs(5), "the view");
    let said = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(out.status.success(), "cdp: {said}{}", stderr(&out));
    let seen: serde_json::Value = serde_json::from_str(said.trim()).unwrap();
    let seen: serde_json::Value = serde_json::from_str(seen.as_str().unwrap_or("{}")).unwrap();
    assert_eq!(seen["type"], "motion-start", "{seen}");
    assert_eq!(seen["shot"], 640, "the snapshot shown: {seen}");
    assert_eq!(seen["width"], 640, "the clip played: {seen}");
    assert!(
        seen["at"].as_f64().unwrap() > 0.5,
        "the clip played: {seen}"
    );
    assert!(ended.status.success(), "{}", stderr(&ended));
}

/// What an event says of its object, without the input it came from.
fn what(e: &serde_json::Value) -> String {
    let keys = ["type", "zone", "line", "direction", "track", "frame"];
    keys.iter().map(|k| format!("{k}={} ", e[*k])).collect()
}

/// A camera file's own zones and lines in relative points make the same events as the
/// command line's in pixels (issue 80 item 1); its filters drop boxes before any event.
#[test]
fn a_cameras_own_relative_zones_make_the_command_lines_events() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("events-own");
    let clip = scene(&dir);
    let run = |extra: &[&str], events: &str| {
        let out = Command::new(bin())
            .current_dir(dir.path())
            .args([
                "--headless",
                "--detect",
                model.to_str().unwrap(),
                "--detect-fps",
                "5",
            ])
            .args(extra)
            .args(["--events", events])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        lines(&dir.join(events))
    };
    let pixels = run(
        &[
            "-i",
            clip.to_str().unwrap(),
            "--line",
            "door:320,360,320,0",
            "--zone",
            "bay:400,0,600,0,600,180,400,180",
        ],
        "pixels.jsonl",
    );
    let camera = |extra: &str| {
        format!(
            "[[camera]]\nname = \"yard\"\nsource = \"{}\"\nlines = {{ door = [0.5,1, 0.5,0] }}\nzones = {{ bay = [0.625,0, 0.9375,0, 0.9375,0.5, 0.625,0.5] }}\n{extra}",
            clip.display()
        )
    };
    std::fs::write(dir.join("cams.toml"), camera("")).unwrap();
    let own = run(&["--config", "cams.toml"], "own.jsonl");
    assert!(pixels.len() >= 4, "{pixels:?}");
    let (a, b): (Vec<String>, Vec<String>) = (
        pixels.iter().map(what).collect(),
        own.iter().map(what).collect(),
    );
    assert_eq!(a, b);
    assert!(own.iter().all(|e| e["name"] == "yard"), "{own:?}");
    // A filter that no word passes (half the picture at least): no event at all.
    std::fs::write(
        dir.join("cams.toml"),
        camera("filters = { text = { min_area = 0.5 } }\n"),
    )
    .unwrap();
    assert!(run(&["--config", "cams.toml"], "none.jsonl").is_empty());
}

/// A camera added through the API with its own zone and line while the wall runs is
/// tracked, and its events come with its name (issue 80 item 1: joining cameras were not
/// tracked).
#[test]
fn a_camera_that_joins_through_the_api_is_tracked_with_its_own_zones() {
    require(&["ffmpeg"]);
    let model = model();
    let dir = TempDir::new("events-join");
    let clip = scene(&dir);
    let cam = free_port();
    let _camera = crate::common::run::Owned::new(
        Command::new("ffmpeg")
            .args(["-v", "error", "-re", "-stream_loop", "-1", "-i"])
            .arg(&clip)
            .args(["-c", "copy", "-f", "mpegts", "-listen", "1"])
            .arg(format!("http://127.0.0.1:{cam}/live.ts"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    crate::common::run::wait_bound(cam, "the camera");
    std::fs::write(
        dir.join("cams.toml"),
        "[[camera]]\nname = \"still\"\nsource = \"pattern:64x48:10\"\n",
    )
    .unwrap();
    let port = free_port();
    let events = dir.join("ev.jsonl");
    let model_arg = model.to_str().unwrap().to_string();
    let events_arg = events.to_str().unwrap().to_string();
    let args = [
        "--backend",
        "cpu",
        "--config",
        "cams.toml",
        "--detect",
        &model_arg,
        "--events",
        &events_arg,
    ];
    let mut child =
        crate::common::run::Owned::new(crate::common::run::served(dir.path(), port, &args));
    let body = serde_json::json!({
        "name": "joined",
        "source": format!("http://127.0.0.1:{cam}/live.ts"),
        "lines": { "door": [0.5, 1, 0.5, 0] },
        "zones": { "bay": [0.625, 0, 0.9375, 0, 0.9375, 0.5, 0.625, 0.5] },
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, said) = crate::common::run::http_post(port, "/api/inputs", &body.to_string());
        if status == 201 {
            break;
        }
        assert!(
            status == 503 && Instant::now() < deadline,
            "{status}: {}",
            String::from_utf8_lossy(&said)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let seen = |kind: &str| {
        std::fs::read_to_string(&events)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .any(|e| e["name"] == "joined" && e["type"] == kind && e["track"].as_u64().is_some())
    };
    let deadline = Instant::now() + Duration::from_secs(40);
    while !(seen("cross") && seen("enter")) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let child = child.take();
    crate::common::run::interrupt(&child);
    let out = crate::common::run::wait_with_deadline(child, Duration::from_secs(10), "the wall");
    let said = std::fs::read_to_string(&events).unwrap_or_default();
    assert!(
        seen("cross") && seen("enter"),
        "no cross and enter of the joined camera:\n{said}\n{}",
        stderr(&out)
    );
}
