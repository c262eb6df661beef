#!/usr/bin/env bash
# Where the pipe hop's time goes (issue 23 item 2), on the GPU machine (device tool, carry
# gpu-bundle and perf-kit, after `scripts/gpu.sh bundle`, `scripts/gpu.sh ffmpeg WHEEL` and
# `scripts/gpu.sh perf`):
#
#   scripts/bench/pipetrace.sh [FRAMES] [RUNS]
#
# The machine's cores and caches; then each pipeline RUNS times (default 5), the pipelines
# interleaved run by run so that a machine's noise falls on all alike, in frames per second
# of wall time (start-up included): the pipe alone, framepipe's hop, the same hop without a
# GPU (scripts/tools/piperead.c's relay: a reading and a writing thread over N frame
# buffers), and two pipes at once; then, where perf works there, a system-wide profile of
# the pipe alone and of framepipe's hop, by process and by kernel function. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-3000}
runs=${2:-5}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe -q --input - --headless --backend cuda"
pr="$PWD/gpu-bundle/piperead"
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" "$frames"
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"

err=$out/pipetrace.err
. scripts/tools/interleaved.sh
pipelines=(
    "the pipe alone: y4m | cat" "$y4m | cat"
    "y4m | framepipe gauss:2 | cat" "$y4m | $fp --filter gauss:2 --output - | cat"
    "y4m | framepipe copy | cat" "$y4m | $fp --output - | cat"
    "y4m | framepipe (no output)" "$y4m | $fp"
    "y4m | relay8 | cat (2 threads, 8 buffers)" "$y4m | $pr relay8 | cat"
    "y4m | relay8-bounce | cat (each staged)" "$y4m | $pr relay8-bounce | cat"
    "y4m | relay2 | cat (2 buffers)" "$y4m | $pr relay2 | cat"
    "y4m | cat | cat" "$y4m | cat | cat"
    "ffmpeg writing to /dev/null (no pipe)" "$y4m"
    "two pipes at once: (y4m | cat) x2, each" "($y4m | cat) & ($y4m | cat); wait"
)

{
    echo "== machine"
    lscpu | grep -E '^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA|L1d|L2|L3)' || true
    echo "cpu0's SMT siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list 2>/dev/null)"
    echo "uid $(id -u); perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid); kptr_restrict $(cat /proc/sys/kernel/kptr_restrict); pipe-max-size $(cat /proc/sys/fs/pipe-max-size); kernel $(uname -r)"
    echo
    echo "== 1080p H.264, $frames frames; fps of wall time, $runs runs interleaved, then the median"
    interleaved fps "${pipelines[@]}"
    echo
    echo "== the relay's own figures (last runs)"
    grep -E '^relay' "$out/pipetrace.err" | tail -3
    echo
    echo "== framepipe gauss:2 | cat with -v: each thread's CPU and its time waiting for a CPU"
    for _ in 1 2; do
        $y4m | ${fp/-q/-v} --filter gauss:2 --output - 2>"$out/v.txt" | cat >/dev/null
        grep -E 'CPU of|CUDA warmed|input open|run ended|fps average|per frame: capture' "$out/v.txt"
    done
    echo
    if [ -f perf-kit/perf.tar.xz ]; then
        tar -xJf perf-kit/perf.tar.xz -C "$t"
        perf() { LD_LIBRARY_PATH="$t/perfkit/lib" "$t/perfkit/perf" "$@"; }
        if perf stat -e cpu-clock true >/dev/null 2>&1; then
            for what in "pipe alone|$y4m | cat" "framepipe gauss:2|$y4m | $fp --filter gauss:2 --output - | cat"; do
                name=${what%%|*} cmd=${what#*|}
                echo "== perf, system-wide, $name: share of all samples by process and thread"
                perf record -q -a -g -F 997 -o "$t/p.data" -- bash -c "$cmd" >/dev/null 2>>"$out/perf.err"
                perf report -i "$t/p.data" --stdio --no-children --sort comm -g none 2>>"$out/perf.err" |
                    grep -vE '^#|^$' | head -14
                echo "-- by function (kernel and user), top 40"
                perf report -i "$t/p.data" --stdio --no-children --sort comm,sym -g none 2>>"$out/perf.err" |
                    grep -vE '^#|^$' | head -40
                echo "-- framepipe's threads, callers of the top kernel functions"
                perf report -i "$t/p.data" --stdio --no-children --comm 'framepipe,capture 0,backend' --sort sym \
                    -g caller,0.5,callee,function,percent --percent-limit 3 2>>"$out/perf.err" |
                    grep -vE '^#|^$' | head -80
                echo
            done
            perf stat -a -e cycles,instructions,cache-references,cache-misses -- bash -c "$y4m | cat" 2>&1 >/dev/null | tail -12
            perf stat -a -e cycles,instructions,cache-references,cache-misses -- bash -c "$y4m | $fp --filter gauss:2 --output - | cat" 2>&1 >/dev/null | tail -12
        else
            echo "perf does not work here: $(perf stat -e cpu-clock true 2>&1 | tail -2)"
        fi
    fi
} 2>&1 | tee "$out/pipetrace.txt"
