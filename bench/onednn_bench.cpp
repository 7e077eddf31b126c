// The oneDNN kernels (src/backends/cpu/onednn) against the bare oneDNN primitive, in one process:
//
//   BM_MatmulEpilogue  2048x2048x2048 f32 matmul + bias + GELU(tanh)
//   BM_ConvEpilogue    3x3 conv 64->64, pad 1, on 1x64x112x112 + bias + hardswish (a BN folded
//                      into weights and bias costs the same); /nchw: activations NCHW, /nchw8c
//                      (or 16c, the host's block): already blocked, as the cpu backend keeps them
// each timed per iteration in turn (order rotating; medians reported) as
//   bare      the oneDNN primitive created here, no post-ops, no bias, operands already in its
//             preferred formats (no reorders): the floor
//   noep      the fusebox kernel without epilogue (for NCHW activations the conv layout reorders
//             are in it)
//   fused     the fusebox kernel with the fused epilogue
//   separate  noep followed by a plain OpenMP loop for bias + activation (what no fusion costs)
// Counters: *_ms medians, fused_over_bare, fused_over_noep (the epilogue's own cost), and
// separate_over_fused. The goal: fused_over_noep < 1.05.
//
//   BM_ConvLayout/<case>/<plain|blocked>   ConvKernel (bias, constant weights) with its layout
//                      forced: the figures behind the layout rule in onednn/conv.cpp.
#include <benchmark/benchmark.h>

#ifndef FUSEBOX_HAVE_DNNL

#include <cstdio>

int main() {
  std::printf("onednn_bench: skipped, fusebox was built without oneDNN (libdnnl-dev)\n");
  return 0;
}

#else

#include <omp.h>
#include <oneapi/dnnl/dnnl.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox {
namespace {

namespace dn = cpu::onednn;
using dnnl::memory;

Array filled(std::vector<int64_t> shape, uint32_t seed) {
  Array a(DType::F32, std::move(shape));
  float* p = a.data<float>();
  const int64_t n = a.numel();
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i) p[i] = float(((uint32_t(i) + seed) * 2654435761u) % 2001) / 1000.0f - 1.0f;
  return a;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

const dnnl::engine& engine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// A primitive with its arguments bound, in its preferred formats, run by the benchmark.
struct Bare {
  dnnl::primitive prim;
  std::unordered_map<int, memory> args;
  void run() const {
    dnnl::stream s(engine());
    prim.execute(s, args);
    s.wait();
  }
};

Bare bare_matmul(int64_t m, int64_t k, int64_t n) {
  memory::desc a({m, k}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc b({k, n}, memory::data_type::f32, memory::format_tag::ab);
  memory::desc c({m, n}, memory::data_type::f32, memory::format_tag::ab);
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, b, c), engine());
  Bare r{dnnl::matmul(pd), {}};
  for (auto [arg, md] : {std::pair{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}}) {
    memory mem(md, engine());
    std::fill_n(static_cast<float*>(mem.get_data_handle()), md.get_size() / 4, 0.5f);
    r.args.emplace(arg, mem);
  }
  return r;
}

Bare bare_conv(int64_t n, int64_t c, int64_t h, int64_t w, int64_t o, int64_t k, int64_t pad) {
  auto any = memory::format_tag::any;
  memory::desc src({n, c, h, w}, memory::data_type::f32, any), wei({o, c, k, k}, memory::data_type::f32, any);
  memory::desc dst({n, o, h + 2 * pad - k + 1, w + 2 * pad - k + 1}, memory::data_type::f32, any);
  dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, wei,
                                    dst, {1, 1}, {pad, pad}, {pad, pad});
  dnnl::convolution_forward::primitive_desc pd(d, engine());
  Bare r{dnnl::convolution_forward(pd), {}};
  for (auto [arg, md] : {std::pair{DNNL_ARG_SRC, pd.src_desc()}, {DNNL_ARG_WEIGHTS, pd.weights_desc()},
                         {DNNL_ARG_DST, pd.dst_desc()}}) {
    memory mem(md, engine());
    std::fill_n(static_cast<float*>(mem.get_data_handle()), md.get_size() / 4, 0.5f);
    r.args.emplace(arg, mem);
  }
  return r;
}

