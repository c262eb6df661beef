//! Claims every file the run writes before anything opens: each input's own outputs, the
//! mosaic's recording, the reports (`--trace`, `--timeline`, `--summary-json`).
//!
//! Invariants: a file that can't be written (with the OS's reason), that is an input file
//! (by identity), is not a regular file, is named twice, or exists without `-y` is refused
//! here; two inputs never write one file; an HLS playlist's segments are claimed with it
//! (`sink::hls::claim`); what is claimed stays locked for the run (`sink::claim`).

use anyhow::{bail, Context, Result};

use crate::paths::{self, InputFile};
use crate::plan::run::{Outputs, Reports};
use crate::plan::{InputPlan, RunPlan};
use crate::sink::claim::{self, Claimed, Overwrite, VideoClaim};
use crate::sink::{self, OutputSpec};
use crate::source::InputSpec;

/// What the run claimed: each input's own output (taken as it opens), and the recording's.
pub(super) struct Claims {
    /// By the input's place among `--input`s.
    pub each: Vec<Option<Claimed>>,
    /// The mosaic's recording (several inputs).
    pub recording: Option<Claimed>,
}

/// Claims every output of `plan` (module doc).
pub(super) fn claim(plan: &RunPlan) -> Result<Claims> {
    if plan.several() {
        refuse_crossed_files(plan.inputs(), plan.recording())?;
    }
    let (overwrite, reports) = (plan.writing().overwrite, plan.reports());
    let mut each = Vec::with_capacity(plan.inputs().len());
    for input in plan.inputs() {
        let file = input_file(input);
        each.push(Some(check_outputs(
            &input.outputs,
            file,
            overwrite,
            reports,
        )?));
    }
    let recording = plan
        .recording()
        .map(|r| check_outputs(r, None, overwrite, reports))
        .transpose()?;
    Ok(Claims { each, recording })
}

/// `input`'s file, where it is one (to refuse writing over it).
fn input_file(input: &InputPlan) -> Option<InputFile<'_>> {
    match &input.spec {
        InputSpec::Video(p) | InputSpec::Image(p) => paths::file_id(p).map(|id| InputFile {
            name: &input.name,
            id,
        }),
        _ => None,
    }
}

/// Refuses any file `outputs` (and the reports) would write that can't be written, is the
/// input file, is not a regular file, is named twice, or exists without `-y`; then claims
/// the file output.
fn check_outputs(
    outputs: &Outputs,
    input_file: Option<InputFile>,
    overwrite: Overwrite,
    reports: &Reports,
) -> Result<Claimed> {
    let output = outputs.file.as_ref();
    let mut files: Vec<(&str, String)> = Vec::new();
    match output {
        Some(OutputSpec::Video { path, .. }) => files.push(("--output", path.clone())),
        Some(OutputSpec::Stdout) if std::io::IsTerminal::is_terminal(&std::io::stdout()) => {
            bail!("--output -: standard output is a terminal; redirect it to a file or a pipe (| ffmpeg -f yuv4mpegpipe -i - …), or name an output file");
        }
        Some(OutputSpec::Sequence { pattern, .. }) => {
            // Like `mkdir -p`: an image sequence's folder is made when missing.
            std::fs::create_dir_all(pattern.folder()).with_context(|| {
                format!(
                    "--output: creating the folder '{}'",
                    pattern.folder().display()
                )
            })?;
            if let Some(input) = &input_file {
                paths::refuse_input_in_sequence("--output", pattern, input)
                    .map_err(anyhow::Error::msg)?;
            }
        }
        Some(OutputSpec::Stdout) | None => {}
    }
    let inputs: Vec<InputFile> = input_file.iter().cloned().collect();
    let playlists = claim_playlists(&outputs.streams, overwrite, &inputs)?;
    files.extend(playlists.iter().map(|p| ("--output", p.to_string())));
    files.extend(reports.trace.iter().map(|p| ("--trace", p.clone())));
    files.extend(reports.timeline.iter().map(|p| ("--timeline", p.clone())));
    files.extend(
        reports
            .summary_json
            .iter()
            .map(|p| ("--summary-json", p.clone())),
    );
    check_files(&files, &playlists, input_file.as_ref())?;
    claim_output(output, overwrite)
}

