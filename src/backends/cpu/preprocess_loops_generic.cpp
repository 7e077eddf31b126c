// The pre-processing row loops for any processor: see preprocess_loops.inc.
#define FUSEBOX_ISA row_generic
#include "backends/cpu/preprocess_loops.inc"
