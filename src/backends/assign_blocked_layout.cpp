#include "backends/assign_blocked_layout.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "ir/layout.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference.h"

namespace fusebox {

namespace {

// A shape of rank <= 4 right-aligned to rank 4 (numpy broadcasting's view of it).
Shape as_rank4(const Shape& s) {
  Shape out(4 - std::min<size_t>(s.size(), 4), Dim(1));
  out.insert(out.end(), s.begin(), s.end());
  return out;
}

bool elementwise_like(const Node& n) {
  if (n.op == Op::ElementwiseRegion) return prologue_input(n) < 0;  // a prologue indexes its source
  if (n.op == Op::BatchNorm || n.op == Op::Expand) return false;  // axis-1 and shape semantics
  OpKind k = n.info().kind;
  return k == OpKind::Elementwise || k == OpKind::Broadcast;
}

class Lowering {
 public:
  Lowering(const Graph& g, const BlockedLayoutOptions& options)
      : g_(g), options_(options), b_(options.block), nhwc_(options.block == kNhwcBlock), out_(g.name()), plain_(g.num_values(), -1), blocked_(g.num_values(), -1),
        constant_(g.num_values(), nullptr) {}

  Expected<Graph> run() {
    for (ValueId v : g_.inputs()) plain_[size_t(v)] = out_.add_input(g_.value(v).name, g_.type(v));
    for (const Node& n : g_.nodes()) FUSEBOX_RETURN_IF_ERROR(lower(n));
    for (ValueId v : g_.outputs()) {
      FUSEBOX_ASSIGN_OR_RETURN(ValueId p, plain(v));
      out_.add_output(p);
    }
    out_.set_optional_outputs(g_.optional_outputs());
    out_.set_unmaterialized_outputs(g_.unmaterialized_outputs());
    return std::move(out_);
  }

 private:
  const TensorType& type(ValueId v) const { return g_.type(v); }

  Status lower(const Node& n) {
    if (n.op == Op::Constant) constant_[size_t(n.outputs[0])] = &n.attr_array("value");
    if (conv_takes_blocked(n)) return emit_blocked(n, {0, residual_index(n)});
    if (pool_takes_blocked(n) || concat_takes_blocked(n)) return emit_blocked(n, all_inputs(n));
    if (resize_takes_blocked(n)) return emit_blocked_resize(n);
    if (elementwise_takes_blocked(n)) return emit_blocked(n, all_inputs(n));
    return emit_plain(n);
  }

  // ---- decisions ----------------------------------------------------------------------------

  // The block of a value with `c` channels: the lowering's b, or in NHWC all of them.
  int64_t block_for(const Dim& c) const { return nhwc_ ? c.value() : b_; }
  bool divisible(const Dim& c) const {
    return c.is_static() && (nhwc_ ? c.value() >= 1 : c.value() % b_ == 0);
  }
  // [N,C,1,1] with C divisible: nChw<b>c puts (n, c) at n*C + c, as NCHW does, so converting
  // it is a reshape, not a reorder (the squeeze-excite vectors of MobileNet-style blocks).
  bool one_pixel(const Shape& s) const {
    return s.size() == 4 && divisible(s[1]) && s[2] == Dim(1) && s[3] == Dim(1);
  }
  bool has_blocked(ValueId v) const { return blocked_[size_t(v)] >= 0; }
  bool takes_dtype(DType d) const {
    return std::find(options_.dtypes.begin(), options_.dtypes.end(), d) != options_.dtypes.end();
  }
  bool is_constant(ValueId v) const { return constant_[size_t(v)] != nullptr; }

  static int residual_index(const Node& n) {
    bool r = n.op == Op::FusedConvBiasAct && n.attr_bool("has_residual");
    return r ? int(n.inputs.size()) - 1 : 0;
  }

