#!/usr/bin/env bash
# There (the GPU machine), once `scripts/gpu.sh ort-join` unpacked ONNX Runtime's CUDA build
# and gpu-carry/detect/ came (framepipe built without OpenCV and FFmpeg, the models, and
# scenes.y4m.xz: 40 frames of 960x540 photographs and text):
#
#   scripts/bench/detect-gpu.sh [REPEAT]
#
# For each model (nudenet's 320n.onnx, a YOLOv8n of 18 classes with dynamic axes, and
# PP-OCRv4's detector): the same frames through ONNX Runtime's CPU provider and its CUDA
# provider, with the CPU backend and with the CUDA backend (the picture fitted on the
# device); the boxes compared (scripts/bench/detect-compare.py: every CPU box matched at
# IoU >= 0.9 with the same label), the bytes of fitted pictures brought to the host (0 where
# the CUDA backend hands each batch to the CUDA provider in device memory), and the rate of each (the frames repeated REPEAT times,
# 10 by default: every frame detected, as frames piped in are). Logs and the table in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
. gpu-ort/env.sh
D=gpu-carry/detect
out=${OUT:-/tmp/detect-gpu}
mkdir -p "$out"
repeat=${1:-10}
python3 - "$D/scenes.y4m.xz" /tmp/scenes.y4m "$repeat" <<'PY'
import lzma, sys
data = lzma.open(sys.argv[1]).read()
head, rest = data.split(b"\n", 1)
open(sys.argv[2], "wb").write(head + b"\n" + rest * int(sys.argv[3]))
PY
"$D/framepipe" doctor 2>&1 | grep -iE "provider|onnx|gpu" | tee "$out/doctor.txt"
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a "$out/doctor.txt"
printf '| model | backend | provider | frames | seconds | frames/s | fitted bytes to the host | boxes against the CPU provider |\n' >"$out/table.md"
printf '| --- | --- | --- | --- | --- | --- | --- | --- |\n' >>"$out/table.md"
for model in 320n ch_PP-OCRv4_det_infer; do
    for backend in cpu cuda; do
        for provider in cpu cuda; do
            name=$model-$backend-$provider
            "$D/framepipe" --input - --headless --backend "$backend" --detect "$D/$model.onnx" \
                --detect-provider "$provider" --detections "$out/$name.jsonl" \
                --summary-json "$out/$name.json" -y </tmp/scenes.y4m >"$out/$name.log" 2>&1
            echo "$name: exit $?"
            against=$(python3 scripts/bench/detect-compare.py "$out/$model-cpu-cpu.jsonl" \
                "$out/$name.jsonl" 2>&1 | cut -d';' -f1)
            python3 - "$out/$name.json" "$model" "$backend" "$provider" "$against" "$out/$name.log" >>"$out/table.md" <<'PY'
import json, sys
try:
    s = json.load(open(sys.argv[1]))
    d = s.get("detection") or {}
    n = d.get("frames", 0)
    down = d.get("fitted_bytes_to_host")
    down = "(fitted on the CPU)" if down is None else down
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | {n} | {s['elapsed_s']:.2f} | {n / s['elapsed_s']:.1f} | {down} | {sys.argv[5]} |")
except (OSError, KeyError, ValueError):
    said = open(sys.argv[6]).read().strip().splitlines()[-1:]
    print(f"| {sys.argv[2]} | {sys.argv[3]} | {sys.argv[4]} | failed: {' '.join(said)} | | | | |")
PY
        done
    done
done
cat "$out/table.md"
