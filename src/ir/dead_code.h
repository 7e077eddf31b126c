// Dead-node removal shared by the dce and canonicalize passes.
#pragma once

#include <cstddef>

#include "ir/graph.h"

namespace fusebox {

// Removes nodes none of whose results is read by a live node or returned. Returns how many.
size_t remove_dead_nodes(Graph& g);

}  // namespace fusebox
