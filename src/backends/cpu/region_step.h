// One step of a compiled region (see region_program.h) and the signature of its vectorised
// loop. Kept apart so the loops (region_loops.inc) compile without the program's internals.
#pragma once

#include <cstdint>

#include "ir/dtype.h"
#include "ir/op_info.h"

namespace fusebox::cpu {

struct StepArgs {
  Op op;
  DType dtype;     // result storage dtype
  DType in_dtype;  // storage dtype of the first operand
  float p0 = 0, p1 = 0;  // leaky alpha; clip min/max; hardsigmoid alpha/beta
  bool gelu_tanh = false;
};

// Computes n elements: src[k] points at operand k's tile, dst at the result's tile.
using StepFn = void (*)(const StepArgs&, const void* const* src, void* dst, int64_t n);

namespace generic { StepFn pick_fast_step(const StepArgs& s); }
namespace avx2 { StepFn pick_fast_step(const StepArgs& s); }

}  // namespace fusebox::cpu
