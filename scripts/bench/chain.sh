#!/usr/bin/env bash
# The filter chain of issue 60 against ffmpeg's on this machine: a 10 s 720p30 H.264 clip
# scaled to 640 wide, cropped to 480x270, a text and the clock drawn, 10 frames a second
# kept, written as H.264 (the CPU backend runs it on the frame's own YUV planes, the crop
# made in the scale's pass). framepipe as scripts/run.sh starts it (the build without OpenCV,
# target/ffonly, told where the full one is: this run needs no OpenCV) and the full build
# alone (target/release: its start binds OpenCV's libraries). ffmpeg runs the same chain
# (drawtext with DejaVu Sans Mono). Paired: each round runs all three, in turn; medians over
# ROUNDS of wall and CPU time.
#   scripts/bench/chain.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
FP=target/release/framepipe
HEADLESS=target/ffonly/release/framepipe
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ffmpeg -v error -y -f lavfi -i testsrc2=s=1280x720:r=30:d=10 -c:v libx264 -g 60 "$T/in.mp4"
timed() {
    /usr/bin/time -f "%e %U %S" -o "$T/t" "$@" >/dev/null 2>&1
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/t"
}
: > "$T/fp"; : > "$T/ff"; : > "$T/entry"
CHAIN="scale:640:-2,crop:480:270,text:cam {frame},timestamp,fps:10"
for _ in $(seq "$ROUNDS"); do
    timed env FRAMEPIPE_OPENCV_BUILD="$FP" "$HEADLESS" -i "$T/in.mp4" --headless -q -y \
        -o "$T/fp.mp4" -f "$CHAIN" >> "$T/entry"
    timed "$FP" -i "$T/in.mp4" --headless -q -y -o "$T/fp.mp4" -f "$CHAIN" >> "$T/fp"
    timed ffmpeg -v error -y -i "$T/in.mp4" -vf \
        "scale=640:-2:flags=bilinear,crop=480:270,drawtext=fontfile=$FONT:text='cam %{n}':x=8:y=8,drawtext=fontfile=$FONT:text='%{localtime}':x=8:y=240,fps=10" \
        "$T/ff.mp4" >> "$T/ff"
done
median() { sort -n -k"$2" "$1" | awk -v k="$2" '{v[NR]=$k} END {print v[int((NR+1)/2)]}'; }
cw=$(median "$T/ff" 1); cc=$(median "$T/ff" 2)
echo "ffmpeg:                wall ${cw} s, CPU ${cc} s"
for run in entry fp; do
    w=$(median "$T/$run" 1); c=$(median "$T/$run" 2)
    name=$([ "$run" = entry ] && echo "framepipe (run.sh)" || echo "framepipe (full)")
    awk -v n="$name" -v a="$w" -v b="$cw" -v c="$c" -v d="$cc" 'BEGIN {
        printf "%-22s wall %.2f s, CPU %.2f s; ratio to ffmpeg: wall %.2f, CPU %.2f (target: wall <= 1.20)\n",
            n ":", a, c, a / b, c / d }'
done
