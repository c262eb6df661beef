//! The first of the plan's two steps: the command line's run taken in (`Start`), before the
//! inputs are listed. It answers what the app asks before there is a `RunPlan` (the
//! roster's flags, the browser view of a process with no input, the summary's file, the
//! OpenCV part the window needs) and then becomes the plan (`Start::plan`), so that no room
//! outside `plan/` reads a flag.
//!
//! Invariants: the flags are read here and in `run.rs` only; a run that asked for a window
//! where none can be shown goes on headless (`headless_because` says why, once the plan is
//! checked); an embedded run (the Python package) hands frames over and captures no graph.

use super::opencv::OpenCvPart;
use super::run::{check_serve, Serve};
use super::shard::{Environment, Roster, ShardError};
use super::{PlanError, RunPlan};
use crate::cli::RunArgs;
use crate::pixel::PixelFormat;

/// The run's flags, taken in (module doc).
#[derive(Debug)]
pub struct Start {
    args: RunArgs,
    window: Option<OpenCvPart>,
    headless_because: Option<&'static str>,
}

impl Start {
    /// The run `args` say. A window asked for (no `--headless`) where a display is named
    /// is OpenCV's part; with no display to show it on, or a build without a window, the
    /// run goes on headless, as `--headless` does.
    pub fn new(mut args: RunArgs) -> Self {
        let display = crate::host::display_named(false);
        let window = (!args.view.headless && display).then_some(OpenCvPart::Window);
        let headless_because = match args.view.headless {
            true => None,
            false => crate::display::why_no_window(),
        };
        args.view.headless |= headless_because.is_some();
        Self {
            args,
            window,
            headless_because,
        }
    }

    /// The same run for a program that embeds framepipe: every frame is also handed over in
    /// `format`, and no CUDA graph is captured (the program runs CUDA work of its own on the
    /// same context, and a thread that synchronizes it breaks a capture).
    pub fn embedded(mut self, format: PixelFormat) -> Self {
        self.args.engine.handover = Some(format);
        self.args.engine.no_graphs = true;
        self
    }

    /// The OpenCV part a window needs, where one is asked for and a display is named.
    pub fn window_part(&self) -> Option<OpenCvPart> {
        self.window
    }

    /// Why the run goes on headless though `--headless` was not given.
    pub fn headless_because(&self) -> Option<&'static str> {
        self.headless_because
    }

    /// `--summary-json`'s file.
    pub fn summary_json(&self) -> Option<String> {
        self.args.reports.summary_json.clone()
    }

    /// The `--input`s as given (the roster's watch compares the list with them).
    pub fn inputs_given(&self) -> Vec<String> {
        self.args.sources.input.clone()
    }

    /// The inputs listed by `--input` and `--inputs`, and this process's `--shard` of them.
    pub fn roster(&self, env: &Environment) -> Result<Roster, ShardError> {
        Roster::gather(
            &self.args.sources.input,
            self.args.sources.inputs.as_deref(),
            self.args.sources.shard.as_deref(),
            env,
        )
    }

    /// The browser view's settings, where `--serve` asks for it (a process with no input of
    /// its own serves them too).
    pub fn serve(&self) -> Result<Option<Serve>, PlanError> {
        check_serve(&self.args)
    }

    /// The plan of this process's share of `roster` (`RunPlan::from_args`).
    pub fn plan(self, roster: &Roster) -> Result<RunPlan, PlanError> {
        RunPlan::from_args(self.args, roster)
    }
}
