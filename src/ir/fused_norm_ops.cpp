#include "ir/fused_norm_ops.h"

#include "ir/check.h"

namespace fusebox {

bool is_fused_norm(Op op) { return op == Op::FusedResidualLayerNorm || op == Op::FusedResidualRmsNorm; }

Op fused_norm_base(Op fused) {
  FUSEBOX_CHECK(is_fused_norm(fused)) << "fused_norm_base of a non-norm op";
  return fused == Op::FusedResidualLayerNorm ? Op::LayerNorm : Op::RmsNorm;
}

NormRoles fused_norm_roles(const Node& n) {
  NormRoles r;
  int next = 2;
  if (n.attr_bool("has_bias")) r.bias = next++;
  const int count = static_cast<int>(n.inputs.size());
  if (next < count) r.scale = next++;
  if (next < count && n.op == Op::FusedResidualLayerNorm) r.shift = next++;
  return r;
}

std::vector<std::string> fused_norm_steps(const Node& n) {
  const NormRoles roles = fused_norm_roles(n);
  std::vector<std::string> steps{"residual"};
  if (roles.bias >= 0) steps.emplace_back("bias");
  steps.emplace_back(n.op == Op::FusedResidualLayerNorm ? "layer_norm" : "rms_norm");
  return steps;
}

std::vector<Node> unfused_norm_nodes(Graph& g, const Node& n) {
  FUSEBOX_CHECK(is_fused_norm(n.op)) << "unfused_norm_nodes of " << n.info().keyword;
  FUSEBOX_CHECK(n.outputs.size() == 1 || n.outputs.size() == 2) << "fused norm results";
  const NormRoles roles = fused_norm_roles(n);
  auto operand = [&](int position) { return n.inputs[static_cast<size_t>(position)]; };
  const TensorType sum_type = g.type(operand(roles.x));
  const ValueId sum_out = n.outputs.size() == 2 ? n.outputs[1] : kNoValue;
  std::vector<Node> out;
  auto add = [&](ValueId a, ValueId b, bool last) {
    ValueId v = last && sum_out != kNoValue ? sum_out : g.add_value(sum_type);
    out.push_back(Node{Op::Add, {a, b}, {v}, {}, nullptr, n.loc});
    return v;
  };
  ValueId s = add(operand(roles.x), operand(roles.residual), roles.bias < 0);
  if (roles.bias >= 0) s = add(s, operand(roles.bias), true);
  std::vector<ValueId> norm_in{s};
  if (roles.scale >= 0) norm_in.push_back(operand(roles.scale));
  if (roles.shift >= 0) norm_in.push_back(operand(roles.shift));
  Attrs attrs;
  attrs.set("axis", *n.attr_or_default("axis"));
  attrs.set("eps", *n.attr_or_default("eps"));
  out.push_back(Node{fused_norm_base(n.op), std::move(norm_in), {n.outputs[0]}, std::move(attrs), nullptr, n.loc});
  return out;
}

size_t unfuse_norms(Graph& g) {
  std::vector<Node> nodes;
  size_t replaced = 0;
  for (const Node& n : std::vector<Node>(g.nodes())) {
    if (!is_fused_norm(n.op)) {
      nodes.push_back(n);
      continue;
    }
    for (Node& p : unfused_norm_nodes(g, n)) nodes.push_back(std::move(p));
    ++replaced;
  }
  g.mutable_nodes() = std::move(nodes);
  return replaced;
}

}  // namespace fusebox
