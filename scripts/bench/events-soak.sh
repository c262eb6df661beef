#!/usr/bin/env bash
# Events soak (issue 62; not in CI): 8 live cameras (ffmpeg serving its test pattern, a box
# moving across it, as MPEG-TS over HTTP, H.264 with AAC) run SECONDS (default 120) with
# `--detect --motion --clip --line --events`, the detector the tests' 64×64 YOLO model
# (tests/support/yolo_model.py: cheap, so that the video path is what is measured). Samples
# the process's memory every 10 s; prints the frames captured and dropped, the detections
# skipped, the events and clips, and the memory against the documented cost (32 MB of packet
# cache a camera at most).
#   scripts/bench/events-soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_RUN=${1:-120}
BIN=${FRAMEPIPE_BIN:-target/release/framepipe}
[ -x "$BIN" ] || cargo build --release -q
T=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$T"' EXIT
target/ortvenv/bin/python tests/support/yolo_model.py "$T/yolo.onnx" v8 64
: > "$T/cameras.txt"
for k in 0 1 2 3 4 5 6 7; do
    port=$((18600 + k))
    ffmpeg -v error -re -f lavfi -i "testsrc2=s=640x360:r=25,drawbox=x=mod(t*80\,600):y=150:w=40:h=40:c=black:t=fill" \
        -f lavfi -i "sine=f=$((300 + 50 * k))" -c:v libx264 -preset ultrafast -g 25 -c:a aac \
        -f mpegts -listen 1 "http://127.0.0.1:$port/live.ts" &
    pids+=($!)
    echo "cam-$k = http://127.0.0.1:$port/live.ts" >> "$T/cameras.txt"
done
sleep 1
"$BIN" --headless --inputs "$T/cameras.txt" --detect "$T/yolo.onnx" --motion \
    --line door:320,360,320,0 --events "$T/events.jsonl" \
    --clip "$T/clips/{name}-{event}-{track}.mp4" --pre 5 --post 10 \
    --summary-json "$T/summary.json" > "$T/run.log" 2>&1 &
run=$!
pids+=($run)
echo "seconds rss_mb"
for ((s = 10; s <= SECONDS_RUN; s += 10)); do
    sleep 10
    awk -v s="$s" '/VmRSS/ {printf "%d %.0f\n", s, $2 / 1024}' "/proc/$run/status"
done
kill -INT "$run"
wait "$run" || true
python3 - "$T" <<'PY'
import json, os, sys
t = sys.argv[1]
s = json.load(open(os.path.join(t, "summary.json")))
f, d = s["frames"], s["detection"]
skipped = sum(i["skipped"] for i in d["inputs"])
print(f"frames: {f['captured']} captured, {f['dropped']} dropped; detection: {d['frames']} frames "
      f"in {d['inferences']} inferences, {skipped} skipped; events: {d['events']}")
clips = os.listdir(os.path.join(t, "clips")) if os.path.isdir(os.path.join(t, "clips")) else []
print(f"clips: {len(clips)}")
PY
