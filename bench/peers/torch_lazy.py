#!/usr/bin/python3
"""PyTorch CPU eager on the chain of bench/lazy_bench.cpp: y = y * 0.999 + 0.001, 50 times
(100 ops), on 1024 and 2^24 f32, the per-op cost of that chain on 16 elements (PyTorch's
dispatch cost, the peer of lazy_bench's BM_RecordCost / BM_CacheHitCost), and one SGD step of
lazy_bench's BM_MlpStep (width w -> 2w -> 8, batch max(128, w), the same hand-written backward).

    /usr/bin/python3 bench/peers/torch_lazy.py [--threads 2] [--iterations 10] [--large-iterations 3]

The 2^24 chain and the width-256 MLP step run --large-iterations times (each can take seconds).
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


class Mlp:
    def __init__(self, width):
        g = torch.Generator().manual_seed(1)
        self.w1 = torch.randn(width, 2 * width, generator=g) / 8
        self.b1 = torch.zeros(2 * width)
        self.w2 = torch.randn(2 * width, 8, generator=g) / 8
        self.b2 = torch.zeros(8)
        self.x = torch.randn(max(128, width), width, generator=g)
        self.target = torch.tanh(self.x @ torch.randn(width, 8, generator=g))

    def step(self, lr=0.01):
        x = self.x
        h = torch.relu(x @ self.w1 + self.b1)
        diff = h @ self.w2 + self.b2 - self.target
        loss = (diff * diff).mean()
        dy = diff * (2.0 / diff.numel())
        dw2 = h.t() @ dy
        db2 = dy.sum(0)
        dh = torch.where(h > 0, dy @ self.w2.t(), torch.zeros(()))
        dw1 = x.t() @ dh
        db1 = dh.sum(0)
        self.w1 = self.w1 - dw1 * lr
        self.b1 = self.b1 - db1 * lr
        self.w2 = self.w2 - dw2 * lr
        self.b2 = self.b2 - db2 * lr
        return loss.item()


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
    ap.add_argument("--large-iterations", type=int, default=3)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    small = torch.randn(16)
    t = timed(lambda: chain(small), args.iterations * 10)
    print(f"per-op cost on 16 elements: {t / 100 * 1e9:.0f} ns")
    for n in (1024, 1 << 24):
        x = torch.randn(n)
        t = timed(lambda: chain(x), args.iterations if n <= 1024 else args.large_iterations)
        print(f"chain100 n={n}: {t * 1e3:.3f} ms  ({n * 4 * 2 / t / 1e9:.2f} GB/s of ideal traffic)")
    for width in (32, 256):
        mlp = Mlp(width)
        t = timed(mlp.step, args.iterations * 10 if width <= 32 else args.large_iterations)
        print(f"mlp step width={width}: {t * 1e6:.0f} us")


if __name__ == "__main__":
    main()
