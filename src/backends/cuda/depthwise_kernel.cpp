#include "backends/cuda/depthwise_kernel.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string_view>

#include "backends/cuda/conv_epilogue.h"
#include "backends/cuda/conv_kernel.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr int kMaxThreads = 256;
constexpr int64_t kMaxTaps = 11;  // per axis: the taps are unrolled
constexpr const char* kEntry = "fb_depthwise_conv";

std::atomic<uint64_t> runs{0};

// Results per thread along the width: a kernel row's inputs are loaded once for all of them.
// Measured on an H100 (docs/benchmarks.md "Depthwise convolutions in a kernel of their own"): 4
// is best for 3x3 stride-2 layers (0.086 ms; 8: 0.105), 8 for 5x5 stride-1 ones (0.131 ms; 4:
// 0.151), where a row's 5 taps share more of the loaded inputs. So 8 for kernels at least 5 wide
// at stride 1, 4 otherwise. FUSEBOX_CUDA_DEPTHWISE_OUTPUTS (1 to 8, read once) sets it for every
// kernel.
int64_t outputs_per_thread(const DepthwiseConv& c) {
  static const int64_t forced = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_DEPTHWISE_OUTPUTS");
    const int v = e ? std::atoi(e) : 0;
    return int64_t(v >= 1 && v <= 8 ? v : 0);
  }();
  if (forced) return forced;
  return c.stride[1] == 1 && c.kernel[1] >= 5 ? 8 : 4;
}

// FUSEBOX_CUDA_DEPTHWISE=0 keeps cuDNN's depthwise convolutions (read once).
bool turned_off() {
  static const bool off = [] {
    const char* e = std::getenv("FUSEBOX_CUDA_DEPTHWISE");
    return e && std::string_view(e) == "0";
  }();
  return off;
}

class DepthwiseKernel final : public Kernel {
 public:
  DepthwiseKernel(std::shared_ptr<Context> context, CUfunction f, DepthwiseConv c)
      : context_(std::move(context)), function_(f), conv_(c) {}

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override;
  std::string_view kind() const override { return "cuda_depthwise_conv"; }

 private:
  std::shared_ptr<Context> context_;
  CUfunction function_;
  DepthwiseConv conv_;
};

Status DepthwiseKernel::run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const {
  FUSEBOX_CHECK(out.size() == 1 && in.size() >= 2) << "depthwise conv operands";
  const BufferView& x = in[0];
  const BufferView& w = in[1];
  const BufferView& y = out[0];
  const BufferView* bias = conv_.bias >= 0 ? &in[size_t(conv_.bias)] : nullptr;
  const BufferView* residual = conv_.residual >= 0 ? &in[size_t(conv_.residual)] : nullptr;
  const size_t rank = conv_.nhwc ? 5 : 4;
  FUSEBOX_CHECK(x.shape.size() == rank && y.shape.size() == rank && w.shape.size() == 4) << "depthwise ranks";
  // N, C, H, W of the input and OH, OW of the result, in either layout.
  const int64_t n = x.shape[0];
  const int64_t c = conv_.nhwc ? x.shape[4] : x.shape[1];
  const int64_t h = x.shape[2], wd = x.shape[3];
  const int64_t oh = y.shape[2], ow = y.shape[3];
  const int64_t yc = conv_.nhwc ? y.shape[4] : y.shape[1];
  // For messages only: built when something fails, not on every run.
  auto what = [&] {
    return "the depthwise convolution of " + dims_text(x.shape) + " by " + dims_text(w.shape);
  };
  if (w.shape != std::vector<int64_t>{c, 1, conv_.kernel[0], conv_.kernel[1]} || yc != c || y.shape[0] != n) {
    return Status::invalid(what() + " into " + dims_text(y.shape) + ": the weights must be [C,1," +
                           std::to_string(conv_.kernel[0]) + "," + std::to_string(conv_.kernel[1]) +
                           "] and the result of the input's batch and channels");
  }
  if (y.numel() == 0) return Status::ok();
  FUSEBOX_RETURN_IF_ERROR(dense_int32_operands({&x, &w, &y, bias, residual}, "the depthwise kernel"));
  if (bias && bias->numel() != c)
    return Status::invalid(what() + ": a bias of " + std::to_string(bias->numel()) + " values over " +
                           std::to_string(c) + " channels");
  if (residual && residual->shape != y.shape)
    return Status::invalid(what() + ": a residual " + dims_text(residual->shape) + " added to the result " +
                           dims_text(y.shape));

  // NCHW: rows are (n, c) planes, each of OH*OW results; NHWC: rows are (n, oh), each of OW*C.
  int ci = int(c), hi = int(h), wi = int(wd), ohi = int(oh), owi = int(ow);
  long long rows = conv_.nhwc ? n * oh : n * c;
  const int64_t per_thread = outputs_per_thread(conv_);
  const int64_t blocks_per_row = (ow + per_thread - 1) / per_thread;
  int inner = int(conv_.nhwc ? blocks_per_row * c : oh * blocks_per_row);
  void* pointers[] = {x.data, w.data, bias ? bias->data : nullptr, residual ? residual->data : nullptr,
                      y.data};
  void* args[] = {&ci,    &hi,          &wi,          &ohi,         &owi,         &rows,
                  &inner, &pointers[0], &pointers[1], &pointers[2], &pointers[3], &pointers[4]};
  const int threads = int(std::min<int64_t>(kMaxThreads, (inner + 31) / 32 * 32));
  const unsigned gx = unsigned((inner + threads - 1) / threads);
  const unsigned gy = unsigned(std::min<long long>(rows, 65535));
  FUSEBOX_RETURN_IF_ERROR(context_->make_current());
  const Driver& d = context_->driver();
  if (const CUresult r = d.cuLaunchKernel(function_, gx, gy, 1, unsigned(threads), 1, 1, 0,
                                          context_->stream(), args, nullptr);
      r != CUDA_SUCCESS) {
    return d.check(r, "launching " + what());
  }
  ++runs;
  return Status::ok();
}

}  // namespace

