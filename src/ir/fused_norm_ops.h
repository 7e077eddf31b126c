// The fused normalisations of ops.def (fused_residual_layer_norm, fused_residual_rms_norm) in
// terms of the primitives they replace: the one definition their reference kernels run, the
// pattern passes build from, and tests unfuse with.
//
//   fused_residual_layer_norm x, r, bias, scale, shift
//       s = add x, r;  s = add s, bias;  y = layer_norm s, scale, shift {axis, eps}
//   fused_residual_rms_norm x, r, bias, scale
//       s = add x, r;  s = add s, bias;  y = rms_norm s, scale {axis, eps}
//
// The bias add is present only with has_bias; scale and shift only when the node has them (a
// shift needs a scale, as layer_norm's operands do). The sum has x's type. With two results the
// second is the sum s (read elsewhere), computed once.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"

namespace fusebox {

bool is_fused_norm(Op op);

// Where each operand of a fused normalisation sits in its node's inputs (-1: absent).
struct NormRoles {
  int x = 0, residual = 1, bias = -1, scale = -1, shift = -1;
};
NormRoles fused_norm_roles(const Node& n);

// The norm a fused normalisation ends in: Op::LayerNorm or Op::RmsNorm.
Op fused_norm_base(Op fused);

// The primitives a fused normalisation stands for, in order ("residual+bias+layer_norm"): the
// report's name of the fused op.
std::vector<std::string> fused_norm_steps(const Node& fused);

// The primitive nodes computing fused node `n` of `g`, appending their intermediate values to
// `g`; they define n's results. `n` must be a verified fused normalisation of `g`.
std::vector<Node> unfused_norm_nodes(Graph& g, const Node& n);

// Replaces every fused normalisation of `g` by its primitives (the inverse of the pattern
// passes). Returns how many were replaced.
size_t unfuse_norms(Graph& g);

}  // namespace fusebox
