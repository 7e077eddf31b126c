#include "ir/fused_ops.h"

#include "ir/check.h"
#include "ir/epilogue.h"
#include "ir/fused_swiglu_op.h"

namespace fusebox {

bool is_fused_contraction(Op op) {
  return op == Op::FusedMatmulBiasAct || op == Op::FusedMatmulResidual || op == Op::FusedConvBiasAct;
}

OperandRoles contraction_roles(const Node& n) {
  OperandRoles r;
  const int count = static_cast<int>(n.inputs.size());
  switch (n.op) {
    case Op::Conv2d:
    case Op::ConvTranspose2d:
    case Op::FusedMatmulBiasAct:
      if (count == 3) r.bias = 2;
      break;
    case Op::FusedMatmulResidual:
      r.residual = 2;
      if (count == 4) r.bias = 3;
      break;
    case Op::FusedConvBiasAct: {
      const bool residual = n.attr_bool("has_residual");
      if (residual) r.residual = count - 1;
      if (count == (residual ? 4 : 3)) r.bias = 2;
      break;
    }
    default: break;
  }
  return r;
}

std::vector<std::string> fused_contraction_steps(const Node& n) {
  const OperandRoles roles = contraction_roles(n);
  const Epilogue ep = epilogue_of_fused(n);
  std::vector<std::string> steps{n.op == Op::FusedConvBiasAct ? "conv2d" : "matmul"};
  if (roles.bias >= 0) steps.push_back("bias");
  if (roles.residual >= 0) steps.push_back("residual");
  if (ep.act != EpilogueAct::None) steps.emplace_back(epilogue_act_name(ep.act));
  return steps;
}

std::vector<Node> unfused_nodes(Graph& g, const Node& n) {
  FUSEBOX_CHECK(is_fused_contraction(n.op)) << "unfused_nodes of " << n.info().keyword;
  const OperandRoles roles = contraction_roles(n);
  auto operand = [&](int position) { return position < 0 ? kNoValue : n.inputs[static_cast<size_t>(position)]; };
  const ValueId input = operand(roles.input), weight = operand(roles.weight);
  const ValueId bias = operand(roles.bias), residual = operand(roles.residual);
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
    std::vector<ValueId> in{input, weight};
    if (bias != kNoValue) in.push_back(bias);
    step(Op::Conv2d, in, conv);
  } else {
    step(Op::MatMul, {input, weight}, {});
    if (bias != kNoValue) step(Op::Add, {last, bias}, {});
  }
  if (residual != kNoValue) step(Op::Add, {last, residual}, {});
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
    if (!is_fused_contraction(n.op) && n.op != Op::FusedSwiglu) {
      nodes.push_back(n);
      continue;
    }
    std::vector<Node> primitives = n.op == Op::FusedSwiglu ? unfused_swiglu_nodes(g, n) : unfused_nodes(g, n);
    for (Node& p : primitives) nodes.push_back(std::move(p));
    ++replaced;
  }
  g.mutable_nodes() = std::move(nodes);
  return replaced;
}

}  // namespace fusebox
