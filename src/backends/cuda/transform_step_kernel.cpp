#include "backends/cuda/transform_step_kernel.h"

#include <cmath>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/region_kernel.h"
#include "backends/transform_plan.h"
#include "ir/check.h"
#include "ir/transform_region.h"

namespace fusebox::cuda {

namespace {

TensorType concrete(DType dtype, const std::vector<int64_t>& dims) { return TensorType{dtype, make_shape(dims)}; }

// Runs the step through one transform_region kernel per set of operand and result sizes.
class TransformStepKernel final : public Kernel {
 public:
  TransformStepKernel(std::shared_ptr<Context> c, const Node& step, DType in, DType out)
      : context_(std::move(c)), step_{step.op, {}, {}, step.attrs, nullptr, step.loc}, in_dtype_(in), out_dtype_(out) {}

  // The kernel of these sizes, planned and compiled on first use.
  Expected<std::shared_ptr<const Kernel>> sized(const std::vector<int64_t>& in, const std::vector<int64_t>& out) const {
    std::vector<int64_t> key = in;
    key.push_back(-1);  // a separator: [2,3]+[4] is not [2]+[3,4]
    key.insert(key.end(), out.begin(), out.end());
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = kernels_.find(key); it != kernels_.end()) return it->second;
    }
    const Node region = transform_step_region(step_, concrete(in_dtype_, in), concrete(out_dtype_, out));
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> k, TransformKernel::make(context_, region));
    std::lock_guard<std::mutex> lock(mu_);
    kernels_.emplace(std::move(key), k);
    return k;
  }

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 1 && out.size() == 1) << "transform step operands";
    if (out[0].numel() == 0) return Status::ok();
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Kernel> k, sized(in[0].shape, out[0].shape));
    return k->run(stream, in, out);
  }
  std::string_view kind() const override { return "cuda_transform"; }

 private:
  std::shared_ptr<Context> context_;
  Node step_;  // op and attributes only
  DType in_dtype_, out_dtype_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const Kernel>> kernels_;
};

std::vector<int64_t> static_sizes(const TensorType& t) {
  std::vector<int64_t> out;
  for (const Dim& d : t.shape) out.push_back(d.value());
  return out;
}

}  // namespace

bool is_transform_step_op(Op op) {
  return op == Op::Resize || op == Op::Slice || op == Op::Transpose || op == Op::Flip || op == Op::Pad;
}

std::string transform_step_unsupported(const Graph& g, const Node& n) {
  const std::string what(n.info().keyword);
  std::string why;
  if (!is_transform_step(g, n, &why, /*allow_dynamic=*/true)) return what + ": " + why;
  const TensorType& in = g.type(n.inputs[0]);
  const TensorType& out = g.type(n.outputs[0]);
  if (size_t(in.rank()) > 16 || size_t(out.rank()) > 16) return what + " over more than 16 axes";
  if (n.op == Op::Resize && n.has_attr("scales")) {
    for (double s : n.attr_f64s("scales"))
      if (!(s > 0) || !std::isfinite(s)) return what + " with a scale that is not positive and finite";
  }
  // Sizes known now: the plan itself decides (an empty axis, more than 16 axes after views).
  if (!is_static(in.shape) || !is_static(out.shape)) return "";
  const Node region = transform_step_region(n, in, out);
  std::shared_ptr<const TransformPlan> plan = plan_transform_region(region, &why);
  if (!plan) return what + ": its transform has no plan: " + why;
  return device_transform_unsupported(*plan);
}

Expected<std::shared_ptr<const Kernel>> make_transform_step_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                                   const Node& n) {
  if (std::string why = transform_step_unsupported(g, n); !why.empty()) return Status::unimplemented(why);
  const TensorType& in = g.type(n.inputs[0]);
  const TensorType& out = g.type(n.outputs[0]);
  auto k = std::make_shared<TransformStepKernel>(std::move(context), n, in.dtype, out.dtype);
  // Sizes known now: compiled now, so that a failure shows when the graph compiles.
  if (is_static(in.shape) && is_static(out.shape)) FUSEBOX_RETURN_IF_ERROR(k->sized(static_sizes(in), static_sizes(out)).status());
  return std::shared_ptr<const Kernel>(std::move(k));
}

}  // namespace fusebox::cuda
