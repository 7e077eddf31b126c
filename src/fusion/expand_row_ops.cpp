// The named row ops as primitives (expand_row_ops.h).
#include "fusion/expand_row_ops.h"

#include "ir/array.h"
#include "ir/reduction_region.h"

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

}  // namespace

std::vector<Node> expand_row_op(Graph& g, const Node& n) {
  Writer w(g, n);
  ValueId x = n.inputs[0];
  switch (n.op) {
    case Op::Softmax: {
      ValueId d = w.step(Op::Sub, {x, w.reduce(Op::ReduceMax, x)});
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
