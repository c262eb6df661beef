#!/usr/bin/env bash
# The filter chain of issue 60 against ffmpeg's on this machine: a 10 s 720p30 H.264 clip
# scaled to 640 wide, cropped to 480x270, a text and the clock drawn, 10 frames a second
# kept, written as H.264 (framepipe's full build, target/release: the CPU backend runs it
# on the frame's own YUV planes). ffmpeg runs the same chain (drawtext with DejaVu Sans
# Mono). Paired: each round runs both, in turn; medians over ROUNDS of wall and CPU time.
#   scripts/bench/chain.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
FP=target/release/framepipe
FONT=/usr/share/fonts/truetype/dejavu/DejaVuSansMono.ttf
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ffmpeg -v error -y -f lavfi -i testsrc2=s=1280x720:r=30:d=10 -c:v libx264 -g 60 "$T/in.mp4"
timed() {
    /usr/bin/time -f "%e %U %S" -o "$T/t" "$@" >/dev/null 2>&1
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/t"
}
: > "$T/fp"; : > "$T/ff"
for _ in $(seq "$ROUNDS"); do
    timed "$FP" -i "$T/in.mp4" --headless -q -y -o "$T/fp.mp4" \
        -f "scale:640:-2,crop:480:270,text:cam {frame},timestamp,fps:10" >> "$T/fp"
    timed ffmpeg -v error -y -i "$T/in.mp4" -vf \
        "scale=640:-2:flags=bilinear,crop=480:270,drawtext=fontfile=$FONT:text='cam %{n}':x=8:y=8,drawtext=fontfile=$FONT:text='%{localtime}':x=8:y=240,fps=10" \
        "$T/ff.mp4" >> "$T/ff"
done
median() { sort -n -k"$2" "$1" | awk -v k="$2" '{v[NR]=$k} END {print v[int((NR+1)/2)]}'; }
fw=$(median "$T/fp" 1); fc=$(median "$T/fp" 2); cw=$(median "$T/ff" 1); cc=$(median "$T/ff" 2)
echo "framepipe: wall ${fw} s, CPU ${fc} s"
echo "ffmpeg:    wall ${cw} s, CPU ${cc} s"
awk -v a="$fw" -v b="$cw" -v c="$fc" -v d="$cc" \
    'BEGIN {printf "ratio framepipe/ffmpeg: wall %.2f, CPU %.2f (target: wall <= 1.20)\n", a/b, c/d}'