// Times the four variants in turn per iteration and reports medians and ratios.
void interleave(benchmark::State& state, const std::vector<std::function<Status()>>& variants) {
  const char* names[] = {"bare", "noep", "fused", "separate"};
  for (int warm = 0; warm < 2; ++warm) {
    for (const auto& v : variants) {
      Status s = v();
      if (!s.is_ok()) {
        state.SkipWithError(s.to_string().c_str());
        return;
      }
    }
  }
  std::vector<std::vector<double>> t(4);
  std::vector<double> fused_bare, fused_noep, sep_fused;
  int round = 0;
  for (auto _ : state) {
    double it[4];
    for (int k = 0; k < 4; ++k) {
      int which = (k + round) % 4;
      auto start = std::chrono::steady_clock::now();
      Status s = variants[size_t(which)]();
      it[which] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!s.is_ok()) {
        state.SkipWithError(s.to_string().c_str());
        return;
      }
    }
    ++round;
    for (int k = 0; k < 4; ++k) t[size_t(k)].push_back(it[k]);
    fused_bare.push_back(it[2] / it[0]);
    fused_noep.push_back(it[2] / it[1]);
    sep_fused.push_back(it[3] / it[2]);
    state.SetIterationTime(it[0] + it[1] + it[2] + it[3]);
  }
  for (int k = 0; k < 4; ++k) state.counters[std::string(names[k]) + "_ms"] = median(t[size_t(k)]) * 1e3;
  state.counters["fused_over_bare"] = median(fused_bare);
  state.counters["fused_over_noep"] = median(fused_noep);
  state.counters["separate_over_fused"] = median(sep_fused);
}

float gelu_tanh(float x) {
  const float k = 0.7978845608028654f;
  return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
}

void BM_MatmulEpilogue(benchmark::State& state) {
  const int64_t m = 2048, k = 2048, n = 2048;
  Array a = filled({m, k}, 1), b = filled({k, n}, 2), bias = filled({n}, 3), out(DType::F32, {m, n});
  Bare bare = bare_matmul(m, k, n);
  auto noep = dn::MatmulKernel::create({DType::F32, {}});
  auto fused = dn::MatmulKernel::create({DType::F32, {true, false, dn::Act::GeluTanh}});
  if (!noep || !fused) return state.SkipWithError("MatmulKernel::create failed");
  auto epilogue = [&] {
    float* y = out.data<float>();
    const float* c = bias.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = gelu_tanh(y[i * n + j] + c[j]);
    }
  };
  interleave(state, {
                        [&] { bare.run(); return Status::ok(); },
                        [&] { return (*noep)->run(a, b, nullptr, nullptr, out); },
                        [&] { return (*fused)->run(a, b, &bias, nullptr, out); },
                        [&] {
                          Status s = (*noep)->run(a, b, nullptr, nullptr, out);
                          epilogue();
                          return s;
                        },
                    });
  state.counters["GFLOPs_fused"] = 2.0 * m * n * k / (state.counters["fused_ms"] * 1e-3) / 1e9;
}

float hardswish(float x) { return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f; }

// block 0: NCHW in and out (the kernels reorder to oneDNN's blocked format and back); block b:
// x and out already in nChw<b>c, as the cpu backend's blocked layout hands them over.
void BM_ConvEpilogue(benchmark::State& state, int64_t block) {
  const int64_t c = 64, h = 112, w = 112;
  std::vector<int64_t> act = block ? std::vector<int64_t>{1, c / block, h, w, block} : std::vector<int64_t>{1, c, h, w};
  Array x = filled(act, 1), wt = filled({c, c, 3, 3}, 2), bias = filled({c}, 3), out(DType::F32, act);
  Bare bare = bare_conv(1, c, h, w, c, 3, 1);
  dn::ConvSpec spec;
  spec.pad[0] = spec.pad[1] = spec.pad[2] = spec.pad[3] = 1;
  spec.block = block;
  auto noep = dn::ConvKernel::create(spec, &wt);
  spec.ep = {true, false, dn::Act::HardSwish};
  auto fused = dn::ConvKernel::create(spec, &wt);
  if (!noep || !fused) return state.SkipWithError("ConvKernel::create failed");
  const int64_t lanes = block ? block : 1;
  auto epilogue = [&] {
    float* y = out.data<float>();
    const float* b = bias.data<float>();
#pragma omp parallel for schedule(static)
    for (int64_t slab = 0; slab < c / lanes; ++slab) {
      for (int64_t i = 0; i < h * w * lanes; ++i) {
        int64_t ch = slab * lanes + (block ? i % lanes : 0);
        y[slab * h * w * lanes + i] = hardswish(y[slab * h * w * lanes + i] + b[ch]);
      }
    }
  };
  interleave(state, {
                        [&] { bare.run(); return Status::ok(); },
                        [&] { return (*noep)->run(x, wt, nullptr, nullptr, out); },
                        [&] { return (*fused)->run(x, wt, &bias, nullptr, out); },
                        [&] {
                          Status s = (*noep)->run(x, wt, nullptr, nullptr, out);
                          epilogue();
                          return s;
                        },
                    });
}

