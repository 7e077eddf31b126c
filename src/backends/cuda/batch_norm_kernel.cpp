#include "backends/cuda/batch_norm_kernel.h"

#include <algorithm>

#include "backends/cuda/pool_kernel.h"
#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr int kBatchNormThreads = 256;

bool is_batch_norm_dtype(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::BF16 || d == DType::F64; }

class BatchNormKernel final : public Kernel {
 public:
  BatchNormKernel(std::shared_ptr<Context> c, CUfunction f, double eps) : context_(std::move(c)), function_(f), eps_(eps) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 5 && out.size() == 1 && in[0].shape.size() >= 2) << "batch_norm operands";
    const BufferView& x = in[0];
    int64_t total = out[0].numel();
    if (total == 0) return Status::ok();
    int64_t channels = x.shape[1];
    int64_t inner = total / (x.shape[0] * channels);
    for (size_t i = 1; i < 5; ++i) {
      if (in[i].numel() != channels) {
        return Status::invalid("batch_norm operand " + std::to_string(i) + " has " + std::to_string(in[i].numel()) +
                               " values, not one per channel of " + std::to_string(channels));
      }
    }
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    void* ptrs[6] = {x.data, in[1].data, in[2].data, in[3].data, in[4].data, out[0].data};
    double eps = eps_;
    void* args[10] = {&ptrs[0], &ptrs[1], &ptrs[2], &ptrs[3], &ptrs[4], &ptrs[5], &total, &channels, &inner, &eps};
    const unsigned blocks = unsigned(std::min<int64_t>((total + kBatchNormThreads - 1) / kBatchNormThreads, int64_t(1) << 20));
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(function_, blocks, 1, 1, kBatchNormThreads, 1, 1, 0, context_->stream(), args, nullptr),
                   "launching the CUDA batch_norm kernel");
  }
  std::string_view kind() const override { return "cuda_batch_norm"; }

 private:
  std::shared_ptr<Context> context_;
  CUfunction function_;
  double eps_;
};

}  // namespace

std::string batch_norm_source(DType dtype) {
  std::string s(prelude_source());
  s += "\n// ---- batch_norm " + std::string(dtype_name(dtype)) + "\n" + scalar_type_source(dtype);
  s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBatchNormThreads) + ") " + kBatchNormEntry +
       "(const S* __restrict__ x, const S* __restrict__ scale, const S* __restrict__ bias, const S* __restrict__ mean,\n"
       "    const S* __restrict__ var, S* __restrict__ y, i64 total, i64 channels, i64 inner, double eps) {\n"
       "  for (i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += i64(gridDim.x) * blockDim.x) {\n"
       "    const i64 c = (t / inner) % channels;\n"
       "    const double denom = sqrt(double(fb_ld(var[c])) + eps);\n"
       "    y[t] = fb_st64((double(fb_ld(x[t])) - double(fb_ld(mean[c]))) / denom * double(fb_ld(scale[c])) +\n"
       "                   double(fb_ld(bias[c])));\n"
       "  }\n}\n";
  return s;
}

Claim claim_batch_norm(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::BatchNorm) << "claim_batch_norm on " << n.info().keyword;
  const TensorType& x = g.type(n.inputs[0]);
  if (!is_batch_norm_dtype(x.dtype)) {
    return Claim::refuse("batch_norm on " + std::string(dtype_name(x.dtype)) + ": the CUDA kernel runs f32, f16, bf16 and f64");
  }
  if (x.rank() < 2) return Claim::refuse("batch_norm over " + x.to_string() + ": the CUDA kernel takes N, C and spatial dims");
  const Dim& channels = x.shape[1];
  for (size_t i = 1; i < n.inputs.size(); ++i) {
    const TensorType& p = g.type(n.inputs[i]);
    if (p.dtype != x.dtype) return Claim::refuse("batch_norm with operands of several dtypes: the CUDA kernel takes one");
    if (p.rank() != 1 || (p.shape[0].is_static() && channels.is_static() && p.shape[0] != channels)) {
      return Claim::refuse("batch_norm operand " + p.to_string() + " is not one value per channel of " + x.to_string());
    }
  }
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_batch_norm_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                               const Node& n) {
  if (Claim c = claim_batch_norm(g, n); !c) return Status::unimplemented(c.reason);
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context->function(batch_norm_source(g.type(n.inputs[0]).dtype), kBatchNormEntry));
  return std::shared_ptr<const Kernel>(std::make_shared<BatchNormKernel>(std::move(context), f, n.attr_f64("eps")));
}

}  // namespace fusebox::cuda
