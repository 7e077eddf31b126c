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
//   - 255 * (the sum of |w - w_zp| over one output's weights) < 2^24. Every term oneDNN forms (the
//     product sum of raw or shifted activations, its zero-point and s8 compensations) and every
//     partial sum is then an integer below 2^24, which f32 holds exactly. Where the whole sum
//     could pass that, it is split into runs of input channels (conv, one group) or of K (matmul)
//     that each stay below it: one primitive per run over its slice of x, their s32 results added
//     (wrapping, as the reference's 32-bit results do). A 3x3 conv over 512 channels of int8
//     weights that use their range takes two or three runs.
// Otherwise (a grouped conv past the bound, one input channel past it) create() answers
// unimplemented and the reference kernel runs.
//
// Shapes: matmul_integer's a [..., M, K] folds its batch into M against b [K, N] (a batched or
// 1-D b is left to the reference); a per-row zero point of a is too. conv2d_integer's x is NCHW,
// or channels-last [N,1,H,W,C] (layout = "nhwc", which the CPU backend's lowering gives chains of
// them); the primitive picks its formats, NHWC on an AVX-512 host, so NCHW activations are
// reordered in and the result out on every run, NHWC ones are not.
#include <cstdlib>
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
int IntegerKernel::parts() const { return 0; }
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

// One product over a run of input channels (conv) or of K (matmul): its primitive, its slice of
// the activations and its centred weights, packed.
struct Part {
  memory::desc user_src, src, scratchpad;
  size_t src_offset = 0;  // bytes from the start of x to the slice
  dnnl::primitive prim;
  std::optional<dnnl::reorder> src_in;
  memory packed_wei;  // owned by the entry
};

struct Entry {
  memory::desc user_dst, dst;
  std::optional<dnnl::reorder> dst_out;
  std::vector<Part> parts;  // every part writes the same dst format; their results are summed
};

constexpr int64_t kExactInF32 = int64_t(1) << 24;

// Sums the s32 results of a later part into the first one's (the same format), wrapping as the
// reference's 32-bit results do.
void add_s32(int32_t* into, const int32_t* from, int64_t n) {
#pragma omp parallel for schedule(static) if (n >= (int64_t(1) << 16))
  for (int64_t i = 0; i < n; ++i) into[i] = int32_t(uint32_t(into[i]) + uint32_t(from[i]));
}

}  // namespace

bool int8_exact() { return library_has_vnni() && !turned_off(); }

struct IntegerKernel::Impl {
  IntegerSpec spec;
  std::vector<int64_t> wshape;
  // The input channels (conv) or rows of K (matmul) split into runs [cuts[i], cuts[i + 1]), each
  // short enough that its sums stay below 2^24; the centred weights (w - w_zp) of each run:
  // [O, run, kh, kw] (or grouped [O, C/g, kh, kw] whole) for conv, [run, N] for matmul.
  std::vector<int64_t> cuts;
  std::vector<std::vector<int8_t>> centred;

  ShapeCache<Entry> cache;

  memory::dims wei_dims(int64_t run) const {
    if (!spec.conv) return {run, wshape[1]};
    if (spec.groups == 1) return {wshape[0], run, wshape[2], wshape[3]};
    const int64_t g = spec.groups;
    return {g, wshape[0] / g, wshape[1], wshape[2], wshape[3]};
  }

