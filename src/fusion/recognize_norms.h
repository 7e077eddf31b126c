// Recognition of layer norm and rms norm written out in primitives, one step of canonicalize
// (spec §3.1), as PyTorch exports nn.LayerNorm (opset < 17) and as RMS norm is usually written:
//
//   layer_norm   d = x - reduce_mean(x);  d / sqrt(reduce_mean(d²) + eps)  [· scale] [+ bias]
//   rms_norm     x / sqrt(reduce_mean(x²) + eps)  [· scale]
//
// d² is pow(d, 2) or mul(d, d); "/ sqrt(a)" is also "· rsqrt(a)", "· reciprocal(sqrt(a))" or
// "· (1 / sqrt(a))"; the add and the multiplications take either operand order. Both means
// keep dims and reduce the same axes, which must be a trailing range [axis, rank) (negative
// axes normalised); eps is a one-element constant (it becomes the attribute); scale and bias
// broadcast to x.shape[axis:] (numpy rules) and are absorbed only when they do; a bias without
// a scale gets a constant scale of ones (the bias's shape). The result
// keeps x's type. Every intermediate is read only inside the pattern (graph outputs count as
// uses). A structure that matches but fails one of these is left alone and reported with its
// reason ("eps is not a constant", "%3 is also read outside the pattern", ...).
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many norms were recognised; near-misses go to ctx.remarks.
int64_t recognize_norms(Graph& g, PassContext& ctx);

}  // namespace fusebox
