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
        [ -f "$HOME/.cargo/env" ] && . "$HOME/.cargo/env"
    fi
    command -v cargo >/dev/null || {
        echo "framepipe setup: cargo not found; install Rust from https://rustup.rs" >&2
        exit 1
    }
}
