// ConvKernel: conv2d and conv_transpose2d through oneDNN's (de)convolution primitives, the
// epilogue as the bias input and post-ops.
//
// Layouts. With ConvSpec::block set, activations arrive and leave as nChw<b>c and the primitive
// reads and writes them in place (src/dst descriptors fixed to that format: no reorders; the CPU
// backend's lowering keeps CNN activations blocked, backends/assign_blocked_layout.h).
// Activations that arrive and leave as NCHW run one of two ways:
//   plain    src/dst descriptors fixed to nchw: no reorders, whatever kernel oneDNN has for nchw
//            (on AVX2 often gemm-based); residual copied into dst, which a `sum` post-op adds
//   blocked  src/dst `any`: oneDNN picks its preferred (blocked, nChw8c/16c) format; src is
//            reordered in and dst out on every run; residual is reordered into dst, which a
//            `sum` post-op then adds
// Weights are `any` in both, reordered once per shape binding when constant, else per run.
// LAYOUT FIGURES (bench/onednn_bench BM_ConvLayout: ConvKernel with bias and constant weights,
// reorders included; ms of CPU time, one thread, median of 3; AMD EPYC, AVX2, no AVX-512,
// oneDNN 2.6.3; the 2-core host was shared, so one thread and CPU time are what measured cleanly):
//                                        plain   blocked   oneDNN picks (plain / blocked)
//   3x3 64->64, 1x64x112x112, pad 1      20.1    13.5      gemm:jit / jit:avx2 nChw8c
//   1x1 256->64, 1x256x56x56              1.39    2.38     gemm:jit / jit:avx2 (+ reorders)
//   depthwise 3x3, 1x96x56x56, g 96       2.58    0.278    gemm:jit / jit_dw:avx2 nChw8c
//   first layer 3->32 s2, 1x3x224x224     1.02    0.413    gemm:jit / jit:avx2 (src nchw)
// So choose_layout(): plain for a dense 1x1 stride-1 conv without post-ops (a plain GEMM on
// NCHW, where reorders cost more than they save), blocked for everything else. FUSEBOX_ONEDNN_CONV_LAYOUT=plain|blocked
// in the environment overrides the rule (for measuring and for the tests of both paths).
//
// Pads: oneDNN wants the end pad that makes its size formula give the result's size exactly; the
// reference takes the top/left pad and the result size only, so the end pad is derived from the
// result (for conv the smallest consistent one at or above the given one: extra end padding is
// never read).
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>

#include "backends/cpu/onednn/common.h"
#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

struct ConvKernel::Impl {};
ConvKernel::ConvKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConvKernel::~ConvKernel() = default;
Expected<std::unique_ptr<ConvKernel>> ConvKernel::create(const ConvSpec&, const Array*) {
  return Status::unimplemented("onednn conv: fusebox was built without oneDNN (libdnnl-dev)");
}
Status ConvKernel::run(const Array&, const Array&, const Array*, const Array*, Array&) const {
  return Status::unimplemented("onednn conv: fusebox was built without oneDNN (libdnnl-dev)");
}

#else

