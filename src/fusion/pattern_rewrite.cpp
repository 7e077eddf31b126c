#include "fusion/pattern_rewrite.h"

#include <algorithm>
#include <map>

#include "ir/check.h"
#include "ir/shape_inference.h"

namespace fusebox {

ChainStep next_in_chain(const Graph& g, const UseInfo& uses, ValueId v, const std::vector<std::string>& names) {
  const std::string name = "%" + names[static_cast<size_t>(v)];
  if (uses.is_output(v)) return {-1, name + " is also a graph output"};
  const auto& users = uses.users[static_cast<size_t>(v)];
  if (users.size() != 1) return {-1, name + " has " + std::to_string(users.size()) + " users"};
  return {users[0], {}};
}

ValueId other_operand(const Node& n, ValueId v) {
  if (n.inputs.size() != 2) return kNoValue;
  if (n.inputs[0] == v && n.inputs[1] != v) return n.inputs[1];
  if (n.inputs[1] == v && n.inputs[0] != v) return n.inputs[0];
  return kNoValue;
}

bool is_per_channel(const TensorType& t, const TensorType& result, int axis) {
  if (t.dtype != result.dtype || t.rank() > result.rank() || t.rank() == 0) return false;
  const int offset = result.rank() - t.rank();
  bool has_channel = false;
  for (int d = 0; d < t.rank(); ++d) {
    const Dim& dim = t.shape[static_cast<size_t>(d)];
    if (d + offset == axis) {
      has_channel = dim == result.shape[static_cast<size_t>(axis)] && dim.is_static();
      if (!has_channel) return false;
    } else if (!(dim == Dim(1))) {
      return false;
    }
  }
  return has_channel;
}

bool is_broadcast_scalar(const TensorType& t, const TensorType& result) {
  if (t.dtype != result.dtype || t.rank() > result.rank()) return false;
  for (const Dim& d : t.shape)
    if (!(d == Dim(1))) return false;
  return true;
}

bool is_full_shape(const TensorType& t, const TensorType& result) {
  return t.dtype == result.dtype && t.shape == result.shape;
}

bool is_add(const Node& n) { return n.op == Op::Add; }
bool is_activation(const Node& n) { return epilogue_of_activation(n).has_value(); }

const Node* EpilogueMatcher::next(size_t head, ValueId v, const std::function<bool(const Node&)>& is_candidate) const {
  ChainStep step = next_in_chain(g, uses, v, names);
  if (step.user >= 0) {
    const Node& user = g.nodes()[static_cast<size_t>(step.user)];
    return is_candidate(user) ? &user : nullptr;
  }
  for (int u : uses.users[static_cast<size_t>(v)]) {
    const Node& user = g.nodes()[static_cast<size_t>(u)];
    if (!is_candidate(user)) continue;
    miss(head, user, uses.is_output(v) ? MissReason::EscapesAsOutput : MissReason::MultiConsumer, step.why_not);
    break;
  }
  return nullptr;
}

bool EpilogueMatcher::dtype_claimed(size_t head) const {
  const Node& n = g.nodes()[head];
  DType d = g.type(n.outputs[0]).dtype;
  if (ctx.table().claims_dtype(d)) return true;
  ctx.remarks.miss(pattern, describe_node(g, n, names), MissReason::DTypeMismatch,
                   "not fusing " + describe_node(g, n, names) + ": " + std::string(dtype_name(d)) +
                       " is not claimed by target " + std::string(target_name(ctx.target)));
  return false;
}

void EpilogueMatcher::absorb_activation(size_t head, ValueId* v, Rewrite* rw, Epilogue* ep) const {
  const Node* act = next(head, *v, is_activation);
  if (!act) return;
  Epilogue e = *epilogue_of_activation(*act);
  if (!ctx.table().claims_activation(kind, e.act)) {
    miss(head, *act, MissReason::UnsupportedActivation,
         std::string(epilogue_act_name(e.act)) + " is not claimed by target " + std::string(target_name(ctx.target)));
    return;
  }
  *ep = e;
  rw->absorbed.push_back(static_cast<size_t>(act - g.nodes().data()));
  *v = act->outputs[0];
}

void EpilogueMatcher::miss(size_t head, const Node& user, MissReason reason, const std::string& detail) const {
  const Node& n = g.nodes()[head];
  ctx.remarks.miss(pattern, describe_node(g, user, names), reason,
                   "not fusing " + describe_node(g, user, names) + " into " + describe_node(g, n, names) + ": " + detail);
}

const Array* Prelude::constant_value(ValueId v) const {
  for (const Node& n : out_) {
    if (n.outputs[0] == v) return n.op == Op::Constant ? &n.attr_array("value") : nullptr;
  }
  if (static_cast<size_t>(v) >= uses_.producer.size()) return nullptr;
  int p = uses_.producer[static_cast<size_t>(v)];
  if (p < 0) return nullptr;
  const Node& n = g_.nodes()[static_cast<size_t>(p)];
  return n.op == Op::Constant ? &n.attr_array("value") : nullptr;
}

Expected<ValueId> Prelude::emit(Op op, std::vector<ValueId> inputs, Attrs attrs) {
  Node n{op, std::move(inputs), {}, std::move(attrs), nullptr, {}};
  std::vector<TensorType> types;
  for (ValueId v : n.inputs) types.push_back(g_.type(v));
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> result, infer_result_types(n, types));
  ValueId out = g_.add_value(result[0]);
  n.outputs = {out};
  std::vector<Array> constants;
  for (ValueId v : n.inputs) {
    const Array* c = constant_value(v);
    if (!c) break;
    constants.push_back(*c);
  }
  if (ctx_.evaluate && constants.size() == n.inputs.size()) {
    Expected<std::vector<Array>> folded = ctx_.evaluate(n, constants);
    if (folded) {
      out_.push_back(Node{Op::Constant, {}, {out}, {{"value", std::make_shared<const Array>((*folded)[0])}}, nullptr, {}});
      return out;
    }
  }
  out_.push_back(std::move(n));
  return out;
}

