// Shape inference of the ops added for ONNX coverage: gather_nd, scatter_elements, scatter_nd,
// reverse_sequence (data addressed through an index tensor), cumsum, det, nms_select and
// unique_select.
// shape_inference.cpp dispatches to it; errors name the op and the operand or attribute at
// fault, like every other inference.
#pragma once

#include <span>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox {

Expected<std::vector<TensorType>> infer_extra_op(const Node& node, std::span<const TensorType> in);

}  // namespace fusebox
