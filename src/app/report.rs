//! After a run: the summary (a part per input, in `--input` order), `--summary-json`,
//! `--trace` and `--timeline`; and the summary JSON of a run that ends without returning
//! (an abort, an exit from inside a library) or before its pipeline started.
//!
//! Invariants: `--summary-json` is written whole, under a temporary name, then renamed,
//! once per run; a run that ended with an error prints and writes what it did up to then;
//! an input that could not be opened makes the run exit non-zero after the others ran.

use anyhow::{bail, Context, Result};

use std::cell::Cell;
use std::sync::{Arc, Mutex};

use crate::paths;
use crate::pipeline;
use crate::plan::run::Reports;
use crate::stats::{InputStats, Summary};

/// Drops above this share of a live input's frames are warned about at the end.
const DROP_WARNING_PERCENT: u64 = 3;

/// What a run leaves for its end besides its result: whether `--summary-json` was written
/// (a run that fails after writing it does not write it again), and whether a thread was
/// left blocked inside a source (the process then ends without exit-time destructors).
#[derive(Debug, Default)]
pub(super) struct Ending {
    written: Cell<bool>,
    left_behind: Cell<bool>,
    /// The running pipeline's summary, reported by an `at_end` hook if the process ends
    /// before the run does (`arm_exit_summary`).
    at_exit: std::cell::RefCell<Option<ExitSummary>>,
}

impl Ending {
    /// A thread was left blocked inside a source (an input's opening, a capture thread).
    pub fn leave_a_thread_behind(&self) {
        self.left_behind.set(true);
    }
    /// Whether one was.
    pub fn left_a_thread_behind(&self) -> bool {
        self.left_behind.get()
    }
    /// The armed summary's hook, to keep until the process ends.
    pub fn into_exit_summary(self) -> Option<ExitSummary> {
        self.at_exit.into_inner()
    }
}

/// Where each of the run's inputs came from: `order[k]` is the `--input` place of the
/// run's input `k`; `failed`, those that could not be opened, with why; `names`, every
/// `--input`'s text; `recorded`, what each one's `--record` wrote, by place.
pub(super) struct Places<'a> {
    pub order: &'a [usize],
    pub failed: &'a [(usize, String)],
    pub names: &'a [String],
    pub recorded: &'a [Option<crate::stats::Recorded>],
}

/// Reports a run that returned (`ran`): its summary with its inputs in `--input` order; an
/// error (the run's, or an input that could not be opened) after the summary.
pub(super) fn finish(
    reports: &Reports,
    ran: Result<Summary>,
    places: Places,
    ending: &Ending,
) -> Result<()> {
    let left_behind = match &ran {
        Ok(summary) => summary.left_behind,
        Err(e) => e
            .downcast_ref::<pipeline::Failed>()
            .is_some_and(|f| f.summary.left_behind),
    };
    if left_behind {
        ending.leave_a_thread_behind();
    }
    let mut summary = match ran {
        Ok(summary) => summary,
        Err(e) => {
            if let Some(failed_run) = e.downcast_ref::<pipeline::Failed>() {
                let mut summary = (*failed_run.summary).clone();
                summary.inputs = in_order(summary.inputs, &places);
                crate::notice!("{}", summary.render());
                write_summary_json(reports, &summary, Some(&format!("{e:#}")), ending)?;
            }
            return Err(e);
        }
    };
    summary.inputs = in_order(summary.inputs, &places);
    if let Some(error) = recording_failed(&places) {
        crate::notice!("{}", summary.render());
        write_summary_json(reports, &summary, Some(&error), ending)?;
        bail!("{error}");
    }
    if let Some((i, why)) = places.failed.first() {
        let error = format!(
            "input {i} ({}) could not be opened: {}",
            places.names[*i],
            why.trim_start_matches("failed: ")
        );
        crate::notice!("{}", summary.render());
        write_summary_json(reports, &summary, Some(&error), ending)?;
        bail!("{error}; the other inputs ran to their end");
    }
    report(reports, &summary, ending)
}

/// Why the run failed for its recordings, where one could not write a segment (the run's
/// frames may all be out, but what an NVR keeps was lost).
fn recording_failed(places: &Places) -> Option<String> {
    let (i, r) = places
        .recorded
        .iter()
        .enumerate()
        .find_map(|(i, r)| Some((i, r.as_ref().filter(|r| r.failures > 0)?)))?;
    Some(format!(
        "the recording of input {i} ({}) failed: {} segment(s) could not be written: {}",
        places.names.get(i).map_or("", String::as_str),
        r.failures,
        r.error.as_deref().unwrap_or("")
    ))
}

