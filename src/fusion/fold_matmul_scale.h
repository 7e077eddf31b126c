// Matmul-scale folding, one step of canonicalize: `mul(matmul(a, w), s)` with w a constant
// matrix and s a constant scalar or per-column vector is `matmul(a, w * s)`. ONNX Gemm's alpha
// (and the scale exporters put after a linear layer) imports as such a mul; folded, it costs
// nothing per run and leaves the matmul free to take its bias and activation as an epilogue.
//
//   y[m,n] = s[n] * sum_k a[m,k] w[k,n]   ->   y[m,n] = sum_k a[m,k] (w[k,n] s[n])
//
// The sum is reassociated (each product is scaled before it is added, not after), which rounds
// differently in the last bits, as any contraction kernel's summation order does: exact when s
// is a power of two, within the contraction tolerance otherwise. Only a matmul whose result the
// mul alone reads, with a rank-2 constant w, is folded.
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many scales were folded.
int64_t fold_matmul_scales(Graph& g, PassContext& ctx);

}  // namespace fusebox
