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
// Accuracy: the region is bit-exact to the reference. Element-wise steps round in f32 exactly
// as the reference kernels do (the same <cmath> calls, one step at a time); sums, means and
// products accumulate in double element by element in row order, as the reference's fold does,
// and round once; max and min propagate NaN. (Splitting the sums into vector lanes would be
// faster and lose that; tests/unit/reduction_region_test.cpp checks within 1e-4 relative plus
// 1e-5 absolute, so such a change is measured against the same bound.)
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
