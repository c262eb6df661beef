//! A camera's own events settings, as the camera file (or the API) gives them beside its
//! source: its zones and lines (`zones = { door = [0.1,0.5, 0.4,0.5, 0.4,0.9] }`, in pixels
//! or relative), the labels that make its events (`event_labels`), its stay (`stay`), and
//! filters of its objects by label (`filters = { person = { min_score = 0.6, min_area =
//! 0.01 } }`, Frigate's `objects.filters`: an area up to 1 is a share of the picture). Kept
//! as text settings in the input's `PerInput` (`zone=NAME:X,Y,…`, `line=…`,
//! `event-labels=a,b`, `stay=S`, `filter=LABEL:min_score=…,min_area=…,max_area=…`), made
//! into `Own` where the detector needs them.
//!
//! Invariants: every setting is checked whole when it is given (a mistake names the key and
//! is one line); a camera's shapes are its own (no `@INPUT`); a filter drops a box before
//! it is tracked, written or drawn, so a dropped box makes no event.

use std::collections::BTreeMap;

use super::zones::Shape;
use crate::detect::Detection;
use crate::frame::FrameSize;

/// Why a camera's events setting can't be taken (one line, naming the key).
#[derive(Debug, thiserror::Error)]
pub enum SettingError {
    /// A zone or line that is not one.
    #[error(transparent)]
    Shape(#[from] super::zones::ZoneError),
    /// A camera's shape aimed at an input (`@INPUT`).
    #[error("{key}={value}: a camera's own {key} is on it (no @INPUT)")]
    Aimed {
        /// `zone` or `line`.
        key: String,
        /// As given.
        value: String,
    },
    /// A stay that is not seconds above 0.
    #[error("stay={0}: seconds above 0")]
    Stay(String),
    /// A filter that is not `LABEL:min_score=…,min_area=…,max_area=…`.
    #[error("filter={value}: {why} (LABEL:min_score=S,min_area=A,max_area=A)")]
    Filter {
        /// As given.
        value: String,
        /// What is wrong.
        why: String,
    },
    /// A key that is none of `KEYS`.
    #[error("'{0}' is not a camera's events setting")]
    Key(String),
    /// A camera file's (or the API's) key whose value is not of its form.
    #[error("{key}: {why}")]
    Form {
        /// The key (`zones`, `filters`, …).
        key: String,
        /// Its form.
        why: String,
    },
}

/// The keys of a camera's own events settings, as `PerInput` keeps them.
pub const KEYS: &[&str] = &["zone", "line", "event-labels", "stay", "filter"];

/// One label's filter (Frigate's `objects.filters`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Filter {
    /// The least score kept.
    pub min_score: Option<f32>,
    /// The least box area kept: pixels, or a share of the picture up to 1.
    pub min_area: Option<f32>,
    /// The largest box area kept, as `min_area`.
    pub max_area: Option<f32>,
}

/// A camera's own events settings (module doc).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Own {
    /// Its zones and lines.
    pub shapes: Vec<Shape>,
    /// The labels that make its events, where it names its own.
    pub labels: Option<Vec<String>>,
    /// Its stay, seconds, where its own.
    pub stay: Option<f64>,
    /// Its filters, by label.
    pub filters: BTreeMap<String, Filter>,
}

impl Own {
    /// The settings `pairs` (`KEYS`' keys, as text) make.
    pub fn of(pairs: &[(String, String)]) -> Result<Self, SettingError> {
        let mut own = Self::default();
        for (key, value) in pairs {
            own.set(key, value)?;
        }
        Ok(own)
    }

    /// Sets `key` (one of `KEYS`) to `value`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), SettingError> {
        match key {
            "zone" | "line" => {
                if value.contains('@') {
                    return Err(SettingError::Aimed {
                        key: key.into(),
                        value: value.into(),
                    });
                }
                let shape = Shape::parse(value, key == "line")?;
                self.shapes.retain(|s| s.name != shape.name);
                self.shapes.push(shape);
            }
            "event-labels" => {
                let labels: Vec<String> = value
                    .split(',')
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect();
                self.labels = Some(labels);
            }
            "stay" => {
                let stay = value
                    .parse::<f64>()
                    .ok()
                    .filter(|s| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| SettingError::Stay(value.into()))?;
                self.stay = Some(stay);
            }
            "filter" => {
                let (label, filter) = filter_of(value)?;
                self.filters.insert(label, filter);
            }
            other => return Err(SettingError::Key(other.into())),
        }
        Ok(())
    }

    /// Whether box `d` on a `size` picture passes its label's filter.
    pub fn keeps(&self, d: &Detection, size: FrameSize) -> bool {
        let Some(f) = self.filters.get(&d.label) else {
            return true;
        };
        let picture = (size.width * size.height) as f32;
        let area = (d.rect[2] - d.rect[0]).max(0.0) * (d.rect[3] - d.rect[1]).max(0.0);
        let in_pixels = |a: f32| if a <= 1.0 { a * picture } else { a };
        f.min_score.is_none_or(|m| d.score >= m)
            && f.min_area.is_none_or(|m| area >= in_pixels(m))
            && f.max_area.is_none_or(|m| area <= in_pixels(m))
    }
}

