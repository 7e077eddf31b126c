// fuse-matmul-residual — `matmul(a, w) (+ bias) + r` with r of the result's full shape (the
// residual connection of a transformer block), and the activation after it, as one
// fused_matmul_residual: the residual is read inside the contraction's epilogue instead of in a
// separate pass over memory.
//
// Matches: `matmul a, w` or a `fused_matmul_bias_act` without activation (the bias pass runs
// first), then `add _, r` where r has the result's dtype and shape and is not the product itself,
// then optionally an activation the target claims; each value in between read by exactly that
// node (graph outputs count as uses). Produces: `fused_matmul_residual a, w, r[, bias] {act}`
// defining the last matched value. Requires: a verified graph; the target claims the kind and
// the dtype. Preserves: inputs, output positions, every value read outside the match.
#include "fusion/pattern_rewrite.h"
#include "ir/fused_ops.h"

namespace fusebox {

namespace {

bool is_plain_product(const Node& n) {
  if (n.op == Op::MatMul) return true;
  return n.op == Op::FusedMatmulBiasAct && epilogue_of_fused(n).act == EpilogueAct::None;
}

}  // namespace

Status run_fuse_matmul_residual(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  const EpilogueMatcher m{g, uses, names, ctx, "fused_matmul_residual", FusedKind::MatmulResidual};
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& mm = g.nodes()[i];
    if (!is_plain_product(mm) || !m.dtype_claimed(i)) continue;
    ValueId v = mm.outputs[0];
    const TensorType& y = g.type(v);
    // Bias adds are not residuals (defect 8's rule for norms holds here too).
    const Node* add = m.next(i, v, [&](const Node& n) {
      ValueId r = other_operand(n, v);
      return n.op == Op::Add && r != kNoValue && is_full_shape(g.type(r), y);
    });
    if (!add) continue;
    ValueId r = other_operand(*add, v);
    Rewrite rw{{i, static_cast<size_t>(add - g.nodes().data())}, {},
               Node{Op::FusedMatmulResidual, {mm.inputs[0], mm.inputs[1], r}, {}, {}, nullptr, mm.loc}};
    if (mm.op == Op::FusedMatmulBiasAct) {
      int bias = contraction_roles(mm).bias;
      if (bias >= 0) rw.fused.inputs.push_back(mm.inputs[static_cast<size_t>(bias)]);
    }
    v = add->outputs[0];
    Epilogue ep;
    m.absorb_activation(i, &v, &rw, &ep);
    set_epilogue(rw.fused.attrs, ep);
    rw.fused.outputs = {v};
    rewrites.push_back(std::move(rw));
  }
  ctx.count("fuse-matmul-residual", "fused", static_cast<int64_t>(apply_rewrites(g, std::move(rewrites))));
  return Status::ok();
}

}  // namespace fusebox
