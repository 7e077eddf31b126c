#include "backends/cuda/conv_kernel.h"

#include <climits>

namespace fusebox::cuda {

// Without cuDNN too: the depthwise kernel (depthwise_kernel.h) reads them.
bool dense(const BufferView& b) {
  int64_t expect = 1;
  for (size_t i = b.shape.size(); i-- > 0;) {
    if (b.shape[i] != 1 && b.strides[i] != expect) return false;
    expect *= b.shape[i];
  }
  return true;
}

std::string dims_text(const std::vector<int64_t>& s) {
  std::string t = "[";  // appended, not "[" + ...: GCC 12 warns (-Wrestrict) on that concatenation
  t += shape_to_string(make_shape(s));
  t += "]";
  return t;
}

Status dense_int32_operands(std::initializer_list<const BufferView*> operands, std::string_view kernel) {
  for (const BufferView* b : operands) {
    if (!b) continue;
    if (!dense(*b))
      return Status::unimplemented(std::string(kernel) + " reads dense tensors, not " + dims_text(b->shape) +
                                   " with strides " + dims_text(b->strides));
    if (b->numel() > INT32_MAX)
      return Status::unimplemented(std::string(kernel) + " counts elements in int32; " + dims_text(b->shape) +
                                   " has more");
  }
  return Status::ok();
}

}  // namespace fusebox::cuda

#ifdef FUSEBOX_HAVE_CUDNN

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

#include "backends/cuda/conv_epilogue.h"
#include "backends/cuda/cudnn.h"
#include "backends/cuda/depthwise_kernel.h"
#include "backends/cuda/lt_gemm.h"
#include "ir/check.h"
#include "ir/epilogue.h"
#include "ir/fused_ops.h"

