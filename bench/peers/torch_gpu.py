#!/usr/bin/env python3
"""PyTorch on the GPU, eager and torch.compile, on the workloads of bench/cuda_bench.cpp.

    python3 bench/peers/torch_gpu.py [--only NAME[,NAME]] [--min-seconds 0.2] [--models [NAME[,NAME]]]

The workloads are those of bench/cuda_workloads.h, written with torch ops, float32 unless the
workload says f16; inputs are uniform in [-1, 1) (the frame: random u8). Output,
whitespace-separated:

    torch <version> <device name>
    device <copy GB/s> <device name>        x.copy_(y) on 1 GiB, bytes read + written
    <name> eager_ms compile_ms compile_time_s bytes eager_GBps compile_GBps frac_of_copy rel_diff
    <name> error <message>                 a workload that failed eager (a torch.compile failure
                                           leaves '-' in the compiled columns and says why last)

A time is 3 warm-up calls, then N calls (N grown until the loop takes --min-seconds) between
two CUDA events, divided by N. compile_time_s is the first call of the torch.compile'd function
(default mode; tracing, Inductor and Triton compiles, wall clock to a synchronize), outside the
timings. bytes: each input read once + each output written once (as cuda_bench counts them);
GB/s = bytes / time; frac_of_copy = compile_GBps / copy GB/s; rel_diff = max |compiled - eager|
/ max |eager|.

--models adds torchvision's resnet50 and efficientnet_b0 (random weights, eval mode) at batch 1
and 32, eager and torch.compile (cudnn.benchmark on for both), in three precisions: f32 (TF32 off
for cuDNN and matmuls: exact f32 products, as fusebox's default), tf32 (f32 with PyTorch's default
of TF32 convolutions) and f16; their rows, named <model>_b<batch>_<precision>, leave the byte
columns as '-'. --models NAME[,NAME] runs only the rows named (e.g. resnet50_b1_f32), and no
workload but those --only names.
"""
import argparse
import math
import sys
import time

import torch
import torch._dynamo
import torch.nn.functional as F

ROWS, COLS = 8192, 4096
MEAN = [123.675, 116.28, 103.53]
STD = [58.395, 57.12, 57.375]


def uniform(shape, dtype=torch.float32, seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.rand(shape, generator=g, device="cuda", dtype=torch.float32) * 2 - 1).to(dtype)


def frame():
    g = torch.Generator(device="cuda").manual_seed(7)
    return torch.randint(0, 256, (1080, 1920, 3), generator=g, device="cuda", dtype=torch.uint8)


def chain5(x, y):
    return torch.relu(torch.tanh(x * 0.5 + y) * x)


def chain10(x, y):
    t = chain5(x, y)
    return torch.exp((torch.sigmoid(t + y) - x) * 2.0)


def chain100(x, y):
    t = x
    for _ in range(25):
        t = torch.tanh(t * 0.9 + y) * x
    return t


def bias_gelu(x, b):
    return F.gelu(x + b, approximate="tanh")


def residual_rms(x, r, g):
    return F.rms_norm(x + r, (COLS,), g, eps=1e-6)


def residual_ln(x, r, g, h):
    return F.layer_norm(x + r, (COLS,), g, h, eps=1e-5)


def softmax(x):
    return torch.softmax(x, dim=-1)


def normalise(t, mean, std):
    return (t - mean) / std


def frame_half_chw(img, mean, std):
    t = img.permute(2, 0, 1).unsqueeze(0).float()
    t = F.interpolate(t, size=(540, 960), mode="bilinear", align_corners=False)
    return normalise(t, mean, std)


# (x, y) of the 448x448 crops, as cuda_workloads.h's crops64_rects.
CROPS64 = [((i * 23) % (1920 - 448), (i * 37) % (1080 - 448)) for i in range(64)]


