//! A run handed to the build with OpenCV. A build without OpenCV (`--no-default-features
//! --features ffmpeg`) starts in a fifth of the OpenCV build's time: the dynamic loader binds
//! the 256 shared libraries that OpenCV's highgui, videoio and imgcodecs bring (Qt, GDAL,
//! GStreamer) before `main`, about 0.09 s on a 2-core machine. Told where the OpenCV build is
//! (`FRAMEPIPE_OPENCV_BUILD`, as `scripts/run.sh` does), a build without OpenCV replaces
//! itself by that build, with the same arguments, where its plan needs OpenCV
//! (`plan::opencv`), and runs every other plan itself.
//!
//! Invariants: the hand-over comes after the flags are checked and before anything is
//! opened, read, claimed or started, so the OpenCV build starts the run from nothing;
//! it happens at most once (the OpenCV build gets the environment without the variable,
//! and never hands over itself); a stop signal is never lost across it (`stop::exec`);
//! where it fails (a wrong path), the run goes on in this build, said once, as a run that
//! was never handed over would (refused where this build lacks the part).

use std::ffi::OsString;

use crate::plan::OpenCvPart;

/// The environment variable that names the OpenCV build.
pub const VAR: &str = "FRAMEPIPE_OPENCV_BUILD";

/// Replaces the process by the OpenCV build where `part` needs it and one is named; returns
/// where the run stays in this build.
pub fn hand_over(part: Option<OpenCvPart>) {
    if cfg!(feature = "opencv") {
        return;
    }
    let Some(part) = part else { return };
    let Some(build) = std::env::var_os(VAR).filter(|b| !b.is_empty()) else {
        return;
    };
    crate::debug!(
        "handing the run to the OpenCV build ({}), for {part}",
        std::path::Path::new(&build).display()
    );
    let err = crate::stop::exec(&mut command(&build));
    if err.kind() != std::io::ErrorKind::Interrupted {
        crate::warn!(
            "{VAR}={}: {err}; going on without OpenCV",
            std::path::Path::new(&build).display()
        );
    }
}

/// This process's command line, run by `build`, without the variable.
fn command(build: &OsString) -> std::process::Command {
    use std::os::unix::process::CommandExt;
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_else(|| "framepipe".into());
    let mut cmd = std::process::Command::new(build);
    cmd.arg0(arg0).args(args).env_remove(VAR);
    cmd
}
