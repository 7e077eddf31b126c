// The CPU kernel of reduction_region (ir/reduction_region.h), f32. Rows run in parallel
// (OpenMP); each row runs in as many passes over its elements as the dependence between its
// reductions needs (a softmax: the max pass, the sum pass, the write pass; a layer norm: mean,
// variance, write), so no row-shaped intermediate is ever stored: a pass recomputes the
// element-wise steps it needs from the operands, tile by tile (256 elements), while the row sits
// in cache. The body runs on a small step interpreter over those tiles.
//
//   pass 0 .. P-1   evaluate the row steps a reduction of this pass reads; accumulate it
//   between passes  finish the reductions; evaluate the per-row steps that now have operands
//   pass P          evaluate the row-shaped results and write them
//
// Accuracy: element-wise steps round in f32 exactly as the reference kernels do (the same
// <cmath> calls in the same order), so a result that depends on no sum is bit-exact. Sums and
// means accumulate in f32 over tiles of 256 elements, each tile's total added in double, as the
// row kernels do (row_kernels.h); a product accumulates in double; max and min are exact and
// propagate NaN. Results are within 1e-4 relative plus 1e-5 absolute of the reference on sums
// whose terms do not cancel (tests/unit/reduction_region_test.cpp).
//
// Bodies with a step the interpreter does not have (or a dtype other than f32) run the
// reference kernel: correct, unfused speed.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace fusebox::cpu {

// The kernel for reduction_region node `n` of `g`, or null when its body needs the reference.
std::shared_ptr<const Kernel> make_reduction_kernel(const Graph& g, const Node& n);

}  // namespace fusebox::cpu
