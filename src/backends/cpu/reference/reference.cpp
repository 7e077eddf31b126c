#include "backends/cpu/reference/reference.h"

#include <algorithm>
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

Status unsupported_dtype(const KernelArgs& args, DType t) {
  return Status::internal(std::string(args.node.info().keyword) + ": no reference kernel for dtype " +
                          std::string(dtype_name(t)));
}

Status run_reference(const Node& node, std::span<const Array> inputs, std::span<Array> outputs) {
  // Empty results leave nothing to compute (constant folding and region steps call here, not
  // only the executor, which skips them too): the kernels need not loop over an [0, 2^40] shape.
  bool all_empty = std::all_of(outputs.begin(), outputs.end(), [](const Array& a) { return a.numel() == 0; });
  if (all_empty) return Status::ok();
  return kKernels[static_cast<size_t>(node.op)](KernelArgs{node, inputs, outputs});
}

}  // namespace fusebox::cpu