Status depthwise_fits(const Graph& g, const Node& n) {
  if (turned_off())
    return Status::unimplemented("FUSEBOX_CUDA_DEPTHWISE=0 keeps cuDNN's depthwise convolutions");
  const std::string what = std::string(n.info().keyword) + " ";
  const bool nhwc = n.attr_str("layout") == "nhwc";
  const TensorType& x = g.type(n.inputs[0]);
  const TensorType& w = g.type(n.inputs[1]);
  const Dim& channels = x.shape[nhwc ? 4 : 1];
  const int64_t groups = n.attr_i64("groups");
  if (!channels.is_static() || channels.value() != groups || groups == 1)
    return Status::unimplemented(what + "of " + x.to_string() + " in " + std::to_string(groups) +
                                 " groups is not depthwise");
  for (const Dim& d : w.shape) {
    if (!d.is_static())
      return Status::unimplemented(what + "with weights " + w.to_string() + " of run-time size");
  }
  if (w.shape[0].value() != groups || w.shape[1].value() != 1)
    return Status::unimplemented(what + "with weights " + w.to_string() +
                                 ": the depthwise kernel runs one output channel per input channel");
  if (w.shape[2].value() > kMaxTaps || w.shape[3].value() > kMaxTaps)
    return Status::unimplemented(what + "with weights " + w.to_string() +
                                 ": the depthwise kernel unrolls at most " + std::to_string(kMaxTaps) +
                                 " taps per axis");
  return Status::ok();
}

