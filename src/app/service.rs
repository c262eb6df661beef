//! The wall's inputs changed while it runs, in place: an input added (through the browser
//! view's `POST /api/inputs`, a line added to the inputs or camera file, a camera that came
//! into this process's shard) joins the running pipeline as a late input does (opened on its
//! capture thread, recorded, shown), and one removed (`DELETE /api/inputs/NAME`, a line
//! gone, a camera gone to another shard) leaves it (its capture ends, its outputs are
//! finished, its recording's open segment is closed); a changed line is the old input
//! leaving and the new one joining. The other inputs are not touched: their threads, rings,
//! outputs, segments and numbering go on.
//!
//! Cameras added through the API are kept beside the inputs file (`kept`) and join again
//! when the process starts again; the file's own cameras and the API's make the wall
//! together, the file winning a name both give.
//!
//! Invariants: names are unique among the inputs running; an input added through the API
//! reads a network stream or the test pattern, never a file or a device of the server; an
//! input joins with no outputs of its own (the mosaic, the browser view, `--record` and the
//! API see it); a removal finishes the input's recording once its capture has ended (at
//! most `FINISH_WITHIN` later), off the caller's thread.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::desc::InputId;
use crate::display::web::api::{Inputs, Refused};
use crate::pipeline::{Arrival, Joiner, Joins};
use crate::plan::shard::{Entry, PerInput};
use crate::plan::RunPlan;
use crate::record::archive::Archive;
use crate::record::Recording;

/// How long a removed input's recording waits for its capture to end before it is finished
/// anyway.
const FINISH_WITHIN: Duration = Duration::from_secs(5);

/// One input of the wall, as the service knows it.
struct Member {
    entry: Entry,
    /// Its place in the pipeline (None: it failed to open at the start).
    id: Option<InputId>,
    recording: Option<Arc<Recording>>,
    /// Asked when it leaves: its opening gives up trying (a camera down).
    gone: crate::stop::Stop,
}

/// The wall's inputs, changed while it runs (module doc).
pub(super) struct Service {
    plan: RunPlan,
    joins: Joins,
    archives: Vec<Arc<Archive>>,
    members: Mutex<Vec<Member>>,
    /// Tells the browser view of an input that joined (its source).
    joined: Option<crate::display::web::Joined>,
    /// The mosaic's grid, where the run composes one, and which inputs it shows (by
    /// `InputId`).
    mosaic: std::sync::OnceLock<Arc<crate::tiles::Regrid>>,
    shown: Mutex<Vec<bool>>,
    /// The detector's own settings of each input that joins, where the run detects.
    detect: std::sync::OnceLock<crate::sink::detecting::JoinedOwn>,
    /// The cameras added through the API, kept beside the inputs file.
    kept: super::kept::Kept,
}

impl Service {
    /// The service of `plan`'s run: its inputs as they started (`ids[k]`: the pipeline's
    /// place of `--input` `k`, None for one that failed; `recordings[k]` its recording),
    /// new ones joining through `joins`.
    pub fn new(
        plan: &RunPlan,
        joins: Joins,
        (ids, recordings): (Vec<Option<InputId>>, Vec<Option<Arc<Recording>>>),
        (archives, kept): (Vec<Arc<Archive>>, super::kept::Kept),
        joined: Option<crate::display::web::Joined>,
    ) -> Self {
        let shown = Mutex::new(ids.iter().flatten().map(|_| true).collect());
        let members = plan
            .inputs()
            .iter()
            .zip(ids.into_iter().zip(recordings))
            .enumerate()
            .map(|(n, (input, (id, recording)))| Member {
                entry: Entry {
                    name: input.label.clone(),
                    source: input.source.clone(),
                    n,
                    own: input.own.clone(),
                },
                id,
                recording,
                gone: crate::stop::Stop::new(),
            })
            .collect();
        Self {
            plan: plan.clone(),
            joins,
            archives,
            members: Mutex::new(members),
            joined,
            mosaic: std::sync::OnceLock::new(),
            shown,
            detect: std::sync::OnceLock::new(),
            kept,
        }
    }

    /// The cameras the API added in an earlier run join this one once it runs (on a thread
    /// of their own, which gives up at the run's stop); one whose name the wall already has
    /// (the file came to name it) is forgotten.
    pub fn restore(service: &Arc<Self>) {
        let cameras = service.kept.all();
        if cameras.is_empty() {
            return;
        }
        let service = service.clone();
        let restoring = std::thread::Builder::new()
            .name("api cameras".into())
            .spawn(move || {
                let stop = crate::stop::Stop::process();
                while service.joins.joiner().is_none() {
                    if stop.sleep_until(Instant::now() + Duration::from_millis(50)) {
                        return;
                    }
                }
                for camera in cameras {
                    let joined = service
                        .entry_of(&camera.name, &camera.source, &camera.settings)
                        .and_then(|entry| service.join(entry));
                    match joined {
                        Ok(()) => crate::info!("input {}: added through the API, kept, joins again", camera.name),
                        Err(Refused::Taken(_)) => {
                            service.kept.remove(&camera.name);
                            crate::info!("input {}: the inputs file names it now; the API's camera is forgotten", camera.name);
                        }
                        Err(e) => crate::warn!("input {} (kept from the API) can't join: {e}", camera.name),
                    }
                }
            });
        if let Err(e) = restoring {
            crate::warn!("the API's kept cameras can't join: {e}");
        }
    }

