#!/usr/bin/env bash
# The live camera wall (issue 37) on the GPU machine (device tool, carry gpu-bundle and
# wall-clips; run from the repository root): N cameras arriving as cameras do, and one
# framepipe over them as a user runs it: NVDEC, a filter, the mosaic composed on the GPU
# and sent out as HLS and to the browser view, every camera recorded untouched.
#
#   scripts/bench/wall.sh clips          here: 1080p30 clips with a 1 s GOP (H.264 and HEVC,
#                                        20 s, AAC audio) into wall-clips/ (x265 is not in
#                                        the server build's FFmpeg, so they are made here)
#   scripts/bench/wall.sh run N [S] [C]  there: N cameras of clip C (h264 or hevc; or a mix,
#                                        hevc:200+h264:125, whose sum is N) for S
#                                        seconds (60): a table row in $OUT/wall.txt, the
#                                        summary and the samples beside it (WALL_PROTO=srt:
#                                        the cameras call framepipe over SRT, not UDP;
#                                        WALL_CPU=K: the last K decoded by the CPU;
#                                        WALL_FLAGS="--detect M …": a second line, the
#                                        detector's rate, batches, skips and lag)
#   scripts/bench/wall.sh limit N [C]    there: the decoders' own limit on the same clips in
#                                        the same session: N `ffmpeg -hwaccel cuda` processes
#                                        at once (frames left on the GPU), then one framepipe
#                                        over N copies (--decode gpu, gauss:1, nothing
#                                        written): frames a second, all inputs,
#                                        and framepipe's ratio to ffmpeg's, in $OUT/limit.txt
#
# Each camera is an ffmpeg sender (`-re -stream_loop -1 -c copy`, MPEG-TS over loopback
# UDP), started a frame apart from the one before so their keyframes are spread. The row:
# frames dropped per camera (worst, and in all), p99 and max latency (capture to processed,
# the worst camera), host CPU (cores) and memory per camera, device memory per camera,
# NVDEC utilisation (nvidia-smi's dec, mean while running), the recordings' video packets
# against the frames each camera's capture read (ffprobe), the HLS playlist's segments and
# the frames it plays to its end (ffprobe), and whether the browser view answered.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=$PWD/gpu-bundle
FP=${FP:-$B/framepipe} # the framepipe under test (FP=gpu-bundle/framepipe-before: a pair)
OUT=${OUT:-/tmp/framepipe-out}

clips() {
    mkdir -p wall-clips
    local c
    for c in h264 hevc; do
        local enc=(-c:v libx264 -preset veryfast -b:v 3M -x264-params keyint=30:min-keyint=30:scenecut=0)
        [ "$c" = hevc ] && enc=(-c:v libx265 -preset veryfast -b:v 2M -x265-params keyint=30:min-keyint=30:scenecut=0:log-level=error)
        ffmpeg -v error -y -f lavfi -i testsrc2=size=1920x1080:rate=30 -f lavfi -i sine=f=440:r=48000 \
            -t 20 "${enc[@]}" -pix_fmt yuv420p -c:a aac -b:a 64k -f mpegts "wall-clips/$c.ts"
    done
    ls -la wall-clips
}

# The browser view's running figures (frames and drops so far, all cameras), as JSON.
live_stats() {
    python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$1/stats?token=wall', timeout=5).read().decode())" 2>/dev/null || echo "{}"
}

# Each thread's id, name and CPU ticks so far (user + system), one line a thread.
thread_ticks() {
    local t
    for t in /proc/"$1"/task/*; do
        printf '%s\t%s\t%s\n' "${t##*/}" "$(cat "$t/comm" 2>/dev/null)" "$(awk '{print $14 + $15}' "$t/stat" 2>/dev/null)"
    done
}

# Samples nvidia-smi's decoder utilisation (one line a second) into $1 until killed.
sample_gpu() {
    nvidia-smi dmon -s u -d 1 >"$1" 2>/dev/null
}

# The browser view's frames and drops so far, all cameras, every half second for $2 seconds
# (when the cameras join): seconds since it began, frames, dropped.
sample_stats() {
    local t0 k
    t0=$(date +%s.%N)
    for ((k = 0; k < $2 * 2; k++)); do
        live_stats "$1" | python3 -c "import json, sys; s = json.load(sys.stdin); print('$(since "$t0")', s.get('frames'), s.get('dropped'))" 2>/dev/null || true
        sleep 0.5
    done
}