namespace fusebox::cuda {

namespace {

// The most workspace an algorithm may ask for; one needing more is passed over.
constexpr size_t kMaxWorkspaceBytes = size_t(256) << 20;

// The node's convolution attributes.
struct ConvAttrs {
  std::array<int64_t, 2> stride{1, 1}, dilation{1, 1};
  std::array<int64_t, 4> pad{0, 0, 0, 0};  // top, left, bottom, right
  int64_t groups = 1;
  Epilogue epilogue;             // act_alpha / act_beta are read only by the activations that have them
  int bias = -1, residual = -1;  // operand positions (-1: none)
  bool nhwc = false;             // layout = "nhwc": x, y and the residual [N,1,H,W,C]
};

Expected<ConvAttrs> read_attrs(const Node& n) {
  const std::string what = std::string(n.info().keyword) + " ";
  for (const auto& [name, value] : n.attrs.entries()) {
    static constexpr std::string_view kKnown[] = {"stride",       "pad", "dilation",  "groups",  "layout",
                                                  "has_residual", "act", "act_alpha", "act_beta"};
    if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
      return Status::unimplemented(what + "attribute " + name + " is not handled by the cuDNN kernel");
    }
  }
  const std::string& layout = n.attr_str("layout");
  if (layout != "nchw" && layout != "nhwc") {
    return Status::unimplemented(what + "in the blocked layout " + layout +
                                 ": the cuDNN kernel runs NCHW and NHWC only");
  }
  ConvAttrs a;
  a.nhwc = layout == "nhwc";
  const std::vector<int64_t>& s = n.attr_i64s("stride");
  const std::vector<int64_t>& p = n.attr_i64s("pad");
  const std::vector<int64_t>& d = n.attr_i64s("dilation");
  if (s.size() != 2 || p.size() != 4 || d.size() != 2)
    return Status::unimplemented(what + "with attribute lists of the wrong length");
  a.stride = {s[0], s[1]};
  a.pad = {p[0], p[1], p[2], p[3]};
  a.dilation = {d[0], d[1]};
  a.groups = n.attr_i64("groups");
  for (int64_t v : {s[0], s[1], d[0], d[1], a.groups}) {
    if (v < 1 || v > INT32_MAX)
      return Status::unimplemented(what + "with a stride, dilation or group count outside 1..2^31-1");
  }
  for (int64_t v : p) {
    if (v < 0 || v > INT32_MAX) return Status::unimplemented(what + "with a negative or huge pad");
  }
  const OperandRoles roles = contraction_roles(n);
  a.bias = roles.bias;
  a.residual = roles.residual;
  // none and relu are cuDNN's; every other activation is conv_epilogue.h's.
  if (n.op == Op::FusedConvBiasAct) a.epilogue = epilogue_of_fused(n);
  return a;
}

Expected<cudnnDataType_t> data_type(DType d) {
  switch (d) {
    case DType::F32:
      return CUDNN_DATA_FLOAT;
    case DType::F16:
      return CUDNN_DATA_HALF;
    default:
      return Status::unimplemented(std::string("the cuDNN kernel runs f32 and f16, not ") +
                                   std::string(dtype_name(d)));
  }
}

// The rows (or columns) cuDNN's convolution gives with `pad` on both sides.
int64_t cudnn_extent(int64_t in, int64_t pad, int64_t kernel, int64_t dilation, int64_t stride) {
  const int64_t span = dilation * (kernel - 1) + 1;
  return (in + 2 * pad - span) / stride + 1;
}

// The data of the graph constant that `v` is, or null.
const Array* constant_value(const Graph& g, ValueId v) {
  for (const Node& n : g.nodes()) {
    if (n.op == Op::Constant && n.outputs[0] == v) return &n.attr_array("value");
  }
  return nullptr;
}

// Everything claim_conv checks, as a Status (a refusal's reason).
Status check_claim(const Graph& g, const Node& n) {
  FUSEBOX_RETURN_IF_ERROR(cudnn().status());
  const std::string what = std::string(n.info().keyword) + " ";
  FUSEBOX_ASSIGN_OR_RETURN(ConvAttrs a, read_attrs(n));
  const TensorType& x = g.type(n.inputs[0]);
  const TensorType& w = g.type(n.inputs[1]);
  const TensorType& y = g.type(n.outputs[0]);
  if (a.nhwc) {
    if (x.rank() != 5 || w.rank() != 4 || y.rank() != 5 || x.shape[1] != Dim(1) || y.shape[1] != Dim(1)) {
      return Status::unimplemented(
          what + x.to_string() + " * " + w.to_string() +
          ": in NHWC the cuDNN kernel runs [N,1,H,W,C] activations and [O,I,kh,kw] weights");
    }
    // The weights are reordered to cuDNN's NHWC filter order (K,R,S,C) once, when the kernel is made.
    if (!constant_value(g, n.inputs[1])) {
      return Status::unimplemented(what + "in NHWC with weights that are not a graph constant");
    }
  } else if (x.rank() != 4 || w.rank() != 4 || y.rank() != 4) {
    return Status::unimplemented(what + x.to_string() + " * " + w.to_string() +
                                 ": the cuDNN kernel runs rank-4 NCHW tensors only");
  }
  if (Expected<cudnnDataType_t> t = data_type(x.dtype); !t)
    return Status::unimplemented(what + t.status().message());
  if (w.dtype != x.dtype || y.dtype != x.dtype)
    return Status::unimplemented(what + "operands of several dtypes");
  if (a.bias >= 0) {
    const TensorType& b = g.type(n.inputs[size_t(a.bias)]);
    if (b.dtype != x.dtype || b.rank() != 1) {
      return Status::unimplemented(what + "bias " + b.to_string() +
                                   ": the cuDNN kernel takes one value per output channel of " +
                                   y.to_string());
    }
  }
  if (a.residual >= 0) {
    const TensorType& r = g.type(n.inputs[size_t(a.residual)]);
    // Sizes the graph knows must agree; the others are checked at run time.
    bool same = r.dtype == y.dtype && r.rank() == y.rank();
    for (size_t i = 0; same && i < size_t(r.rank()); ++i)
      same = !r.shape[i].is_static() || !y.shape[i].is_static() || r.shape[i] == y.shape[i];
    if (!same)
      return Status::unimplemented(what + "residual " + r.to_string() + " is not of the result's type " +
                                   y.to_string());
  }
  // cuDNN pads both sides alike; the bottom and right pads only shape the result, so asymmetric
  // pads are fine where cuDNN's result with the top and left pads on both sides is as large.
  for (int axis = 0; axis < 2; ++axis) {
    if (a.pad[size_t(axis)] == a.pad[size_t(axis) + 2]) continue;
    const Dim& in = x.shape[size_t(2 + axis)];
    const Dim& k = w.shape[size_t(2 + axis)];
    const Dim& out = y.shape[size_t(2 + axis)];
    if (!in.is_static() || !k.is_static() || !out.is_static() ||
        cudnn_extent(in.value(), a.pad[size_t(axis)], k.value(), a.dilation[size_t(axis)],
                     a.stride[size_t(axis)]) != out.value()) {
      return Status::unimplemented(
          what + "with pads [" + std::to_string(a.pad[0]) + "," + std::to_string(a.pad[1]) + "," +
          std::to_string(a.pad[2]) + "," + std::to_string(a.pad[3]) +
          "]: cuDNN pads both sides alike, and these asymmetric pads give another result size");
    }
  }
  return Status::ok();
}

std::atomic<uint64_t> fused_runs{0}, separate_runs{0}, gemm_runs{0};

// cuDNN's fused convolution + bias + relu (cudnnConvolutionBiasActivationForward) or the
// convolution alone followed by the one-pass epilogue kernel. Measured on an H100 (docs/cuda.md):
// the fused call is faster for exact f32 (resnet50 batch 1 1.92 against 2.02 ms, batch 32 10.1
// against 11.0), slower on tensor cores (f16 batch 1 0.85 against 0.62 ms, TF32 0.80 against
// 0.73). FUSEBOX_CUDA_CONV_FUSED=1 or 0 (read once) forces either.
bool use_cudnn_fused(bool tensor_cores) {
  static const int forced = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_CONV_FUSED");
    if (!e || !*e) return -1;
    return std::string_view(e) == "0" ? 0 : 1;
  }();
  return forced >= 0 ? forced == 1 : !tensor_cores;
}