    /// The detector of the run, told each joining input's own settings.
    pub fn detect_with(&self, own: crate::sink::detecting::JoinedOwn) {
        let _ = self.detect.set(own);
    }

    /// The mosaic the run composes, laid out again as inputs join and leave.
    pub fn lay_out(&self, regrid: Arc<crate::tiles::Regrid>) {
        let _ = self.mosaic.set(regrid);
    }

    /// Input `id` is shown in the mosaic (`show`) or no longer: the grid is made again.
    fn show(&self, id: InputId, show: bool) {
        let mut shown = self.shown.lock().unwrap_or_else(|e| e.into_inner());
        let at = usize::from(id.0);
        if shown.len() <= at {
            shown.resize(at + 1, false);
        }
        shown[at] = show;
        if let Some(regrid) = self.mosaic.get() {
            regrid.set(&shown);
        }
    }

    fn joiner(&self) -> Result<Arc<Joiner>, Refused> {
        self.joins
            .joiner()
            .ok_or_else(|| Refused::Unable("the run is not running yet".into()))
    }

    fn members(&self) -> std::sync::MutexGuard<'_, Vec<Member>> {
        self.members.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds `entry` to the running wall (module doc).
    pub fn join(&self, mut entry: Entry) -> Result<(), Refused> {
        let joiner = self.joiner()?;
        let mut members = self.members();
        if members
            .iter()
            .any(|m| m.entry.name == entry.name && m.id.is_some())
        {
            return Err(Refused::Taken(format!(
                "an input named '{}' is running",
                entry.name
            )));
        }
        entry.n = members
            .iter()
            .map(|m| m.entry.n + 1)
            .max()
            .unwrap_or(0)
            .max(entry.n);
        let input = self
            .plan
            .input_for(&entry)
            .map_err(|e| Refused::Bad(e.to_string()))?;
        let recording = self.recording_of(&input, &entry.name)?;
        let tap = recording.clone().map(|r| r as super::recordings::Tap);
        let gone = crate::stop::Stop::new();
        let answer = super::opening::start_opening(entry.n, &input, &gone)
            .map_err(|e| Refused::Unable(format!("{e:#}")))?;
        let open = super::opening::late_opener(
            answer,
            self.plan.engine().clone(),
            input.clone(),
            entry.n,
            tap,
        );
        let pipeline_input = crate::pipeline::Input {
            source: Arrival::Late {
                name: entry.name.clone(),
                open,
            },
            ring: self.plan.engine().ring_beside_others(),
            recording: recording.as_ref().map(|r| r.live()),
        };
        let id = joiner
            .join(entry.name.clone(), pipeline_input)
            .map_err(|e| Refused::Unable(e.to_string()))?;
        self.tell(id, &entry);
        crate::info!("input {} ({}) joins the run", id.0, entry.name);
        members.push(Member {
            entry,
            id: Some(id),
            recording,
            gone,
        });
        Ok(())
    }

    /// The recording of a joining `input` named `name`, where `--record` asks for one (in
    /// its root's archive, whose index and retention it joins).
    fn recording_of(
        &self,
        input: &crate::plan::InputPlan,
        name: &str,
    ) -> Result<Option<Arc<Recording>>, Refused> {
        let Some(spec) = &input.record else {
            return Ok(None);
        };
        let archive = self.archives.iter().find(|a| a.index().root() == spec.root);
        let archive = archive.cloned().ok_or_else(|| {
            Refused::Bad(format!("--record's folder for '{name}' is not this run's"))
        })?;
        let recording = Recording::start(spec.clone(), format!("input {name}"), archive)
            .map_err(|e| Refused::Unable(format!("{e:#}")))?;
        Ok(Some(recording))
    }

    /// Tells the browser view (its source), the mosaic (a tile) and the detector (its name
    /// and own settings) that `entry` joined as input `id`.
    fn tell(&self, id: InputId, entry: &Entry) {
        if let Some(joined) = &self.joined {
            joined.source(usize::from(id.0), &entry.source);
        }
        self.show(id, true);
        if let Some(detect) = self.detect.get() {
            let own = &entry.own;
            let settings = (
                entry.name.clone(),
                crate::sink::detecting::OwnSettings {
                    on: own.detect != Some(false),
                    fps: own.detect_fps(),
                    events: std::sync::Arc::new(own.events()),
                },
            );
            if let Ok(mut d) = detect.lock() {
                d.insert(usize::from(id.0), settings);
            }
        }
    }

