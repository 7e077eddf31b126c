#include "ir/transform_region.h"

#include <algorithm>
#include <initializer_list>
#include <map>

#include "ir/check.h"
#include "ir/outline.h"

namespace fusebox {

bool cast_preserves_values(DType from, DType to) {
  if (from == to) return true;
  auto is = [](DType t, std::initializer_list<DType> set) {
    return std::find(set.begin(), set.end(), t) != set.end();
  };
  switch (from) {
    case DType::U8:
    case DType::I8:
      return is(to, {DType::I32, DType::I64, DType::F16, DType::BF16, DType::F32, DType::F64});
    case DType::I32: return is(to, {DType::I64, DType::F64});
    case DType::F16:
    case DType::BF16: return is(to, {DType::F32, DType::F64});
    case DType::F32: return to == DType::F64;
    default: return false;
  }
}

bool is_transform_step(const Graph& g, const Node& n, std::string* why, bool allow_dynamic) {
  auto no = [why](std::string reason) {
    if (why) *why = std::move(reason);
    return false;
  };
  if (n.body || n.inputs.size() != 1 || n.outputs.size() != 1) return no("not a one-operand step");
  switch (n.op) {
    case Op::Slice:
    case Op::Transpose:
    case Op::Flip:
    case Op::Pad:
    case Op::Reshape:
      break;
    case Op::Resize:
      if (n.attr_str("mode") == "cubic") return no("cubic resize (four taps per axis: the reference kernel runs it)");
      if (n.attr_str("mode") == "linear" && g.type(n.inputs[0]).dtype == DType::Bool) {
        return no("linear resize of a bool tensor");
      }
      break;
    case Op::Cast:
      if (!cast_preserves_values(g.type(n.inputs[0]).dtype, n.attr_dtype("to"))) {
        return no("the cast does not keep every value");
      }
      break;
    default:
      return no(std::string(n.info().keyword) + " is not an index-only step");
  }
  if (!allow_dynamic && (!is_static(g.type(n.inputs[0]).shape) || !is_static(g.type(n.outputs[0]).shape))) {
    return no("dynamic shape");
  }
  return true;
}

Node transform_step_region(const Node& step, const TensorType& in, const TensorType& out) {
  Graph g(std::string(step.info().keyword));
  const ValueId x = g.add_input("x", in);
  const ValueId y = g.add_value(out);
  g.add_node(Node{step.op, {x}, {y}, step.attrs, nullptr, step.loc});
  g.add_output(y);
  return transform_region_of(g, TransformChain{{0}, std::string(step.info().keyword)});
}

Node transform_region_of(const Graph& g, const TransformChain& chain) {
  FUSEBOX_CHECK(!chain.nodes.empty()) << "outline_transform_chains: empty chain";
  const Node& first = g.nodes()[chain.nodes.front()];
  auto body = std::make_shared<Graph>(g.name());
  ValueId prev = body->add_input("x", g.type(first.inputs[0]));
  for (size_t k = 0; k < chain.nodes.size(); ++k) {
    const Node& n = g.nodes()[chain.nodes[k]];
    FUSEBOX_CHECK(n.inputs.size() == 1 && n.outputs.size() == 1) << "transform chain step arity";
    FUSEBOX_CHECK(k == 0 || n.inputs[0] == g.nodes()[chain.nodes[k - 1]].outputs[0]) << "broken transform chain";
    ValueId out = body->add_value(g.type(n.outputs[0]));
    body->add_node(Node{n.op, {prev}, {out}, n.attrs, nullptr, n.loc});
    prev = out;
  }
  body->add_output(prev);
  const Node& last = g.nodes()[chain.nodes.back()];
  return Node{Op::TransformRegion, {first.inputs[0]}, {last.outputs[0]}, {{"name", chain.name}}, body, first.loc};
}

Status outline_transform_chains(Graph& g, const std::vector<TransformChain>& chains) {
  constexpr int kKeep = -1, kDrop = -2;
  std::vector<int> role(g.nodes().size(), kKeep);  // >= 0: the chain whose region goes here
  std::vector<Node> regions;
  for (size_t c = 0; c < chains.size(); ++c) {
    regions.push_back(transform_region_of(g, chains[c]));
    for (size_t idx : chains[c].nodes) {
      FUSEBOX_CHECK(role[idx] == kKeep) << "outline_transform_chains: chains overlap";
      role[idx] = kDrop;
    }
    role[chains[c].nodes.back()] = static_cast<int>(c);
  }
  std::vector<Node> out;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (role[i] == kKeep) out.push_back(std::move(g.mutable_nodes()[i]));
    if (role[i] >= 0) out.push_back(std::move(regions[static_cast<size_t>(role[i])]));
  }
  g.mutable_nodes() = std::move(out);
  return sort_topologically(g);
}

Expected<int64_t> inline_transform_regions(Graph& g) {
  int64_t count = 0;
  std::vector<Node> out;
  std::vector<Node> nodes = std::move(g.mutable_nodes());
  g.mutable_nodes().clear();
  for (Node& n : nodes) {
    if (n.op != Op::TransformRegion) {
      out.push_back(std::move(n));
      continue;
    }
    FUSEBOX_CHECK(n.body != nullptr) << "transform_region without body";
    ++count;
    const Graph& body = *n.body;
    std::map<ValueId, ValueId> to_graph{{body.inputs()[0], n.inputs[0]}};
    ValueId yielded = body.outputs()[0];
    for (const Node& b : body.nodes()) {
      Node m{b.op, {}, {}, b.attrs, nullptr, b.loc};
      for (ValueId v : b.inputs) m.inputs.push_back(to_graph.at(v));
      for (ValueId v : b.outputs) {
        ValueId gv = v == yielded ? n.outputs[0] : g.add_value(body.type(v));
        m.outputs.push_back(gv);
        to_graph[v] = gv;
      }
      out.push_back(std::move(m));
    }
    if (to_graph.at(yielded) != n.outputs[0]) {  // a body returning its parameter
      out.push_back(Node{Op::Identity, {to_graph.at(yielded)}, {n.outputs[0]}, {}, nullptr, n.loc});
    }
  }
  g.mutable_nodes() = std::move(out);
  FUSEBOX_RETURN_IF_ERROR(sort_topologically(g));
  return count;
}

}  // namespace fusebox
