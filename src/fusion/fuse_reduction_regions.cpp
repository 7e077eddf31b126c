// fuse-reduction-regions — reductions over the trailing axes of a row, with the element-wise
// steps that feed them and the steps that broadcast their results back, as one reduction_region
// (spec §4.4: fuse-on-read and fuse-on-write; ir/reduction_region.h).
//
// Matches: a reduce_sum/_mean/_max/_min/_prod over the trailing axes of a value of row shape S,
// grown through producer and consumer edges over nodes of the same row: element-wise/broadcast
// steps of result shape S or K (S with the row axes 1: a per-row value, e.g. a keepdims mean or
// rsqrt(var + eps)), and further reductions of S over the same axes. So the softmax and norm
// diamonds written out in primitives that canonicalize does not recognise (an extra step, a
// variance written another way, a log-sum-exp, sum(a * b), mean(relu(x))) become one kernel.
// A softmax, log_softmax, layer_norm or rms_norm over the last axis that an element-wise step of
// its row reads or feeds (canonicalize recognised part of a written-out form) is written back as
// primitives first (expand_row_ops.h) and joins too, when all of it lands in one region.
// Produces: one reduction_region per group holding a reduction and at least one other step;
// every member read outside the group, or returned, becomes a result (computed once).
// Requires: a verified graph; the target claims reduction_region; f32 values (the row kernel's
// dtype) that the target claims. Refusals, each a remark: a reduction over a non-trailing axis;
// a reduction of another row shape next to the group (mixed row shapes); a step feeding a
// reduction whose value is also read elsewhere or returned (it is stored anyway, so the region
// reads it instead of swallowing it); a node outside the group on a path between members; a
// dtype that is not claimed. Preserves: inputs, output positions, every value read outside
// (results reuse the original ids).
//
//   classify     row_key(): the (row shape, row axes) of a reduction; is_member(): may a node
//                join the group of that key?
//   decide       grow(): breadth-first over def-use edges from each unclaimed reduction;
//                prune(): drop read-side steps that escape and members re-entered from outside,
//                keep the seed's connected part, until nothing changes
//   materialize  outline_reduction_regions() (ir/reduction_region.h)
#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include "fusion/expand_row_ops.h"
#include "fusion/pass.h"
#include "ir/outline.h"
#include "ir/reduction_region.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr std::string_view kPattern = "reduction_region";

struct RowKey {
  Shape row;      // S
  Shape per_row;  // K
  int64_t axes = 0;
};

class Grouper {
 public:
  Grouper(const Graph& g, PassContext& ctx, FusionRemarks& remarks)
      : g_(g), ctx_(ctx), remarks_(remarks), uses_(compute_uses(g)), names_(value_display_names(g)),
        taken_(g.nodes().size(), false) {}