// How the algorithm of a new set of shapes is chosen: by running every candidate once on the
// run's operands and keeping the fastest allowed one (cudnnFindConvolutionForwardAlgorithmEx,
// as PyTorch's cudnn.benchmark; FUSEBOX_CUDA_CONV_ALGO=measure, read once), or by cuDNN's
// heuristic alone (the default: measured no better, docs/cuda.md).
bool measure_algorithms() {
  static const bool measure = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_CONV_ALGO");
    return e && std::string_view(e) == "measure";
  }();
  return measure;
}

// The descriptors and algorithm of one set of operand shapes.
struct Plan : ConvDescriptors {
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  size_t workspace = 0;
  bool fused_unsupported = false;  // the fused call failed for these shapes once: not tried again
};

// Weights [O,I,kh,kw] (OIHW) in cuDNN's NHWC filter order [O,kh,kw,I], on the device.
Expected<std::shared_ptr<void>> upload_khwc(Context& context, const Array& w) {
  FUSEBOX_CHECK(w.rank() == 4) << "conv weights " << w.type_string();
  const int64_t o = w.shape()[0], c = w.shape()[1], kh = w.shape()[2], kw = w.shape()[3];
  const size_t esize = size_t(dtype_size(w.dtype()));
  std::vector<uint8_t> host(w.nbytes());
  const auto* src = static_cast<const uint8_t*>(w.raw());
  for (int64_t k = 0; k < o; ++k)
    for (int64_t i = 0; i < c; ++i)
      for (int64_t r = 0; r < kh; ++r)
        for (int64_t t = 0; t < kw; ++t)
          std::memcpy(&host[size_t(((k * kh + r) * kw + t) * c + i) * esize],
                      src + size_t(((k * c + i) * kh + r) * kw + t) * esize, esize);
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> device, context.allocate(std::max<size_t>(host.size(), 1)));
  FUSEBOX_RETURN_IF_ERROR(context.make_current());
  const Driver& d = context.driver();
  if (!host.empty()) {
    FUSEBOX_RETURN_IF_ERROR(d.check(d.cuMemcpyHtoDAsync(reinterpret_cast<CUdeviceptr>(device.get()),
                                                        host.data(), host.size(), context.stream()),
                                    "uploading NHWC convolution weights"));
  }
  FUSEBOX_RETURN_IF_ERROR(
      d.check(d.cuStreamSynchronize(context.stream()), "uploading NHWC convolution weights"));
  return device;
}

// How 1x1 convolutions that gemm_fits accepts run (FUSEBOX_CUDA_CONV_GEMM, read once): as
// cuBLASLt products (the default, =1), on cuDNN (=0), or (=timed) whichever of the two ran the
// shape faster when it was first timed (ConvKernel::gemm_wins). The timed choice has not yet run
// on a GPU (docs/cuda.md), so it is not the default.
enum class GemmMode { Off, Always, Timed };
GemmMode gemm_mode() {
  static const GemmMode mode = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_CONV_GEMM");
    const std::string_view v = e ? e : "";
    return v == "0" ? GemmMode::Off : v == "timed" ? GemmMode::Timed : GemmMode::Always;
  }();
  return mode;
}

// Whether conv node `n` may run as one cuBLASLt product: a 1x1 kernel at stride 1 without pads or
// groups, NCHW, so that each image's result [K, H*W] is the weights [K, C] times the image
// [C, H*W] as they lie, and the batch one strided call sharing the weights. cuDNN's NCHW
// convolutions on tensor cores reorder the activations to NHWC and back around their product;
// but where each image's product is narrow (7x7 images) cuDNN's, over the whole batch, is faster.
bool gemm_fits(const Graph& g, const Node& n, const ConvAttrs& a) {
  if (gemm_mode() == GemmMode::Off || a.nhwc || a.groups != 1) return false;
  const TensorType& w = g.type(n.inputs[1]);
  if (w.rank() != 4 || !(w.shape[2] == Dim(1)) || !(w.shape[3] == Dim(1))) return false;
  return a.stride == std::array<int64_t, 2>{1, 1} && a.pad == std::array<int64_t, 4>{0, 0, 0, 0};
}

