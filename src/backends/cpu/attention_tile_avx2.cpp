// The attention block loop for processors with AVX2 and FMA; CMake sets this file's instruction set and
// attention_kernel.cpp calls it only where the processor has it (see attention_tile.inc).
#define FUSEBOX_ATTN_ISA avx2
#define FUSEBOX_ATTN_VL 8
#include "backends/cpu/attention_tile.inc"
