// The pooling kernels' sources, claims and Kernel: one compiled source per (op, dtype), kept
// after its first use; window attributes from the node, sizes from the buffers at each run.
#include "backends/cuda/pool_kernel.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "backends/cuda/prelude.h"
#include "ir/check.h"
#include "ir/layout.h"

namespace fusebox::cuda {

namespace {

constexpr int kPoolThreads = 256;

std::optional<PoolOp> pool_op_of(Op op) {
  switch (op) {
    case Op::MaxPool2d: return PoolOp::Max;
    case Op::AvgPool2d: return PoolOp::Avg;
    case Op::GlobalAvgPool: return PoolOp::GlobalAvg;
    default: return std::nullopt;
  }
}

const char* pool_name(PoolOp op) {
  switch (op) {
    case PoolOp::Max: return "max";
    case PoolOp::Avg: return "avg";
    case PoolOp::GlobalAvg: return "global_avg";
  }
  return "?";
}

constexpr DType kPoolDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64};

bool is_pool_dtype(DType d) { return std::find(std::begin(kPoolDTypes), std::end(kPoolDTypes), d) != std::end(kPoolDTypes); }

// The body of each op, run by one thread for output element t (plane p, row oh, column ow,
// channel c of the CI interleaved in a pixel: 1 for NCHW, whose planes are the N*C images; C for
// NHWC [N,1,H,W,C], whose planes are the N images). Element (ih, iw) of t's plane is
// plane[(ih * W + iw) * CI].
constexpr const char* kMaxBody = R"CUDA(
    const i64 c = t % CI, u = t / CI;
    const i64 ow = u % OW, oh = (u / OW) % OH, p = u / (OW * OH);
    const S* plane = x + p * H * W * CI + c;
    C best = -FB_HIGHEST;
    bool found_nan = false;
    for (i64 ky = 0; ky < kh && !found_nan; ++ky) {
      const i64 ih = oh * sh - pt + ky * dh;
      if (ih < 0 || ih >= H) continue;
      for (i64 kx = 0; kx < kw; ++kx) {
        const i64 iw = ow * sw - pl + kx * dw;
        if (iw < 0 || iw >= W) continue;
        const C v = fb_ld(plane[(ih * W + iw) * CI]);
        if (v != v) { best = v; found_nan = true; break; }
        if (v > best) best = v;
      }
    }
    y[t] = fb_st(best);
)CUDA";

constexpr const char* kAvgBody = R"CUDA(
    const i64 c = t % CI, u = t / CI;
    const i64 ow = u % OW, oh = (u / OW) % OH, p = u / (OW * OH);
    const S* plane = x + p * H * W * CI + c;
    const i64 h0 = oh * sh - pt, w0 = ow * sw - pl;
    // The part of the window inside the padded extent [-pad_begin, size + pad_end).
    const i64 padded_h = min(h0 + kh, H + pb) - h0, padded_w = min(w0 + kw, W + pr) - w0;
    double sum = 0;
    i64 count = 0;
    for (i64 ih = max(h0, i64(0)); ih < min(h0 + kh, H); ++ih) {
      for (i64 iw = max(w0, i64(0)); iw < min(w0 + kw, W); ++iw) {
        sum += (double)fb_ld(plane[(ih * W + iw) * CI]);
        ++count;
      }
    }
    const i64 divisor = include_pad ? padded_h * padded_w : count;
    const double mean = divisor > 0 ? sum / (double)divisor : __longlong_as_double(0x7ff8000000000000ll);
    y[t] = fb_st((C)mean);
)CUDA";

