// Machine code for an elementwise_region body, generated with LLVM (ORC LLJIT) for the host
// processor. Where the interpreter (region_program.cpp) runs each step as its own loop over a
// tile register in L1, a generated kernel is one loop whose steps all stay in vector registers:
//
//   kernel(operands, outputs, n):          L = jit_lanes(body): 64, 32 or 16
//     for i in [0, n) step L:    load operands[k][i..i+L)    (contiguous)  or a splat (repeated)
//                                every step on L-lane vectors
//                                store outputs[j][i..i+L)    (non-temporal when streaming)
//     scalar tail for the last n % L elements
//
// A body with a long dependency chain per element runs in stages (jit_stage_starts):
//
//     for each block of kJitStageBlock elements:
//       stage 0: for i in block step L: its steps; store values later stages read -> buffers
//       stage 1: for i in block step L: load them back (L1), its steps, ...
//       ...      each output is stored by the stage that computes it
//
// Semantics are those of the reference kernels, step for step (same operation order, NaN rules
// and saturating casts), bit for bit. Only the approximated functions (exp, tanh, sigmoid, silu,
// gelu, log, erf, sin, cos) differ in rounding: range reductions and polynomials with fused
// multiply-adds where the processor has them, relative error below 4e-7.
//
// Kernels are cached by structure: the body's text, which operands are repeated, streaming.
// Without LLVM in the build, jit_compile returns an `unimplemented` error and the interpreter runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/graph.h"

namespace fusebox::cpu {

// operands[k]: operand k's first element (a contiguous run of n, or the one repeated element);
// outputs[j]: output j's first element.
using JitKernelFn = void (*)(const void* const* operands, void* const* outputs, int64_t n);

// Most lanes per vector iteration (a kernel uses 64, 32 or 16: jit_lanes); callers keep chunk
// starts a multiple of it, so streaming stores stay aligned.
inline constexpr int64_t kJitMaxLanes = 64;

struct JitVariant {
  // repeated[k]: operand k is one element repeated (empty: none is). Any number of operands: a
  // lazy chain's lifted scalars give a region one operand per step.
  std::vector<bool> repeated;
  bool is_repeated(size_t k) const { return k < repeated.size() && repeated[k]; }
  bool streaming = false;  // non-temporal stores; every output 64-byte aligned at index 0
  // Whether approximated functions may use AVX-512-only instructions (vscalefps, vpermi2ps)
  // where the host has them; false gives the code other x86 hosts run (tests use it).
  bool avx512 = true;
};

class JitKernel {
 public:
  virtual ~JitKernel() = default;
  virtual JitKernelFn function() const = 0;
};

// Lanes per vector iteration for `body`: 64 (four 16-lane registers per value: four independent
// dependency chains for the out-of-order core) while at most 8 values are live at once, 32 up
// to 16, else 16, so that live values stay in the 32 vector registers.
int64_t jit_lanes(const Graph& body);

// Stages of a long body: where the body's dependency chain per element is long (several
// approximated functions), the out-of-order core cannot overlap enough iterations to keep its
// pipes busy. The kernel then runs the body in stages over blocks of kJitStageBlock elements:
// stage s computes its steps for the whole block and leaves the values later stages need in
// block buffers on the stack (in L1). Returns the index of each stage's first step (0 first);
// stages are cut so that each carries at most about kJitStageWeight (an approximated function
// weighs 12, a division or square root 4, other steps 1). A body whose buffers would take more
// than kJitStageBufferBytes runs in one stage.
inline constexpr int64_t kJitStageBlock = 256;
inline constexpr int kJitStageWeight = 24;
inline constexpr int64_t kJitStageBufferBytes = 32 * 1024;
std::vector<size_t> jit_stage_starts(const Graph& body);

// Whether this build generates code (LLVM found at configure time).
bool jit_built();

// Empty when every step of `body` has generated code; otherwise names the first step that does
// not (its op and dtype), for the interpreter fallback and for reports.
std::string jit_unsupported_step(const Graph& body);

// Process-wide counts: kernels generated, and compiles answered from the structural cache.
struct JitStats {
  uint64_t compiled = 0;
  uint64_t cache_hits = 0;
};
JitStats jit_stats();

// Compiles (or finds in the cache) the kernel of `body` for `variant`. Thread-safe.
Expected<std::shared_ptr<const JitKernel>> jit_compile(const Graph& body, JitVariant variant);

}  // namespace fusebox::cpu
