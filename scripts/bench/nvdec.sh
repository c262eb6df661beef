#!/usr/bin/env bash
# NVDEC on the GPU machine (issue 20), after `scripts/gpu.sh bundle` and
# `scripts/gpu.sh ffmpeg WHEEL` here (device tool, carry gpu-bundle):
#
#   scripts/bench/nvdec.sh [FRAMES]
#
# Makes a 1080p H.264 clip of FRAMES frames (1800) and a 4K HEVC one of a third as many
# with the wheel's ffmpeg (testsrc2), and each clip twice over (stream copy). First, on
# 2-second clips of H.264 and HEVC at 1080p and 4K, framepipe's frames with --decode gpu
# against --decode cpu, bit for bit (the whole Y4M stream's checksum, `copy`, bands 1-16
# with the CUDA backend, whose frames stay in device memory, and once with the CPU backend,
# which has NVDEC's pictures brought down). Then, on the long clips, rough rates: NVDEC
# decoding alone (the bundle's ffmpeg, -hwaccel cuda), framepipe --decode gpu and
# --decode cpu with gauss:2 to nothing and to a Y4M pipe, and --decode gpu with `copy`, each
# over the whole run (start-up included) and past start-up (N frames / (time of 2N - time
# of N), best of two runs each: this moves by ±10 % between sessions; the steady rates in
# BENCHMARKS.md come from scripts/bench/nvdec-steady.sh). Last, a 10-bit HEVC clip through
# --decode gpu. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-1800}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
nv="$PWD/gpu-bundle/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe"
clip_1080p_h264 "$t/ffmpeg" "$t/h264-1080p.mp4" "$frames"
$ff -f lavfi -i "testsrc2=s=3840x2160:r=30:d=$((frames / 90))" -c:v libx265 -preset ultrafast \
    -pix_fmt yuv420p "$t/hevc-4k.mkv" 2>/dev/null
for clip in h264-1080p.mp4 hevc-4k.mkv; do
    $ff -stream_loop 1 -i "$t/$clip" -c copy "$t/twice-$clip"
done
seconds() { # the best of 2 wall times of "$1" (empty where a run failed)
    local best="" s e d
    for _ in 1 2; do
        s=$(date +%s%N)
        bash -o pipefail -c "$1" >/dev/null 2>>"$out/nvdec.err" || return 0
        e=$(date +%s%N)
        d=$(((e - s) / 1000))
        if [ -z "$best" ] || [ "$d" -lt "$best" ]; then best=$d; fi
    done
    echo "$best"
}
rates() { # "$1": name; "$2": command with CLIP for the clip; "$3": the clip; "$4": its frames
    local one two
    one=$(seconds "${2//CLIP/$t/$3}")
    two=$(seconds "${2//CLIP/$t/twice-$3}")
    if [ -z "$one" ] || [ -z "$two" ]; then
        printf "%-58s   failed (nvdec.err)\n" "$1"
        return
    fi
    awk -v name="$1" -v n="$4" -v a="$one" -v b="$two" 'BEGIN {
        printf "%-58s %7.1f fps whole run, %7.1f fps past start-up\n", name, n / (a / 1e6), n / ((b - a) / 1e6) }'
}
same() { # "$1": a clip; prints whether --decode gpu gives --decode cpu's stream at every cut
    local cpu gpu bad="" run
    cpu=$($fp -q --input "$1" --decode cpu --headless --backend cuda --output - 2>/dev/null | md5sum)
    for run in "cuda 1" "cuda 2" "cuda 3" "cuda 4" "cuda 5" "cuda 6" "cuda 7" "cuda 8" "cuda 9" \
        "cuda 10" "cuda 11" "cuda 12" "cuda 13" "cuda 14" "cuda 15" "cuda 16" "cpu 1"; do
        set -- "$1" $run
        gpu=$($fp -q --input "$1" --decode gpu --headless --backend "$2" --bands "$3" --output - 2>>"$out/nvdec.err" | md5sum)
        if [ "$gpu" != "$cpu" ] || [ "${gpu%% *}" = d41d8cd98f00b204e9800998ecf8427e ]; then
            bad="$bad --backend $2 --bands $3;"
        fi
    done
    echo "--decode gpu against --decode cpu, copy, CUDA backend at bands 1-16 and the CPU backend: ${bad:-identical} (${cpu%% *})"
}
{
    # Exactness on short clips of both codecs at both sizes.
    for codec in libx264:mp4 libx265:mkv; do
        for size in 1920x1080 3840x2160; do
            c="$t/short-${codec%%:*}-$size.${codec##*:}"
            $ff -f lavfi -i "testsrc2=s=$size:r=30:d=2" -c:v "${codec%%:*}" -preset veryfast \
                -pix_fmt yuv420p "$c" 2>/dev/null
            echo "== ${codec%%:*} $size, 60 frames"
            same "$c"
        done
    done
    for clip in h264-1080p.mp4 hevc-4k.mkv; do
        n=$($nv -i "$t/$clip" -f framemd5 - 2>/dev/null | grep -vc '^#')
        echo "== $clip ($n frames)"
        $fp --input "$t/$clip" --decode gpu --headless --backend cuda --frames 1 2>&1 | grep -E '^input:|warning'
        # Where the time goes: each thread's CPU, the GPU's per-frame figures.
        $fp -v --input "$t/$clip" --decode gpu --headless --backend cuda --filter gauss:2 \
            >/dev/null 2>"$out/verbose-$clip.txt"
        rates "NVDEC alone: ffmpeg -hwaccel cuda, frames on the GPU" \
            "$nv -hwaccel cuda -hwaccel_output_format cuda -i CLIP -f null -" "$clip" "$n"
        rates "NVDEC alone, frames brought down: ffmpeg" \
            "$nv -hwaccel cuda -i CLIP -f null -" "$clip" "$n"
        rates "CPU decoding alone: ffmpeg" "$nv -i CLIP -f null -" "$clip" "$n"
        # Without gauss:2's kernels (the frames only copied device to device, and counted):
        # where this reaches NVDEC alone and gauss:2 does not, the GPU's work competes with
        # NVDEC's own copies; where neither does, the capture loop is the limit.
        rates "framepipe --decode gpu copy, no output" \
            "$fp -q --input CLIP --decode gpu --headless --backend cuda" "$clip" "$n"
        for d in gpu cpu; do
            rates "framepipe --decode $d gauss:2, no output" \
                "$fp -q --input CLIP --decode $d --headless --backend cuda --filter gauss:2" "$clip" "$n"
            rates "framepipe --decode $d gauss:2 --output - | cat" \
                "$fp -q --input CLIP --decode $d --headless --backend cuda --filter gauss:2 --output - | cat" "$clip" "$n"
        done
    done
    # A 10-bit HEVC clip: NVDEC gives P010, which is brought down and converted on the CPU
    # (framepipe carries 8 bits); the run must say so and finish, never misread it.
    $ff -f lavfi -i "testsrc2=s=1280x720:r=30:d=2" -c:v libx265 -preset ultrafast \
        -pix_fmt yuv420p10le "$t/hevc10.mkv" 2>/dev/null
    echo "== hevc10.mkv (10-bit)"
    $fp --input "$t/hevc10.mkv" --decode gpu --headless --backend cuda --output - 2>&1 >/dev/null |
        grep -E '^input:|warning|error|frames:'
} 2>&1 | tee "$out/nvdec.txt"
