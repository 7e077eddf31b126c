// mark-elementwise-regions — groups connected element-wise and broadcast nodes into
// elementwise_region nodes that run as one pass over memory.
//
// Matches: nodes whose kind is at most Broadcast and whose result has the numpy broadcast shape
// of their operands (so batch_norm and expand, which change shapes their own way, stay out),
// connected producer -> consumer at the same result shape; rank-0 constants read only inside one
// group join it as body constants. Produces: one elementwise_region per group of two or more
// steps; a member read outside its group, or returned, becomes an extra result (computed once).
// Requires: a verified graph; every dtype of a step claimed by the target (else the step stays
// out, with a dtype-mismatch remark). Preserves: inputs, output positions, every value read outside a
// region (region results reuse the original value ids).
//
//   classify  is_region_step() (ir/outline.h): may this node be a body step?
//   decide    group_nodes(): union-find over producer->consumer edges, refusing merges that
//             would create a cycle through an outside node; split_at_limits(): cut groups over
//             the target's step/input caps into consecutive chunks in topological order
//   materialize  outline_elementwise_regions() (ir/outline.h)
#include <algorithm>
#include <set>

#include "fusion/claims.h"
#include "fusion/pass.h"
#include "ir/outline.h"
#include "ir/union_find.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr std::string_view kPass = "mark-elementwise-regions";

bool scalar_constant(const Node& n) {
  return n.op == Op::Constant && n.attr_array("value").rank() == 0;
}

struct Decider {
  const Graph& g;
  const UseInfo& uses;
  std::vector<bool> step;
  UnionFind sets;
  std::vector<std::string> names;

  // True when some path leaves group `from` through a node outside both groups and reaches a
  // member of group `to` (merging them would then create a cycle).
  bool path_around(size_t from, size_t to) {
    const auto& nodes = g.nodes();
    std::vector<size_t> stack;
    std::vector<bool> seen(nodes.size(), false);
    size_t last_to = 0;
    for (size_t i = 0; i < nodes.size(); ++i)
      if (step[i] && sets.find(i) == to) last_to = i;
    auto push_users = [&](size_t i, bool require_outside) {
      for (ValueId v : nodes[i].outputs) {
        for (int u : uses.users[static_cast<size_t>(v)]) {
          size_t user = static_cast<size_t>(u);
          if (seen[user] || user > last_to) continue;
          bool outside = !step[user] || (sets.find(user) != from && sets.find(user) != to);
          if (require_outside && !outside) continue;
          seen[user] = true;
          stack.push_back(user);
        }
      }
    };
    for (size_t i = 0; i < nodes.size(); ++i)
      if (step[i] && sets.find(i) == from) push_users(i, true);
    while (!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      if (step[i] && sets.find(i) == to) return true;
      push_users(i, false);
    }
    return false;
  }

  Verdict can_merge(size_t producer, size_t consumer) {
    const Node& p = g.nodes()[producer];
    const Node& c = g.nodes()[consumer];
    if (!(g.type(p.outputs[0]).shape == g.type(c.outputs[0]).shape)) {
      return Verdict::no("shapes differ: " + g.type(p.outputs[0]).to_string() + " feeds " +
                         g.type(c.outputs[0]).to_string());
    }
    size_t a = sets.find(producer), b = sets.find(consumer);
    if (path_around(a, b) || path_around(b, a)) {
      return Verdict::no("a node outside the region lies on a path between its members");
    }
    return Verdict::yes();
  }

  void group_nodes(PassContext& ctx) {
    const auto& nodes = g.nodes();
    for (size_t c = 0; c < nodes.size(); ++c) {
      if (!step[c]) continue;
      for (ValueId v : nodes[c].inputs) {
        int pi = uses.producer[static_cast<size_t>(v)];
        if (pi < 0 || !step[static_cast<size_t>(pi)]) continue;
        size_t p = static_cast<size_t>(pi);
        if (sets.find(p) == sets.find(c)) continue;
        Verdict ok = can_merge(p, c);
        if (ok) {
          sets.unite(p, c);
          continue;
        }
        if (ok.reason().rfind("shapes differ", 0) == 0) continue;  // expected at broadcasts
        ctx.remarks.miss("elementwise_region", describe_node(g, nodes[c], names),
                         MissReason::WouldCreateCycle,
                         "not fusing " + describe_node(g, nodes[p], names) + " into " +
                             describe_node(g, nodes[c], names) + ": " + ok.reason());
      }
    }
  }
};

