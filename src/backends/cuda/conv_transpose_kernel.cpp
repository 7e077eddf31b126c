#include "backends/cuda/conv_transpose_kernel.h"

#ifdef FUSEBOX_HAVE_CUDNN

#include <algorithm>
#include <array>
#include <climits>
#include <map>
#include <mutex>

#include "backends/cuda/conv_kernel.h"
#include "backends/cuda/cudnn.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr size_t kMaxWorkspaceBytes = size_t(256) << 20;

struct TransposeAttrs {
  std::array<int64_t, 2> stride{1, 1}, dilation{1, 1}, output_padding{0, 0};
  std::array<int64_t, 4> pad{0, 0, 0, 0};  // top, left, bottom, right
  int64_t groups = 1;
};

Expected<TransposeAttrs> read_attrs(const Node& n) {
  const std::vector<int64_t>& s = n.attr_i64s("stride");
  const std::vector<int64_t>& p = n.attr_i64s("pad");
  const std::vector<int64_t>& d = n.attr_i64s("dilation");
  const std::vector<int64_t>& op = n.attr_i64s("output_padding");
  if (s.size() != 2 || p.size() != 4 || d.size() != 2 || op.size() != 2)
    return Status::unimplemented("conv_transpose2d with attribute lists of the wrong length");
  TransposeAttrs a;
  a.stride = {s[0], s[1]};
  a.dilation = {d[0], d[1]};
  a.output_padding = {op[0], op[1]};
  a.pad = {p[0], p[1], p[2], p[3]};
  a.groups = n.attr_i64("groups");
  for (int64_t v : {s[0], s[1], d[0], d[1], a.groups}) {
    if (v < 1 || v > INT32_MAX) return Status::unimplemented("conv_transpose2d with a stride, dilation or group count outside 1..2^31-1");
  }
  for (int64_t v : p) {
    if (v < 0 || v > INT32_MAX) return Status::unimplemented("conv_transpose2d with a negative or huge pad");
  }
  // cuDNN pads both sides with pad_begin: the forward convolution of the typed result must give
  // back x's rows, which holds exactly when 0 <= pad_begin - pad_end + output_padding < stride.
  for (size_t axis = 0; axis < 2; ++axis) {
    const int64_t slack = a.pad[axis] - a.pad[axis + 2] + a.output_padding[axis];
    if (slack < 0 || slack >= a.stride[axis]) {
      return Status::unimplemented("conv_transpose2d with pads " + dims_text(p) + ", output_padding " + dims_text(op) +
                                   " and strides " + dims_text(s) +
                                   ": cuDNN pads both sides alike, and these give a result of another size");
    }
  }
  return a;
}

Status check_claim(const Graph& g, const Node& n) {
  FUSEBOX_RETURN_IF_ERROR(cudnn().status());
  FUSEBOX_RETURN_IF_ERROR(read_attrs(n).status());
  const TensorType& x = g.type(n.inputs[0]);
  const TensorType& w = g.type(n.inputs[1]);
  const TensorType& y = g.type(n.outputs[0]);
  if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4)
    return Status::unimplemented("conv_transpose2d of " + x.to_string() + ": the cuDNN kernel runs rank-4 NCHW tensors only");
  if (x.dtype != DType::F32 && x.dtype != DType::F16)
    return Status::unimplemented("conv_transpose2d on " + std::string(dtype_name(x.dtype)) + ": the cuDNN kernel runs f32 and f16");
  if (w.dtype != x.dtype || y.dtype != x.dtype) return Status::unimplemented("conv_transpose2d with operands of several dtypes");
  if (n.inputs.size() == 3) {
    const TensorType& b = g.type(n.inputs[2]);
    if (b.dtype != x.dtype || b.rank() != 1)
      return Status::unimplemented("conv_transpose2d bias " + b.to_string() + ": the cuDNN kernel takes one value per output channel");
  }
  return Status::ok();
}

// The rows the node's result has over `in` rows (the reference's arithmetic).
int64_t transposed_extent(int64_t in, int64_t kernel, const TransposeAttrs& a, size_t axis) {
  return (in - 1) * a.stride[axis] - a.pad[axis] - a.pad[axis + 2] + a.dilation[axis] * (kernel - 1) + a.output_padding[axis] + 1;
}

struct Plan : ConvDescriptors {
  cudnnConvolutionBwdDataAlgo_t algo = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  size_t workspace = 0;
};

