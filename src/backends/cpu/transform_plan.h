// The plan of a transform_region (transform_kernel.h): what plan_transform_region builds
// (transform_kernel.cpp) and the loops run (transform_loops.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include "ir/dtype.h"

namespace fusebox::cpu {

inline constexpr int64_t kConst = -1;  // a tap that reads a pad constant instead of the source

struct TransformPlan {
  DType src_dtype, out_dtype, resize_dtype = DType::F32;
  bool linear = false;
  int resize_step = -1;
  std::vector<int64_t> out_shape;  // the output axes, row-major over the result's memory
  size_t out_axes = 0;             // axes_[0, out_axes) are output axes, the rest phantom
  struct Axis {
    std::vector<int64_t> off;    // 2 per index: source element offset, or kConst
    std::vector<int32_t> step;   // 2 per index: the pad step of a kConst tap
    std::vector<double> weight;  // 2 per index
    std::vector<uint8_t> count;  // 1 or 2 per index
    int resize_pos = -1;
    bool contiguous = false;     // one tap per index, offsets off[0] + i, no constant
  };
  std::vector<Axis> axes;
  std::vector<int> weight_order;       // axes in the linear resize's axis order
  std::vector<double> const_value;     // per step (pad constants in their dtype, as double)
  std::vector<std::vector<uint8_t>> const_bytes;  // per step: the constant's bytes
};

}  // namespace fusebox::cpu
