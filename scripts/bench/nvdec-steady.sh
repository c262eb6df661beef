#!/usr/bin/env bash
# Steady rates through NVDEC against NVDEC alone (issue 20), on the GPU machine (device
# tool, carry gpu-bundle, after `scripts/gpu.sh bundle` and `scripts/gpu.sh ffmpeg WHEEL`):
#
#   scripts/bench/nvdec-steady.sh [FRAMES] [RUNS] [CLIP]
#
# CLIP is h264-1080p (the default: libx264 veryfast) or hevc-4k (libx265 ultrafast): one clip
# of FRAMES frames (1200), looped to 2× and 4× (stream copy). Each
# program decodes all three RUNS times (3); its steady rate is the slope of the median wall
# times against the frames (least squares), which cancels start-up for every program alike.
# The programs: NVDEC alone (ffmpeg -hwaccel cuda, frames left on the GPU; and with
# -threads 1), and framepipe --decode gpu: CUDA backend with `copy` and with gauss:2, and
# the CPU backend (pictures brought down, no CUDA call of the backend's own). framepipe's
# `-v` summary of the 4× clip (its rate with the decoder's start, and the capture thread's
# time a frame) is kept in steady-verbose-CLIP.txt. Everything in $OUT/steady-CLIP.txt.
# With PIPE=1, instead: NVDEC alone and framepipe --decode gpu gauss:2, each writing a Y4M
# pipe that `cat` reads (steady-pipe-CLIP.txt).
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-1200}
runs=${2:-3}
clip=${3:-h264-1080p}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
nv="$PWD/gpu-bundle/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe"
case $clip in
    h264-1080p) clip_1080p_h264 "$t/ffmpeg" "$t/x1.mp4" "$frames" ;;
    hevc-4k) "$t/ffmpeg" -v error -nostdin -f lavfi -i "testsrc2=s=3840x2160:r=30:d=$((frames / 30))" \
        -c:v libx265 -preset ultrafast -pix_fmt yuv420p "$t/x1.mp4" 2>/dev/null ;;
    *) echo "unknown clip $clip: h264-1080p or hevc-4k" >&2; exit 2 ;;
esac
for k in 2 4; do
    "$t/ffmpeg" -v error -nostdin -stream_loop $((k - 1)) -i "$t/x1.mp4" -c copy "$t/x$k.mp4"
done
median_us() { # the median wall time of "$1" over $runs runs, in µs
    local s all=""
    for _ in $(seq "$runs"); do
        s=$(date +%s%N)
        bash -c "$1" >/dev/null 2>>"$out/steady.err"
        all="$all $((($(date +%s%N) - s) / 1000))"
    done
    echo $all | tr ' ' '\n' | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
steady() { # "$1": name; "$2": command with CLIP
    local a b c
    a=$(median_us "${2//CLIP/$t/x1.mp4}")
    b=$(median_us "${2//CLIP/$t/x2.mp4}")
    c=$(median_us "${2//CLIP/$t/x4.mp4}")
    awk -v name="$1" -v n="$frames" -v a="$a" -v b="$b" -v c="$c" 'BEGIN {
        # least squares of time against frames (n, 2n, 4n): the slope is the time a frame
        mx = 7 * n / 3; my = (a + b + c) / 3
        sxy = (n - mx) * (a - my) + (2 * n - mx) * (b - my) + (4 * n - mx) * (c - my)
        sxx = (n - mx) ^ 2 + (2 * n - mx) ^ 2 + (4 * n - mx) ^ 2
        slope = sxy / sxx
        printf "%-52s %7.1f fps steady (%.3f ms a frame; start-up %.0f ms); medians %.2f %.2f %.2f s\n",
            name, 1e6 / slope, slope / 1e3, (my - slope * mx) / 1e3, a / 1e6, b / 1e6, c / 1e6 }'
}
if [ "${PIPE:-0}" = 1 ]; then
    # To a Y4M pipe read by `cat`: NVDEC alone has to bring each picture down to write it.
    {
        echo "$clip to a Y4M pipe | cat, $frames, $((2 * frames)), $((4 * frames)) frames; median of $runs runs each"
        steady "NVDEC alone (ffmpeg -hwaccel cuda -pix_fmt yuv420p -f yuv4mpegpipe - | cat)" \
            "$nv -hwaccel cuda -i CLIP -pix_fmt yuv420p -f yuv4mpegpipe - | cat"
        steady "framepipe --decode gpu gauss:2 --output - | cat" \
            "$fp -q --input CLIP --decode gpu --headless --backend cuda --filter gauss:2 --output - | cat"
    } 2>&1 | tee "$out/steady-pipe-$clip.txt"
    exit 0
fi
{
    echo "$clip, $frames, $((2 * frames)), $((4 * frames)) frames; $(nproc) cores; median of $runs runs each"
    steady "NVDEC alone (ffmpeg -hwaccel cuda, on the GPU)" "$nv -hwaccel cuda -hwaccel_output_format cuda -i CLIP -f null -"
    steady "framepipe --decode gpu, CUDA backend, copy" "$fp -q --input CLIP --decode gpu --headless --backend cuda"
    steady "framepipe --decode gpu, CUDA backend, gauss:2" "$fp -q --input CLIP --decode gpu --headless --backend cuda --filter gauss:2"
    steady "framepipe --decode gpu, CPU backend, copy" "$fp -q --input CLIP --decode gpu --headless --backend cpu"
    steady "NVDEC alone, -threads 1" "$nv -threads 1 -hwaccel cuda -hwaccel_output_format cuda -i CLIP -f null -"
    steady "NVDEC alone (again)" "$nv -hwaccel cuda -hwaccel_output_format cuda -i CLIP -f null -"
    for b in "cuda --filter copy" "cuda --filter gauss:2" "cpu --filter copy"; do
        echo "== framepipe -v --decode gpu --backend $b, $((4 * frames)) frames" >>"$out/steady-verbose-$clip.txt"
        $fp -v --input "$t/x4.mp4" --decode gpu --headless --backend $b 2>&1 >/dev/null |
            grep -E '^time:|^per frame|CPU of' >>"$out/steady-verbose-$clip.txt"
    done
    cat "$out/steady-verbose-$clip.txt"
} 2>&1 | tee "$out/steady-$clip.txt"
