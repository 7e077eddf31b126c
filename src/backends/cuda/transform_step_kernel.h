// A lone index-only op (resize, slice, transpose, flip, pad) on the GPU as a one-step
// transform_region (ir/transform_region.h), run by the transform_region kernel (region_kernel.h
// TransformKernel) through the shared transform plan (backends/transform_plan.h).
//
// The plan maps output coordinates to source taps for one set of sizes, and its device function
// has those sizes in its source. A step whose sizes the graph fixes is planned and compiled when
// the graph compiles; one with run-time sizes (the FPN upsampling of a detector over images of
// any size) is planned at its first run with each set of sizes, and the kernel keeps one
// transform per set (the compiled cubins are also in the context's disk cache). A runtime that
// records a CUDA graph runs a new set of sizes once unrecorded first, so no plan is made while
// recording.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

// Whether `op` is one of the ops this kernel runs alone.
bool is_transform_step_op(Op op);

// Why node `n` of `g` cannot run as a one-step transform on the GPU ("" when it can): the
// transform_region's own rules (one operand, no cubic resize, ...) and, where the sizes are
// known, the plan's refusal.
std::string transform_step_unsupported(const Graph& g, const Node& n);
inline Claim claim_transform_step(const Graph& g, const Node& n) {
  std::string why = transform_step_unsupported(g, n);
  return why.empty() ? Claim::accept() : Claim::refuse(std::move(why));
}

Expected<std::shared_ptr<const Kernel>> make_transform_step_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                                   const Node& n);

}  // namespace fusebox::cuda
