#include "backends/cpu/transform_step_kernel.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/reference_backend.h"
#include "backends/cpu/transform_kernel.h"
#include "backends/transform_plan.h"
#include "ir/transform_region.h"

namespace fusebox::cpu {

namespace {

class TransformStepKernel final : public Kernel {
 public:
  TransformStepKernel(const Node& step, DType in, DType out)
      : step_{step.op, {}, {}, step.attrs, nullptr, step.loc},
        in_dtype_(in),
        out_dtype_(out),
        reference_(make_reference_kernel(step)) {}

  Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    if (in.size() != 1 || out.size() != 1) return reference_->run(stream, in, out);
    std::shared_ptr<const TransformPlan> plan = sized(in[0].shape, out[0].shape);
    if (!plan) return reference_->run(stream, in, out);
    std::vector<Array> ins = arrays_over(in), outs = arrays_over(out);
    return run_transform_plan(*plan, ins[0], outs[0]);
  }
  std::string_view kind() const override { return "transform"; }

 private:
  // The plan of these sizes (null: the plan does not cover them), made on first use.
  std::shared_ptr<const TransformPlan> sized(const std::vector<int64_t>& in,
                                             const std::vector<int64_t>& out) const {
    std::vector<int64_t> key = in;
    key.push_back(-1);  // a separator: [2,3]+[4] is not [2]+[3,4]
    key.insert(key.end(), out.begin(), out.end());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return it->second;
    if (plans_.size() >= 64) plans_.clear();
    const Node region = transform_step_region(step_, TensorType{in_dtype_, make_shape(in)},
                                              TensorType{out_dtype_, make_shape(out)});
    return plans_.emplace(std::move(key), plan_transform_region(region)).first->second;
  }

  Node step_;
  DType in_dtype_, out_dtype_;
  std::shared_ptr<const Kernel> reference_;
  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const TransformPlan>> plans_;
};

}  // namespace

std::shared_ptr<const Kernel> make_transform_step_kernel(const Graph& g, const Node& n) {
  switch (n.op) {
    case Op::Resize:
    case Op::Transpose:
    case Op::Slice:
    case Op::Pad:
    case Op::Flip:
      break;
    default:
      return nullptr;  // reshape moves no data; casts are element-wise
  }
  if (n.inputs.size() != 1 || n.outputs.size() != 1 ||
      !is_transform_step(g, n, nullptr, /*allow_dynamic=*/true))
    return nullptr;
  return std::make_shared<TransformStepKernel>(n, g.type(n.inputs[0]).dtype, g.type(n.outputs[0]).dtype);
}

}  // namespace fusebox::cpu
