// Batch-norm folding, one step of canonicalize (spec §3.1): `batch_norm(conv2d(x, w, b0))` in
// inference form is the conv with scaled weights and a shifted bias,
//
//   s  = scale / sqrt(var + eps)          per output channel
//   w' = w * s[C,1,1,1]                   b' = (b0 - mean) * s + bias   (b0 = 0 when absent)
//
// so the pair becomes `conv2d(x, w', b')`. The same holds after a `conv_transpose2d` of one
// group, whose weights are [in, out, kh, kw]: w' = w * s[1,C,1,1] (several groups: left as they
// are); and when the conv's bias is written as an add of a per-channel value between the conv and
// the batch norm (as exporters write a transposed conv's), that add folds into b0 too. The helper nodes fold
// to constants when the parameters are constants (the usual case for an imported model); otherwise they run
// on the [C]-sized parameters each run. Only a conv whose result the batch norm alone reads is folded.
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many batch norms were folded.
Expected<int64_t> fold_batch_norms(Graph& g, PassContext& ctx);

}  // namespace fusebox
