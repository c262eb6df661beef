//! One wall over many hosts (`framepipe front`): three shards of one camera list, each a
//! framepipe with its own `--serve` on loopback, and a front over them, asked as an
//! operator asks: every camera listed once with the shard that runs it (as the shards
//! themselves say), a camera added and removed through the front reaching its owner shard
//! alone, the front's own token and host rules, and a shard killed mid-run named down
//! within 5 s while the rest still answer.
#![cfg(feature = "ffmpeg")]

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::run::{
    bin, free_port, http, http_body, interrupt, wait_with_deadline, Owned, TempDir,
};

const SHARD_TOKEN: &str = "shards-secret";
const FRONT_TOKEN: &str = "front-secret";

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// `GET path` on `port` with `token`: the status and the JSON answer.
fn get(port: u16, path: &str, token: &str) -> (u16, serde_json::Value) {
    let (code, body) = http(port, "GET", path, &bearer(token));
    (code, serde_json::from_slice(&body).unwrap_or_default())
}

/// The names of the rows of `list` in `answer` with their `shard`.
fn names(answer: &serde_json::Value) -> Vec<(String, i64)> {
    let mut all: Vec<(String, i64)> = answer["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| {
            (
                r["name"].as_str().unwrap_or("").to_string(),
                r["shard"].as_i64().unwrap_or(-1),
            )
        })
        .collect();
    all.sort();
    all
}

/// The status of the raw request `request` on `port`.
fn status_of(port: u16, request: &str) -> u16 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut all = String::new();
    let _ = s.read_to_string(&mut all);
    all.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The front's event stream, read on a thread: each event of camera "added", and how long
/// after it was made it was read.
fn event_stream(port: u16) -> std::sync::mpsc::Receiver<(serde_json::Value, Duration)> {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    write!(
        s,
        "GET /api/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n{}\r\n",
        bearer(FRONT_TOKEN)
    )
    .unwrap();
    let mut lines = BufReader::new(s);
    // The head, then the stream's first comment: it is open.
    let mut line = String::new();
    while !line.contains(": events of every shard") {
        line.clear();
        assert!(lines.read_line(&mut line).unwrap() > 0, "the stream closed");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.lines() {
            let Ok(line) = line else { return };
            let Some(json) = line.strip_prefix("data: ") else {
                continue;
            };
            let e: serde_json::Value = serde_json::from_str(json).unwrap();
            let made = chrono::DateTime::parse_from_rfc3339(e["time"].as_str().unwrap()).unwrap();
            let late = chrono::Utc::now() - made.with_timezone(&chrono::Utc);
            let late = late.to_std().unwrap_or_default();
            if e["name"] == "added" && tx.send((e, late)).is_err() {
                return;
            }
        }
    });
    rx
}

