#include "ir/builder.h"

#include "ir/shape_inference.h"
#include "ir/verifier.h"

namespace fusebox {

GraphBuilder::GraphBuilder(std::string name) : graph_(std::move(name)) {}

ValueId GraphBuilder::input(std::string name, DType dtype, Shape shape) {
  if (!status_.is_ok()) return kNoValue;
  if (name.empty()) {
    status_ = Status::invalid("@" + graph_.name() + ": input needs a name");
    return kNoValue;
  }
  if (graph_.find_input(name) >= 0) {
    status_ = Status::invalid("@" + graph_.name() + ": input %" + name + " declared twice");
    return kNoValue;
  }
  for (const Dim& d : shape) {
    if (d.is_dynamic()) {
      status_ = Status::invalid("@" + graph_.name() + ": input %" + name +
                                " has an unnamed dynamic dim; use a symbol such as N");
      return kNoValue;
    }
  }
  return graph_.add_input(std::move(name), TensorType{dtype, std::move(shape)});
}

ValueId GraphBuilder::constant(Array value) {
  return op(Op::Constant, {}, {{"value", std::make_shared<const Array>(std::move(value))}});
}

ValueId GraphBuilder::scalar(DType dtype, double value) {
  Array a(dtype, {});
  a.set_f64(0, value);
  return constant(std::move(a));
}

ValueId GraphBuilder::gelu(ValueId x, bool tanh_approx) {
  return op(Op::Gelu, {x}, {{"approximate", std::string(tanh_approx ? "tanh" : "none")}});
}

std::vector<ValueId> GraphBuilder::op_results(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  if (!status_.is_ok()) return {};
  std::string where = "@" + graph_.name() + ": " + std::string(op_keyword(op));
  std::vector<TensorType> in_types;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!usable(inputs[i])) {
      status_ = Status::invalid(where + ": operand " + std::to_string(i) + " is not a value of this graph");
      return {};
    }
    in_types.push_back(graph_.type(inputs[i]));
  }
  Node probe{op, inputs, {}, std::move(attrs), nullptr, {}};
  if (Status s = verify_attrs(probe); !s.is_ok()) {
    status_ = s.with_context("@" + graph_.name());
    return {};
  }
  Expected<std::vector<TensorType>> types = infer_result_types(probe, in_types);
  if (!types) {
    std::string operands;
    for (const TensorType& t : in_types) operands += (operands.empty() ? "" : ", ") + t.to_string();
    status_ = types.status().with_context("@" + graph_.name() + " (operands " + operands + ")");
    return {};
  }
  return graph_.add_node(op, std::move(inputs), std::move(*types), std::move(probe.attrs));
}

ValueId GraphBuilder::op(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  std::vector<ValueId> r = op_results(op, std::move(inputs), std::move(attrs));
  if (r.empty()) return kNoValue;
  if (r.size() != 1 && status_.is_ok()) {
    status_ = Status::invalid("@" + graph_.name() + ": " + std::string(op_keyword(op)) +
                              " has several results; use op_results");
    return kNoValue;
  }
  return r[0];
}

void GraphBuilder::output(ValueId v) {
  if (!status_.is_ok()) return;
  if (!usable(v)) {
    status_ = Status::invalid("@" + graph_.name() + ": output is not a value of this graph");
    return;
  }
  graph_.add_output(v);
}

void GraphBuilder::name(ValueId v, std::string name) {
  if (status_.is_ok() && usable(v)) graph_.value(v).name = std::move(name);
}

Expected<Graph> GraphBuilder::build() {
  if (!status_.is_ok()) return status_;
  FUSEBOX_RETURN_IF_ERROR(verify(graph_));
  return graph_;
}

}  // namespace fusebox