    /// Removes input `name` from the running wall (module doc).
    pub fn leave(&self, name: &str) -> Result<(), Refused> {
        let joiner = self.joiner()?;
        let mut members = self.members();
        let Some(at) = members
            .iter()
            .position(|m| m.entry.name == name && m.id.is_some())
        else {
            return Err(Refused::Missing(format!(
                "no input named '{name}' is running"
            )));
        };
        let member = members.remove(at);
        member.gone.request();
        let Some(id) = member.id else {
            return Ok(());
        };
        joiner.remove(id);
        self.show(id, false);
        crate::info!("input {} ({name}) leaves the run", id.0);
        if let Some(recording) = member.recording {
            let who = name.to_string();
            let finishing = std::thread::Builder::new()
                .name("recording end".into())
                .spawn(move || {
                    let t = Instant::now();
                    while !joiner.has_ended(id) && t.elapsed() < FINISH_WITHIN {
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    let r = recording.finish();
                    crate::info!("recording of {who} finished: {} segment(s)", r.files.len());
                });
            if let Err(e) = finishing {
                crate::warn!("the recording of {name} is finished at the run's end: {e}");
            }
        }
        Ok(())
    }

    /// Makes the running wall's inputs `wanted` (a changed inputs or camera file, a changed
    /// shard share): the inputs gone leave, the new ones join, a changed one is both; the
    /// others are not touched. Each change is said; one that can't be made is said and the
    /// others go on.
    pub fn become_(&self, wanted: &[Entry]) {
        // The API's cameras stay, but where the file now names one of theirs.
        let mut wanted = wanted.to_vec();
        for camera in self.kept.all() {
            if wanted.iter().any(|w| w.name == camera.name) {
                self.kept.remove(&camera.name);
                crate::info!(
                    "input {}: the inputs file names it now; the API's camera is forgotten",
                    camera.name
                );
                continue;
            }
            match self.entry_of(&camera.name, &camera.source, &camera.settings) {
                Ok(entry) => wanted.push(entry),
                Err(e) => crate::warn!("input {} (kept from the API): {e}", camera.name),
            }
        }
        let wanted = wanted.as_slice();
        let running: Vec<Entry> = self
            .members()
            .iter()
            .filter(|m| m.id.is_some())
            .map(|m| m.entry.clone())
            .collect();
        let same =
            |a: &Entry, b: &Entry| a.name == b.name && a.source == b.source && a.own == b.own;
        for gone in running
            .iter()
            .filter(|r| !wanted.iter().any(|w| same(w, r)))
        {
            if let Err(e) = self.leave(&gone.name) {
                crate::warn!("input {}: {e}", gone.name);
            }
        }
        for new in wanted
            .iter()
            .filter(|w| !running.iter().any(|r| same(w, r)))
        {
            if let Err(e) = self.join(new.clone()) {
                crate::warn!("input {} can't join the run: {e}", new.name);
            }
        }
    }
}

impl Service {
    /// The entry of a camera the API names: its name, source and settings checked (module
    /// doc of `source::remote`).
    fn entry_of(
        &self,
        name: &str,
        source: &str,
        settings: &[(String, String)],
    ) -> Result<Entry, Refused> {
        if name.len() > 120 || !crate::plan::entry::valid_name(name) {
            return Err(Refused::Bad(
                "name: 1 to 120 letters, digits, '.', '-' and '_', not dots alone".into(),
            ));
        }
        let source = source.trim();
        if source.len() > 4096 {
            return Err(Refused::Bad("source: at most 4096 bytes".into()));
        }
        let listening = self
            .plan
            .display()
            .serve
            .as_ref()
            .is_some_and(|s| s.listening_sources);
        crate::source::remote::check(source, listening)
            .map_err(|why| Refused::Bad(format!("source: {why}")))?;
        let mut own = PerInput::default();
        for (key, value) in settings {
            let key = if key == "detect_fps" {
                "detect-fps"
            } else {
                key.as_str()
            };
            own.set(key, value)
                .map_err(|why| Refused::Bad(format!("{key}: {why}")))?;
        }
        Ok(Entry {
            name: name.to_string(),
            source: source.to_string(),
            n: 0,
            own,
        })
    }
}

impl Inputs for Service {
    fn add(&self, name: &str, source: &str, settings: &[(String, String)]) -> Result<(), Refused> {
        let entry = self.entry_of(name, source, settings)?;
        let camera = super::kept::Camera {
            name: entry.name.clone(),
            source: entry.source.clone(),
            settings: settings.to_vec(),
        };
        self.join(entry)?;
        self.kept.add(camera);
        Ok(())
    }

    fn remove(&self, name: &str) -> Result<(), Refused> {
        let left = self.leave(name);
        match (left, self.kept.remove(name)) {
            // A kept camera that was not running (it could not join) is forgotten all the
            // same.
            (Err(Refused::Missing(_)), true) => Ok(()),
            (left, _) => left,
        }
    }
}
