// Native execution of a batch_elementwise_region (ir/batch_region.h). The row path
// (batch_rows.h) runs every batch whose form it takes: one pass per item and output row, straight
// into the result. The general path below runs the rest: per item, the prologue
// kernel of its region (prologue_kernel.h: the crop/resize transform a window of rows at a time,
// the region's program over each window) and the per-item transform's plan, written straight
// into the item's slice of the result when that slice is contiguous. Items run in parallel when
// there are at least as many as threads; otherwise one after the other, each spreading its row
// windows over the threads. Every part is a kernel the CPU runs alone, so the results equal the
// reference bit for bit.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"

namespace fusebox::cpu {

// The kernel of a batch node; null (not an error) when some item cannot run natively, so the
// caller falls back to the reference kernel; an error names what is malformed.
Expected<std::shared_ptr<const Kernel>> make_batch_kernel(const Node& batch, Codegen codegen);

}  // namespace fusebox::cpu