class ConvKernel final : public Kernel {
 public:
  ConvKernel(std::shared_ptr<Context> context, const Cudnn& dnn, DType dtype, ConvAttrs attrs,
             cudnnActivationDescriptor_t relu, std::string epilogue, bool allow_tf32,
             std::shared_ptr<void> khwc_weights = nullptr, std::shared_ptr<const LtGemm> gemm = nullptr)
      : khwc_weights_(std::move(khwc_weights)),
        gemm_(std::move(gemm)),
        context_(std::move(context)),
        dnn_(dnn),
        dtype_(dtype),
        tf32_(allow_tf32 && dtype == DType::F32),
        type_(dtype == DType::F16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT),
        attrs_(attrs),
        relu_(relu),
        epilogue_(std::move(epilogue)) {}
  ~ConvKernel() override {
    for (auto& [key, p] : plans_) destroy_conv_descriptors(dnn_, p);
    if (relu_) dnn_.cudnnDestroyActivationDescriptor(relu_);
  }

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_conv"; }

 private:
  using Key = ConvShapes;
  std::shared_ptr<void> khwc_weights_;  // NHWC: the weights in [O,kh,kw,I] order (upload_khwc)
  std::shared_ptr<const LtGemm> gemm_;  // a 1x1 convolution's product (gemm_fits), or null
  // Whether the product runs these shapes (GemmMode): timed against cuDNN's convolution on their
  // first run (not while a CUDA graph is recorded), into a scratch result.
  Expected<bool> gemm_wins(const Key& key, GemmCall call, const BufferView& x, const void* weights,
                           size_t y_bytes) const;
  mutable std::mutex choice_mu_;
  mutable std::map<Key, bool> gemm_choice_;
  // The plan of `key`, made on first use (x and w are the run's operands, read when the
  // algorithm is measured); called with the device's lock held.
  Expected<Plan*> plan(const Key& key, cudnnHandle_t handle, const void* x, const void* w) const;
  Status make_plan(const Key& key, cudnnHandle_t handle, const void* x, const void* w, Plan& p) const;
  // Whether cuDNN's algorithm `r` may run these convolutions (conv_kernel.h's math rules).
  bool allowed(const cudnnConvolutionFwdAlgoPerf_t& r) const;
  // Sets p.algo and p.workspace to the first allowed algorithm of `perf` whose workspace fits
  // (`timed`: perf is cudnnFind's list, and p.conv takes the math each was timed with); false
  // when none does.
  bool choose(const cudnnConvolutionFwdAlgoPerf_t* perf, int found, bool timed, cudnnHandle_t handle,
              Plan& p) const;
  // cudnnConvolutionForward of x by w into y with plan p (a workspace of p.workspace bytes).
  cudnnStatus_t forward(cudnnHandle_t handle, const Plan& p, const void* x, const void* w, void* workspace,
                        void* y) const;
  // cudnnFindConvolutionForwardAlgorithmEx on the run's operands, the result written to scratch:
  // every algorithm timed once, fastest first.
  Status measure(cudnnHandle_t handle, const Plan& p, const void* x, const void* w, size_t y_bytes,
                 cudnnConvolutionFwdAlgoPerf_t* perf, int& found) const;

  std::shared_ptr<Context> context_;
  const Cudnn& dnn_;
  DType dtype_;
  bool tf32_;  // f32 may run on TF32 tensor cores (CudaBackendOptions::allow_tf32)
  cudnnDataType_t type_;
  ConvAttrs attrs_;
  cudnnActivationDescriptor_t relu_;
  std::string epilogue_;  // conv_epilogue.h's source: bias, residual and activation in one pass
  mutable std::mutex mu_;
  mutable std::map<Key, Plan> plans_;
};

