#!/usr/bin/env bash
# torchvision's resnet50 and efficientnet_b0 (random weights, batch 1 and 8; exported by
# bench/models/export_torchvision.py with Debian's python3-torch and python3-torchvision) into
# CACHE/torchvision, then fusebox fused and unfused next to ONNX Runtime, one table
# (bench/generated_model_bench.sh says how).
#
#   bench/run_torchvision_bench.sh [BUILD_DIR]          (default: build)
exec bash "$(dirname "${BASH_SOURCE[0]}")/generated_model_bench.sh" "${1:-build}" torchvision torch,torchvision \
  "python3-torch python3-torchvision" export_torchvision.py