// Distinct values read by `members` that they do not define, and how many non-constant steps.
std::pair<size_t, size_t> measure(const Graph& g, const UseInfo& uses, const std::vector<size_t>& members) {
  std::set<size_t> inside(members.begin(), members.end());
  std::set<ValueId> operands;
  size_t steps = 0;
  for (size_t i : members) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::Constant) ++steps;
    for (ValueId v : n.inputs) {
      int p = uses.producer[static_cast<size_t>(v)];
      if (p < 0 || !inside.count(static_cast<size_t>(p))) operands.insert(v);
    }
  }
  return {steps, operands.size()};
}

std::string region_name(const Graph& g, const std::vector<size_t>& members) {
  std::string name = "fused";
  for (size_t i : members) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::Constant) name += "_" + std::string(n.info().keyword);
  }
  return name;
}

}  // namespace

Status run_mark_elementwise_regions(Graph& g, PassContext& ctx) {
  UseInfo uses = compute_uses(g);
  const auto& nodes = g.nodes();
  Decider d{g, uses, std::vector<bool>(nodes.size(), false), UnionFind(nodes.size()), value_display_names(g)};
  for (size_t i = 0; i < nodes.size(); ++i) {
    d.step[i] = is_region_step(g, nodes[i]);
    if (!d.step[i] || nodes[i].op == Op::Constant) continue;
    // A region is a fused op: every dtype it reads or writes must be one the target claims.
    std::vector<ValueId> values = nodes[i].inputs;
    values.insert(values.end(), nodes[i].outputs.begin(), nodes[i].outputs.end());
    for (ValueId v : values) {
      DType dt = g.type(v).dtype;
      if (target_claims_dtype(ctx.target, dt)) continue;
      d.step[i] = false;
      ctx.remarks.miss("elementwise_region", describe_node(g, nodes[i], d.names), MissReason::DTypeMismatch,
                       "not fusing " + describe_node(g, nodes[i], d.names) + ": " + std::string(dtype_name(dt)) +
                           " is not claimed by target " + std::string(target_name(ctx.target)));
      break;
    }
  }
  d.group_nodes(ctx);

  // Members per group, in topological order; scalar constants join the one group that reads them.
  std::vector<std::vector<size_t>> members(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i)
    if (d.step[i]) members[d.sets.find(i)].push_back(i);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!scalar_constant(nodes[i]) || uses.is_output(nodes[i].outputs[0])) continue;
    const auto& users = uses.users[static_cast<size_t>(nodes[i].outputs[0])];
    if (users.empty() || !d.step[static_cast<size_t>(users[0])]) continue;
    size_t root = d.sets.find(static_cast<size_t>(users[0]));
    bool one_group = std::all_of(users.begin(), users.end(), [&](int u) {
      return d.step[static_cast<size_t>(u)] && d.sets.find(static_cast<size_t>(u)) == root;
    });
    if (one_group && members[root].size() >= 2) members[root].push_back(i);
  }

  FusionLimits limits = ctx.options.resolved_limits(ctx.target);
  std::vector<RegionGroup> groups;
  for (auto& group : members) {
    std::sort(group.begin(), group.end());
    size_t steps = measure(g, uses, group).first;
    if (steps < 2) continue;  // a group of one node is left alone
    // Split along topological order so every chunk respects the caps.
    std::vector<std::vector<size_t>> chunks(1);
    for (size_t i : group) {
      chunks.back().push_back(i);
      auto [s, in] = measure(g, uses, chunks.back());
      if ((s > limits.max_elementwise_steps || in > limits.max_elementwise_inputs) && chunks.back().size() > 1) {
        chunks.back().pop_back();
        chunks.push_back({i});
      }
    }
    if (chunks.size() > 1) {
      ctx.remarks.miss("elementwise_region", describe_node(g, nodes[group.front()], d.names),
                       MissReason::LimitReached,
                       "split " + std::to_string(steps) + " steps into " + std::to_string(chunks.size()) +
                           " regions at the limits " + limits_to_string(limits),
                       "raise fusion_limits (--fusion-options fusion_limits=SxI)");
      ctx.count(kPass, "splits", static_cast<int64_t>(chunks.size() - 1));
    }
    for (auto& chunk : chunks) {
      if (measure(g, uses, chunk).first < 2) continue;
      groups.push_back(RegionGroup{chunk, region_name(g, chunk)});
    }
  }
  // A constant whose chunk did not become a region stays a plain node: drop it from groups
  // where it lost every reader.
  for (RegionGroup& rg : groups) {
    std::set<size_t> inside(rg.nodes.begin(), rg.nodes.end());
    std::erase_if(rg.nodes, [&](size_t i) {
      if (nodes[i].op != Op::Constant) return false;
      for (int u : uses.users[static_cast<size_t>(nodes[i].outputs[0])])
        if (!inside.count(static_cast<size_t>(u))) return true;
      return false;
    });
  }
  ctx.count(kPass, "regions", static_cast<int64_t>(groups.size()));
  return outline_elementwise_regions(g, groups);
}

}  // namespace fusebox
