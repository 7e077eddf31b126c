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

// Per group (keyed by its union-find root): the highest member index, and the nodes outside the
// group that read a member (kept lazily: entries that have since joined the group are dropped
// when met). A path from a group to another starts at one of those readers and, since nodes are
// in topological order, never passes a node above the target's highest member; so a merge along
// a chain looks at one reader and stops, instead of scanning the graph.
struct GroupInfo {
  size_t last = 0;
  std::set<size_t> readers;
};

struct Decider {
  const Graph& g;
  const UseInfo& uses;
  std::vector<bool> step;
  UnionFind sets;
  std::vector<std::string> names;
  std::vector<GroupInfo> info;
  std::vector<bool> seen;        // DFS marks, reset through `touched` after each search
  std::vector<size_t> touched;

  void init_groups() {
    const auto& nodes = g.nodes();
    info.resize(nodes.size());
    seen.assign(nodes.size(), false);
    for (size_t i = 0; i < nodes.size(); ++i) {
      info[i].last = i;
      for (ValueId v : nodes[i].outputs)
        for (int u : uses.users[static_cast<size_t>(v)]) info[i].readers.insert(static_cast<size_t>(u));
    }
  }

  bool in_group(size_t node, size_t root) { return step[node] && sets.find(node) == root; }

  void unite(size_t a, size_t b) {
    a = sets.find(a);
    b = sets.find(b);
    size_t root = sets.unite(a, b);
    size_t other = root == a ? b : a;
    GroupInfo& keep = info[root];
    GroupInfo& drop = info[other];
    keep.last = std::max(keep.last, drop.last);
    if (keep.readers.size() < drop.readers.size()) std::swap(keep.readers, drop.readers);
    keep.readers.insert(drop.readers.begin(), drop.readers.end());
    drop.readers.clear();
  }

  // True when some path leaves group `from` through a node outside both groups and reaches a
  // member of group `to` (merging them would then create a cycle).
  bool path_around(size_t from, size_t to) {
    const auto& nodes = g.nodes();
    size_t last_to = info[to].last;
    std::vector<size_t> stack;
    auto visit = [&](size_t user) {
      if (seen[user] || user > last_to) return;
      seen[user] = true;
      touched.push_back(user);
      stack.push_back(user);
    };
    std::set<size_t>& readers = info[from].readers;
    for (auto it = readers.begin(); it != readers.end() && *it <= last_to;) {
      size_t user = *it;
      if (in_group(user, from)) {
        it = readers.erase(it);  // joined the group since it was recorded
        continue;
      }
      ++it;
      if (!in_group(user, to)) visit(user);
    }
    bool found = false;
    while (!stack.empty() && !found) {
      size_t i = stack.back();
      stack.pop_back();
      if (in_group(i, to)) found = true;
      for (ValueId v : nodes[i].outputs)
        for (int u : uses.users[static_cast<size_t>(v)]) visit(static_cast<size_t>(u));
    }
    for (size_t i : touched) seen[i] = false;
    touched.clear();
    return found;
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
          unite(p, c);
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

// Cuts `group` (sorted) into consecutive chunks that each respect the step and input caps. A
// member's producers come before it, so whether an operand is produced inside the current chunk
// is known when the member is added: the counts grow by the new member alone, and the split is
// linear. `chunk_of` (one entry per node) and `next_id` number chunks across every group.
std::vector<std::vector<size_t>> split_at_limits(const Graph& g, const UseInfo& uses,
                                                 const std::vector<size_t>& group, const FusionLimits& limits,
                                                 std::vector<size_t>& chunk_of, size_t& next_id) {
  std::vector<std::vector<size_t>> chunks;
  std::set<ValueId> operands;
  size_t steps = 0;
  // The counts of the current chunk with node i added, or of a fresh chunk holding only i.
  auto add = [&](size_t i) {
    const Node& n = g.nodes()[i];
    if (n.op != Op::Constant) ++steps;
    size_t id = next_id - 1;
    for (ValueId v : n.inputs) {
      int p = uses.producer[static_cast<size_t>(v)];
      if (p < 0 || chunk_of[static_cast<size_t>(p)] != id) operands.insert(v);
    }
    chunk_of[i] = id;
    chunks.back().push_back(i);
  };
  auto start_chunk = [&]() {
    chunks.emplace_back();
    ++next_id;
    operands.clear();
    steps = 0;
  };
  start_chunk();
  for (size_t i : group) {
    // Counts with i added, computed without touching the chunk so a refusal leaves it intact.
    size_t s = steps + (g.nodes()[i].op != Op::Constant ? 1 : 0);
    size_t in = operands.size();
    std::vector<ValueId> fresh;
    for (ValueId v : g.nodes()[i].inputs) {
      int p = uses.producer[static_cast<size_t>(v)];
      bool inside = p >= 0 && chunk_of[static_cast<size_t>(p)] == next_id - 1;
      if (!inside && !operands.count(v) && std::find(fresh.begin(), fresh.end(), v) == fresh.end()) fresh.push_back(v);
    }
    in += fresh.size();
    if ((s > limits.max_elementwise_steps || in > limits.max_elementwise_inputs) && !chunks.back().empty()) start_chunk();
    add(i);
  }
  return chunks;
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
      if (ctx.table().claims_dtype(dt)) continue;
      d.step[i] = false;
      ctx.remarks.miss("elementwise_region", describe_node(g, nodes[i], d.names), MissReason::DTypeMismatch,
                       "not fusing " + describe_node(g, nodes[i], d.names) + ": " + std::string(dtype_name(dt)) +
                           " is not claimed by target " + std::string(target_name(ctx.target)));
      break;
    }
  }
  d.init_groups();
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
  std::vector<size_t> chunk_of(nodes.size(), SIZE_MAX);
  size_t next_chunk = 0;
  for (auto& group : members) {
    std::sort(group.begin(), group.end());
    size_t steps = measure(g, uses, group).first;
    if (steps < 2) continue;  // a group of one node is left alone
    std::vector<std::vector<size_t>> chunks = split_at_limits(g, uses, group, limits, chunk_of, next_chunk);
    size_t regions = 0;
    for (auto& chunk : chunks) {
      auto non_constant = [&](size_t i) { return nodes[i].op != Op::Constant; };
      if (std::count_if(chunk.begin(), chunk.end(), non_constant) < 2) continue;  // stays a plain node
      groups.push_back(RegionGroup{chunk, region_name(g, chunk)});
      ++regions;
    }
    if (chunks.size() > 1) {
      // Only chunks of two or more steps become regions; the rest stay plain nodes.
      size_t plain = chunks.size() - regions;
      ctx.remarks.miss("elementwise_region", describe_node(g, nodes[group.front()], d.names),
                       MissReason::LimitReached,
                       "split " + std::to_string(steps) + " steps into " + std::to_string(regions) +
                           (regions == 1 ? " region" : " regions") +
                           (plain ? " and " + std::to_string(plain) + (plain == 1 ? " single step" : " single steps") : "") +
                           " at the limits " + limits_to_string(limits),
                       "raise fusion_limits (--fusion-options fusion_limits=SxI)");
      ctx.count(kPass, "splits", static_cast<int64_t>(chunks.size() - 1));
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
