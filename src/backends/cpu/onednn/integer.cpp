// IntegerKernel: matmul_integer and conv2d_integer through oneDNN's int8 primitives: u8 or s8
// activations whose zero point comes at run time, constant weights less their zero points packed
// once as s8, an s32 result.
//
// EXACTNESS. oneDNN 2.6's int8 results are exact only in part. Measured on an AVX-512 host with
// VNNI (a 3x3 convolution over 512 channels, ONEDNN_MAX_CPU_ISA limiting the library's ISA):
//   - without VNNI (jit_int8:avx512_core, jit_uni_int8:avx2) pairs of u8*s8 products are summed
//     in 16 bits with saturation: every output of random data was wrong;
//   - with VNNI (jit_int8:avx512_core_vnni) the s32 sums are exact, but the kernel converts them
//     to f32 on the way out: sums near 2^26 came back off by up to 3.
// So the kernel is made only where neither can happen:
//   - the library's ISA has VNNI (avx512_core_vnni or later); FUSEBOX_ONEDNN_INT8=0 turns the
//     kernel off (for measuring and for the tests of the reference path);
//   - the weights are constants that, less their zero points, fit s8;
//   - 255 * (the largest sum of |w - w_zp| over one output's weights) < 2^24. Every term oneDNN
//     forms (the product sum of raw or shifted activations, its zero-point and s8 compensations)
//     and every partial sum is then an integer below 2^24, which f32 holds exactly.
// Otherwise create() answers unimplemented and the reference kernel runs.
//
// Shapes: matmul_integer's a [..., M, K] folds its batch into M against b [K, N] (a batched or
// 1-D b is left to the reference); a per-row zero point of a is too. conv2d_integer's x is NCHW,
// or channels-last [N,1,H,W,C] (layout = "nhwc", which the CPU backend's lowering gives chains of
// them); the primitive picks its formats, NHWC on an AVX-512 host, so NCHW activations are
// reordered in and the result out on every run, NHWC ones are not.
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <unordered_map>

#include "backends/cpu/onednn/common.h"
#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

bool int8_exact() { return false; }

struct IntegerKernel::Impl {};
IntegerKernel::IntegerKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IntegerKernel::~IntegerKernel() = default;
Expected<std::unique_ptr<IntegerKernel>> IntegerKernel::create(const IntegerSpec&, const Array&,
                                                               const Array&) {
  return Status::unimplemented("onednn integer contraction: fusebox was built without oneDNN (libdnnl-dev)");
}
Status IntegerKernel::run(const Array&, const Array&, Array&) const {
  return Status::unimplemented("onednn integer contraction: fusebox was built without oneDNN (libdnnl-dev)");
}

#else

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

bool library_has_vnni() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return true;
    default:
      return false;
  }
}

bool turned_off() {
  const char* env = std::getenv("FUSEBOX_ONEDNN_INT8");
  return env && std::string_view(env) == "0";
}

int64_t value_at(const Array& a, int64_t i) {
  return a.dtype() == DType::U8 ? int64_t(a.data<uint8_t>()[i]) : int64_t(a.data<int8_t>()[i]);
}

memory::data_type int8_type(DType t) {
  return t == DType::U8 ? memory::data_type::u8 : memory::data_type::s8;
}

struct Entry {
  memory::desc user_src, user_dst, src, dst, wei, scratchpad;
  dnnl::primitive prim;
  std::optional<dnnl::reorder> src_in, dst_out;
  memory packed_wei;  // the centred weights in the primitive's format, owned by the entry
};

}  // namespace

bool int8_exact() { return library_has_vnni() && !turned_off(); }

struct IntegerKernel::Impl {
  IntegerSpec spec;
  DType x_dtype = DType::U8;
  std::vector<int8_t> centred;  // w - w_zp: [K, N] for matmul, [O, C/g, kh, kw] for conv
  std::vector<int64_t> wshape;
  ShapeCache<Entry> cache;

  memory::dims wei_dims() const {
    if (!spec.conv || spec.groups == 1) return memory::dims(wshape.begin(), wshape.end());
    const int64_t g = spec.groups;
    return {g, wshape[0] / g, wshape[1], wshape[2], wshape[3]};
  }

