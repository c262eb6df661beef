//! Past one machine: several framepipes over one inputs file (`--inputs`, `--shard K/N`),
//! each seen from outside as an orchestrator sees it: the files each writes, its `/healthz`
//! and `/metrics` (parsed by Prometheus's own client library), its log; a camera added to the
//! file while they run; a shard killed with SIGKILL and started again; the deploy files
//! checked by their linters.
#![cfg(feature = "ffmpeg")]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common;
use crate::record::{camera_clip, send_to, udp_input};
use common::probe::codec_and_frames;
use common::run::{bin, free_port, http, require, stderr, try_http, wait_with_deadline, TempDir};

/// A list of pattern cameras named `names`.
fn list_of(names: &[String]) -> String {
    let mut text = String::from("# the wall\n\n");
    for n in names {
        text.push_str(&format!("{n} = pattern:96x64:i420:10\n"));
    }
    text
}

/// Writes `text` to `path` whole (a new file renamed over the old, as a ConfigMap's swap).
fn write_list(path: &Path, text: &str) {
    let new = path.with_extension("new");
    std::fs::write(&new, text).unwrap();
    std::fs::rename(&new, path).unwrap();
}

/// A framepipe started by a test, its log written to a file the test can read as it runs.
struct Shard {
    child: Child,
    log: PathBuf,
}

impl Shard {
    /// framepipe over the list `list`, headless, with `args`, once its stop handler is in
    /// place.
    fn start(dir: &Path, list: &Path, args: &[String]) -> Self {
        let log = tempfile::Builder::new()
            .prefix("shard-")
            .suffix(".log")
            .tempfile_in(dir)
            .unwrap()
            .into_temp_path()
            .keep()
            .unwrap();
        let child = Command::new(bin())
            .current_dir(dir)
            .arg("--headless")
            .arg("--inputs")
            .arg(list)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        common::run::wait_until_it_catches(child.id(), libc::SIGINT);
        Self { child, log }
    }

    /// What it said so far.
    fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// Ctrl-C to each of `shards`: their logs, each after a clean exit.
fn stop_all(shards: Vec<Shard>) -> Vec<String> {
    for s in &shards {
        common::run::interrupt(&s.child);
    }
    shards
        .into_iter()
        .map(|s| {
            let out = wait_with_deadline(s.child, Duration::from_secs(15), "shard");
            let log = std::fs::read_to_string(&s.log).unwrap_or_default();
            assert!(out.status.success(), "{:?}\n{log}", out.status);
            log
        })
        .collect()
}

/// The files in `dir` (not hidden), by name.
fn files_in(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| !n.starts_with('.'))
                .collect()
        })
        .unwrap_or_default()
}

/// Every input of one list is run by exactly one of N framepipes (N = 1, 2, 3): the files
/// they write, one per input named by its `{name}`, are each input's once, and each holds
/// its frames.
#[test]
fn shards_of_one_list_cover_every_input_exactly_once() {
    require(&["ffprobe"]);
    let dir = TempDir::new("shards-cover");
    let names: Vec<String> = (0..7).map(|i| format!("cam-{i}")).collect();
    let list = dir.join("cams.txt");
    write_list(&list, &list_of(&names));
    for n in 1..=3 {
        let out = dir.join(&format!("out-{n}"));
        std::fs::create_dir(&out).unwrap();
        let shards: Vec<Shard> = (0..n)
            .map(|k| {
                let name = out.join("{name}.mkv").display().to_string();
                let args = [format!("--shard={k}/{n}"), "-o".into(), name];
                Shard::start(dir.path(), &list, &args)
            })
            .collect();
        std::thread::sleep(Duration::from_millis(1500));
        let logs = stop_all(shards);
        let written = files_in(&out);
        let wanted: BTreeSet<String> = names.iter().map(|n| format!("{n}.mkv")).collect();
        assert_eq!(written, wanted, "N = {n}:\n{}", logs.join("\n---\n"));
        for f in &written {
            let (codec, frames) = codec_and_frames(&out.join(f));
            assert!(
                codec == "h264" && frames > 0,
                "N = {n}: {f}: {codec}, {frames} frames"
            );
        }
        // Each says which it took; together they took each input once.
        let mut taken: Vec<String> = Vec::new();
        for (k, log) in logs.iter().enumerate() {
            let line = log
                .lines()
                .find(|l| l.contains(&format!("inputs: shard {k}/{n} of ")))
                .unwrap_or_else(|| panic!("shard {k}/{n} said nothing of its share:\n{log}"));
            if let Some((_, taken_here)) = line.rsplit_once(" inputs: ") {
                taken.extend(taken_here.split(", ").map(str::to_string));
            }
        }
        taken.sort();
        assert_eq!(taken, names, "N = {n}");
    }
}

