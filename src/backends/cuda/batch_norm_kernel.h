// batch_norm (inference) on the GPU: y = (x - mean[c]) / sqrt(var[c] + eps) * scale[c] + bias[c]
// over x = [N, C, spatial...] (src/backends/cpu/reference/normalize.cpp).
//
// One thread per element, the channel c = (i / inner) % C of its row-major index. Every step is
// the reference's, in double: the operands widened exactly, the square root and division IEEE
// (no fast math), no contraction of the multiply-add (--fmad=false), rounded once into the
// dtype (f16/bf16 through round-to-odd float, as the reference's one rounding): results are bit
// for bit the reference's. Sizes are kernel arguments: a new shape never recompiles.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

inline constexpr const char* kBatchNormEntry = "fb_batch_norm";

// The source for operands of `dtype` (f32, f16, bf16, f64). Arguments:
//   (x, scale, bias, mean, var, y, i64 total, i64 channels, i64 inner, double eps)
std::string batch_norm_source(DType dtype);

// Whether the CUDA backend runs batch_norm node `n` of `g`; a refusal says why.
Claim claim_batch_norm(const Graph& g, const Node& n);

Expected<std::shared_ptr<const Kernel>> make_batch_norm_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                               const Node& n);

}  // namespace fusebox::cuda
