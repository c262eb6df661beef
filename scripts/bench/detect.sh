#!/usr/bin/env bash
# --detect inside the pipeline against ONNX Runtime alone on the same model and batches,
# and against framepipe without --detect (issue 61's benchmark), on this machine: PP-OCRv4's
# text detector (the model scripts/setup.sh installs under target/ort) on every frame of
# a 640x360 H.264 clip. ONNX Runtime alone is PyPI's onnxruntime in target/ortvenv, its
# session made with the defaults (as framepipe makes its own), fed tensors prepared
# beforehand by rapidocr's own DetPreProcess (inputs already in memory; not timed), its
# first run (set-up) left out. framepipe's rate is its steady one, as ONNX Runtime's is:
# FRAMES more frames over the time they add (a run of 2×FRAMES against one of FRAMES), so
# that the process's start, the model's loading and the first inference count in neither.
# Each of ROUNDS rounds runs the three in turn; the medians of the frames a second are
# compared.
#   scripts/bench/detect.sh [ROUNDS] [FRAMES]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-3}
FRAMES=${2:-40}
BIN=${FRAMEPIPE_BIN:-target/release/framepipe}
PY=target/ortvenv/bin/python
MODEL=target/ort/ch_PP-OCRv4_det_infer.onnx
[ -x "$BIN" ] || cargo build --release -q
[ -f "$MODEL" ] || { echo "no $MODEL: run scripts/setup.sh rapidocr" >&2; exit 1; }
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
text="text:GATE 3,x=40,y=40,size=48,text:LOADING BAY,x=200,y=220,size=40"
"$BIN" -q -i pattern:640x360:25 --frames "$FRAMES" -f "$text" -o "$T/in.mp4"
"$BIN" -q -i pattern:640x360:25 --frames $((2 * FRAMES)) -f "$text" -o "$T/in2.mp4"
cat > "$T/ort.py" <<'PY'
import sys, time
sys.path.insert(0, "/usr/lib/python3/dist-packages")
import cv2, numpy as np, onnxruntime as ort
from rapidocr_onnxruntime.ch_ppocr_det.utils import DetPreProcess
clip, model = sys.argv[1], sys.argv[2]
cap, tensors = cv2.VideoCapture(clip), []
pre = DetPreProcess(736, "min", [0.5, 0.5, 0.5], [0.5, 0.5, 0.5])
while True:
    ok, img = cap.read()
    if not ok:
        break
    tensors.append(pre(img))
s = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
name = s.get_inputs()[0].name
s.run(None, {name: tensors[0]})  # the first run sets up
t = time.perf_counter()
for x in tensors:
    s.run(None, {name: x})
print(len(tensors) / (time.perf_counter() - t))
PY
seconds() { # wall time of a framepipe run
    local t0 t1
    t0=$(date +%s.%N)
    "$BIN" -q --headless "$@" >/dev/null 2>&1
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}'
}
fps_of() { # the steady frames a second of a framepipe run with these flags: FRAMES more
    local one two
    one=$(seconds -i "$T/in.mp4" "$@")
    two=$(seconds -i "$T/in2.mp4" "$@")
    awk -v n="$FRAMES" -v a="$one" -v b="$two" 'BEGIN {print n / (b - a)}'
}
: > "$T/det"; : > "$T/ort"; : > "$T/plain"
for _ in $(seq "$ROUNDS"); do
    fps_of --detect "$MODEL" >> "$T/det"
    "$PY" "$T/ort.py" "$T/in.mp4" "$MODEL" >> "$T/ort"
    fps_of >> "$T/plain"
done
median() { sort -g "$1" | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
d=$(median "$T/det"); o=$(median "$T/ort"); p=$(median "$T/plain")
echo "framepipe --detect:           ${d} fps (decode, prepare, infer, decode boxes)"
echo "ONNX Runtime alone (Python):  ${o} fps (inference on tensors in memory)"
echo "framepipe without --detect:   ${p} fps"
awk -v d="$d" -v o="$o" -v p="$p" 'BEGIN {
    low = (o < p) ? o : p
    printf "ratio --detect / lower of the two: %.2f (target: >= 0.90)\n", d / low }'
