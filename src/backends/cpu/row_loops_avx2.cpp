// The row loops built for AVX2 + FMA (CMake adds the flags to this file only; row_kernels.cpp
// calls them only when the processor has both): see row_loops.inc.
#if defined(__x86_64__)
#define FUSEBOX_ISA row_avx2
#include "backends/cpu/row_loops.inc"
#else
#include "backends/cpu/row_kernels.h"
namespace fusebox::cpu::row_generic { const RowLoops& row_loops(); }
namespace fusebox::cpu::row_avx2 {
const RowLoops& row_loops() { return row_generic::row_loops(); }
}  // namespace fusebox::cpu::row_avx2
#endif
