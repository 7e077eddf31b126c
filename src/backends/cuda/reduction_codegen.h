// CUDA C++ for a reduction_region body (ir/reduction_region.h): one kernel, one block per row.
//
//   block b takes rows b, b + gridDim.x, ...; its T threads (a multiple of 32) stride over the
//   row's n elements (thread t: elements t, t + T, ...)
//
//   per row     operand offsets from the row index; per-row operands (shape K) loaded once;
//               constants and per-row steps that need no reduction
//   pass 0..P-1 every thread evaluates, at each of its elements, the element-wise steps the
//               pass's reductions read, and folds them; the block combines the threads'
//               partials; then the per-row steps that now have their operands
//   pass P      the row-shaped results evaluated and stored; thread 0 stores the per-row ones
//
// A reduction's pass is one more than the latest pass of the reductions it depends on (softmax:
// max in pass 0, sum in pass 1, the write in pass 2), so no row-shaped intermediate is ever
// stored: each pass recomputes the steps it needs from the operands.
//
// The element-wise steps are region_codegen's (body_function), so each step rounds as the
// unfused op does, f16/bf16 values rounded to their dtype after every step. Sums and means
// accumulate in double (each thread over its elements, then the warps' partials in warp order)
// and round once, products too; max and min are exact, NaN propagating as in the reference.
// Only the order of the double additions differs from the reference's row-order fold.
//
// Operands broadcast into the row shape S by strides: the leading (row index) dims and the row
// dims are merged separately where every operand walks them contiguously, and sizes and strides
// are kernel arguments, so a new size never recompiles; the source depends on the number of row
// dims left after merging (1 for a row over the last axis, whatever S's rank).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox::cuda {

inline constexpr const char* kReductionEntry = "fb_reduction";
inline constexpr int kReductionThreads = 256;  // threads of a block for rows of 256 or more
inline constexpr int kMaxReductionDims = 8;    // leading dims, and row dims, after merging
// Kernel arguments stay within 4 KiB: the strides of this many operands.
inline constexpr size_t kMaxReductionOperands = 24;

// The kernel's view of a checked body: which values vary along the row, when each is ready.
struct ReductionPlan {
  std::shared_ptr<const Graph> body;
  int64_t row_axes = 1;
  int rank = 0;                  // S's rank
  std::vector<bool> row;         // per value: varies along the row (else one value per row)
  int passes = 0;                // reduction passes P; pass P writes the row-shaped results
  // Per pass 0..P: the row-shaped values it evaluates at every element (the operands of its
  // reductions, or the row-shaped results in pass P) and the body nodes that compute them.
  std::vector<std::vector<ValueId>> targets;
  std::vector<std::vector<size_t>> row_nodes;
  std::vector<std::vector<size_t>> reductions;  // per pass < P: the reduction nodes it folds
  std::vector<std::vector<size_t>> ready;       // per pass 0..P: per-row nodes computed before it
};

// The plan of a reduction_region body with `row_axes` row axes; an error says why the body has
// no kernel (a reduction of a dtype the kernel does not accumulate, a returned operand or
// constant, too many operands).
Expected<std::shared_ptr<const ReductionPlan>> plan_reduction(std::shared_ptr<const Graph> body, int64_t row_axes);

// The kernel source for rows whose dims merge to `row_dims` dims (1..kMaxReductionDims); an
// error names a step without device code. Arguments:
//   (const void* operand..., void* result..., FbRows a)
//   FbRows = { i64 rows, n, lead_rank; i64 lead_dims[8]; i64 lead_strides[K][8];
//              i64 row_dims[row_dims]; i64 row_strides[K][row_dims]; }   K = max(operands, 1)
// Row-shaped results are stored contiguously (element j of row r at r * n + j), per-row
// results at r.
Expected<std::string> reduction_source(const ReductionPlan& plan, int row_dims);

}  // namespace fusebox::cuda
