//! Cameras added through the API, kept: a state file beside the inputs or camera file
//! (`FILE.api.json`) lists each with its source and its own settings, so that they stay in
//! the wall across edits of the file and restarts of the process. The file wins: a camera
//! the file comes to name takes the place of the API's camera of that name, which is
//! forgotten (and said).
//!
//! Invariants: the state file is written whole (a temporary file renamed over it) and
//! readable by its owner alone (sources may hold passwords); a state file that does not read
//! is said once and left as it is (no camera of it restored, nothing written over it until
//! the API changes a camera); without an inputs file nothing is kept.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// One camera added through the API: its name, source and own settings as the API took
/// them (a camera file's keys, as text).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Camera {
    pub name: String,
    pub source: String,
    #[serde(default)]
    pub settings: Vec<(String, String)>,
}

/// The state file's content.
#[derive(Debug, Default, serde::Serialize, serde::Deserialize)]
struct State {
    cameras: Vec<Camera>,
}

/// The cameras added through the API, and where they are kept (module doc).
#[derive(Debug, Default)]
pub struct Kept {
    path: Option<PathBuf>,
    cameras: Mutex<Vec<Camera>>,
}

impl Kept {
    /// The cameras kept beside inputs file `file` (none where the run has no file, or the
    /// state file is not there).
    pub fn beside(file: Option<&str>) -> Self {
        let Some(file) = file else {
            return Self::default();
        };
        let path = PathBuf::from(format!("{file}.api.json"));
        let cameras = match std::fs::read(&path) {
            Ok(bytes) => match serde_json::from_slice::<State>(&bytes) {
                Ok(state) => state.cameras,
                Err(e) => {
                    crate::warn!(
                        "the API's cameras in '{}' can't be read ({e}); none is restored",
                        path.display()
                    );
                    Vec::new()
                }
            },
            Err(_) => Vec::new(),
        };
        Self {
            path: Some(path),
            cameras: Mutex::new(cameras),
        }
    }

    fn cameras(&self) -> std::sync::MutexGuard<'_, Vec<Camera>> {
        self.cameras.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The cameras kept now.
    pub fn all(&self) -> Vec<Camera> {
        self.cameras().clone()
    }

    /// Keeps `camera` (in place of one of its name).
    pub fn add(&self, camera: Camera) {
        let mut all = self.cameras();
        all.retain(|c| c.name != camera.name);
        all.push(camera);
        self.save(&all);
    }

    /// Forgets camera `name`; whether it was kept.
    pub fn remove(&self, name: &str) -> bool {
        let mut all = self.cameras();
        let before = all.len();
        all.retain(|c| c.name != name);
        let was = all.len() != before;
        if was {
            self.save(&all);
        }
        was
    }

    /// Writes `cameras` to the state file, whole, for its owner alone; a failure is said
    /// (the cameras then don't outlive the run).
    fn save(&self, cameras: &[Camera]) {
        let Some(path) = &self.path else { return };
        let state = State {
            cameras: cameras.to_vec(),
        };
        if let Err(e) = write_whole(path, &serde_json::to_vec_pretty(&state).unwrap_or_default()) {
            crate::warn!(
                "the API's cameras can't be kept in '{}' ({e}): they won't outlive this run",
                path.display()
            );
        }
    }
}

/// `bytes` written to `path` through a temporary file beside it, renamed over it (mode 0600).
fn write_whole(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = file
        .write_all(bytes)
        .and_then(|()| file.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cameras_are_kept_whole_for_the_owner_and_read_back() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("fp-kept-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("wall.toml").display().to_string();
        let kept = Kept::beside(Some(&file));
        assert!(kept.all().is_empty());
        let dock = Camera {
            name: "dock".into(),
            source: "rtsp://u:p@h/s".into(),
            settings: vec![("record".into(), "off".into())],
        };
        kept.add(dock.clone());
        let state = dir.join("wall.toml.api.json");
        assert_eq!(
            std::fs::metadata(&state).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(Kept::beside(Some(&file)).all(), [dock]);
        assert!(kept.remove("dock") && !kept.remove("dock"));
        assert!(Kept::beside(Some(&file)).all().is_empty());
        std::fs::write(&state, b"{not json").unwrap();
        assert!(Kept::beside(Some(&file)).all().is_empty());
        assert!(Kept::beside(None).all().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
