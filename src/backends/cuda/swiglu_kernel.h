// fused_swiglu on the GPU (ir/fused_swiglu_op.h defines it): y = silu(gate) · up over the two
// halves of matmul(x, w) (+ bias).
//
//   h [.., 2n] = x · w (+ bias)     the cuBLASLt matmul kernel (matmul_kernel.h) of the
//                                   equivalent matmul / fused_matmul_bias_act node, into a
//                                   device temporary; the bias in cuBLASLt's epilogue
//   y [.., n]  = silu(g) · u        one generated element-wise kernel: g and u are the halves of
//                                   each row of h (gate_first: g the first), silu and the product
//                                   each rounded to the dtype, as the unfused steps round
//
// The temporary comes from the context's pool and goes back when the run returns (the one
// stream orders its reuse after the gate kernel); a run recorded into a CUDA graph keeps its
// temporary with the kernel instead (one per recording, freed with the plan), since every replay
// writes it again.
//
// Accuracy: the product is cuBLASLt's (f32 accumulation, bias added before the one rounding
// where the unfused add rounds twice for f16/bf16); the gate step is the reference's silu and mul.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

inline constexpr const char* kSwigluEntry = "fb_swiglu_gate";

// The gate kernel's source for f32, f16 or bf16 values. Arguments (h, y, rows, n, gate offset):
// y[r, c] = silu(h[r, off + c]) · h[r, n - off + c], off = 0 or n.
std::string swiglu_gate_source(DType dtype);

// Accept, or refuse with the reason (a dtype, or what cuBLASLt does not take: the bias's
// shape, a batch broadcast).
Claim claim_swiglu(const Graph& g, const Node& n);

// The kernel of a claimed fused_swiglu; an error with the refusal's reason otherwise.
// `allow_tf32`: an f32 product may run on TF32 tensor cores (CudaBackendOptions).
Expected<std::shared_ptr<const Kernel>> make_swiglu_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n,
                                                           bool allow_tf32 = false);

}  // namespace fusebox::cuda