Status ConvKernel::make_plan(const Key& k, cudnnHandle_t handle, const void* x_data, const void* w_data,
                             Plan& p) const {
  const Cudnn& d = dnn_;
  const ConvGeometry geometry{attrs_.pad[0],      attrs_.pad[1],      attrs_.stride[0], attrs_.stride[1],
                              attrs_.dilation[0], attrs_.dilation[1], attrs_.groups};
  FUSEBOX_RETURN_IF_ERROR(make_conv_descriptors(d, k, type_, geometry, conv_math(dtype_, tf32_), p,
                                                attrs_.nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW));

  // The result cuDNN computes must be the one the graph typed (asymmetric pads, run-time sizes).
  int on = 0, oc = 0, oh = 0, ow = 0;
  FUSEBOX_RETURN_IF_ERROR(
      d.check(d.cudnnGetConvolution2dForwardOutputDim(p.conv, p.x, p.w, &on, &oc, &oh, &ow), "result size"));
  const std::vector<int64_t> x(k.begin(), k.begin() + 4), w(k.begin() + 4, k.begin() + 8),
      y(k.begin() + 8, k.end());
  if (on != k[8] || oc != k[9] || oh != k[10] || ow != k[11]) {
    return Status::unimplemented("cuDNN's convolution of " + dims_text(x) + " by " + dims_text(w) +
                                 " gives [" + std::to_string(on) + "," + std::to_string(oc) + "," +
                                 std::to_string(oh) + "," + std::to_string(ow) + "], not the result " +
                                 dims_text(y) + " (asymmetric pads)");
  }

  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
  int found = 0;
  FUSEBOX_ASSIGN_OR_RETURN(const bool capturing, context_->capturing());
  if (measure_algorithms() && !capturing) {
    const size_t y_bytes = size_t(k[8] * k[9] * k[10] * k[11]) * size_t(dtype_size(dtype_));
    if (measure(handle, p, x_data, w_data, y_bytes, perf, found).is_ok() &&
        choose(perf, found, true, handle, p)) {
      return Status::ok();
    }
    // Not measured (no memory for the scratch, or cuDNN failed): its heuristic decides.
  }
  FUSEBOX_RETURN_IF_ERROR(
      d.check(d.cudnnGetConvolutionForwardAlgorithm_v7(handle, p.x, p.w, p.conv, p.y,
                                                       CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7"));
  if (choose(perf, found, false, handle, p)) return Status::ok();
  return Status::unimplemented("cuDNN has no GEMM-based or direct algorithm for the " +
                               std::string(dtype_name(dtype_)) + " convolution of " + dims_text(x) + " by " +
                               dims_text(w) + " with at most " + std::to_string(kMaxWorkspaceBytes >> 20) +
                               " MiB of workspace");
}

bool ConvKernel::allowed(const cudnnConvolutionFwdAlgoPerf_t& r) const {
  if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspaceBytes) return false;
  // FFT and Winograd round in transformed space (conv_kernel.h).
  if (r.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT || r.algo == CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING ||
      r.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD ||
      r.algo == CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED) {
    return false;
  }
  // f32 runs on TF32 tensor cores only when the caller allowed it.
  return !(dtype_ == DType::F32 && !tf32_ &&
           (r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION));
}

bool ConvKernel::choose(const cudnnConvolutionFwdAlgoPerf_t* perf, int found, bool timed,
                        cudnnHandle_t handle, Plan& p) const {
  const Cudnn& d = dnn_;
  for (int j = 0; j < found; ++j) {
    if (!allowed(perf[j])) continue;
    // A timed algorithm runs with the math it was timed with (f16 may be timed without tensor
    // cores); the heuristic's runs with the descriptor's.
    size_t bytes = 0;
    if ((timed && d.cudnnSetConvolutionMathType(p.conv, perf[j].mathType) != CUDNN_STATUS_SUCCESS) ||
        d.cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.conv, p.y, perf[j].algo, &bytes) !=
            CUDNN_STATUS_SUCCESS ||
        bytes > kMaxWorkspaceBytes) {
      continue;
    }
    p.algo = perf[j].algo;
    p.workspace = bytes;
    return true;
  }
  if (timed) d.cudnnSetConvolutionMathType(p.conv, conv_math(dtype_, tf32_));  // as it was made
  return false;
}

Status ConvKernel::measure(cudnnHandle_t handle, const Plan& p, const void* x, const void* w, size_t y_bytes,
                           cudnnConvolutionFwdAlgoPerf_t* perf, int& found) const {
  const Cudnn& d = dnn_;
  // The most workspace an allowed algorithm asks for (within kMaxWorkspaceBytes: one needing
  // more is not timed), and a result of its own, so no operand of the run is written.
  size_t workspace_bytes = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    cudnnConvolutionFwdAlgoPerf_t r{};
    r.algo = cudnnConvolutionFwdAlgo_t(a);
    r.status = d.cudnnGetConvolutionForwardWorkspaceSize(handle, p.x, p.w, p.conv, p.y, r.algo, &r.memory);
    if (allowed(r)) workspace_bytes = std::max(workspace_bytes, r.memory);
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch, context_->allocate(std::max<size_t>(y_bytes, 1)));
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> workspace,
                           context_->allocate(std::max<size_t>(workspace_bytes, 1)));
  return d.check(d.cudnnFindConvolutionForwardAlgorithmEx(handle, p.x, x, p.w, w, p.conv, p.y, scratch.get(),
                                                          CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf,
                                                          workspace.get(), workspace_bytes),
                 "cudnnFindConvolutionForwardAlgorithmEx");
}

Expected<Plan*> ConvKernel::plan(const Key& key, cudnnHandle_t handle, const void* x, const void* w) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = plans_.try_emplace(key);
  if (!fresh) return &it->second;
  Status s = make_plan(key, handle, x, w, it->second);
  if (s.is_ok()) return &it->second;
  // Not kept: the next run of these shapes says the same.
  destroy_conv_descriptors(dnn_, it->second);
  plans_.erase(it);
  return s;
}

