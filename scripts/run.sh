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
cargo build --release --quiet --manifest-path "$top/Cargo.toml"
exec "$top/target/release/framepipe" "$@"
