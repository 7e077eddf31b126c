#include "ir/outline.h"

#include <algorithm>
#include <map>
#include <queue>

#include "ir/check.h"
#include "ir/shape_inference.h"
#include "ir/use_info.h"
#include "ir/verifier.h"

namespace fusebox {

namespace {

TensorType scalar_of(DType d) { return TensorType{d, {}}; }

// Builds the region node for one group (members sorted by index).
Expected<Node> build_region(const Graph& g, const UseInfo& uses, const std::vector<size_t>& members,
                            const std::vector<int>& group_of, int group, const std::string& name) {
  auto in_group = [&](int node) { return node >= 0 && group_of[static_cast<size_t>(node)] == group; };
  auto body = std::make_shared<Graph>(name);
  std::map<ValueId, ValueId> to_body;  // graph value -> body value
  std::vector<ValueId> operands;
  for (size_t idx : members) {
    for (ValueId v : g.nodes()[idx].inputs) {
      if (in_group(uses.producer[static_cast<size_t>(v)]) || to_body.count(v)) continue;
      to_body[v] = body->add_input("in" + std::to_string(operands.size()), scalar_of(g.type(v).dtype));
      operands.push_back(v);
    }
  }
  std::vector<ValueId> results;
  for (size_t idx : members) {
    const Node& n = g.nodes()[idx];
    Node b{n.op, {}, {}, n.attrs, nullptr, n.loc};
    for (ValueId v : n.inputs) b.inputs.push_back(to_body.at(v));
    for (ValueId v : n.outputs) {
      ValueId bv = body->add_value(scalar_of(g.type(v).dtype));
      b.outputs.push_back(bv);
      to_body[v] = bv;
      bool escapes = uses.is_output(v);
      for (int user : uses.users[static_cast<size_t>(v)]) escapes = escapes || !in_group(user);
      if (escapes) results.push_back(v);
    }
    if (n.op == Op::Constant && n.attr_array("value").rank() != 0) {
      return Status::internal("outline: a non-scalar constant cannot live in a region body");
    }
    body->add_node(std::move(b));
  }
  for (ValueId v : results) body->add_output(to_body.at(v));
  Node region{Op::ElementwiseRegion, operands, results, {{"name", name}}, body, {}};
  return region;
}

}  // namespace

bool is_region_step(const Node& n, std::span<const TensorType> operands, const TensorType& result) {
  if (n.body || n.op == Op::Constant || n.outputs.size() > 1) return false;
  if (op_kind(n.op) > OpKind::Broadcast) return false;
  Shape shape;
  for (const TensorType& t : operands) {
    std::optional<Shape> b = broadcast_shapes(shape, t.shape, nullptr);
    if (!b) return false;
    shape = *b;
  }
  if (!(shape == result.shape)) return false;
  // The op must also be meaningful on scalars: batch_norm (per-channel vectors) and expand
  // (a target shape) pass the broadcast test by coincidence of sizes but not this one.
  std::vector<TensorType> scalars;
  for (const TensorType& t : operands) scalars.push_back(TensorType{t.dtype, {}});
  Expected<std::vector<TensorType>> r = infer_result_types(n, scalars);
  return r.has_value() && r->size() == 1 && (*r)[0].rank() == 0;
}

bool is_region_step(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1) return false;
  std::vector<TensorType> in;
  for (ValueId v : n.inputs) in.push_back(g.type(v));
  return is_region_step(n, in, g.type(n.outputs[0]));
}

Status sort_topologically(Graph& g) {
  const auto& nodes = g.nodes();
  UseInfo uses = compute_uses(g);
  std::vector<int> pending(nodes.size(), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<int> producers;
    for (ValueId v : nodes[i].inputs) {
      int p = uses.producer[static_cast<size_t>(v)];
      if (p >= 0 && std::find(producers.begin(), producers.end(), p) == producers.end()) producers.push_back(p);
    }
    pending[i] = static_cast<int>(producers.size());
  }
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push(i);
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  while (!ready.empty()) {
    size_t i = ready.top();
    ready.pop();
    sorted.push_back(nodes[i]);
    std::vector<int> done;
    for (ValueId v : nodes[i].outputs) {
      for (int user : uses.users[static_cast<size_t>(v)]) {
        if (std::find(done.begin(), done.end(), user) != done.end()) continue;
        done.push_back(user);
        if (--pending[static_cast<size_t>(user)] == 0) ready.push(static_cast<size_t>(user));
      }
    }
  }
  if (sorted.size() != nodes.size()) return Status::internal("graph has a cycle");
  g.mutable_nodes() = std::move(sorted);
  return Status::ok();
}