/// The summary's inputs in `--input` order: the run's and those that could not be opened,
/// then those that joined while it ran, in the order they joined.
fn in_order(ran: Vec<InputStats>, places: &Places) -> Vec<InputStats> {
    let mut all: Vec<Option<InputStats>> = vec![None; places.names.len()];
    let mut joined = Vec::new();
    for (k, stats) in ran.into_iter().enumerate() {
        match places.order.get(k) {
            Some(&at) => all[at] = Some(stats),
            None => joined.push(Some(stats)),
        }
    }
    for (i, why) in places.failed {
        all[*i] = Some(InputStats {
            name: places.names[*i].clone(),
            ended: Some(why.clone()),
            ..InputStats::default()
        });
    }
    for (stats, recorded) in all.iter_mut().zip(places.recorded) {
        if let Some(stats) = stats {
            stats.recorded.clone_from(recorded);
        }
    }
    all.into_iter().chain(joined).flatten().collect()
}

/// The summary (and a warning when a live input dropped many frames), `--summary-json`,
/// `--trace` and `--timeline`.
fn report(reports: &Reports, summary: &Summary, ending: &Ending) -> Result<()> {
    crate::notice!("{}", summary.render());
    let (captured, dropped) = (summary.capture.captured, summary.capture.dropped);
    if dropped * 100 > (captured + dropped) * DROP_WARNING_PERCENT {
        crate::warn!(
            "{dropped} of {} frames ({:.0} %) were dropped: the live input came faster than the pipeline took it{}",
            captured + dropped,
            100.0 * dropped as f64 / (captured + dropped) as f64,
            summary.what_bound().map(|b| format!("; {b}")).unwrap_or_default()
        );
    }
    write_summary_json(reports, summary, None, ending)?;
    if let Some(trace) = &summary.trace {
        crate::trace::write_files(
            trace,
            reports.trace.as_deref(),
            reports.timeline.as_deref(),
            &summary.backend,
        )?;
    }
    Ok(())
}

/// Writes `--summary-json`, where asked for (whole, under a temporary name, then renamed).
fn write_summary_json(
    reports: &Reports,
    summary: &Summary,
    error: Option<&str>,
    ending: &Ending,
) -> Result<()> {
    let Some(path) = &reports.summary_json else {
        return Ok(());
    };
    let json = summary.to_json(error);
    ending.written.set(true);
    write_json(path, json, Keep::ForAnAbort).with_context(|| format!("writing {path}"))
}

/// The summary on disk, and who may still write it: the run's thread writes it once, an
/// abort (a second stop signal while the outputs are finalized, on the signal thread)
/// writes it again as failed. One lock orders the two, so a run that exits 130 never leaves
/// `ok: true` behind, and two writers never meet in one temporary file.
static WRITTEN: Mutex<Written> = Mutex::new(Written::Nothing);

enum Written {
    Nothing,
    /// The summary written last, kept for an abort to write again as failed.
    Summary(String, serde_json::Value),
    /// An abort wrote its summary: nothing writes after it.
    ByAnAbort,
}

/// Whether a summary written now is kept for an abort to mark failed.
#[derive(PartialEq)]
enum Keep {
    ForAnAbort,
    No,
}

/// Writes `json` to `path` (whole, under a temporary name, then renamed), unless an abort
/// is under way: its own summary, written or about to be, is the one that stays.
fn write_json(path: &str, json: serde_json::Value, keep: Keep) -> std::io::Result<()> {
    let mut written = WRITTEN.lock().unwrap_or_else(|p| p.into_inner());
    // Checked under the lock: an abort sets its flag before its hook takes the lock.
    if crate::stop::aborting() || matches!(*written, Written::ByAnAbort) {
        return Ok(());
    }
    write_text(path, &json)?;
    if keep == Keep::ForAnAbort {
        *written = Written::Summary(path.to_string(), json);
    }
    Ok(())
}

/// `json`, pretty and with its secrets redacted, written whole to `path`.
fn write_text(path: &str, json: &serde_json::Value) -> std::io::Result<()> {
    let text = serde_json::to_string_pretty(json).unwrap_or_default() + "\n";
    let text = crate::secret::redact(&text);
    paths::write_atomically(std::path::Path::new(path), text.as_bytes())
}

/// An abort's summary: the one written last again, `ok: false` with `why`, else `counts`
/// at `path` (where there is one). The lock is waited for briefly only (the run's thread
/// holds it for one file's write); nothing is written after this.
fn write_as_aborted(why: &str, path: Option<&str>, counts: [u64; 4]) {
    let Some(mut written) = lock_briefly(&WRITTEN) else {
        return;
    };
    match std::mem::replace(&mut *written, Written::ByAnAbort) {
        Written::Summary(path, mut json) => {
            json["ok"] = false.into();
            json["error"] = why.into();
            let _ = write_text(&path, &json);
        }
        Written::Nothing => {
            if let Some(path) = path {
                let _ = write_text(path, &counts_json(Some(why), counts));
            }
        }
        Written::ByAnAbort => {}
    }
}

