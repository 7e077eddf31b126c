// Who reads each value: the node indices that use it and whether it is a graph output. Graph
// outputs count as uses everywhere in fusion (a value the caller reads can never be swallowed).
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusebox {

struct UseInfo {
  std::vector<std::vector<int>> users;  // per value: indices of nodes that read it (with repeats)
  std::vector<int> output_uses;         // per value: how many output positions return it
  std::vector<int> producer;            // per value: index of the defining node, -1 for inputs

  bool is_output(ValueId v) const { return output_uses[static_cast<size_t>(v)] > 0; }
  // Number of node uses plus output uses.
  size_t use_count(ValueId v) const {
    return users[static_cast<size_t>(v)].size() + static_cast<size_t>(output_uses[static_cast<size_t>(v)]);
  }
};

UseInfo compute_uses(const Graph& g);

}  // namespace fusebox
