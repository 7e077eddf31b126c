#include "backends/cpu/reference/reference.h"

#include <algorithm>
#include <array>
#include <vector>

#include "ir/layout.h"

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

namespace {

// A conv or pooling node with layout = "nchwc" runs as its plain form: blocked activations (x, and
// a fused conv's residual) are converted to NCHW, the node runs without its layout attribute, and
// the result is blocked again. The definition of the blocked ops, not a fast path.
Status run_via_plain_layout(const Node& node, std::span<const Array> inputs, std::span<Array> outputs) {
  Node plain = node;
  plain.attrs.erase("layout");
  const bool residual = node.op == Op::FusedConvBiasAct && node.attr_bool("has_residual");
  std::vector<Array> in(inputs.begin(), inputs.end());
  for (size_t i = 0; i < in.size(); ++i) {
    if (i == 0 || (residual && i + 1 == in.size())) in[i] = to_nchw(in[i]);
  }
  std::vector<Array> out;
  for (const Array& o : outputs) {
    const auto& s = o.shape();
    out.emplace_back(o.dtype(), std::vector<int64_t>{s[0], s[1] * s[4], s[2], s[3]});
  }
  FUSEBOX_RETURN_IF_ERROR(kKernels[static_cast<size_t>(node.op)](KernelArgs{plain, in, out}));
  for (size_t i = 0; i < out.size(); ++i) copy_to_nchwc(out[i], outputs[i]);
  return Status::ok();
}

}  // namespace

Status run_reference(const Node& node, std::span<const Array> inputs, std::span<Array> outputs) {
  // Empty results leave nothing to compute (constant folding and region steps call here, not
  // only the executor, which skips them too): the kernels need not loop over an [0, 2^40] shape.
  bool all_empty = std::all_of(outputs.begin(), outputs.end(), [](const Array& a) { return a.numel() == 0; });
  if (all_empty) return Status::ok();
  // global_avg_pool reads the blocked layout itself.
  if (has_nchwc_layout(node) && node.op != Op::GlobalAvgPool) return run_via_plain_layout(node, inputs, outputs);
  return kKernels[static_cast<size_t>(node.op)](KernelArgs{node, inputs, outputs});
}

}  // namespace fusebox::cpu
