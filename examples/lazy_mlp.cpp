// A two-layer MLP written with the lazy Tensor API: a hand-written SGD training loop (forward,
// backward by hand, update) and an inference loop over changing batch sizes. Nothing runs until
// the loss or the predictions are read; each step then runs as a few fused kernels, and from the
// second step on its plan comes from the plan cache.
//
//   build/examples/lazy_mlp            (FUSEBOX_NO_FUSION=1 runs every op alone: same numbers)
#include <cstdio>

#include "fusebox/tensor.h"

using fusebox::DType;
using fusebox::Tensor;
namespace lazy = fusebox::lazy;

struct Mlp {
  Tensor w1, b1, w2, b2;

  static Mlp init(int64_t in, int64_t hidden, int64_t out) {
    return {Tensor::randn({in, hidden}, 1) * (1.0 / 8), Tensor::zeros({hidden}),
            Tensor::randn({hidden, out}, 2) * (1.0 / 8), Tensor::zeros({out})};
  }
  Tensor forward(const Tensor& x, Tensor* hidden = nullptr) const {
    Tensor h = (matmul(x, w1) + b1).relu();
    if (hidden) *hidden = h;
    return matmul(h, w2) + b2;
  }
  // One SGD step on the mean squared error; returns the loss (still lazy).
  Tensor sgd_step(const Tensor& x, const Tensor& target, double lr) {
    Tensor h;
    Tensor y = forward(x, &h);
    Tensor diff = y - target;
    Tensor loss = (diff * diff).mean();
    const double n = double(diff.numel());
    Tensor dy = diff * (2.0 / n);
    Tensor dw2 = matmul(h.transpose({1, 0}), dy);
    Tensor db2 = dy.sum({0});
    Tensor dh = where(h > Tensor::scalar(0), matmul(dy, w2.transpose({1, 0})), Tensor::scalar(0));
    Tensor dw1 = matmul(x.transpose({1, 0}), dh);
    Tensor db1 = dh.sum({0});
    w1 = w1 - dw1 * lr;
    b1 = b1 - db1 * lr;
    w2 = w2 - dw2 * lr;
    b2 = b2 - db2 * lr;
    return loss;
  }
};

int main() {
  Mlp mlp = Mlp::init(32, 64, 4);
  Tensor x = Tensor::randn({128, 32}, 10);
  Tensor target = matmul(x, Tensor::randn({32, 4}, 11)).tanh();  // a function to learn
  if (fusebox::Status s = fusebox::sync(); !s.is_ok()) return 1;  // initial weights: not part of step 0
  std::printf("training (SGD, batch 128):\n");
  for (int step = 0; step < 20; ++step) {
    const lazy::LazyStats before = lazy::stats();
    fusebox::Expected<float> loss = mlp.sgd_step(x, target, 0.05).item<float>();
    if (!loss) {
      std::fprintf(stderr, "step %d: %s\n", step, loss.status().to_string().c_str());
      return 1;
    }
    const lazy::LazyStats after = lazy::stats();
    if (step < 3 || step % 5 == 4) {
      std::printf("  step %2d  loss %.5f  kernels %llu  plan cache %s\n", step, double(*loss),
                  (unsigned long long)(after.kernels - before.kernels),
                  after.plan_hits > before.plan_hits ? "hit" : "miss");
    }
  }
  std::printf("inference (batch sizes change; the plans are reused):\n");
  for (int64_t batch : {8, 24, 40, 24, 8, 1}) {
    const lazy::LazyStats before = lazy::stats();
    fusebox::Expected<std::vector<float>> y = mlp.forward(Tensor::randn({batch, 32}, uint64_t(batch))).softmax().to_vector<float>();
    if (!y) {
      std::fprintf(stderr, "batch %lld: %s\n", (long long)batch, y.status().to_string().c_str());
      return 1;
    }
    const lazy::LazyStats after = lazy::stats();
    std::printf("  batch %3lld  first row %.4f %.4f %.4f %.4f  plan cache %s\n", (long long)batch, double((*y)[0]),
                double((*y)[1]), double((*y)[2]), double((*y)[3]), after.plan_hits > before.plan_hits ? "hit" : "miss");
  }
  const lazy::LazyStats s = lazy::stats();
  std::printf("total: %llu records, %llu kernels, plan cache %llu hits / %llu misses, %llu in-place outputs\n",
              (unsigned long long)s.records, (unsigned long long)s.kernels, (unsigned long long)s.plan_hits,
              (unsigned long long)s.plan_misses, (unsigned long long)s.inplace_reuses);
  return 0;
}
