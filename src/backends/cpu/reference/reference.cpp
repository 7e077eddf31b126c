#include "backends/cpu/reference/reference.h"

#include <array>

namespace fusebox::cpu {

namespace {

constexpr ReferenceKernel kKernels[] = {
#define FUSEBOX_OP(name, kw, min_in, max_in, num_out, kind, schema) &ref_##name,
#include "ir/ops.def"
#undef FUSEBOX_OP
};
static_assert(std::size(kKernels) == kNumOps, "every op of ops.def needs a reference kernel");

}  // namespace

Status run_reference(const Node& node, std::span<const Array> inputs, std::span<Array> outputs) {
  return kKernels[static_cast<size_t>(node.op)](KernelArgs{node, inputs, outputs});
}

}  // namespace fusebox::cpu
