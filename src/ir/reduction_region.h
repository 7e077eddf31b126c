// reduction_region: reductions over the trailing axes of one row shape, fused with the
// element-wise steps that feed them (fuse-on-read) and the element-wise steps that combine their
// results, broadcast back, with the rows (fuse-on-write; spec §4.4). A softmax written out:
//
//   %y = reduction_region %x {name = "...", row_axes = 1} : f32[N,D] (%a: f32[N,D]) {
//     %0 = reduce_max %a {axes = [-1], keepdims = true} : f32[N,1]
//     %1 = sub %a, %0 : f32[N,D]
//     %2 = exp %1 : f32[N,D]
//     %3 = reduce_sum %2 {axes = [-1], keepdims = true} : f32[N,1]
//     %4 = div %2, %3 : f32[N,D]
//     return %4
//   }
//
// The body keeps every node with its own op, attributes and whole-tensor type, so the region
// means exactly what running its nodes one by one means: that is its reference kernel and its
// unfused form. The rules (check_reduction_body):
// - the row shape S is the operand shape of the body's reductions, the same for all of them; its
//   last `row_axes` axes form one row, the others index the rows; K is S with the row axes 1;
// - a reduction (reduce_sum, _mean, _max, _min, _prod) reduces exactly the row axes; a keepdims
//   result (shape K) may be read by later steps, a result without keepdims is only returned;
// - every other node is an element-wise/broadcast step (ir/outline.h) of result shape S or K,
//   or a rank-0 constant; parameters broadcast into S.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// reduce_sum, reduce_mean, reduce_max, reduce_min, reduce_prod.
bool is_row_reduction_op(Op op);

// How many trailing axes of a rank-`rank` operand the reduction node reduces, when its axes are
// exactly the last ones (nullopt when an axis is out of range or a non-trailing axis is
// reduced, or no axis at all).
std::optional<int64_t> trailing_reduced_axes(const Node& reduce, int rank);

// The shape with its last `row_axes` dims set to 1 (the keepdims shape of a row reduction).
Shape per_row_shape(const Shape& s, int64_t row_axes);

// Checks a reduction_region body against the rules above; the message says which node breaks
// which rule.
Status check_reduction_body(const Graph& body, int64_t row_axes);

// The row shape S of a checked body (the operand shape of its first reduction).
const Shape& body_row_shape(const Graph& body);

struct ReductionGroup {
  std::vector<size_t> nodes;  // node indices, any order
  std::string name;           // the region's name attribute
  int64_t row_axes = 1;
};

// Replaces each group by one reduction_region node. Operands are the values a group reads but
// does not define, in order of first use; results are its values read outside the group or
// returned, in definition order, and reuse those value ids. Groups must be disjoint and convex.
// The graph is re-sorted topologically (stable) afterwards.
Status outline_reduction_regions(Graph& g, const std::vector<ReductionGroup>& groups);

// Replaces every reduction_region (those `which` accepts, when given) by its body's nodes (the
// exact inverse). Returns how many.
Expected<int64_t> inline_reduction_regions(Graph& g, const std::function<bool(const Node&)>& which = nullptr);

}  // namespace fusebox
