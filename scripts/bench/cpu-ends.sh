#!/usr/bin/env bash
# The CPU ends against ffmpeg on this machine (issue 39, item 4), paired: each round runs
# every program once, in turn, and the medians over ROUNDS are compared. Wall and CPU
# (user + system) seconds:
#   start-up    one 64x64 frame of a pattern through and out, against ffmpeg doing the same
#   decode      a 10 s 1080p H.264 clip decoded to nothing (framepipe headless, no output;
#               ffmpeg -f null)
# for the full build (target/release), the headless build without OpenCV (target/ffonly:
# cargo build --release --no-default-features --features ffmpeg --target-dir target/ffonly),
# and scripts/run.sh's entry (the headless build, told where the full one is: it hands a
# run over only where the run needs OpenCV).
#   scripts/bench/cpu-ends.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-7}
FULL=target/release/framepipe
HEADLESS=target/ffonly/release/framepipe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ffmpeg -v error -y -f lavfi -i testsrc2=s=1920x1080:r=30:d=10 -c:v libx264 -pix_fmt yuv420p "$T/in.mp4"

# "wall cpu" seconds of one run of "$@".
timed() {
    /usr/bin/time -f "%e %U %S" -o "$T/t" "$@" >/dev/null 2>&1
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/t"
}
declare -A runs
row() { # name, command...
    local name=$1
    shift
    runs[$name]+="$(timed "$@")"$'\n'
}
one_frame=(--input pattern --size 64x64 --frames 1 --headless --backend cpu -q --output-format bgr24 -o -)
for _ in $(seq "$ROUNDS"); do
    row start-full "$FULL" "${one_frame[@]}"
    row start-headless "$HEADLESS" "${one_frame[@]}"
    row start-entry env FRAMEPIPE_OPENCV_BUILD="$FULL" "$HEADLESS" "${one_frame[@]}"
    row start-ffmpeg ffmpeg -v error -f lavfi -i testsrc2=s=64x64 -frames:v 1 -f rawvideo -
    row decode-full "$FULL" -q --input "$T/in.mp4" --headless --backend cpu
    row decode-headless "$HEADLESS" -q --input "$T/in.mp4" --backend cpu
    row decode-entry env FRAMEPIPE_OPENCV_BUILD="$FULL" "$HEADLESS" -q --input "$T/in.mp4" --backend cpu
    row decode-ffmpeg ffmpeg -v error -i "$T/in.mp4" -f null -
done
median() { # column of the runs of $1
    printf '%s' "${runs[$1]}" | awk -v c="$2" 'NF {print $c}' | sort -n |
        awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'
}
echo "CPU ends, $(nproc) cores, medians of $ROUNDS paired rounds (wall s, CPU s; ratio to ffmpeg)"
for work in start decode; do
    fw=$(median "$work-ffmpeg" 1) fc=$(median "$work-ffmpeg" 2)
    printf "%-8s ffmpeg            %6.3f %6.2f\n" "$work" "$fw" "$fc"
    for build in full headless entry; do
        w=$(median "$work-$build" 1) c=$(median "$work-$build" 2)
        printf "%-8s framepipe %-8s %6.3f %6.2f   wall %.2fx, CPU %.2fx\n" "$work" "$build" "$w" "$c" \
            "$(echo "$w / $fw" | bc -l)" "$(echo "$c / $fc" | bc -l)"
    done
done
