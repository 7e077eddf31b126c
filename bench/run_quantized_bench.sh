#!/usr/bin/env bash
# A quantized CNN and MLP in ONNX's QOperator form (QLinearConv, QLinearMatMul; written by
# bench/models/make_quantized.py with Debian's python3-onnx) into CACHE/quantized, then fusebox
# fused and unfused next to ONNX Runtime, one table (bench/generated_model_bench.sh says how).
#
#   bench/run_quantized_bench.sh [BUILD_DIR]          (default: build)
exec bash "$(dirname "${BASH_SOURCE[0]}")/generated_model_bench.sh" "${1:-build}" quantized onnx,numpy \
  "python3-onnx python3-numpy" make_quantized.py
