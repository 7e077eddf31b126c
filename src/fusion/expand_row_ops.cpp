// The named row ops as primitives (expand_row_ops.h).
#include "fusion/expand_row_ops.h"

#include <limits>

#include "ir/array.h"
#include "ir/reduction_region.h"
#include "ir/use_info.h"

namespace fusebox {

bool is_expandable_row_op(const Graph& g, const Node& n) {
  if (n.op != Op::Softmax && n.op != Op::LogSoftmax && n.op != Op::LayerNorm && n.op != Op::RmsNorm) return false;
  if (n.outputs.size() != 1) return false;
  for (ValueId v : n.inputs)
    if (g.type(v).dtype != DType::F32) return false;
  const TensorType& x = g.type(n.inputs[0]);
  if (x.rank() < 1 || g.type(n.outputs[0]).dtype != DType::F32) return false;
  std::optional<int> axis = normalize_axis(n.attr_i64("axis"), x.rank());
  return axis && *axis == x.rank() - 1;
}

namespace {

class Writer {
 public:
  Writer(Graph& g, const Node& n) : g_(g), n_(n), row_(g.type(n.inputs[0]).shape) {}

  ValueId step(Op op, std::vector<ValueId> in, bool per_row = false, Attrs attrs = {}) {
    ValueId v = g_.add_value(TensorType{DType::F32, per_row ? per_row_shape(row_, 1) : row_});
    nodes_.push_back(Node{op, std::move(in), {v}, std::move(attrs), nullptr, n_.loc});
    return v;
  }
  ValueId reduce(Op op, ValueId x) {
    return step(op, {x}, true, {{"axes", std::vector<int64_t>{-1}}, {"keepdims", true}});
  }
  ValueId constant(double value) {
    Array a(DType::F32, {});
    a.data<float>()[0] = static_cast<float>(value);
    ValueId v = g_.add_value(TensorType{DType::F32, {}});
    nodes_.push_back(Node{Op::Constant, {}, {v}, {{"value", std::make_shared<const Array>(std::move(a))}}, nullptr, n_.loc});
    return v;
  }
  // The last node defines the op's own result value.
  std::vector<Node> finish() {
    nodes_.back().outputs[0] = n_.outputs[0];
    return std::move(nodes_);
  }

 private:
  Graph& g_;
  const Node& n_;
  Shape row_;
  std::vector<Node> nodes_;
};

// The node defining v, or null for an input.
const Node* producer(const Graph& g, const UseInfo& uses, ValueId v) {
  const int i = uses.producer[static_cast<size_t>(v)];
  return i < 0 ? nullptr : &g.nodes()[static_cast<size_t>(i)];
}

// A reduce_max of v over its last axis with kept dims.
bool is_row_max_of(const Graph& g, const UseInfo& uses, ValueId m, ValueId v) {
  const Node* r = producer(g, uses, m);
  if (!r || r->op != Op::ReduceMax || r->inputs[0] != v || !r->attr_bool("keepdims")) return false;
  const std::vector<int64_t>& axes = r->attr_i64s("axes");
  const int64_t rank = g.type(v).rank();
  return axes.size() == 1 && (axes[0] == -1 || axes[0] == rank - 1);
}

// One f32 value, positive and finite.
bool is_positive_scalar(const Graph& g, const UseInfo& uses, ValueId c) {
  const Node* k = producer(g, uses, c);
  if (!k || k->op != Op::Constant || g.type(c).dtype != DType::F32) return false;
  const Array& a = k->attr_array("value");
  if (a.numel() != 1) return false;
  const float v = a.data<float>()[0];
  return v > 0.0f && v <= std::numeric_limits<float>::max();
}

// Whether x = (a - max(a)) * c over the row, c > 0: then max(x) is 0 in every row without a NaN
// (the row's largest element gives (m - m) * c = +0, every other (a - m) * c <= 0), and a row
// with a NaN or an infinity is NaN either way, so x - max(x) is x for exp.
bool shifted_and_scaled(const Graph& g, ValueId x) {
  const UseInfo uses = compute_uses(g);
  const Node* mul = producer(g, uses, x);
  if (!mul || mul->op != Op::Mul) return false;
  for (size_t k = 0; k < 2; ++k) {
    const Node* sub = producer(g, uses, mul->inputs[k]);
    if (!sub || sub->op != Op::Sub || !(g.type(sub->outputs[0]).shape == g.type(x).shape)) continue;
    if (is_positive_scalar(g, uses, mul->inputs[1 - k]) &&
        is_row_max_of(g, uses, sub->inputs[1], sub->inputs[0]))
      return true;
  }
  return false;
}

}  // namespace

std::vector<Node> expand_row_op(Graph& g, const Node& n) {
  Writer w(g, n);
  ValueId x = n.inputs[0];
  switch (n.op) {
    case Op::Softmax: {
      // softmax((a - max(a)) * c), c > 0 (a softmax with a temperature after recognition): the
      // max of x is 0, so its pass is left out (exp(x - 0) = exp(x), -0 included).
      ValueId d = shifted_and_scaled(g, x) ? x : w.step(Op::Sub, {x, w.reduce(Op::ReduceMax, x)});
      ValueId e = w.step(Op::Exp, {d});
      w.step(Op::Div, {e, w.reduce(Op::ReduceSum, e)});
      break;
    }
    case Op::LogSoftmax: {
      ValueId d = w.step(Op::Sub, {x, w.reduce(Op::ReduceMax, x)});
      ValueId s = w.reduce(Op::ReduceSum, w.step(Op::Exp, {d}));
      w.step(Op::Sub, {d, w.step(Op::Log, {s}, true)});
      break;
    }
    case Op::RmsNorm:
    case Op::LayerNorm: {
      const bool ln = n.op == Op::LayerNorm;
      ValueId c = ln ? w.step(Op::Sub, {x, w.reduce(Op::ReduceMean, x)}) : x;
      ValueId var = w.reduce(Op::ReduceMean, w.step(Op::Mul, {c, c}));
      ValueId r = w.step(Op::Rsqrt, {w.step(Op::Add, {var, w.constant(n.attr_f64("eps"))}, true)}, true);
      ValueId y = w.step(Op::Mul, {c, r});
      if (n.inputs.size() > 1) y = w.step(Op::Mul, {y, n.inputs[1]});
      if (n.inputs.size() > 2) w.step(Op::Add, {y, n.inputs[2]});
      break;
    }
    default: break;
  }
  return w.finish();
}

}  // namespace fusebox
