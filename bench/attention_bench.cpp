// Attention on the CPU (8 heads of 64, batch 1, sequence T = 128, 512, 2048), in one process:
//
//   fused     the demo's attention graph (head split by reshape/transpose, q·kᵀ, scale, softmax,
//             ·v, head merge) compiled for the cpu backend: one fused_attention kernel
//   unfused   the same graph with fusion off (skip_fusion): matmul, scale, softmax, matmul and
//             the transposes, one kernel each, the [8,T,T] scores through memory
//   matmuls   the two products alone as bare oneDNN matmuls of the same sizes, on operands
//             already in head-split layout: q·kᵀ [8,T,64]x[8,64,T] and p·v [8,T,T]x[8,T,64]
//
// timed in turn within each iteration (the order rotates; medians reported), so each ratio
// compares runs that saw the same machine state. Counters: *_ms (wall clock), *_cpu_ms (process
// CPU time), fused_over_matmuls and fused_over_matmuls_cpu (goal at T = 2048: <= 1.5),
// unfused_over_fused. Also BM_AttentionIsa/<isa>/<T>: the fused kernel on
// each instruction set this processor runs. PyTorch's figures come from
// bench/peers/torch_attention.py (docs/benchmarks.md, "Attention").
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <functional>
#include <string>
#include <vector>

#include "backends/cpu/attention_kernel.h"
#include "backends/cpu/onednn/onednn_kernels.h"
#include "fusebox/session.h"
#include "ir/parser.h"

namespace fusebox {
namespace {

constexpr int64_t kHeads = 8, kHeadDim = 64, kModel = kHeads * kHeadDim;

std::string attention_text(int64_t t) {
  std::string text = R"(
func @attention(%q: f32[1,T,512], %k: f32[1,T,512], %v: f32[1,T,512]) -> f32[1,T,512] {
  %0 = reshape %q {shape = [1, T, 8, 64]} : f32[1,T,8,64]
  %1 = transpose %0 {perm = [0, 2, 1, 3]} : f32[1,8,T,64]
  %2 = reshape %k {shape = [1, T, 8, 64]} : f32[1,T,8,64]
  %3 = transpose %2 {perm = [0, 2, 3, 1]} : f32[1,8,64,T]
  %4 = reshape %v {shape = [1, T, 8, 64]} : f32[1,T,8,64]
  %5 = transpose %4 {perm = [0, 2, 1, 3]} : f32[1,8,T,64]
  %6 = matmul %1, %3 : f32[1,8,T,T]
  %7 = constant {value = dense<f32[]: [0.125]>} : f32[]
  %8 = mul %6, %7 : f32[1,8,T,T]
  %9 = softmax %8 {axis = -1} : f32[1,8,T,T]
  %10 = matmul %9, %5 : f32[1,8,T,64]
  %11 = transpose %10 {perm = [0, 2, 1, 3]} : f32[1,T,8,64]
  %y = reshape %11 {shape = [1, T, 512]} : f32[1,T,512]
  return %y
})";
  const std::string n = std::to_string(t);
  for (size_t at = text.find('T'); at != std::string::npos; at = text.find('T', at + n.size())) {
    text.replace(at, 1, n);
  }
  return text;
}

Array filled(std::vector<int64_t> shape, uint32_t seed) {
  Array a(DType::F32, std::move(shape));
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i) p[i] = float(((uint32_t(i) + seed) * 2654435761u) % 2001) / 1000.0f - 1.0f;
  return a;
}

Executable compile(int64_t t, bool fused) {
  Expected<Graph> g = parse_graph(attention_text(t));
  if (!g) {
    std::fprintf(stderr, "attention_bench: %s\n", g.status().to_string().c_str());
    std::abort();
  }
  CompileOptions o;
  FusionOptions f = FusionOptions::for_cpu();
  f.skip_fusion = !fused;
  o.fusion = f;
  Expected<Executable> exe = Session().compile(*g, o);
  if (!exe) {
    std::fprintf(stderr, "attention_bench: %s\n", exe.status().to_string().c_str());
    std::abort();
  }
  return std::move(*exe);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// Wall-clock and process CPU seconds of one call. On a machine shared with other work the CPU
// time is the steadier figure of a compute-bound kernel: the wall clock also counts the time its
// threads wait to be scheduled.
struct Took {
  double wall, cpu;
};
double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}
Took seconds(const std::function<void()>& f) {
  auto t0 = std::chrono::steady_clock::now();
  double c0 = cpu_now();
  f();
  double c1 = cpu_now();
  return {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), c1 - c0};
}