/// Refuses two of `files` that are one file, a playlist's segments crossing another file,
/// and each file that can't be written, is the input, or is not a regular file.
fn check_files(
    files: &[(&str, String)],
    playlists: &[&str],
    input_file: Option<&InputFile>,
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
        sink::hls::refuse_crossing(playlists, &others).map_err(anyhow::Error::msg)?;
    }
    #[cfg(not(feature = "ffmpeg"))]
    let _ = playlists;
    for (flag, path) in files {
        paths::check_name(flag, path).map_err(anyhow::Error::msg)?;
        if let Some(input) = input_file {
            paths::refuse_input_file(flag, path, input).map_err(anyhow::Error::msg)?;
        }
        paths::refuse_special(flag, path).map_err(anyhow::Error::msg)?;
        if *flag != "--output" {
            paths::check_writable(flag, path).map_err(anyhow::Error::msg)?;
        }
    }
    Ok(())
}

/// Claims `output`: a video file (`VideoClaim`), or an image sequence's folder (locked, its
/// files checked against `overwrite`, the folder proven writable).
fn claim_output(output: Option<&OutputSpec>, overwrite: Overwrite) -> Result<Claimed> {
    Ok(match output {
        Some(spec @ OutputSpec::Video { path, .. }) if !spec.is_stream() => Claimed::Video(
            VideoClaim::new("--output", path, overwrite).map_err(anyhow::Error::msg)?,
        ),
        Some(OutputSpec::Sequence { pattern, .. }) => {
            let lock = claim::FolderLock::new("--output", pattern.folder(), &pattern.path(0))
                .map_err(anyhow::Error::msg)?;
            claim::check_sequence("--output", pattern, overwrite).map_err(anyhow::Error::msg)?;
            let probe = pattern
                .folder()
                .join(format!(".framepipe-{}.probe", std::process::id()));
            paths::check_writable("--output", &probe.to_string_lossy()).map_err(|e| {
                anyhow::anyhow!(
                    "--output '{}': its folder '{}' can't be written ({})",
                    pattern.path(0),
                    pattern.folder().display(),
                    e.rsplit(": ").next().unwrap_or_default()
                )
            })?;
            Claimed::Folder(lock)
        }
        _ => Claimed::Nothing,
    })
}

/// Claims every HLS output among `streams` (`sink::hls::claim`: its folder made, its
/// names checked against the inputs and, without `-y`, against what exists); their
/// playlists' names.
fn claim_playlists<'a>(
    streams: &'a [OutputSpec],
    overwrite: Overwrite,
    inputs: &[InputFile],
) -> Result<Vec<&'a str>> {
    let mut playlists = Vec::new();
    for stream in streams {
        if let OutputSpec::Video {
            path,
            container: sink::Container::Hls,
            ..
        } = stream
        {
            #[cfg(feature = "ffmpeg")]
            sink::hls::claim(path, overwrite, inputs).map_err(anyhow::Error::msg)?;
            let _ = (overwrite, inputs);
            playlists.push(path.as_str());
        }
    }
    Ok(playlists)
}

/// Refuses an input's output (or the mosaic's: `recording`) that is another input's file
/// (each input's part checks its own input), and two outputs that are one file.
fn refuse_crossed_files(inputs: &[InputPlan], recording: Option<&Outputs>) -> Result<()> {
    let files: Vec<InputFile> = inputs.iter().filter_map(input_file).collect();
    let outputs: Vec<&str> = inputs
        .iter()
        .map(|i| &i.outputs)
        .chain(recording)
        .flat_map(|o| o.named.iter().map(String::as_str))
        .filter(|o| !o.contains("://") && *o != "-")
        .collect();
    for (k, out) in outputs.iter().enumerate() {
        for input in &files {
            paths::refuse_input_file("--output", out, input).map_err(anyhow::Error::msg)?;
        }
        if outputs[..k].iter().any(|o| paths::same_file(o, out)) {
            bail!("--output: two inputs would write '{out}'");
        }
    }
    #[cfg(feature = "ffmpeg")]
    {
        use crate::sink::{hls, Container};
        let (playlists, others): (Vec<&str>, Vec<&str>) = outputs
            .iter()
            .partition(|o| Container::of_path(o) == Some(Container::Hls));
        for p in &playlists {
            hls::refuse_inputs(p, &files).map_err(anyhow::Error::msg)?;
        }
        hls::refuse_crossing(&playlists, &others).map_err(anyhow::Error::msg)?;
    }
    Ok(())
}
