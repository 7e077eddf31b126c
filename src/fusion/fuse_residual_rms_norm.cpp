// fuse-residual-rms-norm — `rms_norm(x + r (+ bias))` with x and r of the same type (the residual
// connection before a pre-norm block of LLaMA-style models) as one fused_residual_rms_norm: the
// sum is formed while the row's mean square is gathered instead of in a separate pass over
// memory.
//
// Matches: an rms_norm whose input is `add x, r` with both operands of the sum's full type, or
// `add (add x, r), bias` where bias broadcasts into the sum and the inner sum is read only
// there. A broadcasting add alone is a bias, never a residual (defect 8): a missed entry, as are
// a bias that would broadcast the sum up, an inner sum read elsewhere, an unclaimed kind or
// dtype. Produces: `fused_residual_rms_norm x, r[, bias][, scale] {axis, eps, has_bias}`
// defining the norm's result, and the sum as a second result when it is also read elsewhere or
// returned (never swallowed). Requires: a verified graph. Preserves: inputs, output positions,
// every value read outside the match. Definition and unfuse rule: ir/fused_norm_ops.h.
#include "fusion/residual_norm.h"

namespace fusebox {

Status run_fuse_residual_rms_norm(Graph& g, PassContext& ctx) {
  return fuse_residual_norm(g, ctx, Op::RmsNorm, Op::FusedResidualRmsNorm, FusedKind::ResidualRmsNorm,
                            "fuse-residual-rms-norm");
}

}  // namespace fusebox
