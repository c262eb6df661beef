//! What takes an input's packets as they came: `--record`'s recording and the outputs of
//! `--codec copy` (`output::copy`), each started before the input opens (a copy's file
//! claimed then), one tap per input attached to the source once open (and to every source a
//! reconnect opens) that hands each packet to all of them, and finished after the run: a
//! recording's files named in one line each, a copy's failure the run's.
//!
//! Invariant: every recording and copy is finished however the run ends (an error, a stop,
//! the inputs' end): `Drop` finishes what `finish` did not, so no file is left as `.part`.
//! Built with FFmpeg's libraries only; without them the plan refuses `--record`, and
//! `recordings_none.rs` stands in (no recording, the same calls).

use anyhow::Result;

use crate::plan::RunPlan;
use crate::source::Source;

use std::sync::Arc;

use crate::record::archive::Archive;
use crate::record::{Recorded, Recording};

/// Each input's clip maker (`--clip`), for the inputs that have packets (a file, a
/// stream; a camera device's frames have none).
fn clips_of(plan: &RunPlan) -> Result<Vec<Option<Clips>>> {
    let Some((pattern, pre, post)) = plan.events().and_then(|e| e.clip.clone()) else {
        return Ok(Vec::new());
    };
    plan.inputs()
        .iter()
        .map(|input| {
            if !input.spec.has_packets() {
                return Ok(None);
            }
            let spec = crate::record::clip::ClipSpec {
                pattern: pattern.clone(),
                pre,
                post,
            };
            let names = (
                input.label.clone(),
                crate::plan::shard::file_safe(&input.label),
            );
            crate::record::clip::Clips::start(spec, names).map(Some)
        })
        .collect()
}

/// A recording, as the source's tap.
pub(super) type Tap = crate::media::tap::Tap;

type Each = std::sync::Arc<Recording>;
type Copy = std::sync::Arc<crate::output::copy::Copy>;

type Clips = std::sync::Arc<crate::record::clip::Clips>;

/// The run's recordings and copies, by place among the `--input`s; the RTSP server's taps,
/// and the server, held for the run; the clip makers of events (`--clip`); the recordings'
/// roots (each its index and retention).
pub(super) struct Recordings(
    Vec<Option<Each>>,
    Vec<Vec<Copy>>,
    Vec<Option<Tap>>,
    #[allow(dead_code)] Option<crate::rtsp::Server>,
    Vec<Option<Clips>>,
    Vec<Arc<Archive>>,
    Vec<Option<Live>>,
);

type Live = Arc<crate::display::web::live::feed::InputFeed>;

/// Each input's WebRTC feed (`--serve`'s `/whep/NAME`), for the inputs that have packets.
fn live_of(plan: &RunPlan) -> Vec<Option<Live>> {
    if plan.display().serve.is_none() {
        return Vec::new();
    }
    plan.inputs()
        .iter()
        .map(|input| {
            let feed = crate::display::web::live::feed::InputFeed::new(input.label.clone());
            input.spec.has_packets().then_some(feed)
        })
        .collect()
}

/// The recordings' roots of `plan`'s inputs, each opened once (its index reconciled with
/// the files of every input recorded there).
fn archives_of(plan: &RunPlan) -> Result<Vec<Arc<Archive>>> {
    let mut roots: Vec<(&crate::record::RecordSpec, Vec<(String, String)>)> = Vec::new();
    for spec in plan.inputs().iter().filter_map(|i| i.record.as_ref()) {
        let named = (spec.input.clone(), spec.name.clone());
        match roots.iter_mut().find(|(s, _)| s.root == spec.root) {
            Some((_, inputs)) => inputs.push(named),
            None => roots.push((spec, vec![named])),
        }
    }
    roots
        .into_iter()
        .map(|(spec, inputs)| Archive::open(&spec.root, &inputs, spec.keep))
        .collect()
}

