#!/usr/bin/env bash
# Soak (not in CI): framepipe in a window under Xvfb with a video file output for MINUTES
# (default 10) while the window's keys cycle (filter presets 1-9, p page-locking, b/B bands,
# space pause/resume, h overlay), sampling the process's memory every 10 s. Ends with q and
# checks the exit code and that the file holds the frames the summary reports.
#   scripts/bench/soak.sh [MINUTES]          log and samples in $OUT (default: a fresh folder)
# The GPU machine's soak (CUDA backend, 4K, no window) is `scripts/gpu.sh soak`.
set -euo pipefail
cd "$(dirname "$0")/../.."
. scripts/setup.sh
setup_packages xvfb xauth xdotool ffmpeg
cargo build --release --quiet
MINUTES=${1:-10}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
DISPLAY_NUM=:$((90 + RANDOM % 100))
Xvfb "$DISPLAY_NUM" -screen 0 1280x800x24 -nolisten tcp >/dev/null 2>&1 &
XVFB=$!
trap 'kill $XVFB 2>/dev/null || true' EXIT
sleep 1
export DISPLAY=$DISPLAY_NUM XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
target/release/framepipe --input pattern --size 960x540 --fps 30 --output "$OUT/soak.mp4" \
    >"$OUT/framepipe.log" 2>&1 &
PID=$!
xdotool search --sync --onlyvisible --name '^framepipe$' >/dev/null
echo "soak: $MINUTES min, pid $PID, output $OUT/soak.mp4" | tee "$OUT/samples.txt"
KEYS=(1 2 3 4 5 6 7 8 9 p b B h space space p h)
end=$((SECONDS + MINUTES * 60))
i=0
while [ $SECONDS -lt $end ]; do
    for _ in 1 2 3 4 5; do
        xdotool search --name '^framepipe$' key "${KEYS[i % ${#KEYS[@]}]}" 2>/dev/null || true
        i=$((i + 1))
        sleep 2
    done
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$PID/status")
    echo "t=$((SECONDS)) s  rss=$((rss / 1024)) MiB  keys=$i" | tee -a "$OUT/samples.txt"
done
xdotool search --name '^framepipe$' key q
wait $PID && code=0 || code=$?
written=$(sed -n 's/^frames: .* processed, \([0-9]*\) written.*/\1/p' "$OUT/framepipe.log")
held=$(ffprobe -v error -count_frames -show_entries stream=nb_read_frames -of csv=p=0 "$OUT/soak.mp4")
echo "exit $code; summary: $(grep '^frames:' "$OUT/framepipe.log"); file holds $held frames" |
    tee -a "$OUT/samples.txt"
first=$(awk 'NR==3 {sub("rss=", "", $3); print $3}' "$OUT/samples.txt")
last=$(grep '^t=' "$OUT/samples.txt" | tail -1 | awk '{sub("rss=", "", $3); print $3}')
echo "rss after 20 s: $first MiB, at the end: $last MiB" | tee -a "$OUT/samples.txt"
[ "$code" = 0 ] && [ "$held" = "$written" ]
