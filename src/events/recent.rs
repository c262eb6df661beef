//! The latest events, kept in memory for the browser view (`/api/events`): each as it went
//! out, newest last, at most `KEPT`; an event's snapshot and clip are the files the run
//! wrote for it (`--clip`), found by the event's id.
//!
//! Invariants: only the files the run named in its own events are ever handed out (a
//! request names an id, never a path); a clip is handed out only once it is written under
//! its own name (a clip still being written is not there yet).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Mutex;

/// How many events are kept.
pub const KEPT: usize = 200;

/// What of an event the view hands out besides its JSON.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum File {
    /// The JPEG of its frame with its box.
    Snapshot,
    /// The clip it is in.
    Clip,
}

impl File {
    fn key(self) -> &'static str {
        match self {
            File::Snapshot => "snapshot",
            File::Clip => "clip",
        }
    }
}

/// The latest events (module doc).
#[derive(Debug, Default)]
pub struct Recent(Mutex<VecDeque<serde_json::Value>>);

impl Recent {
    /// Keeps `event`, forgetting the oldest past `KEPT`.
    pub fn push(&self, event: &serde_json::Value) {
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.push_back(event.clone());
        while kept.len() > KEPT {
            kept.pop_front();
        }
    }

    /// The newest `n` events, newest first, each with `snapshot_url` and `clip_url` (under
    /// `base`) where its file is there.
    pub fn newest(&self, n: usize, base: &str) -> Vec<serde_json::Value> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        kept.iter()
            .rev()
            .take(n)
            .map(|e| {
                let mut e = e.clone();
                let id = e["id"].as_str().unwrap_or_default().to_string();
                for what in [File::Snapshot, File::Clip] {
                    if file_of(&e, what).is_some() {
                        let url = match what {
                            File::Snapshot => format!("{base}/{id}/snapshot.jpg"),
                            File::Clip => format!("{base}/{id}/clip"),
                        };
                        e[format!("{}_url", what.key())] = url.into();
                    }
                }
                e
            })
            .collect()
    }

    /// Event `id`'s `what`, where it is kept and its file is there.
    pub fn file(&self, id: &str, what: File) -> Option<PathBuf> {
        let kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let e = kept.iter().rev().find(|e| e["id"].as_str() == Some(id))?;
        file_of(e, what)
    }
}

/// `event`'s `what`, where it names one and the file is there.
fn file_of(event: &serde_json::Value, what: File) -> Option<PathBuf> {
    let path = PathBuf::from(event[what.key()].as_str()?);
    path.is_file().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_and_hands_out_only_files_there() {
        let dir = std::env::temp_dir().join(format!("fp-recent-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let shot = dir.join("a.jpg");
        std::fs::write(&shot, b"jpeg").unwrap();
        let r = Recent::default();
        for k in 0..KEPT + 5 {
            let mut e = serde_json::json!({"id": format!("e{k}"), "type": "cross"});
            if k == KEPT + 4 {
                e["snapshot"] = shot.to_string_lossy().into_owned().into();
                e["clip"] = dir
                    .join("not-yet.mp4")
                    .to_string_lossy()
                    .into_owned()
                    .into();
            }
            r.push(&e);
        }
        let newest = r.newest(3, "/api/events");
        assert_eq!(newest[0]["id"], format!("e{}", KEPT + 4));
        assert_eq!(
            newest[0]["snapshot_url"],
            format!("/api/events/e{}/snapshot.jpg", KEPT + 4)
        );
        assert!(newest[0].get("clip_url").is_none(), "{newest:?}");
        assert_eq!(r.newest(1000, "").len(), KEPT);
        assert!(r.file("e0", File::Snapshot).is_none(), "forgotten");
        assert_eq!(
            r.file(&format!("e{}", KEPT + 4), File::Snapshot),
            Some(shot)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
