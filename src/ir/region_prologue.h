// Region prologues: an elementwise_region that reads one operand through a transform chain
// (spec §4.3, `fuse-region-prologue`). The region records which operand with the attribute
// `prologue_input = k`; its operand k is the transform's *source*, and its body opens with the
// transform as a nested transform_region over parameter k, whose result the element-wise steps
// read as one scalar per output element:
//
//   %y = elementwise_region %frame, %mean {name = "fused_sub", prologue_input = 0} : f32[8,8,3]
//       (%x0: u8[48,64,3], %a0: f32) {
//     %0 = transform_region %x0 {name = "transform_slice_cast_resize"} : f32[8,8,3] (%x: u8[48,64,3]) {
//       ...index-only steps...
//     }
//     %1 = sub %0, %a0 : f32
//     return %1
//   }
//
// Everything that executes or rewrites regions splits such a node into its two ordinary parts
// (split_prologue): a transform_region and an element-wise region whose parameter k is a scalar.
#pragma once

#include <memory>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

// The operand read through a prologue, or -1 when the region has none.
int64_t prologue_input(const Node& region);

struct PrologueParts {
  size_t input = 0;             // k
  Node transform;               // transform_region (with its body); inputs/outputs left empty
  Node region;                  // the element-wise region; parameter k is a rank-0 scalar
  TensorType read;              // the transform's result: what parameter k stands for, whole
};

// Splits a region with a prologue. Fails (naming what is wrong) when the body does not have the
// shape above: parameter k a tensor, node 0 a transform_region over it, no other reader of k.
Expected<PrologueParts> split_prologue(const Node& region);

// The region `region` (no prologue) reading operand k through `transform` instead: operand k
// becomes `source`, the body's parameter k takes the source's type and the transform node is
// prepended. `transform` is a transform_region node (its body is shared, not copied).
Node attach_prologue(const Node& region, size_t k, const Node& transform, ValueId source, const TensorType& source_type);

// Replaces every region with a prologue by a transform_region node and the plain region (the
// exact inverse of fuse-region-prologue). Returns how many regions were split.
Expected<int64_t> split_region_prologues(Graph& g);

}  // namespace fusebox
