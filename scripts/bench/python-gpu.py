#!/usr/bin/env python3
"""framepipe from Python on the GPU machine (issue 40), after `scripts/gpu.sh bundle` here
(device tool, carry gpu-carry; `scripts/gpu.sh unpack` there):

    PYTHONPATH=gpu-bundle/py python3 scripts/bench/python-gpu.py [SECTIONS...]

Sections (all by default):
  exact    frames the CUDA backend lends on the GPU (torch.from_dlpack) equal the command
           line's output bit for bit (--backend cuda, NVDEC, gauss:2, I420 and BGR), and
           the CPU backend's frames equal the command line's on the CPU;
  order    a consumer that reads each frame on a stream of its own, after a long kernel,
           and releases it at once, still reads that frame (the buffer is not written
           again before its work is done);
  hold     a whole clip's frames kept on the GPU at once, then checked;
  churn    runs opened and closed 200 times with frames held: device memory stays put;
  shaped   frames fitted to 224x224 and laid out for a model on the GPU (rgbf32, rgbf16,
           rgb24; letterbox, crop, stretch) equal the CPU backend's;
  model    16 files of 1080p H.264 through NVDEC into a torchvision ResNet-18 (random
           weights) in batches of 16, against framepipe alone and the model alone on
           resident tensors: frames shaped by framepipe on the GPU, and 1080p frames
           resized by PyTorch; and an OpenCV-Python loop on the same files.

Prints one line per check and a table of rates; exits non-zero where a check failed.
"""

import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

import framepipe

B = os.path.abspath("gpu-bundle")
FFMPEG = os.path.join(B, "ffmpeg")
FRAMEPIPE = os.path.join(B, "framepipe")
W, H = 1920, 1080
failed = []


def check(ok, what):
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        failed.append(what)


def clip(path, frames):
    """The first `frames` frames of the wall's 1080p30 H.264 clip (a keyframe a second:
    `scripts/bench/wall.sh clips`, carried in wall-clips/), video only, stream-copied (the
    server build's ffmpeg has no lavfi to draw one)."""
    subprocess.run(
        [FFMPEG, "-v", "error", "-y", "-i", os.path.abspath("wall-clips/h264.ts"),
         "-map", "0:v", "-c", "copy", "-frames:v", str(frames), path],
        check=True)


def y4m_frames(data):
    """The frames of a YUV4MPEG2 stream, as bytes each."""
    head_end = data.index(b"\n")
    header = data[:head_end].split()
    w = int(next(t[1:] for t in header if t.startswith(b"W")))
    h = int(next(t[1:] for t in header if t.startswith(b"H")))
    colour = next((t[1:] for t in header if t.startswith(b"C")), b"420")
    size = w * h * 3 if colour.startswith(b"444") or colour == b"bgr" else w * h * 3 // 2
    frames, at = [], head_end + 1
    while at < len(data):
        at = data.index(b"\n", at) + 1  # FRAME line
        frames.append(data[at:at + size])
        at += size
    return frames


def cli_frames(path, *flags, fmt="i420"):
    """The command line's processed frames of `path`, as it writes them to standard output
    (Y4M for I420, headerless frames for BGR)."""
    args = [FRAMEPIPE, "-q", "--input", path, "--headless", *flags, "--output", "-",
            "--output-format", fmt]
    data = subprocess.run(args, check=True, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE).stdout
    if fmt == "i420":
        return y4m_frames(data)
    n = W * H * 3
    return [data[i:i + n] for i in range(0, len(data), n)]


def exact(path):
    # NVDEC's pictures, and the CPU decoder's lent from page-locked buffers (src/source/pinned.rs).
    for decode, fmt in (("gpu", "i420"), ("gpu", "bgr24"), ("cpu", "i420")):
        ref = cli_frames(path, "--backend", "cuda", "--decode", decode, "--filter", "gauss:2", fmt=fmt)
        run = framepipe.open(path, backend="cuda", decode=decode, filter="gauss:2", format=fmt)
        devices, equal, n = set(), 0, 0
        for f in run:
            t = torch.from_dlpack(f)
            devices.add(str(t.device))
            equal += n < len(ref) and t.cpu().numpy().tobytes() == ref[n]
            n += 1
        check(devices == {"cuda:0"} and n == len(ref) and equal == n,
              f"exact {fmt}: {equal} of {n} frames lent on {sorted(devices)} equal the CLI's "
              f"({len(ref)} frames, --backend cuda --decode {decode} --filter gauss:2)")
    ref = cli_frames(path, "--backend", "cpu", "--decode", "cpu", "--filter", "gauss:2")
    got = [np.asarray(f).tobytes() for f in
           framepipe.open(path, backend="cpu", decode="cpu", filter="gauss:2", format="i420")]
    check(got == ref, f"exact cpu backend: {len(got)} frames equal the CLI's ({len(ref)})")


