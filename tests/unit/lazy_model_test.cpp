// Whole programs through the lazy Tensor API: an MLP trained with hand-written SGD equals the
// same loop with fusion off at every step and hits the plan cache from its second step; errors
// found while running deferred work come back at the read as ExecutionError; every IR op family
// is reachable from the API.
#include <gtest/gtest.h>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

struct Mlp {
  lazy::Device d;
  Tensor w1, b1, w2, b2;
  explicit Mlp(lazy::Device dev)
      : d(dev),
        w1(Tensor::randn({12, 24}, 1, DType::F32, dev) * 0.2),
        b1(Tensor::rand({24}, 2, DType::F32, dev)),
        w2(Tensor::randn({24, 3}, 3, DType::F32, dev) * 0.2),
        b2(Tensor::rand({3}, 4, DType::F32, dev)) {}
  Tensor step(const Tensor& x, const Tensor& t, double lr) {
    Tensor h = (matmul(x, w1) + b1).relu();
    Tensor diff = matmul(h, w2) + b2 - t;
    Tensor loss = (diff * diff).mean();
    Tensor dy = diff * (2.0 / double(diff.numel()));
    Tensor dh = where(h > Tensor::scalar(0, DType::F32, d), matmul(dy, w2.transpose({1, 0})), Tensor::scalar(0, DType::F32, d));
    w2 = w2 - matmul(h.transpose({1, 0}), dy) * lr;
    b2 = b2 - dy.sum({0}) * lr;
    w1 = w1 - matmul(x.transpose({1, 0}), dh) * lr;
    b1 = b1 - dh.sum({0}) * lr;
    return loss;
  }
};

TEST_F(LazyTest, SgdLoopEqualsFusionOffAndHitsFromSecondStep) {
  Mlp fused(lazy::Device::cpu()), plain(lazy::Device::cpu().unfused());
  Tensor xf = Tensor::randn({16, 12}, 5), tf = Tensor::randn({16, 3}, 6);
  Tensor xp = Tensor::randn({16, 12}, 5, DType::F32, plain.d), tp = Tensor::randn({16, 3}, 6, DType::F32, plain.d);
  ASSERT_TRUE(sync().is_ok());
  for (int i = 0; i < 5; ++i) {
    const lazy::LazyStats before = lazy::stats();
    Expected<float> lf = fused.step(xf, tf, 0.05).item<float>();
    const lazy::LazyStats mid = lazy::stats();
    Expected<float> lp = plain.step(xp, tp, 0.05).item<float>();
    ASSERT_TRUE(lf.has_value() && lp.has_value());
    EXPECT_NEAR(*lf, *lp, 1e-5 * std::max(1.0f, std::abs(*lp))) << "step " << i;
    if (i >= 1) EXPECT_EQ(mid.plan_hits, before.plan_hits + 1) << "step " << i;
    if (i >= 1) EXPECT_LT(mid.kernels - before.kernels, lazy::stats().kernels - mid.kernels);
  }
  EXPECT_TRUE(close_to_scale(read(fused.w1), read(plain.w1), 1e-5));
  EXPECT_GT(lazy::stats().inplace_reuses, 0u);
}

TEST_F(LazyTest, RunTimeErrorComesBackAsExecutionError) {
  Tensor data = Tensor::randn({4, 3}, 7);
  Tensor idx = Tensor::from_vector<int64_t>({0, 9}, {2}, DType::I64);  // 9 is out of range
  Tensor y = Tensor::apply(Op::Gather, {data, idx}, {{"axis", int64_t(0)}}).exp();
  Expected<Array> r = y.to_array();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kExecutionError) << r.status().to_string();
  EXPECT_NE(r.status().message().find("gather"), std::string::npos) << r.status().to_string();
  // The stream keeps working after the error.
  Expected<float> ok = (data * 2.0).sum().item<float>();
  EXPECT_TRUE(ok.has_value());
  EXPECT_TRUE(sync().is_ok());
}

TEST_F(LazyTest, EveryOpFamilyIsReachable) {
  lazy::Device u = lazy::Device::cpu().unfused();
  auto both = [&](auto&& f) {
    Tensor a = f(lazy::Device::cpu()), b = f(u);
    EXPECT_TRUE(close_to_scale(read(a), read(b), 1e-5));
  };
  both([](lazy::Device d) {  // conv + pooling-free CNN block with concat and pad
    Tensor x = Tensor::randn({1, 3, 8, 8}, 1, DType::F32, d), w = Tensor::randn({4, 3, 3, 3}, 2, DType::F32, d);
    Tensor bias = Tensor::randn({4}, 3, DType::F32, d);
    Tensor c = conv2d(x, w, bias, {1, 1}, {1, 1, 1, 1}).relu();
    return concat({c, c.flip({3})}, 1).pad({0, 0, 1, 1, 0, 0, 1, 1});
  });
  both([](lazy::Device d) {  // normalisation, resize and softmax
    Tensor x = Tensor::randn({2, 4, 6}, 4, DType::F32, d);
    Tensor n = layer_norm(x, Tensor::rand({6}, 5, DType::F32, d), Tensor::rand({6}, 6, DType::F32, d));
    return resize(n.reshape({2, 1, 4, 6}), {2, 1, 8, 12}).softmax(-1);
  });
  both([](lazy::Device d) {  // comparisons, logic, where, clip, cast, argmax
    Tensor a = Tensor::randn({5, 7}, 7, DType::F32, d), b = Tensor::randn({7}, 8, DType::F32, d);
    Tensor m = (a > b) && (a < b * 3.0);
    Tensor w = where(m, a.clip(-0.5, 0.5), b.gelu(true));
    return w + a.argmax(1, true).cast(DType::F32) + a.expand({5, 7}).min({0}, true);
  });
}

}  // namespace
}  // namespace fusebox::testing
