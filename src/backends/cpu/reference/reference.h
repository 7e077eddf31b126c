// The CPU reference backend: every op of ops.def written plainly and exactly, one op at a time.
// It is the oracle of every test: fused results are compared with it.
//
// Numeric conventions (docs/ir-syntax.md has the full list):
// - f32 computes in float, f64 in double; f16/bf16 convert to f32, compute, round back.
// - Integer arithmetic wraps (two's complement); integer div/mod by zero give 0; mod is floor
//   modulo (the result takes the divisor's sign), for floats too.
// - Float-to-integer casts truncate toward zero, NaN gives 0, out-of-range saturates to i64 and
//   then wraps to the target width.
#pragma once

#include <span>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox::cpu {

// Everything a kernel sees: the node (op + attributes), its operands and its preallocated
// results (shapes already inferred by the runtime; contents undefined: poisoned in tests).
struct KernelArgs {
  const Node& node;
  std::span<const Array> in;
  std::span<Array> out;
};

using ReferenceKernel = Status (*)(const KernelArgs&);

// Runs one node. Errors (an index out of range in gather, say) come back as a Status.
Status run_reference(const Node& node, std::span<const Array> inputs, std::span<Array> outputs);

// The error of a kernel asked for a dtype it does not implement (inference should have refused).
Status unsupported_dtype(const KernelArgs& args, DType t);

// One kernel per op, named ref_<Name> after the ops.def row. A row without its function fails to
// link, so adding an op without a reference kernel does not build.
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema) \
  Status ref_##name(const KernelArgs& args);
#include "ir/ops.def"
#undef FUSEBOX_OP

}  // namespace fusebox::cpu
