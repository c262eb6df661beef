#!/usr/bin/env bash
# There (the GPU machine), after `scripts/gpu.sh ort-join`, with gpu-carry/detect/ carried:
# a wall of N test-pattern cameras (1080p, 30 fps, live) through the CUDA backend, nudenet's
# YOLOv8n (320) on the CUDA provider at RATE detections a second of each camera, for S
# seconds; one line: detections a second, inferences and their mean batch, due frames the
# detector skipped, video frames dropped.
#
#   scripts/bench/detect-wall.sh N RATE [S] [BINARY]   (DETECT_SIZE=640x640: the model fed
#                                                      at that size, YOLOv8n-640's cost)
set -euo pipefail
cd "$(dirname "$0")/../.."
. gpu-ort/env.sh
n=$1 rate=$2 secs=${3:-20} bin=${4:-gpu-carry/detect/framepipe}
args=()
for _ in $(seq "$n"); do args+=(--input pattern:1920x1080:30); done
[ -n "${DETECT_SIZE:-}" ] && args+=(--detect-size "$DETECT_SIZE")
json=$(mktemp --suffix=.json) log=$(mktemp)
"$bin" "${args[@]}" --headless --backend cuda --detect gpu-carry/detect/320n.onnx \
    --detect-provider cuda --detect-fps "$rate" --frames $((secs * 30)) \
    --summary-json "$json" >"$log" 2>&1 || { echo "$bin: $n cameras at $rate/s failed:"; tail -3 "$log"; exit 1; }
python3 - "$json" "$n" "$rate" "$bin" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
d = s["detection"]
skipped = sum(i.get("skipped", 0) for i in d["inputs"])
t = s["elapsed_s"]
print(f"{sys.argv[4]}: {sys.argv[2]} cameras at {sys.argv[3]}/s: {d['frames'] / t:.1f} detections/s "
      f"({d['frames']} in {t:.1f} s), {d['inferences']} inferences of {d['frames'] / max(d['inferences'], 1):.1f}, "
      f"{skipped} due skipped, {s['frames']['dropped']} video frames dropped, "
      f"lag p99 {(d.get('lag_ms') or {}).get('p99', 0):.1f} ms")
PY
