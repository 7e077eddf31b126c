// reduction_region on the GPU: the claim, and a Kernel running reduction_codegen's source.
//
// At each run the row shape S is the broadcast of the operands' shapes; each operand's strides
// over S are merged (leading dims apart from row dims, region_kernel.h's merge_dims) and passed
// with the sizes as one argument, so a new size never recompiles. One source per count of merged
// row dims, compiled through the Context (memory, disk, NVRTC) on first use and kept. Every launch
// goes on the context's stream with no allocation or synchronisation, so a plan holding it can be
// recorded as a CUDA graph.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cuda/context.h"
#include "backends/cuda/reduction_codegen.h"

namespace fusebox::cuda {

// Accepts a reduction_region whose body the kernel runs; else refuses with the reason (a step
// without device code, a dtype the reductions do not accumulate, a returned operand...).
Claim claim_reduction_region(const Graph& g, const Node& n);

// The kernel of a claimed reduction_region; an error with the refusal's reason otherwise.
Expected<std::shared_ptr<const Kernel>> make_reduction_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n);

// One launch of a plan over buffers of these shapes: the source variant, the FbRows argument
// (reduction_codegen.h) and the grid; rows == 0 when there is nothing to do.
struct ReductionLaunch {
  int row_dims = 1;
  std::vector<int64_t> args;  // FbRows, field by field
  int64_t rows = 0, n = 0;
  unsigned threads = 32;
};
Expected<ReductionLaunch> plan_reduction_launch(const ReductionPlan& plan, std::span<const BufferView> in);

}  // namespace fusebox::cuda