// Global average pooling: one warp per output element t (H here is the pixel count), its lanes
// summing every 32nd pixel in double and joined by shuffles. A thread per output summed a whole
// plane alone: the squeeze-excite pools of efficientnet_b0 at batch 1 (C = 96 outputs of 12544
// pixels) ran on 96 threads. f64 keeps that order (sum in the reference's order, bit for bit):
// kGlobalBody.
constexpr const char* kGlobalBody = R"CUDA(
    const S* plane = x + (t / CI) * H * CI + t % CI;
    double sum = 0;
    for (i64 i = 0; i < H; ++i) sum += (double)fb_ld(plane[i * CI]);
    y[t] = fb_st((C)(H > 0 ? sum / (double)H : __longlong_as_double(0x7ff8000000000000ll)));
)CUDA";
constexpr const char* kGlobalLoop = R"CUDA(
  const i64 total = planes * CI;
  const int lane = threadIdx.x & 31;
  const i64 warps = (i64(gridDim.x) * blockDim.x) >> 5;
  for (i64 t = (i64(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; t < total; t += warps) {
    const S* plane = x + (t / CI) * H * CI + t % CI;
    double sum = 0;
    for (i64 i = lane; i < H; i += 32) sum += (double)fb_ld(plane[i * CI]);
    for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) y[t] = fb_st((C)(H > 0 ? sum / (double)H : __longlong_as_double(0x7ff8000000000000ll)));
  }
)CUDA";

bool warp_per_output(PoolOp op, DType dtype) { return op == PoolOp::GlobalAvg && dtype != DType::F64; }

class PoolKernel final : public Kernel {
 public:
  PoolKernel(std::shared_ptr<Context> context, const Node& n, PoolOp op)
      : context_(std::move(context)), op_(op), keyword_(n.info().keyword), nhwc_(has_nhwc_layout(n)) {
    if (op == PoolOp::GlobalAvg) return;
    const auto& k = n.attr_i64s("kernel");
    const auto& s = n.attr_i64s("stride");
    const auto& p = n.attr_i64s("pad");
    const int64_t w[8] = {k[0], k[1], s[0], s[1], p[0], p[1], p[2], p[3]};
    std::copy(std::begin(w), std::end(w), window_);
    if (op == PoolOp::Max) {
      const auto& d = n.attr_i64s("dilation");
      window_[8] = d[0];
      window_[9] = d[1];
    } else {
      window_[10] = n.attr_bool("count_include_pad") ? 1 : 0;
    }
  }

  Status run(Stream&, std::span<const BufferView> in, std::span<const BufferView> out) const override {
    FUSEBOX_CHECK(in.size() == 1 && out.size() == 1 && in[0].dtype == out[0].dtype) << keyword_ << " operands";
    const BufferView& x = in[0];
    const BufferView& y = out[0];
    FUSEBOX_CHECK(x.shape.size() >= 3 && x.shape.size() == y.shape.size()) << keyword_ << " ranks";
    FUSEBOX_CHECK(!nhwc_ || x.shape.size() == 5) << keyword_ << " in NHWC takes [N,1,H,W,C]";
    const int64_t total = y.numel();
    if (total == 0) return Status::ok();
    // planes, H, W, OH, OW, CI (channels interleaved in a pixel)
    int64_t sizes[6] = {x.shape[0] * x.shape[1], 0, 1, 1, 1, nhwc_ ? x.shape[4] : 1};
    if (op_ == PoolOp::GlobalAvg) {
      sizes[1] = x.numel() / std::max<int64_t>(sizes[0] * sizes[5], 1);
    } else {
      FUSEBOX_CHECK(x.shape.size() == (nhwc_ ? 5u : 4u)) << keyword_ << " takes NCHW or NHWC";
      sizes[1] = x.shape[2];
      sizes[2] = x.shape[3];
      sizes[3] = y.shape[2];
      sizes[4] = y.shape[3];
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, function(PoolVariant{op_, x.dtype}));
    FUSEBOX_RETURN_IF_ERROR(context_->make_current());
    void* ptrs[2] = {x.data, y.data};
    int64_t window[11];
    std::copy(std::begin(window_), std::end(window_), window);
    void* args[19];
    args[0] = &ptrs[0];
    args[1] = &ptrs[1];
    for (int i = 0; i < 6; ++i) args[2 + i] = &sizes[i];
    for (int i = 0; i < 11; ++i) args[8 + i] = &window[i];
    const int64_t threads = warp_per_output(op_, x.dtype) ? total * 32 : total;
    const unsigned blocks =
        unsigned(std::min<int64_t>((threads + kPoolThreads - 1) / kPoolThreads, int64_t(1) << 20));
    const Driver& d = context_->driver();
    return d.check(d.cuLaunchKernel(f, blocks, 1, 1, kPoolThreads, 1, 1, 0, context_->stream(), args, nullptr),
                   "launching the CUDA " + keyword_ + " kernel");
  }
  std::string_view kind() const override { return "cuda_pool"; }

