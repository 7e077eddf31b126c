// fuse-conv-bias-act — a conv2d with what follows it per channel and per element, as one
// fused_conv_bias_act: oneDNN applies bias, residual and activation while the output tile is in
// registers, so the conv result is written once instead of read and written again per op.
//
// Matches `conv2d x, w[, b0]`, then in this order, each optional:
//   add _, b        b per-channel ([C], [C,1,1], [1,C,1,1], reached through reshape/expand) or
//                   one value for all channels ([1], [1,1,1,1]: expanded to [C])
//   mul _, s        per-channel scale (conv-affine): folded into the weights, w' = w * s[C,1,1,1]
//   add _, t        per-channel shift after a scale: folded into the bias
//   add _, r        r of the result's full shape: the residual (has_residual)
//   activation      one the target claims for fused_conv_bias_act
// each value in between read by exactly that one node (graph outputs count as uses: defect 2).
// Produces: `fused_conv_bias_act x, w', b'[, r] {act, has_residual}` defining the last matched
// value, after small prelude nodes that scale the weights and combine the biases (folded at once
// when they are constants). Requires: a verified graph; the target claims the kind and dtype;
// not `disable_conv_bias_act_fusion` (the pipeline leaves the pass out). Preserves: inputs,
// output positions, every value read outside the match. Batch norm after a conv was already
// folded into it by canonicalize.
#include "fusion/pattern_rewrite.h"

namespace fusebox {

namespace {

bool is_mul(const Node& n) { return n.op == Op::Mul; }

struct ConvMatch {
  const EpilogueMatcher& m;
  size_t head;
  ValueId v;  // the last matched value
  Rewrite rw;

  const TensorType& y() const { return m.g.type(m.g.nodes()[head].outputs[0]); }
  size_t index(const Node* n) const { return static_cast<size_t>(n - m.g.nodes().data()); }

  // The per-channel operand of the add/mul `n` reading v, or kNoValue (with a remark for an add
  // whose operand is neither per-channel nor a residual).
  ValueId per_channel_operand(const Node& n) const {
    ValueId c = other_operand(n, v);
    if (c == kNoValue || !(m.g.type(n.outputs[0]) == y())) return kNoValue;
    if (is_per_channel(m.g.type(c), y(), 1) || is_broadcast_scalar(m.g.type(c), y())) return c;
    if (n.op != Op::Add || is_full_shape(m.g.type(c), y())) return kNoValue;
    m.miss(head, n, MissReason::BiasNotBroadcastable,
           m.g.type(c).to_string() + " is not a per-channel vector of " + y().to_string());
    return kNoValue;
  }
};

}  // namespace

Status run_fuse_conv_bias_act(Graph& g, PassContext& ctx) {
  const UseInfo uses = compute_uses(g);
  const std::vector<std::string> names = value_display_names(g);
  const EpilogueMatcher m{g, uses, names, ctx, "fused_conv_bias_act", FusedKind::ConvBiasAct};
  std::vector<Rewrite> rewrites;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& conv = g.nodes()[i];
    if (conv.op != Op::Conv2d || !m.dtype_claimed(i)) continue;
    ConvMatch cm{m, i, conv.outputs[0], {{i}, {}, {}}};
    Prelude pre(g, ctx, uses, cm.rw.prelude);
    const TensorType y = cm.y();
    const int64_t channels = y.shape[1].value();
    ValueId weight = conv.inputs[1];
    ValueId bias = conv.inputs.size() == 3 ? conv.inputs[2] : kNoValue;
    auto absorb = [&](const Node* n) {
      cm.rw.absorbed.push_back(cm.index(n));
      cm.v = n->outputs[0];
    };
    auto vec = [&](ValueId c) { return pre.channel_vector(c, channels); };
    // Bias add, then scale and shift.
    if (const Node* add = m.next(i, cm.v, is_add)) {
      if (ValueId b = cm.per_channel_operand(*add); b != kNoValue) {
        FUSEBOX_ASSIGN_OR_RETURN(ValueId bv, vec(b));
        if (bias == kNoValue) {
          bias = bv;
        } else {
          FUSEBOX_ASSIGN_OR_RETURN(bias, pre.emit(Op::Add, {bias, bv}));
        }
        absorb(add);
      }
    }
    if (const Node* mul = m.next(i, cm.v, is_mul)) {
      if (ValueId s = cm.per_channel_operand(*mul); s != kNoValue) {
        FUSEBOX_ASSIGN_OR_RETURN(ValueId sv, vec(s));
        // A broadcast scalar multiplies the weights as it is; a channel vector per output channel.
        ValueId s4 = s;
        if (!is_broadcast_scalar(g.type(s), y)) {
          FUSEBOX_ASSIGN_OR_RETURN(s4, pre.reshape(s, {channels, 1, 1, 1}));
        }
        FUSEBOX_ASSIGN_OR_RETURN(weight, pre.emit(Op::Mul, {weight, s4}));
        if (bias != kNoValue) {
          FUSEBOX_ASSIGN_OR_RETURN(bias, pre.emit(Op::Mul, {bias, sv}));
        }
        absorb(mul);
        if (const Node* add = m.next(i, cm.v, is_add)) {
          if (ValueId t = cm.per_channel_operand(*add); t != kNoValue) {
            FUSEBOX_ASSIGN_OR_RETURN(ValueId tv, vec(t));
            if (bias == kNoValue) {
              bias = tv;
            } else {
              FUSEBOX_ASSIGN_OR_RETURN(bias, pre.emit(Op::Add, {bias, tv}));
            }
            absorb(add);
          }
        }
      }
    }
    // Residual.
    ValueId residual = kNoValue;
    if (const Node* add = m.next(i, cm.v, is_add)) {
      ValueId r = other_operand(*add, cm.v);
      if (r != kNoValue && is_full_shape(g.type(r), y)) {
        residual = r;
        absorb(add);
      }
    }
    Epilogue ep;
    m.absorb_activation(i, &cm.v, &cm.rw, &ep);
    if (cm.rw.absorbed.size() == 1) continue;
    Node fused{Op::FusedConvBiasAct, {conv.inputs[0], weight}, {cm.v}, {}, nullptr, conv.loc};
    for (const char* name : {"stride", "pad", "dilation", "groups"}) fused.attrs.set(name, *conv.attr_or_default(name));
    if (bias != kNoValue) fused.inputs.push_back(bias);
    if (residual != kNoValue) {
      fused.inputs.push_back(residual);
      fused.attrs.set("has_residual", true);
    }
    set_epilogue(fused.attrs, ep);
    cm.rw.fused = std::move(fused);
    rewrites.push_back(std::move(cm.rw));
  }
  ctx.count("fuse-conv-bias-act", "fused", static_cast<int64_t>(apply_rewrites(g, std::move(rewrites))));
  return Status::ok();
}

}  // namespace fusebox
