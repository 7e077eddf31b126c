// The one outliner: turns groups of nodes into region nodes, and regions back into nodes.
//
//   graph before                      graph after outline_regions({{1,2,3}})
//   %1 = mul %x, %a                   %r:2 = elementwise_region %x, %a, %b { body: mul add relu }
//   %2 = add %1, %b        ==>        ...            (results reuse the ids of %2 and %3, so
//   %3 = relu %2                                       consumers need no rewriting)
//   use(%2), return %3
//
// Operands are the values a group reads but does not define, in order of first use. Results are
// the group's values read outside the group or returned, in definition order. Rank-0 constants
// that are members become constants inside the body.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// Whether a node can be one step of an elementwise_region body: a primitive of kind at most
// Broadcast with one result whose shape is the numpy broadcast of its operands' shapes (so
// batch_norm and expand, which shape their results their own way, are not steps).
bool is_region_step(const Node& n, std::span<const TensorType> operands, const TensorType& result);
bool is_region_step(const Graph& g, const Node& n);

struct RegionGroup {
  std::vector<size_t> nodes;  // node indices, any order
  std::string name;           // region name attribute
};

// Replaces each group by one elementwise_region node. Groups must be disjoint, convex (no path
// leaves a group and re-enters it) and made of nodes whose values can all be rank-0 body values.
// The graph is re-sorted topologically (stable) afterwards.
Status outline_elementwise_regions(Graph& g, const std::vector<RegionGroup>& groups);

// The shared outliner under both region kinds: each group of node indices (disjoint, convex)
// becomes the one node `build` makes of it, placed where its last member stood; then the graph is
// re-sorted topologically (stable). `build` gets the group's index, its members in graph order and
// every node's group (-1: none), and reads the graph as it was before any replacement.
using GroupNodeBuilder =
    std::function<Expected<Node>(size_t group, const std::vector<size_t>& members, const std::vector<int>& group_of)>;
Status outline_groups(Graph& g, const std::vector<std::vector<size_t>>& groups, const GroupNodeBuilder& build);

// Replaces every region node by its body's nodes at the region's shapes (the exact inverse).
Status inline_elementwise_regions(Graph& g);

// Stable topological order: nodes keep their relative order unless an operand is defined later.
// Fails on a cycle.
Status sort_topologically(Graph& g);

}  // namespace fusebox
