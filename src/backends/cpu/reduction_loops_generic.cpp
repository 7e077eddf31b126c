// The reduction kernel's tile loops for any processor: see reduction_loops.inc.
#define FUSEBOX_ISA red_generic
#include "backends/cpu/reduction_loops.inc"
