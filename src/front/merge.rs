//! The shards' answers made one: inputs, events, recordings, health and metrics of the
//! whole wall, each row with its shard. Pure functions over what each shard answered.
//!
//! Invariants: every row a shard gave is in the merged answer once, with `shard` (the
//! shard's place in `--shards`) and nothing else changed; a shard that did not answer, or
//! answered other than 200 or with what is not JSON, is named in `shards` as down with its
//! reason, and the others' rows are still given; events are newest first across shards.

use serde_json::{json, Value};

use super::shards::ShardError;

/// One shard's answer as the front got it: its status and body, or why there is none.
pub type Reached = Result<(u16, bytes::Bytes), ShardError>;

/// Each shard's state: `{"shard", "url", "up"}` and the reason where it is down.
fn states(urls: &[String], answers: &[Reached]) -> Vec<Value> {
    urls.iter()
        .zip(answers)
        .enumerate()
        .map(|(k, (url, a))| match parsed(a) {
            Ok(_) => json!({"shard": k, "url": url, "up": true}),
            Err(why) => json!({"shard": k, "url": url, "up": false, "error": why.to_string()}),
        })
        .collect()
}

/// A shard's answer as JSON, where it is a 200 of JSON.
fn parsed(a: &Reached) -> Result<Value, ShardError> {
    match a {
        Ok((200, body)) => serde_json::from_slice(body).map_err(|_| ShardError::NotJson),
        Ok((code, body)) => {
            let said: Option<Value> = serde_json::from_slice(body).ok();
            let said = said
                .as_ref()
                .and_then(|v| v["error"].as_str())
                .unwrap_or("");
            Err(ShardError::Status {
                code: *code,
                said: said.to_string(),
            })
        }
        Err(why) => Err(why.clone()),
    }
}

/// Every shard's rows of list `key` (`inputs`, `events`, `recordings`…), each with its
/// shard, and the shards' states.
pub fn rows(key: &str, urls: &[String], answers: &[Reached]) -> Value {
    let mut all = Vec::new();
    for (k, a) in answers.iter().enumerate() {
        let Ok(v) = parsed(a) else { continue };
        if let Some(list) = v.get(key).and_then(Value::as_array) {
            for row in list {
                let mut row = row.clone();
                if let Some(o) = row.as_object_mut() {
                    o.insert("shard".into(), k.into());
                }
                all.push(row);
            }
        }
    }
    json!({ key: all, "shards": states(urls, answers) })
}

/// Every shard's events, newest first, `limit` of them at most, each with its shard.
pub fn events(urls: &[String], answers: &[Reached], limit: usize) -> Value {
    let mut merged = rows("events", urls, answers);
    if let Some(list) = merged["events"].as_array_mut() {
        // RFC 3339 times of one zone (UTC, as events are stamped) sort as text.
        list.sort_by(|a, b| b["time"].as_str().cmp(&a["time"].as_str()));
        list.truncate(limit);
    }
    merged
}

/// Every shard's recordings in time order, each named as the front serves it: its `url`
/// (and its detections') `/api/recordings/segment/K-ID`, K its shard, so that a camera
/// recorded by several shards (it moved) is listed and played whole.
pub fn recordings(urls: &[String], answers: &[Reached]) -> Value {
    let mut merged = rows("recordings", urls, answers);
    if let Some(list) = merged["recordings"].as_array_mut() {
        for r in list.iter_mut() {
            let k = r["shard"].as_u64().unwrap_or(0);
            for key in ["url", "detections"] {
                if let Some(u) = r[key].as_str() {
                    let named = u.replacen(
                        "/api/recordings/segment/",
                        &format!("/api/recordings/segment/{k}-"),
                        1,
                    );
                    r[key] = named.into();
                }
            }
        }
        list.sort_by(|a, b| {
            let t = |v: &Value| v["start_unix"].as_f64().unwrap_or(0.0);
            t(a).total_cmp(&t(b))
        });
    }
    merged
}

/// The wall's health: 200 while every shard says it is healthy, else 503; each shard's
/// state and its own answer.
pub fn health(urls: &[String], answers: &[Reached]) -> (u16, Value) {
    let mut shards = Vec::new();
    let mut healthy = true;
    for (k, (url, a)) in urls.iter().zip(answers).enumerate() {
        let row = match a {
            Ok((code, body)) => {
                let said: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
                healthy &= *code == 200;
                json!({"shard": k, "url": url, "up": true, "status": code, "health": said})
            }
            Err(why) => {
                healthy = false;
                json!({"shard": k, "url": url, "up": false, "error": why.to_string()})
            }
        };
        shards.push(row);
    }
    let status = if healthy { "ok" } else { "degraded" };
    (
        if healthy { 200 } else { 503 },
        json!({"status": status, "shards": shards}),
    )
}