class ConvTransposeKernel final : public Kernel {
 public:
  ConvTransposeKernel(std::shared_ptr<Context> c, const Cudnn& dnn, DType dtype, TransposeAttrs a, bool allow_tf32)
      : context_(std::move(c)), dnn_(dnn), dtype_(dtype), tf32_(allow_tf32 && dtype == DType::F32),
        type_(dtype == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT), attrs_(a) {}
  ~ConvTransposeKernel() override {
    for (auto& [key, p] : plans_) destroy_conv_descriptors(dnn_, p);
  }
  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_conv_transpose"; }

 private:
  using Key = ConvShapes;
  Status make_plan(const Key& k, cudnnHandle_t handle, Plan& p) const;
  Expected<Plan*> plan(const Key& key, cudnnHandle_t handle) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, fresh] = plans_.try_emplace(key);
    if (!fresh) return &it->second;
    if (Status s = make_plan(key, handle, it->second); !s.is_ok()) {
      destroy_conv_descriptors(dnn_, it->second);  // not kept: the next run of these shapes says the same
      plans_.erase(it);
      return s;
    }
    return &it->second;
  }

  std::shared_ptr<Context> context_;
  const Cudnn& dnn_;
  DType dtype_;
  bool tf32_;
  cudnnDataType_t type_;
  TransposeAttrs attrs_;
  mutable std::mutex mu_;
  mutable std::map<Key, Plan> plans_;
};

Status ConvTransposeKernel::make_plan(const Key& k, cudnnHandle_t handle, Plan& p) const {
  const Cudnn& d = dnn_;
  // x is the forward convolution's result (dy), y its input (dx), w its filter [C, O/groups, KH, KW];
  // the bias descriptor is one value per channel of y.
  const ConvGeometry geometry{attrs_.pad[0], attrs_.pad[1], attrs_.stride[0], attrs_.stride[1], attrs_.dilation[0], attrs_.dilation[1], attrs_.groups};
  FUSEBOX_RETURN_IF_ERROR(make_conv_descriptors(d, k, type_, geometry, conv_math(dtype_, tf32_), p));

  // The forward convolution of the result must give back x's size, or cuDNN refuses the call.
  int on = 0, oc = 0, oh = 0, ow = 0;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnGetConvolution2dForwardOutputDim(p.conv, p.y, p.w, &on, &oc, &oh, &ow), "forward size"));
  const std::vector<int64_t> x(k.begin(), k.begin() + 4), w(k.begin() + 4, k.begin() + 8), y(k.begin() + 8, k.end());
  if (on != k[0] || oc != k[1] || oh != k[2] || ow != k[3]) {
    return Status::unimplemented("cuDNN's forward convolution of the conv_transpose2d result " + dims_text(y) + " by " + dims_text(w) +
                                 " gives [" + std::to_string(on) + "," + std::to_string(oc) + "," + std::to_string(oh) + "," +
                                 std::to_string(ow) + "], not the input " + dims_text(x));
  }

  cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT] = {};
  int found = 0;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, p.w, p.x, p.conv, p.y, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT,
                                                                                &found, perf),
                                  "cudnnGetConvolutionBackwardDataAlgorithm_v7"));
  // Deterministic algorithms first; ALGO_0 sums with atomics, in an order that varies by run.
  for (bool deterministic_only : {true, false}) {
    for (int j = 0; j < found; ++j) {
      const cudnnConvolutionBwdDataAlgoPerf_t& r = perf[j];
      if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspaceBytes) continue;
      if (deterministic_only && r.determinism != CUDNN_DETERMINISTIC) continue;
      // FFT and Winograd round in transformed space (conv_kernel.h).
      if (r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT || r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING ||
          r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD || r.algo == CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED)
        continue;
      if (dtype_ == DType::F32 && !tf32_ && (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION))
        continue;
      size_t bytes = 0;
      if (d.cudnnGetConvolutionBackwardDataWorkspaceSize(handle, p.w, p.x, p.conv, p.y, r.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
      if (bytes > kMaxWorkspaceBytes) continue;
      p.algo = r.algo;
      p.workspace = bytes;
      return Status::ok();
    }
  }
  return Status::unimplemented("cuDNN has no GEMM-based or direct backward-data algorithm for the " + std::string(dtype_name(dtype_)) +
                               " conv_transpose2d of " + dims_text(x) + " by " + dims_text(w) + " with at most " +
                               std::to_string(kMaxWorkspaceBytes >> 20) + " MiB of workspace");
}

