// Non-maximum suppression as ONNX defines it (NonMaxSuppression-10/11), shared by the importer,
// which folds a selection whose inputs it knows, and the reference kernel of nms_select, which
// selects as the plan runs (ops.def, docs/ir-syntax.md).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"

namespace fusebox {

struct NmsParams {
  int64_t max_per_class = 0;  // absent or empty: 0, nothing is selected; negative: 0
  float iou_threshold = 0;
  std::optional<float> score_threshold;  // absent: every box is a candidate
  bool center = false;                   // boxes as [x_center, y_center, width, height]
};

// The parameters from ONNX's optional one-value inputs (nullptr or empty: absent):
// max_output_boxes_per_class (an integer), iou_threshold and score_threshold. Errors name the input.
Expected<NmsParams> nms_params(const Array* max_out, const Array* iou, const Array* score, bool center);

// Per batch b and class c (entry b * classes + c), the indices of the boxes kept, in the order
// they are kept: the boxes scoring above score_threshold (NaN scores never count) by score
// descending, ties by box index, each kept unless a box kept before it has an IoU above
// iou_threshold with it, until max_per_class are kept. boxes: f32 [batches, count, 4] ([y1, x1,
// y2, x2] with corners in any order, or the center format); scores: f32 [batches, classes, count].
// Computed in f32 in the order of ONNX's reference.
std::vector<std::vector<int64_t>> nms_keep(const float* boxes, const float* scores, int64_t batches,
                                           int64_t classes, int64_t count, const NmsParams& p);

}  // namespace fusebox
