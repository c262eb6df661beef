#!/usr/bin/env bash
# The GPU machine has CUDA but no OpenCV and no Rust, so what runs there is built here
# without the `opencv` feature and sent over.
#
#   scripts/gpu.sh bundle      here: build the binary and the GPU tests into gpu-bundle/
#   scripts/gpu.sh run         there (device tool, carry gpu-bundle): run them, logs in $OUT
#   scripts/gpu.sh soak [S]    there: the 4K soak (filters cycling, page-locking toggled), S seconds
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=gpu-bundle

bundle() {
    local target=target/nocv
    cargo build --release --no-default-features --target-dir "$target"
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
    cp "$target/release/framepipe" "$BUNDLE/"
    # The test binaries' paths come from cargo's own JSON messages.
    cargo test --release --no-default-features --target-dir "$target" --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["target"]["kind"] == ["test"] and m["target"]["name"] in ("gpu", "gpu_kernels", "cpu_backend")):
        shutil.copy(m["executable"], sys.argv[1] + "/test-" + m["target"]["name"])
' "$BUNDLE"
    strip "$BUNDLE"/*
    ls -la "$BUNDLE"
}

run() {
    local out=${OUT:-/tmp/framepipe-out}
    mkdir -p "$out"
    # Tests that run the binary take this one (cargo's path is this machine's).
    export FRAMEPIPE_BIN="$PWD/$BUNDLE/framepipe"
    "$BUNDLE/framepipe" doctor 2>&1 | tee "$out/doctor.txt"
    if [ "${SKIP_TESTS:-0}" != 1 ]; then
        for t in "$BUNDLE"/test-*; do
            echo "== $t"
            "$t" --include-ignored --skip cuda_soak --nocapture --test-threads=1 2>&1 | tee -a "$out/tests.log"
        done
        for extra in "" "--pageable"; do
            echo "== framepipe --size 1920x1080 $extra"
            "$BUNDLE/framepipe" --input pattern --size 1920x1080 --fps 0 --frames 600 --headless \
                --backend cuda --filter gray $extra 2>&1 | tee -a "$out/app.log"
        done
    fi
    "$BUNDLE/framepipe" bench --json "$out/bench.json" "$@" 2>&1 | tee "$out/bench.txt"
}

soak() {
    local out=${OUT:-/tmp/framepipe-out}
    mkdir -p "$out"
    FRAMEPIPE_SOAK_SECS=${1:-540} "$BUNDLE/test-gpu" --ignored --nocapture --test-threads=1 \
        cuda_soak 2>&1 | tee "$out/soak.log"
}

case "${1:-}" in
    bundle) bundle ;;
    run) shift; run "$@" ;;
    soak) shift; soak "$@" ;;
    *) echo "usage: scripts/gpu.sh bundle|run|soak [SECONDS]" >&2; exit 2 ;;
esac
