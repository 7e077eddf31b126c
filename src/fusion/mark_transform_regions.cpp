// mark-transform-regions — collapses chains of index-only steps into one transform_region
// (spec §4.3; defect 5: chains of any length collapse, and every step keeps its own op and
// attributes, so a region is never "a 2x resize" but exactly the steps it replaced).
//
// Matches: chains n1 -> n2 -> ... -> nk (k >= 2) of transform steps (is_transform_step,
// ir/transform_region.h: slice, transpose, flip, pad, resize, reshape, value-preserving cast)
// where each step reads the previous step's result and that result has no other use and is not
// returned. Produces: one transform_region per chain, named after its steps
// (`transform_slice_cast_resize`); its result reuses nk's result id. Requires: a verified graph.
// Preserves: inputs, output positions, every value read outside a chain. A step alone stays a
// plain node: backends run it as a one-step transform, and fuse-region-prologue folds it into an
// element-wise reader as it folds a region.
//
//   classify     is_transform_step() per node
//   decide       chains(): walk each chain from its head while the link verdict is yes; a
//                refused link (the intermediate is read elsewhere or returned) is a missed entry
//   materialize  outline_transform_chains() (ir/transform_region.h), all chains at once
#include <algorithm>

#include "fusion/pass.h"
#include "ir/transform_region.h"
#include "ir/use_info.h"

namespace fusebox {

namespace {

constexpr std::string_view kPattern = "transform_region";

struct Link {
  int next = -1;  // the node the chain continues into, -1 when it ends
  Verdict verdict = Verdict::yes();
  MissReason reason = MissReason::MultiConsumer;
};

// Whether the chain through step `i` may continue into its (transform step) reader.
Link link_of(const Graph& g, const UseInfo& uses, const std::vector<bool>& step, size_t i,
             const std::vector<std::string>& names) {
  Link l;
  ValueId v = g.nodes()[i].outputs[0];
  const auto& readers = uses.users[static_cast<size_t>(v)];
  bool step_reader = std::any_of(readers.begin(), readers.end(),
                                 [&](int r) { return step[static_cast<size_t>(r)]; });
  if (!step_reader) return l;  // the chain ends here, nothing was refused
  if (uses.is_output(v)) {
    l.verdict = Verdict::no("%" + names[static_cast<size_t>(v)] + " is also a graph output");
    l.reason = MissReason::EscapesAsOutput;
    return l;
  }
  if (readers.size() != 1) {
    l.verdict = Verdict::no("%" + names[static_cast<size_t>(v)] + " has " + std::to_string(readers.size()) +
                            " readers");
    return l;
  }
  l.next = readers[0];
  return l;
}

}  // namespace

Status run_mark_transform_regions(Graph& g, PassContext& ctx) {
  const auto& nodes = g.nodes();
  UseInfo uses = compute_uses(g);
  std::vector<std::string> names = value_display_names(g);
  std::vector<bool> step(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) step[i] = is_transform_step(g, nodes[i]);

  std::vector<bool> taken(nodes.size(), false);
  std::vector<std::vector<size_t>> chains;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (!step[i] || taken[i]) continue;
    std::vector<size_t> chain{i};
    taken[i] = true;
    while (true) {
      Link l = link_of(g, uses, step, chain.back(), names);
      if (!l.verdict) {
        ctx.remarks.miss(std::string(kPattern), describe_node(g, nodes[chain.back()], names), l.reason,
                         "not extending the transform chain past " + describe_node(g, nodes[chain.back()], names) +
                             ": " + l.verdict.reason());
      }
      if (l.next < 0) break;
      chain.push_back(static_cast<size_t>(l.next));
      taken[static_cast<size_t>(l.next)] = true;
    }
    if (chain.size() >= 2) chains.push_back(std::move(chain));
  }
  ctx.count("mark-transform-regions", "regions", static_cast<int64_t>(chains.size()));
  std::vector<TransformChain> named;
  for (auto& chain : chains) {
    std::string name = "transform";
    for (size_t idx : chain) name += "_" + std::string(nodes[idx].info().keyword);
    named.push_back({std::move(chain), std::move(name)});
  }
  FUSEBOX_RETURN_IF_ERROR(outline_transform_chains(g, named));
  return Status::ok();
}

}  // namespace fusebox