  bool conv_takes_blocked(const Node& n) const {
    const bool integer = n.op == Op::Conv2dInteger;
    if ((n.op != Op::Conv2d && n.op != Op::FusedConvBiasAct && !integer) || has_nchwc_layout(n)) return false;
    if (integer && !(options_.integer_convs && is_constant(n.inputs[1]) && is_constant(n.inputs[3])))
      return false;
    const TensorType& x = type(n.inputs[0]);
    const TensorType& w = type(n.inputs[1]);
    const TensorType& y = type(n.outputs[0]);
    if (!(integer || takes_dtype(x.dtype)) || x.rank() != 4 || w.rank() != 4 || y.rank() != 4) return false;
    if (!divisible(x.shape[1]) || !divisible(y.shape[1]) || !is_static(w.shape)) return false;
    if (options_.constant_weights && !is_constant(n.inputs[1])) return false;
    int64_t groups = n.attr_i64("groups");
    bool depthwise = groups == x.shape[1].value() && groups == y.shape[1].value();
    if (groups != 1 && !depthwise) return false;
    // A dense 1x1 conv with nothing fused runs as a GEMM on NCHW: block it only when its input
    // is blocked already (so that no reorder is added for it).
    bool dense_1x1 = groups == 1 && w.shape[2].value() == 1 && w.shape[3].value() == 1;
    bool bare =
        n.op == Op::Conv2d || integer || (n.attr_str("act") == "none" && !n.attr_bool("has_residual"));
    return !(options_.bare_1x1_plain && dense_1x1 && bare && !has_blocked(n.inputs[0]));
  }

  bool pool_takes_blocked(const Node& n) const {
    if (n.op != Op::MaxPool2d && n.op != Op::AvgPool2d && n.op != Op::GlobalAvgPool) return false;
    const TensorType& x = type(n.inputs[0]);
    return !has_nchwc_layout(n) && takes_dtype(x.dtype) && x.rank() == 4 && divisible(x.shape[1]) &&
           has_blocked(n.inputs[0]);
  }

  bool concat_takes_blocked(const Node& n) const {
    if (n.op != Op::Concat || type(n.outputs[0]).rank() != 4) return false;
    bool any_blocked = false;
    for (ValueId v : n.inputs) {
      if (type(v).rank() != 4 || !divisible(type(v).shape[1])) return false;
      any_blocked = any_blocked || has_blocked(v);
    }
    return any_blocked;
  }

  // A nearest resize of a blocked value that keeps N and C: the same resize of the 5-D form with
  // the block axis kept (scale 1). Linear is left NCHW: its zero-weight taps of the kept axes
  // would turn an infinity into NaN where the 4-D resize reads none.
  bool resize_takes_blocked(const Node& n) const {
    if (n.op != Op::Resize || n.attr_str("mode") != "nearest" || !has_blocked(n.inputs[0])) return false;
    const TensorType& x = type(n.inputs[0]);
    const TensorType& y = type(n.outputs[0]);
    return x.rank() == 4 && divisible(x.shape[1]) && y.shape[0] == x.shape[0] && y.shape[1] == x.shape[1];
  }

  Status emit_blocked_resize(const Node& n) {
    Node copy = n;
    if (n.attrs.has("scales")) {
      std::vector<double> scales = n.attr_f64s("scales");
      scales.push_back(1.0);
      copy.attrs.set("scales", scales);
    } else {
      Shape sizes = n.attr_dims("sizes");
      if (sizes.size() != 4 || !divisible(sizes[1])) return emit_plain(n);
      const int64_t b = block_for(sizes[1]);
      copy.attrs.set("sizes", Shape{sizes[0], Dim(sizes[1].value() / b), sizes[2], sizes[3], Dim(b)});
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId x, blocked(n.inputs[0]));
    copy.inputs = {x};
    const TensorType in = out_.type(x);
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> results, infer_result_types(copy, std::span(&in, 1)));
    ValueId bv = out_.add_value(results[0]);
    blocked_[size_t(n.outputs[0])] = bv;
    copy.outputs = {bv};
    out_.add_node(std::move(copy));
    return Status::ok();
  }

