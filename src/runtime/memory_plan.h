// Liveness for the executor: after which node each value is dead, so its buffer is released as
// early as possible. Graph inputs are never released (they belong to the caller) and outputs
// live to the end.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusebox {

struct MemoryPlan {
  // release_after[i]: values whose last use is node i.
  std::vector<std::vector<ValueId>> release_after;
};

MemoryPlan plan_memory(const Graph& g);

}  // namespace fusebox
