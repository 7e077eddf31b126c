// The CPU backend's kernels for contractions: matmul, conv2d, conv_transpose2d, max/avg pool,
// matmul_integer / conv2d_integer (int8 primitives, where their result is exact) and the fused
// contractions (fused_matmul_bias_act, fused_matmul_residual, fused_conv_bias_act) on
// oneDNN (src/backends/cpu/onednn/), their epilogues as post-ops; to_nchwc / to_nchw as oneDNN
// reorders.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox::cpu {

// A oneDNN kernel for node `n` of `g`, or null when oneDNN does not take it (no oneDNN in this
// build, a dtype other than f32, an op it does not cover): the caller then uses the reference.
// Weights that are constants of `g` are handed to the kernel to be reordered once.
// winograd: CpuBackendOptions::winograd (3x3 stride-1 convolutions).
Expected<std::shared_ptr<const Kernel>> make_onednn_kernel(const Graph& g, const Node& n, Codegen codegen,
                                                           bool winograd = false);

}  // namespace fusebox::cpu
