#!/usr/bin/env python3
"""Boxes of one provider against another's on the same frames (two --detections files):
each box of the first matched to one of the second on the same frame with the same label at
IoU >= 0.9 (issue 79's measure). Prints one line; exit 1 where any box of the first is
unmatched.

    scripts/bench/detect-compare.py CPU.jsonl CUDA.jsonl
"""
import json
import sys


def boxes(path):
    frames = {}
    for line in open(path):
        d = json.loads(line)
        frames[(d["input"], d["frame"])] = [(b["label"], b["box"]) for b in d["detections"]]
    return frames


def iou(a, b):
    w = min(a[2], b[2]) - max(a[0], b[0])
    h = min(a[3], b[3]) - max(a[1], b[1])
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter / (area(a) + area(b) - inter)


def main():
    first, second = boxes(sys.argv[1]), boxes(sys.argv[2])
    total = matched = extra = 0
    for key, mine in first.items():
        theirs = list(second.get(key, []))
        for label, box in mine:
            total += 1
            best = max(
                ((iou(box, b), k) for k, (l, b) in enumerate(theirs) if l == label),
                default=(0.0, None),
            )
            if best[0] >= 0.9:
                matched += 1
                theirs.pop(best[1])
        extra += len(theirs)
    missing = [k for k in first if k not in second]
    print(
        f"{matched} of {total} boxes matched at IoU >= 0.9 with the same label; "
        f"{extra} more in the second; frames {len(first)} and {len(second)}"
        + (f"; {len(missing)} frames missing from the second" if missing else "")
    )
    sys.exit(0 if matched == total and not missing else 1)


main()
