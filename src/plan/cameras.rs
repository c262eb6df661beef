//! The camera file (`--config cameras.toml`, or any `--inputs` file whose name ends in
//! `.toml`): the wall's inputs as an operator keeps them, one `[[camera]]` table each, with
//! what is done with each one. It lists the same `Entry`s an inputs file's lines do, so that
//! shards, names, `{n}`/`{name}` and reloading work alike.
//!
//! ```toml
//! [[camera]]
//! name = "front"                      # required: letters, digits, . - _
//! source = "rtsp://user:pw@10.0.0.2/" # required: what --input takes
//! record = true                       # false: not recorded, even with --record
//! segment = "10m"                     # its own --segment
//! retain = "30d"                      # its own --retain (within --retain-size/-free)
//! detect = true                       # false: --detect passes it by
//! detect_fps = 5                      # its own --detect-fps
//! decode = "gpu"                      # its own --decode: cpu, gpu or auto
//! outputs = ["front.mkv"]             # its own outputs, as --output names them
//! zones = { door = [0.1,0.5, 0.4,0.5, 0.4,0.9] }  # its zones: relative (0-1) or pixels
//! lines = { gate = [0,0.6, 1,0.6] }    # its lines
//! event_labels = ["person", "car"]     # its own --event-labels
//! stay = 30                            # its own --stay
//! filters = { person = { min_score = 0.6, min_area = 0.01 } }  # boxes dropped before events
//! ```
//!
//! Invariants: a mistake is one line naming the file, the camera (its name, or its place
//! where it has none) and the key; an unknown key is a mistake (a misspelled `retain` must
//! not silently keep everything for ever); nothing else is read from the file.

use super::entry::{Entry, PerInput};

/// The keys a camera takes.
const KEYS: &str = "name, source, record, segment, retain, detect, detect_fps, decode, outputs, zones, lines, event_labels, stay, filters";

/// A camera file's mistake: the camera (its name, `#K` its place where it has none, empty
/// for the file) and what is wrong.
#[derive(Debug, PartialEq, Eq)]
pub struct Mistake {
    /// The camera.
    pub camera: String,
    /// What is wrong.
    pub why: String,
}

/// The entries of a camera file's `text`, after the `--input` `flags` (numbered after them).
pub fn list(flags: Vec<Entry>, text: &str) -> Result<Vec<Entry>, Mistake> {
    let table: toml::Table = text.parse().map_err(|e: toml::de::Error| Mistake {
        camera: String::new(),
        why: one_line(e.message()),
    })?;
    let mut entries = flags;
    if let Some(key) = table.keys().find(|k| *k != "camera") {
        let why = format!("'{key}' is not a camera file's table (write [[camera]] tables)");
        return Err(refused("", &why));
    }
    let Some(cameras) = table.get("camera") else {
        return Ok(entries);
    };
    let cameras = cameras
        .as_array()
        .ok_or_else(|| refused("", "'camera' is written [[camera]], a table each"))?;
    for (i, camera) in cameras.iter().enumerate() {
        let place = format!("#{}", i + 1);
        let camera = camera
            .as_table()
            .ok_or_else(|| refused(&place, "is not a table"))?;
        let entry = entry_of(camera, entries.len())
            .map_err(|(who, why)| refused(&who.unwrap_or(place), &why))?;
        entries.push(entry);
    }
    Ok(entries)
}

fn refused(camera: &str, why: &str) -> Mistake {
    Mistake {
        camera: camera.into(),
        why: why.into(),
    }
}

/// A TOML parser's message on one line.
fn one_line(message: &str) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One camera's entry, numbered `n`; or its name (where it has one) and what is wrong.
fn entry_of(camera: &toml::Table, n: usize) -> Result<Entry, (Option<String>, String)> {
    let name = match camera.get("name") {
        Some(toml::Value::String(s)) => s.clone(),
        Some(_) => return Err((None, "name: a string".into())),
        None => return Err((None, "has no name (name = \"front\")".into())),
    };
    let fail = |why: String| (Some(name.clone()), why);
    if !super::entry::valid_name(&name) {
        return Err(fail(
            "name: letters, digits, '.', '-' and '_' only, not dots alone".into(),
        ));
    }
    let source = match camera.get("source") {
        Some(toml::Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
        Some(_) => return Err(fail("source: a string, as --input takes it".into())),
        None => return Err(fail("has no source (source = \"rtsp://…\")".into())),
    };
    let mut own = PerInput::default();
    for (key, value) in camera
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "name" | "source"))
    {
        if key == "outputs" {
            own.outputs = outputs_of(value).map_err(fail)?;
            continue;
        }
        let json = serde_json::to_value(value).unwrap_or_default();
        if let Some(pairs) = crate::events::camera::settings_of(key, &json) {
            for (k, v) in pairs.map_err(|e| fail(e.to_string()))? {
                own.set(&k, &v)
                    .map_err(|why| fail(format!("{key}: {why}")))?;
            }
            continue;
        }
        let text = match value {
            toml::Value::String(s) => s.clone(),
            toml::Value::Boolean(b) => if *b { "on" } else { "off" }.to_string(),
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Float(f) => f.to_string(),
            _ => return Err(fail(format!("{key}: a string, a number or true/false"))),
        };
        let key = match key.as_str() {
            "detect_fps" => "detect-fps",
            "record" | "segment" | "retain" | "detect" | "decode" => key.as_str(),
            other => return Err(fail(format!("'{other}' is not a camera's key ({KEYS})"))),
        };
        own.set(key, &text)
            .map_err(|why| fail(format!("{key}: {why}")))?;
    }
    Ok(Entry {
        name,
        source,
        n,
        own,
    })
}