  std::vector<ReductionGroup> run() {
    std::vector<ReductionGroup> groups;
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      if (taken_[i] || !is_row_reduction_op(g_.nodes()[i].op)) continue;
      std::optional<RowKey> key = row_key(i, /*remark=*/true);
      if (!key) continue;
      std::vector<size_t> members = decide(i, *key);
      if (members.empty()) continue;
      for (size_t m : members) taken_[m] = true;
      groups.push_back(ReductionGroup{members, region_name(members), key->axes});
    }
    return groups;
  }

 private:
  const Node& node(size_t i) const { return g_.nodes()[i]; }
  std::string desc(size_t i) const { return describe_node(g_, node(i), names_); }
  int producer(ValueId v) const { return uses_.producer[static_cast<size_t>(v)]; }

  void miss(size_t i, MissReason reason, const std::string& why, std::string hint = {}) {
    if (!remarked_.insert({i, static_cast<int>(reason)}).second) return;  // once per node and reason
    remarks_.miss(std::string(kPattern), desc(i), reason, why, std::move(hint));
  }

  // Whether an element-wise neighbour could have joined: refusals of lone reductions are noise.
  bool has_step_neighbour(size_t i) const {
    for (ValueId v : node(i).inputs) {
      int p = producer(v);
      if (p >= 0 && is_region_step(g_, node(static_cast<size_t>(p)))) return true;
    }
    for (int u : uses_.users[static_cast<size_t>(node(i).outputs[0])])
      if (is_region_step(g_, node(static_cast<size_t>(u)))) return true;
    return false;
  }

  // A value type the row kernel runs and the target claims.
  bool row_dtype(ValueId v) const { return g_.type(v).dtype == DType::F32 && ctx_.table().claims_dtype(DType::F32); }

  // The row of reduction i, or nullopt (with a remark when `remark` and a step could have joined).
  std::optional<RowKey> row_key(size_t i, bool remark) {
    const Node& n = node(i);
    const TensorType& x = g_.type(n.inputs[0]);
    std::optional<int64_t> k = trailing_reduced_axes(n, x.rank());
    if (!k) {
      if (remark && has_step_neighbour(i)) {
        miss(i, MissReason::ShapeMismatch,
             "not fusing " + desc(i) + " into a reduction region: it reduces a non-trailing axis of " + x.to_string() +
                 "; a region's reductions run over the last axes of its rows");
      }
      return std::nullopt;
    }
    if (!row_dtype(n.inputs[0]) || !row_dtype(n.outputs[0])) {
      if (remark && has_step_neighbour(i)) {
        miss(i, MissReason::DTypeMismatch,
             "not fusing " + desc(i) + " into a reduction region: " + std::string(dtype_name(x.dtype)) +
                 " is not claimed for reduction regions by target " + std::string(target_name(ctx_.target)) +
                 " (they run f32)");
      }
      return std::nullopt;
    }
    return RowKey{x.shape, per_row_shape(x.shape, *k), *k};
  }

  static bool keeps_dims(const Node& n) { return is_row_reduction_op(n.op) && n.attr_bool("keepdims"); }

  // May node i join a group of `key`? Reductions of another row give a remark.
  bool is_member(size_t i, const RowKey& key, size_t from) {
    if (taken_[i]) return false;
    const Node& n = node(i);
    if (is_row_reduction_op(n.op)) {
      std::optional<RowKey> other = row_key(i, /*remark=*/false);
      if (other && other->row == key.row && other->axes == key.axes) return true;
      if (other) {
        miss(i, MissReason::ShapeMismatch,
             "not fusing " + desc(i) + " into the reduction region of " + desc(from) + ": mixed row shapes (it reduces " +
                 g_.type(n.inputs[0]).to_string() + " over " + std::to_string(other->axes) + " axes, the region " +
                 TensorType{DType::F32, key.row}.to_string() + " over " + std::to_string(key.axes) + ")");
      }
      return false;
    }
    if (!is_region_step(g_, n)) return false;
    for (ValueId v : n.outputs)
      if (!row_dtype(v)) return false;
    for (ValueId v : n.inputs) {
      if (!row_dtype(v)) return false;
      int p = producer(v);  // a reduction's result without keepdims is only returned
      if (p >= 0 && is_row_reduction_op(node(static_cast<size_t>(p)).op) && !keeps_dims(node(static_cast<size_t>(p)))) return false;
    }
    const Shape& s = g_.type(n.outputs[0]).shape;
    return s == key.row || s == key.per_row;
  }

  // Members reachable from `seed` through edges between members of `in`.
  std::set<size_t> component(size_t seed, const std::set<size_t>& in) const {
    std::set<size_t> seen{seed};
    std::deque<size_t> queue{seed};
    while (!queue.empty()) {
      size_t m = queue.front();
      queue.pop_front();
      auto visit = [&](size_t x) {
        if (in.count(x) && seen.insert(x).second) queue.push_back(x);
      };
      for (ValueId v : node(m).inputs)
        if (int p = producer(v); p >= 0) visit(static_cast<size_t>(p));
      if (is_row_reduction_op(node(m).op) && !keeps_dims(node(m))) continue;
      for (ValueId v : node(m).outputs)
        for (int u : uses_.users[static_cast<size_t>(v)]) visit(static_cast<size_t>(u));
    }
    return seen;
  }

  std::set<size_t> grow(size_t seed, const RowKey& key) {
    std::set<size_t> group{seed};
    std::deque<size_t> queue{seed};
    while (!queue.empty()) {
      size_t m = queue.front();
      queue.pop_front();
      auto visit = [&](size_t x) {
        if (group.count(x) || !is_member(x, key, seed)) return;
        group.insert(x);
        queue.push_back(x);
      };
      for (ValueId v : node(m).inputs)
        if (int p = producer(v); p >= 0) visit(static_cast<size_t>(p));
      if (is_row_reduction_op(node(m).op) && !keeps_dims(node(m))) continue;
      for (ValueId v : node(m).outputs)
        for (int u : uses_.users[static_cast<size_t>(v)]) visit(static_cast<size_t>(u));
    }
    return group;
  }

  bool escapes(size_t m, const std::set<size_t>& group) const {
    for (ValueId v : node(m).outputs) {
      if (uses_.is_output(v)) return true;
      for (int u : uses_.users[static_cast<size_t>(v)])
        if (!group.count(static_cast<size_t>(u))) return true;
    }
    return false;
  }

  // Removes what may not stay; true when something was removed.
  bool prune(std::set<size_t>& group) {
    // Read side: members with a path to a reduction of the group, through the group.
    std::set<size_t> read_side;
    std::vector<size_t> stack;
    for (size_t m : group)
      if (is_row_reduction_op(node(m).op)) stack.push_back(m);
    while (!stack.empty()) {
      size_t m = stack.back();
      stack.pop_back();
      for (ValueId v : node(m).inputs) {
        int p = producer(v);
        if (p >= 0 && group.count(static_cast<size_t>(p)) && read_side.insert(static_cast<size_t>(p)).second) {
          stack.push_back(static_cast<size_t>(p));
        }
      }
    }
    std::vector<size_t> drop;
    for (size_t m : read_side) {
      if (is_row_reduction_op(node(m).op) || !escapes(m, group)) continue;
      bool output = uses_.is_output(node(m).outputs[0]);
      miss(m, output ? MissReason::EscapesAsOutput : MissReason::MultiConsumer,
           "not fusing " + desc(m) + " into a reduction region: it feeds a reduction and is also " +
               (output ? std::string("a graph output") : std::string("read outside the region")) +
               ", so the region reads it from memory instead of swallowing it");
      drop.push_back(m);
    }
    // Convexity: a member reading a node outside that a member reaches would close a cycle.
    size_t last = *group.rbegin();
    std::vector<bool> reached(g_.nodes().size(), false);
    for (size_t i = *group.begin(); i <= last; ++i) {
      if (group.count(i)) continue;
      for (ValueId v : node(i).inputs) {
        int p = producer(v);
        if (p >= 0 && (group.count(static_cast<size_t>(p)) || reached[static_cast<size_t>(p)])) reached[i] = true;
      }
    }
    for (size_t m : group) {
      for (ValueId v : node(m).inputs) {
        int p = producer(v);
        if (p < 0 || !reached[static_cast<size_t>(p)]) continue;
        miss(m, MissReason::WouldCreateCycle,
             "not fusing " + desc(m) + " into a reduction region: " + desc(static_cast<size_t>(p)) +
                 " lies outside the region on a path between its members");
        drop.push_back(m);
        break;
      }
    }
    for (size_t m : drop) group.erase(m);
    return !drop.empty();
  }

  std::vector<size_t> decide(size_t seed, const RowKey& key) {
    std::set<size_t> group = grow(seed, key);
    while (group.count(seed) && prune(group)) {
      if (group.count(seed)) group = component(seed, group);
    }
    if (!group.count(seed)) return {};
    bool has_step = std::any_of(group.begin(), group.end(), [&](size_t m) { return !is_row_reduction_op(node(m).op); });
    if (!has_step) return {};  // a lone reduction (or reductions only) stays a plain node
    // Rank-0 constants read only by members become body constants.
    for (size_t m : std::set<size_t>(group)) {
      for (ValueId v : node(m).inputs) {
        int p = producer(v);
        if (p < 0 || taken_[static_cast<size_t>(p)] || group.count(static_cast<size_t>(p))) continue;
        const Node& c = node(static_cast<size_t>(p));
        if (c.op != Op::Constant || c.attr_array("value").rank() != 0 || uses_.is_output(v)) continue;
        const auto& users = uses_.users[static_cast<size_t>(v)];
        if (std::all_of(users.begin(), users.end(), [&](int u) { return group.count(static_cast<size_t>(u)) > 0; })) {
          group.insert(static_cast<size_t>(p));
        }
      }
    }
    return {group.begin(), group.end()};
  }

  std::string region_name(const std::vector<size_t>& members) const {
    std::string name = "fused";
    for (size_t i : members)
      if (node(i).op != Op::Constant) name += "_" + std::string(node(i).info().keyword);
    return name;
  }

  const Graph& g_;
  PassContext& ctx_;
  FusionRemarks& remarks_;
  UseInfo uses_;
  std::vector<std::string> names_;
  std::vector<bool> taken_;
  std::set<std::pair<size_t, int>> remarked_;
};

