// The region loops built for AVX2 (CMake adds -mavx2 to this file only; region_program.cpp
// calls them only when the processor has AVX2): see region_loops.inc.
#if defined(__x86_64__)
#define FUSEBOX_ISA avx2
#include "backends/cpu/region_loops.inc"
#else
#include "backends/cpu/region_step.h"
namespace fusebox::cpu::avx2 {
StepFn pick_fast_step(const StepArgs& s) { return generic::pick_fast_step(s); }
}  // namespace fusebox::cpu::avx2
#endif