/// A camera's `outputs`: a list of names (`--output`'s, `{name}` and `{n}` taken), or one.
fn outputs_of(value: &toml::Value) -> Result<Vec<String>, String> {
    let wrong = || "outputs: a list of names, as --output takes them".to_string();
    let names = match value {
        toml::Value::String(s) => vec![s.clone()],
        toml::Value::Array(list) => list
            .iter()
            .map(|v| v.as_str().map(str::to_string).ok_or_else(wrong))
            .collect::<Result<_, _>>()?,
        _ => return Err(wrong()),
    };
    match names.iter().any(|n| n.trim().is_empty()) {
        true => Err(wrong()),
        false => Ok(names),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::open::Decode;

    fn cameras(text: &str) -> Result<Vec<Entry>, String> {
        list(Vec::new(), text).map_err(|m| match m.camera.starts_with('#') {
            true => format!("camera {}: {}", m.camera, m.why),
            false => format!("camera '{}': {}", m.camera, m.why),
        })
    }

    #[test]
    fn each_camera_is_an_entry_with_its_settings() {
        let all = cameras(
            "[[camera]]\nname = \"front\"\nsource = \"rtsp://u:p@h/\"\nrecord = false\nretain = \"30d\"\nsegment = \"10m\"\ndetect_fps = 2.5\ndecode = \"gpu\"\noutputs = [\"front.mp4\", \"udp://h:5000\"]\n\n[[camera]]\nname = \"back\"\nsource = \"back.mp4\"\ndetect = false\n",
        )
        .unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (all[0].name.as_str(), all[0].source.as_str(), all[0].n),
            ("front", "rtsp://u:p@h/", 0)
        );
        assert_eq!(all[0].own.record, Some(false));
        assert_eq!(all[0].own.retain_secs, Some(30 * 86_400));
        assert_eq!(all[0].own.segment_millis, Some(600_000));
        assert_eq!(all[0].own.detect_fps(), Some(2.5));
        assert_eq!(all[0].own.outputs, ["front.mp4", "udp://h:5000"]);
        assert_eq!(all[0].own.decode, Some(Decode::Gpu));
        assert_eq!(all[1].own.detect, Some(false));
        assert_eq!(all[1].own.decode, None);
    }

    #[test]
    fn a_mistake_names_the_camera_and_the_key() {
        let e = cameras("[[camera]]\nname = \"front\"\nsource = \"a.mp4\"\nretian = \"7d\"\n")
            .unwrap_err();
        assert!(
            e.contains("camera 'front'") && e.contains("'retian'"),
            "{e}"
        );
        let e = cameras("[[camera]]\nname = \"front\"\nsource = \"a.mp4\"\nretain = \"soon\"\n")
            .unwrap_err();
        assert!(e.contains("camera 'front'") && e.contains("retain"), "{e}");
        let e = cameras("[[camera]]\nname = \"f\"\nsource = \"a.mp4\"\ndecode = \"opencv\"\n")
            .unwrap_err();
        assert!(
            e.contains("camera 'f'") && e.contains("--decode opencv"),
            "{e}"
        );
        let e = cameras("[[camera]]\nsource = \"a.mp4\"\n").unwrap_err();
        assert!(e.contains("camera #1") && e.contains("no name"), "{e}");
        let e = cameras("[[camera]]\nname = \"x\"\nsource = \"a.mp4\"\n[[camera]]\nname = \"y\"\n")
            .unwrap_err();
        assert!(e.contains("camera 'y'") && e.contains("no source"), "{e}");
        let e = cameras("[[camera]\nname=").unwrap_err();
        assert!(e.starts_with("camera '':") && !e.contains('\n'), "{e}");
    }
}
