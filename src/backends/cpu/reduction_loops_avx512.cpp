// The reduction kernel's tile loops built for AVX-512 (F, VL, DQ, BW; 512-bit vectors; CMake adds
// the flags to this file only; reduction_kernel.cpp calls them only when the processor has them):
// see reduction_loops.inc.
#if defined(__x86_64__)
#define FUSEBOX_ISA red_avx512
#include "backends/cpu/reduction_loops.inc"
#else
#include "backends/cpu/reduction_loops.h"
namespace fusebox::cpu::red_avx512 {
const ReductionLoops& reduction_loops() { return red_generic::reduction_loops(); }
}  // namespace fusebox::cpu::red_avx512
#endif
