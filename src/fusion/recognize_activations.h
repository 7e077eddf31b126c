// Recognition of activations that exporters write out in primitives, one step of canonicalize
// (spec §3.1), so the contraction passes can take them as epilogues:
//
//   hardswish   div(mul(x, clip(add(x, 3), 0, 6)), 6)      (either mul operand order; the
//               constants are one-element tensors; x * clip(...) * (1/6) is left alone: 1/6 is
//               not exact in float)
//   silu        mul(x, sigmoid(x))                           (either operand order)
//
// Every intermediate must be read only inside the pattern (graph outputs count as uses). Layer
// norm, gelu, softmax and the other forms of spec §3.1 are a later addition.
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many activations were recognised.
int64_t recognize_activations(Graph& g);

}  // namespace fusebox
