#!/usr/bin/env bash
# Several inputs on the GPU machine (device tool, carry gpu-bundle; run from the repository
# root): issue 21's measurements and the per-input exactness check, logs in $OUT.
#
#   scripts/bench/several.sh exact     4 inputs of other sizes and formats at once, each input's
#                                frames against a run of it alone (bands 1, 4, 16)
#   scripts/bench/several.sh live      16 inputs of 1080p at 30 fps, 10 s: drops, p99 latency
#   scripts/bench/several.sh unpaced   16 inputs of 1080p unpaced (BGR, then I420) beside one input
#                                and the bench's copy bound, in the same run
#   scripts/bench/several.sh many      64 inputs of 640x360 at 25 fps, 10 s: drops, start-up
#   scripts/bench/several.sh fifos     16 inputs of 1080p at 30 fps from 16 ffmpeg processes (-re,
#                                testsrc2) through named pipes, 10 s: drops, p99 latency
#   scripts/bench/several.sh memcpy    the host's memory bandwidth as N threads fill rings
#   scripts/bench/several.sh trace FMT one input and 16 inputs of 1080p FMT unpaced (slots filled
#                                once), their last 300 frames traced into $OUT/trace-*.json
#   scripts/bench/several.sh all       exact, live, unpaced, many
# Every run's own messages go to $OUT/several.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
FP=${FRAMEPIPE_BIN:-$PWD/gpu-bundle/framepipe}
BACKEND=${BACKEND:-cuda}
OUT=${OUT:-/tmp/framepipe-out}
mkdir -p "$OUT"
W=$(mktemp -d)

# inputs N SPEC: "--input SPEC" N times.
inputs() {
    local i
    for ((i = 0; i < $1; i++)); do printf -- '--input %s ' "$2"; done
}

# The per-input figures of a summary file, one line each.
per_input() {
    python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
ins = s["inputs"]
p99 = max(i["latency_ms"]["p99"] for i in ins)
drops = sum(i["dropped"] for i in ins)
print(f"  {len(ins)} inputs, {s['frames']['processed']} frames in {s['elapsed_s']:.2f} s = {s['fps']:.0f} fps together; dropped {drops}; latency p99 worst input {p99:.3f} ms, mean {sum(i['latency_ms']['mean'] for i in ins)/len(ins):.3f} ms")
PY
}

exact() {
    local specs=(pattern:1920x1080:bgr24:0 pattern:1280x720:nv12:0 pattern:640x360:i420:0 pattern:3840x2160:i420:0)
    local n bands failed=0 args=()
    for n in "${!specs[@]}"; do
        args+=(--input "${specs[$n]}")
        # The reference: the CPU backend of this build (framepipe's reference filters).
        (cd "$W" && "$FP" -q --headless --backend cpu --filter gauss:2 --frames 12 \
            --input "${specs[$n]}" --output "ref-$n/%05d.ppm" >>"$W/log" 2>&1)
    done
    for bands in 1 4 16; do
        rm -rf "$W"/multi-* "$W"/single-*
        (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 --bands "$bands" --frames 12 \
            "${args[@]}" --output 'multi-{n}/%05d.ppm' >>"$W/log" 2>&1)
        for n in "${!specs[@]}"; do
            (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 --bands "$bands" --frames 12 \
                --input "${specs[$n]}" --output "single-$n/%05d.ppm" >>"$W/log" 2>&1)
            if diff -rq "$W/multi-$n" "$W/single-$n" >/dev/null && diff -rq "$W/multi-$n" "$W/ref-$n" >/dev/null; then
                echo "bands $bands, input $n (${specs[$n]}): $(ls "$W/multi-$n" | wc -l) frames bit-identical to its run alone and to the CPU reference"
            else
                echo "bands $bands, input $n (${specs[$n]}): DIFFERENT"
                failed=1
            fi
        done
    done
    return $failed
}

# spread N SPEC: N inputs of SPEC, their first frames spread over one frame period.
spread() {
    local i
    for ((i = 0; i < $1; i++)); do printf -- '--input %s:phase=%s ' "$2" "$(python3 -c "print($i/$1)")"; done
}

live() {
    local frames=${LIVE_FRAMES:-300}
    echo "16 inputs, 1080p BGR at 30 fps, gauss:2, $frames frames each, all in phase (16 frames at once):"
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 --frames "$frames" \
        $(inputs 16 pattern:1920x1080:30) --summary-json live.json >>"$W/log" 2>&1)
    per_input "$W/live.json"
    echo "the same, their frames spread over the 33 ms period (as independent cameras):"
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 --frames "$frames" \
        $(spread 16 pattern:1920x1080:30) --summary-json live.json >>"$W/log" 2>&1)
    per_input "$W/live.json"
}

