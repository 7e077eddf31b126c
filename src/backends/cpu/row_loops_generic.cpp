// The row loops for any processor: see row_loops.inc.
#define FUSEBOX_ISA row_generic
#include "backends/cpu/row_loops.inc"
