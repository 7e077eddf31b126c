#include "ir/fused_ops.h"

#include "ir/check.h"
#include "ir/epilogue.h"

namespace fusebox {

bool is_fused_contraction(Op op) {
  return op == Op::FusedMatmulBiasAct || op == Op::FusedMatmulResidual || op == Op::FusedConvBiasAct;
}

FusedOperands fused_operands(const Node& n) {
  FUSEBOX_CHECK(is_fused_contraction(n.op) && n.inputs.size() >= 2) << "fused_operands of " << n.info().keyword;
  FusedOperands r{n.inputs[0], n.inputs[1]};
  switch (n.op) {
    case Op::FusedMatmulBiasAct:
      if (n.inputs.size() == 3) r.bias = n.inputs[2];
      break;
    case Op::FusedMatmulResidual:
      r.residual = n.inputs[2];
      if (n.inputs.size() == 4) r.bias = n.inputs[3];
      break;
    case Op::FusedConvBiasAct: {
      bool residual = n.attr_bool("has_residual");
      if (residual) r.residual = n.inputs.back();
      if (n.inputs.size() == (residual ? 4u : 3u)) r.bias = n.inputs[2];
      break;
    }
    default: break;
  }
  return r;
}

std::vector<std::string> fused_contraction_steps(const Node& n) {
  const FusedOperands ops = fused_operands(n);
  const Epilogue ep = epilogue_of_fused(n);
  std::vector<std::string> steps{n.op == Op::FusedConvBiasAct ? "conv2d" : "matmul"};
  if (ops.bias != kNoValue) steps.push_back("bias");
  if (ops.residual != kNoValue) steps.push_back("residual");
  if (ep.act != EpilogueAct::None) steps.emplace_back(epilogue_act_name(ep.act));
  return steps;
}

std::vector<Node> unfused_nodes(Graph& g, const Node& n) {
  const FusedOperands ops = fused_operands(n);
  const TensorType type = g.type(n.outputs[0]);
  const Epilogue ep = epilogue_of_fused(n);
  std::vector<Node> out;
  ValueId last = kNoValue;
  // Appends `op` over `inputs`; its result is a new value, re-pointed to n's result at the end.
  auto step = [&](Op op, std::vector<ValueId> inputs, Attrs attrs) {
    ValueId v = g.add_value(type);
    out.push_back(Node{op, std::move(inputs), {v}, std::move(attrs), nullptr, n.loc});
    last = v;
  };
  if (n.op == Op::FusedConvBiasAct) {
    Attrs conv;
    for (const char* name : {"stride", "pad", "dilation", "groups"}) conv.set(name, *n.attr_or_default(name));
    std::vector<ValueId> in{ops.input, ops.weight};
    if (ops.bias != kNoValue) in.push_back(ops.bias);
    step(Op::Conv2d, in, conv);
  } else {
    step(Op::MatMul, {ops.input, ops.weight}, {});
    if (ops.bias != kNoValue) step(Op::Add, {last, ops.bias}, {});
  }
  if (ops.residual != kNoValue) step(Op::Add, {last, ops.residual}, {});
  if (ep.act != EpilogueAct::None) {
    Attrs attrs;
    Op op = activation_op(ep, &attrs);
    step(op, {last}, attrs);
  }
  out.back().outputs[0] = n.outputs[0];
  return out;
}

size_t unfuse_contractions(Graph& g) {
  std::vector<Node> nodes;
  size_t replaced = 0;
  for (const Node& n : std::vector<Node>(g.nodes())) {
    if (!is_fused_contraction(n.op)) {
      nodes.push_back(n);
      continue;
    }
    for (Node& p : unfused_nodes(g, n)) nodes.push_back(std::move(p));
    ++replaced;
  }
  g.mutable_nodes() = std::move(nodes);
  return replaced;
}

}  // namespace fusebox
