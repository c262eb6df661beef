//! The `framepipe` command: parses the command line, runs the command, and turns the outcome
//! into an exit code (0: done or stopped by the user; 1: any error, bad arguments included;
//! 130: aborted by a second Ctrl-C).

use clap::Parser;
use framepipe::cli::{Cli, Command};
use framepipe::msg::{self, Level};

fn main() {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version print to stdout and succeed; every other error exits 1.
            let _ = e.print();
            exit(if e.use_stderr() { 1 } else { 0 });
        }
    };
    let level = if cli.run.quiet {
        Level::Quiet
    } else if cli.run.verbose {
        Level::Verbose
    } else {
        Level::Normal
    };
    msg::set_level(level);
    if level < Level::Verbose && std::env::var_os("OPENCV_LOG_LEVEL").is_none() {
        // OpenCV's own warnings (camera probing, GStreamer) only with -v.
        framepipe::source::quiet_opencv();
    }
    let result = match &cli.command {
        None => framepipe::app::run(&cli.run),
        Some(Command::Bench(args)) => framepipe::bench::run(args),
        Some(Command::Doctor) => framepipe::doctor::run(),
        Some(Command::CheckKernel(args)) => framepipe::backend::check::command(args),
    };
    match result {
        Ok(()) => exit(0),
        Err(e) => {
            framepipe::say!("framepipe: error: {e:#}");
            exit(1);
        }
    }
}

/// Ends the process. Where a thread was left blocked inside a source (a stalled stream),
/// exit-time destructors (OpenCV's, GStreamer's) must not run under its feet: `_exit` then.
fn exit(code: i32) -> ! {
    if framepipe::pipeline::left_a_thread_behind() {
        // SAFETY: _exit only ends the process; standard output and error are unbuffered or
        // flushed by msg's writers.
        unsafe { libc::_exit(code) }
    }
    std::process::exit(code)
}
