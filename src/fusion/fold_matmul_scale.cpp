#include "fusion/fold_matmul_scale.h"

#include "fusion/pattern_rewrite.h"

namespace fusebox {

namespace {

bool is_constant(const Graph& g, const UseInfo& uses, ValueId v) {
  int p = uses.producer[static_cast<size_t>(v)];
  return p >= 0 && g.nodes()[static_cast<size_t>(p)].op == Op::Constant;
}

// s scales whole columns of a matmul result [.., M, N]: one value, or N values along the last
// axis (every other dim 1).
bool scales_columns(const TensorType& s, const TensorType& result) {
  return is_broadcast_scalar(s, result) || is_per_channel(s, result, result.rank() - 1);
}

}  // namespace

int64_t fold_matmul_scales(Graph& g, PassContext& ctx) {
  if (!ctx.evaluate) return 0;  // the scaled weight must become a constant, not a per-run mul
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& mm = g.nodes()[i];
    if (mm.op != Op::MatMul) continue;
    const ValueId w = mm.inputs[1];
    if (g.type(w).rank() != 2 || !is_constant(g, uses, w)) continue;
    ChainStep next = next_in_chain(g, uses, mm.outputs[0], names);
    if (next.user < 0) continue;
    const Node& mul = g.nodes()[static_cast<size_t>(next.user)];
    const ValueId s = other_operand(mul, mm.outputs[0]);
    const TensorType& y = g.type(mm.outputs[0]);
    if (mul.op != Op::Mul || s == kNoValue || !is_constant(g, uses, s)) continue;
    if (g.type(s).dtype != y.dtype || !scales_columns(g.type(s), y)) continue;
    Rewrite rw{{i, static_cast<size_t>(next.user)}, {}, {}};
    Prelude pre(g, ctx, uses, rw.prelude);
    // A scalar broadcasts against w as it is; a column vector becomes [N], w's last axis.
    Expected<ValueId> factor = is_broadcast_scalar(g.type(s), y) ? pre.reshape(s, {1})
                                                                 : pre.reshape(s, {g.type(w).shape[1].value()});
    if (!factor) continue;
    Expected<ValueId> scaled = pre.emit(Op::Mul, {w, *factor});
    if (!scaled) continue;
    rw.fused = Node{Op::MatMul, {mm.inputs[0], *scaled}, {mul.outputs[0]}, mm.attrs, nullptr, mm.loc};
    rewrites.push_back(std::move(rw));
  }
  return static_cast<int64_t>(apply_rewrites(g, std::move(rewrites)));
}

}  // namespace fusebox
