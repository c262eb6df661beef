#!/usr/bin/env bash
# The pipe hop (issue 23 item 2), on the GPU machine (device tool, carry gpu-bundle, after
# `scripts/gpu.sh bundle` and `scripts/gpu.sh ffmpeg WHEEL`):
#
#   scripts/bench/pipehop.sh [FRAMES] [RUNS]
#
# One 1080p H.264 clip of FRAMES frames (default 3000) from testsrc2, then each pipeline RUNS
# times (default 3), whole runs, start-up included, in frames per second of wall time (on a
# machine of several NUMA nodes, also with every process held on node 0); then one traced
# run of framepipe in the pipe, with each process's CPU time. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-3000}
runs=${2:-3}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe"
FP_BEFORE=${FP_BEFORE:-}
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" "$frames"
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
rate() { # frames per second of the pipeline "$2", each of $runs runs
    local s e all=""
    for _ in $(seq "$runs"); do
        s=$(date +%s%N)
        bash -o pipefail -c "$2" >/dev/null 2>>"$out/pipehop.err" || echo "failed: $1" >>"$out/pipehop.err"
        e=$(date +%s%N)
        all="$all $(awk -v n="$frames" -v s="$s" -v e="$e" 'BEGIN { printf "%.1f", n / ((e - s) / 1e9) }')"
    done
    printf "%-58s %s\n" "$1" "$all"
}
{
    echo "1080p H.264, $frames frames, $(nproc) cores; fps of wall time per run, start-up included"
    echo "pipe buffer: default $(cat /proc/sys/fs/pipe-max-size) max"
    rate "the pipe alone: y4m | cat" "$y4m | cat"
    rate "two hops: y4m | cat | cat" "$y4m | cat | cat"
    rate "y4m | framepipe copy (no output)" "$y4m | $fp -q --input - --headless --backend cuda"
    rate "pattern i420 | framepipe copy | cat (writing alone)" \
        "$fp -q --input pattern:1920x1080:i420:0 --frames $frames --headless --backend cuda --output - | cat"
    rate "y4m | framepipe copy | cat" "$y4m | $fp -q --input - --headless --backend cuda --output - | cat"
    rate "y4m | framepipe gauss:2 | cat" "$y4m | $fp -q --input - --headless --backend cuda --filter gauss:2 --output - | cat"
    if [ -n "$FP_BEFORE" ]; then
        rate "before: y4m | framepipe copy | cat" "$y4m | $FP_BEFORE -q --input - --headless --backend cuda --output - | cat"
        rate "before: y4m | framepipe gauss:2 | cat" "$y4m | $FP_BEFORE -q --input - --headless --backend cuda --filter gauss:2 --output - | cat"
    fi
    if [ -x gpu-bundle/piperead ]; then
        rate "reading alone: y4m | piperead slots" "$y4m | gpu-bundle/piperead slots"
    fi
    # Where the machine has several NUMA nodes, the same pipelines held on node 0's cores
    # (memory follows the first touch, so it stays on that node too): if copies between
    # nodes are what slows framepipe's reader while it writes, these runs close the gap.
    nodes=$(find /sys/devices/system/node -maxdepth 1 -name 'node[0-9]*' 2>/dev/null | wc -l)
    echo "NUMA nodes: $nodes ($(grep -c ^processor /proc/cpuinfo) CPUs)"
    if [ "$nodes" -gt 1 ]; then
        cpus=$(cat /sys/devices/system/node/node0/cpulist)
        rate "node 0 only (taskset -c $cpus): the pipe alone" "taskset -c $cpus bash -c '$y4m | cat'"
        rate "node 0 only: y4m | framepipe gauss:2 | cat" \
            "taskset -c $cpus bash -c '$y4m | $fp -q --input - --headless --backend cuda --filter gauss:2 --output - | cat'"
    fi
    rate "y4m | framepipe copy, no output (cuda)" "$y4m | $fp -q --input - --headless --backend cuda"
    rate "y4m | framepipe copy, no output (cuda, --pageable)" "$y4m | $fp -q --input - --headless --backend cuda --pageable"
    rate "y4m | framepipe copy, no output (cpu backend)" "$y4m | $fp -q --input - --headless --backend cpu"
    rate "ffmpeg -vf gblur=sigma=2 -f null" "$ff -i $t/in.mp4 -vf gblur=sigma=2 -f null -"
    echo
    echo "CPU time of each process (real user sys, s), one run each:"
    TIMEFORMAT='%R %U %S'
    for i in 1 2; do
        { time $y4m 2>/dev/null; } 2> >(sed 's/^/  ffmpeg (alone, | cat): /' >&2) | { time cat >/dev/null; } 2> >(sed 's/^/  cat after ffmpeg: /' >&2)
    done
    for i in 1 2; do
        { time $y4m 2>/dev/null; } 2> >(sed 's/^/  ffmpeg (into framepipe): /' >&2) |
            { time $fp -q --input - --headless --backend cuda --filter gauss:2 --output - 2>/dev/null; } 2> >(sed 's/^/  framepipe gauss:2: /' >&2) |
            { time cat >/dev/null; } 2> >(sed 's/^/  cat after framepipe: /' >&2)
    done
    sleep 1
    echo
    echo "one run with -v (each thread's CPU) and --trace:"
    $y4m | $fp -v --input - --headless --backend cuda --filter gauss:2 --output - \
        --trace "$out/pipehop-trace.json" 2>"$out/pipehop-v.txt" | cat >/dev/null
    grep -E 'CPU of|fps|per frame' "$out/pipehop-v.txt"
} 2>&1 | tee "$out/pipehop.txt"
