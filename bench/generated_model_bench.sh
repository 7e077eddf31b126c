#!/usr/bin/env bash
# The shared body of the benchmarks of models written by a Python script (run_torchvision_bench.sh,
# run_transformer_bench.sh, run_quantized_bench.sh): fusebox fused and unfused next to ONNX
# Runtime, one table.
#
#   bench/generated_model_bench.sh BUILD_DIR NAME MODULES PACKAGES SCRIPT
#
# 1. Debian's PACKAGES (for the Python MODULES, comma-separated; installed here when run as root,
#    else the apt-get command is printed) let bench/models/SCRIPT write the models and their
#    cases.json into CACHE/NAME, CACHE being tests/models/cache or $FUSEBOX_MODEL_CACHE;
# 2. tests/models/fetch_models.sh provides onnxruntime-node, and make_reference.js runs the
#    cases through it (the reference outputs model_bench compares with);
# 3. bench/run_model_bench.sh BUILD_DIR CACHE/NAME times them.
# Each step is skipped when its output exists (delete CACHE/NAME to start over).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
[ $# -eq 5 ] || { echo "usage: bench/generated_model_bench.sh BUILD_DIR NAME MODULES PACKAGES SCRIPT" >&2; exit 2; }
build="$1" name="$2" modules="$3" packages="$4" script="$5"
base="${FUSEBOX_MODEL_CACHE:-$root/tests/models/cache}"
cache="$base/$name"
die() { echo "$name bench: $*" >&2; exit 1; }

# Debian's interpreter: the packages install there (a python3 earlier on PATH may not see them).
py=/usr/bin/python3
if ! $py -c "import $modules" 2> /dev/null; then
  if [ "$(id -u)" = 0 ]; then
    # shellcheck disable=SC2086  # the package list splits on purpose
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends $packages \
      || die "could not install $packages"
  else
    die "needs Debian's packages: sudo apt-get install -y $packages"
  fi
fi
bash "$root/tests/models/fetch_models.sh" || die "onnxruntime-node could not be installed (see above)"
mkdir -p "$cache"
if [ ! -f "$cache/cases.json" ]; then
  $py "$here/models/$script" "$cache" || die "bench/models/$script failed"
fi
ln -sfn ../npm "$cache/npm"  # ort_bench.js loads onnxruntime-node from CACHE/npm
if [ ! -f "$cache/ref/manifest.txt" ]; then
  rm -rf "$cache/ref.tmp" && mkdir -p "$cache/ref.tmp"
  node "$root/tests/models/make_reference.js" "$base/npm/node_modules" "$cache/ref.tmp" \
    "# fusebox $name models" "$cache/cases.json" || die "ONNX Runtime could not run the models"
  mv "$cache/ref.tmp" "$cache/ref"
fi
exec bash "$here/run_model_bench.sh" "$build" "$cache"