  Expected<std::shared_ptr<const Entry>> build(const memory::dims& src, const memory::dims& dst) const {
    const dnnl::engine& eng = cpu_engine();
    auto e = std::make_shared<Entry>();
    const memory::data_type xt = int8_type(x_dtype), s8 = memory::data_type::s8, s32 = memory::data_type::s32;
    dnnl::primitive_attr attr;
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const memory::dims wdims = wei_dims();
    memory::desc user_wei;
    if (spec.conv) {
      const Tag act = spec.nhwc ? Tag::nhwc : Tag::nchw;
      e->user_src = memory::desc(src, xt, act);
      e->user_dst = memory::desc(dst, s32, act);
      user_wei = memory::desc(wdims, s8, spec.groups == 1 ? Tag::oihw : Tag::goihw);
      memory::dims strides{spec.stride[0], spec.stride[1]},
          dilates{spec.dilation[0] - 1, spec.dilation[1] - 1};
      memory::dims pad_l{spec.pad[0], spec.pad[1]}, pad_r;
      for (int i = 0; i < 2; ++i) {
        // The smallest end pad consistent with the result's size (extra end padding is never read).
        const int64_t ext = (wshape[size_t(2 + i)] - 1) * spec.dilation[i] + 1;
        const int64_t pr_min =
            (dst[size_t(2 + i)] - 1) * spec.stride[i] + ext - src[size_t(2 + i)] - spec.pad[i];
        pad_r.push_back(std::clamp(spec.pad[2 + i], pr_min, pr_min + spec.stride[i] - 1));
      }
      dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                        dnnl::algorithm::convolution_direct, memory::desc(src, xt, Tag::any),
                                        memory::desc(wdims, s8, Tag::any), memory::desc(dst, s32, Tag::any),
                                        strides, dilates, pad_l, pad_r);
      dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      e->src = pd.src_desc(), e->dst = pd.dst_desc(), e->wei = pd.weights_desc();
      e->scratchpad = pd.scratchpad_desc();
      e->prim = dnnl::convolution_forward(pd);
    } else {
      e->user_src = e->src = memory::desc(src, xt, Tag::ab);
      e->user_dst = e->dst = memory::desc(dst, s32, Tag::ab);
      user_wei = memory::desc(wdims, s8, Tag::ab);
      dnnl::matmul::desc d(e->src, memory::desc(wdims, s8, Tag::any), e->dst);
      dnnl::matmul::primitive_desc pd(d, attr, eng);
      e->wei = pd.weights_desc();
      e->scratchpad = pd.scratchpad_desc();
      e->prim = dnnl::matmul(pd);
    }
    if (e->user_src != e->src)
      e->src_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->user_src, eng, e->src));
    if (e->user_dst != e->dst)
      e->dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->dst, eng, e->user_dst));
    memory user(user_wei, eng, const_cast<int8_t*>(centred.data()));
    e->packed_wei = memory(e->wei, eng);
    dnnl::stream stream(eng);
    dnnl::reorder(user, e->packed_wei).execute(stream, user, e->packed_wei);
    stream.wait();
    return std::shared_ptr<const Entry>(std::move(e));
  }
};

IntegerKernel::IntegerKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
IntegerKernel::~IntegerKernel() = default;

