//! One input of a list (an inputs file's line, a camera file's table, an `--input` flag)
//! and its own settings over the command line's (`PerInput`), shared by the readers of both
//! kinds of file (`shard`, `cameras`).

/// One input of the list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Its name: its own, or its source text without the secrets in it
    /// (`secret::without`: `Entry::unnamed`).
    pub name: String,
    /// What `--input` would take.
    pub source: String,
    /// Its place in the whole list (`{n}`).
    pub n: usize,
    /// Its own settings (`NAME [KEY=VALUE, …] = SOURCE`).
    pub own: PerInput,
}

/// An input's own settings in the inputs file (or the camera file), over the command
/// line's for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PerInput {
    /// `detect=on|off`: whether `--detect` runs on this input (on where not said).
    pub detect: Option<bool>,
    /// `detect-fps=N`: its detections a second, in thousandths (exact, so that a change of
    /// the file is seen).
    pub detect_millis: Option<u64>,
    /// `record=on|off`: whether `--record` records it (on where not said).
    pub record: Option<bool>,
    /// `segment=DURATION`: its own `--segment`, ms.
    pub segment_millis: Option<u64>,
    /// `retain=AGE`: its own `--retain`, seconds.
    pub retain_secs: Option<u64>,
    /// `output=NAME` (each one): outputs of its own frames, besides `--output`'s.
    pub outputs: Vec<String>,
    /// `decode=cpu|gpu|auto`: its own `--decode` (a wall's cameras shared between NVDEC
    /// and the CPU's cores, as Frigate's per-camera `hwaccel_args`).
    pub decode: Option<crate::source::open::Decode>,
    /// Its own events settings, as given and checked (`zone=`, `line=`, `event-labels=`,
    /// `stay=`, `filter=`: `events::camera`), in order.
    pub events: Vec<(String, String)>,
}

impl PerInput {
    /// `detect-fps`, a second.
    pub fn detect_fps(&self) -> Option<f64> {
        self.detect_millis.map(|m| m as f64 / 1000.0)
    }

    /// `--segment` as this input has it, where its own.
    pub fn segment(&self) -> Option<std::time::Duration> {
        self.segment_millis.map(std::time::Duration::from_millis)
    }

    /// `--retain` as this input has it, where its own.
    pub fn retain(&self) -> Option<std::time::Duration> {
        self.retain_secs.map(std::time::Duration::from_secs)
    }

    /// Its own events settings (`events::camera::Own`), checked when they were set.
    pub fn events(&self) -> crate::events::camera::Own {
        crate::events::camera::Own::of(&self.events).unwrap_or_default()
    }

    /// The settings `text` (`KEY=VALUE, …`) gives.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut own = Self::default();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (key, value) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not KEY=VALUE"))?;
            own.set(key.trim(), value.trim())?;
        }
        Ok(own)
    }

    /// Sets `key` to `value` (`detect=on|off`, `detect-fps=N`, `record=on|off`,
    /// `segment=DURATION`, `retain=AGE`, `output=NAME`, `decode=cpu|gpu|auto`).
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        let on_off = |v: &str| match v {
            "on" | "true" => Ok(true),
            "off" | "false" => Ok(false),
            _ => Err(format!(
                "'{key}={v}' is not an input's setting ({key}=on|off)"
            )),
        };
        match key {
            "detect" => self.detect = Some(on_off(value)?),
            "record" => self.record = Some(on_off(value)?),
            "detect-fps" => {
                let fps = value
                    .parse::<f64>()
                    .ok()
                    .filter(|f| f.is_finite() && *f > 0.0 && *f <= 1000.0)
                    .ok_or_else(|| format!("detect-fps '{value}' is not a rate from 0 to 1000"))?;
                self.detect_millis = Some((fps * 1000.0).round() as u64);
            }
            "segment" => {
                let d = crate::cli::parse_duration(value).map_err(|e| e.to_string())?;
                self.segment_millis = Some(d.as_millis() as u64);
            }
            "retain" => {
                let d = crate::cli::parse_age(value).map_err(|e| e.to_string())?;
                self.retain_secs = Some(d.as_secs().max(1));
            }
            "output" if !value.trim().is_empty() => self.outputs.push(value.trim().to_string()),
            "decode" => self.decode = Some(decode_of(value)?),
            k if crate::events::camera::KEYS.contains(&k) => {
                crate::events::camera::Own::default()
                    .set(k, value)
                    .map_err(|e| e.to_string())?;
                self.events.push((k.to_string(), value.to_string()));
            }
            k => {
                return Err(format!(
                    "'{k}={value}' is not an input's setting (detect=on|off, detect-fps=N, record=on|off, segment=DURATION, retain=AGE, output=NAME, decode=cpu|gpu|auto)"
                ))
            }
        }
        Ok(())
    }
}

/// An input's own `decode=`: who decodes it. OpenCV's capture is the whole run's choice
/// (`--decode opencv`: nothing of it is recorded), not a camera's.
fn decode_of(value: &str) -> Result<crate::source::open::Decode, String> {
    use crate::source::open::Decode;
    match value {
        "cpu" => Ok(Decode::Cpu),
        "gpu" => Ok(Decode::Gpu),
        "auto" => Ok(Decode::Auto),
        "opencv" => Err(
            "decode=opencv: OpenCV's capture is the whole run's (--decode opencv), not one input's"
                .into(),
        ),
        v => Err(format!("decode '{v}' is not cpu, gpu or auto")),
    }
}

impl Entry {
    /// An input with no name of its own: named by its source without the secrets in it, so
    /// that no password reaches a topic, a label, the API or the log through its name.
    pub fn unnamed(source: String, n: usize, own: PerInput) -> Self {
        Self {
            name: crate::secret::without(&source),
            source,
            n,
            own,
        }
    }

    /// Whether its name is its own (not made from its source).
    pub fn is_named(&self) -> bool {
        self.name != crate::secret::without(&self.source)
    }

    /// Its name as part of a file name (`{name}`): letters, digits, `.`, `-` and `_` kept,
    /// anything else (`/`, `:`, spaces) written `_`, never starting with a dot.
    pub fn file_name(&self) -> String {
        file_safe(&self.name)
    }
}

/// Whether `name` may name an input: letters, digits, `.`, `-` and `_`, at least one, and
/// not dots alone (`.` and `..` would name a folder at or above the recordings' root where
/// `{name}` is a folder).
pub fn valid_name(name: &str) -> bool {
    let plain = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    !name.is_empty() && name.chars().all(plain) && !name.chars().all(|c| c == '.')
}

/// `name` as part of a file name (`Entry::file_name`).
pub fn file_safe(name: &str) -> String {
    let safe: String = name
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' | '_' => c,
            _ => '_',
        })
        .take(120)
        .collect();
    match safe.strip_prefix('.') {
        Some(rest) => format!("_{rest}"),
        None => safe,
    }
}