 private:
  Expected<CUfunction> function(const PoolVariant& v) const {
    const std::string key = v.key();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context_->function(pool_source(v), kPoolEntry));
    std::lock_guard<std::mutex> lock(mu_);
    functions_.emplace(key, f);
    return f;
  }

  std::shared_ptr<Context> context_;
  PoolOp op_;
  std::string keyword_;
  bool nhwc_;  // layout = "nhwc": [N,1,H,W,C]
  // kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right,
  // dilation_h, dilation_w, count_include_pad
  int64_t window_[11] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 0};
  mutable std::mutex mu_;
  mutable std::map<std::string, CUfunction> functions_;  // by PoolVariant::key()
};

}  // namespace

std::string PoolVariant::key() const { return std::string(pool_name(op)) + "/" + std::string(dtype_name(dtype)); }

std::string scalar_type_source(DType dtype) {
  auto floats = [](const char* storage, const char* compute, const char* load, const char* store, const char* store64) {
    std::string s = "typedef " + std::string(storage) + " S;\ntypedef " + compute + " C;\n";
    s += "__device__ __forceinline__ C fb_ld(S v) { return " + std::string(load) + "; }\n";
    s += "__device__ __forceinline__ S fb_st(C v) { return " + std::string(store) + "; }\n";
    s += "__device__ __forceinline__ S fb_st64(double v) { return " + std::string(store64) + "; }\n";
    s += "#define FB_FLOAT 1\n";
    if (std::string(compute) == "float") s += "#define FB_HIGHEST __int_as_float(0x7f800000)\n#define FB_LOWEST (-FB_HIGHEST)\n";
    else s += "#define FB_HIGHEST __longlong_as_double(0x7ff0000000000000ll)\n#define FB_LOWEST (-FB_HIGHEST)\n";
    return s;
  };
  auto ints = [](const char* type, const char* lowest, const char* highest) {
    std::string s = "typedef " + std::string(type) + " S;\ntypedef " + type + " C;\n";
    s += "__device__ __forceinline__ C fb_ld(S v) { return v; }\n";
    s += "__device__ __forceinline__ S fb_st(C v) { return v; }\n";
    s += "__device__ __forceinline__ S fb_st64(double v) { return S(fb_f64_to_i64(v)); }\n";
    s += "#define FB_FLOAT 0\n#define FB_LOWEST (" + std::string(lowest) + ")\n#define FB_HIGHEST (" + highest + ")\n";
    return s;
  };
  switch (dtype) {
    case DType::F32: return floats("float", "float", "v", "v", "(float)v");
    case DType::F64: return floats("double", "double", "v", "v", "v");
    case DType::F16: return floats("u16", "float", "fb_f16_load(v)", "fb_f16_store(v)", "fb_f16_store(fb_f64_to_f32_odd(v))");
    case DType::BF16: return floats("u16", "float", "fb_bf16_load(v)", "fb_bf16_store(v)", "fb_bf16_store(fb_f64_to_f32_odd(v))");
    case DType::I32: return ints("i32", "-2147483647 - 1", "2147483647");
    case DType::I64: return ints("i64", "-9223372036854775807ll - 1", "9223372036854775807ll");
    default: return "";
  }
}

