// The CPU kernel of fused_swiglu (ir/fused_swiglu_op.h): y = silu(gate) · up over the two halves
// of matmul(x, w) (+ bias).
//
//   w [.., k, 2n] ──split once (a constant) or per run──> w_gate, w_up  [.., k, n]
//   y  = x · w_gate (+ b_gate)        oneDNN matmul, written into the result
//   up = x · w_up   (+ b_up)          oneDNN matmul, into a scratch array
//   y  = silu(y) · up                 one region pass in place (generated code or the tile
//                                     interpreter, vectorised, as any elementwise_region)
//
// Splitting the weights makes both products contiguous, so the last pass is a plain
// element-wise region; the two matmuls cost what the one over [k, 2n] does.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox::cpu {

// A kernel for fused_swiglu node `n` of `g`, or null when oneDNN does not take it (no oneDNN in
// this build, a dtype other than f32): the caller then uses the reference kernel.
Expected<std::shared_ptr<const Kernel>> make_swiglu_kernel(const Graph& g, const Node& n, Codegen codegen);

}  // namespace fusebox::cpu