// Row ops (softmax, norms) that an element-wise step of their row reads or feeds: written out as
// primitives they may join that step's region (expand_row_ops.h), one kernel instead of two.
// On the CPU target only: there the reduction kernel runs each pass as generated code, keeps
// rows in the result and prefetches the next row, and written out a softmax with a temperature
// took 10.4-11.2 ms against 12.4-13.5 for a region plus the softmax row kernel, a layer norm and
// a relu 10.4-11.7 against 11.4-13.0, softmax(x * c) the same (docs/benchmarks.md, "Reduction
// passes as generated code"). Other targets keep their row kernels: the CUDA reduction kernel
// against its row kernels is not measured.
bool write_out_named_row_ops(const PassContext& ctx) { return ctx.target == FusionTarget::Cpu; }

std::set<ValueId> row_ops_next_to_steps(const Graph& g, const PassContext& ctx) {
  UseInfo uses = compute_uses(g);
  std::set<ValueId> out;
  if (!write_out_named_row_ops(ctx) || !ctx.table().claims_dtype(DType::F32)) return out;
  auto row_step = [&](int i, const Shape& row) {
    if (i < 0) return false;
    const Node& s = g.nodes()[static_cast<size_t>(i)];
    return is_region_step(g, s) && g.type(s.outputs[0]).dtype == DType::F32 && g.type(s.outputs[0]).shape == row;
  };
  for (const Node& n : g.nodes()) {
    if (!is_expandable_row_op(g, n)) continue;
    const Shape& row = g.type(n.inputs[0]).shape;
    bool next = row_step(uses.producer[static_cast<size_t>(n.inputs[0])], row);
    for (int u : uses.users[static_cast<size_t>(n.outputs[0])]) next = next || row_step(u, row);
    if (next) out.insert(n.outputs[0]);
  }
  return out;
}

}  // namespace

