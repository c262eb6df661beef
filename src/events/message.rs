//! What goes to the destinations of events (`out`, `webhook`, `mqtt`): an event, a zone's
//! count, a camera's first appearance and an event's picture (the last two MQTT's alone,
//! for Home Assistant's discovery), how many a destination's queue holds, and a name as one
//! level of an MQTT topic.

use std::sync::Arc;

/// Events a destination's queue holds.
pub const QUEUE: usize = 10_000;

/// What goes out: an event (its input's name for MQTT's topic), or a zone's count.
#[derive(Clone, Debug)]
pub enum Message {
    /// An event, as JSON, and its input's name.
    Event(String, serde_json::Value),
    /// Input `.0`'s zone `.1` holds `.2` objects now.
    Count(String, String, u64),
    /// Input `.0`'s camera began to be watched, with what it watches.
    Camera(String, Arc<Watched>),
    /// Input `.0`'s latest event's frame, with its box.
    Picture(String, Arc<super::Picture>),
}

/// What a camera watches: the names of its zones and lines, and the kinds of event it
/// makes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Watched {
    /// Its zones' names.
    pub zones: Vec<String>,
    /// Its lines' names.
    pub lines: Vec<String>,
    /// Whether it says how long an object stayed in a zone (`stay`).
    pub stay: bool,
}

impl Message {
    /// The event it carries (the others are MQTT's alone).
    pub fn event(self) -> Option<serde_json::Value> {
        match self {
            Message::Event(_, json) => Some(json),
            Message::Count(..) | Message::Camera(..) | Message::Picture(..) => None,
        }
    }
}

/// `name` as one level of a topic: '/', '+', '#' and spaces written '_'.
pub(super) fn topic_part(name: &str) -> String {
    name.chars()
        .map(|c| {
            if matches!(c, '/' | '+' | '#' | ' ') || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect()
}