  // Some operand of the result's full shape is blocked, and every operand has a blocked form.
  bool elementwise_takes_blocked(const Node& n) const {
    if (!elementwise_like(n)) return false;
    const Shape& s = type(n.outputs[0]).shape;
    for (ValueId o : n.outputs) {
      if (type(o).shape != s) return false;
    }
    if (s.size() != 4 || !divisible(s[1])) return false;
    bool full_blocked = false;
    for (ValueId v : n.inputs) {
      if (type(v).rank() > 4) return false;
      full_blocked = full_blocked || (has_blocked(v) && type(v).shape == s);
      if (type(v).rank() == 0 || has_blocked(v)) continue;
      Shape t = as_rank4(type(v).shape);
      bool channels = t[1] == s[1];           // to_nchwc
      bool no_channels = t[1] == Dim(1);      // a reshape to [a,1,c,d,1]
      if (!channels && !no_channels) return false;
      if ((no_channels || type(v).rank() < 4) && !is_static(t)) return false;  // reshape needs sizes
    }
    return full_blocked;
  }

  static std::vector<int> all_inputs(const Node& n) {
    std::vector<int> all(n.inputs.size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = int(i);
    return all;
  }

  // ---- materialisation ----------------------------------------------------------------------

  Status emit_plain(const Node& n) {
    Node copy = n;
    for (ValueId& v : copy.inputs) {
      FUSEBOX_ASSIGN_OR_RETURN(v, plain(v));
    }
    copy.outputs.clear();
    for (ValueId o : n.outputs) {
      ValueId p = out_.add_value(type(o), g_.value(o).name);
      plain_[size_t(o)] = p;
      copy.outputs.push_back(p);
    }
    out_.add_node(std::move(copy));
    return Status::ok();
  }

  // `n` on blocked activations: the operands listed in `activations` in blocked form, the rest as
  // they are; results blocked.
  Status emit_blocked(const Node& n, const std::vector<int>& activations) {
    Node copy = n;
    if (n.op != Op::Concat && !elementwise_like(n)) copy.attrs.set("layout", std::string(nhwc_ ? "nhwc" : "nchwc"));
    if (n.op == Op::Concat) {
      // The 4-D axis on the 5-D form: channels are the blocks' axis 1, or in NHWC the last.
      int64_t axis = n.attr_i64("axis");
      if (axis < 0) axis += 4;
      copy.attrs.set("axis", axis == 1 && nhwc_ ? int64_t(4) : axis);
    }
    std::vector<TensorType> in;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      ValueId v = n.inputs[i];
      bool act = std::find(activations.begin(), activations.end(), int(i)) != activations.end();
      if (act && type(v).rank() != 0) {
        FUSEBOX_ASSIGN_OR_RETURN(copy.inputs[i], blocked(v));
      } else {
        FUSEBOX_ASSIGN_OR_RETURN(copy.inputs[i], plain(v));
      }
      in.push_back(out_.type(copy.inputs[i]));
    }
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> results, infer_result_types(copy, in));
    copy.outputs.clear();
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      ValueId bv = out_.add_value(results[k]);
      blocked_[size_t(n.outputs[k])] = bv;
      copy.outputs.push_back(bv);
    }
    out_.add_node(std::move(copy));
    return Status::ok();
  }

  // The NCHW form of an old value: its own, or a to_nchw of its blocked form (named as it was).
  Expected<ValueId> plain(ValueId v) {
    if (plain_[size_t(v)] >= 0) return plain_[size_t(v)];
    ValueId bv = blocked_[size_t(v)];
    if (bv < 0) return Status::internal("assign_blocked_layout: value " + std::to_string(v) + " used before defined");
    const Op convert = one_pixel(type(v).shape) ? Op::Reshape : Op::ToNchw;
    Attrs attrs;
    if (convert == Op::Reshape) attrs.set("shape", type(v).shape);
    FUSEBOX_ASSIGN_OR_RETURN(ValueId p, add(convert, bv, std::move(attrs)));
    out_.value(p).name = g_.value(v).name;
    plain_[size_t(v)] = p;
    return p;
  }

  // The blocked (broadcast-compatible 5-D) form of an old value: a to_nchwc when it has the
  // channels, a reshape to [a,1,c,d,1] when it has none; constants converted here.
  Expected<ValueId> blocked(ValueId v) {
    if (blocked_[size_t(v)] >= 0) return blocked_[size_t(v)];
    FUSEBOX_ASSIGN_OR_RETURN(ValueId p, plain(v));
    const Shape t = as_rank4(type(v).shape);
    const bool channels = t[1] != Dim(1) || b_ == 1;
    ValueId bv;
    if (const Array* c = constant_[size_t(v)]) {
      Array four = c->reshaped(static_dims(t));
      Array converted = channels ? to_nchwc(four, block_for(t[1]))
                                 : four.reshaped({four.shape()[0], 1, four.shape()[2], four.shape()[3], 1});
      bv = out_.add_node(Op::Constant, {}, {TensorType{c->dtype(), make_shape(converted.shape())}},
                         Attrs{{"value", std::make_shared<const Array>(converted)}})[0];
    } else if (channels && one_pixel(type(v).shape)) {
      const int64_t b = block_for(t[1]);
      Shape five{t[0], Dim(t[1].value() / b), Dim(1), Dim(1), Dim(b)};
      FUSEBOX_ASSIGN_OR_RETURN(bv, add(Op::Reshape, p, Attrs{{"shape", five}}));
    } else if (channels) {
      if (type(v).rank() < 4) {
        FUSEBOX_ASSIGN_OR_RETURN(p, add(Op::Reshape, p, Attrs{{"shape", t}}));
      }
      FUSEBOX_ASSIGN_OR_RETURN(bv, add(Op::ToNchwc, p, Attrs{{"block", block_for(t[1])}}));
    } else {
      Shape five{t[0], Dim(1), t[2], t[3], Dim(1)};
      FUSEBOX_ASSIGN_OR_RETURN(bv, add(Op::Reshape, p, Attrs{{"shape", five}}));
    }
    blocked_[size_t(v)] = bv;
    return bv;
  }

  Expected<ValueId> add(Op op, ValueId input, Attrs attrs) {
    Node node{op, {input}, {}, std::move(attrs), nullptr, {}};
    const TensorType in = out_.type(input);
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> results, infer_result_types(node, std::span(&in, 1)));
    return out_.add_node(op, {input}, results, node.attrs)[0];
  }

  const Graph& g_;
  const BlockedLayoutOptions& options_;
  const int64_t b_;
  const bool nhwc_;  // b_ is kNhwcBlock: every value one block of its channels
  Graph out_;
  std::vector<ValueId> plain_, blocked_;  // old value -> new value in that form, or -1
  std::vector<const Array*> constant_;    // old value -> its constant's data
};

}  // namespace

