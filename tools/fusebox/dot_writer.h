// Graphviz pictures of a graph (`fusebox explain FILE --dot OUT.dot`).
//
//   (%x f32[N,3,H,W]) ──> [conv2d f32[N,16,?,?]] ──> ┌ cluster: fused_add_relu (elementwise_region) ┐
//                                                    │   [add f32[]] ──> [relu f32[]]                │
//                                                    └───────────────────────────────────┬──────────┘
//                                                                                        v
//                                                                                 (out0 f32[...])
//
// One box per node (op keyword, result name and type), edges along values, graph inputs and
// outputs as ellipses. A node with a body (a region) is not a box: its body is drawn as a
// `subgraph cluster_<k>` labelled with the region's name, and edges run straight from the
// producers of the region's operands to the body ops that read them, and from the body ops
// that compute the region's results to their consumers. Bodies nest.
#pragma once

#include <string>
#include <string_view>

#include "ir/graph.h"

namespace fusebox::cli {

// The DOT text of `g` (a `digraph`), deterministic for a given graph.
std::string graph_to_dot(const Graph& g);

// `text` as the inside of a DOT double-quoted string: '"' and '\' are escaped, a newline
// becomes the DOT line break "\n", other control characters become '?'.
std::string dot_escape(std::string_view text);

}  // namespace fusebox::cli