void check(const Status& s) {
  if (s.is_ok()) return;
  std::fprintf(stderr, "attention_bench: %s\n", s.to_string().c_str());
  std::abort();
}

void BM_Attention(benchmark::State& state) {
  const int64_t t = state.range(0);
  Executable fused = compile(t, true), unfused = compile(t, false);
  NamedArrays in{{"q", filled({1, t, kModel}, 1)}, {"k", filled({1, t, kModel}, 2)}, {"v", filled({1, t, kModel}, 3)}};
  // The bare products on head-split operands.
  Array qh = filled({kHeads, t, kHeadDim}, 4), kt = filled({kHeads, kHeadDim, t}, 5), vh = filled({kHeads, t, kHeadDim}, 6);
  Array scores(DType::F32, {kHeads, t, t}), out(DType::F32, {kHeads, t, kHeadDim});
  Expected<std::unique_ptr<cpu::onednn::MatmulKernel>> mm = cpu::onednn::MatmulKernel::create({});
  auto matmuls = [&] {
    if (!mm) return;
    check((*mm)->run(qh, kt, nullptr, nullptr, scores));
    check((*mm)->run(scores, vh, nullptr, nullptr, out));
  };
  auto run_fused = [&] { check(fused.run(in).status()); };
  auto run_unfused = [&] { check(unfused.run(in).status()); };
  run_fused(), run_unfused(), matmuls();  // warm: primitives built, buffers pooled
  std::vector<double> f, u, m, fc, uc, mc;
  int turn = 0;
  for (auto _ : state) {
    const std::function<void()> order[3] = {run_fused, run_unfused, matmuls};
    Took took[3];
    for (int i = 0; i < 3; ++i) took[(i + turn) % 3] = seconds(order[(i + turn) % 3]);
    ++turn;
    f.push_back(took[0].wall), u.push_back(took[1].wall), m.push_back(took[2].wall);
    fc.push_back(took[0].cpu), uc.push_back(took[1].cpu), mc.push_back(took[2].cpu);
  }
  const double fm = median(f), um = median(u), mm_s = median(m);
  state.counters["fused_ms"] = fm * 1e3;
  state.counters["unfused_ms"] = um * 1e3;
  state.counters["matmuls_ms"] = mm_s * 1e3;
  state.counters["fused_over_matmuls"] = mm_s > 0 ? fm / mm_s : 0;
  state.counters["unfused_over_fused"] = fm > 0 ? um / fm : 0;
  const double fcm = median(fc), ucm = median(uc), mcm = median(mc);
  state.counters["fused_cpu_ms"] = fcm * 1e3;
  state.counters["unfused_cpu_ms"] = ucm * 1e3;
  state.counters["matmuls_cpu_ms"] = mcm * 1e3;
  state.counters["fused_over_matmuls_cpu"] = mcm > 0 ? fcm / mcm : 0;
  state.SetLabel(mm ? "" : "no oneDNN: matmuls not timed");
}
BENCHMARK(BM_Attention)->Arg(128)->Arg(512)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime()->MinTime(4.0);

void BM_AttentionIsa(benchmark::State& state, cpu::AttentionIsa isa) {
  const int64_t t = state.range(0);
  Node n{Op::FusedAttention, {}, {}, {}, nullptr, {}};
  n.attrs.set("heads", kHeads);
  n.attrs.set("head_dim", kHeadDim);
  n.attrs.set("scale", 0.125);
  std::vector<Array> in{filled({1, t, kModel}, 1), filled({1, t, kModel}, 2), filled({1, t, kModel}, 3)};
  Array out(DType::F32, {1, t, kModel});
  for (auto _ : state) check(cpu::run_attention(n, in, out, isa));
}

void register_isas() {
  for (cpu::AttentionIsa isa : cpu::attention_isas()) {
    std::string name = std::string("BM_AttentionIsa/") + cpu::attention_isa_name(isa);
    benchmark::RegisterBenchmark(name.c_str(), BM_AttentionIsa, isa)
        ->Arg(512)
        ->Arg(2048)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  fusebox::register_isas();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