run() {
    local n=$1 secs=${2:-60} codec=${3:-h264} w i
    w=$(mktemp -d)
    mkdir -p "$OUT" "$w/rec" "$w/hls"
    local args=() senders=() each=() part parts
    # Each camera's clip: one codec for all, or a mix (hevc:200+h264:125, in that order).
    if [[ $codec == *:* ]]; then
        IFS=+ read -r -a parts <<<"$codec"
        for part in "${parts[@]}"; do
            for ((i = 0; i < ${part#*:}; i++)); do each+=("${part%%:*}"); done
        done
        n=${#each[@]}
        codec=${codec//[:+]/-}
    else
        for ((i = 0; i < n; i++)); do each+=("$codec"); done
    fi
    # WALL_PROTO: how the cameras arrive: MPEG-TS over UDP (udp, the default), or over SRT
    # (srt: framepipe listens, each sender calls).
    local proto=${WALL_PROTO:-udp} into url
    # WALL_CPU=K: the last K cameras decoded by the CPU's cores (their own decode=cpu in an
    # inputs file), the others by NVDEC.
    local cpu=${WALL_CPU:-0} list=$w/cams.txt own
    for ((i = 0; i < n; i++)); do
        case $proto in
            srt) url="srt://127.0.0.1:$((30000 + i))?mode=listener" ;;
            *) url="udp://127.0.0.1:$((30000 + i))?fifo_size=1000000&overrun_nonfatal=1" ;;
        esac
        if ((cpu > 0)); then
            own=""
            ((i >= n - cpu)) && own=" [decode=cpu]"
            echo "cam-$i$own = $url" >>"$list"
        else
            args+=(--input "$url")
        fi
    done
    ((cpu > 0)) && args=(--inputs "$list") && codec="$codec-cpu$cpu"
    local port=$((18000 + RANDOM % 1000))
    # WALL_OUTPUTS replaces what the run makes (to find what bounds it): by default every
    # camera recorded, the mosaic as HLS and on the browser view.
    local outputs=(--record "$w/rec/cam-{n}.ts" --output "$w/hls/index.m3u8")
    [ -n "${WALL_OUTPUTS+x}" ] && read -r -a outputs <<<"${WALL_OUTPUTS//DIR/$w}"
    # WALL_FLAGS: more of framepipe's flags (-v: where the run was slow, with when).
    local flags=()
    [ -n "${WALL_FLAGS:-}" ] && read -r -a flags <<<"$WALL_FLAGS"
    "$FP" --headless --decode gpu --backend cuda --filter gauss:1 "${flags[@]}" \
        "${args[@]}" "${outputs[@]}" \
        --serve "127.0.0.1:$port" --serve-token wall --summary-json "$w/summary.json" >"$OUT/wall-$codec-$n.log" 2>&1 &
    local fp=$!
    sleep 2
    for ((i = 0; i < n; i++)); do
        case $proto in
            srt) into="srt://127.0.0.1:$((30000 + i))?mode=caller&pkt_size=1316" ;;
            *) into="udp://127.0.0.1:$((30000 + i))?pkt_size=1316" ;;
        esac
        "$B/ffmpeg" -nostdin -v error -re -stream_loop -1 -i "$PWD/wall-clips/${each[i]}.ts" -c copy -f mpegts "$into" &
        senders+=($!)
        sleep 0.033
    done
    sample_gpu "$w/dmon.txt" &
    local dmon=$!
    sample_stats "$port" 20 >"$OUT/wall-$codec-$n-series.txt" &
    local t0 cpu0 cpu1 warm=15 early late
    t0=$(date +%s.%N)
    # The steady state: from `warm` seconds on (every camera open and joined).
    sleep "$warm"
    early=$(live_stats "$port")
    cpu0=$(awk '{print $14 + $15}' "/proc/$fp/stat")
    thread_ticks "$fp" >"$w/threads0.txt"
    sleep "$((secs - warm))"
    cpu1=$(awk '{print $14 + $15}' "/proc/$fp/stat")
    thread_ticks "$fp" >"$w/threads1.txt"
    late=$(live_stats "$port")
    local rss dev hls view
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$fp/status")
    dev=$(nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits |
        awk -F', ' -v p="$fp" '$1 == p {print $2}')
    hls=$(grep -c '\.ts' "$w/hls/index.m3u8" 2>/dev/null || echo 0)
    view=$(python3 -c "import urllib.request as u; print(u.urlopen('http://127.0.0.1:$port/?token=wall', timeout=5).status)" 2>/dev/null || echo none)
    local threads fds
    threads=$(ls "/proc/$fp/task" | wc -l)
    fds=$(ls "/proc/$fp/fd" | wc -l)
    kill -INT "$fp"
    # A run that does not end within 10 s of the stop is a bug: where its threads wait is
    # kept beside the log, and it is killed.
    local k
    for ((k = 0; k < 100; k++)); do
        kill -0 "$fp" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$fp" 2>/dev/null; then
        for t in /proc/"$fp"/task/*; do
            echo "$(cat "$t/comm") $(awk '{print $3}' "$t/stat") $(cat "$t/wchan")"
        done | sort | uniq -c >"$OUT/wall-$codec-$n-stuck.txt"
        kill -9 "$fp"
    fi
    wait "$fp" || true
    kill "${senders[@]}" "$dmon" 2>/dev/null || true
    wait 2>/dev/null || true
    local elapsed
    elapsed=$(awk -v s="$t0" -v e="$(date +%s.%N)" 'BEGIN { print e - s }')
    : >"$w/recorded.txt"
    for ((i = 0; i < n; i++)); do
        local f="$w/rec/cam-$i.ts"
        [ -f "$f" ] || f=$(ls "$w/rec/cam-$i"*.ts 2>/dev/null | head -1)
        "$B/ffprobe" -v error -select_streams v:0 -count_packets -show_entries stream=nb_read_packets \
            -of csv=p=0 "$f" 2>/dev/null | head -1 >>"$w/recorded.txt" || echo 0 >>"$w/recorded.txt"
    done
    # The HLS playlist played to its end once the run has finished it: the frames ffprobe
    # decodes from its segments.
    local played
    played=$("$B/ffprobe" -v error -count_frames -select_streams v:0 -show_entries stream=nb_read_frames \
        -of csv=p=0 "$w/hls/index.m3u8" 2>/dev/null | head -1)
    hls="$hls (${played:-0} frames play)"
    cp "$w/summary.json" "$OUT/wall-$codec-$n.json" 2>/dev/null || true
    cp "$w/dmon.txt" "$OUT/wall-$codec-$n-dmon.txt" 2>/dev/null || true
    local label=$codec
    [ "$proto" = udp ] || label="$codec/$proto"
    python3 - "$w/summary.json" "$w/recorded.txt" "$w/dmon.txt" "$n" "$label" "$cpu0" "$cpu1" "$((secs - warm))" \
        "${rss:-0}" "${dev:-0}" "$hls" "$view" "$threads" "$fds" "$early" "$late" "$w/threads0.txt" "$w/threads1.txt" <<'PY' | tee -a "$OUT/wall.txt"
import json, sys
summary, recorded, dmon, n, codec, cpu0, cpu1, secs, rss, dev, hls, view, threads, fds, early, late, t0, t1 = sys.argv[1:]
def ticks(path):
    got = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        if len(f) == 3 and f[2].isdigit():
            got[f[0]] = (f[1], int(f[2]))
    return got
before, after = ticks(t0), ticks(t1)
by = {}
for tid, (name, t) in after.items():
    spent = t - before.get(tid, (name, 0))[1]
    by.setdefault(name.rstrip("0123456789 ") or name, []).append(spent)
busiest = [(sum(v), nm, len(v), max(v)) for nm, v in by.items()]
busiest.sort(reverse=True)
early, late = json.loads(early or "{}"), json.loads(late or "{}")
steady_frames = late.get("frames", 0) - early.get("frames", 0)
steady_drops = late.get("dropped", 0) - early.get("dropped", 0)
n = int(n)
s = json.load(open(summary))
ins = s["inputs"]
drops = [i["dropped"] for i in ins]
p99 = max(i["latency_ms"]["p99"] for i in ins)
mx = max(i["latency_ms"]["max"] for i in ins)
rec = [int(l) if l.strip().isdigit() else 0 for l in open(recorded)]
cap = [i["captured"] + i["dropped"] for i in ins]
short = sum(1 for r, c in zip(rec, cap) if r + 1 < c)
dec = []
for line in open(dmon):
    f = line.split()
    if f and f[0].isdigit() and len(f) >= 5:
        dec.append(float(f[4]) if f[4] != "-" else 0.0)
busy = [d for d in dec if d > 0]
ticks = 100
cores = (int(cpu1) - int(cpu0)) / ticks / float(secs)
got = [i["captured"] for i in ins]
print(f"{codec} N={n}: {s['fps']:.0f} fps together; steady state ({secs} s after {15} s): {steady_frames} frames, "
      f"{steady_drops} dropped; whole run: dropped worst camera {max(drops)}, all {sum(drops)}; "
      f"frames per camera {min(got)} to {max(got)}; "
      f"latency p99 {p99:.1f} ms, max {mx:.1f} ms (worst camera); CPU {cores:.2f} cores "
      f"({cores / n * 100:.1f} % of a core per camera); host memory {int(rss) / 1024 / n:.1f} MiB per camera; "
      f"device memory {int(dev) / n:.1f} MiB per camera; NVDEC {sum(busy) / max(len(busy), 1):.0f} % busy; "
      f"recordings: {n - short} of {n} hold every frame read (packets {sum(rec)} vs frames {sum(cap)}); "
      f"HLS segments {hls}; view HTTP {view}; {threads} threads, {fds} fds; busiest threads (by name: "
      f"cores in all, the busiest one's share of a core): "
      + ", ".join(f"{nm} x{k} {sp / 100 / float(secs):.2f} ({one / 100 / float(secs):.0%})" for sp, nm, k, one in busiest[:6]))
d = s.get("detection")
if d:
    t = s["elapsed_s"]
    skipped = sum(i.get("skipped", 0) for i in d["inputs"])
    lag = d.get("lag_ms") or {}
    print(f"  detection: {d['frames'] / t:.1f} a second ({d['frames']} in {t:.1f} s), {d['inferences']} inferences "
          f"of {d['frames'] / max(d['inferences'], 1):.1f}, {skipped} due skipped, fitted bytes to the host "
          f"{d.get('fitted_bytes_to_host')}, lag p99 {lag.get('p99', 0):.1f} ms, max {lag.get('max', 0):.1f} ms")
PY
    rm -rf "$w"
}

# Seconds since `$1` (a `date +%s.%N`).
since() { awk -v s="$1" -v e="$(date +%s.%N)" 'BEGIN { printf "%.3f", e - s }'; }

limit() {
    local n=$1 c=${2:-h264} clip frames s t_ff t_fp i args=()
    clip=$PWD/wall-clips/$c.ts
    mkdir -p "$OUT"
    frames=$("$B/ffprobe" -v error -count_packets -select_streams v:0 \
        -show_entries stream=nb_read_packets -of csv=p=0 "$clip")
    s=$(date +%s.%N)
    for i in $(seq "$n"); do
        "$B/ffmpeg" -v error -nostdin -hwaccel cuda -hwaccel_output_format cuda -i "$clip" -an -f null - &
    done
    wait
    t_ff=$(since "$s")
    for i in $(seq "$n"); do args+=(--input "$clip"); done
    s=$(date +%s.%N)
    "$FP" -q "${args[@]}" --decode gpu --backend cuda --filter gauss:1 --headless \
        --summary-json "$OUT/limit-$n.json" >"$OUT/limit-$n.log" 2>&1 </dev/null || echo "framepipe failed: $OUT/limit-$n.log"
    t_fp=$(since "$s")
    awk -v n="$n" -v f="$frames" -v a="$t_ff" -v b="$t_fp" -v c="$c" 'BEGIN {
        ff = n * f / a; fp = n * f / b
        printf "%s x %d (%d frames each): ffmpeg -hwaccel cuda processes %.0f fps (%.2f s), one framepipe %.0f fps (%.2f s): %.2fx\n", c, n, f, ff, a, fp, b, fp / ff
    }' | tee -a "$OUT/limit.txt"
}

case "${1:-}" in
    clips) clips ;;
    run) shift; run "$@" ;;
    limit) shift; limit "$@" ;;
    *) sed -n '2,27p' "$0"; exit 2 ;;
esac
