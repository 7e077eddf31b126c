// A two-layer MLP written with the lazy Tensor API: a hand-written SGD training loop (forward,
// backward by hand, update) and an inference loop over changing batch sizes. Nothing runs until
// the loss or the predictions are read; each step then runs as a few fused kernels, and from the
// second step on its plan comes from the plan cache.
//
//   build/examples/lazy_mlp            (FUSEBOX_NO_FUSION=1 runs every op alone: same numbers)
//
// The model itself (forward, backward by hand, update) is in lazy_mlp.h.
#include <cstdio>

#include "fusebox/tensor.h"
#include "lazy_mlp.h"

using fusebox::DType;
using fusebox::Tensor;
namespace lazy = fusebox::lazy;

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
