// Element-wise fusion on the CPU, measured in one process (docs/benchmarks.md has the figures):
//
//   copy        STREAM-style copy on all cores into already-touched memory: the machine's
//               practical bandwidth ceiling (plain stores, as a compiled loop does)
//   copy_nt     the same copy with non-temporal (streaming) stores of whole cache lines, which
//               skip reading the destination into the cache; generated region code writes large
//               outputs this way, so this is the stricter ceiling to compare fused chains with
//   chain5      relu(x*a+b)*0.5 + tanh(x)            (x, a, b inputs of n f32)
//   chain10     a*sigmoid(relu(tanh(x*a+b)*0.5+x)^2 - b)
//   each fused (one elementwise_region) and unfused (every op alone through the same generated,
//   vectorised, multi-threaded code as a one-op region), at n = 2^26 and 2^16; the fused chain
//   also on the tile interpreter (what code generation adds)
//
// BM_Interleaved times fused, unfused and both copies in turn within every iteration and reports
// medians: its ratios compare runs that saw the same machine state (the summary's first block).
// The other cases run 5 repetitions each (medians in the second block). Effective bandwidth =
// ideal bytes (inputs read once + output written once) / time. Output buffers come from the
// executable's pool, reused across iterations. BM_CompileAndFirstRun measures compile time.
#include <benchmark/benchmark.h>
#include <omp.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>

#include "bench_util.h"
#include "fusebox/session.h"

