#!/usr/bin/env bash
# Sets up (once) and runs framepipe; arguments go to framepipe.
#   scripts/run.sh                       webcam, or the test pattern where there is none
#   scripts/run.sh --input clip.mp4 --headless --output out.mp4 --filter gray
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
setup_packages
cargo build --release --quiet
exec target/release/framepipe "$@"
