#include "fusion/fold_batch_norm.h"

#include "fusion/pattern_rewrite.h"

namespace fusebox {

Expected<int64_t> fold_batch_norms(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& conv = g.nodes()[i];
    // A transposed conv's weights are [in, out / groups, kh, kw]: with one group the output
    // channel is their second axis.
    const bool transposed = conv.op == Op::ConvTranspose2d;
    if (conv.op != Op::Conv2d && !(transposed && conv.attr_i64("groups") == 1)) continue;
    ChainStep next = next_in_chain(g, uses, conv.outputs[0], names);
    if (next.user < 0) continue;
    const TensorType& y = g.type(conv.outputs[0]);
    if (y.rank() != 4 || !y.shape[1].is_static()) continue;
    const int64_t channels = y.shape[1].value();
    // The bias written as an add of a per-channel value (exporters write a transposed conv's so).
    int bias_add = -1;
    ValueId added = kNoValue;
    if (const Node& a = g.nodes()[static_cast<size_t>(next.user)]; a.op == Op::Add) {
      added = other_operand(a, conv.outputs[0]);
      if (added == kNoValue || g.type(added).dtype != y.dtype || g.type(a.outputs[0]) != y ||
          !(is_per_channel(g.type(added), y, 1) || is_broadcast_scalar(g.type(added), y)))
        continue;
      bias_add = next.user;
      next = next_in_chain(g, uses, a.outputs[0], names);
      if (next.user < 0) continue;
    }
    const Node& bn = g.nodes()[static_cast<size_t>(next.user)];
    const ValueId bn_in =
        bias_add >= 0 ? g.nodes()[static_cast<size_t>(bias_add)].outputs[0] : conv.outputs[0];
    if (bn.op != Op::BatchNorm || bn.inputs[0] != bn_in) continue;
    Rewrite rw{{i}, {}, {}};
    if (bias_add >= 0) rw.absorbed.push_back(static_cast<size_t>(bias_add));
    rw.absorbed.push_back(static_cast<size_t>(next.user));
    Prelude pre(g, ctx, uses, rw.prelude);
    const ValueId scale = bn.inputs[1], shift = bn.inputs[2], mean = bn.inputs[3], var = bn.inputs[4];
    ValueId eps = pre.scalar(y.dtype, bn.attr_f64("eps"));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId var_eps, pre.emit(Op::Add, {var, eps}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId denom, pre.emit(Op::Sqrt, {var_eps}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId s, pre.emit(Op::Div, {scale, denom}));
    FUSEBOX_ASSIGN_OR_RETURN(
        ValueId s4, transposed ? pre.reshape(s, {1, channels, 1, 1}) : pre.reshape(s, {channels, 1, 1, 1}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId w, pre.emit(Op::Mul, {conv.inputs[1], s4}));
    // b0: the conv's bias and the added one (either may be absent).
    ValueId b0 = conv.inputs.size() == 3 ? conv.inputs[2] : kNoValue;
    if (added != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId extra, pre.channel_vector(added, channels));
      if (b0 == kNoValue) {
        b0 = extra;
      } else {
        FUSEBOX_ASSIGN_OR_RETURN(b0, pre.emit(Op::Add, {b0, extra}));
      }
    }
    ValueId centred;
    if (b0 != kNoValue) {
      FUSEBOX_ASSIGN_OR_RETURN(centred, pre.emit(Op::Sub, {b0, mean}));
    } else {
      FUSEBOX_ASSIGN_OR_RETURN(centred, pre.emit(Op::Neg, {mean}));
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId scaled, pre.emit(Op::Mul, {centred, s}));
    FUSEBOX_ASSIGN_OR_RETURN(ValueId b, pre.emit(Op::Add, {scaled, shift}));
    rw.fused = Node{conv.op, {conv.inputs[0], w, b}, {bn.outputs[0]}, conv.attrs, nullptr, conv.loc};
    rewrites.push_back(std::move(rw));
  }
  return static_cast<int64_t>(apply_rewrites(g, std::move(rewrites)));
}

}  // namespace fusebox
