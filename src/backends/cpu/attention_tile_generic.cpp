// The attention block loop for any processor (128-bit vectors: SSE2 on x86-64); CMake sets this file's instruction set and
// attention_kernel.cpp calls it only where the processor has it (see attention_tile.inc).
#define FUSEBOX_ATTN_ISA generic
#define FUSEBOX_ATTN_VL 4
#include "backends/cpu/attention_tile.inc"
