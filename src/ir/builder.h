// GraphBuilder: the C++ way to write a graph. Each call infers the result type; the first
// mistake (bad shapes, unknown attribute, a value from nowhere) is remembered, later calls become
// no-ops returning kNoValue, and build() returns that first error naming the op and operands.
#pragma once

#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

class GraphBuilder {
 public:
  explicit GraphBuilder(std::string name);

  ValueId input(std::string name, DType dtype, Shape shape);
  ValueId constant(Array value);
  ValueId scalar(DType dtype, double value);  // rank-0 constant
  // Any op of ops.def: operands, attributes; returns every result.
  std::vector<ValueId> op_results(Op op, std::vector<ValueId> inputs, Attrs attrs = {});
  // Any op with one result.
  ValueId op(Op op, std::vector<ValueId> inputs, Attrs attrs = {});
  void output(ValueId v);
  // Names a value (printed as %name).
  void name(ValueId v, std::string name);

  // Conveniences for the ops programs use most.
  ValueId add(ValueId a, ValueId b) { return op(Op::Add, {a, b}); }
  ValueId sub(ValueId a, ValueId b) { return op(Op::Sub, {a, b}); }
  ValueId mul(ValueId a, ValueId b) { return op(Op::Mul, {a, b}); }
  ValueId div(ValueId a, ValueId b) { return op(Op::Div, {a, b}); }
  ValueId matmul(ValueId a, ValueId b) { return op(Op::MatMul, {a, b}); }
  ValueId relu(ValueId x) { return op(Op::Relu, {x}); }
  ValueId tanh(ValueId x) { return op(Op::Tanh, {x}); }
  ValueId sigmoid(ValueId x) { return op(Op::Sigmoid, {x}); }
  ValueId gelu(ValueId x, bool tanh_approx = false);
  ValueId cast(ValueId x, DType to) { return op(Op::Cast, {x}, {{"to", to}}); }
  ValueId reshape(ValueId x, Shape shape) { return op(Op::Reshape, {x}, {{"shape", std::move(shape)}}); }
  ValueId transpose(ValueId x, std::vector<int64_t> perm) {
    return op(Op::Transpose, {x}, {{"perm", std::move(perm)}});
  }
  ValueId softmax(ValueId x, int64_t axis = -1) { return op(Op::Softmax, {x}, {{"axis", axis}}); }

  const TensorType& type(ValueId v) const { return graph_.type(v); }
  const Status& status() const { return status_; }
  // The verified graph, or the first error.
  Expected<Graph> build();

 private:
  bool usable(ValueId v) const { return graph_.valid(v); }

  Graph graph_;
  Status status_;
};

}  // namespace fusebox
