// The lazy Tensor API on Device::cuda(0): the same program as on the CPU, every block compiled
// for the cuda target (fused kernels generated with NVRTC, matmuls through cuBLASLt), results
// equal to the CPU's; values stay on the device between blocks; a custom op's CUDA kernel runs
// there. Without a GPU every test skips with the reason the device is missing.
// Tolerance: 1e-5 of each result's scale (the CPU runs oneDNN's matmul, the GPU cuBLASLt's:
// the same products summed in another order).
#include <gtest/gtest.h>

#include "backends/cuda/context.h"
#include "lazy/custom_op.h"
#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

const lazy::Device kGpu = lazy::Device::cuda(0);

// Kernels compiled or found for the GPU so far (NVRTC compiles, disk and memory cache hits).
uint64_t gpu_functions() {
  Expected<std::shared_ptr<cuda::Context>> c = cuda::Context::get(0);
  if (!c) return 0;
  const cuda::CompileStats s = (*c)->compile_stats();
  return s.compiled + s.disk_hits + s.memory_hits;
}

std::vector<Array> program(lazy::Device d) {
  Tensor x = Tensor::randn({64, 48}, 11, DType::F32, d);
  Tensor w = Tensor::randn({48, 40}, 12, DType::F32, d);
  Tensor b = Tensor::randn({40}, 13, DType::F32, d);
  Tensor h = (matmul(x * 0.5, w) + b).relu();
  Tensor s = (h - h.max({1}, true)).exp();
  Tensor p = s / s.sum({1}, true);
  Tensor c = where(h > p, h.sigmoid(), p.tanh()) * 3.0 - 1.0;
  return {read(h), read(p), read(c)};
}

class LazyCudaTest : public LazyTest {
 protected:
  void SetUp() override {
    if (Status why = kGpu.availability(); !why.is_ok()) GTEST_SKIP() << why.message();
    LazyTest::SetUp();
  }
  void TearDown() override {
    if (leaks) LazyTest::TearDown();  // a skipped test never set up the leak check
  }
};

TEST_F(LazyCudaTest, ProgramMatchesTheCpuAndRunsOnTheGpu) {
  const uint64_t before = gpu_functions();
  std::vector<Array> gpu = program(kGpu);
  EXPECT_GT(gpu_functions(), before) << "no kernel was compiled or looked up for the GPU";
  std::vector<Array> cpu = program(lazy::Device::cpu());
  ASSERT_EQ(gpu.size(), cpu.size());
  for (size_t i = 0; i < gpu.size(); ++i) EXPECT_TRUE(close_to_scale(gpu[i], cpu[i], 1e-5)) << "result " << i;
}

TEST_F(LazyCudaTest, FusionOffGivesSameResults) {
  std::vector<Array> fused = program(kGpu);
  std::vector<Array> plain = program(kGpu.unfused());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(close_to_scale(fused[i], plain[i], 1e-5)) << "result " << i;
}

// A loop hits the plan cache from its second iteration, and a cpu plan is never reused for cuda.
TEST_F(LazyCudaTest, LoopHitsThePlanCachePerDevice) {
  Tensor wc = Tensor::randn({32, 32}, 5, DType::F32, lazy::Device::cpu());
  Tensor wg = Tensor::from_array(read(wc), kGpu);
  Tensor xc = Tensor::randn({16, 32}, 6, DType::F32, lazy::Device::cpu());
  Tensor xg = Tensor::from_array(read(xc), kGpu);
  for (int i = 0; i < 3; ++i) {
    xc = (matmul(xc, wc) * 0.1).tanh();
    read(xc);
  }
  const lazy::LazyStats cpu_only = lazy::stats();
  for (int i = 0; i < 3; ++i) {
    xg = (matmul(xg, wg) * 0.1).tanh();
    read(xg);
  }
  const lazy::LazyStats both = lazy::stats();
  EXPECT_EQ(both.plan_misses - cpu_only.plan_misses, 1u) << "the first cuda iteration compiles its own plan";
  EXPECT_EQ(both.plan_hits - cpu_only.plan_hits, 2u);
  EXPECT_TRUE(close_to_scale(read(xg), read(xc), 1e-5));
}

// An error in deferred work on the GPU comes back at the read as a Status.
TEST_F(LazyCudaTest, ShapeErrorComesBackAtRead) {
  Tensor a = Tensor::randn({3, 4}, 71, DType::F32, kGpu), b = Tensor::randn({5, 6}, 72, DType::F32, kGpu);
  Expected<Array> r = matmul(a, b).relu().to_array();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("matmul"), std::string::npos) << r.status().to_string();
}

