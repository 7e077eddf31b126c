// Transformer row workloads on the CPU at [8192, 4096] f32, measured in one process
// (docs/benchmarks.md, "Transformer rows"; bench/peers/torch_rows.py times PyTorch on the same):
//
//   bias_gelu     gelu_tanh(x + b[4096])              fused: one elementwise_region
//   residual_rms  rms_norm(x + r, g)                  fused: fused_residual_rms_norm
//   residual_ln   layer_norm(x + r, g, h)             fused: fused_residual_layer_norm
//   softmax       softmax(x) over rows                one row kernel either way
//   softmax_temp  exp((x - max) * 0.5) / sum(...)     fused: one reduction_region (a softmax
//                 with a temperature, which recognition does not name); unfused: seven ops
//
// Unfused: the same graph compiled with fusion off (every op alone, on the same kernels: the
// element-wise ops as one-op regions, the norms on the row kernels). Each iteration times fused,
// unfused and a STREAM-style copy of one [8192, 4096] tensor in turn (the order rotates), and the
// counters are medians, so the ratios compare runs that saw the same machine state. Effective
// bandwidth = ideal bytes (each input read once, each output written once; the [4096] vectors
// are negligible) / time; of_copy = effective bandwidth / copy bandwidth.
//
// BM_RowLoops/<isa>/<op>: one thread running the row loops of one ISA (generic, AVX2, AVX-512,
// those the processor has) over 32 rows of 4096 that stay in cache: the compute each ISA costs,
// as time per element (what decides whether the AVX-512 variant earns its place).
// BM_ReductionLoops/<isa>[_generated]/softmax_temp: the same for the reduction kernel running
// softmax_temp written out as one reduction_region (the max pass, the sum pass, the write pass),
// its row steps on the tile loops of <isa> or as generated code (the accumulations on <isa>).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "backends/cpu/reduction_kernel.h"
#include "backends/cpu/row_kernels.h"
#include "backends/host_backend.h"
#include "bench_util.h"
#include "fusebox/session.h"
#include "ir/parser.h"