Expected<Graph> assign_blocked_layout(const Graph& g, const BlockedLayoutOptions& options) {
  const int64_t block = options.block;
  if (block != 4 && block != 8 && block != 16 && block != kNhwcBlock) {
    return Status::invalid("assign_blocked_layout: block " + std::to_string(block) + " is not 4, 8, 16 or NHWC");
  }
  return Lowering(g, options).run();
}

Expected<Graph> assign_blocked_layout(const Graph& g, int64_t block) {
  BlockedLayoutOptions options;
  options.block = block;
  return assign_blocked_layout(g, options);
}

LayoutSummary summarize_layout(const Graph& g) {
  LayoutSummary s;
  for (const Node& n : g.nodes()) {
    if (n.op == Op::ToNchwc) {
      ++s.to_nchwc;
      if (s.block != kNhwcBlock) s.block = n.attr_i64("block");
    } else if (n.op == Op::ToNchw) {
      ++s.to_nchw;
    } else if (std::any_of(n.outputs.begin(), n.outputs.end(), [&](ValueId o) { return g.type(o).rank() == 5; }) &&
               n.op != Op::Constant && n.op != Op::Reshape) {
      ++s.blocked_nodes;
      if (has_nhwc_layout(n)) s.block = kNhwcBlock;
      if (has_nchwc_layout(n) && !s.block) s.block = g.type(n.outputs[0]).shape[4].value();
    }
  }
  return s;
}

std::string LayoutSummary::to_string() const {
  if (blocked_nodes == 0 && to_nchwc == 0 && to_nchw == 0) return "nchw";
  int reorders = to_nchwc + to_nchw;
  return (block == kNhwcBlock ? std::string("nhwc") : "nchw" + std::to_string(block) + "c") + ": " + std::to_string(blocked_nodes) + " nodes blocked, " +
         std::to_string(reorders) + " reorder" + (reorders == 1 ? "" : "s") + " (" + std::to_string(to_nchwc) +
         " to_nchwc, " + std::to_string(to_nchw) + " to_nchw)";
}

}  // namespace fusebox
