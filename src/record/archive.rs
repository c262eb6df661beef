//! The recordings kept within their budget: one `Archive` a recordings' root, holding its
//! index (`index`) and a thread that deletes the oldest closed segments where `--retain`
//! (age), `--retain-size` (bytes in all) or `--retain-free` (the disk's free share) asks,
//! after each segment closes and every `LOOK_EVERY`.
//!
//! Invariants: only segments the index lists are deleted, that is closed files this
//! recorder wrote (never the one being written, never a file put there by other hands);
//! their sidecar goes with them; a file is deleted before its row, so that a crash between
//! leaves a row the next start drops, never a file nobody lists; over a size or free
//! budget, the camera that holds the most is cut first, oldest segment first, so that each
//! camera keeps its share; the index's own file and log count in `--retain-size`, and its
//! log is cut back after each deletion; a camera whose own age (`Keep::age`) is longer keeps its
//! segments that long, within the budgets; each deletion counts in its input's figures
//! (`RecordLive::deleted_*`, `/metrics`) at once, is a line of its own with `-v`, and is
//! said in one line a minute (`Deletions`: how many, how much, whose, why), and at the end.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Result;
use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::index::{Index, Mark, Segment};
use crate::stats::RecordLive;

/// How often retention looks even when no segment closed (an age passes by itself).
const LOOK_EVERY: Duration = Duration::from_secs(5);

/// How often the deletions are said, at most (a 100-camera wall deletes every few seconds).
const SAY_EVERY: Duration = Duration::from_secs(60);

/// The deletions not said yet: how many, their bytes, and how many of each input for each
/// reason.
#[derive(Default)]
struct Deletions {
    segments: u64,
    bytes: u64,
    by: BTreeMap<(String, String), u64>,
}

impl Deletions {
    /// One line of what was deleted since the last (nothing where nothing was), and a fresh
    /// count.
    fn say(&mut self) {
        if self.segments == 0 {
            return;
        }
        let whose: Vec<String> = self
            .by
            .iter()
            .map(|((input, why), n)| format!("{input} {n} ({why})"))
            .collect();
        crate::info!(
            "retention: deleted {} segment{} ({}): {}",
            self.segments,
            if self.segments == 1 { "" } else { "s" },
            bytes_words(self.bytes),
            whose.join(", ")
        );
        *self = Self::default();
    }
}

/// How much of a recording is kept (`--retain`, `--retain-size`, `--retain-free`); nothing
/// is deleted where all are None.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Keep {
    /// Segments that ended longer ago than this are deleted.
    pub age: Option<Duration>,
    /// The root's segments together stay under this many bytes.
    pub size: Option<u64>,
    /// At least this share (0 to 1) of the disk stays free.
    pub free: Option<f64>,
}

impl Keep {
    /// Whether anything is ever deleted.
    pub fn deletes(&self) -> bool {
        self.age.is_some() || self.size.is_some() || self.free.is_some()
    }
}

/// A recordings' root: its index, and its retention (module doc).
pub struct Archive {
    index: Arc<Index>,
    shared: Arc<Kept>,
    wake: Mutex<Option<Sender<()>>>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the retention thread shares with the recorders.
struct Kept {
    /// The run's budgets.
    keep: Keep,
    /// Each input's own age (a camera may keep longer), and its figures.
    inputs: Mutex<HashMap<String, Tracked>>,
}

/// An input recorded into an archive: its own age (None: the run's), its figures.
type Tracked = (Option<Duration>, Arc<RecordLive>);

impl std::fmt::Debug for Archive {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Archive({:?})", self.index)
    }
}

