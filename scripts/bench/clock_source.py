#!/usr/bin/env python3
"""A camera whose pictures carry the wall clock, for scripts/bench/live.sh.

    clock_source.py FPS SECONDS | ffmpeg -f rawvideo -pix_fmt gray -s 640x360 -r FPS -i - ...

Writes 640x360 gray frames at FPS a second for SECONDS: 24 blocks across the top (each 26
pixels wide, 40 high), white for a 1 bit and black for 0, the bits of the wall clock in
milliseconds (modulo 2^24, most significant first) when the frame was made; a gray bar
below moves, so that the picture changes. The page reads the blocks back when it shows the
frame: the difference is the latency, glass to glass.
"""
import sys
import time

W, H, BITS, BW, BH = 640, 360, 24, 26, 40


def frame(ms, k):
    rows = bytearray(W * H)
    bits = [(ms >> (BITS - 1 - b)) & 1 for b in range(BITS)]
    top = bytearray()
    for b in bits:
        top += bytes([235 if b else 16]) * BW
    top += bytes([128]) * (W - len(top))
    for y in range(BH):
        rows[y * W:(y + 1) * W] = top
    x = (k * 8) % (W - 40)
    for y in range(200, 240):
        rows[y * W + x:y * W + x + 40] = bytes([200]) * 40
    return rows


def main():
    fps, seconds = float(sys.argv[1]), float(sys.argv[2])
    out = sys.stdout.buffer
    start = time.time()
    for k in range(int(fps * seconds)):
        due = start + k / fps
        wait = due - time.time()
        if wait > 0:
            time.sleep(wait)
        ms = int(time.time() * 1000) % (1 << BITS)
        out.write(frame(ms, k))
        out.flush()


main()