ValueId Prelude::scalar(DType dtype, double value) {
  auto a = std::make_shared<Array>(dtype, std::vector<int64_t>{});
  a->set_f64(0, value);
  ValueId out = g_.add_value(TensorType{dtype, {}});
  out_.push_back(Node{Op::Constant, {}, {out}, {{"value", std::shared_ptr<const Array>(a)}}, nullptr, {}});
  return out;
}

Expected<ValueId> Prelude::channel_vector(ValueId v, int64_t channels) {
  std::optional<int64_t> count = num_elements(g_.type(v).shape);
  if (count && *count == 1 && channels != 1) {
    FUSEBOX_ASSIGN_OR_RETURN(ValueId one, reshape(v, {1}));
    return emit(Op::Expand, {one}, {{"shape", make_shape({channels})}});
  }
  return reshape(v, {channels});
}

Expected<ValueId> Prelude::reshape(ValueId v, std::vector<int64_t> dims) {
  if (g_.type(v).shape == make_shape(dims)) return v;
  return emit(Op::Reshape, {v}, {{"shape", make_shape(dims)}});
}

size_t apply_rewrites(Graph& g, std::vector<Rewrite> rewrites) {
  std::map<size_t, size_t> anchor_of;  // anchor node -> rewrite
  std::vector<bool> removed(g.nodes().size(), false);
  for (size_t r = 0; r < rewrites.size(); ++r) {
    const auto& absorbed = rewrites[r].absorbed;
    FUSEBOX_CHECK(!absorbed.empty()) << "rewrite without absorbed nodes";
    // Two matches may want one node (a residual add of two conv branches): the first keeps it.
    if (std::any_of(absorbed.begin(), absorbed.end(), [&](size_t i) { return removed[i]; })) continue;
    size_t anchor = *std::max_element(absorbed.begin(), absorbed.end());
    for (size_t i : absorbed) removed[i] = true;
    anchor_of[anchor] = r;
  }
  std::vector<Node> nodes;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    auto it = anchor_of.find(i);
    if (it != anchor_of.end()) {
      Rewrite& rw = rewrites[it->second];
      for (Node& n : rw.prelude) nodes.push_back(std::move(n));
      nodes.push_back(std::move(rw.fused));
    } else if (!removed[i]) {
      nodes.push_back(std::move(g.mutable_nodes()[i]));
    }
  }
  g.mutable_nodes() = std::move(nodes);
  return anchor_of.size();
}

}  // namespace fusebox