/// `LABEL:min_score=S,min_area=A,max_area=A`.
fn filter_of(value: &str) -> Result<(String, Filter), SettingError> {
    let bad = |why: &str| SettingError::Filter {
        value: value.into(),
        why: why.into(),
    };
    let (label, rest) = value
        .split_once(':')
        .ok_or_else(|| bad("no ':' after the label"))?;
    if label.trim().is_empty() {
        return Err(bad("no label"));
    }
    let mut f = Filter::default();
    for part in rest.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, number) = part.split_once('=').ok_or_else(|| bad("KEY=NUMBER"))?;
        let number = number
            .trim()
            .parse::<f32>()
            .ok()
            .filter(|n| n.is_finite() && *n >= 0.0)
            .ok_or_else(|| bad("numbers of 0 or more"))?;
        let slot = match key.trim() {
            "min_score" => &mut f.min_score,
            "min_area" => &mut f.min_area,
            "max_area" => &mut f.max_area,
            other => {
                let near =
                    crate::spelling::did_you_mean(other, &["min_score", "min_area", "max_area"]);
                return Err(bad(&format!("no key '{other}'{near}")));
            }
        };
        *slot = Some(number);
    }
    Ok((label.trim().to_string(), f))
}

/// A camera file's (or the API's) events keys in their structured form as settings: `zones`
/// and `lines` (a table of names to points: a list of numbers, or their text), `event_labels`
/// (a list, or text), `stay` (seconds) and `filters` (a table of labels to their keys). None
/// where `key` is none of these.
pub fn settings_of(
    key: &str,
    value: &serde_json::Value,
) -> Option<Result<Vec<(String, String)>, SettingError>> {
    use serde_json::Value;
    let one = match key {
        "zones" => "zone",
        "lines" => "line",
        "event_labels" | "event-labels" => "event-labels",
        "stay" => "stay",
        "filters" => "filter",
        _ => return None,
    };
    let text = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Array(list) => list
            .iter()
            .map(|x| match x {
                Value::Number(n) => Some(n.to_string()),
                Value::String(s) => Some(s.clone()),
                _ => None,
            })
            .collect::<Option<Vec<_>>>()
            .map(|all| all.join(",")),
        _ => None,
    };
    let form = |why: String| SettingError::Form {
        key: key.into(),
        why,
    };
    let wrong = |what: &str| Err(form(what.into()));
    let pairs = match (one, value) {
        ("zone" | "line", Value::Object(shapes)) => shapes
            .iter()
            .map(|(name, points)| {
                let points =
                    text(points).ok_or_else(|| form(format!("{name}: a list of numbers")))?;
                Ok((one.to_string(), format!("{name}:{points}")))
            })
            .collect::<Result<Vec<_>, SettingError>>(),
        ("zone" | "line", _) => {
            return Some(wrong(
                "a table of names to points: { door = [0.1,0.5, 0.4,0.5, 0.4,0.9] }",
            ))
        }
        ("filter", Value::Object(labels)) => labels
            .iter()
            .map(|(label, keys)| {
                let Value::Object(keys) = keys else {
                    return Err(form(format!(
                        "{label}: a table (min_score, min_area, max_area)"
                    )));
                };
                let keys: Vec<String> = keys
                    .iter()
                    .map(|(k, v)| format!("{k}={}", text(v).unwrap_or_default()))
                    .collect();
                Ok((one.to_string(), format!("{label}:{}", keys.join(","))))
            })
            .collect(),
        ("filter", _) => return Some(wrong("a table of labels: { person = { min_score = 0.6 } }")),
        (_, v) => match text(v) {
            Some(t) => Ok(vec![(one.to_string(), t)]),
            None => return Some(wrong("a list, text or a number")),
        },
    };
    Some(pairs.and_then(|pairs| {
        let mut check = Own::default();
        for (k, v) in &pairs {
            check.set(k, v).map_err(|e| form(e.to_string()))?;
        }
        Ok(pairs)
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detection(label: &str, score: f32, rect: [f32; 4]) -> Detection {
        Detection {
            label: label.into(),
            score,
            rect,
            track: None,
        }
    }

    #[test]
    fn a_cameras_keys_become_its_settings() {
        let zones = serde_json::json!({ "door": [0.1, 0.5, 0.4, 0.5, 0.4, 0.9] });
        let pairs = settings_of("zones", &zones).unwrap().unwrap();
        assert_eq!(
            pairs,
            [(
                "zone".to_string(),
                "door:0.1,0.5,0.4,0.5,0.4,0.9".to_string()
            )]
        );
        let filters = serde_json::json!({ "person": { "min_score": 0.6, "min_area": 0.01 } });
        let own = Own::of(&settings_of("filters", &filters).unwrap().unwrap()).unwrap();
        let size = FrameSize::new(100, 100);
        assert!(own.keeps(&detection("person", 0.7, [0.0, 0.0, 10.0, 10.0]), size));
        assert!(!own.keeps(&detection("person", 0.5, [0.0, 0.0, 10.0, 10.0]), size));
        assert!(!own.keeps(&detection("person", 0.9, [0.0, 0.0, 5.0, 1.0]), size));
        assert!(own.keeps(&detection("car", 0.1, [0.0, 0.0, 1.0, 1.0]), size));
        assert!(settings_of("zones", &serde_json::json!("x"))
            .unwrap()
            .is_err());
        let bad = settings_of(
            "filters",
            &serde_json::json!({ "person": { "min_scor": 1 } }),
        );
        let said = bad.unwrap().unwrap_err().to_string();
        assert!(said.contains("did you mean 'min_score'"), "{said}");
        assert!(Own::default().set("zone", "a:0,0,1,0,1,1@cam").is_err());
        assert!(settings_of("record", &serde_json::json!(true)).is_none());
    }
}
