#!/usr/bin/env bash
# Live view (issue 64; not in CI): latency glass to glass, and what viewers cost.
#   scripts/bench/live.sh [SECONDS]
# A 640x360 30 fps camera whose pictures carry the wall clock (clock_source.py, encoded by
# ffmpeg's libx264 `ultrafast`/`zerolatency` and sent as MPEG-TS over UDP) is watched in the
# browser view by headless Chromium over WebRTC, MSE and Motion JPEG in turn, SECONDS each
# (default 15; at most 12, what one DevTools call may take): each frame's clock is read when
# the page presents it (latency.js); p50 and p99 printed. Then 1, 10, 20 and 50 WHEP viewers of the camera at once (aiortc,
# whep_viewers.py): framepipe's CPU (its own user + system time, from /proc) and the RTP
# packets each viewer received a second (each gets the camera's own stream: its bitrate).
set -euo pipefail
cd "$(dirname "$0")/../.."
S=${1:-15}
BIN=${FRAMEPIPE_BIN:-target/release/framepipe}
[ -x "$BIN" ] || cargo build --release -q
PY=target/rtcvenv/bin/python
T=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true; rm -rf "$T"' EXIT
UDP=$((20000 + RANDOM % 10000)); VIEW=$((UDP + 1)); DEV=$((UDP + 2))
python3 scripts/bench/clock_source.py 30 $((S * 3 + 200)) |
    ffmpeg -v error -f rawvideo -pix_fmt gray -s 640x360 -r 30 -i - -c:v libx264 -preset ultrafast \
        -tune zerolatency -g 30 -pix_fmt yuv420p -f mpegts "udp://127.0.0.1:$UDP?pkt_size=1316" &
pids+=($!)
"$BIN" --headless -q -i "udp://127.0.0.1:$UDP" --serve "$VIEW" > "$T/run.log" 2>&1 &
run=$!
pids+=($run)
for _ in $(seq 100); do (echo > "/dev/tcp/127.0.0.1/$VIEW") 2>/dev/null && break; sleep 0.1; done
sleep 2
chromium-headless-shell --no-sandbox --disable-gpu --window-size=1100,700 --remote-debugging-port="$DEV" \
    --user-data-dir="$T/chromium" --autoplay-policy=no-user-gesture-required "http://127.0.0.1:$VIEW/" >/dev/null 2>&1 &
chromium=$!
pids+=($chromium)
sleep 3
echo "way p50_ms p99_ms frames"
for way in WebRTC MSE "Motion JPEG"; do
    js=$(sed -e "s/WAY, SECONDS/\"$way\", $((S < 12 ? S : 12))/" scripts/bench/latency.js)
    name=0
    [ "$way" = "Motion JPEG" ] && name=mosaic
    timeout 60 /usr/bin/python3 tests/support/cdp.py "$DEV" "eval:framepipe.watch('$name', ['$way'])" "eval:$js" | tail -1 |
        python3 -c 'import json,sys; r=json.loads(json.loads(sys.stdin.read())); print(r["way"].replace(" ", "-"), r["p50"], r["p99"], r["frames"], "(played " + r["via"] + ")")'
done
kill "$chromium" 2>/dev/null || true
cpu() { awk '{print $14 + $15}' "/proc/$run/stat"; }
hz=$(getconf CLK_TCK)
echo "viewers cpu_percent_of_a_core packets_s_each"
for n in 1 10 20 50; do
    "$PY" scripts/bench/whep_viewers.py "http://127.0.0.1:$VIEW/whep/0" "$n" $((S + 4)) > "$T/v.json" 2>/dev/null &
    viewers=$!
    sleep $((4 + n / 10))
    a=$(cpu)
    sleep "$S"
    b=$(cpu)
    wait "$viewers"
    python3 - "$n" "$a" "$b" "$hz" "$S" "$T/v.json" <<'PY'
import json, sys
n, a, b, hz, s = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
v = json.load(open(sys.argv[6]))
print(n, f"{100 * (b - a) / hz / s:.1f}", f"{v['packets'] / (s + 4) / max(v['answered'], 1):.0f}", f"({v['answered']} answered)")
PY
done