/// The shards' Prometheus texts as one: each sample labelled with its `shard`, each
/// metric's `# HELP` and `# TYPE` once, and `framepipe_front_shard_up` for each shard.
pub fn metrics(answers: &[Reached]) -> String {
    let mut out = String::from(
        "# HELP framepipe_front_shard_up Whether the shard answered the front.\n\
         # TYPE framepipe_front_shard_up gauge\n",
    );
    for (k, a) in answers.iter().enumerate() {
        let up = matches!(a, Ok((200, _)));
        out.push_str(&format!(
            "framepipe_front_shard_up{{shard=\"{k}\"}} {}\n",
            u8::from(up)
        ));
    }
    let mut described = std::collections::BTreeSet::new();
    for (k, a) in answers.iter().enumerate() {
        let Ok((200, body)) = a else { continue };
        for line in String::from_utf8_lossy(body).lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                // "# HELP name …" / "# TYPE name …": once for each.
                let mut words = rest.split_whitespace();
                let key = (
                    words.next().map(str::to_string),
                    words.next().map(str::to_string),
                );
                if described.insert(key) {
                    out.push_str(line);
                    out.push('\n');
                }
            } else if !line.trim().is_empty() {
                out.push_str(&labelled(line, k));
                out.push('\n');
            }
        }
    }
    out
}

/// Sample `line` with `shard="k"` as its first label.
fn labelled(line: &str, k: usize) -> String {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let (name, rest) = line.split_at(name_end);
    match rest.strip_prefix('{') {
        Some(labels) => format!("{name}{{shard=\"{k}\",{labels}"),
        None => format!("{name}{{shard=\"{k}\"}}{rest}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(v: Value) -> Reached {
        Ok((200, v.to_string().into_bytes().into()))
    }

    #[test]
    fn rows_carry_their_shard_and_a_shard_down_is_named() {
        let urls = vec![
            "http://a:1".to_string(),
            "http://b:1".into(),
            "http://c:1".into(),
        ];
        let answers = vec![
            ok(json!({"inputs": [{"name": "x"}, {"name": "y"}]})),
            Err(ShardError::Unreached("connection refused".into())),
            ok(json!({"inputs": [{"name": "z"}]})),
        ];
        let merged = rows("inputs", &urls, &answers);
        let names: Vec<(String, u64)> = merged["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["name"].as_str().unwrap().into(),
                    r["shard"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(names, [("x".into(), 0), ("y".into(), 0), ("z".into(), 2)]);
        assert_eq!(merged["shards"][1]["up"], false);
        assert_eq!(merged["shards"][1]["error"], "connection refused");
        let (code, health) = health(&urls, &answers);
        assert_eq!((code, health["status"].as_str()), (503, Some("degraded")));
    }

    #[test]
    fn events_are_newest_first_across_shards() {
        let urls = vec!["http://a:1".to_string(), "http://b:1".into()];
        let e = |t: &str| json!({"time": t});
        let answers = vec![
            ok(json!({"events": [e("2026-12-07T10:00:03.000Z"), e("2026-12-07T10:00:01.000Z")]})),
            ok(json!({"events": [e("2026-12-07T10:00:02.000Z")]})),
        ];
        let merged = events(&urls, &answers, 2);
        let times: Vec<&str> = merged["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["time"].as_str().unwrap())
            .collect();
        assert_eq!(
            times,
            ["2026-12-07T10:00:03.000Z", "2026-12-07T10:00:02.000Z"]
        );
    }

    #[test]
    fn metrics_are_labelled_by_shard_and_described_once() {
        let text = "# HELP fp_frames Frames.\n# TYPE fp_frames counter\nfp_frames{input=\"a\"} 3\nfp_up 1\n";
        let answers = vec![
            Ok((200, text.as_bytes().to_vec().into())),
            Ok((200, text.as_bytes().to_vec().into())),
            Err(ShardError::Late),
        ];
        let m = metrics(&answers);
        assert_eq!(m.matches("# TYPE fp_frames").count(), 1, "{m}");
        assert!(m.contains("fp_frames{shard=\"1\",input=\"a\"} 3"), "{m}");
        assert!(m.contains("fp_up{shard=\"0\"} 1"), "{m}");
        assert!(m.contains("framepipe_front_shard_up{shard=\"2\"} 0"), "{m}");
    }
}