/// The inputs `/metrics` on `port` has figures of (empty where it answers nothing yet).
fn metered(port: u16) -> Option<BTreeSet<String>> {
    let (status, body) = try_http(port, "GET", "/metrics", "")?;
    if status != 200 {
        return None;
    }
    let text = String::from_utf8_lossy(&body);
    Some(
        text.lines()
            .filter(|l| l.starts_with("framepipe_frames_captured_total{"))
            .filter_map(|l| l.split('"').nth(1).map(str::to_string))
            .collect(),
    )
}

/// Waits (at most `limit`) until `what` gives a value; panics naming `why` otherwise.
fn wait_for<T>(limit: Duration, why: &str, mut what: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = what() {
            return v;
        }
        assert!(Instant::now() < deadline, "{why}: nothing after {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Three shards run; a camera is added to the file: the one shard it hashes to restarts its
/// run (the same process, as a supervisor sees it) with the new camera beside its own, and
/// the other two go on untouched, each saying so.
#[test]
fn a_camera_added_to_the_list_moves_to_one_shard_and_no_other_moves() {
    let dir = TempDir::new("shards-add");
    let names: Vec<String> = (0..6).map(|i| format!("cam-{i}")).collect();
    let list = dir.join("cams.txt");
    write_list(&list, &list_of(&names));
    let ports: Vec<u16> = (0..3).map(|_| free_port()).collect();
    let mut shards: Vec<Shard> = (0..3)
        .map(|k| {
            let serve = format!("--serve={}", ports[k]);
            Shard::start(dir.path(), &list, &[format!("--shard={k}/3"), serve])
        })
        .collect();
    let before: Vec<BTreeSet<String>> = ports
        .iter()
        .map(|&p| wait_for(Duration::from_secs(20), "/metrics", || metered(p)))
        .collect();
    let union: BTreeSet<String> = before.iter().flatten().cloned().collect();
    assert_eq!(union.len(), 6, "{before:?}");
    assert_eq!(
        before.iter().map(BTreeSet::len).sum::<usize>(),
        6,
        "{before:?}"
    );

    let mut more = names.clone();
    more.push("cam-new".into());
    write_list(&list, &list_of(&more));
    // Each says what the change means for it, and one of them restarts its run.
    for (k, shard) in shards.iter().enumerate() {
        wait_for(Duration::from_secs(20), "the change said", || {
            shard.said().contains("changed (+cam-new)").then_some(())
        });
        let log = shard.said();
        let mine = log.contains("this process's inputs change (+cam-new)");
        assert!(
            mine || log.contains("stay as they are"),
            "shard {k}:\n{log}"
        );
    }
    let gained: Vec<usize> = (0..3)
        .filter(|&k| shards[k].said().contains("this process's inputs change"))
        .collect();
    assert_eq!(gained.len(), 1, "{gained:?}");
    let gained = gained[0];
    wait_for(Duration::from_secs(20), "cam-new in its shard", || {
        metered(ports[gained]).filter(|m| m.contains("cam-new"))
    });
    for (k, port) in ports.iter().enumerate() {
        let now = wait_for(Duration::from_secs(10), "/metrics", || metered(*port));
        let mut want = before[k].clone();
        if k == gained {
            want.insert("cam-new".into());
        }
        assert_eq!(now, want, "shard {k}");
    }
    assert!(
        shards
            .iter_mut()
            .all(|s| s.child.try_wait().unwrap().is_none()),
        "every shard still runs as the same process"
    );
    stop_all(shards);
}

/// A list whose one camera is replaced while it runs: the share is a wall of one tile, so its
/// browser view (`/healthz`, `/metrics`) outlives the camera that left and shows the one that
/// came (shown alone, the camera's leaving ended the view: the pod stopped answering).
#[test]
fn the_only_camera_replaced_keeps_the_view_answering() {
    let dir = TempDir::new("shards-solo");
    let list = dir.join("cams.txt");
    write_list(&list, &list_of(&["solo".to_string()]));
    let port = free_port();
    let mut shards = vec![Shard::start(
        dir.path(),
        &list,
        &[format!("--serve={port}")],
    )];
    wait_for(Duration::from_secs(20), "solo in /metrics", || {
        metered(port).filter(|m| m.contains("solo"))
    });
    write_list(&list, &list_of(&["other".to_string()]));
    wait_for(Duration::from_secs(20), "other in /metrics", || {
        metered(port).filter(|m| m.contains("other"))
    });
    let (status, _) = http(port, "GET", "/healthz", "");
    assert_eq!(status, 200, "{}", shards[0].said());
    assert!(
        shards[0].child.try_wait().unwrap().is_none(),
        "still running"
    );
    assert!(
        shards[0].said().contains("a mosaic of"),
        "{}",
        shards[0].said()
    );
    stop_all(std::mem::take(&mut shards));
}

/// `/metrics` parsed by Prometheus's own Python client (`text_string_to_metric_families`):
/// each family's samples as (labels' input, value).
fn parsed(port: u16) -> serde_json::Value {
    let (status, body) = http(port, "GET", "/metrics", "");
    assert_eq!(status, 200);
    let script = r#"
import json, sys
from prometheus_client.parser import text_string_to_metric_families
out = {}
for f in text_string_to_metric_families(sys.stdin.read()):
    for s in f.samples:
        out.setdefault(s.name, {})[s.labels.get("input", "") + s.labels.get("quantile", "")] = s.value
print(json.dumps(out))
"#;
    let mut py = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    py.stdin.take().unwrap().write_all(&body).unwrap();
    let out = py.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "Prometheus's parser refused /metrics: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&body)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// `/healthz` turns 503 once a camera stays down past `--health-budget`, and 200 again once
/// it comes back; `/metrics` says which and parses as Prometheus's text format.
#[test]
fn healthz_turns_when_an_input_stays_down_past_its_budget_and_back_when_it_returns() {
    require(&["ffmpeg"]);
    let dir = TempDir::new("shards-health");
    let clip = dir.join("clip.ts");
    camera_clip(&clip, 30);
    let (door, port) = (free_port(), free_port());
    let list = dir.join("cams.txt");
    let text = format!("lobby = pattern:96x64:i420:10\ndoor = tcp://127.0.0.1:{door}\n");
    write_list(&list, &text);
    let args = [format!("--serve={port}"), "--health-budget=2s".into()];
    let shard = Shard::start(dir.path(), &list, &args);
    let healthz = || try_http(port, "GET", "/healthz", "");
    let (_, said) = wait_for(Duration::from_secs(20), "/healthz 503", || {
        healthz().filter(|(s, _)| *s == 503)
    });
    let said = String::from_utf8_lossy(&said).into_owned();
    assert!(
        said.contains("1 of 2") && !said.contains("127.0.0.1"),
        "{said}"
    );
    let m = parsed(port);
    assert_eq!(m["framepipe_input_up"]["door"], 0.0, "{m}");
    assert_eq!(m["framepipe_input_up"]["lobby"], 1.0, "{m}");
    assert!(
        m["framepipe_input_down_seconds"]["door"].as_f64().unwrap() >= 2.0,
        "{m}"
    );

    // The camera comes up: it listens, and framepipe's next attempt connects.
    let mut sender = send_to(&clip, &format!("tcp://127.0.0.1:{door}?listen=1"));
    wait_for(Duration::from_secs(30), "/healthz 200 again", || {
        healthz().filter(|(s, _)| *s == 200)
    });
    let m = parsed(port);
    assert_eq!(m["framepipe_input_up"]["door"], 1.0, "{m}");
    assert!(
        m["framepipe_frames_captured_total"]["door"]
            .as_f64()
            .unwrap()
            > 0.0,
        "{m}"
    );
    assert!(
        m["framepipe_latency_seconds_count"]["door"]
            .as_f64()
            .is_some(),
        "{m}"
    );
    let _ = sender.kill();
    let _ = sender.wait();
    stop_all(vec![shard]);
}

/// Closed segments of `dir` for camera `name`.
fn segments(dir: &Path, name: &str) -> Vec<PathBuf> {
    files_in(dir)
        .into_iter()
        .filter(|f| f.starts_with(&format!("{name}-")) && f.ends_with(".ts"))
        .map(|f| dir.join(f))
        .collect()
}

/// Whether FFmpeg decodes `path` whole: every frame, no error said.
fn plays_whole(path: &Path) -> bool {
    let out = Command::new("ffmpeg")
        .args(["-v", "error", "-i"])
        .arg(path)
        .args(["-f", "null", "-"])
        .output()
        .unwrap();
    out.status.success() && out.stderr.is_empty() && codec_and_frames(path).1 > 0
}

/// The failure drill: a shard recording two cameras in 1 s segments is killed with SIGKILL
/// mid-run and started again, as an orchestrator would: it resumes both cameras (new
/// segments beside the old, none replaced), and every segment closed before the kill plays
/// whole.
#[test]
fn a_shard_killed_with_sigkill_resumes_and_its_closed_segments_play_whole() {
    require(&["ffmpeg", "ffprobe"]);
    let dir = TempDir::new("shards-kill");
    let clip = dir.join("clip.ts");
    camera_clip(&clip, 12);
    let ports = [free_port(), free_port()];
    let list = dir.join("cams.txt");
    let text = format!(
        "cam-a = {}\ncam-b = {}\n",
        udp_input(ports[0]),
        udp_input(ports[1])
    );
    write_list(&list, &text);
    let rec = dir.join("rec");
    std::fs::create_dir(&rec).unwrap();
    let args = [
        "--shard=0/1".to_string(),
        "--record".into(),
        rec.join("{name}-{seg}.ts").display().to_string(),
        "--segment=1".into(),
    ];
    let mut first = Shard::start(dir.path(), &list, &args);
    let mut senders: Vec<Child> = ports
        .iter()
        .map(|p| send_to(&clip, &format!("udp://127.0.0.1:{p}?pkt_size=1316")))
        .collect();
    std::thread::sleep(Duration::from_millis(4500));
    first.child.kill().unwrap(); // SIGKILL: nothing of framepipe runs after it
    let _ = first.child.wait();
    let closed: Vec<Vec<PathBuf>> = ["cam-a", "cam-b"]
        .iter()
        .map(|n| segments(&rec, n))
        .collect();
    for (n, segs) in ["cam-a", "cam-b"].iter().zip(&closed) {
        assert!(segs.len() >= 2, "{n}: {segs:?}");
        for s in segs {
            assert!(
                plays_whole(s),
                "{}: closed before the kill, not whole",
                s.display()
            );
        }
    }

    let second = Shard::start(dir.path(), &list, &args);
    std::thread::sleep(Duration::from_millis(3500));
    let log = stop_all(vec![second]).remove(0);
    for (n, before) in ["cam-a", "cam-b"].iter().zip(&closed) {
        let after = segments(&rec, n);
        assert!(
            after.len() > before.len() && before.iter().all(|b| after.contains(b)),
            "{n}: resumed? before {before:?}, after {after:?}\n{log}"
        );
        for s in &after {
            assert!(plays_whole(s), "{}: not whole\n{log}", s.display());
        }
    }
    for s in &mut senders {
        let _ = s.kill();
        let _ = s.wait();
    }
}

/// The tools `scripts/test.sh` installs for the deploy files (a virtual environment of PyPI's
/// kubernetes-validate and hadolint).
fn tool(name: &str) -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/venv/bin");
    let path = venv.join(name);
    assert!(
        path.exists(),
        "{}: scripts/test.sh installs it",
        path.display()
    );
    path
}

/// The Kubernetes manifests pass kubernetes-validate's schemas, and the Containerfile
/// hadolint's rules. (podman runs here, but can't pull the base images without a container
/// registry, so the image itself is not built by the tests.)
#[test]
fn the_deploy_files_pass_their_linters() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let manifests = ["deploy/wall.yaml", "deploy/batch.yaml", "deploy/front.yaml"];
    let out = Command::new(tool("kubernetes-validate"))
        .args(["--strict"])
        .args(manifests.iter().map(|m| root.join(m)))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout).into_owned() + &stderr(&out);
    assert!(out.status.success(), "{said}");
    assert_eq!(said.matches(" passed for resource ").count(), 7, "{said}");
    let out = Command::new(tool("hadolint"))
        .arg(root.join("deploy/Containerfile"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        stderr(&out)
    );
}

/// A shard whose cameras are all down as it starts answers `/healthz` all the same (the
/// view opens before the inputs do): 503 once they have been down past the budget, with
/// `/metrics` saying how long; and a camera alone in its shard is waited for, not refused.
#[test]
fn healthz_answers_while_every_camera_is_still_down() {
    let dir = TempDir::new("shards-down");
    let port = free_port();
    let list = dir.join("cams.txt");
    for cameras in [2, 1] {
        let text: String = (0..cameras)
            .map(|i| format!("cam-{i} = tcp://127.0.0.1:{}\n", free_port()))
            .collect();
        write_list(&list, &text);
        let args = [format!("--serve={port}"), "--health-budget=2s".into()];
        let shard = Shard::start(dir.path(), &list, &args);
        let said = wait_for(Duration::from_secs(20), "/healthz 503", || {
            try_http(port, "GET", "/healthz", "").filter(|(s, _)| *s == 503)
        });
        let said = String::from_utf8_lossy(&said.1).into_owned();
        assert!(said.contains(&format!("{cameras} of {cameras}")), "{said}");
        let m = parsed(port);
        for i in 0..cameras {
            let down = m["framepipe_input_down_seconds"][format!("cam-{i}")].as_f64();
            assert!(down.is_some_and(|d| d >= 2.0), "{m}");
        }
        let log = stop_all(vec![shard]).remove(0);
        assert!(log.contains("is down"), "{log}");
    }
}
