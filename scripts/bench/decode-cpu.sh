#!/usr/bin/env bash
# Issue 39 item 1: `--decode cpu` with the CUDA backend, whose pictures are decoded into
# page-locked buffers and lent to the ring (src/source/pinned.rs).
#
#   scripts/bench/decode-cpu.sh clips        here: small clips of every codec and picture
#                                            layout into wall-clips/exact/ (gpu.sh pack carries them)
#   scripts/bench/decode-cpu.sh exact        there: each clip through the CUDA backend (1 and 3
#                                            bands) against ffmpeg's own decode, framemd5
#                                            (4:2:2 and 4:4:4: against the CPU backend's)
#   scripts/bench/decode-cpu.sh speed [RUNS] [PLAYS]
#                                            there: libavcodec decoding alone (ffmpeg -f null,
#                                            the same automatic frame threads) against framepipe
#                                            on the wall's 1080p clip played PLAYS times (3),
#                                            interleaved; each thread's CPU; a perf profile
#                                            where perf-kit is carried (scripts/gpu.sh perf)
# Logs in $OUT. The way before (each picture copied into the slot) is the CPU backend's, beside.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
mkdir -p "$out"
FP=${FRAMEPIPE_BIN:-$PWD/gpu-bundle/framepipe}
FF=$PWD/gpu-bundle/ffmpeg

clips() {
    local d=wall-clips/exact
    mkdir -p "$d"
    local src=testsrc2=size=1280x720:rate=30
    mk() { ffmpeg -v error -y -f lavfi -i "$src" -frames:v 45 "$@"; }
    mk -c:v libx264 -pix_fmt yuv420p -bf 3 "$d/h264.mp4"
    mk -c:v libx264 -pix_fmt yuv422p "$d/h264-422.mkv"
    mk -c:v libx264 -pix_fmt yuv444p "$d/h264-444.mkv"
    mk -c:v libx264 -pix_fmt gray "$d/h264-gray.mkv"
    mk -c:v libx265 -pix_fmt yuv420p -x265-params log-level=none "$d/hevc.mkv"
    mk -c:v mpeg4 -pix_fmt yuv420p "$d/mpeg4.avi"
    mk -c:v libvpx-vp9 -pix_fmt yuv420p -deadline realtime "$d/vp9.webm"
    mk -c:v mjpeg -pix_fmt yuvj420p "$d/mjpeg.avi"
    mk -c:v ffv1 -pix_fmt yuv420p "$d/ffv1.mkv"
    ffmpeg -v error -y -f lavfi -i testsrc2=size=854x480:rate=30 -frames:v 45 -c:v libx264 "$d/h264-odd.mp4"
    ls -la "$d"
}

# The MD5 of each frame of a framemd5 listing on standard input.
md5s() { grep -v '^#' | awk -F, '{ gsub(/ /, "", $NF); print $NF }'; }

# The MD5 of `clip` decoded on the CPU and written as Y4M by framepipe, with ARGS.
through() {
    local clip=$1
    shift
    $FP -v --input "$clip" --decode cpu --headless --filter copy --output - "$@" |
        $FF -v error -f yuv4mpegpipe -i - -f framemd5 - | md5s | md5sum
}

exact() {
    local clip ok=0 bad=0 bands
    for clip in wall-clips/exact/*; do
        local want got how
        # 4:2:2 and 4:4:4 are written as 4:2:0, framepipe's own way: their reference is the
        # CPU backend's output (each picture copied into the slot, as before); the others'
        # is ffmpeg's decode.
        case "$clip" in
            *-422.* | *-444.*) want=$(through "$clip" --backend cpu 2>/dev/null) ;;
            *) want=$($FF -v error -nostdin -i "$clip" -map 0:v:0 -f framemd5 - | md5s | md5sum) ;;
        esac
        for bands in 1 3; do
            got=$(through "$clip" --backend cuda --bands $bands 2>"$out/exact.err")
            local lent
            lent=$(grep -c 'lent from page-locked' "$out/exact.err")
            if [ "$got" = "$want" ]; then
                ok=$((ok + 1))
                echo "ok $(basename "$clip") bands $bands (lent: $lent)"
            else
                bad=$((bad + 1))
                echo "DIFFERS $(basename "$clip") bands $bands (lent: $lent)"
                tail -n 5 "$out/exact.err"
            fi
        done
    done
    echo "exact: $ok equal to ffmpeg's decode, $bad differ"
}

speed() {
    local runs=${1:-5} plays=${2:-3} clip=/tmp/decode-cpu.mp4
    $FF -v error -nostdin -y -stream_loop $((plays - 1)) -i wall-clips/h264.ts -an -c copy "$clip"
    frames=$(gpu-bundle/ffprobe -v error -select_streams v -count_packets \
        -show_entries stream=nb_read_packets -of csv=p=0 "$clip")
    err=$out/decode-cpu.err
    : >"$err"
    . scripts/tools/interleaved.sh
    local fp="$FP -q --input $clip --decode cpu --headless" args=() before=gpu-bundle/framepipe-before
    echo "$frames frames of $clip; $(nproc) cores; $($FP --version)"
    # The build before (`scripts/gpu.sh before REV`: each picture copied into the slot), where
    # it is carried.
    [ -x $before ] && args=("before: gauss:2 on the GPU" "${fp/$FP/$before} --backend cuda --filter gauss:2")
    interleaved fps \
        "libavcodec alone: ffmpeg -f null" "$FF -v error -nostdin -i $clip -f null -" \
        "framepipe --decode cpu, gauss:2 on the GPU" "$fp --backend cuda --filter gauss:2" \
        "framepipe --decode cpu, copy on the GPU" "$fp --backend cuda --filter copy" \
        "framepipe --decode cpu, the CPU backend, copy" "$fp --backend cpu --filter copy" "${args[@]}"
    echo "== framepipe's own rate, start-up and exit left out (the runs' time: lines)"
    # Each round's time: lines come in the order the pipelines ran (ffmpeg's has none).
    awk -v k=$((3 + ${#args[@]} / 2)) '/^time:/ { v[n++ % k] = v[(n - 1) % k] " " $4 }
        END { split("gauss:2 on the GPU|copy on the GPU|the CPU backend, copy|before: gauss:2 on the GPU", name, "|");
              for (i = 0; i < k; i++) printf "%-46s%s fps\n", name[i + 1], v[i] }' "$err"
    echo "== each thread's CPU (gauss:2 on the GPU, -v)"
    ${fp/-q/-v} --backend cuda --filter gauss:2 2>&1 | grep -E 'CPU of the|^time:|lent from' | head -12
    [ -f perf-kit/perf.tar.xz ] || return 0
    tar -C /tmp -xJf perf-kit/perf.tar.xz
    local perf="env LD_LIBRARY_PATH=/tmp/perfkit/lib /tmp/perfkit/perf"
    $perf record -F 999 -g -o /tmp/decode-cpu.perf -- $fp --backend cuda --filter gauss:2 \
        2>"$out/perf-record.err"
    echo "== perf: by thread"
    $perf report -i /tmp/decode-cpu.perf --stdio --no-children --sort comm 2>/dev/null |
        grep -E '^ +[0-9]' | head -20
    echo "== perf: by thread and function"
    $perf report -i /tmp/decode-cpu.perf --stdio --no-children --sort comm,sym -g none 2>/dev/null |
        grep -E '^ +[0-9]' | head -40
}

case "${1:-}" in
    clips) clips ;;
    exact) exact ;;
    speed) shift; speed "$@" ;;
    *) sed -n '2,14p' "$0"; exit 2 ;;
esac