def order(path):
    """Each frame read on a side stream after a long kernel, released at once."""
    ref = cli_frames(path, "--backend", "cuda", "--decode", "gpu", "--filter", "gauss:2")
    side = torch.cuda.Stream()
    copies = []
    with torch.cuda.stream(side):
        for f in framepipe.open(path, backend="cuda", decode="gpu", filter="gauss:2", format="i420"):
            torch.cuda._sleep(2_000_000)  # about a millisecond on the side stream
            t = torch.from_dlpack(f)
            copies.append(t.clone())
            del t, f  # released while the clone may still be queued
    side.synchronize()
    equal = sum(c.cpu().numpy().tobytes() == r for c, r in zip(copies, ref))
    check(equal == len(ref) == len(copies),
          f"order: {equal} of {len(copies)} frames read after a long kernel on another stream "
          "and released at once are the frames they were")


def hold(path):
    ref = cli_frames(path, "--backend", "cuda", "--decode", "gpu", "--filter", "invert")
    held = [torch.from_dlpack(f) for f in
            framepipe.open(path, backend="cuda", decode="gpu", filter="invert", format="i420")]
    equal = sum(t.cpu().numpy().tobytes() == r for t, r in zip(held, ref))
    check(equal == len(ref) == len(held),
          f"hold: a whole clip's {len(held)} frames held on the GPU at once, {equal} equal")


def churn(path):
    free = lambda: torch.cuda.mem_get_info()[0]
    def once():
        run = framepipe.open(path, backend="cuda", decode="gpu", format="i420", frames=5)
        kept = [torch.from_dlpack(f) for f in run]
        run.close()
        return kept
    once()
    before = free()
    t0 = time.time()
    for _ in range(200):
        once()
    torch.cuda.synchronize()
    after = free()
    check(before - after < 64 << 20,
          f"churn: 200 runs opened and closed with frames held: device memory free {before >> 20} MiB "
          f"-> {after >> 20} MiB ({time.time() - t0:.1f} s)")


MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def shaped(path):
    """Frames fitted to 224x224 and normalised on the GPU equal the CPU backend's."""
    for fmt, fit in (("rgbf32", "letterbox"), ("rgbf16", "crop"), ("rgb24", "stretch")):
        extra = {} if fmt == "rgb24" else {"mean": MEAN, "std": STD}
        def frames(backend, decode):
            return [torch.from_dlpack(f).cpu() if f.device != "cpu" else torch.from_numpy(np.array(f))
                    for f in framepipe.open(path, backend=backend, decode=decode, filter="gauss:1",
                                            size=(224, 224), fit=fit, format=fmt, **extra)]
        gpu, cpu = frames("cuda", "gpu"), frames("cpu", "cpu")
        equal = sum(torch.equal(a, b) for a, b in zip(gpu, cpu))
        check(len(gpu) == len(cpu) == equal,
              f"shaped {fmt} {fit}: {equal} of {len(gpu)} frames made on the GPU {tuple(gpu[0].shape)} "
              f"{gpu[0].dtype} equal the CPU backend's")


