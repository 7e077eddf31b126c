// Element-wise fusion on the CPU, measured in one process (docs/benchmarks.md has the figures):
//
//   copy        STREAM-style copy on all cores into already-touched memory: the machine's
//               practical bandwidth ceiling
//   chain5      relu(x*a+b)*0.5 + tanh(x)            (x, a, b inputs of n f32)
//   chain10     a*sigmoid(relu(tanh(x*a+b)*0.5+x)^2 - b)
//   each fused (one elementwise_region) and unfused (every op alone through the same tiled,
//   vectorised, multi-threaded region executor as a one-op region), at n = 2^26 and 2^16
//
// After the runs it prints the ratios: fused speed-up over unfused, and the fused chain's
// effective bandwidth (ideal bytes: inputs read once + output written once, per second) as a
// fraction of the copy bandwidth. Output buffers come from the executable's pool, reused across
// iterations.
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstdio>
#include <map>
#include <string>

#include "fusebox/session.h"

namespace fusebox {
namespace {

Graph chain(int ops) {
  GraphBuilder b("chain" + std::to_string(ops));
  Shape n{Dim::symbol("N")};
  ValueId x = b.input("x", DType::F32, n), a = b.input("a", DType::F32, n), c = b.input("b", DType::F32, n);
  ValueId half = b.scalar(DType::F32, 0.5);
  ValueId t1 = b.mul(x, a);
  ValueId t2 = b.add(t1, c);
  if (ops == 5) {
    ValueId r = b.relu(t2);
    ValueId h = b.mul(r, half);
    ValueId t = b.tanh(x);
    b.output(b.add(h, t));
  } else {
    ValueId t3 = b.tanh(t2);
    ValueId t4 = b.mul(t3, half);
    ValueId t5 = b.add(t4, x);
    ValueId t6 = b.relu(t5);
    ValueId t7 = b.mul(t6, t6);
    ValueId t8 = b.sub(t7, c);
    ValueId t9 = b.sigmoid(t8);
    b.output(b.mul(t9, a));
  }
  return *b.build();
}

Array filled(int64_t n, float scale) {
  Array a(DType::F32, {n});
  float* p = a.data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = scale * float((i * 2654435761u) % 2001) / 1000.0f - scale;
  return a;
}

struct ChainCase {
  Executable exe;
  NamedArrays inputs;
};

ChainCase make_case(int ops, int64_t n, bool fused) {
  CompileOptions o;
  FusionOptions f = FusionOptions::for_cpu();
  f.unfuse_elementwise_regions = !fused;
  o.fusion = f;
  Expected<Executable> exe = Session().compile(chain(ops), o);
  if (!exe) {
    std::fprintf(stderr, "compile failed: %s\n", exe.status().to_string().c_str());
    std::abort();
  }
  return {std::move(*exe), {{"x", filled(n, 2.0f)}, {"a", filled(n, 1.5f)}, {"b", filled(n, 0.5f)}}};
}

void BM_Copy(benchmark::State& state) {
  const int64_t n = state.range(0);
  Array src = filled(n, 1.0f), dst = filled(n, 0.0f);  // both touched before timing
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  for (auto _ : state) {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) d[i] = s[i];
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 8);  // read + write
}

void BM_Chain(benchmark::State& state, int ops, bool fused) {
  const int64_t n = state.range(0);
  ChainCase c = make_case(ops, n, fused);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(c.exe.run(c.inputs));  // warm the pool
  for (auto _ : state) {
    Expected<std::vector<Array>> out = c.exe.run(c.inputs);
    if (!out) state.SkipWithError(out.status().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * n * 16);  // ideal: 3 inputs + 1 output
  state.counters["kernels"] = double(c.exe.report().kernels_after);
}

// Keeps each run's time so the ratios can be printed after all runs.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      seconds_[r.benchmark_name()] = r.real_accumulated_time / double(r.iterations);
      bytes_per_second_[r.benchmark_name()] = r.counters.count("bytes_per_second")
                                                  ? double(r.counters.at("bytes_per_second"))
                                                  : 0.0;
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Summarize() const {
    std::printf("\nsummary (threads: %d)\n", omp_get_max_threads());
    double copy = find_bw("BM_Copy/");
    if (copy > 0) std::printf("  copy bandwidth            %.1f GB/s\n", copy / 1e9);
    for (const char* chain : {"chain5", "chain10"}) {
      for (const char* n : {"67108864", "65536"}) {
        double fused = find_time(std::string("BM_Chain/") + chain + "_fused/" + n);
        double unfused = find_time(std::string("BM_Chain/") + chain + "_unfused/" + n);
        double bw = find_bw(std::string("BM_Chain/") + chain + "_fused/" + n);
        if (fused <= 0 || unfused <= 0) continue;
        std::printf("  %-7s n=%-9s fused %8.3f ms  unfused %8.3f ms  speed-up %.2fx  fused %.1f GB/s = %.2f of copy\n",
                    chain, n, fused * 1e3, unfused * 1e3, unfused / fused, bw / 1e9, copy > 0 ? bw / copy : 0.0);
      }
    }
  }

 private:
  double find_time(const std::string& prefix) const { return find(seconds_, prefix); }
  double find_bw(const std::string& prefix) const { return find(bytes_per_second_, prefix); }
  static double find(const std::map<std::string, double>& m, const std::string& prefix) {
    for (const auto& [name, v] : m)
      if (name.rfind(prefix, 0) == 0) return v;
    return 0;
  }
  std::map<std::string, double> seconds_;
  std::map<std::string, double> bytes_per_second_;
};

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  using namespace fusebox;
  benchmark::RegisterBenchmark("BM_Copy", BM_Copy)->Arg(1 << 26)->UseRealTime()->Unit(benchmark::kMillisecond);
  for (int ops : {5, 10}) {
    for (bool fused : {true, false}) {
      std::string name = "BM_Chain/chain" + std::to_string(ops) + (fused ? "_fused" : "_unfused");
      benchmark::RegisterBenchmark(name.c_str(), [ops, fused](benchmark::State& s) { BM_Chain(s, ops, fused); })
          ->Arg(1 << 26)
          ->Arg(1 << 16)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond);
    }
  }
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.Summarize();
  benchmark::Shutdown();
  return 0;
}
