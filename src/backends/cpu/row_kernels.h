// Fast CPU kernels for ops that reduce along the last axis and write the row back: softmax,
// log_softmax, layer_norm, rms_norm and the fused residual norms (ir/fused_norm_ops.h), f32.
// Each row is read from memory once: the statistics passes run over the row while it sits in
// cache (at most two for layer norm: the mean, then the variance around it), the last pass
// writes the result. Rows run in parallel (OpenMP); the loops are built per ISA (generic,
// AVX2, AVX-512: row_loops.inc) and the best the processor has is chosen at run time.
//
// Accuracy (the reference computes in double and rounds once; tests/unit/row_kernels_test.cpp):
// - sums and sums of squares accumulate in f32 vector lanes over blocks of 256 elements, each
//   block's total added in double: within a few f32 roundings of the exact sum at any length;
// - layer norm's variance is summed around a first f32 estimate of the mean and corrected, so
//   its accuracy follows the row's spread, not its mean; mean, variance, 1/sqrt in double;
// - the element-wise parts round in f32: layer norm's ((v - m) - c) · rstd · scale + shift, rms
//   norm's v · rstd · scale, softmax's e^(x - max) · (1 / sum), log_softmax's
//   (x - max) - log(sum); softmax's exp is simd_math.h's e^r polynomial after a cheaper range
//   reduction for arguments <= 0 (row_loops.inc: exp_nonpositive; below -87.3 it gives ~1e-38
//   where the reference rounds to 0).
// Results are within 1e-5 relative plus 1e-6 absolute of the reference (the tolerance of fused
// vs reference f32, STYLE.md §6); the residual sum x + r (+ bias) is rounded exactly as the
// unfused adds are, so a returned sum is bit-exact. NaN and infinities propagate as in the
// reference: a NaN anywhere in a row makes the row NaN.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

#include "backends/backend.h"

namespace fusebox::cpu {

enum class RowIsa { Generic, Avx2, Avx512 };
std::string_view row_isa_name(RowIsa isa);
bool row_isa_available(RowIsa isa);
// The widest ISA the processor has, or a narrower one FUSEBOX_ROW_ISA (generic, avx2) names; read
// once.
RowIsa best_row_isa();

// One norm over rows of n contiguous f32: v = x (+ r) (+ bias), y = norm(v) · scale (+ shift).
struct NormRows {
  const float* x = nullptr;
  const float* r = nullptr;      // null: a plain norm
  const float* bias = nullptr;   // null, or rows of n at bias_row_stride (0: one row for all)
  int64_t bias_row_stride = 0;
  const float* scale = nullptr;  // null or n values
  const float* shift = nullptr;  // null or n values (layer norm only)
  float* y = nullptr;
  float* sum = nullptr;          // null unless the sum is a result
  int64_t rows = 0, n = 0;
  double eps = 0;
  bool rms = false;
};

// The per-row loops of one ISA (row_loops.inc).
struct RowLoops {
  void (*softmax_row)(const float* x, float* y, int64_t n, bool log);
  void (*norm_row)(const NormRows& a, int64_t row);
  // The sum of n contiguous floats: f32 lanes over blocks of 256, the blocks' sums in double.
  double (*sum)(const float* v, int64_t n);
};
const RowLoops& row_loops(RowIsa isa);

// Whole tensors, rows in parallel.
void softmax_rows(RowIsa isa, const float* x, float* y, int64_t rows, int64_t n, bool log);
void norm_rows(RowIsa isa, const NormRows& a);

// The row kernel for node `n` of `g` (f32, normalised over the last axis only), or null when
// the node is not one the row kernels take; at run time, operands whose sizes the rows do not
// cover (a scale that broadcasts, a bias along another axis) run the reference kernel instead.
std::shared_ptr<const Kernel> make_row_kernel(const Graph& g, const Node& n, RowIsa isa);

}  // namespace fusebox::cpu
