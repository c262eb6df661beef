//! What ffprobe reads of a file the tests made: a player's view, independent of framepipe.

use std::path::Path;
use std::process::Command;

/// ffprobe's JSON for `args` (`-show_entries …`) of `path`; `null` where ffprobe gives none
/// (a file it can't read: the callers' counts are then 0).
pub fn json(path: &Path, args: &[&str]) -> serde_json::Value {
    let out = Command::new("ffprobe")
        .args(["-v", "error", "-of", "json"])
        .args(args)
        .arg(path)
        .output()
        .expect("ffprobe runs (scripts/test.sh installs ffmpeg)");
    serde_json::from_slice(&out.stdout).unwrap_or(serde_json::Value::Null)
}

/// A JSON field ffprobe writes as a number in a string ("60"), or 0.
fn number(v: &serde_json::Value) -> f64 {
    v.as_str().and_then(|s| s.parse().ok()).unwrap_or(0.0)
}

/// ffprobe's JSON of `entries` with the first video stream's frames decoded and counted.
fn counted(path: &Path, entries: &str) -> serde_json::Value {
    let select = ["-count_frames", "-select_streams", "v:0", "-show_entries"];
    json(path, &[&select[..], &[entries]].concat())
}

/// The first video stream's codec and the frames ffprobe decodes of it.
pub fn codec_and_frames(path: &Path) -> (String, u64) {
    let v = counted(path, "stream=codec_name,nb_read_frames");
    let stream = &v["streams"][0];
    let codec = stream["codec_name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    (codec, number(&stream["nb_read_frames"]) as u64)
}

/// The frames ffprobe decodes of the first video stream, and the file's duration in seconds.
pub fn frames_and_seconds(path: &Path) -> (u64, f64) {
    let v = counted(path, "stream=nb_read_frames:format=duration");
    (
        number(&v["streams"][0]["nb_read_frames"]) as u64,
        number(&v["format"]["duration"]),
    )
}
