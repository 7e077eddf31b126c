#include "backends/cuda/conv_epilogue.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr int kThreads = 256;

// `v` as a float literal that is exactly float(v) (infinities included).
std::string float_literal(double v) {
  const float f = float(v);
  uint32_t bits = 0;
  std::memcpy(&bits, &f, sizeof(bits));
  char text[32];
  std::snprintf(text, sizeof(text), "__uint_as_float(0x%08xu)", bits);
  return text;
}

// The expression computing the activation of float t.
std::string act_expression(const Epilogue& e) {
  switch (e.act) {
    case EpilogueAct::None:
      return "t";
    case EpilogueAct::Relu:
      return "fb_relu_f(t)";
    case EpilogueAct::Sigmoid:
      return "fb_sigmoid(t)";
    case EpilogueAct::Tanh:
      return "fb_tanh(t)";
    case EpilogueAct::Silu:
      return "fb_silu(t)";
    case EpilogueAct::Gelu:
      return "fb_gelu(t)";
    case EpilogueAct::GeluTanh:
      return "fb_gelu_tanh(t)";
    case EpilogueAct::HardSwish:
      return "fb_hardswish(t)";
    case EpilogueAct::LeakyRelu: {
      const std::string a = float_literal(e.alpha.value_or(0.01));  // leaky_relu's default slope
      return "(t < 0.0f ? " + a + " * t : t)";
    }
    case EpilogueAct::Clip: {
      // Absent and NaN bounds are unbounded; min(max(t, lo), hi), so NaN t stays NaN.
      const double lo = e.alpha && *e.alpha == *e.alpha ? *e.alpha : -INFINITY;
      const double hi = e.beta && *e.beta == *e.beta ? *e.beta : INFINITY;
      const std::string l = float_literal(lo), h = float_literal(hi);
      return "fb_clip(t, " + l + ", " + h + ")";
    }
    case EpilogueAct::HardSigmoid: {
      const std::string a = float_literal(e.alpha.value_or(0.2)), b = float_literal(e.beta.value_or(0.5));
      return "fb_clip(" + a + " * t + " + b + ", 0.0f, 1.0f)";
    }
  }
  return "";
}

}  // namespace

std::string conv_epilogue_functions(DType dtype, const Epilogue& e) {
  FUSEBOX_CHECK(dtype == DType::F32 || dtype == DType::F16) << "conv epilogue dtype";
  const std::string act = act_expression(e);
  FUSEBOX_CHECK(!act.empty()) << "conv epilogue activation";
  const bool half = dtype == DType::F16;
  std::string s(prelude_source());
  s += "\ntypedef " + std::string(half ? "u16" : "float") + " S;\n";
  s += "__device__ __forceinline__ float fb_in(S x) { return " + std::string(half ? "fb_f16_load" : "") +
       "(x); }\n";
  s += "__device__ __forceinline__ S fb_out(float x) { return " + std::string(half ? "fb_f16_store" : "") +
       "(x); }\n";
  // A sum of two values rounded to the dtype, as the reference's add rounds its result.
  s += "__device__ __forceinline__ float fb_sum(float a, float b) { return " +
       std::string(half ? "fb_f16_round" : "") + "(a + b); }\n";
  s += R"CUDA(
__device__ __forceinline__ float fb_clip(float x, float lo, float hi) {
  const float v = x < lo ? lo : x;
  return v > hi ? hi : v;
}
// The epilogue of convolution result t (a value of S) of channel c at element e.
__device__ __forceinline__ float fb_epilogue(float t, const S* bias, const S* r, long long c, long long e) {
  if (bias) t = fb_sum(t, fb_in(bias[c]));
  if (r) t = fb_sum(t, fb_in(r[e]));
)CUDA";
  s += "  return " + act + ";\n}\n";
  return s;
}

std::string conv_epilogue_source(DType dtype, const Epilogue& e) {
  std::string s = conv_epilogue_functions(dtype, e);
  s += R"CUDA(
extern "C" __global__ void fb_conv_epilogue(long long total, long long channels, long long plane, const S* bias, const S* r, S* y) {
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x)
    y[e] = fb_out(fb_epilogue(fb_in(y[e]), bias, r, (e / plane) % channels, e));
}
)CUDA";
  return s;
}

Status run_conv_epilogue(Context& context, const std::string& source, int64_t total, int64_t channels,
                         int64_t plane, const void* bias, const void* residual, void* y) {
  if (total == 0) return Status::ok();
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context.function(source, "fb_conv_epilogue"));
  FUSEBOX_RETURN_IF_ERROR(context.make_current());
  long long t = total, c = channels, p = plane;
  void* pointers[] = {const_cast<void*>(bias), const_cast<void*>(residual), y};
  void* args[] = {&t, &c, &p, &pointers[0], &pointers[1], &pointers[2]};
  const int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1,
                                             std::max(1, context.multiprocessors()) * int64_t(32));
  const Driver& d = context.driver();
  return d.check(
      d.cuLaunchKernel(f, unsigned(blocks), 1, 1, kThreads, 1, 1, 0, context.stream(), args, nullptr),
      "launching the convolution's epilogue");
}

}  // namespace fusebox::cuda
