// matmul, fused_matmul_bias_act and fused_matmul_residual on the GPU through cuBLASLt
// (cublaslt.h).
//
//   claimed  f32, f16 and bf16 operands (accumulated in f32, never TF32; the result in the
//            operands' dtype); 2-D products, batched products with equal batch dims, and a
//            batched left operand against a 2-D right one (one product of B*M rows); the
//            epilogues cuBLASLt computes as the fused op defines them: a bias along the last
//            axis, a residual of the result's shape (cuBLASLt's C, with beta 1), then none, relu
//            or gelu_tanh. Everything else is refused with the reason, so the CPU runs it.
//   layout   fusebox tensors are row-major and cuBLASLt's matrices column-major, so C = A B is
//            run as C^T = B^T A^T: every operand is read as it lies in memory.
//
//              fusebox (row-major)        cuBLASLt (column-major)
//              A [M,K]  row stride K  ->  "B"  K x M, ld K
//              B [K,N]  row stride N  ->  "A"  N x K, ld N
//              C [M,N]  row stride N  ->  "D"  N x M, ld N    bias: one value per row of D
//
//   run      descriptors are built at every run (a new size never recompiles); the heuristic's
//            first algorithm is kept per (sizes, pointer alignments) in the kernel. Sizes the
//            heuristic has no algorithm for, and K = 0, run on a plain NVRTC kernel
//            (matmul_fallback.h), so a claimed node never fails for its sizes.
//            FUSEBOX_CUDA_MATMUL_PLAIN=1 when a kernel is made: that kernel runs every product on
//            the plain kernel (tests check it against the reference too).
#pragma once

#include <cstdint>
#include <memory>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

// The ops claim_matmul decides: matmul, fused_matmul_bias_act, fused_matmul_residual.
bool is_cublaslt_op(Op op);

// Whether the CUDA backend runs node `n` of `g` (is_cublaslt_op) through cuBLASLt; a refusal
// says why (cuBLASLt missing, the dtype, a broadcast, the epilogue).
Claim claim_matmul(const Graph& g, const Node& n);

// The kernel of a node claim_matmul accepted; `allow_tf32`: an f32 product may run on TF32
// tensor cores (cuBLASLt's CUBLAS_COMPUTE_32F_FAST_TF32).
Expected<std::shared_ptr<const Kernel>> make_matmul_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n,
                                                           bool allow_tf32 = false);

// Products run so far in this process, by way (tests check which one ran).
struct MatmulRuns {
  uint64_t cublaslt = 0;  // through cuBLASLt
  uint64_t fallback = 0;  // through the plain kernel (matmul_fallback.h)
};
MatmulRuns matmul_runs();

}  // namespace fusebox::cuda
