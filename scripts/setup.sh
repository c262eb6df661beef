#!/usr/bin/env bash
# Installs what framepipe needs on a fresh Debian/Ubuntu machine; does nothing when it is
# already there. Sourced by run.sh and test.sh.
#   setup_packages [extra packages...]
set -euo pipefail

# Building: OpenCV's headers and libraries (Qt5 windows, FFmpeg and GStreamer capture),
# clang for the opencv and ffmpeg-next crates' binding generators; FFmpeg's development files
# (video files are encoded and muxed through them); GStreamer's base plugins for videotestsrc.
FRAMEPIPE_PACKAGES=(libopencv-dev clang libclang-dev pkg-config gstreamer1.0-plugins-base
    libavformat-dev libavcodec-dev libavutil-dev libswscale-dev)

setup_packages() {
    local want=("${FRAMEPIPE_PACKAGES[@]}" "$@") missing=() p
    for p in "${want[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "framepipe setup: installing ${missing[*]}" >&2
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
    fi
    if ! command -v cargo >/dev/null; then
        [ -f "${CARGO_HOME:-$HOME/.cargo}/env" ] && . "${CARGO_HOME:-$HOME/.cargo}/env"
    fi
    command -v cargo >/dev/null || setup_rust
}

# Rust's stable toolchain (with rustfmt and clippy, which test.sh runs) by rustup, for this
# user, where no cargo is found: rustup-init fetched from static.rust-lang.org (Debian's own
# rustc is too old for the crates framepipe uses).
setup_rust() {
    local arch init
    arch="$(uname -m)"
    init="$(mktemp -d)/rustup-init"
    echo "framepipe setup: installing Rust (stable, for this user) with rustup" >&2
    command -v curl >/dev/null || setup_packages_only curl ca-certificates
    curl -sSf --retry 3 -o "$init" \
        "https://static.rust-lang.org/rustup/dist/${arch}-unknown-linux-gnu/rustup-init" || {
        echo "framepipe setup: could not fetch rustup-init; install Rust from https://rustup.rs" >&2
        exit 1
    }
    chmod +x "$init"
    "$init" -y --no-modify-path --profile minimal --default-toolchain stable \
        --component rustfmt,clippy >&2
    rm -f "$init"
    . "${CARGO_HOME:-$HOME/.cargo}/env"
}

# apt packages alone (no Rust check): what setup_rust itself needs.
setup_packages_only() {
    local sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "$@" >&2
}

# ONNX Runtime for --detect (issue 61), for the project: PyPI's onnxruntime wheel in a
# virtual environment of its own (target/ortvenv, which sees Debian's Python packages), its
# library copied to target/ort/, where framepipe finds it (or set ORT_DYLIB_PATH). With
# `rapidocr`, PyPI's rapidocr-onnxruntime too (the tests' reference detector) and onnx (the
# tests build YOLO models with it), and the PP-OCRv4 text detector copied beside the library.
#   setup_onnxruntime [rapidocr]
setup_onnxruntime() {
    local top venv
    top="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
    venv="$top/target/ortvenv"
    # Already here (every start of run.sh passes by): nothing to ask Python.
    if compgen -G "$top/target/ort/libonnxruntime.so*" >/dev/null &&
        { [ "${1:-}" != rapidocr ] || [ -f "$top/target/ort/ch_PP-OCRv4_det_infer.onnx" ] &&
            "$venv/bin/python" -c "import onnx" 2>/dev/null; }; then
        return 0
    fi
    if [ ! -x "$venv/bin/python" ]; then
        python3 -m venv --system-site-packages "$venv" >&2
    fi
    "$venv/bin/python" -c "import onnxruntime" 2>/dev/null ||
        "$venv/bin/pip" install --quiet --disable-pip-version-check onnxruntime==1.32.0 >&2
    if [ "${1:-}" = rapidocr ]; then
        "$venv/bin/python" -c "import rapidocr_onnxruntime, onnx" 2>/dev/null ||
            "$venv/bin/pip" install --quiet --disable-pip-version-check rapidocr-onnxruntime==1.4.4 onnx==1.19.1 >&2
    fi
    mkdir -p "$top/target/ort"
    "$venv/bin/python" - "$top/target/ort" <<'PY'
import glob, os, shutil, sys
to = sys.argv[1]
import onnxruntime
for lib in glob.glob(os.path.join(os.path.dirname(onnxruntime.__file__), "capi", "libonnxruntime.so*")):
    if not os.path.exists(os.path.join(to, os.path.basename(lib))):
        shutil.copy(lib, to)
try:
    import rapidocr_onnxruntime
    model = os.path.join(os.path.dirname(rapidocr_onnxruntime.__file__), "models", "ch_PP-OCRv4_det_infer.onnx")
    if not os.path.exists(os.path.join(to, os.path.basename(model))):
        shutil.copy(model, to)
except ImportError:
    pass
PY
}
