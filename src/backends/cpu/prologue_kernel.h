// Native execution of an elementwise_region with a prologue (ir/region_prologue.h): the
// transform's plan (transform_kernel.h) gathers operand k into a buffer the size of the read,
// and the region's program (region_program.h) runs over it with the other operands. Both halves
// are the kernels the CPU runs for a transform_region and an elementwise_region alone, so the
// results equal the reference bit for bit.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox::cpu {

// The kernel of a region with a prologue; an error names what is malformed.
Expected<std::shared_ptr<const Kernel>> make_prologue_kernel(const Graph& g, const Node& region, Codegen codegen);

}  // namespace fusebox::cpu
