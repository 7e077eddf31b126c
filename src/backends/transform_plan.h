// The plan of a transform_region, shared by the backends that run transform regions natively
// (cpu/transform_kernel.h, cuda/transform_kernel.h): every output coordinate mapped back through
// the steps to the source elements it reads.
//
//   walk the steps from the result back to the source once per axis, giving per output axis and
//   index a list of taps {source offset or "constant of pad step k", weight}: slice/flip/pad/
//   nearest resize map an index to one index, transpose relabels axes, reshape is a view at
//   either end of the chain (or anywhere when it only adds or removes unit axes), linear resize
//   splits an index into one or two weighted taps
#pragma once

#include <cstdint>
#include <vector>

#include <memory>
#include <string>

#include "ir/dtype.h"
#include "ir/graph.h"

namespace fusebox {

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

// The plan of a transform_region node, or null (with `why` set) when its chain has a form the
// plan does not cover: two linear resizes, a reshape in the middle that merges or splits axes,
// an empty source axis. Those regions run on the reference kernel.
std::shared_ptr<const TransformPlan> plan_transform_region(const Node& region, std::string* why = nullptr);

}  // namespace fusebox
