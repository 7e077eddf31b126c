// The CPU kernel of reduction_region (ir/reduction_region.h), f32. Rows run in parallel
// (OpenMP); each row runs in as many passes over its elements as the dependence between its
// reductions needs (a softmax: the max pass, the sum pass, the write pass; a layer norm: mean,
// variance, write), so no row-shaped intermediate goes to memory: a pass evaluates the
// element-wise steps it needs from the operands, tile by tile (1024 elements), while the row sits
// in cache. The body runs on a small step interpreter over those tiles, or as generated code.
//
//   pass 0 .. P-1   evaluate the row steps a reduction of this pass reads; accumulate it
//   between passes  finish the reductions; evaluate the per-row steps that now have operands
//   pass P          evaluate the row-shaped results and write them
//
// The body's row steps run on vectorised tile loops (reduction_loops.inc, one build per ISA:
// generic, AVX2 + FMA, AVX-512, the best the processor has chosen at run time, as for the row
// kernels), one loop per step; or, where the build has LLVM, as generated code (region_jit.h):
// each pass's row steps compiled into one loop over the tile with every step in vector
// registers, writing only what is read after them (the pass's reduction operands, kept rows,
// results). `codegen` chooses as for element-wise regions (region_program.h): Auto generates code
// for runs of at least kJitMinElements, Interpreter never, Jit always (tests); a pass with a step
// that has no generated code runs on the interpreter under Auto. A row value that a later pass reads again (a
// softmax's e = exp(x - max), computed by the sum pass, read by the write pass) is kept in a per-thread row
// buffer rather than computed twice, while the kept rows fit in 256 KiB; longer rows recompute it.
//
// Accuracy (the rule of the row kernels, row_kernels.h; tests/unit/reduction_region_test.cpp):
// - sums and means accumulate in 64 f32 lanes (element i in lane i mod 64) over each tile of
//   1024 elements, each lane's part added to its own double, the 64 doubles summed at the row's
//   end: within a few f32 roundings of the exact sum at any length; products accumulate in
//   double; max and min are exact and propagate NaN; a mean divides in double; each reduction
//   rounds to f32 once;
// - row-shaped element-wise steps round in f32 one step at a time as the reference kernels do
//   (FMA contraction inside a step may round once less; in the tile loops a division by a
//   per-row value multiplies by its reciprocal, one more rounding); in the tile loops exp, tanh,
//   sigmoid, silu and tanh-gelu are simd_math.h's (relative error below 4e-7; exp below -87.3
//   gives about 1e-38 where the reference gives 0 or a subnormal), log, erf, exact gelu and pow
//   <cmath>'s; generated code rounds as region_jit.h says (its approximated functions below 4e-7);
// - per-row steps (a statistic's eps, rsqrt, log) run scalar code that rounds as the reference
//   kernels do (steps without it: one-step generated code, region_jit.h's rounding).
// Results are within 1e-5 relative plus 1e-6 absolute of the reference for the bodies whose
// result is well conditioned in their reductions (softmax, log-sum-exp, the norms, row sums of
// one sign); a body that cancels (a sum of values of both signs much smaller than their
// magnitudes) amplifies the sums' rounding by that ratio, as any reordered sum does. NaN and
// infinities propagate as in the reference.
//
// A step that has generated code but no tile loop or scalar code here (floor, ceil, round, clip,
// hardsigmoid, hardswish, sin, cos) runs as generated code at any size: a row step in its pass's
// code, a per-row step as a one-step body called once per row. Where no code can be generated (no
// LLVM, or the interpreter asked for) the kernel declines such a body. Bodies it declines, and
// those with a step that has no code at all (or a dtype other than f32), run the reference
// kernel: correct, unfused speed.
#pragma once

#include <memory>
#include <string>

#include "backends/backend.h"
#include "backends/cpu/region_program.h"
#include "backends/cpu/row_kernels.h"

namespace fusebox::cpu {

// The kernel for reduction_region node `n` of `g` on the loops of `isa` (which the processor must
// have), or null when its body needs the reference.
// How the CPU runs reduction_region `n` (for reports): whether the reduction kernel takes its body
// (else the reference kernels run it), and the first row step that has no generated code
// ("op -> dtype"; empty when every pass has code, as in any build without LLVM: see jit_built).
struct ReductionCodegen {
  bool kernel = false;
  std::string missing;
};
ReductionCodegen reduction_codegen(const Node& n);

std::shared_ptr<const Kernel> make_reduction_kernel(const Graph& g, const Node& n,
                                                    RowIsa isa = best_row_isa(),
                                                    Codegen codegen = Codegen::Auto);

// A lone reduce_sum/_mean/_max/_min/_prod of f32 over the trailing axes (keepdims or not) as a
// reduction region of one step: the kernel's passes, vectorised and parallel over rows, instead of
// the reference kernel. Null for any other node.
std::shared_ptr<const Kernel> make_row_reduce_kernel(const Graph& g, const Node& n,
                                                     RowIsa isa = best_row_isa(),
                                                     Codegen codegen = Codegen::Auto);

}  // namespace fusebox::cpu
