// The region loops for any x86-64 (or other) processor: see region_loops.inc.
#define FUSEBOX_ISA generic
#include "backends/cpu/region_loops.inc"
