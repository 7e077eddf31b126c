#!/usr/bin/env bash
# fusebox on real ONNX models, fused and unfused, next to ONNX Runtime, as one table:
#
#   bench/run_model_bench.sh [BUILD_DIR [CACHE]]   (default: build, the PaddleOCR cache)
#
# CACHE: another prepared cache (a ref/manifest.txt and an npm/ with onnxruntime-node), e.g. the
# torchvision models bench/run_torchvision_bench.sh exports; step 1 is then skipped.
#
# 1. tests/models/fetch_models.sh prepares the model cache (the PaddleOCR models, onnxruntime-node
#    and the deterministic .npy inputs of onnx_models_test; tests/models/cache or
#    $FUSEBOX_MODEL_CACHE);
# 2. BUILD_DIR/bench/model_bench times the fused and the unfused fusebox plans and prints a per-op
#    profile of the fused one (build it first: cmake --build BUILD_DIR --target model_bench);
# 3. bench/peers/ort_bench.js times ONNX Runtime (all graph optimisations, 2 intra-op threads);
# 4. the table: model, size, fused ms, unfused ms, ORT ms, fused/ORT.
#
# Environment: RUNS (fusebox timed runs, at least; default 5), MIN_MS (2000: and at least this
# long, for ONNX Runtime too), WARMUP (1), PROFILE_RUNS (2), ORT_RUNS (20), ORT_WARMUP (3).
# Exit status: 0, or 1 with the reason on stderr.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
build="${1:-build}"
[ $# -le 2 ] || { echo "usage: bench/run_model_bench.sh [BUILD_DIR [CACHE]]" >&2; exit 2; }
cache="${2:-${FUSEBOX_MODEL_CACHE:-$root/tests/models/cache}}"
export FUSEBOX_MODEL_CACHE="$cache"
bench="$build/bench/model_bench"

die() { echo "run_model_bench: $*" >&2; exit 1; }

[ -x "$bench" ] || die "$bench is missing: build it with 'cmake --build $build --target model_bench' (needs the ONNX component: libonnx-dev)"
command -v node > /dev/null || die "node is not installed (Debian package nodejs)"
if [ $# -lt 2 ]; then
  bash "$root/tests/models/fetch_models.sh" || die "the model cache could not be prepared (see above)"
fi
[ -f "$cache/ref/manifest.txt" ] || die "$cache has no ref/manifest.txt"

echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)"
fusebox_log="$(mktemp)"
ort_log="$(mktemp)"
trap 'rm -f "$fusebox_log" "$ort_log"' EXIT

args=(--runs "${RUNS:-5}" --min-ms "${MIN_MS:-2000}" --warmup "${WARMUP:-1}" --profile-runs "${PROFILE_RUNS:-2}")
echo "\$ $bench $cache ${args[*]}"
"$bench" "$cache" "${args[@]}" \
  | tee "$fusebox_log" || die "model_bench failed"
echo
ort_args=(--runs "${ORT_RUNS:-20}" --min-ms "${MIN_MS:-2000}" --warmup "${ORT_WARMUP:-3}")
echo "\$ node bench/peers/ort_bench.js --cache $cache ${ort_args[*]}"
node "$here/peers/ort_bench.js" --cache "$cache" "${ort_args[@]}" \
  | tee "$ort_log" || die "ort_bench.js failed"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo

# fusebox <model> <size> fused_ms F unfused_ms U kernels B A rel_err E   +   ort <model> <size> MS
awk '
  FNR == NR && $1 == "ort" { ort[$2 " " $3] = $4; next }
  $1 == "fusebox" { key = $2 " " $3; order[++n] = key; fused[key] = $5; unfused[key] = $7; kb[key] = $9; ka[key] = $10 }
  END {
    printf "| model | size | kernels | fusebox fused ms | fusebox unfused ms | ORT ms | fused/ORT |\n"
    printf "| --- | --- | --- | ---: | ---: | ---: | ---: |\n"
    for (i = 1; i <= n; ++i) {
      k = order[i]; split(k, p, " ")
      o = (k in ort) ? ort[k] : ""
      ratio = (o != "" && o > 0) ? sprintf("%.1fx", fused[k] / o) : "n/a"
      printf "| %s | %s | %s -> %s | %.1f | %.1f | %s | %s |\n", p[1], p[2], kb[k], ka[k], fused[k], unfused[k], \
             (o == "" ? "n/a" : sprintf("%.1f", o)), ratio
    }
  }' "$ort_log" "$fusebox_log"