Status ConvTransposeKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(out.size() == 1 && in.size() >= 2) << "cuda conv_transpose2d operands";
  const BufferView& x = in[0];
  const BufferView& w = in[1];
  const BufferView& y = out[0];
  const BufferView* bias = in.size() == 3 ? &in[2] : nullptr;
  FUSEBOX_CHECK(x.shape.size() == 4 && w.shape.size() == 4 && y.shape.size() == 4) << "cuda conv_transpose2d ranks";
  if (y.numel() == 0) return Status::ok();
  if (x.numel() == 0 || w.numel() == 0)
    return Status::unimplemented("cuDNN does not run conv_transpose2d over an empty input " + dims_text(x.shape));
  FUSEBOX_RETURN_IF_ERROR(dense_int32_operands({&x, &w, &y, bias}, "the cuDNN kernel"));
  // The result must be the one the node types (the reference's arithmetic), channels included.
  const std::array<int64_t, 4> want{x.shape[0], w.shape[1] * attrs_.groups, transposed_extent(x.shape[2], w.shape[2], attrs_, 0),
                                    transposed_extent(x.shape[3], w.shape[3], attrs_, 1)};
  if (!std::equal(want.begin(), want.end(), y.shape.begin()) || w.shape[0] != x.shape[1] || x.shape[1] % attrs_.groups != 0)
    return Status::invalid("conv_transpose2d of " + dims_text(x.shape) + " by " + dims_text(w.shape) + " cannot give " + dims_text(y.shape));
  if (bias && bias->numel() != y.shape[1])
    return Status::invalid("a conv_transpose2d bias of " + std::to_string(bias->numel()) + " values over " + std::to_string(y.shape[1]) + " channels");
  const Key key = conv_shapes(x, w, y);
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  FUSEBOX_ASSIGN_OR_RETURN(DnnDevice * dev, dnn_device(*context_, dnn_));
  std::lock_guard<std::mutex> lock(dev->mu);
  FUSEBOX_ASSIGN_OR_RETURN(Plan * p, plan(key, dev->handle));
  std::shared_ptr<void> workspace;
  if (p->workspace) {
    FUSEBOX_ASSIGN_OR_RETURN(workspace, context_->allocate(p->workspace));
  }
  const Cudnn& d = dnn_;
  const float one = 1.0f, zero = 0.0f;
  const std::string what = std::string(dtype_name(dtype_)) + " conv_transpose2d of " + dims_text(x.shape) + " by " + dims_text(w.shape);
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnConvolutionBackwardData(dev->handle, &one, p->w, w.data, p->x, x.data, p->conv, p->algo,
                                                                 workspace.get(), p->workspace, &zero, p->y, y.data),
                                  "cudnnConvolutionBackwardData (" + what + ")"));
  if (bias) {
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cudnnAddTensor(dev->handle, &one, p->bias, bias->data, &one, p->y, y.data), "adding the bias (" + what + ")"));
  }
  return Status::ok();
}

}  // namespace

Claim claim_conv_transpose(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::ConvTranspose2d) << "claim_conv_transpose on " << n.info().keyword;
  Status s = check_claim(g, n);
  return s.is_ok() ? Claim::accept() : Claim::refuse(s.message());
}

Expected<std::shared_ptr<const Kernel>> make_conv_transpose_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n,
                                                                   bool allow_tf32) {
  FUSEBOX_RETURN_IF_ERROR(check_claim(g, n));
  FUSEBOX_ASSIGN_OR_RETURN(const Cudnn* dnn, cudnn());
  FUSEBOX_ASSIGN_OR_RETURN(TransposeAttrs attrs, read_attrs(n));
  // The handle is made now, so that a failure shows when the graph compiles.
  FUSEBOX_RETURN_IF_ERROR(dnn_device(*context, *dnn).status());
  return std::shared_ptr<const Kernel>(
      std::make_shared<ConvTransposeKernel>(std::move(context), *dnn, g.type(n.outputs[0]).dtype, attrs, allow_tf32));
}

}  // namespace fusebox::cuda

#else  // no cuDNN headers in this build: conv_transpose2d runs on the CPU

namespace fusebox::cuda {

namespace {
constexpr const char* kNoHeaders = "this build of fusebox found no cuDNN headers (cudnn.h): conv_transpose2d runs on the CPU";
}  // namespace

Claim claim_conv_transpose(const Graph&, const Node&) { return Claim::refuse(kNoHeaders); }

Expected<std::shared_ptr<const Kernel>> make_conv_transpose_kernel(std::shared_ptr<Context>, const Graph&, const Node&, bool) {
  return Status::unimplemented(kNoHeaders);
}

}  // namespace fusebox::cuda

#endif  // FUSEBOX_HAVE_CUDNN
