// The CPU kernel of a reduction over axes that end before the last one (reduce_sum, _mean, _max,
// _min, _prod of f32 or f64 over one run of adjacent axes): the sum over a batch axis of a
// gradient, a mean over the rows of a [rows, features] tensor, a reduction over the middle axis.
//
// The operand is read as [outer, reduced, inner] (the axes before, in and after the run). For
// each outer index, blocks of adjacent inner positions (as wide as the threads allow: each
// reduced row of a block is one contiguous read) accumulate along the reduced axis in the
// reference kernel's arithmetic: sums, means and products in double, max and min in the element
// type with NaN winning, each result rounded once. Every result folds its elements in the
// reference's order (row-major input order), so the results are the reference's bit for bit.
// Threads split the (outer, block) pairs. Reductions over the trailing axes go to the reduction
// kernel (make_row_reduce_kernel), anything else to the reference kernel.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace fusebox::cpu {

// A kernel for reduction node `n` of `g`, or null when its axes are not one run ending before
// the last axis or its dtype is not f32/f64.
std::shared_ptr<const Kernel> make_column_reduce_kernel(const Graph& g, const Node& n);

}  // namespace fusebox::cpu