namespace {

using dnnl::memory;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;

enum class Layout { Plain, Blocked };

struct ConvGeom {
  memory::dims src, wei, dst, strides, dilates, pad_l, pad_r;
  Tag wei_tag = Tag::oihw;
  int64_t in_channels = 0, out_channels = 0, groups = 1, kernel = 1;
  bool transposed = false;
};

Expected<ConvGeom> plan(const ConvSpec& s, const Array& x, const Array& w, const Array* bias, const Array& out) {
  const char* op = s.transposed ? "onednn conv_transpose2d" : "onednn conv2d";
  if (x.rank() != 4 || w.rank() != 4 || out.rank() != 4) {
    return Status::invalid(std::string(op) + ": operands must be rank 4, got " + x.type_string() + ", " +
                           w.type_string() + " -> " + out.type_string());
  }
  int64_t n = x.shape()[0], c = x.shape()[1], g = s.groups;
  int64_t o = out.shape()[1];
  bool ok = g >= 1 && out.shape()[0] == n && c % g == 0 && o % g == 0;
  if (s.transposed) ok = ok && w.shape()[0] == c && w.shape()[1] * g == o;
  else ok = ok && w.shape()[0] == o && w.shape()[1] * g == c;
  if (!ok) {
    return Status::invalid(std::string(op) + ": channels do not agree with groups = " + std::to_string(g) + ": " +
                           x.type_string() + ", " + w.type_string() + " -> " + out.type_string());
  }
  if (bias && !(bias->rank() == 1 && bias->shape()[0] == o)) {
    return Status::invalid(std::string(op) + ": bias " + bias->type_string() + " is not [" + std::to_string(o) + "]");
  }
  ConvGeom geo;
  geo.in_channels = c, geo.out_channels = o, geo.groups = g;
  geo.transposed = s.transposed;
  geo.src = to_dims(x.shape());
  geo.dst = to_dims(out.shape());
  int64_t kh = w.shape()[2], kw = w.shape()[3];
  geo.kernel = kh * kw;
  if (g == 1) {
    geo.wei = {o, c, kh, kw};
    geo.wei_tag = s.transposed ? Tag::iohw : Tag::oihw;
  } else {
    geo.wei = {g, o / g, c / g, kh, kw};
    geo.wei_tag = s.transposed ? Tag::giohw : Tag::goihw;
  }
  for (int i = 0; i < 2; ++i) {
    int64_t in = x.shape()[2 + i], res = out.shape()[2 + i], k = w.shape()[2 + i];
    int64_t st = s.stride[i], d = s.dilation[i], pl = s.pad[i];
    if (st < 1 || d < 1) return Status::invalid(std::string(op) + ": stride and dilation must be >= 1");
    int64_t ext = (k - 1) * d + 1, pr;
    if (s.transposed) {
      pr = (in - 1) * st + ext - pl - res;
    } else {
      int64_t pr_min = (res - 1) * st + ext - in - pl;
      pr = std::clamp(s.pad[2 + i], pr_min, pr_min + st - 1);
    }
    geo.strides.push_back(st);
    geo.dilates.push_back(d - 1);  // oneDNN counts the gaps: 0 is a dense kernel
    geo.pad_l.push_back(pl);
    geo.pad_r.push_back(pr);
  }
  return geo;
}

// LAYOUT RULE: see the figures at the top of this file. The environment is read per primitive
// built (once per shape binding), not per run.
Layout choose_layout(const ConvGeom& g, const Epilogue& ep) {
  const char* env = std::getenv("FUSEBOX_ONEDNN_CONV_LAYOUT");
  if (env && std::string_view(env) == "plain") return Layout::Plain;
  if (env && std::string_view(env) == "blocked") return Layout::Blocked;
  bool dense_1x1 = g.kernel == 1 && g.groups == 1 && g.strides[0] == 1 && g.strides[1] == 1 && g.pad_l[0] == 0 &&
                   g.pad_l[1] == 0 && g.pad_r[0] == 0 && g.pad_r[1] == 0 && !g.transposed;
  // gemm:jit, which runs the plain 1x1 case, applies post-ops (activation, residual sum) in a slow
  // second pass: with any post-op the blocked jit:avx2 kernel wins (PaddleOCR cls, 1x3x48x192:
  // 7.5 ms with every fused 1x1 on plain, 4.4 ms on blocked; 1x1 256->64 at 56x56 + relu: 1.48 ms
  // plain, 0.90 blocked; 1x1 256->256 at 56x56 + residual: 4.08 plain, 3.92 blocked).
  return dense_1x1 && ep.act == Act::None && !ep.residual ? Layout::Plain : Layout::Blocked;
}

struct ConvEntry {
  dnnl::primitive prim;
  memory::desc user_src, user_dst, user_wei, src, dst, wei, bias, scratchpad;
  std::optional<dnnl::reorder> src_in, dst_out, residual_in, wei_in;
  std::optional<memory> constant_wei;  // in the primitive's format
  // A transposed conv's bias (with nothing after it) is added to the result afterwards: oneDNN
  // 2.6's deconvolution takes 0.53 ms for a 2x2 stride-2 deconvolution of 24 channels to 160x160
  // (PaddleOCR det) on an AVX-512 host, 2.99 ms with a bias argument and 21 ms with the bias as
  // a `sum` post-op over a prefilled result; the loop over the result takes about 0.1 ms.
  bool bias_after = false;
};

std::optional<dnnl::reorder> reorder_if_needed(const memory::desc& from, const memory::desc& to) {
  if (from == to) return std::nullopt;
  const dnnl::engine& eng = cpu_engine();
  return dnnl::reorder(dnnl::reorder::primitive_desc(eng, from, eng, to));
}

// The shapes oneDNN's Winograd kernels take: 3x3, stride 1, no dilation, one group.
bool winograd_shape(const ConvSpec& s, const ConvGeom& g) {
  return s.winograd && !s.transposed && s.groups == 1 && g.wei.size() == 4 && g.wei[2] == 3 &&
         g.wei[3] == 3 && g.strides == memory::dims{1, 1} && g.dilates == memory::dims{0, 0};
}

// The Winograd primitive over formats of its own choosing (the caller reorders to and from
// them), or nothing where oneDNN has no Winograd kernel for it (the ISA, the channel counts,
// a post-op it does not take).
std::optional<dnnl::convolution_forward::primitive_desc> winograd_primitive(
    const ConvGeom& g, const memory::desc& bias, const dnnl::primitive_attr& attr) {
  try {
    dnnl::convolution_forward::desc d(
        dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd,
        memory::desc(g.src, kF32, Tag::any), memory::desc(g.wei, kF32, Tag::any), bias,
        memory::desc(g.dst, kF32, Tag::any), g.strides, g.dilates, g.pad_l, g.pad_r);
    return dnnl::convolution_forward::primitive_desc(d, attr, cpu_engine());
  } catch (const dnnl::error&) {
    return std::nullopt;
  }
}

}  // namespace