namespace fusebox {
namespace {

constexpr int64_t kRows = 8192, kCols = 4096;

struct Workload {
  const char* name;
  const char* text;
  std::vector<const char*> full_inputs;    // [rows, cols]
  std::vector<const char*> vector_inputs;  // [cols]
  int tensors_moved;                       // full-size inputs read + outputs written
};

const Workload kWorkloads[] = {
    {"bias_gelu", R"(
func @bias_gelu(%x: f32[N,D], %b: f32[D]) -> f32[N,D] {
  %0 = add %x, %b : f32[N,D]
  %y = gelu %0 {approximate = "tanh"} : f32[N,D]
  return %y
})", {"x"}, {"b"}, 2},
    {"residual_rms", R"(
func @residual_rms(%x: f32[N,D], %r: f32[N,D], %g: f32[D]) -> f32[N,D] {
  %s = add %x, %r : f32[N,D]
  %y = rms_norm %s, %g : f32[N,D]
  return %y
})", {"x", "r"}, {"g"}, 3},
    {"residual_ln", R"(
func @residual_ln(%x: f32[N,D], %r: f32[N,D], %g: f32[D], %h: f32[D]) -> f32[N,D] {
  %s = add %x, %r : f32[N,D]
  %y = layer_norm %s, %g, %h : f32[N,D]
  return %y
})", {"x", "r"}, {"g", "h"}, 3},
    {"softmax", R"(
func @softmax(%x: f32[N,D]) -> f32[N,D] {
  %y = softmax %x : f32[N,D]
  return %y
})", {"x"}, {}, 2},
    {"softmax_temp", R"(
func @softmax_temp(%x: f32[N,D]) -> f32[N,D] {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %x, %m : f32[N,D]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %t = mul %d, %half : f32[N,D]
  %e = exp %t : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %y = div %e, %s : f32[N,D]
  return %y
})", {"x"}, {}, 2},
};

Executable compile(const Workload& w, bool fused) {
  Expected<Graph> g = parse_graph(w.text);
  if (!g) {
    std::fprintf(stderr, "%s: %s\n", w.name, g.status().to_string().c_str());
    std::abort();
  }
  CompileOptions o;
  o.fuse = fused;
  Expected<Executable> exe = Session().compile(*g, o);
  if (!exe) {
    std::fprintf(stderr, "%s: %s\n", w.name, exe.status().to_string().c_str());
    std::abort();
  }
  return std::move(*exe);
}

std::map<std::string, std::map<std::string, double>>& results() {
  static std::map<std::string, std::map<std::string, double>> r;
  return r;
}

void BM_Rows(benchmark::State& state, const Workload& w) {
  Executable fused = compile(w, true), unfused = compile(w, false);
  NamedArrays in;
  float scale = 2.0f;
  for (const char* name : w.full_inputs) in[name] = bench::filled({kRows, kCols}, scale *= 0.75f);
  for (const char* name : w.vector_inputs) in[name] = bench::filled({kCols}, scale *= 0.75f);
  Array src = bench::filled({kRows, kCols}, 1.0f), dst = bench::filled({kRows, kCols}, 0.0f);
  for (int i = 0; i < 2; ++i) {  // warm the pools
    benchmark::DoNotOptimize(fused.run(in));
    benchmark::DoNotOptimize(unfused.run(in));
  }
  std::vector<double> t_fused, t_unfused, t_copy, speedup, of_copy;
  int round = 0;
  for (auto _ : state) {
    double t[3] = {0, 0, 0};
    for (int k = 0; k < 3; ++k) {
      const int which = (k + round) % 3;
      auto start = std::chrono::steady_clock::now();
      if (which < 2) {
        Expected<std::vector<Array>> out = (which == 0 ? fused : unfused).run(in);
        if (!out) {
          state.SkipWithError(out.status().message().c_str());
          return;
        }
        benchmark::DoNotOptimize(out);
      } else {
        bench::copy_plain(src.data<float>(), dst.data<float>(), kRows * kCols);
      }
      benchmark::ClobberMemory();
      t[which] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    ++round;
    t_fused.push_back(t[0]);
    t_unfused.push_back(t[1]);
    t_copy.push_back(t[2]);
    speedup.push_back(t[1] / t[0]);
    // (moved · S / fused time) / (2 · S / copy time), S the bytes of one tensor
    of_copy.push_back(w.tensors_moved * t[2] / (2 * t[0]));
    state.SetIterationTime(t[0]);
  }
  const double tensor_bytes = double(kRows * kCols * 4);
  auto& r = results()[w.name];
  r["fused_ms"] = bench::median(t_fused) * 1e3;
  r["unfused_ms"] = bench::median(t_unfused) * 1e3;
  r["speedup"] = bench::median(speedup);
  r["fused_GBps"] = w.tensors_moved * tensor_bytes / bench::median(t_fused) / 1e9;
  r["copy_GBps"] = 2 * tensor_bytes / bench::median(t_copy) / 1e9;
  r["of_copy"] = bench::median(of_copy);
  r["kernels_fused"] = double(fused.report().kernels_after);
  r["kernels_unfused"] = double(unfused.report().kernels_after);
  for (const auto& [key, value] : r) state.counters[key] = value;
}

void BM_RowLoops(benchmark::State& state, cpu::RowIsa isa, int op) {
  if (!cpu::row_isa_available(isa)) {
    state.SkipWithError("the processor lacks this ISA");
    return;
  }
  constexpr int64_t rows = 32, n = 4096;
  Array x = bench::filled({rows, n}, 2.0f), r = bench::filled({rows, n}, 1.0f), y = bench::filled({rows, n}, 0.0f);
  Array g = bench::filled({n}, 1.5f), h = bench::filled({n}, 0.5f);
  const cpu::RowLoops& loops = cpu::row_loops(isa);
  cpu::NormRows a;
  a.x = x.data<float>();
  a.r = r.data<float>();
  a.scale = g.data<float>();
  a.shift = op == 1 ? h.data<float>() : nullptr;
  a.y = y.data<float>();
  a.rows = rows;
  a.n = n;
  a.eps = 1e-5;
  a.rms = op == 2;
  for (auto _ : state) {
    for (int64_t i = 0; i < rows; ++i) {
      if (op == 0) loops.softmax_row(x.data<float>() + i * n, y.data<float>() + i * n, n, false);
      else loops.norm_row(a, i);
    }
    benchmark::ClobberMemory();
  }
  state.counters["time_per_element"] =
      benchmark::Counter(double(rows * n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

constexpr const char* kSoftmaxTempRegion = R"(
func @softmax_temp_region(%x: f32[N,D]) -> f32[N,D] {
  %y = reduction_region %x {name = "softmax_temp", row_axes = 1} : f32[N,D] (%a: f32[N,D]) {
    %m = reduce_max %a {axes = [-1], keepdims = true} : f32[N,1]
    %d = sub %a, %m : f32[N,D]
    %half = constant {value = dense<f32[]: [0.5]>} : f32[]
    %t = mul %d, %half : f32[N,D]
    %e = exp %t : f32[N,D]
    %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
    %z = div %e, %s : f32[N,D]
    return %z
  }
  return %y
})";

void BM_ReductionLoops(benchmark::State& state, cpu::RowIsa isa, cpu::Codegen codegen) {
  if (!cpu::row_isa_available(isa)) {
    state.SkipWithError("the processor lacks this ISA");
    return;
  }
  Expected<Graph> g = parse_graph(kSoftmaxTempRegion);
  if (!g) {
    state.SkipWithError(g.status().message().c_str());
    return;
  }
  if (codegen == cpu::Codegen::Jit && !cpu::jit_built()) {
    state.SkipWithError("this build has no LLVM: no generated code");
    return;
  }
  std::shared_ptr<const Kernel> kernel = cpu::make_reduction_kernel(*g, g->nodes().back(), isa, codegen);
  constexpr int64_t rows = 32, n = 4096;
  Array x = bench::filled({rows, n}, 2.0f), y = bench::filled({rows, n}, 0.0f);
  BufferView in[] = {host_view(x)}, out[] = {host_view(y)};
  InlineStream stream(kHostDevice);
  const int threads = omp_get_max_threads();
  omp_set_num_threads(1);
  for (auto _ : state) {
    Status st = kernel->run(stream, in, out);
    if (!st.is_ok()) {
      state.SkipWithError(st.message().c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  omp_set_num_threads(threads);
  state.counters["time_per_element"] =
      benchmark::Counter(double(rows * n), benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  using namespace fusebox;
  for (const Workload& w : kWorkloads) {
    benchmark::RegisterBenchmark((std::string("BM_Rows/") + w.name).c_str(), [&w](benchmark::State& s) { BM_Rows(s, w); })
        ->Iterations(12)
        ->UseManualTime()
        ->Unit(benchmark::kMillisecond);
  }
  const char* ops[] = {"softmax", "residual_ln", "residual_rms"};
  for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx2, cpu::RowIsa::Avx512}) {
    for (int op = 0; op < 3; ++op) {
      std::string name = "BM_RowLoops/" + std::string(cpu::row_isa_name(isa)) + "/" + ops[op];
      benchmark::RegisterBenchmark(name.c_str(), [isa, op](benchmark::State& s) { BM_RowLoops(s, isa, op); })
          ->Unit(benchmark::kMicrosecond)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true);
    }
  }
  for (cpu::Codegen codegen : {cpu::Codegen::Interpreter, cpu::Codegen::Jit}) {
    for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx2, cpu::RowIsa::Avx512}) {
      std::string name = "BM_ReductionLoops/" + std::string(cpu::row_isa_name(isa)) +
                         (codegen == cpu::Codegen::Jit ? "_generated" : "") + "/softmax_temp";
      benchmark::RegisterBenchmark(
          name.c_str(), [isa, codegen](benchmark::State& s) { BM_ReductionLoops(s, isa, codegen); })
          ->Unit(benchmark::kMicrosecond)
          ->Repetitions(5)
          ->ReportAggregatesOnly(true);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::printf("\nsummary [%lld, %lld] f32 (threads: %d; medians of per-iteration times and ratios)\n",
              static_cast<long long>(kRows), static_cast<long long>(kCols), omp_get_max_threads());
  for (const auto& [name, r] : results()) {
    auto at = [&](const char* k) { return r.count(k) ? r.at(k) : 0.0; };
    std::printf("  %-13s fused %8.2f ms (%.0f kernels)  unfused %8.2f ms (%.0f kernels)  speed-up %.2fx  "
                "fused %5.1f GB/s = %.2f of copy (%.1f GB/s)\n",
                name.c_str(), at("fused_ms"), at("kernels_fused"), at("unfused_ms"), at("kernels_unfused"),
                at("speedup"), at("fused_GBps"), at("of_copy"), at("copy_GBps"));
  }
  benchmark::Shutdown();
  return 0;
}
