#include "runtime/memory_plan.h"

namespace fusebox {

MemoryPlan plan_memory(const Graph& g, const Placement& p) {
  const size_t residents = p.resident_value.size();
  std::vector<int> last_use(residents, -1);
  std::vector<bool> keep(residents, false);
  for (ValueId v : g.inputs()) keep[size_t(v)] = true;
  for (ValueId v : g.outputs()) keep[size_t(v)] = true;
  for (int r : p.output_resident) keep[size_t(r)] = true;
  for (const Copy& c : p.final_copies) keep[size_t(c.from)] = true;
  auto use = [&](int r, int i) { last_use[size_t(r)] = std::max(last_use[size_t(r)], i); };
  const auto& nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const int at = static_cast<int>(i);
    for (const Copy& c : p.copies_before[i]) {
      use(c.from, at);
      use(c.to, at);
    }
    for (int r : p.operands[i]) use(r, at);
    // A result nobody reads dies right after its node.
    for (ValueId v : nodes[i].outputs) use(int(v), at);
  }
  MemoryPlan plan;
  plan.release_after.resize(nodes.size());
  for (size_t r = 0; r < residents; ++r) {
    if (keep[r] || last_use[r] < 0) continue;
    plan.release_after[size_t(last_use[r])].push_back(static_cast<int>(r));
  }
  return plan;
}

}  // namespace fusebox