// A block's results stay on the device: the next block reads them there, a host value read by
// two blocks is copied up once, and only what is read comes down.
TEST_F(LazyCudaTest, ValuesStayOnTheDeviceBetweenBlocks) {
  Tensor xc = Tensor::randn({96, 130}, 31, DType::F32, lazy::Device::cpu());
  Tensor x = Tensor::from_array(read(xc), kGpu);
  const lazy::LazyStats start = lazy::stats();
  const lazy::MemoryUsage gpu_start = lazy::memory_usage(kGpu);
  Tensor y = x.tanh();
  ASSERT_TRUE(flush().is_ok());
  EXPECT_FALSE(y.state()->on_host()) << "a cuda block's result was copied to the host unasked";
  EXPECT_GE(lazy::memory_usage(kGpu).bytes - gpu_start.bytes, int64_t(2 * 96 * 130 * 4))
      << "x (copied up) and y (computed there) are held on the device";
  Tensor w = (y.sum({1}, true) + y) * x;
  Array got = read(w);
  const lazy::LazyStats end = lazy::stats();
  EXPECT_EQ(end.device_uploads - start.device_uploads, 1u) << "only x is copied up, once for both blocks";
  EXPECT_EQ(end.device_downloads - start.device_downloads, 1u) << "only w is copied down";
  EXPECT_FALSE(y.state()->on_host());
  Tensor wc = (xc.tanh().sum({1}, true) + xc.tanh()) * xc;
  EXPECT_TRUE(close_to_scale(got, read(wc), 1e-5));
  // Reading y now copies it down, once.
  EXPECT_TRUE(close_to_scale(read(y), read(xc.tanh()), 1e-5));
  EXPECT_TRUE(y.state()->on_host());
  read(y);
  EXPECT_EQ(lazy::stats().device_downloads - start.device_downloads, 2u);
}

// The scalars a loop makes at every step are copied up once per value.
TEST_F(LazyCudaTest, ScalarsAreCopiedUpOncePerValue) {
  Tensor xc = Tensor::randn({1000}, 33, DType::F32, lazy::Device::cpu());
  Tensor y = Tensor::from_array(read(xc), kGpu), yc = xc;
  const lazy::LazyStats start = lazy::stats();
  for (int i = 0; i < 4; ++i) {
    y = (y * 0.8125 + 0.0703125).tanh();
    read(y);
    yc = (yc * 0.8125 + 0.0703125).tanh();
  }
  EXPECT_EQ(lazy::stats().device_uploads - start.device_uploads, 3u)
      << "y's first value and the two scalars, once";
  EXPECT_TRUE(close_to_scale(read(y), read(yc), 1e-5));
}

// A custom op's CUDA kernel: out = in * scale + shift, launched on the stream it is given.
constexpr const char* kAffineSource = R"(
extern "C" __global__ void custom_affine(const float* in, float* out, long long n, float scale, float shift) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * scale + shift;
}
)";
std::atomic<int> g_affine_cuda_calls{0};

double number(const Attrs& a, const char* name) {
  const AttrValue* v = a.find(name);
  return v && std::holds_alternative<double>(*v) ? std::get<double>(*v) : 0.0;
}

Status affine_cuda(std::span<const BufferView> in, std::span<const BufferView> out, const Attrs& attrs,
                   void* stream) {
  ++g_affine_cuda_calls;
  if (in.size() != 1 || out.size() != 1 || in[0].device.kind != DeviceKind::Cuda ||
      out[0].device.kind != DeviceKind::Cuda)
    return Status::invalid("affine_cuda: expects one operand and one result on a GPU");
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<cuda::Context> ctx, cuda::Context::get(0));
  FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, ctx->function(kAffineSource, "custom_affine"));
  const void* src = in[0].data;
  void* dst = out[0].data;
  long long n = in[0].numel();
  float scale = float(number(attrs, "scale")), shift = float(number(attrs, "shift"));
  void* args[] = {&src, &dst, &n, &scale, &shift};
  const cuda::Driver& d = ctx->driver();
  const unsigned blocks = unsigned((n + 255) / 256);
  return d.check(d.cuLaunchKernel(f, blocks ? blocks : 1, 1, 1, 256, 1, 1, 0, static_cast<CUstream>(stream),
                                  args, nullptr),
                 "launching custom_affine");
}

