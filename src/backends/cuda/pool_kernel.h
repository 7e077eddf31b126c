// Pooling on the GPU: max_pool2d, avg_pool2d and global_avg_pool over NCHW f32, f16, bf16 or
// f64 values, with the reference kernels' semantics (src/backends/cpu/reference/pool.cpp).
//
// One thread per output element. A window covers input rows oh*stride - pad_top + ky*dilation
// (columns alike); positions outside the input are padding, never the max and never summed. A
// NaN in a max window wins. Averages sum in double in the reference's order (rows, then
// columns; a global plane in memory order), divide in double and round to the compute type
// (float for f16/bf16) and then to the dtype, as the reference does: results are bit-exact.
// count_include_pad divides by the part of the window inside the padded extent. Sizes are
// kernel arguments: a new shape never recompiles.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

enum class PoolOp { Max, Avg, GlobalAvg };

// What one generated source computes.
struct PoolVariant {
  PoolOp op = PoolOp::Max;
  DType dtype = DType::F32;
  std::string key() const;
};

inline constexpr const char* kPoolEntry = "fb_pool";

// The CUDA C++ source of one variant. Kernel arguments, all 8 bytes:
//   (x, y, planes, H, W, OH, OW, kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left,
//    pad_bottom, pad_right, dilation_h, dilation_w, count_include_pad)
// global_avg_pool reads planes and H (the plane size) only.
std::string pool_source(const PoolVariant& v);
// Every variant the backend can generate (the code generation test compiles each).
std::vector<PoolVariant> all_pool_variants();

// Device definitions of a dtype for generated kernels (after prelude_source()): S the storage
// type, C the compute type, fb_ld(S) -> C, fb_st(C) -> S, fb_st64(double) -> S with one
// rounding (the reference's store_f64), FB_FLOAT 1 for float dtypes, FB_LOWEST / FB_HIGHEST the
// identities of max and min. Empty for a dtype the kernels do not take.
std::string scalar_type_source(DType dtype);

// nullopt when `n` is not a pooling op; else accept, or refuse with the reason.
std::optional<Claim> claim_pool_op(const Graph& g, const Node& n);
// The kernel of a claimed pooling op; an error with the refusal's reason otherwise.
Expected<std::shared_ptr<const Kernel>> make_pool_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

}  // namespace fusebox::cuda
