#!/usr/bin/python3
"""PyTorch CPU eager on the workloads of bench/rows_bench.cpp, at [8192, 4096] f32.

    /usr/bin/python3 bench/peers/torch_rows.py [--threads 2] [--iterations 12]

bias_gelu: gelu_tanh(x + b); residual_rms: rms_norm(x + r) * g written out in ops (this
PyTorch has no fused RMS norm); residual_ln: F.layer_norm(x + r, g, h); softmax: over rows.
Each iteration times the workload and a copy of one [8192, 4096] tensor (torch's copy_, the
same bandwidth ceiling as rows_bench's), and the script prints medians, the effective bandwidth
(each input read once, each output written once) and its fraction of the copy bandwidth.
"""
import argparse
import statistics
import time

import torch
import torch.nn.functional as F

ROWS, COLS = 8192, 4096


def rms_norm(s, g, eps=1e-6):
    return s * torch.rsqrt(s.pow(2).mean(-1, keepdim=True) + eps) * g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iterations", type=int, default=12)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(ROWS, COLS, generator=gen) * 2 - 1
    r = torch.rand(ROWS, COLS, generator=gen) * 2 - 1
    b, g, h = (torch.rand(COLS, generator=gen) + 0.5 for _ in range(3))
    src, dst = torch.rand(ROWS, COLS, generator=gen), torch.empty(ROWS, COLS)
    workloads = [
        ("bias_gelu", lambda: F.gelu(x + b, approximate="tanh"), 2),
        ("residual_rms", lambda: rms_norm(x + r, g), 3),
        ("residual_ln", lambda: F.layer_norm(x + r, (COLS,), g, h), 3),
        ("softmax", lambda: torch.softmax(x, dim=-1), 2),
    ]
    tensor_bytes = ROWS * COLS * 4
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, [{ROWS}, {COLS}] f32")
    with torch.no_grad():
        for name, fn, moved in workloads:
            for _ in range(2):
                fn()
            times, copies = [], []
            for _ in range(args.iterations):
                t0 = time.perf_counter()
                fn()
                t1 = time.perf_counter()
                dst.copy_(src)
                t2 = time.perf_counter()
                times.append(t1 - t0)
                copies.append(t2 - t1)
            t, c = statistics.median(times), statistics.median(copies)
            bw, copy_bw = moved * tensor_bytes / t, 2 * tensor_bytes / c
            print(f"  {name:13s} {t * 1e3:8.2f} ms  {bw / 1e9:5.1f} GB/s = {bw / copy_bw:.2f} of copy "
                  f"({copy_bw / 1e9:.1f} GB/s)")


if __name__ == "__main__":
    main()
