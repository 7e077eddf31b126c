// Recognition of activations that exporters write out in primitives, one step of canonicalize
// (spec §3.1), so the contraction passes can take them as epilogues:
//
//   hardswish    div(mul(x, clip(add(x, 3), 0, 6)), 6)     (either mul operand order; the
//                constants are one-element tensors; x * clip(...) * (1/6) is left alone: 1/6 is
//                not exact in float)
//                mul(x, hardsigmoid(x) {alpha = 1/6, beta = 0.5})   (PyTorch's export of
//                F.hardswish below opset 14; x · (clip(x + 3, 0, 6) / 6) too, the clip form
//                having become a hardsigmoid in the first round; a second round)
//   silu         mul(x, sigmoid(x))                          (either operand order)
//   gelu         0.5 · x · (1 + erf(x / √2))                 (PyTorch's export of nn.GELU();
//                x · (1/√2) too; the three factors in any order and nesting; the half also
//                as x · (1 + erf(...)) / 2 or (x / 2) · (1 + erf(...)))
//   gelu tanh    0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))   (nn.GELU("tanh"); x³ as
//                pow(x, 3) or mul(x, mul(x, x)); products in either operand order; the half
//                written as for gelu)
//   hardsigmoid  clip(x + 3, 0, 6) / 6 or · (1/6)  ->  hardsigmoid {alpha = 1/6, beta = 0.5}
//                (ONNX HardSigmoid imports as the op directly)
//
// Constants match within kConstantTolerance (1e-6 relative, recognize_match.h). Every
// intermediate must be read only inside the pattern (graph outputs count as uses); a gelu or
// hardsigmoid that matched by structure but has an intermediate read elsewhere is reported as
// a near-miss, and so is x · hardsigmoid(x) with other alpha/beta. Layer and rms norm:
// recognize_norms.h; softmax: recognize_softmax.h.
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many activations were recognised; near-misses go to ctx.remarks.
int64_t recognize_activations(Graph& g, PassContext& ctx);

}  // namespace fusebox