def model_bench(path, inputs=16):
    import torch.nn.functional as F
    import torchvision
    d = tempfile.mkdtemp()
    files = []
    for i in range(inputs):
        p = os.path.join(d, f"cam{i}.mp4")
        os.link(path, p)
        files.append(p)
    net = torchvision.models.resnet18(weights=None).cuda().eval().half()
    net = net.to(memory_format=torch.channels_last)
    mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1).half()
    std = torch.tensor(STD, device="cuda").view(1, 3, 1, 1).half()

    def prepare(b):  # (N, H, W, 3) BGR uint8 on the GPU -> normalised (N, 3, 224, 224)
        x = b.permute(0, 3, 1, 2).flip(1).half().div_(255)
        x = F.interpolate(x, size=(224, 224), mode="bilinear", align_corners=False)
        return (x - mean) / std

    def infer(x):
        return net(x.contiguous(memory_format=torch.channels_last))

    shaping = dict(size=(224, 224), fit="stretch", format="rgbf16", mean=MEAN, std=STD)

    def through(work, shaped):
        run = framepipe.open(*files, backend="cuda", decode="gpu", batch=inputs, batch_timeout=1.0,
                             **(shaping if shaped else {}))
        n, t0, first = 0, time.perf_counter(), None
        with torch.no_grad():
            for b in run:
                t = torch.from_dlpack(b)
                if first is None:  # timed from the first batch on (start-up apart)
                    first = time.perf_counter()
                    continue
                if work:
                    infer(t if shaped else prepare(t))
                n += len(b)
        torch.cuda.synchronize()
        end = time.perf_counter()
        return n / (end - first), n, end - t0

    def alone(work, k=100):  # `work()` on resident tensors, k batches
        with torch.no_grad():
            for _ in range(10):
                work()
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(k):
                work()
            torch.cuda.synchronize()
        return inputs * k / (time.perf_counter() - t0), inputs * k

    rows, verdicts = [], []
    # Frames fitted and normalised by framepipe on the GPU: the model takes them as they are.
    a, n, whole = through(False, True)
    rows.append(("framepipe alone: 16 files, NVDEC, 224x224 rgbf16 made on the GPU, batches of 16", a, n, whole))
    resident = torch.rand(inputs, 3, 224, 224, device="cuda").half()
    m, k = alone(lambda: infer(resident))
    rows.append(("ResNet-18 alone on resident (16, 3, 224, 224) fp16 tensors", m, k, None))
    both, n, whole = through(True, True)
    rows.append(("framepipe (shaped on the GPU) -> ResNet-18, together", both, n, whole))
    verdicts.append(("shaped on the GPU", both, min(a, m)))
    # 1080p BGR frames, resized and normalised by PyTorch.
    a2, n, whole = through(False, False)
    rows.append(("framepipe alone: 16 files, NVDEC, 1080p bgr24 frames on the GPU", a2, n, whole))
    frames = torch.randint(0, 256, (inputs, H, W, 3), dtype=torch.uint8, device="cuda")
    m2, k = alone(lambda: infer(prepare(frames)))
    rows.append(("ResNet-18 alone on resident 1080p frames, resized by PyTorch", m2, k, None))
    both2, n, whole = through(True, False)
    rows.append(("framepipe (1080p) -> PyTorch resize -> ResNet-18, together", both2, n, whole))
    verdicts.append(("1080p, resized by PyTorch", both2, min(a2, m2)))
    import cv2
    caps = [cv2.VideoCapture(p) for p in files]
    n, t0 = 0, time.perf_counter()
    with torch.no_grad():
        while n < 16 * 60:
            frames = [c.read()[1] for c in caps]
            if any(f is None for f in frames):
                break
            infer(prepare(torch.from_numpy(np.stack(frames)).cuda()))
            n += len(frames)
    torch.cuda.synchronize()
    rows.append(("OpenCV-Python VideoCapture loop (CPU decode) -> PyTorch resize -> ResNet-18",
                 n / (time.perf_counter() - t0), n, None))
    print(f"\n{'program':88} {'frames/s':>9} {'frames':>7}")
    for name, rate, n, whole in rows:
        extra = f"  (whole run {whole:.2f} s, start-up included)" if whole else ""
        print(f"{name:88} {rate:9.0f} {n:7d}{extra}")
    for name, together, bound in verdicts:
        print(f"{name}: together / min(framepipe alone, model alone) = {together / bound:.3f}")
    name, together, bound = verdicts[0]
    check(together >= 0.95 * bound, f"model ({name}): together {together:.0f} fps >= 95 % of {bound:.0f}")


def main():
    sections = sys.argv[1:] or ["exact", "order", "hold", "churn", "shaped", "model"]
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}; framepipe {framepipe.__version__}")
    d = tempfile.mkdtemp()
    short, long = os.path.join(d, "short.mp4"), os.path.join(d, "long.mp4")
    clip(short, 90)
    if "exact" in sections:
        exact(short)
    if "order" in sections:
        order(short)
    if "hold" in sections:
        hold(short)
    if "churn" in sections:
        churn(short)
    if "shaped" in sections:
        shaped(short)
    if "model" in sections:
        clip(long, 600)
        model_bench(long)
    print("failed: " + "; ".join(failed) if failed else "all checks passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
