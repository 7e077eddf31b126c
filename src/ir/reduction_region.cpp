// reduction_region: body rules, outlining of node groups and the exact unfused form.
#include "ir/reduction_region.h"

#include <algorithm>
#include <map>

#include "ir/check.h"
#include "ir/outline.h"
#include "ir/use_info.h"

namespace fusebox {

bool is_row_reduction_op(Op op) {
  return op == Op::ReduceSum || op == Op::ReduceMean || op == Op::ReduceMax || op == Op::ReduceMin ||
         op == Op::ReduceProd;
}

std::optional<int64_t> trailing_reduced_axes(const Node& reduce, int rank) {
  std::vector<int> axes;
  for (int64_t a : reduce.attr_i64s("axes")) {
    std::optional<int> axis = normalize_axis(a, rank);
    if (!axis) return std::nullopt;
    axes.push_back(*axis);
  }
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  if (axes.empty()) return std::nullopt;
  for (size_t i = 0; i < axes.size(); ++i) {
    if (axes[i] != rank - static_cast<int>(axes.size()) + static_cast<int>(i)) return std::nullopt;
  }
  return static_cast<int64_t>(axes.size());
}

Shape per_row_shape(const Shape& s, int64_t row_axes) {
  Shape out = s;
  for (size_t i = out.size() - static_cast<size_t>(std::min<int64_t>(row_axes, static_cast<int64_t>(out.size())));
       i < out.size(); ++i) {
    out[i] = Dim(1);
  }
  return out;
}

const Shape& body_row_shape(const Graph& body) {
  for (const Node& n : body.nodes()) {
    if (is_row_reduction_op(n.op)) return body.type(n.inputs[0]).shape;
  }
  FUSEBOX_CHECK(false) << "reduction_region body without a reduction";
  return body.type(body.inputs()[0]).shape;
}

Status check_reduction_body(const Graph& body, int64_t row_axes) {
  std::vector<std::string> names = value_display_names(body);
  const Shape* row = nullptr;
  for (const Node& n : body.nodes()) {
    if (is_row_reduction_op(n.op)) {
      row = &body.type(n.inputs[0]).shape;
      break;
    }
  }
  if (!row) return Status::invalid("body holds no reduction (reduce_sum, _mean, _max, _min or _prod)");
  auto shape_str = [](const Shape& s) { return TensorType{DType::F32, s}.to_string().substr(3); };
  if (row_axes < 1 || row_axes > static_cast<int64_t>(row->size())) {
    return Status::invalid("row_axes = " + std::to_string(row_axes) + " does not fit the row shape " + shape_str(*row));
  }
  const Shape per_row = per_row_shape(*row, row_axes);
  for (ValueId p : body.inputs()) {
    std::optional<Shape> b = broadcast_shapes(body.type(p).shape, *row, nullptr);
    if (!b || !(*b == *row)) {
      return Status::invalid("parameter %" + names[static_cast<size_t>(p)] + " of shape " +
                             shape_str(body.type(p).shape) + " does not broadcast into the row shape " + shape_str(*row));
    }
  }
  std::vector<bool> returned_only(body.num_values(), false);  // results of reductions without keepdims
  for (const Node& n : body.nodes()) {
    auto fail = [&](const std::string& why) {
      return Status::invalid("body: " + describe_node(body, n, names) + ": " + why);
    };
    if (n.body) return fail("regions do not nest");
    for (ValueId v : n.inputs) {
      if (returned_only[static_cast<size_t>(v)]) {
        return fail("reads a reduction result without keepdims; only keepdims results are read inside the region");
      }
    }
    if (n.op == Op::Constant) {
      if (n.attr_array("value").rank() != 0) return fail("a constant in a reduction_region body is rank 0");
      continue;
    }
    const Shape& result = body.type(n.outputs[0]).shape;
    if (is_row_reduction_op(n.op)) {
      if (!(body.type(n.inputs[0]).shape == *row)) {
        return fail("reduces a value of shape " + shape_str(body.type(n.inputs[0]).shape) +
                    ", not the row shape " + shape_str(*row));
      }
      std::optional<int64_t> k = trailing_reduced_axes(n, static_cast<int>(row->size()));
      if (!k || *k != row_axes) {
        return fail("reduces other axes than the last " + std::to_string(row_axes) + " (the row)");
      }
      if (!n.attr_bool("keepdims")) returned_only[static_cast<size_t>(n.outputs[0])] = true;
      continue;
    }
    if (!is_region_step(body, n)) {
      return fail("not an element-wise step; a reduction_region body holds row reductions, element-wise and "
                  "broadcast steps and rank-0 constants");
    }
    if (!(result == *row) && !(result == per_row)) {
      return fail("result shape " + shape_str(result) + " is neither the row shape " + shape_str(*row) +
                  " nor the per-row shape " + shape_str(per_row));
    }
  }
  return Status::ok();
}

namespace {

Node build_region(const Graph& g, const UseInfo& uses, const std::vector<size_t>& members,
                  const std::vector<int>& group_of, int group, const ReductionGroup& rg) {
  auto in_group = [&](int node) { return node >= 0 && group_of[static_cast<size_t>(node)] == group; };
  auto body = std::make_shared<Graph>(rg.name);
  std::map<ValueId, ValueId> to_body;
  std::vector<ValueId> operands;
  for (size_t idx : members) {
    for (ValueId v : g.nodes()[idx].inputs) {
      if (in_group(uses.producer[static_cast<size_t>(v)]) || to_body.count(v)) continue;
      to_body[v] = body->add_input("in" + std::to_string(operands.size()), g.type(v));
      operands.push_back(v);
    }
  }
  std::vector<ValueId> results;
  for (size_t idx : members) {
    const Node& n = g.nodes()[idx];
    Node b{n.op, {}, {}, n.attrs, nullptr, n.loc};
    for (ValueId v : n.inputs) b.inputs.push_back(to_body.at(v));
    for (ValueId v : n.outputs) {
      ValueId bv = body->add_value(g.type(v));
      b.outputs.push_back(bv);
      to_body[v] = bv;
      bool escapes = uses.is_output(v);
      for (int user : uses.users[static_cast<size_t>(v)]) escapes = escapes || !in_group(user);
      if (escapes) results.push_back(v);
    }
    body->add_node(std::move(b));
  }
  for (ValueId v : results) body->add_output(to_body.at(v));
  return Node{Op::ReductionRegion, operands, results, {{"name", rg.name}, {"row_axes", rg.row_axes}}, body, {}};
}

}  // namespace

Status outline_reduction_regions(Graph& g, const std::vector<ReductionGroup>& groups) {
  if (groups.empty()) return Status::ok();
  UseInfo uses = compute_uses(g);
  std::vector<std::vector<size_t>> sets;
  for (const ReductionGroup& r : groups) sets.push_back(r.nodes);
  auto build = [&](size_t k, const std::vector<size_t>& members, const std::vector<int>& group_of) -> Expected<Node> {
    Node region = build_region(g, uses, members, group_of, static_cast<int>(k), groups[k]);
    if (region.outputs.empty()) return Status::internal("outline: reduction group " + groups[k].name + " has no results");
    Status body_ok = check_reduction_body(*region.body, groups[k].row_axes);
    if (!body_ok.is_ok()) return Status::internal("outline: reduction group " + groups[k].name + ": " + body_ok.message());
    return region;
  };
  return outline_groups(g, sets, build);
}

Expected<int64_t> inline_reduction_regions(Graph& g, const std::function<bool(const Node&)>& which) {
  int64_t count = 0;
  std::vector<Node> out;
  std::vector<Node> nodes = std::move(g.mutable_nodes());
  g.mutable_nodes().clear();
  for (Node& n : nodes) {
    if (n.op != Op::ReductionRegion || (which && !which(n))) {
      out.push_back(std::move(n));
      continue;
    }
    FUSEBOX_CHECK(n.body != nullptr) << "reduction_region without body";
    ++count;
    const Graph& body = *n.body;
    std::map<ValueId, ValueId> to_graph;
    for (size_t i = 0; i < body.inputs().size(); ++i) to_graph[body.inputs()[i]] = n.inputs[i];
    // A yielded body value takes the region's result id; the first yield of a value claims it.
    std::map<ValueId, ValueId> yield_target;
    for (size_t r = 0; r < body.outputs().size(); ++r) yield_target.emplace(body.outputs()[r], n.outputs[r]);
    for (const Node& b : body.nodes()) {
      Node m{b.op, {}, {}, b.attrs, nullptr, b.loc};
      for (ValueId v : b.inputs) m.inputs.push_back(to_graph.at(v));
      for (ValueId v : b.outputs) {
        auto target = yield_target.find(v);
        ValueId gv = target != yield_target.end() ? target->second : g.add_value(body.type(v));
        m.outputs.push_back(gv);
        to_graph[v] = gv;
      }
      out.push_back(std::move(m));
    }
    // A parameter returned as it is, or a value returned twice: copied by identity.
    for (size_t r = 0; r < body.outputs().size(); ++r) {
      ValueId source = to_graph.at(body.outputs()[r]);
      if (source != n.outputs[r]) out.push_back(Node{Op::Identity, {source}, {n.outputs[r]}, {}, nullptr, n.loc});
    }
  }
  g.mutable_nodes() = std::move(out);
  FUSEBOX_RETURN_IF_ERROR(sort_topologically(g));
  return count;
}

}  // namespace fusebox
