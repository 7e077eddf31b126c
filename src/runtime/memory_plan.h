// Liveness for the executor: after which node each resident (a value on one device, see
// placement.h) is dead, so its buffer goes back to its backend's pool as early as possible.
// Graph inputs are never released (they belong to the caller) and outputs live to the end.
#pragma once

#include <vector>

#include "ir/graph.h"
#include "runtime/placement.h"

namespace fusebox {

struct MemoryPlan {
  // release_after[i]: residents whose last use is node i.
  std::vector<std::vector<int>> release_after;
};

MemoryPlan plan_memory(const Graph& g, const Placement& p);

}  // namespace fusebox
