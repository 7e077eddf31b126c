#!/usr/bin/env python3
"""PyTorch CPU eager attention at the shapes of bench/attention_bench.cpp.

8 heads of 64, batch 1, sequence 128, 512 and 2048, f32, 2 threads (torch.set_num_threads(2)):
  explicit  softmax(q @ k^T * s) @ v on head-split tensors, with the head split and merge
            (view + transpose) as a model writes them
  sdpa      torch.nn.functional.scaled_dot_product_attention (when this torch has it)
Medians of timed runs after warm-up, in milliseconds.

Usage: /usr/bin/python3 bench/peers/torch_attention.py [--threads N] [--seconds S]
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

HEADS, HEAD_DIM = 8, 64


def split(x, t):
    return x.view(1, t, HEADS, HEAD_DIM).transpose(1, 2)


def explicit(q, k, v, t):
    qh, kh, vh = split(q, t), split(k, t), split(v, t)
    p = torch.softmax(qh @ kh.transpose(-2, -1) * (HEAD_DIM ** -0.5), dim=-1)
    return (p @ vh).transpose(1, 2).reshape(1, t, HEADS * HEAD_DIM)


def sdpa(q, k, v, t):
    o = F.scaled_dot_product_attention(split(q, t), split(k, t), split(v, t))
    return o.transpose(1, 2).reshape(1, t, HEADS * HEAD_DIM)


def median_ms(fn, seconds):
    for _ in range(3):
        fn()
    times = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end or len(times) < 5:
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=2.0)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    have_sdpa = hasattr(F, "scaled_dot_product_attention")
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, sdpa: {'yes' if have_sdpa else 'no'}")
    with torch.inference_mode():
        for t in (128, 512, 2048):
            g = torch.Generator().manual_seed(t)
            q, k, v = (torch.rand(1, t, HEADS * HEAD_DIM, generator=g) * 2 - 1 for _ in range(3))
            row = f"T={t:5d}  explicit {median_ms(lambda: explicit(q, k, v, t), args.seconds):8.3f} ms"
            if have_sdpa:
                ref = explicit(q, k, v, t)
                assert torch.allclose(sdpa(q, k, v, t), ref, atol=1e-4), "sdpa differs from the explicit form"
                row += f"  sdpa {median_ms(lambda: sdpa(q, k, v, t), args.seconds):8.3f} ms"
            print(row, flush=True)


if __name__ == "__main__":
    main()
