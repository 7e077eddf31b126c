// What fuse-residual-layer-norm and fuse-residual-rms-norm share: finding `norm(x + r (+ bias))`
// and replacing it by the fused normalisation of ir/fused_norm_ops.h.
//
//        x     r                 decide   the norm's input is an add; it is the residual add
//         \   /                           (both operands of the sum's full type) or a bias add
//   t =    add      bias                  (one operand broadcasts into the other, which is a
//            \     /                      single-use residual add); anything else is a missed
//   s =       add                         entry with its reason (a broadcasting add is never a
//              |                          residual: defect 8)
//   y =       norm  (scale, shift)
//                                materialize  one fused node defining y, and s too when s is
//                                             read elsewhere or returned (its second result)
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Rewrites every `norm_op` (Op::LayerNorm or Op::RmsNorm) fed by a residual add into the fused
// normalisation `fused_op`, recording refusals under `pass`.
Status fuse_residual_norm(Graph& g, PassContext& ctx, Op norm_op, Op fused_op, FusedKind kind, const char* pass);

}  // namespace fusebox
