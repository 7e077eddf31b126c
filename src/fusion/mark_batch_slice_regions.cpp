// mark-batch-slice-regions — finds the batches of crops that fuse-batch-preprocess may merge, before
// the transform passes reshape them (spec §3 step 4, §4.3), and counts them for the report.
//
// Matches: a concat (two or more operands) each of whose operands is computed, through nodes of one
// result each, from a slice of one and the same source value. Produces: no rewrite; the counter
// `mark-batch-slice-regions.groups` (candidate batches) and, for a concat whose operands crop
// different sources, a missed entry naming them, so a batch that cannot form is explained even
// when fuse-batch-preprocess is off. The merge itself, with every check of the bodies, is
// fuse-batch-preprocess's. Preserves: the graph.
#include <set>

#include "fusion/pass.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr int kMaxDepth = 32;

// The sources of the slices `v` is computed from (through single-result nodes), up to kMaxDepth.
void slice_sources(const Graph& g, const UseInfo& uses, ValueId v, int depth, std::set<ValueId>& out) {
  int p = uses.producer[size_t(v)];
  if (p < 0 || depth > kMaxDepth) return;
  const Node& n = g.nodes()[size_t(p)];
  if (n.outputs.size() != 1 || n.op == Op::Concat) return;
  if (n.op == Op::Slice) {
    out.insert(n.inputs[0]);
    return;
  }
  for (ValueId in : n.inputs) slice_sources(g, uses, in, depth + 1, out);
}

}  // namespace

Status run_mark_batch_slice_regions(Graph& g, PassContext& ctx) {
  UseInfo uses = compute_uses(g);
  std::vector<std::string> names = value_display_names(g);
  int64_t groups = 0;
  for (const Node& concat : g.nodes()) {
    if (concat.op != Op::Concat || concat.inputs.size() < 2) continue;
    std::set<ValueId> all;
    bool every = true;
    for (ValueId v : concat.inputs) {
      std::set<ValueId> s;
      slice_sources(g, uses, v, 0, s);
      every = every && !s.empty();
      all.insert(s.begin(), s.end());
    }
    if (!every || all.empty()) continue;
    if (all.size() == 1) {
      ++groups;
      continue;
    }
    std::string list;
    for (ValueId v : all) list += (list.empty() ? "%" : ", %") + names[size_t(v)];
    ctx.remarks.miss("batch_preprocess", describe_node(g, concat, names), MissReason::NotRecognised,
                     "not a batch of crops: the operands crop different sources (" + list + ")");
  }
  ctx.count("mark-batch-slice-regions", "groups", groups);
  return Status::ok();
}

}  // namespace fusebox