impl Recordings {
    /// Starts every input's recording (none without `--record`) and copies (none without
    /// `--codec copy`), and the RTSP server of the inputs' packets (`--rtsp-serve`).
    pub fn start(plan: &RunPlan) -> Result<Self> {
        let archives = archives_of(plan)?;
        let archive_of = |spec: &crate::record::RecordSpec| {
            let at = archives.iter().position(|a| a.index().root() == spec.root);
            at.map(|at| archives[at].clone())
        };
        let each = plan
            .inputs()
            .iter()
            .zip(0..)
            .map(
                |(input, n)| match (&input.record, input.record.as_ref().and_then(archive_of)) {
                    (Some(spec), Some(archive)) => {
                        Recording::start(spec.clone(), format!("input {n}"), archive).map(Some)
                    }
                    _ => Ok(None),
                },
            )
            .collect::<Result<_>>()?;
        let copies = plan
            .inputs()
            .iter()
            .map(|input| {
                let live = matches!(input.spec, crate::source::InputSpec::Stream(_));
                let specs = input
                    .copies
                    .iter()
                    .filter_map(|out| copy_spec(plan, out, live));
                specs.map(crate::output::copy::Copy::start).collect()
            })
            .collect::<Result<_>>()?;
        let (served, server) = rtsp_of(plan)?;
        let clips = clips_of(plan)?;
        let live = live_of(plan);
        Ok(Self(each, copies, served, server, clips, archives, live))
    }

    /// Each input's WebRTC feed, where it has packets (by `--input` place).
    pub fn live_feeds(&self) -> Vec<Option<Arc<crate::display::web::live::feed::Feed>>> {
        self.6
            .iter()
            .map(|l| l.as_ref().map(|l| l.feed.clone()))
            .collect()
    }

    /// Where input `at`'s events start or extend a clip, if `--clip` asks.
    pub fn clip_hook(&self, at: usize) -> Option<crate::events::ClipHook> {
        let clips = self.4.get(at)?.clone()?;
        Some(std::sync::Arc::new(move |ask| clips.event(ask)))
    }

    /// The tap of input `at`'s recording and copies, if it has any.
    pub fn tap(&self, at: usize) -> Option<Tap> {
        let recording = self.0.get(at)?.clone().map(|r| r as Tap);
        let copies = self
            .1
            .get(at)
            .into_iter()
            .flatten()
            .map(|c| c.clone() as Tap);
        let served = self.2.get(at).cloned().flatten();
        let clips = self.4.get(at).cloned().flatten().map(|c| c as Tap);
        let live = self.6.get(at).cloned().flatten().map(|l| l as Tap);
        let all: Vec<Tap> = recording
            .into_iter()
            .chain(copies)
            .chain(served)
            .chain(clips)
            .chain(live)
            .collect();
        match all.len() {
            0 => None,
            1 => all.into_iter().next(),
            _ => Some(std::sync::Arc::new(Fan(all))),
        }
    }

    /// What the copies write (`--codec copy`), where there are: "input K: 'FILE' (its
    /// packets as they came)" for each.
    pub fn copies_described(&self) -> Option<String> {
        let each: Vec<String> = (self.1.iter().enumerate())
            .flat_map(|(n, copies)| copies.iter().map(move |c| (n, c)))
            .map(|(n, c)| format!("input {n}: '{}' (its packets as they came)", c.describe()))
            .collect();
        (!each.is_empty()).then(|| each.join("; "))
    }

    /// Finishes every copy and clip maker: what each copy wrote said in a line; the first
    /// that failed, its error, or else the clips that could not be written.
    pub fn finish_copies(&mut self) -> Result<()> {
        let clips = self.finish_clips();
        let mut first = Ok(());
        for (n, copies) in self.1.iter_mut().enumerate() {
            for copy in copies.drain(..) {
                match copy.finish() {
                    Ok(c) => crate::info!(
                        "copied input {n}: {} video packets ({} in all) into '{}'",
                        c.video_packets,
                        c.packets,
                        copy.describe()
                    ),
                    Err(e) if first.is_ok() => first = Err(e),
                    Err(e) => crate::warn!("{e:#}"),
                }
            }
        }
        first.and(clips)
    }

    /// Finishes every clip maker: Err naming the clips that could not be written.
    fn finish_clips(&mut self) -> Result<()> {
        let mut lost = Vec::new();
        for (n, clips) in self.4.iter_mut().enumerate() {
            let Some(made) = clips.take().map(|c| c.finish()) else {
                continue;
            };
            if made.failed > 0 {
                lost.push(format!(
                    "{} clip(s) of input {n} could not be written ({})",
                    made.failed,
                    made.why.unwrap_or_default()
                ));
            }
        }
        match lost.is_empty() {
            true => Ok(()),
            false => Err(anyhow::anyhow!("{}", lost.join("; "))),
        }
    }

