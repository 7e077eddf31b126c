// batch_elementwise_region on the GPU: every item (crop) of the batch in one launch.
//
//   thread per element e of the batch result:
//     item i = e's coordinate on the batch axis / the item's extent; e' = e's index in the item
//     r  = the item's layout transform read backwards (a permutation such as HWC -> CHW: an
//          index function of the post transform's plan), or e' without one
//     the region body at r: the prologue operand through item i's transform tables (each item
//     crops differently; the device function is the same), the other operands by strides
//
// Item transforms share one device function: the items differ only in their tap tables, which
// are uploaded once, with an array of per-item argument structs the kernel indexes by i.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

// Why a batch region cannot run on the GPU ("" when it can).
std::string batch_region_unsupported(const Node& batch);

Expected<std::shared_ptr<const Kernel>> make_batch_kernel(std::shared_ptr<Context> context, const Node& batch);

// The kernel's source (for tests without a GPU: tables are not uploaded).
Expected<std::string> batch_kernel_source(const Node& batch);

}  // namespace fusebox::cuda
