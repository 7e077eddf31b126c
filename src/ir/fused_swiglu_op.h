// fused_swiglu (ops.def; spec §4.1) in terms of the primitives it replaces: the one definition
// its reference kernel runs, fuse-swiglu builds from, and tests unfuse with.
//
//   fused_swiglu x, w[, bias] {gate_first}
//
//   h = matmul x, w                          [..., 2n]   (the last dim of w: a known even size)
//   h = add h, bias                          when given: bias broadcasts along the last axis
//   g = slice h {starts = [0], ends = [n], axes = [r-1]}       the gate half: the first when
//   u = slice h {starts = [n], ends = [2n], axes = [r-1]}      gate_first, else the second
//   s = silu g
//   y = mul s, u                             [..., n]
//
// The gate slice is written first whichever half it takes, so unfusing a node with
// gate_first = false gives the second half to silu (spec defect 7).
#pragma once

#include <optional>
#include <vector>

#include "ir/graph.h"

namespace fusebox {

// Which half of the last axis of its operand (of type `in`) slice node `s` takes: 0 the first,
// 1 the second; nullopt when it takes anything else (another axis, a step, an odd size, a
// symbolic size, not exactly half).
std::optional<int> slice_half(const Node& s, const TensorType& in);

// The primitive nodes computing fused_swiglu node `n` of `g`, appending their intermediate
// values to `g` (types by shape inference); the last node defines n's result. `n` must be a
// verified fused_swiglu of `g`.
std::vector<Node> unfused_swiglu_nodes(Graph& g, const Node& n);

}  // namespace fusebox
