// The named row ops (softmax, log_softmax, layer_norm, rms_norm over the last axis, f32) written
// back as the primitives they stand for, so fuse-reduction-regions can put one in a region
// together with the element-wise steps around it: canonicalize may have recognised only part of a
// written-out form (`x * rsqrt(mean(x·x) + eps) * 2 + 1` becomes rms_norm(x, 2) + 1), and the
// softmax or norm plus its neighbours is then still one kernel.
//
//   softmax      m = max(x)  e = exp(x - m)  y = e / sum(e)                    (keepdims, axis -1)
//                (x = (a - max(a)) * c with a constant c > 0: e = exp(x), its max being 0)
//   log_softmax  m = max(x)  d = x - m       y = d - log(sum(exp(d)))
//   rms_norm     y = x * rsqrt(mean(x·x) + eps) (* scale)
//   layer_norm   c = x - mean(x)  y = c * rsqrt(mean(c·c) + eps) (* scale) (+ shift)
//
// The primitives round in f32 where the named ops' reference kernels compute in double and round
// once: the results agree within a few f32 roundings (1e-5 relative), not bit for bit.
#pragma once

#include <vector>

#include "ir/graph.h"

namespace fusebox {

// Whether node n of g is a row op that expand_row_op can write out (f32, last axis, rank >= 1).
bool is_expandable_row_op(const Graph& g, const Node& n);

// The primitive nodes for row op n (new values are added to g; the last node defines n's result).
std::vector<Node> expand_row_op(Graph& g, const Node& n);

}  // namespace fusebox
