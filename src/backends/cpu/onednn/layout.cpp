// The nChw<b>c layout on oneDNN's side: which block this host prefers, its format tags, and the
// reorder that runs to_nchwc / to_nchw.
#include "backends/cpu/onednn/common.h"
#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

int64_t preferred_nchwc_block() { return 0; }
Status reorder_layout(const Array&, Array&) {
  return Status::unimplemented("onednn reorder: fusebox was built without oneDNN (libdnnl-dev)");
}

#else

int64_t preferred_nchwc_block() {
  // The effective ISA honours ONEDNN_MAX_CPU_ISA, so a host is tested on the AVX2 path too.
  dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  switch (isa) {
    case dnnl::cpu_isa::avx512_core:
    case dnnl::cpu_isa::avx512_core_vnni:
    case dnnl::cpu_isa::avx512_core_bf16:
    case dnnl::cpu_isa::avx512_core_amx:
      return 16;
    default:
      return 8;
  }
}

std::optional<dnnl::memory::format_tag> nchwc_tag(int64_t block, bool nhwc) {
  using Tag = dnnl::memory::format_tag;
  if (nhwc) return Tag::nhwc;
  switch (block) {
    case 4: return Tag::nChw4c;
    case 8: return Tag::nChw8c;
    case 16: return Tag::nChw16c;
    default: return std::nullopt;
  }
}

std::vector<int64_t> logical_nchw(std::span<const int64_t> blocked) {
  return {blocked[0], blocked[1] * blocked[4], blocked[2], blocked[3]};
}

Status reorder_layout(const Array& in, Array& out) {
  using dnnl::memory;
  memory::data_type dt;
  switch (in.dtype()) {
    case DType::F32: dt = memory::data_type::f32; break;
    case DType::I32: dt = memory::data_type::s32; break;
    case DType::I8: dt = memory::data_type::s8; break;
    case DType::U8: dt = memory::data_type::u8; break;
    default: return Status::unimplemented("onednn reorder: no kernel for " + std::string(dtype_name(in.dtype())));
  }
  const bool to_blocked = in.rank() == 4;
  const Array& blocked = to_blocked ? out : in;
  const Array& plain = to_blocked ? in : out;
  if (blocked.rank() != 5 || plain.rank() != 4 || logical_nchw(blocked.shape()) != plain.shape()) {
    return Status::invalid("onednn reorder: " + in.type_string() + " -> " + out.type_string() + " is not a layout change");
  }
  // One block of all channels is NHWC's order, whatever the block (tags exist for 4, 8, 16 only).
  std::optional<dnnl::memory::format_tag> tag = nchwc_tag(blocked.shape()[4], blocked.shape()[1] == 1);
  if (!tag) return Status::unimplemented("onednn reorder: no format for block " + std::to_string(blocked.shape()[4]));
  if (out.numel() == 0) return Status::ok();
  try {
    const dnnl::engine& eng = cpu_engine();
    memory::dims dims = to_dims(plain.shape());
    memory::desc plain_desc(dims, dt, memory::format_tag::nchw);
    memory::desc blocked_desc(dims, dt, *tag);
    memory src(to_blocked ? plain_desc : blocked_desc, eng, data_ptr(in));
    memory dst(to_blocked ? blocked_desc : plain_desc, eng, out.raw());
    // Reorder primitives are cheap to create next to a copy of a whole activation, and oneDNN
    // caches their implementations itself.
    dnnl::reorder r(dnnl::reorder::primitive_desc(eng, src.get_desc(), eng, dst.get_desc()));
    dnnl::stream stream(eng);
    r.execute(stream, src, dst);
    stream.wait();
  } catch (const dnnl::error& e) {
    return from_dnnl(e, "reorder " + in.type_string() + " -> " + out.type_string());
  }
  return Status::ok();
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