std::string pool_source(const PoolVariant& v) {
  std::string s(prelude_source());
  s += "\n// ---- pool kernel " + v.key() + "\n" + scalar_type_source(v.dtype);
  s += "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kPoolThreads) + ") " + kPoolEntry +
       "(const S* __restrict__ x, S* __restrict__ y, i64 planes, i64 H, i64 W, i64 OH, i64 OW, i64 CI,\n"
       "    i64 kh, i64 kw, i64 sh, i64 sw, i64 pt, i64 pl, i64 pb, i64 pr, i64 dh, i64 dw, i64 include_pad) "
       "{\n";
  if (warp_per_output(v.op, v.dtype)) {
    s += kGlobalLoop;
    s += "}\n";
    return s;
  }
  s += "  const i64 total = planes * OH * OW * CI;\n";
  s += "  for (i64 t = i64(blockIdx.x) * blockDim.x + threadIdx.x; t < total; t += i64(gridDim.x) * blockDim.x) {";
  s += v.op == PoolOp::Max ? kMaxBody : v.op == PoolOp::Avg ? kAvgBody : kGlobalBody;
  s += "  }\n}\n";
  return s;
}

std::vector<PoolVariant> all_pool_variants() {
  std::vector<PoolVariant> out;
  for (PoolOp op : {PoolOp::Max, PoolOp::Avg, PoolOp::GlobalAvg}) {
    for (DType d : kPoolDTypes) out.push_back({op, d});
  }
  return out;
}

std::optional<Claim> claim_pool_op(const Graph& g, const Node& n) {
  std::optional<PoolOp> op = pool_op_of(n.op);
  if (!op) return std::nullopt;
  const std::string kw(n.info().keyword);
  const TensorType& x = g.type(n.inputs[0]);
  if (!is_pool_dtype(x.dtype)) {
    return Claim::refuse(kw + " on " + std::string(dtype_name(x.dtype)) + ": the CUDA pooling kernels run f32, f16, bf16 and f64");
  }
  if (has_nchwc_layout(n) && !has_nhwc_layout(n)) {
    return Claim::refuse(kw + " in the nchwc layout: the CUDA pooling kernels take NCHW and NHWC only");
  }
  if (has_nhwc_layout(n)) {
    if (x.rank() != 5 || x.shape[1] != Dim(1))
      return Claim::refuse(kw + " in NHWC over " + x.to_string() + ": not [N,1,H,W,C]");
  } else if (*op == PoolOp::GlobalAvg && x.rank() < 3) {
    return Claim::refuse(kw + " over " + x.to_string() + ": the CUDA kernel takes N, C and spatial dims");
  } else if (*op != PoolOp::GlobalAvg && x.rank() != 4) {
    return Claim::refuse(kw + " over " + x.to_string() + ": the CUDA pooling kernels take NCHW (rank 4)");
  }
  if (*op == PoolOp::GlobalAvg) return Claim::accept();
  const bool lengths_ok = n.attr_i64s("kernel").size() == 2 && n.attr_i64s("stride").size() == 2 &&
                          n.attr_i64s("pad").size() == 4 && (*op != PoolOp::Max || n.attr_i64s("dilation").size() == 2);
  if (!lengths_ok) return Claim::refuse(kw + ": the CUDA pooling kernels take 2 kernel sizes, 2 strides, 4 pads and 2 dilations");
  return Claim::accept();
}

Expected<std::shared_ptr<const Kernel>> make_pool_kernel(std::shared_ptr<Context> context, const Graph& g, const Node& n) {
  std::optional<Claim> claim = claim_pool_op(g, n);
  if (!claim) return Status::unimplemented(std::string(n.info().keyword) + " is not a pooling op");
  if (!*claim) return Status::unimplemented(claim->reason);
  return std::shared_ptr<const Kernel>(std::make_shared<PoolKernel>(std::move(context), n, *pool_op_of(n.op)));
}

}  // namespace fusebox::cuda
