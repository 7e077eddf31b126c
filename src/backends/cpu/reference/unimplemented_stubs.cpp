// TEMPORARY while the reference kernels are written: weak definitions so the tree links.
// Removed before the foundation lands (then a missing kernel is a link error again).
#include "backends/cpu/reference/reference.h"

namespace fusebox::cpu {
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema)                 \
  __attribute__((weak)) Status ref_##name(const KernelArgs&) {                       \
    return Status::unimplemented("reference kernel for " kw " is not written yet"); \
  }
#include "ir/ops.def"
#undef FUSEBOX_OP
}  // namespace fusebox::cpu
