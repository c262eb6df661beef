#!/bin/bash
# Start-up on the GPU machine: one 1080p frame and exit, against the CUDA context's own cost
# measured in the same run (scripts/tools/cudactx.c, built into the bundle by gpu.sh), with the
# run's CUDA objects left to the kernel (the default) and freed by the driver one by one
# (FRAMEPIPE_FULL_TEARDOWN=1, as before), interleaved; then a cold kernel cache and the cache off.
#
#   scripts/bench/startup.sh [RUNS]      (there; carry gpu-carry: scripts/gpu.sh unpack first)
set -uo pipefail
cd "$(dirname "$0")/../.."
B=${FRAMEPIPE_BIN:-gpu-bundle/framepipe}
C=gpu-bundle/cudactx
runs=${1:-7}
frames=1
err=${OUT:-/tmp}/startup.err
. scripts/tools/interleaved.sh
one="$B --input pattern --size 1920x1080 --frames 1 --headless -q --backend cuda"
export FRAMEPIPE_CACHE_DIR=$(mktemp -d)/kernels
ms() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; local e=$(date +%s%N); echo $(((e - s) / 1000000)); }
echo "cold (empty kernel cache): $(ms $one) ms"
echo "== start, one 1080p frame, exit (warm kernel cache), ms of wall time"
interleaved ms \
    "the CUDA context alone, left to the kernel" "$C exit" \
    "the CUDA context alone, freed by the driver" "$C full" \
    "framepipe (CUDA objects left to the kernel)" "$one" \
    "framepipe, FRAMEPIPE_FULL_TEARDOWN=1" "FRAMEPIPE_FULL_TEARDOWN=1 $one"
echo "the context's own steps: $($C exit)"
echo "cache off: $(FRAMEPIPE_CACHE_DIR= ms $one) ms"
for how in default full; do
    env=()
    [ $how = full ] && env=(FRAMEPIPE_FULL_TEARDOWN=1)
    s=$(date +%s%N)
    env "${env[@]}" ${one/-q/-v} 2>&1 | grep -E 'start-up:|run ended|threads joined' | sed "s/^/  $how, -v: /"
    e=$(date +%s%N)
    echo "  $how, -v: process ended at $(((e - s) / 1000000)) ms"
done
