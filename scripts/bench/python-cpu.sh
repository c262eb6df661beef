#!/usr/bin/env bash
# A per-frame Python loop over one file, framepipe against OpenCV-Python on this machine
# (issue 60, item 4): the same 30 s 720p30 H.264 clip decoded by libavcodec and handed to
# the loop as BGR NumPy arrays, each frame touched. Paired: each round runs both, in turn;
# the medians over ROUNDS of the wall time and of the CPU time (user + system) are compared.
# framepipe's package is the one in target/pyvenv (tests/python.rs installs it);
# OpenCV-Python is Debian's python3-opencv.
#   scripts/bench/python-cpu.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
ROUNDS=${1:-5}
PY=target/pyvenv/bin/python
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ffmpeg -v error -y -f lavfi -i testsrc2=s=1280x720:r=30:d=30 -c:v libx264 -g 60 "$T/in.mp4"
cat > "$T/fp.py" <<'PY'
import sys, numpy as np, framepipe
n = 0
with framepipe.open(sys.argv[1], quiet=True) as run:
    for f in run:
        a = np.asarray(f); n += int(a[0, 0, 0] >= 0)
assert n == 900, n
PY
cat > "$T/cv.py" <<'PY'
import sys
sys.path.insert(0, "/usr/lib/python3/dist-packages")
import cv2
c = cv2.VideoCapture(sys.argv[1], cv2.CAP_FFMPEG)
n = 0
while True:
    ok, a = c.read()
    if not ok:
        break
    n += int(a[0, 0, 0] >= 0)
assert n == 900, n
PY
timed() {
    /usr/bin/time -f "%e %U %S" -o "$T/t" "$@" >/dev/null 2>&1
    awk '{printf "%s %.2f\n", $1, $2 + $3}' "$T/t"
}
: > "$T/fp"; : > "$T/cv"
for _ in $(seq "$ROUNDS"); do
    timed "$PY" "$T/fp.py" "$T/in.mp4" >> "$T/fp"
    timed "$PY" "$T/cv.py" "$T/in.mp4" >> "$T/cv"
done
median() { sort -n -k"$2" "$1" | awk -v k="$2" '{v[NR]=$k} END {print v[int((NR+1)/2)]}'; }
fw=$(median "$T/fp" 1); fc=$(median "$T/fp" 2); cw=$(median "$T/cv" 1); cc=$(median "$T/cv" 2)
echo "framepipe (Python loop): wall ${fw} s, CPU ${fc} s"
echo "OpenCV-Python loop:      wall ${cw} s, CPU ${cc} s"
awk -v a="$fw" -v b="$cw" -v c="$fc" -v d="$cc" \
    'BEGIN {printf "ratio framepipe/OpenCV: wall %.2f, CPU %.2f (target: wall <= 1.00)\n", a/b, c/d}'
