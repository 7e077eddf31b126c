// The fused contractions of ops.def (fused_matmul_bias_act, fused_matmul_residual,
// fused_conv_bias_act) in terms of the primitives they replace: the one definition their
// reference kernels run, the pattern passes build from, and tests unfuse with.
//
//   fused_matmul_bias_act a, w, b        t = matmul a, w;  t = add t, b;  y = act t
//   fused_matmul_residual a, w, r, b     t = matmul a, w;  t = add t, b;  t = add t, r;  y = act t
//   fused_conv_bias_act x, w, b, r       t = conv2d x, w, b;  t = add t, r;  y = act t
//
// Each step is present only when the fused node has its operand or activation. Intermediates
// have the fused result's type.
#pragma once

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

bool is_fused_contraction(Op op);

// Where each operand of a contraction sits in its node's inputs (-1: absent). Covers the fused
// contractions and the plain matmul / conv2d / conv_transpose2d (whose bias is conv's own).
struct OperandRoles {
  int input = 0, weight = 1, bias = -1, residual = -1;
};
OperandRoles contraction_roles(const Node& n);

// The primitives a fused contraction stands for, in order: "matmul+bias+gelu_tanh",
// "conv2d+bias+residual+relu" (the report's name of the fused op).
std::vector<std::string> fused_contraction_steps(const Node& fused);

// The primitive nodes computing fused node `n` of `g`, appending their intermediate values to
// `g`; the last node defines n's result. `n` must be a verified fused contraction of `g`.
std::vector<Node> unfused_nodes(Graph& g, const Node& n);

// Replaces every fused contraction of `g`, and every fused_swiglu (ir/fused_swiglu_op.h), by its
// primitives (the inverse of the pattern passes). Returns how many were replaced.
size_t unfuse_contractions(Graph& g);

}  // namespace fusebox