struct ConvKernel::Impl {
  ConvSpec spec;
  std::optional<Array> constant_weights;
  ShapeCache<ConvEntry> cache;

  Expected<std::shared_ptr<const ConvEntry>> build(const ConvGeom& g) const {
    const dnnl::engine& eng = cpu_engine();
    auto e = std::make_shared<ConvEntry>();
    Tag act_tag = Tag::nchw;
    if (spec.block) {
      std::optional<Tag> t = nchwc_tag(spec.block, spec.nhwc);
      if (!t) return Status::unimplemented("onednn conv2d: no format for block " + std::to_string(spec.block));
      act_tag = *t;
    }
    e->user_src = memory::desc(g.src, kF32, act_tag);
    e->user_dst = memory::desc(g.dst, kF32, act_tag);
    e->user_wei = memory::desc(g.wei, kF32, g.wei_tag);
    // Blocked activations are taken as they are: the descriptors fixed, as for Plain.
    Layout layout = spec.block ? Layout::Plain : choose_layout(g, spec.ep);
    memory::desc src_any = layout == Layout::Plain ? e->user_src : memory::desc(g.src, kF32, Tag::any);
    memory::desc dst_any = layout == Layout::Plain ? e->user_dst : memory::desc(g.dst, kF32, Tag::any);
    memory::desc wei_any(g.wei, kF32, Tag::any);
    e->bias_after = spec.transposed && spec.ep.bias && !spec.ep.residual && spec.ep.act == Act::None;
    if (spec.ep.bias && !e->bias_after) e->bias = memory::desc({g.out_channels}, kF32, Tag::x);
    dnnl::post_ops ops;
    if (spec.ep.residual) {
      // A `sum` over dst prefilled with the residual, in both layouts: gemm:jit (the plain 1x1
      // case) runs a binary_add post-op 20-30x slower than the conv itself (PaddleOCR cls:
      // 0.26 ms against 0.01 ms per 1x1 conv of 32->8 channels at 6x96).
      ops.append_sum(1.f);
    }
    FUSEBOX_RETURN_IF_ERROR(append_activation(spec.ep, ops));
    dnnl::primitive_attr attr;
    attr.set_post_ops(ops);
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    constexpr auto kInference = dnnl::prop_kind::forward_inference;
    if (spec.transposed) {
      dnnl::deconvolution_forward::desc d(kInference, dnnl::algorithm::deconvolution_direct, src_any, wei_any, e->bias,
                                          dst_any, g.strides, g.dilates, g.pad_l, g.pad_r);
      dnnl::deconvolution_forward::primitive_desc pd(d, attr, eng);
      e->src = pd.src_desc(), e->dst = pd.dst_desc(), e->wei = pd.weights_desc();
      e->scratchpad = pd.scratchpad_desc();
      e->prim = dnnl::deconvolution_forward(pd);
    } else {
      std::optional<dnnl::convolution_forward::primitive_desc> pd;
      if (winograd_shape(spec, g)) pd = winograd_primitive(g, e->bias, attr);
      if (!pd) {
        dnnl::convolution_forward::desc d(kInference, dnnl::algorithm::convolution_direct, src_any, wei_any,
                                          e->bias, dst_any, g.strides, g.dilates, g.pad_l, g.pad_r);
        pd.emplace(d, attr, eng);
      }
      e->src = pd->src_desc(), e->dst = pd->dst_desc(), e->wei = pd->weights_desc();
      e->scratchpad = pd->scratchpad_desc();
      e->prim = dnnl::convolution_forward(*pd);
    }
    e->src_in = reorder_if_needed(e->user_src, e->src);
    e->dst_out = reorder_if_needed(e->dst, e->user_dst);
    if (spec.ep.residual) e->residual_in = reorder_if_needed(e->user_dst, e->dst);
    e->wei_in = reorder_if_needed(e->user_wei, e->wei);
    if (constant_weights) {
      memory user(e->user_wei, eng, data_ptr(*constant_weights));
      if (!e->wei_in) {
        e->constant_wei = user;  // constant_weights (kept alive by this Impl) already has the format
      } else {
        memory packed(e->wei, eng);  // owned by the entry, so by the shape binding
        dnnl::stream stream(eng);
        e->wei_in->execute(stream, user, packed);
        stream.wait();
        e->constant_wei = packed;
      }
    }
    return std::shared_ptr<const ConvEntry>(std::move(e));
  }
};

