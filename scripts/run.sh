#!/usr/bin/env bash
# Sets up (once) and runs framepipe; arguments go to framepipe, and paths in them are the
# caller's (the script does not change folder: files and frames saved with s land where you
# ran it).
#   scripts/run.sh                       webcam, or the test pattern where there is none
#   scripts/run.sh --input clip.mp4 --headless --output out.mp4 --filter gray
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
. "$top/scripts/setup.sh"
setup_packages
setup_onnxruntime
# Two builds: the full one (OpenCV: the window, cameras, GStreamer, still images) and one
# without OpenCV, which starts in a fifth of the time (the dynamic loader binds none of
# OpenCV's 256 libraries). The second runs; where a run needs OpenCV it hands the run to
# the first before opening anything (FRAMEPIPE_OPENCV_BUILD, src/app/full_build.rs).
# Each is built only where a source is newer than it, saying so first; cargo then shows its
# progress, and a wait for another build's lock says so rather than hanging silent.
sources=("$top/src" "$top/kernels" "$top/build.rs" "$top/Cargo.toml" "$top/Cargo.lock")
build() {
    local binary=$1
    shift
    if [ -x "$binary" ] && [ -z "$(find "${sources[@]}" -newer "$binary" -print -quit 2>/dev/null)" ]; then
        return
    fi
    echo "framepipe: building… ($binary: the sources changed or it was never built)" >&2
    if ! cargo build --release --manifest-path "$top/Cargo.toml" "$@" 2>&1 |
        { grep -vE '^\s+(Compiling|Finished|Building)' >&2 || true; }; then
        exit 1
    fi
    touch "$binary"
}
build "$top/target/release/framepipe"
build "$top/target/ffonly/release/framepipe" --no-default-features --features ffmpeg \
    --target-dir "$top/target/ffonly"
export FRAMEPIPE_OPENCV_BUILD="$top/target/release/framepipe"
exec "$top/target/ffonly/release/framepipe" "$@"
