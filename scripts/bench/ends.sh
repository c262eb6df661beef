#!/usr/bin/env bash
# Issue 23's four figures, before and after, in one session on the GPU machine (device
# tool, carry gpu-bundle and perf-kit), after, here:
#   scripts/gpu.sh bundle && scripts/gpu.sh ffmpeg WHEEL && scripts/gpu.sh before REV
#   gcc -O2 -static -pthread -o gpu-bundle/piperead scripts/tools/piperead.c
#
#   scripts/bench/ends.sh [FRAMES] [RUNS]      (PARTS="1 3" runs only those parts; default all four)
#
# 1. start, one 1080p frame, exit: each build RUNS times (default 5), interleaved;
# 2. the pipe hop, FRAMES frames (default 3000) of 1080p H.264 through the wheel's ffmpeg:
#    the pipe alone, the same hop without a GPU (piperead relay8), and each build's
#    `gauss:2 --output - | cat`, interleaved RUNS times; ffmpeg's own gblur once;
# 3. the defaults against the bare baseline: `bench --only-defaults` three times (the before
#    build has no baseline: its defaults once, beside);
# 4. one I420 frame alone, 1080p and 4K, each build.
# Wall times in ms or fps of wall time (start-up included); medians last. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-3000}
runs=${2:-5}
parts=" ${PARTS:-1 2 3 4} "
mkdir -p "$out"
A=$PWD/gpu-bundle/framepipe
B=$PWD/gpu-bundle/framepipe-before
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
[[ $parts == *" 2 "* ]] && clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" "$frames"
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
err=$out/ends.err
. scripts/tools/interleaved.sh

{
    echo "before: $($B --version) ($B), after: $($A --version); $(nproc) cores; $(date -u)"
  if [[ $parts == *" 1 "* ]]; then
    echo
    echo "== 1. start, one 1080p frame, exit (warm kernel cache), ms of wall time"
    # (the pattern's options as the before build takes them too)
    one="--input pattern --size 1920x1080 --frames 1 --headless --backend cuda -q"
    $A $one 2>/dev/null
    $B $one 2>/dev/null
    interleaved ms "before" "$B $one" "after" "$A $one"
    $A -v ${one/-q/} 2>&1 | grep -E 'start-up:|run ended|exiting' | sed 's/^/  after, -v: /'
  fi
  if [[ $parts == *" 2 "* ]]; then
    echo
    echo "== 2. the pipe hop, $frames frames of 1080p H.264, fps of wall time"
    interleaved fps \
        "the pipe alone: y4m | cat" "$y4m | cat" \
        "y4m | relay8 | cat (the hop in C, no GPU)" "$y4m | gpu-bundle/piperead relay8 | cat" \
        "before: y4m | framepipe gauss:2 | cat" "$y4m | $B -q --input - --headless --backend cuda --filter gauss:2 --output - 2>>$out/hop-before.err | cat" \
        "after: y4m | framepipe gauss:2 | cat" "$y4m | $A -q --input - --headless --backend cuda --filter gauss:2 --output - 2>>$out/hop-after.err | cat"
    runs=1 interleaved fps "ffmpeg -vf gblur=sigma=2 -f null" "$ff -i $t/in.mp4 -vf gblur=sigma=2 -f null -"
    for who in before after; do
        echo "framepipe's own figures (start-up excluded), $who: $(grep -E '^time:' "$out/hop-$who.err" | sed 's/ fps.*//; s/.*, //' | tr '\n' ' ')"
    done
    echo "the relay's own: $(grep -oE '= [0-9]+ fps' "$out/ends.err" | tr -d '=' | tr '\n' ' ')"
  fi
  if [[ $parts == *" 3 "* ]]; then
    echo
    echo "== 3. the defaults against the bare baseline (bench --only-defaults --filter copy --format bgr,i420), % of bound"
    for i in 1 2 3; do
        $A bench --only-defaults --filter copy --format bgr,i420 --live-fps 0 >"$out/bench-$i.txt" 2>&1
        echo "after, run $i:"
        grep -E 'copy \(|defaults\*|bare baseline' "$out/bench-$i.txt" | grep -vE '^\*' |
            awk '/copy \(/ { s = $1 " " $3 } /^page-locked.*defaults\*/ { d = $8 } /^page-locked.*bare baseline/ { printf "  %-22s defaults %s, baseline %s\n", s, d, $8 }'
    done
    $B bench --only-defaults --filter copy --format bgr,i420 --live-fps 0 >"$out/bench-before.txt" 2>&1
    echo "before (no baseline), once:"
    grep -E 'copy \(|defaults\*' "$out/bench-before.txt" | awk '/copy \(/ { s = $1 " " $3 } /^page-locked.*defaults\*/ { printf "  %-22s defaults %s\n", s, $8 }'
  fi
  if [[ $parts == *" 4 "* ]]; then
    echo
    echo "== 4. one I420 frame alone (one frame in flight; latency mean, p99)"
    for who in before after; do
        bin=$A
        [ $who = before ] && bin=$B
        $bin bench --size 1920x1080,3840x2160 --format i420 --filter copy --bands 2,4 --in-flight 1 \
            --pageable-bands 2 --pageable-in-flight 1 --seconds 0.3 >"$out/latency-$who.txt" 2>&1
        grep -E 'copy \(|page-locked .* 1 ' "$out/latency-$who.txt" | sed "s/^/  $who: /"
    done
  fi
} 2>&1 | tee "$out/ends.txt"
