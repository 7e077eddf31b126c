// batch_elementwise_region: N element-wise regions with one body over N crops of one source,
// written side by side along one axis of the result (spec §4.3, `fuse-batch-preprocess`).
//
//   %y = batch_elementwise_region %frame, %mean {name = "batch_fused_sub", axis = 0,
//          starts = [0, 0, 96, 192], ends = [240, 320, 384, 480], offsets = [0, 1]} : f32[2,3,8,8]
//       (%in0: u8[48,64,3], %in1: f32[1,1,3]) {
//     %0 = elementwise_region %in0, %in1 {prologue_input = 0} : f32[8,8,3] (...) { ...item 0... }
//     %1 = transform_region %0 {...transpose, reshape...} : f32[1,3,8,8] (%x: f32[8,8,3]) {...}
//     return %1
//   }
//
// The body computes item 0: an elementwise_region with a prologue whose transform holds exactly
// one slice step (the crop), optionally followed by one transform_region applied to the item's
// result (the same for every item). The per-item table: item i crops with `starts`/`ends` rows i
// (as many values per row as the slice step has axes) and is written at `offsets[i]` along
// `axis`; items are written in table order, so offsets[i] = i * (the item's extent on `axis`).
// Item i means the body with its slice's starts/ends replaced by row i and the types re-inferred
// (batch_item_body); crops may differ in size when a resize after the crop fixes the item shape.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// The crop of a region with a prologue: the one slice step of its prologue transform, or null
// (with `why`) when there is none or more than one.
const Node* prologue_crop(const Node& region, std::string* why = nullptr);

struct BatchTable {
  int64_t axis = 0;
  size_t items = 0;
  size_t width = 0;  // values per starts/ends row
  std::vector<int64_t> starts, ends, offsets;
};

// The table of a batch node, checked against its body (row widths, item count).
Expected<BatchTable> batch_table(const Node& batch);

// The body of item i: a copy of the batch body with item i's crop, re-typed.
Expected<Graph> batch_item_body(const Node& batch, size_t i);

// Re-infers the result types of the first `count` nodes of `g` in order (after an attribute
// changed).
Status retype_nodes(Graph& g, size_t count = SIZE_MAX);

// Result types of a batch node: the item type with its `axis` extent times the item count.
Expected<std::vector<TensorType>> infer_batch_region(const Node& batch, std::span<const TensorType> in);

// Replaces every batch_elementwise_region by its items (a region with a prologue, then the
// per-item transform) and a concat along `axis` (the exact inverse of fuse-batch-preprocess).
// Returns how many batch nodes were replaced.
Expected<int64_t> expand_batch_regions(Graph& g);

}  // namespace fusebox
