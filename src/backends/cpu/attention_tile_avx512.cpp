// The attention block loop for processors with AVX-512F; CMake sets this file's instruction set and
// attention_kernel.cpp calls it only where the processor has it (see attention_tile.inc).
#define FUSEBOX_ATTN_ISA avx512
#define FUSEBOX_ATTN_VL 16
#include "backends/cpu/attention_tile.inc"