namespace fusebox {
namespace {

using bench::copy_plain;
using bench::filled;
using bench::median;

Graph chain(int ops, double half_value = 0.5) {
  GraphBuilder b("chain" + std::to_string(ops));
  Shape n{Dim::symbol("N")};
  ValueId x = b.input("x", DType::F32, n), a = b.input("a", DType::F32, n), c = b.input("b", DType::F32, n);
  ValueId half = b.scalar(DType::F32, half_value);
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

struct ChainCase {
  Executable exe;
  NamedArrays inputs;
};

ChainCase make_case(int ops, int64_t n, bool fused, cpu::Codegen executor) {
  CompileOptions o;
  o.cpu.codegen = executor;
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

#if defined(__x86_64__)
// Streaming stores of whole cache lines (AVX-512), or of halves (AVX), as the generated region
// code writes large outputs. n is a multiple of 16; arrays are 64-byte aligned.
__attribute__((target("avx512f"))) void copy_streaming_avx512(const float* s, float* d, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 16) _mm512_stream_ps(d + i, _mm512_load_ps(s + i));
  _mm_sfence();
}
__attribute__((target("avx"))) void copy_streaming_avx(const float* s, float* d, int64_t n) {
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += 8) _mm256_stream_ps(d + i, _mm256_load_ps(s + i));
  _mm_sfence();
}
#endif

void copy_streaming(const float* s, float* d, int64_t n) {
#if defined(__x86_64__)
  static const bool avx512 = __builtin_cpu_supports("avx512f"), avx = __builtin_cpu_supports("avx");
  if (avx512) return copy_streaming_avx512(s, d, n);
  if (avx) return copy_streaming_avx(s, d, n);
#endif
  copy_plain(s, d, n);
}

void BM_Copy(benchmark::State& state, bool streaming) {
  const int64_t n = state.range(0);
  Array src = filled(n, 1.0f), dst = filled(n, 0.0f);  // both touched before timing
  for (auto _ : state) {
    (streaming ? copy_streaming : copy_plain)(src.data<float>(), dst.data<float>(), n);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * n * 8);  // read + write
}

// The machine's CPU time so far, total and stolen by the hypervisor (/proc/stat's first line,
// in clock ticks; zeros where there is none). A guest whose vCPUs wait for the host runs
// compute-bound code slower while memory-bound code may not notice.
struct CpuTicks {
  double total = 0, steal = 0;
};
CpuTicks cpu_ticks() {
  std::ifstream in("/proc/stat");
  std::string cpu;
  CpuTicks t;
  double field = 0;
  in >> cpu;
  for (int k = 0; k < 8 && in >> field; ++k) {
    t.total += field;
    if (k == 7) t.steal = field;
  }
  return t;
}

// Fused, unfused and both copies timed in turn within each iteration (the order rotates), so
// that every ratio compares runs that saw the same machine state; the counters are medians
// over the iterations. On a shared machine whose bandwidth drifts by 1.5x from minute to minute,
// this is the figure to read.
void BM_Interleaved(benchmark::State& state, int ops) {
  const int64_t n = state.range(0);
  ChainCase fused = make_case(ops, n, true, cpu::Codegen::Auto);
  ChainCase unfused = make_case(ops, n, false, cpu::Codegen::Auto);
  Array src = filled(n, 1.0f), dst = filled(n, 0.0f);
  for (int i = 0; i < 2; ++i) {
    benchmark::DoNotOptimize(fused.exe.run(fused.inputs));
    benchmark::DoNotOptimize(unfused.exe.run(unfused.inputs));
  }
  // Ratios per iteration (each from four back-to-back runs), then their medians: a memory-mode
  // switch in the middle of the iterations cannot pair a fused time of one mode with a copy
  // time of the other.
  std::vector<double> t_fused, t_unfused, t_copy, t_copy_nt, speedup, of_copy, of_copy_nt;
  int round = 0;
  const CpuTicks ticks_before = cpu_ticks();
  for (auto _ : state) {
    double t[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; ++k) {
      const int which = (k + round) % 4;
      auto start = std::chrono::steady_clock::now();
      if (which < 2) {
        ChainCase& c = which == 0 ? fused : unfused;
        Expected<std::vector<Array>> out = c.exe.run(c.inputs);
        if (!out) {
          state.SkipWithError(out.status().message().c_str());
          return;
        }
        benchmark::DoNotOptimize(out);
      }
      if (which == 2) copy_plain(src.data<float>(), dst.data<float>(), n);
      if (which == 3) copy_streaming(src.data<float>(), dst.data<float>(), n);
      benchmark::ClobberMemory();
      t[which] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    ++round;
    t_fused.push_back(t[0]);
    t_unfused.push_back(t[1]);
    t_copy.push_back(t[2]);
    t_copy_nt.push_back(t[3]);
    speedup.push_back(t[1] / t[0]);
    of_copy.push_back(2 * t[2] / t[0]);  // (16 n / fused time) / (8 n / copy time)
    of_copy_nt.push_back(2 * t[3] / t[0]);
    state.SetIterationTime(t[0] + t[1] + t[2] + t[3]);
  }
  const double fused_bw = double(n) * 16 / median(t_fused);
  state.counters["fused_ms"] = median(t_fused) * 1e3;
  state.counters["unfused_ms"] = median(t_unfused) * 1e3;
  state.counters["speedup"] = median(speedup);
  state.counters["of_copy"] = median(of_copy);
  state.counters["of_copy_nt"] = median(of_copy_nt);
  state.counters["fused_GBps"] = fused_bw / 1e9;
  state.counters["copy_GBps"] = double(n) * 8 / median(t_copy) / 1e9;
  state.counters["copy_nt_GBps"] = double(n) * 8 / median(t_copy_nt) / 1e9;
  const CpuTicks ticks_after = cpu_ticks();
  const double ticks = ticks_after.total - ticks_before.total;
  state.counters["steal_pct"] = ticks > 0 ? 100 * (ticks_after.steal - ticks_before.steal) / ticks : 0;
}

void BM_Chain(benchmark::State& state, int ops, bool fused, cpu::Codegen executor) {
  const int64_t n = state.range(0);
  ChainCase c = make_case(ops, n, fused, executor);
  for (int i = 0; i < 2; ++i) benchmark::DoNotOptimize(c.exe.run(c.inputs));  // warm the pool
  for (auto _ : state) {
    Expected<std::vector<Array>> out = c.exe.run(c.inputs);
    if (!out) state.SkipWithError(out.status().message().c_str());
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * n * 16);  // ideal: 3 inputs + 1 output
  state.counters["kernels"] = double(c.exe.report().kernels_after);
}

// Compile time as a user sees it: Session::compile and the first run of a chain on 64 elements,
// with generated code (a new constant each iteration, so every iteration generates code: no
// structural cache hit) or with the interpreter.
void BM_CompileAndFirstRun(benchmark::State& state, int ops, cpu::Codegen executor) {
  NamedArrays small = {{"x", filled(64, 2.0f)}, {"a", filled(64, 1.5f)}, {"b", filled(64, 0.5f)}};
  double half = 0.5;
  for (auto _ : state) {
    half += 1.0 / 1024;
    CompileOptions o;
    o.cpu.codegen = executor;
    Expected<Executable> exe = Session().compile(chain(ops, half), o);
    if (!exe) {
      state.SkipWithError(exe.status().message().c_str());
      break;
    }
    Expected<std::vector<Array>> out = exe->run(small);
    if (!out) state.SkipWithError(out.status().message().c_str());
    benchmark::DoNotOptimize(out);
  }
}

// Keeps each run's time so the ratios can be printed after all runs.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  // Keeps the median of each case's repetitions (or its one run without repetitions).
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& r : runs) {
      const bool median = r.run_type == Run::RT_Aggregate && r.aggregate_name == "median";
      if (r.run_type == Run::RT_Aggregate && !median) continue;
      if (r.run_type == Run::RT_Iteration && r.repetitions > 1) continue;
      const std::string name = r.run_name.str();
      seconds_[name] = r.GetAdjustedRealTime() * unit_seconds(r.time_unit);
      bytes_per_second_[name] = r.counters.count("bytes_per_second") ? double(r.counters.at("bytes_per_second")) : 0.0;
      if (name.rfind("BM_Interleaved/", 0) == 0) {
        for (const auto& [key, counter] : r.counters) interleaved_[name][key] = double(counter);
      }
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Summarize() const {
    std::printf("\nsummary (threads: %d)\n", omp_get_max_threads());
    std::printf("interleaved (fused/unfused/copies alternate; medians of per-iteration times and ratios):\n");
    for (const char* chain : {"chain5", "chain10"}) {
      for (const char* n : {"67108864", "65536"}) {
        auto it = std::find_if(interleaved_.begin(), interleaved_.end(), [&](const auto& e) {
          return e.first.rfind(std::string("BM_Interleaved/") + chain + "/" + n + "/", 0) == 0;
        });
        if (it == interleaved_.end()) continue;
        auto at = [&](const char* k) { return it->second.count(k) ? it->second.at(k) : 0.0; };
        std::printf("  %-7s n=%-9s fused %8.3f ms  unfused %8.3f ms  speed-up %.2fx  fused %.1f GB/s = %.2f of copy "
                    "(%.1f GB/s), %.2f of streaming copy (%.1f GB/s); CPU time stolen by the host %.1f%%\n",
                    chain, n, at("fused_ms"), at("unfused_ms"), at("speedup"), at("fused_GBps"), at("of_copy"),
                    at("copy_GBps"), at("of_copy_nt"), at("copy_nt_GBps"), at("steal_pct"));
      }
    }
    std::printf("separate runs (medians of 5 repetitions each):\n");
    double copy = find_bw("BM_Copy/"), copy_nt = find_bw("BM_CopyNt/");
    std::printf("  copy bandwidth            %.1f GB/s (streaming stores: %.1f GB/s)\n", copy / 1e9, copy_nt / 1e9);
    for (const char* chain : {"chain5", "chain10"}) {
      for (const char* n : {"67108864", "65536"}) {
        double fused = find_time(std::string("BM_Chain/") + chain + "_fused/" + n);
        double unfused = find_time(std::string("BM_Chain/") + chain + "_unfused/" + n);
        double bw = find_bw(std::string("BM_Chain/") + chain + "_fused/" + n);
        double interpreted = find_time(std::string("BM_Chain/") + chain + "_fused_interpreted/" + n);
        if (fused <= 0 || unfused <= 0) continue;
        std::printf("  %-7s n=%-9s fused %8.3f ms  unfused %8.3f ms  speed-up %.2fx  fused %.1f GB/s = %.2f of copy, "
                    "%.2f of streaming copy\n",
                    chain, n, fused * 1e3, unfused * 1e3, unfused / fused, bw / 1e9, copy > 0 ? bw / copy : 0.0,
                    copy_nt > 0 ? bw / copy_nt : 0.0);
        if (interpreted > 0) {
          std::printf("  %-7s n=%-9s fused on the tile interpreter %8.3f ms (generated code is %.2fx faster)\n", chain, n,
                      interpreted * 1e3, interpreted / fused);
        }
      }
    }
  }

 private:
  double find_time(const std::string& prefix) const { return find(seconds_, prefix); }
  double find_bw(const std::string& prefix) const { return find(bytes_per_second_, prefix); }
  static double unit_seconds(benchmark::TimeUnit u) {
    switch (u) {
      case benchmark::kNanosecond: return 1e-9;
      case benchmark::kMicrosecond: return 1e-6;
      case benchmark::kMillisecond: return 1e-3;
      default: return 1.0;
    }
  }
  static double find(const std::map<std::string, double>& m, const std::string& prefix) {
    for (const auto& [name, v] : m)
      if (name.rfind(prefix, 0) == 0) return v;
    return 0;
  }
  std::map<std::string, double> seconds_;
  std::map<std::string, double> bytes_per_second_;
  std::map<std::string, std::map<std::string, double>> interleaved_;
};

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  using namespace fusebox;
  constexpr int kRepetitions = 5;
  benchmark::RegisterBenchmark("BM_Copy", [](benchmark::State& s) { BM_Copy(s, false); })
      ->Arg(1 << 26)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
  benchmark::RegisterBenchmark("BM_CopyNt", [](benchmark::State& s) { BM_Copy(s, true); })
      ->Arg(1 << 26)->UseRealTime()->Unit(benchmark::kMillisecond)->Repetitions(kRepetitions);
  for (int ops : {5, 10}) {
    std::string name = "BM_Interleaved/chain" + std::to_string(ops);
    benchmark::RegisterBenchmark(name.c_str(), [ops](benchmark::State& s) { BM_Interleaved(s, ops); })
        ->Arg(1 << 26)->Iterations(15)->UseManualTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(name.c_str(), [ops](benchmark::State& s) { BM_Interleaved(s, ops); })
        ->Arg(1 << 16)->Iterations(3000)->UseManualTime()->Unit(benchmark::kMillisecond);
  }
  // fused and unfused on the default CPU executor (generated code); fused_interpreted: the same
  // region on the tile interpreter, to show what code generation adds.
  struct Variant {
    const char* name;
    bool fused;
    cpu::Codegen executor;
  };
  for (int ops : {5, 10}) {
    for (Variant v : {Variant{"_fused", true, cpu::Codegen::Auto}, Variant{"_unfused", false, cpu::Codegen::Auto},
                      Variant{"_fused_interpreted", true, cpu::Codegen::Interpreter}}) {
      std::string name = "BM_Chain/chain" + std::to_string(ops) + v.name;
      benchmark::RegisterBenchmark(name.c_str(), [ops, v](benchmark::State& s) { BM_Chain(s, ops, v.fused, v.executor); })
          ->Arg(1 << 26)
          ->Arg(1 << 16)
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->Repetitions(kRepetitions);
    }
  }
  for (int ops : {5, 10}) {
    for (cpu::Codegen ex : {cpu::Codegen::Jit, cpu::Codegen::Interpreter}) {
      std::string name = "BM_CompileAndFirstRun/chain" + std::to_string(ops) +
                         (ex == cpu::Codegen::Jit ? "_generated" : "_interpreted");
      benchmark::RegisterBenchmark(name.c_str(), [ops, ex](benchmark::State& s) { BM_CompileAndFirstRun(s, ops, ex); })
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