impl Archive {
    /// Opens `root`'s index (reconciled with the files of `inputs`: each input's name and
    /// `--record` name) and starts its retention where `keep` deletes anything.
    pub fn open(root: &Path, inputs: &[(String, String)], keep: Keep) -> Result<Arc<Self>> {
        let index = Arc::new(Index::open(root, inputs)?);
        let shared = Arc::new(Kept {
            keep,
            inputs: Mutex::new(HashMap::new()),
        });
        let (wake, thread) = match keep.deletes() {
            true => {
                let (tx, rx) = crossbeam_channel::bounded(1);
                let (index, kept) = (index.clone(), shared.clone());
                let thread = std::thread::Builder::new()
                    .name("retention".into())
                    .spawn(move || run(&index, &kept, &rx))?;
                (Some(tx), Some(thread))
            }
            false => (None, None),
        };
        Ok(Arc::new(Self {
            index,
            shared,
            wake: Mutex::new(wake),
            thread: Mutex::new(thread),
        }))
    }

    /// The index, for listings.
    pub fn index(&self) -> &Arc<Index> {
        &self.index
    }

    /// Input `name` records here: its figures count its deletions; `age` is its own (None:
    /// the run's).
    pub fn track(&self, name: &str, age: Option<Duration>, live: Arc<RecordLive>) {
        let mut inputs = self.shared.inputs.lock().unwrap_or_else(|e| e.into_inner());
        inputs.insert(name.to_string(), (age, live));
    }

    /// A segment was closed as `path`: listed, and retention looks.
    pub fn closed(&self, path: &Path, mark: &Mark, duration_us: i64, sidecar: Option<&Path>) {
        if let Err(e) = self.index.add(path, mark, duration_us, sidecar) {
            crate::warn!("recording {}: {e:#}", mark.input);
        }
        if let Some(wake) = self.wake.lock().ok().as_ref().and_then(|w| w.as_ref()) {
            let _ = wake.try_send(());
        }
    }

    /// Ends retention (a pass under way finishes first).
    pub fn finish(&self) {
        drop(self.wake.lock().ok().and_then(|mut w| w.take()));
        if let Some(thread) = self.thread.lock().ok().and_then(|mut t| t.take()) {
            let _ = thread.join();
        }
    }
}

impl Drop for Archive {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The retention thread: a pass at the start, after each closed segment, every `LOOK_EVERY`;
/// its deletions said once a `SAY_EVERY`, and at its end.
fn run(index: &Index, kept: &Kept, wake: &Receiver<()>) {
    let mut deletions = Deletions::default();
    let mut said = Instant::now();
    loop {
        if let Err(e) = pass(index, kept, &mut deletions) {
            crate::warn!("retention: {e:#}");
        }
        if said.elapsed() >= SAY_EVERY {
            deletions.say();
            said = Instant::now();
        }
        match wake.recv_timeout(LOOK_EVERY) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return deletions.say(),
        }
    }
}

/// Why a segment is deleted.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Why {
    Age(Duration),
    Size(u64),
    Free(f64),
}

impl Why {
    /// Which budget, in words without its figure (the deletions said together).
    fn kind(self) -> &'static str {
        match self {
            Why::Age(_) => "older than --retain",
            Why::Size(_) => "over --retain-size",
            Why::Free(_) => "under --retain-free",
        }
    }
}

impl std::fmt::Display for Why {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Why::Age(d) => write!(f, "older than --retain {}", age_words(*d)),
            Why::Size(b) => write!(f, "over --retain-size {}", bytes_words(*b)),
            Why::Free(s) => write!(f, "under --retain-free {:.0} %", s * 100.0),
        }
    }
}

