//! The `framepipe` command: parses the command line, runs the command, and turns the outcome
//! into an exit code (0: done or stopped by the user; 1: any error, bad arguments included;
//! 130: aborted by a second stop signal; a stop signal at any moment is a clean stop, exit
//! 0). A run that ended because its share of `--inputs` changed starts again: the process
//! executes its own command line anew (same pid), unless a stop signal came.

use clap::Parser;
use framepipe::cli::{Cli, Command};
use framepipe::msg::{self, Level};

/// A stop signal that came before `main`, while the shared libraries initialised.
static EARLY_SIGNAL: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

fn early_signal() {
    EARLY_SIGNAL.store(1, std::sync::atomic::Ordering::SeqCst);
}

/// Runs before the shared libraries' initialisers (OpenCV's, Qt's, GStreamer's take tens of
/// milliseconds): from then on a stop signal is remembered instead of killing the process.
extern "C" fn catch_early_signals() {
    // SAFETY: `early_signal` only stores to an atomic, which is async-signal-safe.
    unsafe { framepipe::stop::catch_early_signals(early_signal) };
}

#[used]
#[link_section = ".preinit_array"]
static CATCH_EARLY_SIGNALS: extern "C" fn() = catch_early_signals;

fn main() {
    // First of all: from here on any stop signal is a clean stop, never a kill.
    if let Err(e) = framepipe::stop::Stop::install_signal_handler() {
        framepipe::say!("framepipe: error: installing the signal handlers: {e:#}");
        exit(1);
    }
    if EARLY_SIGNAL.load(std::sync::atomic::Ordering::SeqCst) != 0
        || framepipe::stop::hangup_while_starting_stops()
    {
        framepipe::stop::note_early_signal();
        framepipe::info!("a stop signal came while framepipe started: stopping");
    }
    let cli = parsed();
    say_as_asked(&cli);
    let mut left_behind = false;
    // Held until the process ends: an abort after the run returned still reports it.
    let mut _until_exit = None;
    let result = match &cli.command {
        None => {
            // The run's CUDA objects are freed by the kernel as the process ends, not one
            // by one by the driver (`backend::teardown`; the benchmarks' pair sets
            // FRAMEPIPE_FULL_TEARDOWN to free them as an embedding program does).
            if std::env::var_os("FRAMEPIPE_FULL_TEARDOWN").is_none() {
                framepipe::backend::teardown::leave_to_exit();
            }
            let ran = framepipe::app::run(framepipe::plan::Start::new(cli.run));
            left_behind = ran.left_behind;
            if ran.restart && ran.result.is_ok() && !framepipe::stop::signalled() {
                start_again();
            }
            _until_exit = Some(ran.until_exit);
            ran.result
        }
        Some(Command::Bench(args)) => framepipe::bench::run(args),
        Some(Command::Doctor) => {
            use framepipe::plan::OpenCvPart;
            framepipe::app::full_build::hand_over(Some(OpenCvPart::Doctor));
            framepipe::doctor::run()
        }
        #[cfg(feature = "ffmpeg")]
        Some(Command::Front(args)) => framepipe::front::run(args),
        #[cfg(not(feature = "ffmpeg"))]
        Some(Command::Front(_)) => Err(anyhow::anyhow!(
            "this framepipe was built without its web server (the ffmpeg feature): no front"
        )),
        Some(Command::CheckKernel(args)) => args
            .chain()
            .map_err(anyhow::Error::from)
            .and_then(|chain| framepipe::backend::check::command(&chain, &args.size)),
    };
    match result {
        Ok(()) => exit_after_run(0, left_behind),
        Err(e) => {
            // An output closed under the run by an abort is no error of the run's.
            framepipe::stop::yield_to_abort();
            // One line, whatever a library's message holds (OpenCV's end in a line of codes).
            let text = format!("{e:#}");
            let line = text.lines().map(str::trim).filter(|l| !l.is_empty());
            let line = line.collect::<Vec<_>>().join(" ");
            framepipe::say!("framepipe: error: {}", shorten_lines(&line, 1000));
            exit_after_run(1, left_behind);
        }
    }
}

