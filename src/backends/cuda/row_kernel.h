// Row kernels on the GPU: softmax, log_softmax, layer_norm, rms_norm and the fused residual
// norms (ir/fused_norm_ops.h), normalising the last axis of f32, f16 or bf16 values.
//
// One thread block per row. A row of up to kRowItems elements per thread (8192 with 256
// threads) is read once into registers and reduced there; a longer row is read twice (its
// statistics, then the normalised write). Values are computed in float, f16/bf16 stored with
// round-to-nearest-even; the residual sum x + r (+ bias) rounds to the dtype after each add, as
// the unfused adds do, so a returned sum is bit-exact. Row length and count are kernel
// arguments: a new size never recompiles. Accuracy against the reference (which computes in
// double and rounds once) is in row_source.cpp.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "ir/fused_norm_ops.h"

namespace fusebox::cuda {

enum class RowOp { Softmax, LogSoftmax, LayerNorm, RmsNorm };

// What one generated source computes. Optional operands (scale, shift, bias, the sum result)
// are null pointers at run time, not variants.
struct RowVariant {
  RowOp op = RowOp::Softmax;
  DType dtype = DType::F32;
  bool residual = false;  // v = x + r (+ bias): the fused residual norms
  int vector = 1;         // elements per access: 1, or 16 bytes of the dtype
  int items = 32;         // elements per thread held in registers (kRowItemChoices)
  std::string key() const;
};

inline constexpr const char* kRowEntry = "fb_row";
inline constexpr int kRowThreads = 256;
inline constexpr int kRowItems = 32;  // the most elements per thread of a row held in registers
// The register budgets a variant is compiled for: the smallest that holds the row is launched, so
// that a short row does not pay registers (and occupancy) for the longest. On the H200, rows of
// 4096 f32 with 256 threads ran at 0.58-0.80 of copy bandwidth with 32 (74 registers, 3 blocks
// per SM); docs/cuda.md has the sweep.
inline constexpr int kRowItemChoices[] = {8, 16, 32};
// Threads of a row's block for rows long enough to fill it: 512 for rms norm (one block-wide
// reduction), kRowThreads (256) for softmax, log_softmax and layer norm (two: each costs every
// warp of the block a synchronisation), as the H200 sweep in docs/cuda.md measured; or the
// environment's FUSEBOX_CUDA_ROW_THREADS (32 to 1024, rounded down to a multiple of 32), read
// once, so the block size can be swept on a GPU. The sources are compiled for it
// (__launch_bounds__).
int row_threads(RowOp op);

// The CUDA C++ source of one variant (row_source.cpp). Kernel arguments, all 8 bytes:
//   (x, r, bias, scale, shift, y, sum, rows, n, bias_row_stride, bias_stride, scale_stride,
//    shift_stride, eps)
std::string row_source(const RowVariant& v);
// Every variant the backend can generate (the code generation test compiles each).
std::vector<RowVariant> all_row_variants();

// What a row op's kernel needs from its node.
struct RowSpec {
  RowOp op = RowOp::Softmax;
  bool residual = false;  // a fused residual norm
  NormRoles roles;        // operand positions; residual -1 for the plain ops
  double eps = 0;
  std::string keyword;
};
// The spec of a claimed row op (FUSEBOX_CHECKs that `n` is one).
RowSpec row_spec(const Node& n);

// One launch: the variant, the kernel's arguments in order, the grid.
struct RowLaunch {
  RowVariant variant;
  void* pointers[7] = {};  // x, r, bias, scale, shift, y, sum (null when absent)
  int64_t sizes[6] = {};   // rows, n, bias_row_stride, bias_stride, scale_stride, shift_stride
  double eps = 0;
  unsigned blocks = 0, threads = 0;  // blocks 0: nothing to do
};
// The launch for these operands and results; an error for operands the kernels do not take at
// run time (a parameter that is neither one value nor one row, rows of 2^30 elements or more).
Expected<RowLaunch> plan_row_launch(const RowSpec& spec, std::span<const BufferView> in, std::span<const BufferView> out);

// nullopt when `n` is not a row op (the backend looks further); else accept, or refuse with
// the reason (a dtype, an axis or a bias the kernels do not take).
std::optional<Claim> claim_row_op(const Graph& g, const Node& n);

// The kernel of a claimed row op; an error with the refusal's reason otherwise.
Expected<std::shared_ptr<const Kernel>> make_row_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

}  // namespace fusebox::cuda