Status outline_groups(Graph& g, const std::vector<std::vector<size_t>>& groups, const GroupNodeBuilder& build) {
  if (groups.empty()) return Status::ok();
  std::vector<int> group_of(g.nodes().size(), -1);
  for (size_t k = 0; k < groups.size(); ++k) {
    for (size_t idx : groups[k]) {
      FUSEBOX_CHECK(idx < group_of.size() && group_of[idx] < 0) << "outline: groups overlap or index out of range";
      group_of[idx] = static_cast<int>(k);
    }
  }
  std::vector<Node> built;
  std::vector<size_t> last_member(groups.size(), 0);
  for (size_t k = 0; k < groups.size(); ++k) {
    std::vector<size_t> members = groups[k];
    FUSEBOX_CHECK(!members.empty()) << "outline: empty group";
    std::sort(members.begin(), members.end());
    last_member[k] = members.back();
    FUSEBOX_ASSIGN_OR_RETURN(Node node, build(k, members, group_of));
    built.push_back(std::move(node));
  }
  std::vector<Node> out;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    int k = group_of[i];
    if (k < 0) {
      out.push_back(nodes[i]);
    } else if (last_member[static_cast<size_t>(k)] == i) {
      out.push_back(std::move(built[static_cast<size_t>(k)]));
    }
  }
  g.mutable_nodes() = std::move(out);
  return sort_topologically(g);
}

Status outline_elementwise_regions(Graph& g, const std::vector<RegionGroup>& groups) {
  if (groups.empty()) return Status::ok();
  UseInfo uses = compute_uses(g);
  std::vector<std::vector<size_t>> sets;
  for (const RegionGroup& r : groups) sets.push_back(r.nodes);
  auto build = [&](size_t k, const std::vector<size_t>& members, const std::vector<int>& group_of) -> Expected<Node> {
    FUSEBOX_ASSIGN_OR_RETURN(Node region, build_region(g, uses, members, group_of, static_cast<int>(k), groups[k].name));
    if (region.outputs.empty()) return Status::internal("outline: group " + groups[k].name + " has no results");
    std::vector<TensorType> operand_types;
    for (ValueId v : region.inputs) operand_types.push_back(g.type(v));
    FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> types, infer_result_types(region, operand_types));
    for (size_t r = 0; r < types.size(); ++r) {
      if (!type_refines(g.type(region.outputs[r]), types[r])) {
        return Status::internal("outline: region " + groups[k].name + " result " + std::to_string(r) + " is " +
                                g.type(region.outputs[r]).to_string() + " but the region computes " +
                                types[r].to_string());
      }
    }
    return region;
  };
  return outline_groups(g, sets, build);
}

Status inline_elementwise_regions(Graph& g) {
  std::vector<Node> out;
  std::vector<Node> nodes = std::move(g.mutable_nodes());
  g.mutable_nodes().clear();
  for (Node& n : nodes) {
    if (n.op != Op::ElementwiseRegion) {
      out.push_back(std::move(n));
      continue;
    }
    FUSEBOX_CHECK(n.body != nullptr) << "region without body";
    const Graph& body = *n.body;
    std::map<ValueId, ValueId> to_graph;  // body value -> graph value
    for (size_t i = 0; i < body.inputs().size(); ++i) to_graph[body.inputs()[i]] = n.inputs[i];
    // Yielded body values take the region's result ids; the first yield of a value claims it.
    std::map<ValueId, ValueId> yield_target;
    for (size_t r = 0; r < body.outputs().size(); ++r) yield_target.emplace(body.outputs()[r], n.outputs[r]);
    for (const Node& b : body.nodes()) {
      Node m{b.op, {}, {}, b.attrs, nullptr, b.loc};
      std::vector<TensorType> in_types;
      for (ValueId v : b.inputs) {
        m.inputs.push_back(to_graph.at(v));
        in_types.push_back(g.type(to_graph.at(v)));
      }
      FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> types, infer_result_types(m, in_types));
      for (size_t r = 0; r < b.outputs.size(); ++r) {
        auto target = yield_target.find(b.outputs[r]);
        bool natural = target != yield_target.end() && g.type(target->second).shape == types[r].shape;
        ValueId v = natural ? target->second : g.add_value(types[r]);
        m.outputs.push_back(v);
        to_graph[b.outputs[r]] = v;
      }
      out.push_back(std::move(m));
    }
    // Results not produced at their own shape (a yielded operand, a value yielded twice, a value
    // of a smaller broadcast shape) are materialised with expand, which also copies.
    for (size_t r = 0; r < body.outputs().size(); ++r) {
      ValueId result = n.outputs[r];
      ValueId source = to_graph.at(body.outputs()[r]);
      if (source == result) continue;
      const TensorType& t = g.type(result);
      Shape target = t.shape;
      for (Dim& d : target)
        if (d.is_dynamic()) d = Dim(1);  // unknown dims come from the operand (numpy: 1 stretches)
      out.push_back(Node{Op::Expand, {source}, {result}, {{"shape", target}}, nullptr, {}});
    }
  }
  g.mutable_nodes() = std::move(out);
  return sort_topologically(g);
}

}  // namespace fusebox