Status affine_cpu(const std::vector<Array>& in, const Attrs& attrs, std::vector<Array>& out) {
  const float scale = float(number(attrs, "scale")), shift = float(number(attrs, "shift"));
  for (int64_t i = 0; i < in[0].numel(); ++i)
    out[0].set_f64(i, double(float(in[0].get_f64(i)) * scale + shift));
  return Status::ok();
}

// Registers the affine op under `name`, with `cuda` as its device kernel (empty: CPU only).
bool register_affine(const std::string& name, lazy::CustomCudaKernel cuda) {
  lazy::CustomOpDef def;
  def.name = name;
  def.min_inputs = def.max_inputs = 1;
  def.infer = lazy::same_as_input(0);
  def.cpu = affine_cpu;
  def.cuda = std::move(cuda);
  return lazy::register_custom_op(def).is_ok();
}

TEST_F(LazyCudaTest, CustomOpRunsItsCudaKernelOnTheDevice) {
  ASSERT_TRUE(register_affine("test_affine_cuda", affine_cuda));
  {
    Tensor xc = Tensor::randn({37, 1001}, 41, DType::F32, lazy::Device::cpu());
    Tensor x = Tensor::from_array(read(xc), kGpu);
    const Attrs a{{"scale", 1.5}, {"shift", -0.25}};
    const int calls = g_affine_cuda_calls.load();
    const lazy::LazyStats start = lazy::stats();
    // Between two cuda blocks: its operand comes from the device and its result stays there.
    Tensor y = custom_op("test_affine_cuda", {x.sigmoid()}, a).exp();
    Array got = read(y);
    EXPECT_EQ(g_affine_cuda_calls.load(), calls + 1) << "the CUDA kernel ran once";
    EXPECT_EQ(lazy::stats().device_downloads - start.device_downloads, 1u) << "only y is copied down";
    Tensor yc = custom_op("test_affine_cuda", {xc.sigmoid()}, a).exp();
    EXPECT_TRUE(close_to_scale(got, read(yc), 1e-5));
    EXPECT_EQ(g_affine_cuda_calls.load(), calls + 1) << "the CPU device runs the CPU kernel";
  }
  EXPECT_TRUE(lazy::unregister_custom_op("test_affine_cuda"));
}

// An op without a CUDA kernel runs its CPU kernel on host copies; the next cuda block reads its
// result from a copy made up once.
TEST_F(LazyCudaTest, CustomOpWithoutCudaKernelRunsOnTheHost) {
  ASSERT_TRUE(register_affine("test_affine_host", nullptr));
  {
    Tensor xc = Tensor::randn({64, 65}, 43, DType::F32, lazy::Device::cpu());
    Tensor x = Tensor::from_array(read(xc), kGpu);
    const Attrs a{{"scale", -2.0}, {"shift", 0.5}};
    Tensor y = custom_op("test_affine_host", {x.tanh()}, a).relu();
    Tensor yc = custom_op("test_affine_host", {xc.tanh()}, a).relu();
    EXPECT_TRUE(close_to_scale(read(y), read(yc), 1e-5));
  }
  EXPECT_TRUE(lazy::unregister_custom_op("test_affine_host"));
}

// A failing CUDA kernel fails its block: the error comes back at the read, naming the op.
TEST_F(LazyCudaTest, CustomCudaKernelErrorComesBackAtRead) {
  ASSERT_TRUE(register_affine("test_failing_cuda",
                              [](std::span<const BufferView>, std::span<const BufferView>, const Attrs&,
                                 void*) -> Status { throw std::runtime_error("no kernel today"); }));
  {
    Tensor x = Tensor::randn({8, 8}, 44, DType::F32, kGpu);
    Expected<Array> r =
        custom_op("test_failing_cuda", {x}, {{"scale", 1.0}, {"shift", 0.0}}).relu().to_array();
    ASSERT_FALSE(r.has_value());
    EXPECT_NE(r.status().message().find("test_failing_cuda"), std::string::npos) << r.status().to_string();
    EXPECT_NE(r.status().message().find("no kernel today"), std::string::npos) << r.status().to_string();
  }
  EXPECT_TRUE(lazy::unregister_custom_op("test_failing_cuda"));
}

}  // namespace
}  // namespace fusebox::testing