Expected<std::unique_ptr<IntegerKernel>> IntegerKernel::create(const IntegerSpec& spec, const Array& weights,
                                                               const Array& weight_zp) {
  const char* op = spec.conv ? "onednn conv2d_integer" : "onednn matmul_integer";
  if (turned_off()) return Status::unimplemented(std::string(op) + ": turned off by FUSEBOX_ONEDNN_INT8=0");
  if (!library_has_vnni()) {
    return Status::unimplemented(std::string(op) + ": oneDNN's int8 kernels are exact only with VNNI");
  }
  if (spec.x_dtype != DType::U8 && spec.x_dtype != DType::I8) {
    return Status::invalid(std::string(op) + ": activations must be u8 or i8");
  }
  const bool w_ok = (weights.dtype() == DType::U8 || weights.dtype() == DType::I8) &&
                    weight_zp.dtype() == weights.dtype() && weights.rank() == (spec.conv ? 4 : 2);
  if (!w_ok)
    return Status::unimplemented(std::string(op) + ": weights " + weights.type_string() + " not taken");
  // Output channels: conv's dim 0 ([O, C/g, kh, kw]), matmul's columns ([K, N]).
  const int64_t outs = spec.conv ? weights.shape()[0] : weights.shape()[1];
  if (weight_zp.numel() != 1 && weight_zp.numel() != outs) {
    return Status::invalid(std::string(op) + ": weight zero point " + weight_zp.type_string() +
                           " does not fit " + weights.type_string());
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->wshape = weights.shape();
  impl->centred.resize(size_t(weights.numel()));
  std::vector<int64_t> abs_sum(size_t(outs), 0);
  const int64_t per_out = spec.conv ? weights.numel() / std::max<int64_t>(outs, 1) : 0;
  for (int64_t i = 0; i < weights.numel(); ++i) {
    const int64_t o = spec.conv ? i / per_out : i % outs;
    const int64_t v = value_at(weights, i) - value_at(weight_zp, weight_zp.numel() == 1 ? 0 : o);
    if (v < -128 || v > 127) {
      return Status::unimplemented(std::string(op) + ": a weight less its zero point (" + std::to_string(v) +
                                   ") does not fit s8");
    }
    impl->centred[size_t(i)] = int8_t(v);
    abs_sum[size_t(o)] += v < 0 ? -v : v;
  }
  constexpr int64_t kExactInF32 = int64_t(1) << 24;
  for (int64_t s : abs_sum) {
    if (255 * s >= kExactInF32) {
      return Status::unimplemented(std::string(op) + ": sums may reach 2^24 (255 x " + std::to_string(s) +
                                   "), beyond what oneDNN's f32 output conversion keeps exact");
    }
  }
  impl->x_dtype = spec.x_dtype;
  return std::unique_ptr<IntegerKernel>(new IntegerKernel(std::move(impl)));
}

Status IntegerKernel::run(const Array& x, const Array& x_zp, Array& out) const {
  const IntegerSpec& spec = impl_->spec;
  const char* op = spec.conv ? "onednn conv2d_integer" : "onednn matmul_integer";
  if (x.dtype() != impl_->x_dtype || out.dtype() != DType::I32 || x_zp.dtype() != x.dtype()) {
    return Status::invalid(std::string(op) + ": operands " + x.type_string() + ", " + x_zp.type_string() +
                           " -> " + out.type_string() + " are not the kernel's types");
  }
  if (x_zp.numel() != 1)
    return Status::unimplemented(std::string(op) + ": a per-row zero point is left to the reference");
  memory::dims src, dst;
  if (spec.conv) {
    const int rank = spec.nhwc ? 5 : 4;
    bool fits = x.rank() == rank && out.rank() == rank;
    if (fits && spec.nhwc) fits = x.shape()[1] == 1 && out.shape()[1] == 1;
    if (fits) {
      src = to_dims(spec.nhwc ? logical_nchw(x.shape()) : x.shape());
      dst = to_dims(spec.nhwc ? logical_nchw(out.shape()) : out.shape());
      fits = src[1] == impl_->wshape[1] * spec.groups && dst[1] == impl_->wshape[0];
    }
    if (!fits) {
      return Status::invalid(std::string(op) + ": " + x.type_string() + " -> " + out.type_string() +
                             " does not fit the weights");
    }
  } else {
    const int64_t k = impl_->wshape[0], n = impl_->wshape[1];
    if (x.rank() < 2 || x.shape().back() != k || out.numel() != x.numel() / k * n) {
      return Status::unimplemented(std::string(op) + ": " + x.type_string() + " -> " + out.type_string() +
                                   " is left to the reference");
    }
    src = {x.numel() / k, k};
    dst = {x.numel() / k, n};
  }
  if (out.numel() == 0) return Status::ok();
  if (x.numel() == 0)
    return Status::unimplemented(std::string(op) + ": empty input is left to the reference kernel");
  std::vector<int64_t> key = src;
  key.insert(key.end(), dst.begin(), dst.end());
  return guarded(op, x.type_string(), [&]() -> Status {
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e,
                             impl_->cache.get(key, [&] { return impl_->build(src, dst); }));
    const dnnl::engine& eng = cpu_engine();
    dnnl::stream stream(eng);
    memory user_src(e->user_src, eng, data_ptr(x));
    memory src_mem = user_src;
    if (e->src_in) {
      src_mem = memory(e->src, eng, thread_scratch(0, e->src.get_size()));
      e->src_in->execute(stream, user_src, src_mem);
    }
    memory user_dst(e->user_dst, eng, out.raw());
    memory dst_mem = e->dst_out ? memory(e->dst, eng, thread_scratch(1, e->dst.get_size())) : user_dst;
    int32_t zp = int32_t(value_at(x_zp, 0));
    memory zp_mem(memory::desc({1}, memory::data_type::s32, Tag::x), eng, &zp);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_mem},
                                         {DNNL_ARG_WEIGHTS, e->packed_wei},
                                         {DNNL_ARG_DST, dst_mem},
                                         {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem},
                                         {DNNL_ARG_SCRATCHPAD, primitive_scratchpad(e->scratchpad)}};
    e->prim.execute(stream, args);
    if (e->dst_out) e->dst_out->execute(stream, dst_mem, user_dst);
    stream.wait();
    return Status::ok();
  });
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
