#!/usr/bin/env bash
# Decoder and writer speed on this machine: framepipe (CPU backend, filter copy; decoding
# with libavcodec, the default, and with OpenCV, --decode opencv) against ffmpeg and an
# OpenCV-Python loop doing the same work, on one 10 s 1080p H.264 clip. Frames per second
# of wall time, RUNS runs each (the best is printed); the first row decodes to nothing
# (framepipe headless with no output, ffmpeg -f null).
#   scripts/bench/writers.sh [RUNS]
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-3}
BIN=target/release/framepipe
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
ffmpeg -v error -y -f lavfi -i testsrc2=s=1920x1080:r=30:d=10 -c:v libx264 -pix_fmt yuv420p "$T/in.mp4"
FRAMES=300
cat > "$T/loop.py" <<'PY'
import cv2, sys
cap = cv2.VideoCapture(sys.argv[1])
w, h = int(cap.get(cv2.CAP_PROP_FRAME_WIDTH)), int(cap.get(cv2.CAP_PROP_FRAME_HEIGHT))
out = cv2.VideoWriter(sys.argv[2], cv2.VideoWriter_fourcc(*sys.argv[3]), cap.get(cv2.CAP_PROP_FPS), (w, h))
while True:
    ok, frame = cap.read()
    if not ok:
        break
    out.write(frame)
out.release()
PY
best() { # best fps of RUNS runs of "$@"
    local b=0 s e f
    for _ in $(seq "$RUNS"); do
        s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N)
        f=$(echo "$FRAMES / ($e - $s)" | bc -l)
        b=$(echo "if ($f > $b) $f else $b" | bc -l)
    done
    printf "%6.1f" "$b"
}
echo "writer speed, 1080p H.264 in, $(nproc) cores, best of $RUNS (frames per second)"
printf "%-7s %-5s %10s %12s %10s %14s\n" codec file framepipe "fp --decode" ffmpeg opencv-python
printf "%-7s %-5s %10s %12s %10s %14s\n" "" "" "(libav)" "opencv" "" ""
fp=$(best "$BIN" -q --input "$T/in.mp4" --headless --backend cpu)
fo=$(best "$BIN" -q --input "$T/in.mp4" --headless --backend cpu --decode opencv)
ff=$(best ffmpeg -v error -i "$T/in.mp4" -f null -)
printf "%-7s %-5s %10s %12s %10s %14s\n" none "-" "$fp" "$fo" "$ff" "-"
for row in "mjpeg avi MJPG -q:v 3" "mpeg4 mp4 mp4v -q:v 3" "h264 mp4 avc1" "ffv1 mkv FFV1 -pix_fmt bgr0 -level 3 -slices 16"; do
    set -- $row
    codec=$1 ext=$2 fourcc=$3; shift 3
    enc=$codec; [ "$codec" = h264 ] && enc=libx264
    fp=$(best "$BIN" -q --input "$T/in.mp4" --headless --backend cpu --codec "$codec" -y -o "$T/fp.$ext")
    fo=$(best "$BIN" -q --input "$T/in.mp4" --headless --backend cpu --decode opencv --codec "$codec" -y -o "$T/fp.$ext")
    ff=$(best ffmpeg -v error -y -i "$T/in.mp4" -c:v "$enc" "$@" "$T/ff.$ext")
    PY=python3; [ -x /usr/bin/python3 ] && PY=/usr/bin/python3
    cv=$( { $PY -c 'import cv2' 2>/dev/null && best $PY "$T/loop.py" "$T/in.mp4" "$T/cv.$ext" "$fourcc"; } || echo "     -")
    printf "%-7s %-5s %10s %12s %10s %14s\n" "$codec" ".$ext" "$fp" "$fo" "$ff" "$cv"
done
