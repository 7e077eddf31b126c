// PoolKernel: max_pool2d and avg_pool2d through oneDNN's pooling_v2 primitive on the blocked
// layout nChw8c (or the operands' own nChw<b>c, read in place), plain activations reordered in and
// out: on plain NCHW oneDNN 2.6 has only its
// simple_nchw kernel, slower than fusebox's reference loop (max pool 3x3/2 of 1x64x112x112:
// 9.9 ms against 3.5 ms); blocked, the jit kernel plus both reorders take far less (figures in
// docs/benchmarks.md).
//
// As for conv, oneDNN wants the end pad consistent with the result size; it is derived from
// `out` (ceil_mode lives there). Padding is never the max and, without count_include_pad, never
// counted, in both. With count_include_pad oneDNN divides by the whole window, the reference by
// the part inside the padded extent; they agree unless a window overhangs the end pad, which
// run() leaves to the reference kernel.
#include <optional>
#include <unordered_map>

#include "backends/cpu/onednn/common.h"
#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

struct PoolKernel::Impl {};
PoolKernel::PoolKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolKernel::~PoolKernel() = default;
Expected<std::unique_ptr<PoolKernel>> PoolKernel::create(const PoolSpec&) {
  return Status::unimplemented("onednn pool: fusebox was built without oneDNN (libdnnl-dev)");
}
Status PoolKernel::run(const Array&, Array&) const {
  return Status::unimplemented("onednn pool: fusebox was built without oneDNN (libdnnl-dev)");
}

#else

namespace {

using dnnl::memory;

struct PoolEntry {
  memory::desc user_src, user_dst, src, dst, scratchpad;
  std::optional<dnnl::reorder> src_in, dst_out;  // plain operands only
  dnnl::pooling_v2_forward prim;
};

}  // namespace

struct PoolKernel::Impl {
  PoolSpec spec;
  ShapeCache<PoolEntry> cache;
};

PoolKernel::PoolKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PoolKernel::~PoolKernel() = default;

Expected<std::unique_ptr<PoolKernel>> PoolKernel::create(const PoolSpec& spec) {
  FUSEBOX_RETURN_IF_ERROR(check_dtype(spec.dtype, spec.max ? "max_pool2d" : "avg_pool2d"));
  for (int i = 0; i < 2; ++i) {
    if (spec.kernel[i] < 1 || spec.stride[i] < 1 || spec.dilation[i] < 1) {
      return Status::invalid("onednn pool: kernel, stride and dilation must be >= 1");
    }
  }
  if (!spec.max && (spec.dilation[0] != 1 || spec.dilation[1] != 1)) {
    return Status::invalid("onednn avg_pool2d: no dilation");
  }
  auto impl = std::make_unique<Impl>();
  impl->spec = spec;
  return std::unique_ptr<PoolKernel>(new PoolKernel(std::move(impl)));
}

