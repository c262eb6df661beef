//! Home Assistant's MQTT discovery (`mqtt://…?discovery=homeassistant`): each watched camera
//! described as a device under the discovery prefix, so that Home Assistant shows it
//! without a line of its configuration, as Frigate's integration does: each zone an
//! occupancy `binary_sensor` and a count `sensor` (both reading the zone's retained count),
//! each kind of event a `device_automation` trigger (per zone or line: `enter`, `leave`,
//! `stay`, `cross`; per camera: `motion-start`, `motion-end`, `camera-down`, `camera-up`,
//! `recording-failed`) matched on the event's `type` and place, and a `camera` showing the
//! retained JPEG of its latest event.
//!
//! Invariants: every description is retained JSON on
//! `DISCOVERY/COMPONENT/framepipe_PREFIX_CAMERA/OBJECT/config`, whose ids are made of
//! `[A-Za-z0-9_-]` alone; a camera is described once for what it watches (again only when
//! that changes); entities are available while `PREFIX/available` says `online`; every
//! `unique_id` is the topic's node and object, so two walls on one broker (two prefixes)
//! never share one.

use std::collections::BTreeMap;

use super::message::{topic_part, Watched};

/// A publication as the MQTT thread makes it: topic, payload, retained, no event.
type Made = (String, Vec<u8>, bool, Option<serde_json::Value>);

/// The kinds of event every camera may make, whatever it watches.
const CAMERA_EVENTS: [&str; 5] = [
    "motion-start",
    "motion-end",
    "camera-down",
    "camera-up",
    "recording-failed",
];

/// The template a trigger reads an event with: its type and its place (`enter:bay`).
const EVENT_TEMPLATE: &str =
    "{{ value_json.type }}:{{ value_json.zone | default(value_json.line | default('')) }}";

/// The discovery prefix, the wall's topics' prefix, and what each camera was described as.
pub(super) struct Discovery {
    root: String,
    prefix: String,
    described: BTreeMap<String, Watched>,
    /// Whether snapshots are made (a camera entity shows them).
    snapshots: bool,
}

impl Discovery {
    /// Descriptions under `root` (Home Assistant's discovery prefix) of the topics under
    /// `prefix`.
    /// `snapshots`: whether each camera's latest event's JPEG is published.
    pub(super) fn new(root: &str, prefix: &str, snapshots: bool) -> Self {
        Self {
            root: root.to_string(),
            prefix: prefix.to_string(),
            described: BTreeMap::new(),
            snapshots,
        }
    }

    /// Camera `input`'s descriptions, as it watches what `watched` says (none where it was
    /// described so already).
    pub(super) fn described(&mut self, input: &str, watched: &Watched) -> Vec<Made> {
        if self.described.get(input) == Some(watched) {
            return Vec::new();
        }
        self.described.insert(input.to_string(), watched.clone());
        let camera = Camera::new(self, input);
        let mut made = Vec::new();
        for zone in &watched.zones {
            made.push(camera.occupancy(zone));
            made.push(camera.count(zone));
        }
        let kinds = watched
            .zones
            .iter()
            .flat_map(|z| {
                let stay = watched.stay.then_some("stay");
                ["enter", "leave"]
                    .into_iter()
                    .chain(stay)
                    .map(move |k| (k, z.as_str()))
            })
            .chain(watched.lines.iter().map(|l| ("cross", l.as_str())))
            .chain(CAMERA_EVENTS.map(|k| (k, "")));
        made.extend(kinds.map(|(kind, place)| camera.trigger(kind, place)));
        if self.snapshots {
            made.push(camera.snapshot());
        }
        made
    }
}

/// One camera's device and topics, as its descriptions name them.
struct Camera<'a> {
    root: &'a str,
    /// The wall's prefix and the camera's name, as one topic level.
    topics: String,
    /// The node id: `framepipe_PREFIX_CAMERA` in `[A-Za-z0-9_-]`.
    node: String,
    device: serde_json::Value,
    available: String,
}

impl<'a> Camera<'a> {
    fn new(d: &'a Discovery, input: &str) -> Self {
        let node = id_part(&format!("framepipe_{}_{input}", d.prefix));
        let device = serde_json::json!({
            "identifiers": [node],
            "name": input,
            "manufacturer": "framepipe",
            "model": "camera",
            "sw_version": env!("CARGO_PKG_VERSION"),
        });
        Self {
            root: &d.root,
            topics: format!("{}/{}", d.prefix, topic_part(input)),
            node,
            device,
            available: format!("{}/available", d.prefix),
        }
    }