/// One look: what is due is deleted, and counted in `deletions`.
fn pass(index: &Index, kept: &Kept, deletions: &mut Deletions) -> Result<()> {
    let segments = index.list(None, None, None)?;
    let ages: HashMap<String, Option<Duration>> = {
        let inputs = kept.inputs.lock().unwrap_or_else(|e| e.into_inner());
        inputs
            .iter()
            .map(|(k, (age, _))| (k.clone(), *age))
            .collect()
    };
    let free = kept
        .keep
        .free
        .and_then(|share| free_bytes_wanted(index.root(), share));
    let keep = Keep {
        // The index itself counts in the size budget.
        size: kept.keep.size.map(|s| s.saturating_sub(index.disk_bytes())),
        ..kept.keep
    };
    let doomed = due(&segments, &keep, &ages, now_us(), free);
    let deleted = !doomed.is_empty();
    for (seg, why) in doomed {
        if delete(index, kept, &seg, why) {
            deletions.segments += 1;
            deletions.bytes += seg.bytes;
            *deletions
                .by
                .entry((seg.input.clone(), why.kind().into()))
                .or_default() += 1;
        }
    }
    if deleted {
        index.checkpoint();
    }
    Ok(())
}

/// What `segments` (oldest first) lose: those past their age, then, while the size or the
/// free space (`free`: bytes to free, and the share asked) is over budget, the oldest of the
/// input that holds the most.
fn due(
    segments: &[Segment],
    keep: &Keep,
    ages: &HashMap<String, Option<Duration>>,
    now_us: i64,
    free: Option<(u64, f64)>,
) -> Vec<(Segment, Why)> {
    let mut doomed = Vec::new();
    let mut left: Vec<&Segment> = Vec::new();
    for seg in segments {
        let age = ages.get(&seg.input).copied().flatten().or(keep.age);
        match age {
            Some(age) if seg.end_us < now_us - age.as_micros() as i64 => {
                doomed.push((seg.clone(), Why::Age(age)));
            }
            _ => left.push(seg),
        }
    }
    let total: u64 = left.iter().map(|s| s.bytes).sum();
    let freed: u64 = doomed.iter().map(|(s, _)| s.bytes).sum();
    let over_size = keep
        .size
        .map(|limit| (total.saturating_sub(limit), Why::Size(limit)));
    let over_free = free.map(|(wanted, share)| (wanted.saturating_sub(freed), Why::Free(share)));
    let (mut need, why) = match (over_size, over_free) {
        (Some(a), Some(b)) if b.0 > a.0 => b,
        (Some(a), _) => a,
        (None, Some(b)) => b,
        (None, None) => return doomed,
    };
    let mut held: HashMap<&str, u64> = HashMap::new();
    for seg in &left {
        *held.entry(seg.input.as_str()).or_default() += seg.bytes;
    }
    while need > 0 {
        let Some((&most, _)) = held.iter().filter(|(_, &b)| b > 0).max_by_key(|(_, &b)| b) else {
            break;
        };
        let Some(at) = left.iter().position(|s| s.input == most) else {
            break;
        };
        let seg = left.remove(at);
        need = need.saturating_sub(seg.bytes);
        if let Some(b) = held.get_mut(most) {
            *b = match left.iter().any(|s| s.input == most) {
                true => b.saturating_sub(seg.bytes),
                false => 0,
            };
        }
        doomed.push((seg.clone(), why));
    }
    doomed
}

/// Bytes to free so that `share` of the disk under `root` is free, and the share (None:
/// enough is free, or the disk can't be asked).
fn free_bytes_wanted(root: &Path, share: f64) -> Option<(u64, f64)> {
    let at = match root.as_os_str().is_empty() {
        true => Path::new("."),
        false => root,
    };
    let fs = rustix::fs::statvfs(at).ok()?;
    let block = fs.f_frsize.max(1);
    let total = fs.f_blocks.saturating_mul(block);
    let free = fs.f_bavail.saturating_mul(block);
    let wanted = (total as f64 * share) as u64;
    (wanted > free).then_some((wanted - free, share))
}