Status PoolKernel::run(const Array& x, Array& out) const {
  const PoolSpec& s = impl_->spec;
  const char* op = s.max ? "onednn max_pool2d" : "onednn avg_pool2d";
  if (x.dtype() != s.dtype || out.dtype() != s.dtype) {
    return Status::invalid(std::string(op) + ": operands are not of the kernel's dtype");
  }
  const int rank = s.block ? 5 : 4;
  if (x.rank() != rank || out.rank() != rank || x.shape()[0] != out.shape()[0] || x.shape()[1] != out.shape()[1] ||
      (s.block && (x.shape()[4] != s.block || out.shape()[4] != s.block)) ||
      (s.nhwc && (x.shape()[1] != 1 || out.shape()[1] != 1))) {
    return Status::invalid(std::string(op) + ": " + x.type_string() + " -> " + out.type_string() + " is not " +
                           (s.block ? "nChw" + std::to_string(s.block) + "c" : std::string("NCHW")) + " pooling");
  }
  // Blocked operands are read and written as they are; plain ones are reordered to nChw8c and back.
  const std::vector<int64_t> x_dims = s.block ? logical_nchw(x.shape()) : x.shape();
  const std::vector<int64_t> out_dims = s.block ? logical_nchw(out.shape()) : out.shape();
  std::optional<memory::format_tag> tag = nchwc_tag(s.block ? s.block : 8, s.nhwc);
  if (!tag) return Status::unimplemented(std::string(op) + ": no format for block " + std::to_string(s.block));
  if (out.numel() == 0) return Status::ok();
  memory::dims pad_l, pad_r;
  for (int i = 0; i < 2; ++i) {
    int64_t in = x_dims[2 + i], res = out_dims[2 + i];
    int64_t ext = (s.kernel[i] - 1) * s.dilation[i] + 1;
    int64_t pr_min = (res - 1) * s.stride[i] + ext - in - s.pad[i];
    if (!s.max && s.count_include_pad && pr_min > s.pad[2 + i]) {
      return Status::unimplemented(std::string(op) + ": count_include_pad with a window past the end pad");
    }
    pad_l.push_back(s.pad[i]);
    pad_r.push_back(std::clamp(s.pad[2 + i], pr_min, pr_min + s.stride[i] - 1));
  }
  std::vector<int64_t> key = x.shape();
  key.insert(key.end(), out.shape().begin(), out.shape().end());
  return guarded(op, x.type_string(), [&]() -> Status {
    auto build = [&]() -> Expected<std::shared_ptr<const PoolEntry>> {
      auto e = std::make_shared<PoolEntry>();
      constexpr auto f32 = memory::data_type::f32;
      e->user_src = memory::desc(to_dims(x_dims), f32, s.block ? *tag : memory::format_tag::nchw);
      e->user_dst = memory::desc(to_dims(out_dims), f32, s.block ? *tag : memory::format_tag::nchw);
      e->src = memory::desc(to_dims(x_dims), f32, *tag);
      e->dst = memory::desc(to_dims(out_dims), f32, *tag);
      dnnl::algorithm alg = s.max                  ? dnnl::algorithm::pooling_max
                            : s.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                                                  : dnnl::algorithm::pooling_avg_exclude_padding;
      dnnl::pooling_v2_forward::desc d(dnnl::prop_kind::forward_inference, alg, e->src, e->dst,
                                       {s.stride[0], s.stride[1]}, {s.kernel[0], s.kernel[1]},
                                       {s.dilation[0] - 1, s.dilation[1] - 1}, pad_l, pad_r);
      dnnl::primitive_attr attr;
      attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
      dnnl::pooling_v2_forward::primitive_desc pd(d, attr, cpu_engine());
      e->scratchpad = pd.scratchpad_desc();
      e->prim = dnnl::pooling_v2_forward(pd);
      const dnnl::engine& eng = cpu_engine();
      if (!s.block) {
        e->src_in = dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->user_src, eng, e->src));
        e->dst_out = dnnl::reorder(dnnl::reorder::primitive_desc(eng, e->dst, eng, e->user_dst));
      }
      return std::shared_ptr<const PoolEntry>(std::move(e));
    };
    FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<const PoolEntry> e, impl_->cache.get(key, build));
    const dnnl::engine& eng = cpu_engine();
    dnnl::stream stream(eng);
    memory user_src(e->user_src, eng, data_ptr(x)), user_dst(e->user_dst, eng, out.raw());
    memory src = s.block ? user_src : memory(e->src, eng, thread_scratch(0, e->src.get_size()));
    memory dst = s.block ? user_dst : memory(e->dst, eng, thread_scratch(1, e->dst.get_size()));
    if (e->src_in) e->src_in->execute(stream, user_src, src);
    e->prim.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst},
                             {DNNL_ARG_SCRATCHPAD, primitive_scratchpad(e->scratchpad)}});
    if (e->dst_out) e->dst_out->execute(stream, dst, user_dst);
    stream.wait();
    return Status::ok();
  });
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
