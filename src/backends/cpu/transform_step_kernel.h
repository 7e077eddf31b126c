// A lone index-only step on the CPU (resize, transpose, slice, pad, flip that joined no
// transform_region) as a transform_region of one step: one pass over its output through the
// transform plan (transform_kernel.h), bit for bit the reference's results, instead of the
// reference kernel's per-element index arithmetic. Planned once per set of operand and result
// sizes; sizes the plan does not cover run on the reference kernel.
#pragma once

#include <memory>

#include "backends/backend.h"

namespace fusebox::cpu {

// The kernel for node `n` of `g`, or null when it is not such a step.
std::shared_ptr<const Kernel> make_transform_step_kernel(const Graph& g, const Node& n);

}  // namespace fusebox::cpu
