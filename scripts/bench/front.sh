#!/usr/bin/env bash
# The front's cost (issue 81): a wall of N cameras (test patterns, 64x48 at 2 fps: the API's
# work, not the pictures', is measured) over S shards on this machine, each with its own
# --serve, and `framepipe front` over them. For /api/inputs and /api/recordings: REQ
# requests one after another to every shard at once (the bound: the slowest shard's answer
# of each round) and the same through the front; p50 and p99 of each, and the front's p99
# against the bound's.
#
#   scripts/bench/front.sh [N] [S] [REQ]      (300 cameras, 4 shards, 200 requests)
set -euo pipefail
cd "$(dirname "$0")/../.."
n=${1:-300} s=${2:-4} req=${3:-200}
bin=${FRAMEPIPE:-target/release/framepipe}
dir=$(mktemp -d)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT
for ((i = 0; i < n; i++)); do echo "cam-$i = pattern:64x48:i420:2"; done >"$dir/wall.txt"
base=$((20000 + RANDOM % 20000))
urls=()
for ((k = 0; k < s; k++)); do
    "$bin" -q --headless --inputs "$dir/wall.txt" --shard "$k/$s" --serve $((base + k)) >/dev/null 2>&1 &
    pids+=($!)
    urls+=("http://127.0.0.1:$((base + k))")
done
front=$((base + s))
"$bin" front --shards "$(IFS=,; echo "${urls[*]}")" --serve "$front" >/dev/null 2>&1 &
pids+=($!)
python3 - "$front" "$n" "$req" "${urls[@]}" <<'PY'
import concurrent.futures, http.client, json, sys, time

front, n, req, shards = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
ports = [int(u.rsplit(":", 1)[1]) for u in shards]

def get(port, path):
    t = time.perf_counter()
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("GET", path)
    body = c.getresponse().read()
    c.close()
    return time.perf_counter() - t, body

deadline = time.time() + 60
while True:
    try:
        _, body = get(front, "/api/inputs")
        if len(json.loads(body)["inputs"]) == n:
            break
    except (OSError, ValueError, KeyError):
        pass
    if time.time() > deadline:
        sys.exit(f"the front never listed {n} cameras")
    time.sleep(0.5)

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] * 1e3

pool = concurrent.futures.ThreadPoolExecutor(len(ports))
for path in ["/api/inputs", "/api/recordings"]:
    bound, through = [], []
    for _ in range(req):
        # The bound: every shard asked at once, as the front asks them; the slowest answer.
        bound.append(max(t for t, _ in pool.map(lambda p: get(p, path), ports)))
        through.append(get(front, path)[0])
    print(f"{path} over {len(ports)} shards, {n} cameras, {req} requests: "
          f"shards at once (bound) p50 {q(bound, .5):.1f} ms p99 {q(bound, .99):.1f} ms; "
          f"through the front p50 {q(through, .5):.1f} ms p99 {q(through, .99):.1f} ms "
          f"({q(through, .99) / q(bound, .99):.2f}x the bound's p99)")
PY
