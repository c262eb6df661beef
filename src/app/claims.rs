//! Claims every file the run writes before anything opens: each input's own outputs, the
//! mosaic's recording, the reports (`--trace`, `--timeline`, `--summary-json`).
//!
//! Invariants: a file that can't be written (with the OS's reason), that is an input file
//! (by identity), is not a regular file, is named twice, or exists without `-y` is refused
//! here; two inputs never write one file; an HLS playlist's segments are claimed with it
//! (`output::hls::claim`); what is claimed stays locked for the run (`output::claim`).

use anyhow::{bail, Result};

use crate::output;
use crate::output::claim::{Claimed, Overwrite};
use crate::output::OutputSpec;
use crate::paths::{self, InputFile};
use crate::plan::run::{Outputs, Reports};
use crate::plan::{InputPlan, RunPlan};

/// What the run claimed: each input's own output (taken as it opens), and the recording's.
pub(super) struct Claims {
    /// By the input's place among `--input`s.
    pub each: Vec<Option<Claimed>>,
    /// The mosaic's recording (several inputs).
    pub recording: Option<Claimed>,
    /// What the streams out hold for the run (an HLS playlist's lock).
    pub _streams: Vec<Claimed>,
}

/// Claims every output of `plan` (module doc).
pub(super) fn claim(plan: &RunPlan) -> Result<Claims> {
    if plan.several() {
        refuse_crossed_files(plan.inputs(), plan.recording())?;
    }
    let (overwrite, reports) = (plan.writing().overwrite, plan.reports());
    let mut each = Vec::with_capacity(plan.inputs().len());
    let mut streams = Vec::new();
    for input in plan.inputs() {
        let files = input_files(input);
        let outs = &input.outputs;
        each.push(Some(check_outputs(
            outs,
            &files,
            overwrite,
            reports,
            &mut streams,
        )?));
    }
    let recording = plan
        .recording()
        .map(|r| check_outputs(r, &[], overwrite, reports, &mut streams))
        .transpose()?;
    Ok(Claims {
        each,
        recording,
        _streams: streams,
    })
}

/// The files `input` opens, whatever its URL form (`InputSpec::files_opened`: `file:`,
/// `concat:`, an HLS playlist's segments), to refuse writing over any of them.
fn input_files(input: &InputPlan) -> Vec<InputFile<'_>> {
    input
        .spec
        .files_opened()
        .iter()
        .filter_map(|p| paths::file_id(p))
        .map(|id| InputFile {
            name: &input.name,
            id,
        })
        .collect()
}

/// Refuses any file `outputs` (and the reports) would write that can't be written, is the
/// input file, is not a regular file, or is named twice; then claims each output
/// (`OutputSpec::claim`: an existing file is refused without `-y`), the file output's claim
/// returned.
fn check_outputs(
    outputs: &Outputs,
    input_files: &[InputFile],
    overwrite: Overwrite,
    reports: &Reports,
    streams_held: &mut Vec<Claimed>,
) -> Result<Claimed> {
    let mut files: Vec<(&str, String)> = Vec::new();
    if let Some(OutputSpec::Video { path, .. }) = &outputs.file {
        files.push(("--output", path.clone()));
    }
    let playlists: Vec<&str> = outputs
        .streams
        .iter()
        .filter_map(|s| match s {
            OutputSpec::Video {
                path,
                container: output::Container::Hls,
                ..
            } => Some(path.as_str()),
            _ => None,
        })
        .collect();
    files.extend(playlists.iter().map(|p| ("--output", p.to_string())));
    files.extend(reports.trace.iter().map(|p| ("--trace", p.clone())));
    files.extend(reports.timeline.iter().map(|p| ("--timeline", p.clone())));
    files.extend(
        reports
            .summary_json
            .iter()
            .map(|p| ("--summary-json", p.clone())),
    );
    check_files(&files, &playlists, input_files)?;
    for stream in &outputs.streams {
        streams_held.push(stream.claim(overwrite, input_files)?);
    }
    match &outputs.file {
        Some(file) => file.claim(overwrite, input_files),
        None => Ok(Claimed::Nothing),
    }
}

/// Refuses two of `files` that are one file, a playlist's segments crossing another file,
/// and each file that can't be written, is the input, or is not a regular file.
fn check_files(
    files: &[(&str, String)],
    playlists: &[&str],
    input_files: &[InputFile],
) -> Result<()> {
    for (k, (flag, path)) in files.iter().enumerate() {
        if let Some((other, _)) = files[..k].iter().find(|(_, p)| paths::same_file(p, path)) {
            bail!("{other} and {flag} both name '{path}': one would replace the other; give each its own file");
        }
    }
    #[cfg(feature = "ffmpeg")]
    {
        let others: Vec<&str> = files
            .iter()
            .map(|(_, p)| p.as_str())
            .filter(|p| !playlists.contains(p))
            .collect();
        output::hls::refuse_crossing(playlists, &others)?;
    }
    #[cfg(not(feature = "ffmpeg"))]
    let _ = playlists;
    for (flag, path) in files {
        paths::check_name(flag, path)?;
        for input in input_files {
            paths::refuse_input_file(flag, path, input)?;
        }
        paths::refuse_special(flag, path)?;
        if *flag != "--output" {
            paths::check_writable(flag, path)?;
        }
    }
    Ok(())
}

/// Refuses an input's output (or the mosaic's: `recording`) that is another input's file
/// (each input's part checks its own input), and two outputs that are one file.
fn refuse_crossed_files(inputs: &[InputPlan], recording: Option<&Outputs>) -> Result<()> {
    let files: Vec<InputFile> = inputs.iter().flat_map(input_files).collect();
    let outputs: Vec<&str> = inputs
        .iter()
        .map(|i| &i.outputs)
        .chain(recording)
        .flat_map(|o| o.named.iter().map(String::as_str))
        .filter(|o| !o.contains("://") && *o != "-")
        .collect();
    for (k, out) in outputs.iter().enumerate() {
        for input in &files {
            paths::refuse_input_file("--output", out, input)?;
        }
        if outputs[..k].iter().any(|o| paths::same_file(o, out)) {
            bail!("--output: two inputs would write '{out}'");
        }
    }
    #[cfg(feature = "ffmpeg")]
    {
        use crate::output::{hls, Container};
        let (playlists, others): (Vec<&str>, Vec<&str>) = outputs
            .iter()
            .partition(|o| Container::of_path(o) == Some(Container::Hls));
        for p in &playlists {
            hls::refuse_inputs(p, &files)?;
        }
        hls::refuse_crossing(&playlists, &others)?;
    }
    Ok(())
}