  Expected<std::shared_ptr<const Entry>> build(const memory::dims& src, const memory::dims& dst) const {
    const dnnl::engine& eng = cpu_engine();
    auto e = std::make_shared<Entry>();
    const memory::data_type xt = int8_type(spec.x_dtype), s8 = memory::data_type::s8,
                            s32 = memory::data_type::s32;
    dnnl::primitive_attr attr;
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    const Tag act = spec.nhwc ? Tag::nhwc : Tag::nchw;
    e->user_dst = memory::desc(dst, s32, spec.conv ? act : Tag::ab);
    dnnl::stream stream(eng);
    for (size_t i = 0; i + 1 < cuts.size(); ++i) {
      Part part;
      const int64_t from = cuts[i], run = cuts[i + 1] - cuts[i];
      const memory::dims wdims = wei_dims(run);
      memory::desc user_wei;
      if (spec.conv) {
        // The slice of x's channels, described by x's own strides.
        const int64_t c = src[1], h = src[2], w = src[3];
        const memory::dims strides =
            spec.nhwc ? memory::dims{h * w * c, 1, w * c, c} : memory::dims{c * h * w, h * w, w, 1};
        // A grouped conv is one run of all its channels (wshape[1] is C / groups).
        part.user_src = memory::desc({src[0], spec.groups == 1 ? run : c, h, w}, xt, strides);
        part.src_offset = size_t(spec.nhwc ? from : from * h * w);
        user_wei = memory::desc(wdims, s8, wdims.size() == 4 ? Tag::oihw : Tag::goihw);
        memory::dims strides_attr{spec.stride[0], spec.stride[1]};
        memory::dims dilates{spec.dilation[0] - 1, spec.dilation[1] - 1};
        memory::dims pad_l{spec.pad[0], spec.pad[1]}, pad_r;
        for (int a = 0; a < 2; ++a) {
          // The smallest end pad consistent with the result's size (extra end padding is never read).
          const int64_t ext = (wshape[size_t(2 + a)] - 1) * spec.dilation[a] + 1;
          const int64_t pr_min =
              (dst[size_t(2 + a)] - 1) * spec.stride[a] + ext - src[size_t(2 + a)] - spec.pad[a];
          pad_r.push_back(std::clamp(spec.pad[2 + a], pr_min, pr_min + spec.stride[a] - 1));
        }
        // Later parts write the first one's format, so that their results add element by element.
        const memory::desc dst_desc = i == 0 ? memory::desc(dst, s32, Tag::any) : e->dst;
        dnnl::convolution_forward::desc d(
            dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
            memory::desc(part.user_src.dims(), xt, Tag::any), memory::desc(wdims, s8, Tag::any), dst_desc,
            strides_attr, dilates, pad_l, pad_r);
        dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
        part.src = pd.src_desc();
        if (i == 0) e->dst = pd.dst_desc();
        part.scratchpad = pd.scratchpad_desc();
        part.prim = dnnl::convolution_forward(pd);
        part.packed_wei = memory(pd.weights_desc(), eng);
      } else {
        // Columns [from, from + run) of a [M, K]: strided rows, copied into a dense [M, run] for
        // the primitive when there are several runs (on strided rows oneDNN falls back from its
        // brgemm kernel to gemm:jit with unpacked weights: 1.5 against 0.8 ms for 128x3072x768).
        part.user_src = memory::desc({src[0], run}, xt, memory::dims{src[1], 1});
        part.src = memory::desc({src[0], run}, xt, Tag::ab);
        part.src_offset = size_t(from);
        user_wei = memory::desc(wdims, s8, Tag::ab);
        e->dst = e->user_dst;
        dnnl::matmul::desc d(part.src, memory::desc(wdims, s8, Tag::any), e->dst);
        dnnl::matmul::primitive_desc pd(d, attr, eng);
        part.scratchpad = pd.scratchpad_desc();
        part.prim = dnnl::matmul(pd);
        part.packed_wei = memory(pd.weights_desc(), eng);
      }
      if (part.user_src != part.src) {
        part.src_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, part.user_src, eng, part.src));
      }
      memory user(user_wei, eng, const_cast<int8_t*>(centred[i].data()));
      dnnl::reorder(user, part.packed_wei).execute(stream, user, part.packed_wei);
      e->parts.push_back(std::move(part));
    }
    stream.wait();
    if (e->user_dst != e->dst) {
      e->dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->dst, eng, e->user_dst));
    }
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
  const std::vector<int64_t>& ws = weights.shape();
  // Output channels (conv's dim 0 of [O, C/g, kh, kw], matmul's columns of [K, N]); the runs the
  // sums are split along (conv's input channels, matmul's K) and the weights per output and run.
  const int64_t outs = spec.conv ? ws[0] : ws[1], along = spec.conv ? ws[1] : ws[0];
  const int64_t window = spec.conv ? ws[2] * ws[3] : 1;
  if (weight_zp.numel() != 1 && weight_zp.numel() != outs) {
    return Status::invalid(std::string(op) + ": weight zero point " + weight_zp.type_string() +
                           " does not fit " + weights.type_string());
  }
  // The weights less their zero points, as s8 in the weights' own layout, and the sum of their
  // magnitudes per output and run element.
  auto index = [&](int64_t o, int64_t k, int64_t t) {
    return spec.conv ? (o * along + k) * window + t : k * outs + o;
  };
  std::vector<int8_t> centred(size_t(weights.numel()));
  std::vector<int64_t> abs_sum(size_t(outs * along), 0);
  for (int64_t o = 0; o < outs; ++o) {
    const int64_t zp = value_at(weight_zp, weight_zp.numel() == 1 ? 0 : o);
    for (int64_t k = 0; k < along; ++k) {
      for (int64_t t = 0; t < window; ++t) {
        const int64_t v = value_at(weights, index(o, k, t)) - zp;
        if (v < -128 || v > 127) {
          return Status::unimplemented(std::string(op) + ": a weight less its zero point (" +
                                       std::to_string(v) + ") does not fit s8");
        }
        centred[size_t(index(o, k, t))] = int8_t(v);
        abs_sum[size_t(o * along + k)] += v < 0 ? -v : v;
      }
    }
  }
  // Runs: as long as every output's 255 * sum |w - w_zp| over the run stays below 2^24 (a grouped
  // conv is one run, or nothing).
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  impl->wshape = ws;
  impl->cuts = {0};
  std::vector<int64_t> running(size_t(outs), 0);
  for (int64_t k = 0; k < along; ++k) {
    bool fits = true;
    for (int64_t o = 0; o < outs && fits; ++o)
      fits = 255 * (running[size_t(o)] + abs_sum[size_t(o * along + k)]) < kExactInF32;
    if (!fits) {
      if (spec.conv && spec.groups != 1) {
        return Status::unimplemented(std::string(op) + ": a grouped convolution whose sums may reach 2^24");
      }
      impl->cuts.push_back(k);
      std::fill(running.begin(), running.end(), 0);
    }
    for (int64_t o = 0; o < outs; ++o) {
      running[size_t(o)] += abs_sum[size_t(o * along + k)];
      if (255 * running[size_t(o)] >= kExactInF32) {
        return Status::unimplemented(std::string(op) + ": one input channel's sums may reach 2^24");
      }
    }
  }
  impl->cuts.push_back(along);
  for (size_t i = 0; i + 1 < impl->cuts.size(); ++i) {
    const int64_t from = impl->cuts[i], run = impl->cuts[i + 1] - from;
    std::vector<int8_t> part(size_t(outs * run * window));
    for (int64_t o = 0; o < outs; ++o) {
      for (int64_t k = 0; k < run; ++k) {
        for (int64_t t = 0; t < window; ++t) {
          const size_t at = spec.conv ? size_t((o * run + k) * window + t) : size_t(k * outs + o);
          part[at] = centred[size_t(index(o, from + k, t))];
        }
      }
    }
    impl->centred.push_back(std::move(part));
  }
  return std::unique_ptr<IntegerKernel>(new IntegerKernel(std::move(impl)));
}

