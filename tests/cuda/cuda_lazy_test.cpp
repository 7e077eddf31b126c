// The lazy Tensor API on Device::cuda(0): the same program as on the CPU, every block compiled
// for the cuda target (fused kernels generated with NVRTC, matmuls through cuBLASLt), results
// equal to the CPU's. Without a GPU every test skips with the reason the device is missing.
// Tolerance: 1e-5 of each result's scale (the CPU runs oneDNN's matmul, the GPU cuBLASLt's:
// the same products summed in another order).
#include <gtest/gtest.h>

#include "backends/cuda/context.h"
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

}  // namespace
}  // namespace fusebox::testing
