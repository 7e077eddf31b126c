// The pre-processing row loops built for AVX2; CMake adds the flags to this file only and
// preprocess_rows.cpp calls them only when the processor has them: see preprocess_loops.inc.
#if defined(__x86_64__)
#define FUSEBOX_ISA row_avx2
#include "backends/cpu/preprocess_loops.inc"
#else
#include "backends/cpu/preprocess_rows.h"
namespace fusebox::cpu::row_generic { const PreprocessLoops& preprocess_loops(); }
namespace fusebox::cpu::row_avx2 {
const PreprocessLoops& preprocess_loops() { return row_generic::preprocess_loops(); }
}  // namespace fusebox::cpu::row_avx2
#endif