int IntegerKernel::parts() const { return int(impl_->cuts.size()) - 1; }

Status IntegerKernel::run(const Array& x, const Array& x_zp, Array& out) const {
  const IntegerSpec& spec = impl_->spec;
  const char* op = spec.conv ? "onednn conv2d_integer" : "onednn matmul_integer";
  if (x.dtype() != spec.x_dtype || out.dtype() != DType::I32 || x_zp.dtype() != x.dtype()) {
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
    memory user_dst(e->user_dst, eng, out.raw());
    memory dst_mem = e->dst_out ? memory(e->dst, eng, thread_scratch(1, e->dst.get_size())) : user_dst;
    int32_t zp = int32_t(value_at(x_zp, 0));
    memory zp_mem(memory::desc({1}, memory::data_type::s32, Tag::x), eng, &zp);
    for (size_t i = 0; i < e->parts.size(); ++i) {
      const Part& part = e->parts[i];
      memory src_mem(part.user_src, eng, static_cast<uint8_t*>(data_ptr(x)) + part.src_offset);
      if (part.src_in) {
        memory packed(part.src, eng, thread_scratch(0, part.src.get_size()));
        part.src_in->execute(stream, src_mem, packed);
        src_mem = packed;
      }
      // Later parts write beside the first one's result and are added into it.
      memory into = i == 0 ? dst_mem : memory(e->dst, eng, thread_scratch(2, e->dst.get_size()));
      part.prim.execute(stream, {{DNNL_ARG_SRC, src_mem},
                                 {DNNL_ARG_WEIGHTS, part.packed_wei},
                                 {DNNL_ARG_DST, into},
                                 {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zp_mem},
                                 {DNNL_ARG_SCRATCHPAD, primitive_scratchpad(part.scratchpad)}});
      if (i == 0) continue;
      stream.wait();
      add_s32(static_cast<int32_t*>(dst_mem.get_data_handle()),
              static_cast<const int32_t*>(into.get_data_handle()),
              int64_t(e->dst.get_size() / sizeof(int32_t)));
    }
    if (e->dst_out) e->dst_out->execute(stream, dst_mem, user_dst);
    stream.wait();
    return Status::ok();
  });
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
