#include "backends/cuda/matmul_fallback.h"

#include <algorithm>

#include "backends/cuda/prelude.h"
#include "ir/check.h"

namespace fusebox::cuda {

namespace {

constexpr int kThreads = 256;

}  // namespace

std::string matmul_fallback_source(DType dtype, EpilogueAct act, bool bias, bool residual) {
  FUSEBOX_CHECK(dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16) << "matmul fallback dtype";
  FUSEBOX_CHECK(act == EpilogueAct::None || act == EpilogueAct::Relu || act == EpilogueAct::GeluTanh)
      << "matmul fallback activation";
  const std::string storage = dtype == DType::F32 ? "float" : "u16";
  const std::string load = dtype == DType::F32 ? "" : dtype == DType::F16 ? "fb_f16_load" : "fb_bf16_load";
  const std::string store = dtype == DType::F32 ? "" : dtype == DType::F16 ? "fb_f16_store" : "fb_bf16_store";
  std::string s(prelude_source());
  s += "\ntypedef " + storage + " S;\n";
  s += "__device__ __forceinline__ float fb_in(S x) { return " + load + "(x); }\n";
  s += "__device__ __forceinline__ S fb_out(float x) { return " + store + "(x); }\n";
  s += R"CUDA(
struct MatmulShape { long long batch, m, n, k, a_stride, b_stride; };
extern "C" __global__ void fb_matmul(MatmulShape s, const S* a, const S* b, const S* bias, const S* r, S* y) {
  const long long total = s.batch * s.m * s.n;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total; e += (long long)gridDim.x * blockDim.x) {
    const long long j = e % s.n, row = e / s.n, i = row % s.m, p = row / s.m;
    const S* pa = a + p * s.a_stride + i * s.k;
    const S* pb = b + p * s.b_stride + j;
    float t = 0.0f;
    for (long long q = 0; q < s.k; ++q) t = fmaf(fb_in(pa[q]), fb_in(pb[q * s.n]), t);
)CUDA";
  if (bias) s += "    t = t + fb_in(bias[j]);\n";
  if (residual) s += "    t = t + fb_in(r[e]);\n";
  if (act == EpilogueAct::Relu) s += "    t = fb_relu_f(t);\n";
  if (act == EpilogueAct::GeluTanh) s += "    t = fb_gelu_tanh(t);\n";
  s += "    y[e] = fb_out(t);\n  }\n}\n";
  return s;
}

Status run_matmul_fallback(Context& context, const std::string& source, const MatmulFallbackShape& shape, const void* a,
                           const void* b, const void* bias, const void* residual, void* y) {
  const int64_t total = shape.batch * shape.m * shape.n;
  if (total == 0) return Status::ok();
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context.function(source, "fb_matmul"));
  FUSEBOX_RETURN_IF_ERROR(context.make_current());
  MatmulFallbackShape s = shape;
  void* pointers[] = {const_cast<void*>(a), const_cast<void*>(b), const_cast<void*>(bias), const_cast<void*>(residual), y};
  void* args[] = {&s, &pointers[0], &pointers[1], &pointers[2], &pointers[3], &pointers[4]};
  const int64_t blocks = std::clamp<int64_t>((total + kThreads - 1) / kThreads, 1, std::max(1, context.multiprocessors()) * int64_t(32));
  const Driver& d = context.driver();
  return d.check(d.cuLaunchKernel(f, unsigned(blocks), 1, 1, kThreads, 1, 1, 0, context.stream(), args, nullptr),
                 "launching the plain CUDA matmul");
}

}  // namespace fusebox::cuda
