#!/usr/bin/python3
"""PyTorch CPU eager (Debian's python3-torch) on the pre-processing cases of
bench/run_preprocess_bench.sh, 2 threads.

    /usr/bin/python3 bench/peers/torch_preprocess.py [--threads 2] [--iterations 10]

The same cases as opencv_preprocess.py: each crop is sliced from the u8 HWC frame, turned into
a float NCHW tensor, resized with F.interpolate (bilinear: align_corners=False, half-pixel
centres; nearest: floor(x * in/out)), normalised and stacked. Prints median ms per case.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

MEAN = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
STD = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)


def crops64():
    return [((i * 23) % (1920 - 448), (i * 37) % (1080 - 448), 448, 448) for i in range(64)]


def crops16():
    return [((i * 71) % 1200, (i * 29) % 500, 160 + 24 * i, 140 + 20 * i) for i in range(16)]


def item(frame, rect, size, mode):
    x, y, w, h = rect
    t = frame[y:y + h, x:x + w].permute(2, 0, 1).unsqueeze(0).float()
    kw = {"align_corners": False} if mode == "bilinear" else {}
    return F.interpolate(t, size=size, mode=mode, **kw)


def batch(frame, rects, size, mode):
    return (torch.cat([item(frame, r, (size, size), mode) for r in rects]) - MEAN) / STD


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    frame = torch.randint(0, 256, (1080, 1920, 3), generator=gen, dtype=torch.uint8)
    cases = [
        ("frame_1080p", lambda: (item(frame, (0, 0, 1920, 1080), (540, 960), "bilinear") - MEAN) / STD),
        ("crops64_nn", lambda: batch(frame, crops64(), 224, "nearest")),
        ("crops64_bl", lambda: batch(frame, crops64(), 224, "bilinear")),
        ("crops16_mixed", lambda: batch(frame, crops16(), 224, "bilinear")),
    ]
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    with torch.no_grad():
        for name, fn in cases:
            fn()
            times = []
            for _ in range(args.iterations):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
            print(f"  {name:14s} {statistics.median(times) * 1e3:9.2f} ms")


if __name__ == "__main__":
    main()
