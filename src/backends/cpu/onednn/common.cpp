// The shared pieces of the oneDNN kernels (common.h): engine, activation post-ops, errors and
// scratch; in a build without oneDNN, available() is all this file has.
#include <algorithm>
#include "backends/cpu/onednn/common.h"

#include <cmath>
#include <cstdlib>
#include <limits>

#include "backends/cpu/onednn/onednn_kernels.h"
#include "ir/check.h"

namespace fusebox::cpu::onednn {

#ifndef FUSEBOX_HAVE_DNNL

bool available() { return false; }

#else

bool available() { return true; }

const dnnl::engine& cpu_engine() {
  static const dnnl::engine engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

Status append_activation(const Epilogue& ep, dnnl::post_ops& ops) {
  using A = dnnl::algorithm;
  auto f = [](double v) { return static_cast<float>(v); };
  switch (ep.act) {
    case Act::None: return Status::ok();
    case Act::Relu: ops.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); return Status::ok();
    // oneDNN's relu with alpha is x > 0 ? x : alpha*x, the leaky relu.
    case Act::LeakyRelu: ops.append_eltwise(1.f, A::eltwise_relu, f(ep.alpha), 0.f); return Status::ok();
    case Act::Clip: {
      // As the reference clip: a NaN bound is no bound. Infinite bounds go through as they are.
      constexpr double kInf = std::numeric_limits<double>::infinity();
      double lo = std::isnan(ep.alpha) ? -kInf : ep.alpha, hi = std::isnan(ep.beta) ? kInf : ep.beta;
      ops.append_eltwise(1.f, A::eltwise_clip_v2, f(lo), f(hi));
      return Status::ok();
    }
    case Act::Sigmoid: ops.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); return Status::ok();
    case Act::Tanh: ops.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); return Status::ok();
    case Act::HardSigmoid:
      // oneDNN 2.6 has no hardsigmoid: linear (alpha*x + beta), then clip to [0, 1].
      ops.append_eltwise(1.f, A::eltwise_linear, f(ep.alpha), f(ep.beta));
      ops.append_eltwise(1.f, A::eltwise_clip_v2, 0.f, 1.f);
      return Status::ok();
    // 2.6 defines hardswish as x * relu6(x + 3) / 6 with no parameters, fusebox's definition.
    case Act::HardSwish: ops.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f); return Status::ok();
    case Act::Silu: ops.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f); return Status::ok();
    case Act::Gelu: ops.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); return Status::ok();
    case Act::GeluTanh: ops.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); return Status::ok();
  }
  return Status::invalid("onednn: unknown activation " + std::to_string(int(ep.act)));
}

Status check_dtype(DType t, const char* kernel) {
  if (t == DType::F32) return Status::ok();
  return Status::unimplemented(std::string("onednn ") + kernel + ": dtype " + std::string(dtype_name(t)) +
                               " is not implemented (f32 only)");
}

Status from_dnnl(const dnnl::error& e, const std::string& what) {
  return Status::internal("onednn " + what + ": " + e.what() + " (dnnl status " + std::to_string(int(e.status)) + ")");
}

dnnl::memory::dims to_dims(std::span<const int64_t> v) { return dnnl::memory::dims(v.begin(), v.end()); }

void* thread_scratch(int slot, size_t bytes) {
  struct Buffer {
    std::unique_ptr<uint8_t, decltype(&free_array_bytes)> p{nullptr, &free_array_bytes};
    size_t size = 0;
  };
  thread_local Buffer buffers[kScratchSlots];
  FUSEBOX_CHECK(slot >= 0 && slot < kScratchSlots) << "onednn: scratch slot " << slot;
  Buffer& b = buffers[slot];
  if (b.size < bytes) {
    b.p.reset(allocate_array_bytes(bytes));
    b.size = bytes;
  }
  return b.p.get();
}

dnnl::memory primitive_scratchpad(const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, cpu_engine(), thread_scratch(kPrimitiveScratch, std::max<size_t>(desc.get_size(), 1)));
}

#endif  // FUSEBOX_HAVE_DNNL

}  // namespace fusebox::cpu::onednn