// Decides on a copy where the chosen row ops are written out; a row op whose primitives do not
// all land in one region is left named (its row kernel beats loose primitives) and the decision
// is taken again without it.
Status run_fuse_reduction_regions(Graph& g, PassContext& ctx) {
  if (!ctx.table().claims(FusedKind::ReductionRegion)) return Status::ok();
  std::set<ValueId> expand = row_ops_next_to_steps(g, ctx);
  while (true) {
    Graph h = g;
    std::map<ValueId, std::vector<ValueId>> written;  // row op result -> its primitives' values
    if (!expand.empty()) {
      std::vector<Node> nodes;
      const std::vector<Node> old = h.nodes();
      for (const Node& n : old) {
        if (!expand.count(n.outputs[0])) {
          nodes.push_back(n);
          continue;
        }
        for (Node& p : expand_row_op(h, n)) {
          written[n.outputs[0]].push_back(p.outputs[0]);
          nodes.push_back(std::move(p));
        }
      }
      h.mutable_nodes() = std::move(nodes);
    }
    FusionRemarks remarks;
    std::vector<ReductionGroup> groups = Grouper(h, ctx, remarks).run();
    UseInfo uses = compute_uses(h);
    std::vector<int> group_of(h.nodes().size(), -1);
    for (size_t k = 0; k < groups.size(); ++k)
      for (size_t i : groups[k].nodes) group_of[i] = static_cast<int>(k);
    std::set<ValueId> split;
    for (const auto& [op, values] : written) {
      std::set<int> in;
      for (ValueId v : values) in.insert(group_of[static_cast<size_t>(uses.producer[static_cast<size_t>(v)])]);
      if (in.size() != 1 || *in.begin() < 0) split.insert(op);
    }
    if (split.empty()) {
      for (MissedFusion& m : remarks.missed) ctx.remarks.missed.push_back(std::move(m));
      ctx.count("fuse-reduction-regions", "regions", static_cast<int64_t>(groups.size()));
      ctx.count("fuse-reduction-regions", "row ops written out", static_cast<int64_t>(written.size()));
      FUSEBOX_RETURN_IF_ERROR(outline_reduction_regions(h, groups));
      g = std::move(h);
      return Status::ok();
    }
    for (ValueId v : split) expand.erase(v);
  }
}

}  // namespace fusebox
