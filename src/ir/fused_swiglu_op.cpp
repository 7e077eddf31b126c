#include "ir/fused_swiglu_op.h"

#include <limits>

#include "ir/check.h"
#include "ir/shape_inference.h"

namespace fusebox {

std::optional<int> slice_half(const Node& s, const TensorType& in) {
  if (s.op != Op::Slice || in.rank() < 1) return std::nullopt;
  const Dim& last = in.shape.back();
  if (!last.is_static() || last.value() < 2 || last.value() % 2) return std::nullopt;
  const int64_t n = last.value() / 2;
  const auto& starts = s.attr_i64s("starts");
  const auto& ends = s.attr_i64s("ends");
  const bool has_axes = s.has_attr("axes"), has_steps = s.has_attr("steps");
  std::optional<int> half;
  for (size_t i = 0; i < starts.size(); ++i) {
    if (has_steps && s.attr_i64s("steps")[i] != 1) return std::nullopt;
    std::optional<int> axis =
        normalize_axis(has_axes ? s.attr_i64s("axes")[i] : static_cast<int64_t>(i), in.rank());
    if (!axis) return std::nullopt;
    const Dim& d = in.shape[static_cast<size_t>(*axis)];
    if (*axis + 1 < in.rank()) {
      // Another axis: only its whole range.
      const bool whole = starts[i] == 0 && (ends[i] == std::numeric_limits<int64_t>::max() ||
                                            (d.is_static() && ends[i] >= d.value()));
      if (!whole) return std::nullopt;
      continue;
    }
    const SliceRange r = normalize_slice(last.value(), starts[i], ends[i], 1);
    if (r.count != n || (r.start != 0 && r.start != n)) return std::nullopt;
    half = r.start == 0 ? 0 : 1;
  }
  return half;
}

std::vector<Node> unfused_swiglu_nodes(Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::FusedSwiglu) << "unfused_swiglu_nodes of " << n.info().keyword;
  std::vector<Node> out;
  // Appends `op` over `inputs` with its inferred type and returns its (new) result.
  auto step = [&](Op op, std::vector<ValueId> inputs, Attrs attrs) {
    Node node{op, std::move(inputs), {}, std::move(attrs), nullptr, n.loc};
    std::vector<TensorType> in;
    for (ValueId v : node.inputs) in.push_back(g.type(v));
    Expected<std::vector<TensorType>> types = infer_result_types(node, in);
    FUSEBOX_CHECK(types.has_value()) << "unfusing fused_swiglu: " << types.status().to_string();
    node.outputs = {g.add_value((*types)[0])};
    out.push_back(std::move(node));
    return out.back().outputs[0];
  };
  ValueId h = step(Op::MatMul, {n.inputs[0], n.inputs[1]}, {});
  if (n.inputs.size() == 3) h = step(Op::Add, {h, n.inputs[2]}, {});
  const TensorType ht = g.type(h);
  const int64_t half = ht.shape.back().value() / 2;
  const int64_t axis = ht.rank() - 1;
  auto slice = [&](int which) {
    return step(Op::Slice, {h},
                {{"starts", std::vector<int64_t>{which * half}},
                 {"ends", std::vector<int64_t>{(which + 1) * half}},
                 {"axes", std::vector<int64_t>{axis}}});
  };
  const bool gate_first = n.attr_bool("gate_first");
  const ValueId gate = slice(gate_first ? 0 : 1);
  const ValueId up = slice(gate_first ? 1 : 0);
  const ValueId s = step(Op::Silu, {gate}, {});
  step(Op::Mul, {s, up}, {});
  out.back().outputs[0] = n.outputs[0];
  return out;
}

}  // namespace fusebox
