// The reduction kernel's tile loops built for AVX2 + FMA (CMake adds the flags to this file only;
// reduction_kernel.cpp calls them only when the processor has both): see reduction_loops.inc.
#if defined(__x86_64__)
#define FUSEBOX_ISA red_avx2
#include "backends/cpu/reduction_loops.inc"
#else
#include "backends/cpu/reduction_loops.h"
namespace fusebox::cpu::red_avx2 {
const ReductionLoops& reduction_loops() { return red_generic::reduction_loops(); }
}  // namespace fusebox::cpu::red_avx2
#endif
