// The tile loops of the reduction kernel (reduction_kernel.h), one set per ISA
// (reduction_loops.inc, built like the row loops: generic, AVX2 + FMA, AVX-512), chosen by the
// kernel from the row kernels' ISA list (row_kernels.h). Kept apart so the loops compile without
// the kernel's plan.
#pragma once

#include <cstdint>

#include "backends/cpu/row_kernels.h"
#include "ir/op_info.h"

namespace fusebox::cpu {

// One element-wise step of a body as the loops see it.
struct TileStep {
  Op op;
  float alpha = 0;  // leaky_relu
  bool gelu_tanh = false;
};

// The loops over one tile of at most kReductionTile elements. An operand stride is 1 (a tile of
// the row) or 0 (one value for the whole tile); out never aliases an operand.
inline constexpr int64_t kReductionTile = 1024;

inline constexpr int kAccLanes = 64;

// The accumulators of reduction `op` before a row's first element.
void start_lanes(Op op, double* lanes);
// The reduction of the row (a sum, not yet divided for a mean) from its accumulators.
double finish_lanes(Op op, const double* lanes);

struct ReductionLoops {
  // out[i] = step(a[i·sa]).
  void (*unary)(const TileStep& s, float* out, const float* a, int sa, int64_t n);
  // out[i] = op(a[i·sa], b[i·sb]).
  void (*binary)(Op op, float* out, const float* a, int sa, const float* b, int sb, int64_t n);
  // Folds a[i·sa], i < n, into a row's kAccLanes accumulators (start_lanes, finish_lanes): sums
  // (and means) in f32 lanes over the tile, each lane's part added to its double; products in
  // double lanes, into lane 0; max and min exact, a lane that meets a NaN keeping it.
  void (*accumulate)(Op op, const float* a, int sa, int64_t n, double* lanes);
};

namespace red_generic { const ReductionLoops& reduction_loops(); }
namespace red_avx2 { const ReductionLoops& reduction_loops(); }
namespace red_avx512 { const ReductionLoops& reduction_loops(); }

// The loops of `isa` (which the processor must have: row_isa_available).
const ReductionLoops& reduction_loops(RowIsa isa);

}  // namespace fusebox::cpu
