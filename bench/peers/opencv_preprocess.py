#!/usr/bin/python3
"""OpenCV (Debian's python3-opencv) + numpy on the pre-processing cases of
bench/run_preprocess_bench.sh, 2 threads.

    /usr/bin/python3 bench/peers/opencv_preprocess.py [--threads 2] [--iterations 10]

Cases (u8 HWC source, normalise = (x - mean) / std per channel, output f32 CHW):
  frame_1080p    one 1080x1920x3 frame -> bilinear 540x960 -> normalise -> 3x540x960
  crops64_nn     64 crops of 448x448 at different offsets -> nearest 224x224 -> 64x3x224x224
  crops64_bl     the same with bilinear
  crops16_mixed  16 crops of different sizes -> bilinear 224x224 -> 16x3x224x224
cv2.resize with INTER_LINEAR uses half-pixel centres (as fusebox's default coordinate mode);
INTER_NEAREST picks floor(x * in/out), a different rounding: timings compare, values do not.
Prints the median milliseconds per case.
"""
import argparse
import statistics
import time

import cv2
import numpy as np

MEAN = np.array([123.675, 116.28, 103.53], np.float32)
STD = np.array([58.395, 57.12, 57.375], np.float32)


def crops64():
    return [((i * 23) % (1920 - 448), (i * 37) % (1080 - 448), 448, 448) for i in range(64)]


def crops16():
    return [((i * 71) % 1200, (i * 29) % 500, 160 + 24 * i, 140 + 20 * i) for i in range(16)]


def normalise_chw(img):
    return ((img.astype(np.float32) - MEAN) / STD).transpose(2, 0, 1)


def batch(frame, rects, size, interp):
    out = np.empty((len(rects), 3, size, size), np.float32)
    for i, (x, y, w, h) in enumerate(rects):
        out[i] = normalise_chw(cv2.resize(frame[y:y + h, x:x + w], (size, size), interpolation=interp))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    cv2.setNumThreads(args.threads)
    frame = np.random.default_rng(0).integers(0, 256, (1080, 1920, 3), dtype=np.uint8)
    cases = [
        ("frame_1080p", lambda: normalise_chw(cv2.resize(frame, (960, 540), interpolation=cv2.INTER_LINEAR))),
        ("crops64_nn", lambda: batch(frame, crops64(), 224, cv2.INTER_NEAREST)),
        ("crops64_bl", lambda: batch(frame, crops64(), 224, cv2.INTER_LINEAR)),
        ("crops16_mixed", lambda: batch(frame, crops16(), 224, cv2.INTER_LINEAR)),
    ]
    print(f"opencv {cv2.__version__}, numpy {np.__version__}, threads {cv2.getNumThreads()}")
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
