#!/usr/bin/env bash
# Image pre-processing, fusebox next to OpenCV and PyTorch, in one run (docs/preprocess.md):
#
#   bench/run_preprocess_bench.sh [BUILD_DIR] [ITERATIONS]      (defaults: build, 10)
#
# Cases (u8 HWC source of 1080x1920x3, normalise = (x - mean) / std with ImageNet's figures,
# f32 CHW out):
#   frame_1080p    the whole frame -> bilinear 540x960 -> 1x3x540x960
#   crops64_nn     64 crops of 448x448 at different offsets -> nearest 224x224 -> 64x3x224x224
#   crops64_bl     the same with bilinear
#   crops16_mixed  16 crops of different sizes -> bilinear 224x224 -> 16x3x224x224
# fusebox's rows run `fusebox preprocess --repeat` (the compiled plan, timed over the runs), fused
# and with FUSEBOX_NO_FUSION=1 (unfused: the same kernels, one op each);
# bench/peers/opencv_preprocess.py and torch_preprocess.py time the same cases with 2 threads.
# Debian's python3-opencv and python3-torch are installed when missing and this runs as root
# (else the apt-get command is printed and that peer is skipped). Prints ms per case.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
iters="${2:-10}"
fusebox="$build/tools/fusebox/fusebox"
[ -x "$fusebox" ] || fusebox="$root/$build/tools/fusebox/fusebox"
[ -x "$fusebox" ] || { echo "run_preprocess_bench: no fusebox binary in $build (build it first)" >&2; exit 1; }
export OMP_NUM_THREADS=2

py=/usr/bin/python3
# need MODULE PACKAGE: 0 when the module imports (installing the package when root).
need() {
  if $py -c "import $1" 2> /dev/null; then return 0; fi
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "$2" > /dev/null \
      && $py -c "import $1" 2> /dev/null && return 0
  fi
  echo "run_preprocess_bench: skipping the $1 peer: sudo apt-get install -y $2" >&2
  return 1
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
frame="$tmp/frame.npy"
bash "$root/tests/error/data/npy.sh" "$frame" "{'descr': '|u1', 'fortran_order': False, 'shape': (1080, 1920, 3), }" 0
head -c $((1080 * 1920 * 3)) /dev/urandom >> "$frame"

norm=(--mean 123.675,116.28,103.53 --std 58.395,57.12,57.375)
crops64=() crops16=()
for i in $(seq 0 63); do crops64+=(--crop "$(( (i * 23) % (1920 - 448) )),$(( (i * 37) % (1080 - 448) )),448,448"); done
for i in $(seq 0 15); do crops16+=(--crop "$(( (i * 71) % 1200 )),$(( (i * 29) % 500 )),$((160 + 24 * i)),$((140 + 20 * i))"); done

ms() {  # ARGS...: fusebox preprocess's median ms per run
  "$fusebox" preprocess "$frame" "$@" "${norm[@]}" --repeat "$iters" -o "$tmp/out.npy" 2>&1 > /dev/null |
    grep 'ms per run' | sed -E 's/.*: ([0-9.]+) ms per run.*/\1/'
}
row() {  # NAME ARGS...: one fusebox row, fused and unfused (FUSEBOX_NO_FUSION=1: every op its own kernel)
  local name=$1
  shift
  local fused unfused
  fused=$(ms "$@")
  unfused=$(FUSEBOX_NO_FUSION=1 ms "$@")
  awk -v n="$name" -v f="$fused" -v u="$unfused" 'BEGIN { printf "  %-14s %9.2f ms   unfused %9.2f ms  (%.1fx)\n", n, f, u, u / f }'
}

echo "fusebox preprocess (cpu backend, OMP_NUM_THREADS=2)"
row frame_1080p --size 540x960 --interp bilinear
row crops64_nn "${crops64[@]}" --size 224x224 --interp nearest
row crops64_bl "${crops64[@]}" --size 224x224 --interp bilinear
row crops16_mixed "${crops16[@]}" --size 224x224 --interp bilinear

if need cv2 python3-opencv; then $py "$here/peers/opencv_preprocess.py" --iterations "$iters"; fi
if need torch python3-torch; then $py "$here/peers/torch_preprocess.py" --iterations "$iters"; fi
