// The matmul kernels' second way: a plain CUDA C++ product (one thread per result element,
// f32 accumulation with fused multiply-adds, then bias, residual and activation, one rounding
// to the result's dtype), compiled with NVRTC. It runs the products cuBLASLt has no algorithm for
// (its heuristic refuses some degenerate shapes) and the empty contraction (K = 0), so that a
// claimed node never fails for its sizes. Slow for large products; cuBLASLt runs those.
#pragma once

#include <memory>
#include <string>

#include "backends/cuda/context.h"
#include "fusebox/status.h"
#include "ir/epilogue.h"

namespace fusebox::cuda {

struct MatmulFallbackShape {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  // Elements between the matrices of consecutive products (0: every product reads the same one).
  int64_t a_stride = 0, b_stride = 0;
};

// The kernel's source for `dtype` (f32, f16 or bf16) with epilogue act(t + bias + residual)
// (each term only where present): its entry is fb_matmul(MatmulFallbackShape, const void* a,
// const void* b, const void* bias, const void* residual, void* y).
std::string matmul_fallback_source(DType dtype, EpilogueAct act, bool bias, bool residual);

// Enqueues y = act(a b + bias + residual) on the context's stream (bias and residual null where
// the source has none; the residual has y's shape).
Status run_matmul_fallback(Context& context, const std::string& source, const MatmulFallbackShape& shape, const void* a,
                           const void* b, const void* bias, const void* residual, void* y);

}  // namespace fusebox::cuda
