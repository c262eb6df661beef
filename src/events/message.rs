//! What goes to the destinations of events (`out`, `webhook`, `mqtt`): an event, or a
//! zone's count, and how many a destination's queue holds.

/// Events a destination's queue holds.
pub const QUEUE: usize = 10_000;

/// What goes out: an event (its input's name for MQTT's topic), or a zone's count.
#[derive(Clone, Debug)]
pub enum Message {
    /// An event, as JSON, and its input's name.
    Event(String, serde_json::Value),
    /// Input `.0`'s zone `.1` holds `.2` objects now.
    Count(String, String, u64),
}

impl Message {
    /// The event it carries (a count is MQTT's alone).
    pub fn event(self) -> Option<serde_json::Value> {
        match self {
            Message::Event(_, json) => Some(json),
            Message::Count(..) => None,
        }
    }
}
