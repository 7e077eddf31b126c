// The scheduled order of a segment (src/lazy/schedule.h): a record recorded between the links of
// a chain no longer splits it, producers always run before their readers, a tensor read later in
// the new order is never written in place before that read, and a cached plan keeps its order.
// Every case compares with the same program on the unfused device (recorded order, one op at a
// time).
#include <gtest/gtest.h>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

const lazy::Device kUnfused = lazy::Device::cpu().unfused();

Tensor rnd(std::vector<int64_t> shape, uint64_t seed, lazy::Device d = lazy::Device::cpu()) {
  return Tensor::randn(std::move(shape), seed, DType::F32, d);
}

// a = x*2; m = p@q; b = exp(a); c = b+1: recorded, the matmul splits the chain in two blocks.
struct Interleaved {
  Tensor c, m;
  explicit Interleaved(lazy::Device d) {
    Tensor x = rnd({32, 48}, 1, d), p = rnd({32, 40}, 2, d), q = rnd({40, 48}, 3, d);
    Tensor a = x * 2.0;
    m = matmul(p, q);
    Tensor b = a.exp();
    c = b + 1.0;
  }
};

TEST_F(LazyTest, ARecordBetweenTheLinksOfAChainRunsAfterIt) {
  Interleaved fused(lazy::Device::cpu());
  Array c = read(fused.c), m = read(fused.m);
  ASSERT_EQ(log->blocks.size(), 2u);
  EXPECT_EQ(log->blocks[0].ops, (std::vector<Op>{Op::Mul, Op::Exp, Op::Add}));
  EXPECT_TRUE(log->blocks[0].fused);
  EXPECT_EQ(log->blocks[0].kernel_count, 1u);
  EXPECT_EQ(log->blocks[1].ops, (std::vector<Op>{Op::MatMul}));
  Interleaved unfused(kUnfused);
  EXPECT_TRUE(close_to_scale(c, read(unfused.c), 1e-6));
  EXPECT_TRUE(close_to_scale(m, read(unfused.m), 1e-6));
}

TEST_F(LazyTest, ACachedPlanRunsInItsScheduledOrder) {
  for (int step = 0; step < 3; ++step) {
    log->blocks.clear();
    Interleaved fused(lazy::Device::cpu());
    Array c = read(fused.c);
    ASSERT_EQ(log->blocks.size(), 2u) << "step " << step;
    EXPECT_EQ(log->blocks[0].plan_cache_hit, step > 0);
    EXPECT_EQ(log->blocks[0].ops, (std::vector<Op>{Op::Mul, Op::Exp, Op::Add}));
    Interleaved unfused(kUnfused);
    EXPECT_TRUE(close_to_scale(c, read(unfused.c), 1e-6));
    EXPECT_TRUE(close_to_scale(read(fused.m), read(unfused.m), 1e-6));
  }
}

// A chain that needs the record in between: nothing can move, the recorded order is kept.
TEST_F(LazyTest, AChainThatReadsTheRecordInBetweenKeepsRecordedOrder) {
  auto run = [](lazy::Device d) {
    Tensor x = rnd({16, 24}, 4, d), p = rnd({16, 20}, 5, d), q = rnd({20, 24}, 6, d);
    Tensor a = x * 2.0;
    Tensor m = matmul(p, q);
    return ((a + m) * 0.5).relu();
  };
  Array got = read(run(lazy::Device::cpu()));
  std::vector<Op> ran;
  for (const auto& b : log->blocks) ran.insert(ran.end(), b.ops.begin(), b.ops.end());
  EXPECT_EQ(ran, (std::vector<Op>{Op::Mul, Op::MatMul, Op::Add, Op::Mul, Op::Relu}));
  EXPECT_TRUE(close_to_scale(got, read(run(kUnfused)), 1e-6));
}

// t (a matmul's result, dead after recording) is read by exp, which the new order pulls next to
// t, and by a matmul that waits for another matmul recorded before exp. exp's block takes t as
// an input of its shape and dtype, the in-place case, but t's last reader in the new order is the
// late matmul, so exp must not write into t's buffer (checked by value against the unfused run).
TEST_F(LazyTest, ATensorReadLaterInTheNewOrderIsNotWrittenInPlace) {
  auto run = [](lazy::Device d) {
    Tensor x = rnd({24, 24}, 7, d), y = rnd({24, 24}, 8, d), p = rnd({24, 24}, 9, d),
           q = rnd({24, 24}, 10, d);
    Tensor t = matmul(x, y);
    Tensor m = matmul(p, q);
    Tensor w = t.exp();
    Tensor r = matmul(t, m);
    return std::make_pair(w, r);
  };
  auto [w, r] = run(lazy::Device::cpu());
  Array gw = read(w), gr = read(r);
  std::vector<Op> ran;
  for (const auto& b : log->blocks) ran.insert(ran.end(), b.ops.begin(), b.ops.end());
  EXPECT_EQ(ran, (std::vector<Op>{Op::MatMul, Op::Exp, Op::MatMul, Op::MatMul}));
  auto [uw, ur] = run(kUnfused);
  EXPECT_TRUE(close_to_scale(gw, read(uw), 1e-6));
  EXPECT_TRUE(close_to_scale(gr, read(ur), 1e-5));
}

}  // namespace
}  // namespace fusebox::testing