def crops64(img, mean, std):
    items = []
    for x, y in CROPS64:
        t = img[y:y + 448, x:x + 448].permute(2, 0, 1).unsqueeze(0).float()
        items.append(F.interpolate(t, size=(224, 224), mode="bilinear", align_corners=False))
    return normalise(torch.cat(items), mean, std)


def matmul_bias_gelu(a, w, b):
    return F.gelu(a @ w + b, approximate="tanh")


def attention_f16(q, k, v):
    heads = lambda t: t.view(8, 1024, 16, 64).transpose(1, 2)
    o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), scale=0.125)
    return o.transpose(1, 2).reshape(8, 1024, 1024)


def attention_decode_f16(q, k, v):
    heads = lambda t: t.view(64, -1, 16, 64).transpose(1, 2)
    o = F.scaled_dot_product_attention(heads(q), heads(k), heads(v), scale=0.125)
    return o.transpose(1, 2).reshape(64, 1, 1024)


def swiglu_f16(x, w):
    h = x @ w
    return F.silu(h[:, :4096]) * h[:, 4096:]


def depthwise(x, w, b, stride):
    return F.silu(F.conv2d(x, w, b, stride=stride, padding=w.shape[-1] // 2, groups=x.shape[1]))


def workloads():
    """name -> (function, make the inputs)"""
    full = (ROWS, COLS)
    mean = lambda: torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1)
    std = lambda: torch.tensor(STD, device="cuda").view(1, 3, 1, 1)
    n26 = 1 << 26
    return {
        "chain5": (chain5, lambda: [uniform(n26, seed=1), uniform(n26, seed=2)]),
        "chain10": (chain10, lambda: [uniform(n26, seed=1), uniform(n26, seed=2)]),
        "bias_gelu": (bias_gelu, lambda: [uniform(full, seed=1), uniform(COLS, seed=2)]),
        "residual_rms": (residual_rms, lambda: [uniform(full, seed=1), uniform(full, seed=2), uniform(COLS, seed=3)]),
        "residual_ln": (residual_ln, lambda: [uniform(full, seed=1), uniform(full, seed=2), uniform(COLS, seed=3),
                                              uniform(COLS, seed=4)]),
        "softmax": (softmax, lambda: [uniform(full, seed=1)]),
        "frame_half_chw": (frame_half_chw, lambda: [frame(), mean(), std()]),
        "crops64": (crops64, lambda: [frame(), mean(), std()]),
        "matmul_bias_gelu": (matmul_bias_gelu, lambda: [uniform((4096, 4096), torch.float16, 1),
                                                        uniform((4096, 4096), torch.float16, 2),
                                                        uniform(4096, torch.float16, 3)]),
        "matmul_f16": (lambda a, w: a @ w, lambda: [uniform((4096, 4096), torch.float16, 1),
                                                     uniform((4096, 4096), torch.float16, 2)]),
        "chain100_small": (chain100, lambda: [uniform(1024, seed=1), uniform(1024, seed=2)]),
        "attention_f16": (attention_f16, lambda: [uniform((8, 1024, 1024), torch.float16, s) for s in (1, 2, 3)]),
        "attention_decode_f16": (attention_decode_f16, lambda: [uniform((64, 1, 1024), torch.float16, 1),
                                                                uniform((64, 1024, 1024), torch.float16, 2),
                                                                uniform((64, 1024, 1024), torch.float16, 3)]),
        "swiglu_f16": (swiglu_f16, lambda: [uniform((8192, 4096), torch.float16, 1),
                                            uniform((4096, 8192), torch.float16, 2)]),
        "dwconv3s2_f16": (lambda x, w, b: depthwise(x, w, b, 2),
                          lambda: [uniform((32, 96, 112, 112), torch.float16, 1),
                                   uniform((96, 1, 3, 3), torch.float16, 2), uniform(96, torch.float16, 3)]),
        "dwconv5_f16": (lambda x, w, b: depthwise(x, w, b, 1),
                        lambda: [uniform((32, 144, 56, 56), torch.float16, 1),
                                 uniform((144, 1, 5, 5), torch.float16, 2), uniform(144, torch.float16, 3)]),
        "conv1x1_f16": (lambda x, w, b: F.silu(F.conv2d(x, w, b)),
                        lambda: [uniform((32, 144, 56, 56), torch.float16, 1),
                                 uniform((24, 144, 1, 1), torch.float16, 2), uniform(24, torch.float16, 3)]),
        "conv1x1_7x7_f16": (lambda x, w, b: F.relu(F.conv2d(x, w, b)),
                            lambda: [uniform((32, 512, 7, 7), torch.float16, 1),
                                     uniform((2048, 512, 1, 1), torch.float16, 2), uniform(2048, torch.float16, 3)]),
    }


# The mean and std tensors of the pre-processing workloads are constants in fusebox's graph:
# they are not counted as input bytes. Workload -> how many of its last inputs are such constants.
CONSTANT_INPUTS = {"frame_half_chw": 2, "crops64": 2}


def time_calls(fn, min_seconds):
    """Seconds per call: 3 warm-ups, then N calls between two events, N grown to min_seconds."""
    start = time.perf_counter()
    warm = 0
    while warm < 3:
        fn()
        warm += 1
        torch.cuda.synchronize()
        if time.perf_counter() - start > min_seconds:
            break
    per_call = max((time.perf_counter() - start) / warm, 1e-7)
    n = max(1, math.ceil(min_seconds / per_call))
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    while True:
        begin.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        elapsed = begin.elapsed_time(end) / 1e3
        if elapsed >= min_seconds:
            return elapsed / n
        n = max(n + 1, math.ceil(n * min_seconds / max(elapsed, 1e-9) * 1.1))


def copy_bandwidth():
    n = (1 << 30) // 4
    src = uniform(n, seed=9)
    dst = torch.empty_like(src)
    dst.copy_(src)
    begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    begin.record()
    for _ in range(20):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return 2 * (1 << 30) * 20 / (begin.elapsed_time(end) / 1e3) / 1e9


def outputs(result):
    return list(result) if isinstance(result, (tuple, list)) else [result]


def rel_diff(a, b):
    diff, scale = 0.0, 0.0
    for x, y in zip(outputs(a), outputs(b)):
        x, y = x.double(), y.double()
        if torch.isnan(x).ne(torch.isnan(y)).any():
            return math.inf
        diff = max(diff, (x - y).abs().nan_to_num(0.0).max().item())
        scale = max(scale, y.abs().nan_to_num(0.0).max().item())
    return 0.0 if diff == 0 else diff / max(scale, 1e-30)


def compiled_first_call(fn, args):
    """(compiled function, seconds of its first call, first result)"""
    torch._dynamo.reset()
    compiled = torch.compile(fn)
    torch.cuda.synchronize()
    start = time.perf_counter()
    out = compiled(*args)
    torch.cuda.synchronize()
    return compiled, time.perf_counter() - start, out


def one_line(e):
    return f"{type(e).__name__}: {e}".replace("\n", " ")[:400]


def run_workload(name, fn, make_inputs, copy_gbps, min_seconds):
    args = make_inputs()
    eager_out = fn(*args)
    counted = args[:len(args) - CONSTANT_INPUTS.get(name, 0)]
    nbytes = sum(t.numel() * t.element_size() for t in counted)
    nbytes += sum(t.numel() * t.element_size() for t in outputs(eager_out))
    eager = time_calls(lambda: fn(*args), min_seconds)
    eager_gbps = nbytes / eager / 1e9
    head = f"{name:17s} {eager * 1e3:10.4f}"
    try:
        compiled, compile_s, compiled_out = compiled_first_call(fn, args)
        diff = rel_diff(compiled_out, eager_out)
        del eager_out, compiled_out
        comp = time_calls(lambda: compiled(*args), min_seconds)
    except Exception as e:  # the eager figures stand; the compiled columns say why they are missing
        return (f"{head} {'-':>10s} {'-':>8s} {nbytes:12d} {eager_gbps:9.1f} {'-':>9s} {'-':>6s} {'-':>9s} "
                f"torch.compile failed: {one_line(e)}")
    comp_gbps = nbytes / comp / 1e9
    return (f"{head} {comp * 1e3:10.4f} {compile_s:8.2f} {nbytes:12d} {eager_gbps:9.1f} "
            f"{comp_gbps:9.1f} {comp_gbps / copy_gbps if copy_gbps else 0:6.3f} {diff:9.2e}")


def run_models(min_seconds, only):
    import torchvision

    torch.backends.cudnn.benchmark = True
    precisions = ((torch.float32, "f32", False), (torch.float32, "tf32", True), (torch.float16, "f16", False))
    for model_name in ("resnet50", "efficientnet_b0"):
        for dtype, dname, tf32 in precisions:
            names = [f"{model_name}_b{batch}_{dname}" for batch in (1, 32)]
            if only and not any(n in only for n in names):
                continue
            torch.backends.cudnn.allow_tf32 = tf32
            torch.backends.cuda.matmul.allow_tf32 = tf32
            model = getattr(torchvision.models, model_name)(weights=None).cuda().eval().to(dtype)
            for batch, name in zip((1, 32), names):
                if only and name not in only:
                    continue
                print(f"torch_gpu: {name}", file=sys.stderr, flush=True)
                try:
                    g = torch.Generator(device="cuda").manual_seed(batch)
                    x = torch.randn(batch, 3, 224, 224, generator=g, device="cuda").to(dtype)
                    eager_out = model(x)
                    eager = time_calls(lambda: model(x), min_seconds)
                    compiled, compile_s, compiled_out = compiled_first_call(model, [x])
                    diff = rel_diff(compiled_out, eager_out)
                    comp = time_calls(lambda: compiled(x), min_seconds)
                    print(f"{name:17s} {eager * 1e3:10.4f} {comp * 1e3:10.4f} {compile_s:8.2f} {'-':>12s} {'-':>9s} "
                          f"{'-':>9s} {'-':>6s} {diff:9.2e}", flush=True)
                except Exception as e:  # one failed model must not stop the others
                    print(f"{name:17s} error {one_line(e)}", flush=True)
            del model
            torch.cuda.empty_cache()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--min-seconds", type=float, default=0.2)
    ap.add_argument("--models", nargs="?", const="all", default=None,
                    help="also resnet50 and efficientnet_b0 (all rows, or the comma-separated rows named)")
    args = ap.parse_args()
    table = workloads()
    only = [n for n in args.only.split(",") if n]
    for n in only:
        if n not in table:
            ap.error(f"unknown workload '{n}' (known: {' '.join(table)})")
    if not torch.cuda.is_available():
        print("torch_gpu: torch sees no CUDA device", file=sys.stderr)
        return 1
    props = torch.cuda.get_device_properties(0)
    device = f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs)"
    print(f"torch {torch.__version__} {device}")
    failed = 0
    with torch.no_grad():
        copy_gbps = copy_bandwidth()
        print(f"device {copy_gbps:.1f} {device}")
        print("# name eager_ms compile_ms compile_time_s bytes eager_GBps compile_GBps frac_of_copy rel_diff",
              flush=True)
        for name, (fn, make_inputs) in table.items():
            if (only and name not in only) or (not only and args.models not in (None, "all")):
                continue
            print(f"torch_gpu: {name}", file=sys.stderr, flush=True)
            try:
                print(run_workload(name, fn, make_inputs, copy_gbps, args.min_seconds), flush=True)
            except Exception as e:  # report and go on with the next workload
                failed += 1
                print(f"{name:17s} error {one_line(e)}", flush=True)
            torch.cuda.empty_cache()
        if args.models:
            run_models(args.min_seconds, [] if args.models == "all" else [n for n in args.models.split(",") if n])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
