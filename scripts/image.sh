#!/usr/bin/env bash
# framepipe's container image made and run on this machine, without a registry to pull from
# (issue 65). As root on Debian 12:
#   scripts/image.sh build   the base from Debian's packages (mmdebstrap, cached), then the
#                            image from deploy/Containerfile with the binary built here
#   scripts/image.sh test    build, then every check: --version and doctor as uid 10001 on a
#                            read-only root; the image through a local registry and back;
#                            deploy/'s manifests played with it (scripts/image/pods_test.py);
#                            once all passed, deploy/image-tested holds the hash below
#   scripts/image.sh works   exit 0 where podman runs a container here (scripts/test.sh
#                            runs the test then), else one line saying why not
#   scripts/image.sh hash    the hash of deploy/ and these scripts, as the last passing
#                            test wrote it to deploy/image-tested
# Here the binary is the build without OpenCV against Debian's FFmpeg libraries (target/
# ffonly), and the base holds those libraries; a GPU server's image is built by the
# Containerfile's own first stage (the static FFmpeg). podman runs with runc and ulimits this
# machine allows (target/image/containers.conf, through CONTAINERS_CONF: nothing of the
# system's configuration is changed).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
WORK=$ROOT/target/image
BASE=localhost/framepipe-base:bookworm
IMAGE=localhost/framepipe:latest
REGISTRY=127.0.0.1:5055
FFMPEG_LIBS=libavformat59,libavcodec59,libavutil57,libswscale6,libswresample4

say() { printf '%s\n' "image: $*" >&2; }

setup() {
    . scripts/setup.sh
    # catatonit: the pause image that podman's `kube play` makes for a pod.
    setup_packages podman buildah mmdebstrap runc uidmap docker-registry python3-yaml ffmpeg curl \
        catatonit
    mkdir -p "$WORK"
    # crun fails on this machine's limits and cgroups; the ulimits must be at most the host's.
    cat > "$WORK/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
CONF
    export CONTAINERS_CONF=$WORK/containers.conf
}

base() {
    if podman image exists "$BASE"; then
        say "base $BASE is there (podman rmi it to make it again)"
        return
    fi
    local t0=$SECONDS
    mmdebstrap --quiet --variant=minbase --include="$FFMPEG_LIBS" bookworm - |
        podman import -q - "$BASE" >/dev/null
    say "base $BASE made from Debian's packages in $((SECONDS - t0)) s"
}

build() {
    setup
    base
    cargo build --release --locked --no-default-features --features ffmpeg \
        --target-dir target/ffonly -q
    local ctx=$WORK/context t0=$SECONDS
    rm -rf "$ctx"
    # What the Containerfile's first stage would leave: the binary and NVRTC's folder (empty
    # here: no GPU; the GPU server's build fetches NVIDIA's wheel).
    mkdir -p "$ctx/src/target/release" "$ctx/opt/nvrtc"
    cp target/ffonly/release/framepipe "$ctx/src/target/release/"
    strip "$ctx/src/target/release/framepipe"
    podman build -q --build-context build="$ctx" --build-arg BASE="$BASE" \
        -f deploy/Containerfile -t "$IMAGE" deploy >/dev/null
    local size
    size=$(podman image inspect "$IMAGE" --format '{{.Size}}')
    say "built $IMAGE in $((SECONDS - t0)) s, $((size / 1000000)) MB"
}

check() {
    printf 'ok    %s\n' "$*"
}

in_image() {
    local version doctor ids
    version=$(podman run --rm --read-only --user 10001:10001 "$IMAGE" --version)
    [[ $version == framepipe* ]] || { echo "FAIL  --version: $version"; exit 1; }
    check "--version as uid 10001 on a read-only root: $version"
    doctor=$(podman run --rm --read-only --user 10001:10001 --tmpfs /var/cache/framepipe "$IMAGE" doctor 2>&1)
    grep -q "CPU backend" <<<"$doctor" || { echo "FAIL  doctor: $doctor"; exit 1; }
    check "doctor as uid 10001 on a read-only root says the CPU backend (no GPU here)"
    ids=$(podman run --rm --entrypoint sh "$IMAGE" -c 'id -u; id -gn; stat -c %u:%g /recordings')
    [ "$ids" = $'10001\nframepipe\n10001:10001' ] || { echo "FAIL  user, group: $ids"; exit 1; }
    check "the user is 10001, its group framepipe (gid 10001) owns /recordings"
}

registry() {
    local dir=$WORK/registry pid digest again
    rm -rf "$dir" && mkdir -p "$dir/store"
    cat > "$dir/config.yml" <<CONF
version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: $dir/store
http:
  addr: $REGISTRY
CONF
    docker-registry serve "$dir/config.yml" >"$dir/log" 2>&1 &
    pid=$!
    trap 'kill $pid 2>/dev/null || true' RETURN
    for _ in $(seq 50); do curl -sf "http://$REGISTRY/v2/" >/dev/null && break; sleep 0.1; done
    podman push -q --tls-verify=false "$IMAGE" "$REGISTRY/framepipe:latest"
    digest=$(podman image inspect "$IMAGE" --format '{{.Id}}')
    podman rmi -f "$IMAGE" "$REGISTRY/framepipe:latest" >/dev/null
    podman pull -q --tls-verify=false "$REGISTRY/framepipe:latest" >/dev/null
    podman tag "$REGISTRY/framepipe:latest" "$IMAGE"
    again=$(podman image inspect "$IMAGE" --format '{{.Id}}')
    [ "$digest" = "$again" ] || { echo "FAIL  the registry gave back $again, not $digest"; exit 1; }
    check "the local registry ($REGISTRY) took the image and gave it back (${digest:0:12})"
}

# What the image and its test are made of, as one short hash.
hash() {
    cat deploy/Containerfile deploy/*.yaml scripts/image.sh scripts/image/*.py | sha256sum | cut -c1-16
}

# Whether podman runs containers here: exit 0, else one line saying why not.
works() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "not root (the image is built and run as root)"
        return 1
    fi
    if ! setup >/dev/null 2>&1; then
        echo "podman and its companions could not be installed"
        return 1
    fi
    local why
    if ! why=$(podman info 2>&1 >/dev/null); then
        echo "podman does not run here: $(printf '%s' "$why" | tail -n 1)"
        return 1
    fi
}

case "${1:-}" in
    hash) hash ;;
    works) works ;;
    build) build ;;
    test)
        build
        in_image
        registry
        rm -rf "$WORK/pods"
        mkdir -p "$WORK/pods"
        /usr/bin/python3 scripts/image/pods_test.py "$IMAGE" "$WORK/pods"
        hash > deploy/image-tested
        ;;
    *) echo "usage: scripts/image.sh build|test|works|hash" >&2; exit 2 ;;
esac