/// The command line, parsed; `--help` and `--version` print and exit 0, any other error is
/// one line and exit 1.
fn parsed() -> Cli {
    match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            if !e.use_stderr() {
                let _ = e.print();
                exit(0);
            }
            // An error quotes the value it refuses: a huge one (a 13 KB chain) is cut short.
            let line = usage_error_line(&e.to_string());
            // (600: framepipe's own list of the known filters, 400 characters, stays whole.)
            framepipe::say!("framepipe: error: {}", shorten_lines(&line, 600));
            exit(1);
        }
    }
}

/// framepipe's lines as -q and -v ask, and the libraries' (OpenCV's warnings: camera
/// probing, GStreamer) only with -v.
fn say_as_asked(cli: &Cli) {
    let level = if cli.run.quiet {
        Level::Quiet
    } else if cli.run.verbose {
        Level::Verbose
    } else {
        Level::Normal
    };
    msg::set_level(level);
    if level < Level::Verbose && std::env::var_os("OPENCV_LOG_LEVEL").is_none() {
        framepipe::source::quiet_libraries(level == Level::Quiet);
    }
}

/// Replaces this process by a new run of the same command line (its `--inputs` share
/// changed, and the run ended cleanly): the same process id, so a supervisor or a container
/// sees no exit; every descriptor framepipe opened is closed on exec.
fn start_again() -> ! {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "framepipe".into());
    let mut again = std::process::Command::new("/proc/self/exe");
    let err = framepipe::stop::exec(again.arg0(arg0).args(args));
    if err.kind() == std::io::ErrorKind::Interrupted {
        exit(0); // a stop signal came: the run ended cleanly, and stays ended
    }
    framepipe::say!("framepipe: error: starting again with the new inputs: {err}");
    exit(1)
}

/// Ends the process.
fn exit(code: i32) -> ! {
    exit_after_run(code, false)
}

/// Ends the process after a run. Where a thread was left blocked inside a source
/// (`left_behind`: a stalled stream), exit-time destructors (OpenCV's, GStreamer's) must not
/// run under its feet, and where the run's CUDA objects were left to the kernel
/// (`backend::teardown`) the driver's exit handler must not tear them down (`stop::end`).
fn exit_after_run(code: i32, left_behind: bool) -> ! {
    framepipe::stop::end(code, left_behind || framepipe::backend::teardown::kept())
}

/// clap's usage error (an `error:` line, hints, a usage block) as one line, as every other
/// error of framepipe is: the cause, its hints in brackets, and where the options are listed.
fn usage_error_line(text: &str) -> String {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("bad arguments");
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    for more in lines {
        if more.starts_with("Usage:") || more.starts_with("For more information") {
            break;
        }
        line.push(' ');
        line.push_str(more);
    }
    line + " (framepipe --help lists the options)"
}

/// `text` with every line longer than `max` characters cut in the middle, saying how long it
/// was.
fn shorten_lines(text: &str, max: usize) -> String {
    text.lines()
        .map(|line| {
            let n = line.chars().count();
            if n <= max {
                return line.to_string();
            }
            let head: String = line.chars().take(max / 2).collect();
            let tail: String = line.chars().skip(n - max / 4).collect();
            format!(
                "{head} … ({} characters left out) … {tail}",
                n - max / 2 - max / 4
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_usage_error_is_one_line() {
        let clap = "error: invalid value 'nosuch' for '--decode <DECODE>'\n  [possible values: cpu, opencv, gpu, auto]\n\nFor more information, try '--help'.\n";
        assert_eq!(
            usage_error_line(clap),
            "invalid value 'nosuch' for '--decode <DECODE>' [possible values: cpu, opencv, gpu, auto] (framepipe --help lists the options)"
        );
        let unknown = "error: unexpected argument '--x' found\n\n  tip: to pass '--x' as a value, use '-- --x'\n\nUsage: framepipe [OPTIONS]\n";
        let line = usage_error_line(unknown);
        assert!(!line.contains('\n') && line.contains("tip:"), "{line}");
    }
}