cudnnStatus_t ConvKernel::forward(cudnnHandle_t handle, const Plan& p, const void* x, const void* w,
                                  void* workspace, void* y) const {
  const float one = 1.0f, zero = 0.0f;  // f32 scales for f32 and f16 data alike
  return dnn_.cudnnConvolutionForward(handle, &one, p.x, x, p.w, w, p.conv, p.algo, workspace, p.workspace,
                                      &zero, p.y, y);
}

Expected<bool> ConvKernel::gemm_wins(const Key& key, GemmCall call, const BufferView& x, const void* weights,
                                     size_t y_bytes) const {
  if (gemm_mode() == GemmMode::Always) return true;
  {
    std::lock_guard<std::mutex> lock(choice_mu_);
    if (auto it = gemm_choice_.find(key); it != gemm_choice_.end()) return it->second;
  }
  FUSEBOX_ASSIGN_OR_RETURN(const bool capturing, context_->capturing());
  if (capturing) return true;  // not timed, not kept: the next unrecorded run times it
  auto keep = [&](bool wins) {
    std::lock_guard<std::mutex> lock(choice_mu_);
    gemm_choice_[key] = wins;
    return wins;
  };
  FUSEBOX_ASSIGN_OR_RETURN(DnnDevice * dev, dnn_device(*context_, dnn_));
  std::lock_guard<std::mutex> lock(dev->mu);
  Expected<Plan*> planned = plan(key, dev->handle, x.data, weights);
  if (!planned) return keep(true);  // cuDNN will not run these shapes: the product does
  const Plan& p = **planned;
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<void> scratch, context_->allocate(std::max<size_t>(y_bytes, 1)));
  std::shared_ptr<void> workspace;
  if (p.workspace) {
    FUSEBOX_ASSIGN_OR_RETURN(workspace, context_->allocate(p.workspace));
  }
  call.y = scratch.get();
  auto convolution = [&]() -> Status {
    return dnn_.check(forward(dev->handle, p, x.data, weights, workspace.get(), scratch.get()),
                      "cudnnConvolutionForward (timing)");
  };
  // Each way once untimed (first calls load kernels), then three of each between events.
  FUSEBOX_ASSIGN_OR_RETURN(const bool runs, gemm_->run(call));
  if (!runs) return keep(false);
  if (!convolution().is_ok()) return keep(true);  // cuDNN fails these shapes: the product runs them
  const Driver& drv = context_->driver();
  CUevent marks[3] = {};
  Status s = Status::ok();
  for (CUevent& e : marks) {
    if (s.is_ok()) s = drv.check(drv.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  }
  for (int way = 0; way < 2 && s.is_ok(); ++way) {
    s = drv.check(drv.cuEventRecord(marks[way], context_->stream()), "cuEventRecord");
    for (int i = 0; i < 3 && s.is_ok(); ++i) s = way == 0 ? gemm_->run(call).status() : convolution();
  }
  if (s.is_ok()) s = drv.check(drv.cuEventRecord(marks[2], context_->stream()), "cuEventRecord");
  if (s.is_ok()) s = drv.check(drv.cuEventSynchronize(marks[2]), "timing a 1x1 convolution");
  float gemm_ms = 0, cudnn_ms = 0;
  if (s.is_ok()) s = drv.check(drv.cuEventElapsedTime(&gemm_ms, marks[0], marks[1]), "cuEventElapsedTime");
  if (s.is_ok()) s = drv.check(drv.cuEventElapsedTime(&cudnn_ms, marks[1], marks[2]), "cuEventElapsedTime");
  for (CUevent e : marks) {
    if (e) drv.cuEventDestroy(e);
  }
  FUSEBOX_RETURN_IF_ERROR(s);
  return keep(gemm_ms <= cudnn_ms);
}

