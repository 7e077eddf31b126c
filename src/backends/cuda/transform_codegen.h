// A transform plan (backends/transform_plan.h) on the GPU: its per-axis tap tables uploaded to
// device memory once, and a device function computing any one output element from the source,
// with the CPU plan's arithmetic (the taps summed in the reference's order in double, rounded
// once at the resize's dtype; integers round half away from zero and saturate). Used alone by
// transform_region nodes and inside a region kernel as the read of its prologue operand.
//
//   __device__ OUT_STORAGE <name>(i64 e, const SRC_STORAGE* src, const <name>_axes& axes)
//   <name>_axes = { const u8* count[A]; const i64* off[A]; const i32* step[A]; const double* weight[A]; }
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/context.h"
#include "backends/transform_plan.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

inline constexpr size_t kMaxTransformAxes = 16;

struct DeviceTransform {
  std::string name;             // the device function; its argument struct is name + "_axes"
  std::string source;           // both definitions (needs the prelude before it)
  DType src_dtype = DType::F32, out_dtype = DType::F32;
  std::vector<int64_t> out_shape;
  std::shared_ptr<void> tables;  // device memory the argument struct points into
  std::vector<uint8_t> axes_arg;  // the argument struct's bytes, passed by value
};

// Why the plan cannot run on the device ("" when it can).
std::string device_transform_unsupported(const TransformPlan& plan);

// Uploads the plan's tables (on the context's stream, synchronised) and writes its device function.
// Without a context only the source is written (tables null: for compiling it, not running it).
// `index_only`: the function returns the source offset an output element reads instead of the
// value (`i64 name(i64 e, const name_axes&)`): for a plain permutation (no interpolation, no pad
// constants), as a batch region's per-item layout is.
//
// How an interpolation walks its taps (the same taps, weights and summation order either way):
//   Nested  one loop per interpolated axis, every index known when compiled: no local memory.
//           On the H200, a 1080p u8 frame -> bilinear half size -> CHW: 0.042 ms (Combos 0.062).
//   Combos  the axes holding two taps collected in a small array, then a loop over their
//           combinations: fewer registers inside a larger kernel. 64 crops 448 -> 224 bilinear in
//           one batch launch: 0.215 ms (Nested 0.27).
enum class TapWalk { Nested, Combos };
Expected<std::shared_ptr<const DeviceTransform>> make_device_transform(Context* context, const TransformPlan& plan,
                                                                       const std::string& name, bool index_only = false,
                                                                       TapWalk walk = TapWalk::Nested);

// The source of the standalone kernel `fb_transform(i64 n, const void* src, void* out, axes)`.
std::string transform_kernel_source(const DeviceTransform& t);


}  // namespace fusebox::cuda
