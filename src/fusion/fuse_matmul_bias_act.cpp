// fuse-matmul-bias-act — a matmul with the bias add and activation that follow it, as one
// fused_matmul_bias_act (oneDNN runs the epilogue as post-ops while the tile is in registers).
//
// Matches: `matmul a, w`, then optionally `add _, bias` where bias broadcasts along the last axis
// (rank <= the result's, every other dim 1), then optionally an activation the target claims for
// this kind; each value in between read by exactly that one node (graph outputs count as uses:
// spec defect 2). Produces: `fused_matmul_bias_act a, w[, bias] {act}` defining the last matched
// value. Requires: a verified graph; the target claims fused_matmul_bias_act and the dtype.
// Preserves: inputs, output positions, every value read outside the match. A full-shape add is a
// residual: left for fuse-matmul-residual.
#include "fusion/pattern_rewrite.h"

namespace fusebox {

Status run_fuse_matmul_bias_act(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  const EpilogueMatcher m{g, uses, names, ctx, "fused_matmul_bias_act", FusedKind::MatmulBiasAct};
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& mm = g.nodes()[i];
    if (mm.op != Op::MatMul || !m.dtype_claimed(i)) continue;
    const TensorType& y = g.type(mm.outputs[0]);
    Rewrite rw{{i}, {}, Node{Op::FusedMatmulBiasAct, mm.inputs, {}, {}, nullptr, mm.loc}};
    ValueId v = mm.outputs[0];
    if (const Node* add = m.next(i, v, is_add)) {
      ValueId b = other_operand(*add, v);
      if (b != kNoValue && y.rank() >= 1 && is_per_channel(g.type(b), y, y.rank() - 1) && g.type(add->outputs[0]) == y) {
        rw.fused.inputs.push_back(b);
        rw.absorbed.push_back(static_cast<size_t>(add - g.nodes().data()));
        v = add->outputs[0];
      } else if (b != kNoValue && is_full_shape(g.type(b), y)) {
        continue;  // a residual: fuse-matmul-residual's
      } else if (b != kNoValue) {
        m.miss(i, *add, MissReason::BiasNotBroadcastable,
               "bias " + g.type(b).to_string() + " does not broadcast along the last axis of " + y.to_string());
      }
    }
    Epilogue ep;
    m.absorb_activation(i, &v, &rw, &ep);
    if (rw.absorbed.size() == 1) continue;
    set_epilogue(rw.fused.attrs, ep);
    rw.fused.outputs = {v};
    rewrites.push_back(std::move(rw));
  }
  ctx.count("fuse-matmul-bias-act", "fused", static_cast<int64_t>(apply_rewrites(g, std::move(rewrites))));
  return Status::ok();
}

}  // namespace fusebox