/// Waits (30 s at most) until `what` holds.
fn wait_for(why: &str, mut what: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !what() {
        assert!(Instant::now() < deadline, "{why}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Shard `k` of 3 over `list`, serving on `port` with the shards' token.
fn shard(dir: &TempDir, list: &std::path::Path, k: usize, port: u16) -> Child {
    Command::new(bin())
        .current_dir(dir.path())
        .args(["--headless", "--inputs"])
        .arg(list)
        .args([
            "--shard",
            &format!("{k}/3"),
            "--serve",
            &port.to_string(),
            "--motion",
        ])
        .arg("--serve-token-file")
        .arg(dir.join("shard-token"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn a_front_lists_routes_and_names_a_shard_down_over_three_shards() {
    let dir = TempDir::new("front");
    std::fs::write(dir.join("shard-token"), SHARD_TOKEN).unwrap();
    let list = dir.join("wall.txt");
    let cameras: Vec<String> = (0..9).map(|i| format!("cam-{i}")).collect();
    let text: String = cameras
        .iter()
        .map(|n| format!("{n} = pattern:96x64:i420:10\n"))
        .collect();
    std::fs::write(&list, text).unwrap();
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut shards: Vec<Owned> = (0..3)
        .map(|k| Owned::new(shard(&dir, &list, k, ports[k])))
        .collect();
    let front_port = free_port();
    let urls: Vec<String> = ports
        .iter()
        .map(|p| format!("http://127.0.0.1:{p}"))
        .collect();
    let front = Command::new(bin())
        .args([
            "front",
            "--shards",
            &urls.join(","),
            "--serve",
            &front_port.to_string(),
        ])
        .arg("--shard-token-file")
        .arg(dir.join("shard-token"))
        .env("FRAMEPIPE_SERVE_TOKEN", FRONT_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut front = Owned::new(front);

    // Every camera once, with the shard that runs it, as the shards themselves say.
    let mut owned = Vec::new();
    wait_for("the shards never listed the wall", || {
        owned = (0..3)
            .flat_map(|k| {
                let (_, a) = crate::common::run::try_http(
                    ports[k],
                    "GET",
                    "/api/inputs",
                    &bearer(SHARD_TOKEN),
                )
                .map(|(c, b)| (c, serde_json::from_slice(&b).unwrap_or_default()))
                .unwrap_or_default();
                names(&a).into_iter().map(move |(n, _)| (n, k as i64))
            })
            .collect();
        owned.sort();
        owned.len() == cameras.len()
    });
    wait_for("the front never listed the wall", || {
        crate::common::run::try_http(front_port, "GET", "/healthz", "").is_some()
    });
    let (code, merged) = get(front_port, "/api/inputs", FRONT_TOKEN);
    assert_eq!(code, 200, "{merged}");
    assert_eq!(names(&merged), owned, "{merged}");

    // The front's own door: its token, its host names; the shards' token is not its.
    let (code, _) = http(front_port, "GET", "/api/inputs", "");
    assert_eq!(code, 401);
    let (code, _) = http(front_port, "GET", "/api/inputs", &bearer(SHARD_TOKEN));
    assert_eq!(code, 401);
    let rebound = format!(
        "GET /api/inputs HTTP/1.1\r\nHost: evil.example\r\n{}Connection: close\r\n\r\n",
        bearer(FRONT_TOKEN)
    );
    assert_eq!(status_of(front_port, &rebound), 421);
    let body = serde_json::json!({"name": "added", "source": "pattern:96x64:i420:10"}).to_string();
    let from_page = format!(
        "{}Origin: http://evil.example\r\nContent-Type: application/json\r\n",
        bearer(FRONT_TOKEN)
    );
    let (code, _) = http_body(front_port, "POST", "/api/inputs", &from_page, &body);
    assert_eq!(code, 403);

    // Added through the front: on its owner shard alone, its first event on the front's
    // stream within a second of being made; removed the same way.
    let events = event_stream(front_port);
    let headers = format!("{}Content-Type: application/json\r\n", bearer(FRONT_TOKEN));
    let (code, said) = http_body(front_port, "POST", "/api/inputs", &headers, &body);
    let said: serde_json::Value = serde_json::from_slice(&said).unwrap_or_default();
    assert_eq!(code, 201, "{said}");
    let k = said["shard"].as_u64().expect("the answer names the shard") as usize;
    wait_for("the owner never listed it", || {
        names(&get(ports[k], "/api/inputs", SHARD_TOKEN).1)
            .iter()
            .any(|(n, _)| n == "added")
    });
    for other in (0..3).filter(|&o| o != k) {
        let listed = names(&get(ports[other], "/api/inputs", SHARD_TOKEN).1);
        assert!(
            !listed.iter().any(|(n, _)| n == "added"),
            "shard {other} runs it too"
        );
    }
    let (event, late) = events
        .recv_timeout(Duration::from_secs(20))
        .expect("no event on the front's stream");
    assert_eq!(event["shard"].as_u64(), Some(k as u64), "{event}");
    assert!(late < Duration::from_secs(1), "{late:?}: {event}");
    let (code, _) = http(
        front_port,
        "DELETE",
        "/api/inputs/added",
        &bearer(FRONT_TOKEN),
    );
    assert_eq!(code, 200);
    wait_for("it was never removed", || {
        !names(&get(ports[k], "/api/inputs", SHARD_TOKEN).1)
            .iter()
            .any(|(n, _)| n == "added")
    });

    // A shard killed mid-run: down within 5 s, the rest still answer.
    let mut dead = shards[1].take();
    dead.kill().unwrap();
    let killed = Instant::now();
    dead.wait().unwrap();
    wait_for("the killed shard was never said down", || {
        let (code, body) = http(front_port, "GET", "/healthz", "");
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        code == 503 && v["shards"][1]["up"] == false
    });
    assert!(
        killed.elapsed() < Duration::from_secs(5),
        "{:?}",
        killed.elapsed()
    );
    let (code, merged) = get(front_port, "/api/inputs", FRONT_TOKEN);
    assert_eq!(code, 200);
    let alive: Vec<(String, i64)> = owned.iter().filter(|(_, s)| *s != 1).cloned().collect();
    assert_eq!(names(&merged), alive, "{merged}");
    assert_eq!(merged["shards"][1]["up"], false, "{merged}");
    let (_, metrics) = http(front_port, "GET", "/metrics", &bearer(FRONT_TOKEN));
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics.contains("framepipe_front_shard_up{shard=\"1\"} 0"),
        "{metrics}"
    );
    assert!(metrics.contains("shard=\"2\""), "{metrics}");

    // Its stop: within a second, exit 0.
    let front = front.take();
    interrupt(&front);
    let stopped = Instant::now();
    let out = wait_with_deadline(front, Duration::from_secs(5), "front");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stopped.elapsed() < Duration::from_millis(1500),
        "{:?}",
        stopped.elapsed()
    );
    for k in [0, 2] {
        let s = shards[k].take();
        interrupt(&s);
        wait_with_deadline(s, Duration::from_secs(15), "shard");
    }
}
