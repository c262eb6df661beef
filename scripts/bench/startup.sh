#!/bin/bash
# Start-up: one frame and exit, cold (no kernel cache), warm, and with the cache off.
B=${1:-gpu-bundle/framepipe}
ms() { local s=$(date +%s%N); "$@" >/dev/null 2>&1; local e=$(date +%s%N); echo $(( (e-s)/1000000 )); }
run() { ms "$B" --input pattern --size 1920x1080 --frames 1 --headless -q --backend cuda; }
export FRAMEPIPE_CACHE_DIR=$(mktemp -d)/kernels
echo "cold (empty cache): $(run) ms"
for i in 1 2 3 4 5; do echo "warm $i: $(run) ms"; done
ls -la $FRAMEPIPE_CACHE_DIR
for i in 1 2 3; do echo "cache off $i: $(FRAMEPIPE_CACHE_DIR= run) ms"; done
"$B" --input pattern --size 1920x1080 --frames 1 --headless -v --backend cuda 2>&1 | grep -i "cache\|backend:" | head -5
