// The lazy section of `fusebox demo`: an MLP trained with hand-written SGD through the lazy
// Tensor API, once with fusion and once on an unfused device. Prints per step the kernels that
// ran and whether the plan cache answered, then the time per step of both and the difference
// between their final losses.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "fusebox/tensor.h"

namespace fusebox::cli {
namespace {

struct Step {
  double loss = 0;
  uint64_t kernels = 0;
  bool hit = false;
  double ms = 0;
};

class DemoMlp {
 public:
  DemoMlp(int64_t in, int64_t hidden, int64_t out, lazy::Device d)
      : d_(d),
        w1_(Tensor::randn({in, hidden}, 1, DType::F32, d) * (1.0 / 8)),
        b1_(Tensor::zeros({hidden}, DType::F32, d)),
        w2_(Tensor::randn({hidden, out}, 2, DType::F32, d) * (1.0 / 8)),
        b2_(Tensor::zeros({out}, DType::F32, d)) {}

  Expected<Step> step(const Tensor& x, const Tensor& target, double lr) {
    const lazy::LazyStats before = lazy::stats();
    const auto start = std::chrono::steady_clock::now();
    Tensor h = (matmul(x, w1_) + b1_).relu();
    Tensor diff = matmul(h, w2_) + b2_ - target;
    Tensor loss = (diff * diff).mean();
    Tensor dy = diff * (2.0 / double(diff.numel()));
    Tensor dh = where(h > Tensor::scalar(0, DType::F32, d_), matmul(dy, w2_.transpose({1, 0})),
                      Tensor::scalar(0, DType::F32, d_));
    w2_ = w2_ - matmul(h.transpose({1, 0}), dy) * lr;
    b2_ = b2_ - dy.sum({0}) * lr;
    w1_ = w1_ - matmul(x.transpose({1, 0}), dh) * lr;
    b1_ = b1_ - dh.sum({0}) * lr;
    Expected<float> value = loss.item<float>();
    if (!value) return value.status();
    Step s;
    s.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const lazy::LazyStats after = lazy::stats();
    s.loss = double(*value);
    s.kernels = after.kernels - before.kernels;
    s.hit = after.plan_hits > before.plan_hits;
    return s;
  }

 private:
  lazy::Device d_;
  Tensor w1_, b1_, w2_, b2_;
};

Expected<std::vector<Step>> train(lazy::Device d, int64_t batch, int64_t width, int steps, double lr) {
  DemoMlp mlp(width, 2 * width, 8, d);
  Tensor x = Tensor::randn({batch, width}, 10, DType::F32, d);
  Tensor target = matmul(x, Tensor::randn({width, 8}, 11, DType::F32, d)).tanh();
  FUSEBOX_RETURN_IF_ERROR(sync(d));
  std::vector<Step> out;
  for (int i = 0; i < steps; ++i) {
    FUSEBOX_ASSIGN_OR_RETURN(Step s, mlp.step(x, target, lr));
    out.push_back(s);
  }
  return out;
}

double median_ms(std::vector<Step> steps) {
  steps.erase(steps.begin());  // the first step compiles
  std::sort(steps.begin(), steps.end(), [](const Step& a, const Step& b) { return a.ms < b.ms; });
  return steps.empty() ? 0 : steps[steps.size() / 2].ms;
}

}  // namespace

int run_lazy_demo(bool small) {
  const int64_t batch = small ? 16 : 256, width = small ? 16 : 256;
  const int steps = small ? 4 : 10;
  const double lr = small ? 0.05 : 0.002;  // wider layers need smaller steps
  std::printf("lazy: an MLP trained with SGD through the lazy Tensor API (batch %lld, width %lld)\n",
              (long long)batch, (long long)width);
  Expected<std::vector<Step>> fused = train(lazy::Device::cpu(), batch, width, steps, lr);
  Expected<std::vector<Step>> plain = fused ? train(lazy::Device::cpu().unfused(), batch, width, steps, lr) : fused;
  if (!fused || !plain) {
    std::fprintf(stderr, "fusebox demo: lazy: %s\n", (fused ? plain : fused).status().to_string().c_str());
    return 1;
  }
  for (size_t i = 0; i < fused->size(); ++i) {
    const Step& f = (*fused)[i];
    const Step& p = (*plain)[i];
    std::printf("  step %2zu  loss %.5f  kernels %3llu fused / %3llu unfused  plan cache %s\n", i, f.loss,
                (unsigned long long)f.kernels, (unsigned long long)p.kernels, f.hit ? "hit" : "miss");
  }
  const double fm = median_ms(*fused), pm = median_ms(*plain);
  std::printf("  median step  fused %.3f ms  fusion off %.3f ms  speed-up %.2fx\n", fm, pm, pm / std::max(fm, 1e-9));
  std::printf("  |loss fused - loss unfused| = %.3g\n\n", std::fabs(fused->back().loss - plain->back().loss));
  return 0;
}

}  // namespace fusebox::cli
