// transform_region: a chain of index-only steps over whole tensors, as one op (spec §4.3).
//
//   %r = transform_region %frame {name = "slice_cast_resize"} : f32[112,112,3] (%x: u8[480,640,3]) {
//     %0 = slice %x {starts = [0, 0], ends = [240, 320], axes = [0, 1]} : u8[240,320,3]
//     %1 = cast %0 {to = f32} : f32[240,320,3]
//     %2 = resize %1 {sizes = [112, 112, 3], mode = "linear"} : f32[112,112,3]
//     return %2
//   }
//
// Each step keeps its own op and attributes, so the region means exactly what running the steps
// one by one means (that is its reference kernel); a backend may instead map every output
// coordinate back through the steps to the source elements it reads.
#pragma once

#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// A cast that gives every source value exactly (u8 -> f32, f32 -> f64, i8 -> i32, ...), so it
// commutes with every index-only step and with resize's interpolation.
bool cast_preserves_values(DType from, DType to);

// Whether a node can be a step of a transform_region body: slice, transpose, flip, pad, resize,
// reshape or a value-preserving cast, one operand and one result, static shapes (unless
// `allow_dynamic`: a backend that plans the step per run's sizes). On false, `why` (when given)
// says what disqualifies it.
bool is_transform_step(const Graph& g, const Node& n, std::string* why = nullptr, bool allow_dynamic = false);

struct TransformChain {
  std::vector<size_t> nodes;  // node indices; each node's operand 0 is the previous node's result
  std::string name;           // the region's name attribute
};

// The transform_region node of one chain of `g` (its steps copied into the body at their types),
// not inserted anywhere: outline_transform_chains places it; a backend may plan a lone step so.
Node transform_region_of(const Graph& g, const TransformChain& chain);
// The one-step transform_region of `step` over operand and result types `in` and `out`: how a
// backend plans a lone step at a set of concrete sizes.
Node transform_step_region(const Node& step, const TensorType& in, const TensorType& out);

// Replaces each chain by one transform_region node whose result reuses the chain's last result
// id, so consumers need no rewriting. Chains must be disjoint and their intermediate results
// must have no other use. The graph is re-sorted topologically (stable) afterwards.
Status outline_transform_chains(Graph& g, const std::vector<TransformChain>& chains);

// Replaces every transform_region by its steps at its body's types (the exact inverse).
// Returns how many regions were replaced.
Expected<int64_t> inline_transform_regions(Graph& g);

}  // namespace fusebox
