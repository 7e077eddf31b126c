#include "runtime/memory_plan.h"

namespace fusebox {

MemoryPlan plan_memory(const Graph& g) {
  std::vector<int> last_use(g.num_values(), -1);
  std::vector<bool> keep(g.num_values(), false);
  for (ValueId v : g.inputs()) keep[static_cast<size_t>(v)] = true;
  for (ValueId v : g.outputs()) keep[static_cast<size_t>(v)] = true;
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (ValueId v : nodes[i].inputs) last_use[static_cast<size_t>(v)] = static_cast<int>(i);
    // A result nobody reads dies right after its node.
    for (ValueId v : nodes[i].outputs)
      if (last_use[static_cast<size_t>(v)] < 0) last_use[static_cast<size_t>(v)] = static_cast<int>(i);
  }
  MemoryPlan plan;
  plan.release_after.resize(nodes.size());
  for (size_t v = 0; v < last_use.size(); ++v) {
    if (keep[v] || last_use[v] < 0) continue;
    plan.release_after[static_cast<size_t>(last_use[v])].push_back(static_cast<ValueId>(v));
  }
  return plan;
}

}  // namespace fusebox