/// Deletes `seg`'s files, then its row; a line with `-v`, and its input's counts: whether it
/// was deleted. A row whose file is not this recorder's (`Index::owned`) is dropped from the
/// index and said, its file left as it is.
fn delete(index: &Index, kept: &Kept, seg: &Segment, why: Why) -> bool {
    let path = index.path_of(&seg.file);
    let (file, sidecar) = match index.owned(seg) {
        Ok(files) => files,
        Err(not_ours) => {
            crate::warn!("retention: {not_ours}: not deleted, and no longer listed");
            if let Err(e) = index.remove(seg.id) {
                crate::warn!("retention: {e:#}");
            }
            return false;
        }
    };
    let mut files = 0;
    for file in std::iter::once(file).chain(sidecar) {
        match std::fs::remove_file(&file) {
            Ok(()) => files += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                crate::warn!("retention: '{}' can't be deleted: {e}", file.display());
                return false;
            }
        }
    }
    if let Err(e) = index.remove(seg.id) {
        crate::warn!("retention: {e:#}");
    }
    crate::debug!(
        "retention: deleted '{}' ({}, {}, {:.0} s from {}): {why}",
        path.display(),
        seg.input,
        bytes_words(seg.bytes),
        seg.duration_us() as f64 / 1e6,
        local_time(seg.start_us),
    );
    let inputs = kept.inputs.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, live)) = inputs.get(&seg.input) {
        live.deleted_segments.fetch_add(1, Ordering::SeqCst);
        live.deleted_files.fetch_add(files, Ordering::SeqCst);
        live.deleted_bytes.fetch_add(seg.bytes, Ordering::SeqCst);
    }
    true
}

/// The wall clock, µs since the Unix epoch.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// A moment (µs since the epoch) in the local time, to the second.
fn local_time(us: i64) -> String {
    use chrono::TimeZone;
    chrono::Local.timestamp_micros(us).single().map_or_else(
        || us.to_string(),
        |t| t.format("%Y-%m-%d %H:%M:%S").to_string(),
    )
}

/// Bytes as a person reads them (MB, GB: powers of 1000, as disks are sold).
fn bytes_words(b: u64) -> String {
    match b {
        b if b >= 1_000_000_000 => format!("{:.2} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b => format!("{:.0} kB", b as f64 / 1e3),
    }
}

/// An age as a person reads it (7d, 12h, 30m, 90s).
fn age_words(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(id: i64, input: &str, start_s: i64, bytes: u64) -> Segment {
        Segment {
            id,
            input: input.into(),
            file: format!("{input}-{id}.mp4").into(),
            start_us: start_s * 1_000_000,
            end_us: (start_s + 2) * 1_000_000,
            media_us: 0,
            bytes,
            sidecar: None,
        }
    }

    #[test]
    fn the_oldest_past_their_age_go_and_a_camera_may_keep_longer() {
        let all = [seg(1, "a", 0, 10), seg(2, "b", 0, 10), seg(3, "a", 100, 10)];
        let keep = Keep {
            age: Some(Duration::from_secs(50)),
            ..Keep::default()
        };
        let ages = HashMap::from([("b".to_string(), Some(Duration::from_secs(1000)))]);
        let gone = due(&all, &keep, &ages, 110 * 1_000_000, None);
        let ids: Vec<i64> = gone.iter().map(|(s, _)| s.id).collect();
        assert_eq!(ids, [1]);
    }

    #[test]
    fn over_the_size_the_camera_holding_most_loses_its_oldest() {
        let all = [
            seg(1, "a", 0, 30),
            seg(2, "b", 1, 10),
            seg(3, "a", 2, 30),
            seg(4, "b", 3, 10),
            seg(5, "a", 4, 30),
        ];
        let keep = Keep {
            size: Some(70),
            ..Keep::default()
        };
        let gone = due(&all, &keep, &HashMap::new(), 0, None);
        let ids: Vec<i64> = gone.iter().map(|(s, _)| s.id).collect();
        // 110 held: a (90) gives 1 then 3, leaving 50 ≤ 70; b keeps both of its own.
        assert_eq!(ids, [1, 3]);
        assert!(gone.iter().all(|(_, w)| *w == Why::Size(70)));
    }
}