Status ConvKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(out.size() == 1 && in.size() >= 2) << "cuda conv operands";
  const BufferView& x = in[0];
  const BufferView& w = in[1];
  const BufferView& y = out[0];
  const BufferView* bias = attrs_.bias >= 0 ? &in[size_t(attrs_.bias)] : nullptr;
  const BufferView* residual = attrs_.residual >= 0 ? &in[size_t(attrs_.residual)] : nullptr;
  const size_t rank = attrs_.nhwc ? 5 : 4;
  FUSEBOX_CHECK(x.shape.size() == rank && w.shape.size() == 4 && y.shape.size() == rank) << "cuda conv ranks";
  const int64_t channels = attrs_.nhwc ? y.shape[4] : y.shape[1];
  if (y.numel() == 0) return Status::ok();
  if (x.numel() == 0 || w.numel() == 0) {
    return Status::unimplemented("cuDNN does not convolve an empty input " + dims_text(x.shape) + " by " +
                                 dims_text(w.shape));
  }
  FUSEBOX_RETURN_IF_ERROR(dense_int32_operands({&x, &w, &y, bias, residual}, "the cuDNN kernel"));
  if (residual && residual->shape != y.shape) {
    return Status::unimplemented("a residual " + dims_text(residual->shape) + " added to the result " +
                                 dims_text(y.shape));
  }
  if (bias && bias->numel() != channels) {
    return Status::unimplemented("a bias of " + std::to_string(bias->numel()) + " values over " +
                                 std::to_string(channels) + " output channels");
  }
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  const Key key = attrs_.nhwc ? nhwc_conv_shapes(x, w, y) : conv_shapes(x, w, y);
  const void* weights = attrs_.nhwc ? khwc_weights_.get() : w.data;
  // The convolution into y: one cuBLASLt product (a 1x1 convolution that gemm_wins), or cuDNN's.
  bool product = false;
  if (gemm_) {
    // y[n] [K, H*W] = w [K, C] . x[n] [C, H*W]: one strided batch, the weights shared.
    const int64_t c = x.shape[1], hw = y.shape[2] * y.shape[3];
    const GemmCall call{y.shape[0], channels, hw, c, 0, c * hw, w.data, x.data, nullptr, nullptr, y.data};
    FUSEBOX_ASSIGN_OR_RETURN(const bool wins, gemm_wins(key, call, x, weights, y.nbytes()));
    // Slower for these shapes, or no cuBLASLt algorithm for them: cuDNN's convolution below.
    if (wins) {
      FUSEBOX_ASSIGN_OR_RETURN(product, gemm_->run(call));
    }
  }
  if (!product) {
    FUSEBOX_ASSIGN_OR_RETURN(DnnDevice * dev, dnn_device(*context_, dnn_));
    std::lock_guard<std::mutex> lock(dev->mu);
    FUSEBOX_ASSIGN_OR_RETURN(Plan * p, plan(key, dev->handle, x.data, weights));
    std::shared_ptr<void> workspace;
    if (p->workspace) {
      FUSEBOX_ASSIGN_OR_RETURN(workspace, context_->allocate(p->workspace));
    }
    const Cudnn& d = dnn_;
    // For messages only: built when a call fails, not on every run.
    auto what = [&] {
      return std::string(dtype_name(dtype_)) + " convolution of " + dims_text(x.shape) + " by " +
             dims_text(w.shape);
    };
    if (attrs_.epilogue.act == EpilogueAct::Relu && bias && !p->fused_unsupported && !attrs_.nhwc &&
        use_cudnn_fused(dtype_ != DType::F32 || tf32_)) {
      // y = relu(conv + alpha2 z + bias); without a residual z is y itself, scaled by 0.
      const float one = 1.0f, zero = 0.0f;
      const void* z = residual ? residual->data : y.data;
      const cudnnStatus_t s = d.cudnnConvolutionBiasActivationForward(
          dev->handle, &one, p->x, x.data, p->w, weights, p->conv, p->algo, workspace.get(), p->workspace,
          residual ? &one : &zero, p->y, z, p->bias, bias->data, relu_, p->y, y.data);
      if (s == CUDNN_STATUS_SUCCESS) {
        ++fused_runs;
        return Status::ok();
      }
      p->fused_unsupported = true;  // the convolution and the epilogue below compute the same
    }
    if (const cudnnStatus_t s = forward(dev->handle, *p, x.data, weights, workspace.get(), y.data);
        s != CUDNN_STATUS_SUCCESS) {
      return d.check(s, "cudnnConvolutionForward (" + what() + ")");
    }
  }
  if (!epilogue_.empty()) {
    // NCHW: channel (e / HW) % C of element e; NHWC: e % C.
    FUSEBOX_RETURN_IF_ERROR(run_conv_epilogue(
        *context_, epilogue_, y.numel(), channels, attrs_.nhwc ? 1 : y.shape[2] * y.shape[3],
        bias ? bias->data : nullptr, residual ? residual->data : nullptr, y.data));
  }
  ++(product ? gemm_runs : separate_runs);
  return Status::ok();
}

}  // namespace

ConvShapes conv_shapes(const BufferView& x, const BufferView& w, const BufferView& y) {
  ConvShapes key;
  for (size_t i = 0; i < 4; ++i) {
    key[i] = x.shape[i];
    key[4 + i] = w.shape[i];
    key[8 + i] = y.shape[i];
  }
  return key;
}

ConvShapes nhwc_conv_shapes(const BufferView& x, const BufferView& w, const BufferView& y) {
  // [N,1,H,W,C] as cuDNN's N, C, H, W.
  return {x.shape[0], x.shape[4], x.shape[2], x.shape[3], w.shape[0], w.shape[1],
          w.shape[2], w.shape[3], y.shape[0], y.shape[4], y.shape[2], y.shape[3]};
}

