// to_nchwc and to_nchw on the GPU: the conversions into and out of the blocked layouts
// (ir/layout.h) where a value enters or leaves the NHWC part of a CNN (backends/cuda/
// conv_layout.h). Each is one transpose of a 5-D view of the same memory, run by the
// transform-step kernel (transform_step_kernel.h):
//
//   to_nchwc {block b}  [N,C,H,W] as [N,C/b,b,H,W] --perm [0,1,3,4,2]--> [N,C/b,H,W,b]
//   to_nchw             [N,C/b,H,W,b] --perm [0,1,4,2,3]--> [N,C/b,b,H,W] as [N,C,H,W]
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cuda/context.h"

namespace fusebox::cuda {

bool is_layout_op(Op op);
Claim claim_layout_op(const Graph& g, const Node& n);
Expected<std::shared_ptr<const Kernel>> make_layout_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                           const Node& n);

}  // namespace fusebox::cuda