    /// The description of `component` `object`, with the device, origin and availability.
    fn config(&self, component: &str, object: &str, mut body: serde_json::Value) -> Made {
        let object = id_part(object);
        body["unique_id"] = format!("{}_{object}", self.node).into();
        body["device"] = self.device.clone();
        body["origin"] = serde_json::json!({
            "name": "framepipe",
            "sw_version": env!("CARGO_PKG_VERSION"),
        });
        if component != "device_automation" {
            body["availability_topic"] = self.available.clone().into();
        }
        let topic = format!("{}/{component}/{}/{object}/config", self.root, self.node);
        (topic, body.to_string().into_bytes(), true, None)
    }

    fn zone_topic(&self, zone: &str) -> String {
        format!("{}/zones/{}", self.topics, topic_part(zone))
    }

    /// Zone `zone` occupied while its count is above 0.
    fn occupancy(&self, zone: &str) -> Made {
        let body = serde_json::json!({
            "name": format!("{zone} occupancy"),
            "state_topic": self.zone_topic(zone),
            "value_template": "{{ 'ON' if (value | int(0)) > 0 else 'OFF' }}",
            "device_class": "occupancy",
        });
        self.config("binary_sensor", &format!("{zone}_occupancy"), body)
    }

    /// How many objects zone `zone` holds.
    fn count(&self, zone: &str) -> Made {
        let body = serde_json::json!({
            "name": format!("{zone} count"),
            "state_topic": self.zone_topic(zone),
            "state_class": "measurement",
            "icon": "mdi:counter",
        });
        self.config("sensor", &format!("{zone}_count"), body)
    }

    /// A device trigger on each event of `kind` at `place` (a zone, a line; "" for the
    /// camera's own).
    fn trigger(&self, kind: &str, place: &str) -> Made {
        let body = serde_json::json!({
            "automation_type": "trigger",
            "topic": format!("{}/events", self.topics),
            "type": kind,
            "subtype": if place.is_empty() { "camera" } else { place },
            "value_template": EVENT_TEMPLATE,
            "payload": format!("{kind}:{place}"),
        });
        let object = match place {
            "" => kind.to_string(),
            p => format!("{kind}_{p}"),
        };
        self.config("device_automation", &object, body)
    }

    /// The camera showing the JPEG of its latest event (`PREFIX/CAMERA/snapshot`).
    fn snapshot(&self) -> Made {
        let body = serde_json::json!({
            "name": "snapshot",
            "topic": format!("{}/snapshot", self.topics),
        });
        self.config("camera", "snapshot", body)
    }
}

/// `text` as a discovery id: what is not an ASCII letter, digit, '_' or '-' written '_'.
fn id_part(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => c,
            _ => '_',
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn described(watched: &Watched) -> BTreeMap<String, serde_json::Value> {
        let mut d = Discovery::new("homeassistant", "site/a", true);
        d.described("gate 1", watched)
            .into_iter()
            .map(|(topic, payload, retain, event)| {
                assert!(retain && event.is_none());
                (topic, serde_json::from_slice(&payload).unwrap())
            })
            .collect()
    }

    #[test]
    fn a_camera_is_a_device_of_sensors_triggers_and_a_snapshot() {
        let watched = Watched {
            zones: vec!["bay".into()],
            lines: vec!["door/1".into()],
            stay: true,
        };
        let all = described(&watched);
        let node = "homeassistant/binary_sensor/framepipe_site_a_gate_1";
        let occupancy = &all[&format!("{node}/bay_occupancy/config")];
        assert_eq!(occupancy["state_topic"], "site/a/gate_1/zones/bay");
        assert_eq!(occupancy["device_class"], "occupancy");
        assert_eq!(occupancy["availability_topic"], "site/a/available");
        assert_eq!(
            occupancy["unique_id"],
            "framepipe_site_a_gate_1_bay_occupancy"
        );
        assert_eq!(occupancy["device"]["name"], "gate 1");
        let cross =
            &all["homeassistant/device_automation/framepipe_site_a_gate_1/cross_door_1/config"];
        assert_eq!(cross["topic"], "site/a/gate_1/events");
        assert_eq!(cross["payload"], "cross:door/1");
        let kinds: Vec<&str> = all
            .values()
            .filter_map(|v| v["automation_type"].as_str().and(v["type"].as_str()))
            .collect();
        for k in [
            "enter",
            "leave",
            "stay",
            "cross",
            "camera-down",
            "motion-start",
        ] {
            assert!(kinds.contains(&k), "{k}: {kinds:?}");
        }
        for topic in all.keys() {
            let parts: Vec<&str> = topic.split('/').collect();
            assert_eq!(parts.len(), 5, "{topic}");
            assert!(
                parts[2..4].iter().all(|p| p
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-".contains(c))),
                "{topic}"
            );
        }
        // Once for what it watches; again when that changes.
        let mut d = Discovery::new("homeassistant", "site/a", true);
        assert!(!d.described("gate 1", &watched).is_empty());
        assert!(d.described("gate 1", &watched).is_empty());
        assert!(!d.described("gate 1", &Watched::default()).is_empty());
    }
}