ConvRuns conv_runs() { return {fused_runs.load(), separate_runs.load(), gemm_runs.load()}; }

Status cudnn_available() { return cudnn().status(); }

Claim claim_conv(const Graph& g, const Node& n) {
  FUSEBOX_CHECK(n.op == Op::Conv2d || n.op == Op::FusedConvBiasAct) << "claim_conv on " << n.info().keyword;
  Status s = check_claim(g, n);
  if (!s.is_ok()) return Claim::refuse(s.message());
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_conv_kernel(std::shared_ptr<Context> context, const Graph& g,
                                                         const Node& n, bool allow_tf32) {
  FUSEBOX_RETURN_IF_ERROR(check_claim(g, n));
  FUSEBOX_ASSIGN_OR_RETURN(const Cudnn* dnn, cudnn());
  FUSEBOX_ASSIGN_OR_RETURN(ConvAttrs attrs, read_attrs(n));
  const DType dtype = g.type(n.outputs[0]).dtype;
  if (depthwise_fits(g, n).is_ok()) {
    const TensorType& w = g.type(n.inputs[1]);
    DepthwiseConv c;
    c.dtype = dtype;
    c.kernel = {w.shape[2].value(), w.shape[3].value()};
    c.stride = attrs.stride;
    c.dilation = attrs.dilation;
    c.pad = {attrs.pad[0], attrs.pad[1]};
    c.nhwc = attrs.nhwc;
    c.epilogue = attrs.epilogue;
    c.bias = attrs.bias;
    c.residual = attrs.residual;
    return make_depthwise_kernel(std::move(context), c);
  }
  // The handle is made now, so that a failure shows when the graph compiles.
  FUSEBOX_RETURN_IF_ERROR(dnn_device(*context, *dnn).status());
  cudnnActivationDescriptor_t relu = nullptr;
  if (attrs.epilogue.act == EpilogueAct::Relu) {
    FUSEBOX_RETURN_IF_ERROR(
        dnn->check(dnn->cudnnCreateActivationDescriptor(&relu), "cudnnCreateActivationDescriptor"));
    Status s =
        dnn->check(dnn->cudnnSetActivationDescriptor(relu, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
                   "relu descriptor");
    if (!s.is_ok()) {
      dnn->cudnnDestroyActivationDescriptor(relu);
      return s;
    }
  }
  std::string epilogue;
  if (attrs.bias >= 0 || attrs.residual >= 0 || attrs.epilogue.act != EpilogueAct::None) {
    epilogue = conv_epilogue_source(dtype, attrs.epilogue);
    // Compiled now, so that a failure shows when the graph compiles.
    if (Expected<CUfunction> f = context->function(epilogue, "fb_conv_epilogue"); !f) {
      if (relu) dnn->cudnnDestroyActivationDescriptor(relu);
      return f.status();
    }
  }
  std::shared_ptr<void> khwc_weights;
  if (attrs.nhwc) {
    Expected<std::shared_ptr<void>> up = upload_khwc(*context, *constant_value(g, n.inputs[1]));
    if (!up) {
      if (relu) dnn->cudnnDestroyActivationDescriptor(relu);
      return up.status();
    }
    khwc_weights = std::move(*up);
  }
  std::shared_ptr<const LtGemm> gemm;
  if (gemm_fits(g, n, attrs)) {
    // Without cuBLASLt the convolution stays cuDNN's.
    if (Expected<std::shared_ptr<const LtGemm>> made = LtGemm::make(context, dtype, allow_tf32)) gemm = *made;
  }
  return std::shared_ptr<const Kernel>(
      std::make_shared<ConvKernel>(std::move(context), *dnn, dtype, attrs, relu, std::move(epilogue),
                                   allow_tf32, std::move(khwc_weights), std::move(gemm)));
}

}  // namespace fusebox::cuda

#else  // no cuDNN headers in this build: every convolution runs on the CPU

namespace fusebox::cuda {

namespace {

constexpr const char* kNoHeaders =
    "this build of fusebox found no cuDNN headers (cudnn.h): convolutions run on the CPU; install cuDNN 9's "
    "headers (the toolkit's, or the nvidia-cudnn wheel's) and configure again";

}  // namespace

ConvRuns conv_runs() { return {}; }

Status cudnn_available() { return Status::unimplemented(kNoHeaders); }

Claim claim_conv(const Graph&, const Node&) { return Claim::refuse(kNoHeaders); }

Expected<std::shared_ptr<const Kernel>> make_conv_kernel(std::shared_ptr<Context>, const Graph&, const Node&,
                                                         bool) {
  return Status::unimplemented(kNoHeaders);
}

}  // namespace fusebox::cuda

#endif  // FUSEBOX_HAVE_CUDNN