std::string depthwise_source(const DepthwiseConv& c) {
  std::string s = conv_epilogue_functions(c.dtype, c.epilogue);
  auto define = [&s](const char* name, int64_t v) {
    s += "#define " + std::string(name) + " " + std::to_string(v) + "\n";
  };
  define("KH", c.kernel[0]);
  define("KW", c.kernel[1]);
  define("SH", c.stride[0]);
  define("SW", c.stride[1]);
  define("DH", c.dilation[0]);
  define("DW", c.dilation[1]);
  define("PT", c.pad[0]);
  define("PL", c.pad[1]);
  define("R", outputs_per_thread(c));
  define("NIN", (outputs_per_thread(c) - 1) * c.stride[1] + (c.kernel[1] - 1) * c.dilation[1] + 1);
  // acc[q] = the sum of the taps of results (oh, ow0 + q), q < R, over input plane `xp`
  // (element (ih, iw) at xp[(ih * W + iw) * step]) and the channel's weights `wp`, in tap order
  // (rows, then columns; taps in the padding skipped), each rounded to S. A kernel row's NIN
  // inputs are loaded once for the R results.
  s += R"CUDA(
__device__ __forceinline__ void fb_taps(const S* __restrict__ xp, const S* __restrict__ wp, int H, int W, int step,
                                        int oh, int ow0, float* acc) {
  float wv[KH * KW];
#pragma unroll
  for (int t = 0; t < KH * KW; ++t) wv[t] = fb_in(wp[t]);
#pragma unroll
  for (int q = 0; q < R; ++q) acc[q] = 0.0f;
#pragma unroll
  for (int i = 0; i < KH; ++i) {
    const int ih = oh * SH - PT + i * DH;
    if ((unsigned)ih >= (unsigned)H) continue;
    const S* row = xp + ih * W * step;
    const int iw0 = ow0 * SW - PL;
    float in[NIN];
    bool ok[NIN];
#pragma unroll
    for (int k = 0; k < NIN; ++k) {
      ok[k] = (unsigned)(iw0 + k) < (unsigned)W;
      in[k] = ok[k] ? fb_in(row[(iw0 + k) * step]) : 0.0f;
    }
#pragma unroll
    for (int q = 0; q < R; ++q) {
#pragma unroll
      for (int j = 0; j < KW; ++j) {
        const int k = q * SW + j * DW;
        if (ok[k]) acc[q] = fmaf(in[k], wv[i * KW + j], acc[q]);
      }
    }
  }
#pragma unroll
  for (int q = 0; q < R; ++q) acc[q] = fb_in(fb_out(acc[q]));
}
)CUDA";
  // inner: NCHW OH * ceil(OW / R) (a row is an (n, c) plane), NHWC ceil(OW / R) * C (a row is
  // (n, oh)). Thread l of a row computes R results along the width.
  s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kMaxThreads) + ") " + kEntry +
       "(int C, int H, int W, int OH, int OW, long long rows, int inner, const S* __restrict__ x,\n"
       "    const S* __restrict__ w, const S* __restrict__ bias, const S* __restrict__ r, S* __restrict__ y) "
       "{\n"
       "  const int l = blockIdx.x * blockDim.x + threadIdx.x;\n"
       "  if (l >= inner) return;\n"
       "  const int OWB = (OW + R - 1) / R;\n"
       "  float acc[R];\n";
  if (c.nhwc) {
    s += R"CUDA(  const int owb = l / C, c = l - owb * C, ow0 = owb * R;
  for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
    const long long n = row / OH;
    const int oh = int(row - n * OH);
    fb_taps(x + n * H * W * C + c, w + c * (KH * KW), H, W, C, oh, ow0, acc);
#pragma unroll
    for (int q = 0; q < R; ++q) {
      if (ow0 + q >= OW) break;
      const long long e = (row * OW + ow0 + q) * C + c;
      y[e] = fb_out(fb_epilogue(acc[q], bias, r, c, e));
    }
  }
}
)CUDA";
  } else {
    s += R"CUDA(  const int oh = l / OWB, ow0 = (l - oh * OWB) * R;
  for (long long row = blockIdx.y; row < rows; row += gridDim.y) {
    const int c = int(row % C);
    fb_taps(x + row * H * W, w + c * (KH * KW), H, W, 1, oh, ow0, acc);
#pragma unroll
    for (int q = 0; q < R; ++q) {
      if (ow0 + q >= OW) break;
      const long long e = (row * OH + oh) * OW + ow0 + q;
      y[e] = fb_out(fb_epilogue(acc[q], bias, r, c, e));
    }
  }
}
)CUDA";
  }
  return s;
}

Expected<std::shared_ptr<const Kernel>> make_depthwise_kernel(std::shared_ptr<Context> context,
                                                              const DepthwiseConv& c) {
  FUSEBOX_CHECK(c.dtype == DType::F32 || c.dtype == DType::F16) << "depthwise dtype";
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context->function(depthwise_source(c), kEntry));
  return std::shared_ptr<const Kernel>(std::make_shared<DepthwiseKernel>(std::move(context), f, c));
}

uint64_t depthwise_runs() { return runs.load(); }

}  // namespace fusebox::cuda
