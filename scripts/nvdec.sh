#!/usr/bin/env bash
# NVDEC on the GPU machine (issue 20), after `scripts/gpu.sh bundle` and
# `scripts/gpu.sh ffmpeg WHEEL` here (device tool, carry gpu-bundle):
#
#   scripts/nvdec.sh [FRAMES]
#
# Makes a 1080p H.264 and a 4K HEVC clip with the wheel's ffmpeg (testsrc2), then for each:
# framepipe's frames with --decode gpu against --decode cpu, bit for bit (the whole Y4M
# stream's checksum, `copy`, bands 1, 4 and 16); the rates of NVDEC decoding alone (the
# bundle's ffmpeg-nvdec, -hwaccel cuda), of framepipe --decode gpu and --decode cpu with
# gauss:2 to nothing and to a Y4M pipe. Logs in $OUT.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-/tmp/framepipe-out}
frames=${1:-600}
mkdir -p "$out"
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
nv="$PWD/gpu-bundle/ffmpeg-nvdec -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe"
clip_1080p_h264 "$t/ffmpeg" "$t/h264-1080p.mp4" "$frames"
$ff -f lavfi -i "testsrc2=s=3840x2160:r=30:d=$((frames / 60))" -c:v libx265 -preset ultrafast \
    -pix_fmt yuv420p "$t/hevc-4k.mkv"
fps() { # frames per second of "$2" over $3 frames, best of 2 ("failed" where a run failed)
    local best=0 s e
    for _ in 1 2; do
        s=$(date +%s%N)
        if ! bash -o pipefail -c "$2" >/dev/null 2>>"$out/nvdec.err"; then
            printf "%-64s   failed (nvdec.err)\n" "$1"
            return
        fi
        e=$(date +%s%N)
        best=$(awk -v n="$3" -v s="$s" -v e="$e" -v b="$best" 'BEGIN { f = n / ((e - s) / 1e9); print (f > b) ? f : b }')
    done
    printf "%-64s %8.1f fps\n" "$1" "$best"
}
{
    for clip in h264-1080p.mp4 hevc-4k.mkv; do
        n=$($nv -i "$t/$clip" -f framemd5 - 2>/dev/null | grep -vc '^#')
        echo "== $clip ($n frames)"
        for bands in 1 4 16; do
            gpu=$($fp -q --input "$t/$clip" --decode gpu --headless --backend cuda --bands "$bands" --output - 2>>"$out/nvdec.err" | md5sum)
            cpu=$($fp -q --input "$t/$clip" --decode cpu --headless --backend cuda --bands "$bands" --output - 2>/dev/null | md5sum)
            if [ "$gpu" = "$cpu" ] && [ "${gpu%% *}" != d41d8cd98f00b204e9800998ecf8427e ]; then
                same="identical"
            else
                same="DIFFERENT or empty (nvdec.err)"
            fi
            echo "--decode gpu against --decode cpu, copy, $bands band(s): $same ($gpu)"
        done
        $fp --input "$t/$clip" --decode gpu --headless --backend cuda --frames 1 2>&1 | grep -E '^input:|warning'
        fps "NVDEC alone: ffmpeg-nvdec -hwaccel cuda (frames on the device)" \
            "$nv -hwaccel cuda -hwaccel_output_format cuda -i $t/$clip -f null -" "$n"
        fps "NVDEC alone, frames brought down: ffmpeg-nvdec -hwaccel cuda" \
            "$nv -hwaccel cuda -i $t/$clip -f null -" "$n"
        fps "CPU decoding alone: ffmpeg-nvdec" "$nv -i $t/$clip -f null -" "$n"
        for d in gpu cpu; do
            fps "framepipe --decode $d gauss:2, no output" \
                "$fp -q --input $t/$clip --decode $d --headless --backend cuda --filter gauss:2" "$n"
            fps "framepipe --decode $d gauss:2 --output - | cat" \
                "$fp -q --input $t/$clip --decode $d --headless --backend cuda --filter gauss:2 --output - | cat" "$n"
        done
    done
} 2>&1 | tee "$out/nvdec.txt"
