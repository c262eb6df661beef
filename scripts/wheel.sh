#!/usr/bin/env bash
# Builds framepipe's Python package as one wheel into target/wheels/: abi3 (one wheel for
# Python 3.8 on), built by maturin from python/ (maturin in a virtual environment of its own,
# target/maturin, fetched once). The wheel carries framepipe whole and needs only the
# machine's FFmpeg and OpenCV libraries (scripts/setup.sh's), so it installs with nothing
# built and nothing fetched:
#   scripts/wheel.sh
#   python3 -m venv .venv && .venv/bin/pip install --no-index --find-links target/wheels framepipe
set -euo pipefail
top="$(cd "$(dirname "$0")/.." && pwd)"
cd "$top"
if [ "${1:-}" != "--no-setup" ]; then
    . scripts/setup.sh
    setup_packages python3-venv
fi
if ! target/maturin/bin/maturin --version >/dev/null 2>&1; then
    /usr/bin/python3 -m venv target/maturin
    target/maturin/bin/pip install --quiet --disable-pip-version-check 'maturin>=1.7,<2'
fi
mkdir -p target/wheels
rm -f target/wheels/framepipe-*.whl
# linux, not manylinux: the wheel links the machine's own FFmpeg and OpenCV.
target/maturin/bin/maturin build --release --quiet --manifest-path python/Cargo.toml \
    --compatibility linux --out target/wheels
ls target/wheels/framepipe-*.whl
