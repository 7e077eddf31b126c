// Recognition of softmax and log-softmax written out in primitives, one step of canonicalize
// (spec §3.1), as exporters write F.softmax / F.log_softmax when they decompose it:
//
//   softmax      e = exp(x - reduce_max(x));  e / reduce_sum(e)
//   log_softmax  d = x - reduce_max(x);       d - log(reduce_sum(exp(d)))
//
//   log_softmax  log(softmax(x))  (the op, imported or recognised above; a second round)
//
// with or without the max subtraction. The sum keeps dims and reduces one axis (negative axes
// normalised), which becomes the op's axis; the max, when absorbed, reduces the same axis with
// keepdims and is read only by the pattern; otherwise x - max stays and is the op's operand
// (softmax(x - c) = softmax(x) for any c, so that is exact too). Every other intermediate is
// read only inside the pattern (graph outputs count as uses); a structure refused for that or
// for its axes is reported as a near-miss.
//
// log(softmax(x)) gives -inf where a probability underflows to 0; log_softmax gives the finite
// x - max - log(sum), equal wherever the written form is finite.
//
// Without the max subtraction the primitives overflow where exp(x) does (x > ~88.7 in f32) and
// give inf/NaN; the op subtracts the max (docs/ir-syntax.md), so there it gives the finite,
// mathematically equal result. We recognise the form anyway: it is the same function wherever
// the written form is finite, and only more accurate elsewhere.
#pragma once

#include "fusion/pass.h"

namespace fusebox {

// Returns how many softmax and log-softmax were recognised; near-misses go to ctx.remarks.
int64_t recognize_softmax(Graph& g, PassContext& ctx);

}  // namespace fusebox
