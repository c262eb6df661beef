#!/usr/bin/env bash
# ad hoc: where start-up and exit go in the hop, with perf on framepipe alone
set -uo pipefail
out=${OUT:-/tmp/o}; mkdir -p $out
. scripts/tools/wheel.sh
t=$(wheel_ffmpeg)
ff="$t/ffmpeg -v error -nostdin"
fp="$PWD/gpu-bundle/framepipe"
clip_1080p_h264 "$t/ffmpeg" "$t/in.mp4" 3000
y4m="$ff -i $t/in.mp4 -f yuv4mpegpipe -"
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
echo "== one 1080p frame and exit, -v"
for i in 1 2 3; do
  s=$(date +%s%N); $fp -v --input pattern:1920x1080:bgr24:0 --frames 1 --headless --backend cuda 2>$out/s.txt; w=$(ms $s)
  echo "wall $w ms: $(grep -oE '(CUDA warmed up|backend made|run ended|exiting) at [0-9.]+' $out/s.txt | tr '\n' ';') $(grep -o 'joined.*' $out/s.txt)"
done
echo "== hop gauss:2 | cat, -v"
for i in 1 2 3; do
  s=$(date +%s%N)
  $y4m | $fp -v --input - --headless --backend cuda --filter gauss:2 --output - 2>$out/h.txt | { cat >/dev/null; echo "cat saw the end at $(ms $s) ms" >$out/c.txt; }
  w=$(ms $s)
  echo "wall $w ms; $(cat $out/c.txt): $(grep -oE '(input open|CUDA warmed up|backend made|run ended|exiting) at [0-9.]+' $out/h.txt | tr '\n' ';') $(grep -o 'joined.*' $out/h.txt); $(grep -o 'time: [0-9.]* s, [0-9.]* fps' $out/h.txt)"
done
echo "== relay8 | cat, for the same clip"
for i in 1 2; do s=$(date +%s%N); $y4m | gpu-bundle/piperead relay8 2>>$out/r.txt | cat >/dev/null; echo "wall $(ms $s) ms"; done
echo "== pipe alone"
for i in 1 2; do s=$(date +%s%N); $y4m | cat >/dev/null; echo "wall $(ms $s) ms"; done
tar -xJf perf-kit/perf.tar.xz -C "$t"
perf() { LD_LIBRARY_PATH="$t/perfkit/lib" "$t/perfkit/perf" "$@"; }
echo "== perf of framepipe alone in the hop (-g), by thread"
$y4m | perf record -q -g -F 1999 -o $t/f.data -- $fp -q --input - --headless --backend cuda --filter gauss:2 --output - 2>/dev/null | cat >/dev/null
perf report -i $t/f.data --stdio --no-children --sort comm -g none 2>/dev/null | grep -vE '^#|^$' | head -12
for part in 0%-8% 8%-92% 92%-100%; do
  echo "-- time $part of the run: by thread and function"
  perf report -i $t/f.data --time $part --stdio --no-children --sort comm,dso,sym -g none 2>/dev/null | grep -vE '^#|^$' | head -25
done
echo "-- the last 8%: callers of the main thread's kernel time"
perf report -i $t/f.data --time 92%-100% --comm framepipe --stdio --no-children --sort sym -g caller,0.5,callee,function,percent --percent-limit 5 2>/dev/null | grep -vE '^#|^$' | head -70
echo "== perf of one frame and exit"
perf record -q -g -F 4999 -o $t/s.data -- $fp -q --input pattern:1920x1080:bgr24:0 --frames 1 --headless --backend cuda 2>/dev/null
perf report -i $t/s.data --stdio --no-children --sort comm,dso -g none 2>/dev/null | grep -vE '^#|^$' | head -14
perf report -i $t/s.data --stdio --no-children --sort comm,sym -g none 2>/dev/null | grep -vE '^#|^$' | head -30