/// `--summary-json` for a run that ended before its pipeline did (the input could not be
/// opened, a stop came first): no frames, and the error where there was one. Not where the
/// summary's own name was the problem (`path`: `--summary-json`).
pub(super) fn without_a_run(path: Option<&str>, error: Option<&anyhow::Error>, ending: &Ending) {
    let Some(path) = path else {
        return;
    };
    let error = error.map(|e| format!("{e:#}"));
    let about_itself = error
        .as_deref()
        .is_some_and(|e| e.contains("--summary-json"));
    if ending.written.get()
        || about_itself
        || paths::check_file_arg("--summary-json", path, "json").is_err()
    {
        return;
    }
    let _ = write_json(path, counts_json(error.as_deref(), [0; 4]), Keep::No);
}

/// A summary of counts only (captured, processed, consumed, dropped), failed where `error`.
fn counts_json(
    error: Option<&str>,
    [captured, processed, consumed, dropped]: [u64; 4],
) -> serde_json::Value {
    serde_json::json!({
        "ok": error.is_none(),
        "error": error,
        "frames": {
            "captured": captured,
            "processed": processed,
            "consumed": consumed,
            "written": consumed,
            "dropped": dropped,
        },
    })
}

/// The running pipeline's summary, for a run that ends without returning: an abort (a
/// second stop signal, the stop watchdog) or `exit` from inside a library (Qt, when the
/// display dies). Armed while the pipeline runs (an exit then ends it from outside); after
/// it returned, an abort still marks the summary failed. Held by the run's `Ending`: its
/// hook is taken back when the run is over.
pub(crate) struct ExitSummary {
    state: Arc<Mutex<Option<AtExit>>>,
    _hook: crate::stop::AtEnd,
}

impl std::fmt::Debug for ExitSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ExitSummary")
    }
}

/// What `summary_at_exit` reports: `--summary-json`, and the counts so far.
struct AtExit {
    summary_json: Option<String>,
    progress: Arc<pipeline::Progress>,
    /// The pipeline returned: only an abort (before the summary is written) reports now.
    returned: bool,
}

/// Arms `summary_at_exit` for the pipeline's run, whose counts `progress` keeps.
pub(super) fn arm_exit_summary(
    ending: &Ending,
    reports: &Reports,
    progress: Arc<pipeline::Progress>,
) {
    let state = Arc::new(Mutex::new(Some(AtExit {
        summary_json: reports.summary_json.clone(),
        progress,
        returned: false,
    })));
    let hook = {
        let state = state.clone();
        crate::stop::at_end(move || summary_at_exit(&state))
    };
    *ending.at_exit.borrow_mut() = Some(ExitSummary { state, _hook: hook });
}

/// The pipeline returned: its summary is reported the usual way (an abort before that
/// still writes the counts, failed).
pub(super) fn disarm_exit_summary(ending: &Ending) {
    if let Some(armed) = ending.at_exit.borrow().as_ref() {
        if let Ok(mut s) = armed.state.lock() {
            if let Some(at) = s.as_mut() {
                at.returned = true;
            }
        }
    }
}

/// How long an abort's summary waits for the state another thread holds a moment.
const LOCK_WITHIN: std::time::Duration = std::time::Duration::from_millis(500);

/// `state`'s lock, tried until had or `LOCK_WITHIN` passed.
fn lock_briefly<T>(state: &Mutex<T>) -> Option<std::sync::MutexGuard<'_, T>> {
    let until = std::time::Instant::now() + LOCK_WITHIN;
    loop {
        match state.try_lock() {
            Ok(guard) => return Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) if std::time::Instant::now() < until => {
                std::thread::sleep(std::time::Duration::from_millis(2))
            }
            Err(std::sync::TryLockError::WouldBlock) => return None,
        }
    }
}

/// Says why a running pipeline ended from outside, and writes `--summary-json` with the
/// counts so far.
fn summary_at_exit(state: &Mutex<Option<AtExit>>) {
    let aborted = |code: i32| match code {
        130 => "aborted by a second stop signal".to_string(),
        code => format!("the run did not end after the stop (exit {code})"),
    };
    // Never waiting long: the pipeline may be ending it right now on another thread, which
    // holds the lock for a moment only (`disarm_exit_summary`); a lock not had within
    // `LOCK_WITHIN` is left, rather than an abort held.
    let Some(at) = lock_briefly(state).and_then(|mut s| s.take()) else {
        return;
    };
    if at.returned {
        // An abort after the pipeline returned: the summary, written already or not yet,
        // says the run failed.
        if let Some(code) = crate::stop::abort_code() {
            let path = at.summary_json.as_deref();
            write_as_aborted(&aborted(code), path, at.progress.counts());
        }
        return;
    }
    let progress = at.progress.counts();
    let why = match crate::stop::abort_code() {
        Some(code) => aborted(code),
        None => {
            let why =
                "the process was ended from inside the window system (its display went away?)";
            crate::say!(
                "framepipe: error: {why}; {} frames had reached the output",
                progress[2]
            );
            why.to_string()
        }
    };
    write_as_aborted(&why, at.summary_json.as_deref(), progress);
}
