//! `--record`: each input's recording started before the input opens, its tap attached to
//! the source once open (and to every source a reconnect opens), and finished after the
//! run, its files named in one line each.
//!
//! Invariant: every recording is finished however the run ends (an error, a stop, the
//! inputs' end): `Drop` finishes what `finish` did not, so no file is left as `.part`.
//! Built with FFmpeg's libraries only; without them the plan refuses `--record`, and
//! `recordings_none.rs` stands in (no recording, the same calls).

use anyhow::Result;

use crate::plan::RunPlan;
use crate::source::Source;

use crate::record::{Recorded, Recording};

/// A recording, as the source's tap.
pub(super) type Tap = crate::media::tap::Tap;

type Each = std::sync::Arc<Recording>;

/// The run's recordings, by place among the `--input`s.
pub(super) struct Recordings(Vec<Option<Each>>);

impl Recordings {
    /// Starts every input's recording (none without `--record`).
    pub fn start(plan: &RunPlan) -> Result<Self> {
        let each = plan
            .inputs()
            .iter()
            .zip(0..)
            .map(|(input, n)| match &input.record {
                Some(spec) => Recording::start(spec.clone(), format!("input {n}")).map(Some),
                None => Ok(None),
            })
            .collect::<Result<_>>()?;
        Ok(Self(each))
    }

    /// The tap of input `at`'s recording, if it records.
    pub fn tap(&self, at: usize) -> Option<Tap> {
        self.0.get(at)?.clone().map(|r| r as Tap)
    }

    /// Input `at`'s recording's figures as it goes, if it records.
    pub fn live(&self, at: usize) -> Option<std::sync::Arc<crate::stats::RecordLive>> {
        Some(self.0.get(at)?.as_ref()?.live())
    }

    /// Attaches input `at`'s recording to its `source`.
    pub fn attach(&self, at: usize, source: &mut dyn Source) -> Result<()> {
        use anyhow::Context;
        attach(self.tap(at), source).with_context(|| format!("input {at}"))
    }

    /// Finishes every recording and says what each wrote; by place, for the summary.
    pub fn finish(mut self) -> Vec<Option<crate::stats::Recorded>> {
        let each = self
            .0
            .iter_mut()
            .enumerate()
            .map(|(n, rec)| finished(n, rec.take()?));
        each.collect()
    }
}

/// Finishes input `n`'s recording and says what it wrote.
fn finished(n: usize, rec: Each) -> Option<crate::stats::Recorded> {
    let r = rec.finish();
    say(n, &r);
    Some(crate::stats::Recorded {
        files: r.files.iter().map(|f| f.display().to_string()).collect(),
        video_packets: r.video_packets,
        packets: r.packets,
        lost: r.lost,
        segments: r.files.len() as u64,
        bytes: r.bytes,
        failures: r.failures,
        discontinuities: r.discontinuities,
        error: r.error.clone(),
    })
}

impl Drop for Recordings {
    fn drop(&mut self) {
        for rec in self.0.iter_mut().filter_map(Option::take) {
            let _ = rec.finish();
        }
    }
}

/// Gives `source` the `tap`, where there is one; an error where the source reads no packets.
pub(super) fn attach(tap: Option<Tap>, source: &mut dyn Source) -> Result<()> {
    match tap {
        Some(tap) => source
            .tap(tap)
            .map_err(|_| anyhow::anyhow!("{} reads no packets to record", source.describe())),
        None => Ok(()),
    }
}

/// One line for input `n`'s recording.
fn say(n: usize, r: &Recorded) {
    let files = match r.files.as_slice() {
        [] => "no file (no keyframe came)".to_string(),
        [one] => format!("'{}'", one.display()),
        [first, .., last] => format!(
            "{} files, '{}' to '{}'",
            r.files.len(),
            first.display(),
            last.display()
        ),
    };
    let mut lost = match r.lost {
        0 => String::new(),
        k => format!(", {k} lost (the disk fell behind)"),
    };
    if r.failures > 0 {
        lost.push_str(&format!(
            ", {} segment(s) could not be written ({} packets lost: {})",
            r.failures,
            r.failed_packets,
            r.error.as_deref().unwrap_or("")
        ));
    }
    if r.discontinuities > 0 {
        lost.push_str(&format!(", {} timestamp jump(s) offset", r.discontinuities));
    }
    crate::info!(
        "recorded input {n}: {} video packets ({} in all) into {files}{lost}",
        r.video_packets,
        r.packets
    );
}
