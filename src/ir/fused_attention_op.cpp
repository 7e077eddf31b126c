#include "ir/fused_attention_op.h"

#include <cmath>
#include <limits>

#include "ir/check.h"
#include "ir/shape_inference.h"

namespace fusebox {

namespace {

Status fail(const std::string& msg) { return Status::invalid("fused_attention: " + msg); }

// Two dims that may be the same size: equal, or either not known before run time.
bool may_equal(const Dim& a, const Dim& b) { return a == b || !a.is_static() || !b.is_static(); }

// The [B, H, T, D] view of a q/k/v operand: [B,T,H*D] (merged) or [B,H,T,D].
struct HeadView {
  Dim batch, heads, seq, dim;
};

Expected<HeadView> head_view(const TensorType& t, const char* what, int64_t heads, int64_t head_dim) {
  if (t.rank() == 3) {
    const Dim& hd = t.shape[2];
    if (hd.is_static() && hd.value() != heads * head_dim) {
      return fail(std::string(what) + " " + t.to_string() + ": last dim must be heads * head_dim = " +
                  std::to_string(heads * head_dim));
    }
    return HeadView{t.shape[0], Dim(heads), t.shape[1], Dim(head_dim)};
  }
  if (t.rank() == 4) {
    if (!may_equal(t.shape[1], Dim(heads)) || !may_equal(t.shape[3], Dim(head_dim))) {
      return fail(std::string(what) + " " + t.to_string() + " is not [B," + std::to_string(heads) + ",T," +
                  std::to_string(head_dim) + "]");
    }
    return HeadView{t.shape[0], Dim(heads), t.shape[2], Dim(head_dim)};
  }
  return fail(std::string(what) + " " + t.to_string() + " must be [B,T,H*D] or [B,H,T,D]");
}

}  // namespace

Expected<std::vector<TensorType>> infer_fused_attention(const Node& n, std::span<const TensorType> in) {
  const int64_t heads = n.attr_i64("heads"), head_dim = n.attr_i64("head_dim");
  if (heads < 1 || head_dim < 1) return fail("heads and head_dim must be at least 1");
  const DType dtype = in[0].dtype;
  if (!is_float(dtype)) return fail("operands must be a float type, got " + in[0].to_string());
  for (const TensorType& t : in) {
    if (t.dtype != dtype) return fail("operand dtypes differ: " + in[0].to_string() + " vs " + t.to_string());
  }
  FUSEBOX_ASSIGN_OR_RETURN(HeadView q, head_view(in[0], "q", heads, head_dim));
  FUSEBOX_ASSIGN_OR_RETURN(HeadView k, head_view(in[1], "k", heads, head_dim));
  FUSEBOX_ASSIGN_OR_RETURN(HeadView v, head_view(in[2], "v", heads, head_dim));
  if (!may_equal(q.batch, k.batch) || !may_equal(q.batch, v.batch)) {
    return fail("batch dims differ: q " + in[0].to_string() + ", k " + in[1].to_string() + ", v " + in[2].to_string());
  }
  if (!may_equal(k.seq, v.seq)) return fail("k " + in[1].to_string() + " and v " + in[2].to_string() + " differ in length");
  if (in.size() == 4) {
    const TensorType& m = in[3];
    const Shape scores{q.batch, Dim(heads), q.seq, k.seq};
    bool fits = m.rank() <= 4;
    for (int d = 0; fits && d < m.rank(); ++d) {
      const Dim& md = m.shape[static_cast<size_t>(d)];
      fits = md == Dim(1) || may_equal(md, scores[static_cast<size_t>(4 - m.rank() + d)]);
    }
    if (!fits) return fail("mask " + m.to_string() + " does not broadcast to the scores [B,H,Tq,Tk] = " +
                           TensorType{dtype, scores}.to_string());
  }
  Shape out = n.attr_bool("merge_heads") ? Shape{q.batch, q.seq, Dim(heads * head_dim)}
                                         : Shape{q.batch, Dim(heads), q.seq, Dim(head_dim)};
  return std::vector<TensorType>{TensorType{dtype, out}};
}

std::vector<std::string> fused_attention_steps(const Node& n) {
  std::vector<std::string> steps{"matmul"};
  if (n.attr_f64("scale") != 1.0) steps.emplace_back("scale");
  if (n.inputs.size() == 4) steps.emplace_back("mask");
  if (n.attr_bool("causal")) steps.emplace_back("causal");
  steps.emplace_back("softmax");
  steps.emplace_back("matmul");
  return steps;
}

Expected<std::vector<Node>> unfused_attention_nodes(Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::FusedAttention) << "unfused_attention_nodes of " << n.info().keyword;
  const int64_t heads = n.attr_i64("heads"), head_dim = n.attr_i64("head_dim");
  std::vector<Node> out;
  // Appends `op` over `inputs` with its inferred result type; returns the result.
  auto step = [&](Op op, std::vector<ValueId> inputs, Attrs attrs = {}) -> Expected<ValueId> {
    Node node{op, std::move(inputs), {}, std::move(attrs), nullptr, n.loc};
    std::vector<TensorType> types;
    for (ValueId v : node.inputs) types.push_back(g.type(v));
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> result, infer_result_types(node, types));
    ValueId v = g.add_value(result[0]);
    node.outputs = {v};
    out.push_back(std::move(node));
    return v;
  };
  // [B,T,H*D] -> [B,H,T,D] (perm [0,2,1,3]) or, for k, straight to [B,H,D,T] ([0,2,3,1]).
  auto split = [&](ValueId x, bool keys) -> Expected<ValueId> {
    const TensorType& t = g.type(x);
    if (t.rank() == 4) {
      if (!keys) return x;
      return step(Op::Transpose, {x}, {{"perm", std::vector<int64_t>{0, 1, 3, 2}}});
    }
    Shape split_shape{t.shape[0], t.shape[1], Dim(heads), Dim(head_dim)};
    FUSEBOX_ASSIGN_OR_RETURN(ValueId r, step(Op::Reshape, {x}, {{"shape", split_shape}}));
    std::vector<int64_t> perm = keys ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 2, 1, 3};
    return step(Op::Transpose, {r}, {{"perm", perm}});
  };
  FUSEBOX_ASSIGN_OR_RETURN(ValueId q, split(n.inputs[0], false));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId kt, split(n.inputs[1], true));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId v, split(n.inputs[2], false));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId s, step(Op::MatMul, {q, kt}));
  const DType dtype = g.type(s).dtype;
  const double scale = n.attr_f64("scale");
  if (scale != 1.0) {
    auto c = std::make_shared<Array>(dtype, std::vector<int64_t>{});
    c->set_f64(0, scale);
    FUSEBOX_ASSIGN_OR_RETURN(ValueId cv, step(Op::Constant, {}, {{"value", std::shared_ptr<const Array>(c)}}));
    FUSEBOX_ASSIGN_OR_RETURN(s, step(Op::Mul, {s, cv}));
  }
  if (n.inputs.size() == 4) {
    FUSEBOX_ASSIGN_OR_RETURN(s, step(Op::Add, {s, n.inputs[3]}));
  }
  if (n.attr_bool("causal")) {
    const Shape st = g.type(s).shape;
    const Dim tq = st[2], tk = st[3];
    if (!tq.is_static() || !tk.is_static()) {
      return Status::invalid("fused_attention: causal attention has a primitive form only for static sequence lengths, got " +
                             g.type(s).to_string());
    }
    auto c = std::make_shared<Array>(dtype, std::vector<int64_t>{tq.value(), tk.value()});
    const int64_t offset = tk.value() - tq.value();
    for (int64_t i = 0; i < tq.value(); ++i) {
      for (int64_t j = 0; j < tk.value(); ++j) {
        c->set_f64(i * tk.value() + j, j <= i + offset ? 0.0 : -std::numeric_limits<double>::infinity());
      }
    }
    FUSEBOX_ASSIGN_OR_RETURN(ValueId cv, step(Op::Constant, {}, {{"value", std::shared_ptr<const Array>(c)}}));
    FUSEBOX_ASSIGN_OR_RETURN(s, step(Op::Add, {s, cv}));
  }
  FUSEBOX_ASSIGN_OR_RETURN(ValueId p, step(Op::Softmax, {s}, {{"axis", int64_t(-1)}}));
  FUSEBOX_ASSIGN_OR_RETURN(ValueId o, step(Op::MatMul, {p, v}));
  if (n.attr_bool("merge_heads")) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId t, step(Op::Transpose, {o}, {{"perm", std::vector<int64_t>{0, 2, 1, 3}}}));
    const Shape qs = g.type(n.inputs[0]).shape;
    const Dim batch = qs[0];
    const Dim seq = qs.size() == 3 ? qs[1] : qs[2];
    FUSEBOX_ASSIGN_OR_RETURN(o, step(Op::Reshape, {t}, {{"shape", Shape{batch, seq, Dim(heads * head_dim)}}}));
  }
  (void)o;
  out.back().outputs[0] = n.outputs[0];
  return out;
}

Expected<size_t> unfuse_attention(Graph& g, const std::function<bool(const Graph&, const Node&)>& which) {
  std::vector<Node> nodes;
  size_t replaced = 0;
  for (const Node& n : std::vector<Node>(g.nodes())) {
    if (n.op != Op::FusedAttention || (which && !which(g, n))) {
      nodes.push_back(n);
      continue;
    }
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<Node> steps, unfused_attention_nodes(g, n));
    for (Node& p : steps) nodes.push_back(std::move(p));
    ++replaced;
  }
  g.mutable_nodes() = std::move(nodes);
  return replaced;
}

}  // namespace fusebox