unpaced() {
    local fmt
    "$FP" bench --only-defaults 2>&1 | tee "$OUT/bench-defaults.txt" | tail -n 12
    for fmt in bgr24 i420; do
        echo "one input, 1080p $fmt unpaced, copy, 3000 frames:"
        (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --frames 3000 \
            --input "pattern:1920x1080:$fmt:0" --summary-json one.json >>"$W/log" 2>&1)
        per_input "$W/one.json"
        echo "16 inputs, 1080p $fmt unpaced, copy, 600 frames each:"
        (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --frames 600 \
            $(inputs 16 "pattern:1920x1080:$fmt:0") --summary-json many.json >>"$W/log" 2>&1)
        per_input "$W/many.json"
        echo "the same, each ring slot filled once (the pattern's copying left out, as in the bench):"
        (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --frames 600 \
            $(inputs 16 "pattern:1920x1080:$fmt:0:fill=once") --summary-json many.json >>"$W/log" 2>&1)
        per_input "$W/many.json"
    done
}

trace() {
    local fmt=${1:-i420}
    echo "one input, 1080p $fmt unpaced, copy, 3000 frames, the last 300 traced:"
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --frames 3000 \
        --input "pattern:1920x1080:$fmt:0:fill=once" --summary-json one.json \
        --trace-frames last:300 --trace "$OUT/trace-one-$fmt.json" >>"$W/log" 2>&1)
    per_input "$W/one.json"
    echo "16 inputs, 1080p $fmt unpaced, copy, 600 frames each, each input's last 300 traced:"
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --frames 600 \
        $(inputs 16 "pattern:1920x1080:$fmt:0:fill=once") --summary-json many.json \
        --trace-frames last:300 --trace "$OUT/trace-16-$fmt.json" >>"$W/log" 2>&1)
    per_input "$W/many.json"
}

fifos() {
    local t i args=()
    . scripts/tools/wheel.sh
    t=$(wheel_ffmpeg)
    for ((i = 0; i < 16; i++)); do
        mkfifo "$W/cam$i"
        "$t/ffmpeg" -v error -re -f lavfi -i testsrc2=size=1920x1080:rate=30 -t 10 \
            -pix_fmt yuv420p -f yuv4mpegpipe -y "$W/cam$i" &
        args+=(--input "$W/cam$i")
    done
    echo "16 inputs, 1080p I420 at 30 fps from 16 ffmpeg -re through named pipes, gauss:2, 10 s:"
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 "${args[@]}" \
        --summary-json fifos.json >>"$W/log" 2>&1)
    wait
    per_input "$W/fifos.json"
    rm -rf "$t"
}

memcpy_test() {
    gpu-bundle/memcpy-test
}

many() {
    echo "64 inputs, 640x360 BGR at 25 fps, gauss:2, 250 frames each (10 s of video):"
    local t0 t1
    t0=$(date +%s.%N)
    (cd "$W" && "$FP" -q --headless --backend "$BACKEND" --filter gauss:2 --frames 250 \
        $(inputs 64 pattern:640x360:25) --summary-json many.json >>"$W/log" 2>&1)
    t1=$(date +%s.%N)
    per_input "$W/many.json"
    python3 - "$W/many.json" "$t0" "$t1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
wall = float(sys.argv[3]) - float(sys.argv[2])
print(f"  wall {wall:.2f} s for 10 s of video; start-up and exit (wall - run) {wall - s['elapsed_s']:.2f} s")
PY
}

trap 'cp "$W/log" "$OUT/several.log" 2>/dev/null; rm -rf "$W"' EXIT
case "${1:-all}" in
    exact) exact 2>&1 | tee "$OUT/several-exact.txt" ;;
    live) live 2>&1 | tee "$OUT/several-live.txt" ;;
    unpaced) unpaced 2>&1 | tee "$OUT/several-unpaced.txt" ;;
    many) many 2>&1 | tee "$OUT/several-many.txt" ;;
    fifos) fifos 2>&1 | tee "$OUT/several-fifos.txt" ;;
    memcpy) memcpy_test 2>&1 | tee "$OUT/several-memcpy.txt" ;;
    trace) trace "${2:-i420}" 2>&1 | tee "$OUT/several-trace-${2:-i420}.txt" ;;
    all)
        exact 2>&1 | tee "$OUT/several-exact.txt"
        live 2>&1 | tee "$OUT/several-live.txt"
        unpaced 2>&1 | tee "$OUT/several-unpaced.txt"
        many 2>&1 | tee "$OUT/several-many.txt"
        ;;
    *) echo "usage: scripts/bench/several.sh exact|live|unpaced|many|fifos|memcpy|trace [FMT]|all" >&2; exit 2 ;;
esac