struct LayoutCase {
  const char* name;
  std::vector<int64_t> x, w;
  int64_t stride, pad, groups;
};

void BM_ConvLayout(benchmark::State& state, const LayoutCase& lc, const char* layout) {
  setenv("FUSEBOX_ONEDNN_CONV_LAYOUT", layout, 1);  // read when the primitive is built (first run)
  dn::ConvSpec spec;
  spec.stride[0] = spec.stride[1] = lc.stride;
  for (int64_t& p : spec.pad) p = lc.pad;
  spec.groups = lc.groups;
  spec.ep.bias = true;
  Array x = filled(lc.x, 1), wt = filled(lc.w, 2), bias = filled({lc.w[0]}, 3);
  int64_t k = lc.w[2];
  int64_t oh = (lc.x[2] + 2 * lc.pad - k) / lc.stride + 1, ow = (lc.x[3] + 2 * lc.pad - k) / lc.stride + 1;
  Array out(DType::F32, {lc.x[0], lc.w[0], oh, ow});
  auto kernel = dn::ConvKernel::create(spec, &wt);
  if (!kernel) return state.SkipWithError(kernel.status().to_string().c_str());
  Status s = (*kernel)->run(x, wt, &bias, nullptr, out);
  unsetenv("FUSEBOX_ONEDNN_CONV_LAYOUT");
  if (!s.is_ok()) return state.SkipWithError(s.to_string().c_str());
  for (auto _ : state) {
    Status r = (*kernel)->run(x, wt, &bias, nullptr, out);
    if (!r.is_ok()) return state.SkipWithError(r.to_string().c_str());
  }
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) {
  using namespace fusebox;
  benchmark::RegisterBenchmark("BM_MatmulEpilogue/2048", BM_MatmulEpilogue)
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(3.0);
  benchmark::RegisterBenchmark("BM_ConvEpilogue/3x3_64_112/nchw", [](benchmark::State& s) { BM_ConvEpilogue(s, 0); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  const int64_t block = dn::preferred_nchwc_block();
  const std::string blocked = "BM_ConvEpilogue/3x3_64_112/nchw" + std::to_string(block) + "c";
  benchmark::RegisterBenchmark(blocked.c_str(), [block](benchmark::State& s) { BM_ConvEpilogue(s, block); })
      ->UseManualTime()
      ->Unit(benchmark::kMillisecond)
      ->MinTime(2.0);
  static const LayoutCase cases[] = {
      {"3x3_64to64_112", {1, 64, 112, 112}, {64, 64, 3, 3}, 1, 1, 1},
      {"1x1_256to64_56", {1, 256, 56, 56}, {64, 256, 1, 1}, 1, 0, 1},
      {"dw3x3_96_56", {1, 96, 56, 56}, {96, 1, 3, 3}, 1, 1, 96},
      {"first3to32_s2_224", {1, 3, 224, 224}, {32, 3, 3, 3}, 2, 1, 1},
  };
  for (const auto& lc : cases) {
    for (const char* layout : {"plain", "blocked"}) {
      std::string name = std::string("BM_ConvLayout/") + lc.name + "/" + layout;
      benchmark::RegisterBenchmark(name.c_str(), [&lc, layout](benchmark::State& s) { BM_ConvLayout(s, lc, layout); })
          ->UseRealTime()
          ->Unit(benchmark::kMillisecond)
          ->MinTime(1.0);
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}

#endif  // FUSEBOX_HAVE_DNNL
