#!/usr/bin/env bash
# A 4-layer transformer encoder (PyTorch's nn.TransformerEncoder, random weights, batch 1,
# sequence 128 and 512) through bench/run_model_bench.sh: fusebox fused and unfused next to ONNX
# Runtime, one table.
#
#   bench/run_transformer_bench.sh [BUILD_DIR]          (default: build)
#
# 1. Debian's python3-torch (installed here when run as root, else the apt-get command is
#    printed) exports the model (bench/models/export_transformer.py) into CACHE/transformer,
#    CACHE being tests/models/cache or $FUSEBOX_MODEL_CACHE;
# 2. tests/models/fetch_models.sh provides onnxruntime-node, and make_reference.js runs the
#    cases through it (the reference outputs model_bench compares with);
# 3. bench/run_model_bench.sh BUILD_DIR CACHE/transformer times them.
# Each step is skipped when its output exists (delete CACHE/transformer to start over).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
base="${FUSEBOX_MODEL_CACHE:-$root/tests/models/cache}"
cache="$base/transformer"
die() { echo "run_transformer_bench: $*" >&2; exit 1; }

# Debian's interpreter: the package installs there (a python3 earlier on PATH may not see it).
py=/usr/bin/python3
if ! $py -c 'import torch' 2> /dev/null; then
  if [ "$(id -u)" = 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-torch \
      || die "could not install python3-torch"
  else
    die "needs Debian's torch: sudo apt-get install -y python3-torch"
  fi
fi
bash "$root/tests/models/fetch_models.sh" || die "onnxruntime-node could not be installed (see above)"
mkdir -p "$cache"
if [ ! -f "$cache/cases.json" ]; then
  $py "$here/models/export_transformer.py" "$cache" || die "the export failed"
fi
ln -sfn ../npm "$cache/npm"  # ort_bench.js loads onnxruntime-node from CACHE/npm
if [ ! -f "$cache/ref/manifest.txt" ]; then
  rm -rf "$cache/ref.tmp" && mkdir -p "$cache/ref.tmp"
  node "$root/tests/models/make_reference.js" "$base/npm/node_modules" "$cache/ref.tmp" \
    "# fusebox transformer model" "$cache/cases.json" || die "ONNX Runtime could not run the model"
  mv "$cache/ref.tmp" "$cache/ref"
fi
exec bash "$here/run_model_bench.sh" "$build" "$cache"