ConvKernel::ConvKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ConvKernel::~ConvKernel() = default;

Expected<std::unique_ptr<ConvKernel>> ConvKernel::create(const ConvSpec& spec, const Array* constant_weights) {
  FUSEBOX_RETURN_IF_ERROR(check_dtype(spec.dtype, spec.transposed ? "conv_transpose2d" : "conv2d"));
  if (constant_weights && (constant_weights->dtype() != spec.dtype || constant_weights->rank() != 4)) {
    return Status::invalid("onednn conv: constant weights " + constant_weights->type_string() +
                           " are not rank-4 of the kernel's dtype");
  }
  try {
    dnnl::post_ops probe;
    FUSEBOX_RETURN_IF_ERROR(append_activation(spec.ep, probe));
  } catch (const dnnl::error& e) {
    return from_dnnl(e, "conv epilogue");
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  if (constant_weights) impl->constant_weights = *constant_weights;
  return std::unique_ptr<ConvKernel>(new ConvKernel(std::move(impl)));
}

Status ConvKernel::run(const Array& x, const Array& w, const Array* bias, const Array* residual, Array& out) const {
  const ConvSpec& spec = impl_->spec;
  const char* op = spec.transposed ? "onednn conv_transpose2d" : "onednn conv2d";
  for (const Array* a : {&x, &w, bias, residual, static_cast<const Array*>(&out)}) {
    if (a && a->dtype() != spec.dtype) {
      return Status::invalid(std::string(op) + ": operand " + a->type_string() + " is not of the kernel's dtype");
    }
  }
  if (spec.ep.bias != (bias != nullptr) || spec.ep.residual != (residual != nullptr)) {
    return Status::invalid(std::string(op) + ": bias/residual operands do not match the kernel's epilogue");
  }
  if (residual && residual->shape() != out.shape()) {
    return Status::invalid(std::string(op) + ": residual " + residual->type_string() + " is not of the result's shape " +
                           out.type_string());
  }
  if (impl_->constant_weights && impl_->constant_weights->shape() != w.shape()) {
    return Status::invalid(std::string(op) + ": weights " + w.type_string() + " differ from the constant weights " +
                           impl_->constant_weights->type_string());
  }
  if (spec.block) {
    bool fits = !spec.transposed && x.rank() == 5 && out.rank() == 5 &&
                (spec.nhwc ? x.shape()[1] == 1 && out.shape()[1] == 1 && x.shape()[4] == spec.block
                           : x.shape()[4] == spec.block && out.shape()[4] == spec.block);
    if (!fits) {
      return Status::invalid(std::string(op) + ": " +
                             (spec.nhwc ? std::string("[N,1,H,W,C]") : "nChw" + std::to_string(spec.block) + "c") +
                             " operands expected, got " + x.type_string() + " -> " + out.type_string());
    }
  }
  // The geometry speaks of logical NCHW dims; blocked data is described by its format tag.
  const Array x_dims = spec.block ? Array::view(x.dtype(), logical_nchw(x.shape()), data_ptr(x)) : x;
  const Array out_dims = spec.block ? Array::view(out.dtype(), logical_nchw(out.shape()), out.raw()) : out;
  FUSEBOX_ASSIGN_OR_RETURN(ConvGeom geo, plan(spec, x_dims, w, bias, out_dims));
  if (out.numel() == 0) return Status::ok();
  if (x.numel() == 0) return Status::unimplemented(std::string(op) + ": empty input is left to the reference kernel");
  std::vector<int64_t> key = x.shape();
  key.insert(key.end(), w.shape().begin(), w.shape().end());
  key.insert(key.end(), out.shape().begin(), out.shape().end());
  try {
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const ConvEntry> e,
                             impl_->cache.get(key, [&] { return impl_->build(geo); }));
    const dnnl::engine& eng = cpu_engine();
    dnnl::stream stream(eng);
    memory src(e->user_src, eng, data_ptr(x));
    if (e->src_in) {
      memory packed(e->src, eng, thread_scratch(0, e->src.get_size()));
      e->src_in->execute(stream, src, packed);
      src = packed;
    }
    memory wei = e->constant_wei ? *e->constant_wei : memory(e->user_wei, eng, data_ptr(w));
    if (!e->constant_wei && e->wei_in) {
      memory packed(e->wei, eng, thread_scratch(2, e->wei.get_size()));
      e->wei_in->execute(stream, wei, packed);
      wei = packed;
    }
    memory user_dst(e->user_dst, eng, out.raw());
    memory dst = e->dst_out ? memory(e->dst, eng, thread_scratch(1, e->dst.get_size())) : user_dst;
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, wei}, {DNNL_ARG_DST, dst},
                                         {DNNL_ARG_SCRATCHPAD, primitive_scratchpad(e->scratchpad)}};
    if (bias && !e->bias_after) args.emplace(DNNL_ARG_BIAS, memory(e->bias, eng, data_ptr(*bias)));
    if (residual) {
      memory res(e->user_dst, eng, data_ptr(*residual));
      if (e->residual_in) {
        e->residual_in->execute(stream, res, dst);  // the sum post-op adds what dst holds
      } else {
        stream.wait();
        std::memcpy(out.raw(), residual->raw(), residual->nbytes());
      }
    }
    e->prim.execute(stream, args);
    if (e->dst_out) e->dst_out->execute(stream, dst, user_dst);
    stream.wait();
    if (e->bias_after) {
      // The result is plain NCHW (transposed convs take no blocked layout): each plane gets
      // its channel's bias.
      const float* b = static_cast<const float*>(data_ptr(*bias));
      float* o = static_cast<float*>(out.raw());
      const int64_t channels = geo.out_channels, planes = out.shape()[0] * channels,
                    plane = out.numel() / planes;
#pragma omp parallel for schedule(static) if (out.numel() >= (int64_t(1) << 16))
      for (int64_t p = 0; p < planes; ++p) {
        const float v = b[p % channels];
        for (float* q = o + p * plane; q < o + (p + 1) * plane; ++q) *q += v;
      }
    }
  } catch (const dnnl::error& e) {
    return from_dnnl(e, std::string(op) + " " + x.type_string() + " * " + w.type_string());
  } catch (const std::exception& e) {
    return Status::internal(std::string(op) + ": " + e.what());
  }
  return Status::ok();
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