    /// Where input `at`'s detected frames' lines go beside its recorded segments, if it
    /// records.
    pub fn beside(&self, at: usize) -> Option<crate::sink::detecting::Beside> {
        let rec = self.0.get(at)?.clone()?;
        Some(std::sync::Arc::new(move |line, seen, seconds| {
            rec.detected(line, seen, seconds)
        }))
    }

    /// Input `at`'s recording, if it records.
    pub fn recording(&self, at: usize) -> Option<Arc<Recording>> {
        self.0.get(at)?.clone()
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

    /// The recordings' roots (each its index), for the browser view's `/api/recordings`.
    pub fn archives(&self) -> &[Arc<Archive>] {
        &self.5
    }

    /// Finishes every recording and says what each wrote; by place, for the summary.
    pub fn finish(mut self) -> Vec<Option<crate::stats::Recorded>> {
        for clips in self.4.iter_mut().filter_map(Option::take) {
            let _ = clips.finish();
        }
        // Every recording told first: they close their files together.
        self.0.iter().flatten().for_each(|rec| rec.end_soon());
        let each: Vec<_> = self
            .0
            .iter_mut()
            .enumerate()
            .map(|(n, rec)| finished(n, rec.take()?))
            .collect();
        // Retention's last pass, and its deletions not said yet.
        self.5.iter().for_each(|archive| archive.finish());
        each
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
        for copy in self.1.iter_mut().flat_map(|c| c.drain(..)) {
            let _ = copy.finish();
        }
        for clips in self.4.iter_mut().filter_map(Option::take) {
            let _ = clips.finish();
        }
    }
}

/// The RTSP server where `--rtsp-serve` asks for one, and the tap of each input it serves
/// (those read by FFmpeg's demuxer: the others have no packets, and say so).
fn rtsp_of(plan: &RunPlan) -> Result<(Vec<Option<Tap>>, Option<crate::rtsp::Server>)> {
    let Some(serve) = &plan.display().rtsp else {
        return Ok((Vec::new(), None));
    };
    let settings = crate::rtsp::Settings {
        addr: serve.addr,
        token: serve.token.clone(),
        publish_key: serve.publish_key.clone(),
    };
    let names: Vec<String> = plan.inputs().iter().map(|i| i.label.clone()).collect();
    let server = crate::rtsp::Server::start(&settings, &names, serve.published.as_slice())?;
    let taps = plan
        .inputs()
        .iter()
        .enumerate()
        .map(|(at, input)| match input.spec.has_packets() {
            true => server.tap(at).map(|t| Some(t as Tap)),
            false => {
                crate::info!(
                    "rtsp: input {at} ({}) is made of pictures, not packets: it is not served",
                    input.label
                );
                Ok(None)
            }
        })
        .collect::<Result<_>>()?;
    Ok((taps, Some(server)))
}

/// One tap that hands every packet to several (a recording and copies).
struct Fan(Vec<Tap>);

impl crate::media::tap::PacketTap for Fan {
    fn open(&self, input: &ffmpeg_next::format::context::Input, video: usize, from: f64) {
        for tap in &self.0 {
            tap.open(input, video, from);
        }
    }

    fn packet(&self, packet: ffmpeg_next::Packet) {
        if let Some((last, first)) = self.0.split_last() {
            for tap in first {
                tap.packet(packet.clone());
            }
            last.packet(packet);
        }
    }
}

/// What a copy of `out` writes to: a video file or a stream (the plan keeps no other), in
/// fragments where the input is `live` or `--fragmented` says so.
fn copy_spec(
    plan: &RunPlan,
    out: &crate::output::OutputSpec,
    live: bool,
) -> Option<crate::output::copy::CopySpec> {
    match out {
        crate::output::OutputSpec::Video {
            path, container, ..
        } => Some(crate::output::copy::CopySpec {
            path: path.clone(),
            container: *container,
            audio: !plan.writing().no_audio,
            overwrite: plan.writing().overwrite,
            fragmented: live || plan.writing().fragmented,
        }),
        _ => None,
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
