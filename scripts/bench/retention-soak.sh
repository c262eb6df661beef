#!/usr/bin/env bash
# Retention soak (issue 63; CI runs a 12 s version, tests/service.rs): 4 live cameras
# (ffmpeg serving its test pattern as MPEG-TS over HTTP, H.264 at about 1.5 Mbit/s each)
# recorded in 2 s segments for SECONDS (default 600) onto a 50 MB tmpfs (a folder with
# --retain-size 40M where this is not root), with --retain-free 20%. Samples the disk every
# second; prints the least free it ever had, the segments written, deleted and kept, whether
# the deletions said equal the files gone, whether the newest segments are there, and
# whether a file put there by hand is untouched.
#   scripts/bench/retention-soak.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
SECONDS_RUN=${1:-600}
BIN=${FRAMEPIPE_BIN:-target/release/framepipe}
[ -x "$BIN" ] || cargo build --release -q
T=$(mktemp -d)
pids=()
mounted=
cleanup() {
    kill "${pids[@]}" 2>/dev/null || true
    sleep 0.5
    [ -n "$mounted" ] && umount "$T/disk"
    rm -rf "$T"
}
trap cleanup EXIT
mkdir "$T/disk"
budget=(--retain-free 20%)
if [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=50m tmpfs "$T/disk" 2>/dev/null; then
    mounted=1
    echo "disk: a 50 MB tmpfs, --retain-free 20%"
else
    budget=(--retain-size 40M)
    echo "disk: a folder (not root: no tmpfs), --retain-size 40M"
fi
mkdir "$T/disk/rec"
echo "put here by hand" > "$T/disk/rec/cam-0-00000.mp4"
: > "$T/cameras.txt"
for k in 0 1 2 3; do
    port=$((18700 + k))
    ffmpeg -v error -re -f lavfi -i "testsrc2=s=640x360:r=25" -c:v libx264 -preset ultrafast \
        -b:v 1500k -g 25 -f mpegts -listen 1 "http://127.0.0.1:$port/live.ts" 2>/dev/null &
    pids+=($!)
    echo "cam-$k = http://127.0.0.1:$port/live.ts" >> "$T/cameras.txt"
done
sleep 1
"$BIN" --headless --inputs "$T/cameras.txt" --record "$T/disk/rec/{name}-{seg}.mp4" \
    --segment 2 "${budget[@]}" --summary-json "$T/summary.json" > "$T/run.log" 2>&1 &
run=$!
pids+=($run)
least=100
for ((s = 1; s <= SECONDS_RUN; s++)); do
    sleep 1
    free=$(df --output=pcent "$T/disk" | tail -1 | tr -dc 0-9)
    free=$((100 - free))
    ((free < least)) && least=$free
    ((s % 60 == 0)) && echo "${s} s: ${free} % free, $(ls "$T/disk/rec" | wc -l) files"
done
kill -INT "$run"
wait "$run" || true
python3 - "$T" <<'EOF'
import json, os, sys
t = sys.argv[1]
summary = json.load(open(f"{t}/summary.json"))
log = open(f"{t}/run.log").read()
written, gone, newest_kept = 0, 0, True
for i in summary["inputs"]:
    files = (i.get("recorded") or {}).get("files", [])
    written += len(files)
    missing = [f for f in files if not os.path.exists(f)]
    gone += len(missing)
    newest_kept &= all(os.path.exists(f) for f in files[-3:])
said = sum(int(l.split("retention: deleted ")[1].split()[0]) for l in log.splitlines() if "retention: deleted " in l)
hand = open(f"{t}/disk/rec/cam-0-00000.mp4").read() == "put here by hand\n"
full = "No space left" in log or "failing" in log
print(f"segments written {written}, deleted {gone}, kept {written - gone}")
print(f"deletions said {said} = files gone {gone}: {said == gone}")
print(f"newest segments kept: {newest_kept}; the file put by hand untouched: {hand}")
print(f"the disk filled up (a write failed): {full}")
print(f"ok: {said == gone and newest_kept and hand and not full and summary.get('ok', True)}")
EOF
echo "least free: ${least} %"
