#!/usr/bin/python3
"""PyTorch CPU eager on the chain of bench/lazy_bench.cpp: y = y * 0.999 + 0.001, 50 times
(100 ops), on 1024 and 2^24 f32, and the per-op cost of that chain on 16 elements (PyTorch's
dispatch cost, the peer of lazy_bench's BM_RecordCost / BM_CacheHitCost).

    /usr/bin/python3 bench/peers/torch_lazy.py [--threads 2] [--iterations 10]
"""
import argparse
import statistics
import time

import torch


def chain(x):
    y = x
    for _ in range(50):
        y = y * 0.999 + 0.001
    return y


def timed(fn, iterations):
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=10)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    small = torch.randn(16)
    t = timed(lambda: chain(small), args.iterations * 10)
    print(f"per-op cost on 16 elements: {t / 100 * 1e9:.0f} ns")
    for n in (1024, 1 << 24):
        x = torch.randn(n)
        t = timed(lambda: chain(x), args.iterations)
        print(f"chain100 n={n}: {t * 1e3:.3f} ms  ({n * 4 * 2 / t / 1e9:.2f} GB/s of ideal traffic)")


if __name__ == "__main__":
    main()
