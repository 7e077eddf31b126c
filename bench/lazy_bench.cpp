// The lazy Tensor API's overheads and what fusion gains through it (no figures are recorded in
// docs/benchmarks.md yet):
//
//   BM_RecordCost     recording one op (handle, shape inference, the record); the flush that
//                     follows each batch of 256 ops is not timed
//   BM_CacheHitCost   a 100-op chain on 16 elements read every iteration: from the second
//                     iteration on, the relative form hits the plan cache, so the time per op
//                     is record + lookup + a share of one tiny kernel
//   BM_Chain100       y = y * 0.999 + 0.001, 50 times (100 ops), on 1024 and 2^24 f32:
//                     lazy fused (one kernel), lazy with fusion off (every op alone, one flush),
//                     and eager (a sync after every op: 100 flushes of one op each, what
//                     running the ops one by one costs)
//   BM_MlpStep        one SGD step of the two-layer MLP of examples/lazy_mlp.cpp and `fusebox
//                     demo` (width w -> 2w -> 8, batch max(128, w); w = 32 and 256, the demo's
//                     size), loss read: fused and with fusion off
//   BM_MlpStepCuda    the same step on Device::cuda(0) (w = 256 and 1024, batch max(128, w)),
//                     fused and with fusion off; skipped without a GPU
//
// The chains and the MLP step run once before timing: what is timed runs cached plans.
//
// bench/peers/torch_lazy.py runs the same chain in PyTorch eager (2 threads).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <string>

#include "../examples/lazy_mlp.h"
#include "fusebox/tensor.h"

namespace fusebox {
namespace {

void BM_RecordCost(benchmark::State& state) {
  Tensor x = Tensor::randn({1024}, 1);
  Tensor s = Tensor::scalar(1.0001);
  int64_t ops = 0;
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < 256; ++i) y = y * s;
    ops += 256;
    state.PauseTiming();
    (void)sync();
    state.ResumeTiming();
  }
  state.SetItemsProcessed(ops);
  state.counters["ns_per_op"] = benchmark::Counter(double(ops), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_RecordCost)->Unit(benchmark::kMicrosecond);

void BM_CacheHitCost(benchmark::State& state) {
  Tensor x = Tensor::randn({16}, 2);
  int64_t ops = 0;
  for (auto _ : state) {
    Tensor y = x;
    for (int i = 0; i < 50; ++i) y = y * 0.999 + 0.001;
    benchmark::DoNotOptimize(y.to_array());
    ops += 100;
  }
  state.SetItemsProcessed(ops);
  state.counters["plan_hits"] = double(lazy::stats().plan_hits);
  state.counters["ns_per_op"] = benchmark::Counter(double(ops), benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}
BENCHMARK(BM_CacheHitCost)->Unit(benchmark::kMicrosecond);

// mode 0: lazy fused; 1: lazy, fusion off; 2: eager (sync after every op).
void BM_Chain100(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int mode = int(state.range(1));
  const lazy::Device d = mode == 1 ? lazy::Device::cpu().unfused() : lazy::Device::cpu();
  Tensor x = Tensor::randn({n}, 3, DType::F32, d);
  auto chain = [&] {
    Tensor y = x;
    for (int i = 0; i < 50; ++i) {
      y = y * 0.999;
      if (mode == 2) (void)sync(d);
      y = y + 0.001;
      if (mode == 2) (void)sync(d);
    }
    return y.to_array();
  };
  // Once untimed, so every mode is timed with its plans cached: a 2^24 chain runs one timed
  // iteration, which would otherwise include compiling its blocks (100 of them with fusion off).
  benchmark::DoNotOptimize(chain());
  const lazy::LazyStats before = lazy::stats();
  for (auto _ : state) {
    Expected<Array> out = chain();
    benchmark::DoNotOptimize(out);
  }
  const lazy::LazyStats after = lazy::stats();
  const double iterations = double(state.iterations());
  state.counters["kernels"] = double(after.kernels - before.kernels) / iterations;
  state.counters["allocations"] = double(after.allocations - before.allocations) / iterations;
  state.counters["in_place"] = double(after.inplace_reuses - before.inplace_reuses) / iterations;
  state.SetBytesProcessed(state.iterations() * n * 4 * 2);
  state.SetLabel(mode == 0 ? "lazy fused" : mode == 1 ? "lazy unfused" : "eager");
}
BENCHMARK(BM_Chain100)
    ->ArgsProduct({{1024, 1 << 24}, {0, 1, 2}})
    ->ArgNames({"n", "mode"})
    ->Unit(benchmark::kMillisecond)
    ->MinTime(0.2);

// One SGD step of the MLP on `device` (range(0): width; range(1) 0: fused, 1: fusion off).
void run_mlp_step(benchmark::State& state, lazy::Device device) {
  const int64_t width = state.range(0);
  const bool unfused = state.range(1) == 1;
  const lazy::Device d = unfused ? device.unfused() : device;
  Mlp mlp = Mlp::init(width, 2 * width, 8, d);
  Tensor x = Tensor::randn({std::max<int64_t>(128, width), width}, 10, DType::F32, d);
  Tensor target = matmul(x, Tensor::randn({width, 8}, 11, DType::F32, d)).tanh();
  (void)sync(d);
  benchmark::DoNotOptimize(mlp.sgd_step(x, target, 0.01).item<float>());  // untimed: compiles the step's plan
  const lazy::LazyStats before = lazy::stats();
  for (auto _ : state) {
    Expected<float> loss = mlp.sgd_step(x, target, 0.01).item<float>();
    benchmark::DoNotOptimize(loss);
  }
  const lazy::LazyStats after = lazy::stats();
  state.counters["kernels_per_step"] = double(after.kernels - before.kernels) / double(state.iterations());
  state.counters["plan_misses"] = double(after.plan_misses - before.plan_misses);
  state.SetLabel(std::string(unfused ? "lazy unfused" : "lazy fused") +
                 (device.kind == lazy::DeviceKind::Cuda ? ", cuda" : ""));
}

void BM_MlpStep(benchmark::State& state) { run_mlp_step(state, lazy::Device::cpu()); }
BENCHMARK(BM_MlpStep)
    ->ArgsProduct({{32, 256}, {0, 1}})
    ->ArgNames({"width", "mode"})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);

// The step on the GPU; skipped without one.
void BM_MlpStepCuda(benchmark::State& state) {
  const lazy::Device gpu = lazy::Device::cuda(0);
  if (Status why = gpu.availability(); !why.is_ok()) {
    state.SkipWithError(why.message().c_str());
    return;
  }
  run_mlp_step(state, gpu);
}
BENCHMARK(BM_MlpStepCuda)
    ->ArgsProduct({{256, 1024}, {0, 1}})
    ->ArgNames({"width", "mode"})
    ->Unit(benchmark::kMicrosecond)
    ->MinTime(0.2);

}  // namespace
}  // namespace fusebox

BENCHMARK_MAIN();
