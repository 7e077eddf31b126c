#!/usr/bin/env bash
# The GPU benchmark in one go: fusebox's CUDA target (build/bench/cuda_bench) and PyTorch eager
# and torch.compile (bench/peers/torch_gpu.py) on the same workloads and the same GPU
# (docs/benchmarks.md, "GPU").
#
#   bench/run_cuda_bench.sh [CUDA_BENCH] [OUT_DIR] [OPTIONS...]
#
# CUDA_BENCH: the cuda_bench binary (default build/bench/cuda_bench); OUT_DIR: where
# cuda_bench.txt and torch_gpu.txt are written (default .; created when missing); OPTIONS go to
# both programs (--only NAME[,NAME], --min-seconds S). TORCH_GPU_MODELS=1 adds the torchvision
# models to the PyTorch run; PYTHON names the interpreter that has torch (default python3).
# Each program's progress goes to stderr; a program that fails does not stop the other.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
bench="${1:-build/bench/cuda_bench}"
out="${2:-.}"
shift $(($# < 2 ? $# : 2))
py="${PYTHON:-python3}"
mkdir -p "$out" || exit 1
[ -x "$bench" ] || { echo "run_cuda_bench: no cuda_bench binary at $bench (cmake --build build --target cuda_bench)" >&2; exit 1; }

status=0
echo "== fusebox: $bench $* -> $out/cuda_bench.txt" >&2
"$bench" "$@" | tee "$out/cuda_bench.txt" || status=1

models=()
[ "${TORCH_GPU_MODELS:-0}" = 1 ] && models=(--models)
echo "== PyTorch: $py $here/peers/torch_gpu.py $* ${models[*]} -> $out/torch_gpu.txt" >&2
PYTHONUNBUFFERED=1 "$py" "$here/peers/torch_gpu.py" "$@" "${models[@]}" | tee "$out/torch_gpu.txt" || status=1
exit $status
