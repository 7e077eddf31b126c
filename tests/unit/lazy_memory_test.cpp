// Memory of the lazy layer: in-place reuse of dead inputs (asserted by allocation counts, spec
// §8 weakness 6), dead stores, live tensor and byte counts, and the leak check.
#include <gtest/gtest.h>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

lazy::Device unfused() { return lazy::Device::cpu().unfused(); }

TEST_F(LazyTest, Weakness6InplaceReusesDeadInputBuffer) {
  Tensor y = (Tensor::randn({1024}, 1) * 2.0).exp();  // the randn temporary dies before the read
  Array got = read(y);
  EXPECT_EQ(lazy::stats().inplace_reuses, 1u);
  EXPECT_EQ(lazy::stats().allocations, 0u);
  Tensor want = (Tensor::randn({1024}, 1, DType::F32, unfused()) * 2.0).exp();
  EXPECT_TRUE(close_to_scale(got, read(want), 1e-6));
}

TEST_F(LazyTest, InplaceNeverTakesALiveInput) {
  Tensor x = Tensor::randn({1024}, 2);
  Array before = read(x);
  Tensor y = (x * 2.0).exp();
  read(y);
  EXPECT_EQ(lazy::stats().inplace_reuses, 0u);
  EXPECT_EQ(lazy::stats().allocations, 1u);
  EXPECT_TRUE(read(x).same_data(before));  // x kept its values
}

TEST_F(LazyTest, InplaceNeverTakesABroadcastInput) {
  Tensor y = Tensor::randn({4, 256}, 3) + Tensor::randn({256}, 4);
  read(y);
  // The [4,256] temporary matches and may be reused; the [256] one never is.
  EXPECT_LE(lazy::stats().inplace_reuses, 1u);
  EXPECT_EQ(lazy::stats().inplace_reuses + lazy::stats().allocations, 1u);
}

TEST_F(LazyTest, InplaceInALoopReusesEachStep) {
  Tensor x = Tensor::randn({512}, 5);
  Tensor ref = Tensor::from_array(read(x), unfused());
  for (int i = 0; i < 4; ++i) {
    x = (x * 0.5 + 1.0).relu();
    ref = (ref * 0.5 + 1.0).relu();
    read(x);
    read(ref);
  }
  // Steps 2..4 of the fused loop and unfused steps write over the previous x: dead after `=`.
  EXPECT_GE(lazy::stats().inplace_reuses, 3u);
  EXPECT_TRUE(close_to_scale(read(x), read(ref), 1e-6));
}

// A tensor written in place step after step keeps its one buffer: the value a block writes into a
// donated buffer is the donor's own array, not a wrapper of it, so a training loop's weights do
// not end up at the head of a chain of wrappers as long as the loop (freeing that chain
// recursively overflowed the stack after some 10^5 steps).
TEST_F(LazyTest, InplaceLoopKeepsOneBufferOverManySteps) {
  const std::vector<float> start = {0.25f, -3.5f, 7.0f, 1.5f, -0.75f, 2.0f, 9.25f, -6.0f};
  Tensor x = Tensor::from_vector(start, {8});
  x = x + 0.0;  // from here on x is a computed tensor with no other handle
  read(x);
  const uint64_t allocations = lazy::stats().allocations;
  const int steps = 300000;
  for (int i = 0; i < steps; ++i) {
    x = x + 1.0;
    ASSERT_TRUE(flush().is_ok());
  }
  EXPECT_EQ(lazy::stats().allocations, allocations);  // every step wrote in place
  Array got = read(x);
  for (size_t i = 0; i < start.size(); ++i) EXPECT_EQ(got.get_f64(int64_t(i)), double(start[i]) + steps) << i;
  x = Tensor();  // frees the buffer: a chain of 300000 wrappers would overflow the stack here
  got = Array();
}

TEST_F(LazyTest, InplaceNeverWritesABufferAReshapeShares) {
  Tensor x = Tensor::randn({4, 8}, 6);
  Tensor r = (x + 1.0).reshape({32});  // r may alias x+1's buffer
  Array rv = read(r);
  Tensor z = (x + 1.0);                 // a new tensor; r stays intact
  Tensor w = r.exp();
  read(w);
  read(z);
  EXPECT_TRUE(read(r).same_data(rv));
}

TEST_F(LazyTest, MemoryUsageCountsLiveTensorsAndBytes) {
  const lazy::MemoryUsage start = lazy::memory_usage();
  {
    Tensor a = Tensor::rand({1000}, 1);
    lazy::MemoryUsage now = lazy::memory_usage();
    EXPECT_EQ(now.live_tensors, start.live_tensors + 1);
    EXPECT_EQ(now.bytes, start.bytes + 4000);
  }
  EXPECT_EQ(lazy::memory_usage().live_tensors, start.live_tensors);
  EXPECT_EQ(lazy::memory_usage().bytes, start.bytes);
  EXPECT_EQ(lazy::memory_usage(lazy::Device::cuda(0)).live_tensors, 0);
}

TEST_F(LazyTest, LeakCheckFindsALeakedTensor) {
  lazy::LeakCheck scope;
  auto* leaked = new Tensor((Tensor::rand({8}, 1) + 1.0).exp());
  Status s = scope.check();
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("1 tensor"), std::string::npos) << s.to_string();
  delete leaked;
  EXPECT_TRUE(scope.check().is_ok());
}

}  // namespace
}  // namespace fusebox::testing
