#!/usr/bin/env bash
# A 4-layer transformer encoder (PyTorch's nn.TransformerEncoder, random weights, batch 1,
# sequence 128 and 512; exported by bench/models/export_transformer.py with Debian's
# python3-torch) into CACHE/transformer, then fusebox fused and unfused next to ONNX Runtime, one
# table (bench/generated_model_bench.sh says how).
#
#   bench/run_transformer_bench.sh [BUILD_DIR]          (default: build)
exec bash "$(dirname "${BASH_SOURCE[0]}")/generated_model_bench.sh" "${1:-build}" transformer torch \
  python3-torch export_transformer.py
