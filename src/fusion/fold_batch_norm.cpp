#include "fusion/fold_batch_norm.h"

#include "fusion/pattern_rewrite.h"

namespace fusebox {

Expected<int64_t> fold_batch_norms(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& conv = g.nodes()[i];
    if (conv.op != Op::Conv2d) continue;
    ChainStep next = next_in_chain(g, uses, conv.outputs[0], names);
    if (next.user < 0) continue;
    const Node& bn = g.nodes()[static_cast<size_t>(next.user)];
    if (bn.op != Op::BatchNorm || bn.inputs[0] != conv.outputs[0]) continue;
    const TensorType& y = g.type(conv.outputs[0]);
    const int64_t channels = y.shape[1].value();
    Rewrite rw{{i, static_cast<size_t>(next.user)}, {}, {}};
    Prelude pre(g, ctx, uses, rw.prelude);
    const ValueId scale = bn.inputs[1], shift = bn.inputs[2], mean = bn.inputs[3], var = bn.inputs[4];
    ValueId eps = pre.scalar(y.dtype, bn.attr_f64("eps"));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId var_eps, pre.emit(Op::Add, {var, eps}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId denom, pre.emit(Op::Sqrt, {var_eps}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId s, pre.emit(Op::Div, {scale, denom}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId s4, pre.reshape(s, {channels, 1, 1, 1}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId w, pre.emit(Op::Mul, {conv.inputs[1], s4}));
    ValueId centred;
    if (conv.inputs.size() == 3) {
      FUSEBOX_ASSIGN_OR_RETURN(centred, pre.emit(Op::Sub, {conv.inputs[2], mean}));
    } else {
      FUSEBOX_ASSIGN_OR_RETURN(centred, pre.emit(Op::Neg, {mean}));
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId scaled, pre.emit(Op::Mul, {centred, s}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, pre.emit(Op::Add, {scaled, shift}));
    rw.fused = Node{Op::Conv2d, {conv.inputs[0], w, b}, {bn.outputs[0]}, conv.attrs, nullptr, conv.loc};
    rewrites.push_back(std::move(rw));
  }
  return static_cast<int64_t>(apply_rewrites(g, std::move(rewrites)));
}

}  // namespace fusebox
