// Reduction regions (spec §4.4): written-out softmax, norm and row-reduction forms that
// recognition does not name become one reduction_region kernel; the region's CPU kernel run
// directly on poisoned outputs (on every ISA's loops the processor has, and as generated code),
// the whole fused graph, and the unfused form (the region inlined back) all equal the reference
// backend on random inputs (uniform in [-3, 3), never zero), over rows of one element, one row,
// odd sizes, rows longer than a tile and than the kept-row budget, several leading dims, and rows
// holding NaN and infinities.
// Tolerance: the kernel's accuracy rule (reduction_kernel.h), 1e-5 relative plus 1e-6 absolute.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

#include "backends/cpu/reduction_kernel.h"
#include "backends/cpu/reference/reference.h"
#include "backends/host_backend.h"
#include "fusion/pipeline.h"
#include "ir/parser.h"
#include "ir/reduction_region.h"
#include "ir/shape_inference.h"
#include "ir/verifier.h"
#include "runtime/session.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-6;

// The positive cases of tests/lit/fusion/fuse-reduction-regions.fbir, plus a rows-of-one case.
constexpr std::string_view kCases = R"(
func @softmax_temperature(%x: f32[N,D]) -> f32[N,D] {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %x, %m : f32[N,D]
  %half = constant {value = dense<f32[]: [0.5]>} : f32[]
  %t = mul %d, %half : f32[N,D]
  %e = exp %t : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %y = div %e, %s : f32[N,D]
  return %y
}
func @custom_rms(%x: f32[N,D]) -> f32[N,D] {
  %sq = mul %x, %x : f32[N,D]
  %ms = reduce_mean %sq {axes = [-1], keepdims = true} : f32[N,1]
  %eps = constant {value = dense<f32[]: [1e-06]>} : f32[]
  %v = add %ms, %eps : f32[N,1]
  %r = rsqrt %v : f32[N,1]
  %n = mul %x, %r : f32[N,D]
  %two = constant {value = dense<f32[]: [2.0]>} : f32[]
  %s = mul %n, %two : f32[N,D]
  %one = constant {value = dense<f32[]: [1.0]>} : f32[]
  %y = add %s, %one : f32[N,D]
  return %y
}
func @layer_norm_two_pass(%x: f32[B,T,D], %g: f32[D], %b: f32[D]) -> f32[B,T,D] {
  %mu = reduce_mean %x {axes = [-1], keepdims = true} : f32[B,T,1]
  %c = sub %x, %mu : f32[B,T,D]
  %sq = mul %c, %c : f32[B,T,D]
  %var = reduce_mean %sq {axes = [-1], keepdims = true} : f32[B,T,1]
  %eps = constant {value = dense<f32[]: [1e-05]>} : f32[]
  %ve = add %var, %eps : f32[B,T,1]
  %sd = sqrt %ve : f32[B,T,1]
  %n = div %c, %sd : f32[B,T,D]
  %s = mul %n, %g : f32[B,T,D]
  %t = add %s, %b : f32[B,T,D]
  %y = silu %t : f32[B,T,D]
  return %y
}
func @row_dot(%a: f32[N,D], %b: f32[N,D]) -> f32[N] {
  %p = mul %a, %b : f32[N,D]
  %s = reduce_sum %p {axes = [-1]} : f32[N]
  return %s
}
func @mean_relu(%x: f32[N,H,W]) -> f32[N,1,1] {
  %r = relu %x : f32[N,H,W]
  %m = reduce_mean %r {axes = [1, 2], keepdims = true} : f32[N,1,1]
  return %m
}
func @log_sum_exp(%x: f32[N,D]) -> (f32[N,D], f32[N,1]) {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %x, %m : f32[N,D]
  %e = exp %d : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %l = log %s : f32[N,1]
  %lse = add %l, %m : f32[N,1]
  %y = sub %x, %lse : f32[N,D]
  return %y, %lse
}
func @row_gather(%x: f32[N,H,W], %c: f32[H,1]) -> f32[N,H,W] {
  %y = mul %x, %c : f32[N,H,W]
  %m = reduce_mean %y {axes = [1, 2], keepdims = true} : f32[N,1,1]
  %z = sub %y, %m : f32[N,H,W]
  return %z
}
func @wide_steps(%x: f32[N,D]) -> (f32[N,D], f32[N,D], f32[N,D]) {
  %mn = reduce_min %x {axes = [-1], keepdims = true} : f32[N,1]
  %up = sub %x, %mn : f32[N,D]
  %down = sub %mn, %x : f32[N,D]
  %e = exp %up : f32[N,D]
  %f = exp %down : f32[N,D]
  %t = tanh %down : f32[N,D]
  %s = sigmoid %up : f32[N,D]
  %u = silu %down : f32[N,D]
  %g = gelu %up {approximate = "tanh"} : f32[N,D]
  %ft = add %f, %t : f32[N,D]
  %su = add %s, %u : f32[N,D]
  return %e, %ft, %su
}
func @row_bias(%x: f32[N,D], %bias: f32[N,1]) -> f32[N,D] {
  %a = add %x, %bias : f32[N,D]
  %m = reduce_min %a {axes = [-1], keepdims = true} : f32[N,1]
  %y = sub %a, %m : f32[N,D]
  return %y
}
func @clipped_softmax(%x: f32[N,D]) -> f32[N,D] {
  %c = clip %x {min = -2.5, max = 2.0} : f32[N,D]
  %m = reduce_max %c {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %c, %m : f32[N,D]
  %e = exp %d : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %y = div %e, %s : f32[N,D]
  %q = floor %y : f32[N,D]
  %z = add %y, %q : f32[N,D]
  return %z
}
func @hard_norm(%x: f32[N,D], %g: f32[D]) -> f32[N,D] {
  %h = hardswish %x : f32[N,D]
  %r = round %h : f32[N,D]
  %mu = reduce_mean %r {axes = [-1], keepdims = true} : f32[N,1]
  %c = sub %h, %mu : f32[N,D]
  %sn = sin %c : f32[N,D]
  %y = mul %sn, %g : f32[N,D]
  %hs = hardsigmoid %y {alpha = 0.25, beta = 0.5} : f32[N,D]
  return %hs
}
func @per_row_floor(%x: f32[N,D]) -> (f32[N,D], f32[N,1]) {
  %m = reduce_mean %x {axes = [-1], keepdims = true} : f32[N,1]
  %k = mul %m, %m : f32[N,1]
  %c = clip %k {min = 0.01} : f32[N,1]
  %f = floor %x : f32[N,D]
  %y = sub %f, %c : f32[N,D]
  %s = reduce_sum %y {axes = [-1], keepdims = true} : f32[N,1]
  %r = round %s : f32[N,1]
  %z = div %y, %r : f32[N,D]
  return %z, %r
}
func @per_row_clip(%x: f32[N,D]) -> f32[N,D] {
  %m = reduce_mean %x {axes = [-1], keepdims = true} : f32[N,1]
  %c = sub %x, %m : f32[N,D]
  %sq = mul %c, %c : f32[N,D]
  %v = reduce_mean %sq {axes = [-1], keepdims = true} : f32[N,1]
  %vc = clip %v {min = 0.5} : f32[N,1]
  %r = rsqrt %vc : f32[N,1]
  %y = mul %c, %r : f32[N,D]
  return %y
}
func @row_sinh(%x: f32[N,D]) -> f32[N,D] {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %x, %m : f32[N,D]
  %t = sinh %d : f32[N,D]
  return %t
}
)";

const Graph& function(std::string_view name) {
  static const Module m = [] {
    Expected<Module> parsed = parse_module(kCases);
    FUSEBOX_CHECK(parsed.has_value()) << parsed.status().to_string();
    return *parsed;
  }();
  const Graph* g = m.find(name);
  FUSEBOX_CHECK(g) << name;
  return *g;
}

Array nonzero(std::vector<int64_t> shape, uint64_t seed) {
  Array a = testing::random_array(DType::F32, std::move(shape), seed, -3.0, 3.0);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::fabs(p[i]) < 1e-3f) p[i] = 0.5f;
  return a;
}

// Random inputs for `g` with its symbols bound to `sizes`.
NamedArrays inputs_for(const Graph& g, const SymbolBindings& sizes, uint64_t seed) {
  NamedArrays in;
  for (ValueId v : g.inputs()) in[g.value(v).name] = nonzero(static_dims(bind_shape(g.type(v).shape, sizes)), seed++);
  return in;
}

std::vector<Array> run(const Graph& g, const NamedArrays& in, bool fuse, const std::string& backend,
                       Graph* ran = nullptr, cpu::Codegen codegen = cpu::Codegen::Auto) {
  Session s;
  CompileOptions o;
  o.fuse = fuse;
  o.backend = backend;
  o.cpu.codegen = codegen;
  o.verify_each_pass = true;
  Expected<Executable> exe = s.compile(g, o);
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  if (ran) *ran = exe->graph();
  Expected<std::vector<Array>> out = exe->run(in);
  EXPECT_TRUE(out) << out.status().to_string();
  return out ? *out : std::vector<Array>{};
}

size_t compute_nodes(const Graph& g) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op != Op::Constant;
  return n;
}

struct Case {
  std::string_view func;
  std::vector<SymbolBindings> sizes;
  // Kernels and reduction regions after fusion for the CPU. Recognition names part of three forms
  // (the softmax tail of the temperature softmax; rms_norm(x, 2) + 1; the layer norm with
  // E[x²] - E[x]²); on the CPU a named row op next to an element-wise step of its row is written
  // back out into the region (fuse_reduction_regions.cpp, write_out_named_row_ops), so each is
  // one kernel.
  size_t kernels = 1;
  size_t regions = 1;
};

const std::vector<Case> kFusedCases = {
    {"softmax_temperature",
     {{{"N", 1}, {"D", 1}}, {{"N", 1}, {"D", 4097}}, {{"N", 7}, {"D", 1}}, {{"N", 33}, {"D", 257}}}},
    {"custom_rms", {{{"N", 5}, {"D", 1}}, {{"N", 1}, {"D", 1000}}, {{"N", 17}, {"D", 129}}}},
    {"layer_norm_two_pass",
     {{{"B", 2}, {"T", 3}, {"D", 255}}, {{"B", 1}, {"T", 1}, {"D", 1}}, {{"B", 3}, {"T", 5}, {"D", 31}}}},
    {"row_dot", {{{"N", 1}, {"D", 1}}, {{"N", 9}, {"D", 513}}, {{"N", 300}, {"D", 17}}}},
    {"mean_relu",
     {{{"N", 1}, {"H", 1}, {"W", 1}}, {{"N", 4}, {"H", 7}, {"W", 9}}, {{"N", 2}, {"H", 33}, {"W", 65}}}},
    {"log_sum_exp", {{{"N", 1}, {"D", 3}}, {{"N", 11}, {"D", 600}}, {{"N", 4}, {"D", 1}}}},
    {"row_bias", {{{"N", 1}, {"D", 1}}, {{"N", 6}, {"D", 300}}}},
    // an operand that broadcasts along one axis of a two-axis row: read through an offset table
    {"row_gather",
     {{{"N", 1}, {"H", 1}, {"W", 1}}, {{"N", 3}, {"H", 5}, {"W", 7}}, {{"N", 2}, {"H", 40}, {"W", 9}}}},
};

TEST(ReductionRegions, WrittenOutFormsBecomeOneKernelAndMatchTheReference) {
  for (const Case& c : kFusedCases) {
    const Graph& g = function(c.func);
    uint64_t seed = 100;
    for (const SymbolBindings& sizes : c.sizes) {
      NamedArrays in = inputs_for(g, sizes, seed);
      seed += 10;
      Graph fused;
      std::vector<Array> got = run(g, in, true, "cpu", &fused);
      std::vector<Array> want = run(g, in, false, "reference");
      EXPECT_EQ(compute_nodes(fused), c.kernels) << c.func;
      EXPECT_EQ(testing::count_op(fused, Op::ReductionRegion), c.regions) << c.func;
      ASSERT_EQ(got.size(), want.size()) << c.func;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::arrays_close(got[i], want[i], kRtol, kAtol)) << c.func << " result " << i;
      }
    }
  }
}

// The graph after fuse-reduction-regions alone, and its one reduction_region.
std::pair<Graph, size_t> fused_region(const Graph& source) {
  Graph g = source;
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  ctx.options = FusionOptions::for_cpu();
  PipelineHooks hooks;
  hooks.verify_each = true;
  Status st = run_pipeline(g, {"fuse-reduction-regions"}, ctx, hooks);
  EXPECT_TRUE(st.is_ok()) << st.to_string();
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (g.nodes()[i].op == Op::ReductionRegion) return {std::move(g), i};
  ADD_FAILURE() << "no reduction_region in " << source.name();
  return {std::move(g), 0};
}

// Runs the region of `source` directly on the loops of `isa`, outputs filled with each poison
// byte first (a missed element stays poison), against the region's reference kernel; `edit`
// may plant special values in the random inputs.
// How the kernel runs its row steps: the tile loops of one ISA, or generated code (its
// accumulations on that ISA's loops).
struct KernelWay {
  cpu::RowIsa isa;
  cpu::Codegen codegen;
};

std::string way_name(const KernelWay& w) {
  return std::string(cpu::row_isa_name(w.isa)) + (w.codegen == cpu::Codegen::Jit ? "_generated" : "");
}

void check_kernel(const Graph& source, const SymbolBindings& sizes, KernelWay way, uint64_t seed,
                  const std::function<void(std::vector<Array>&)>& edit = {}) {
  auto [g, at] = fused_region(source);
  const Node& region = g.nodes()[at];
  ASSERT_EQ(region.op, Op::ReductionRegion);
  const cpu::RowIsa isa = way.isa;
  std::shared_ptr<const Kernel> kernel = cpu::make_reduction_kernel(g, region, isa, way.codegen);
  ASSERT_NE(kernel, nullptr) << source.name() << ": the interpreter should cover this body";
  std::vector<Array> ins;
  std::vector<TensorType> in_types;
  for (ValueId v : region.inputs) {
    ins.push_back(nonzero(static_dims(bind_shape(g.type(v).shape, sizes)), seed++));
    in_types.push_back(TensorType{DType::F32, make_shape(ins.back().shape())});
  }
  if (edit) edit(ins);
  Expected<std::vector<TensorType>> types = infer_result_types(region, in_types);
  ASSERT_TRUE(types) << types.status().to_string();
  std::vector<Array> want;
  for (const TensorType& t : *types) want.emplace_back(t.dtype, static_dims(t.shape));
  ASSERT_TRUE(cpu::run_reference(region, ins, want).is_ok());
  const cpu::JitStats before = cpu::jit_stats();
  for (uint8_t poison : testing::kPoisonBytes) {
    std::vector<Array> got;
    for (const TensorType& t : *types) {
      got.emplace_back(t.dtype, static_dims(t.shape));
      got.back().fill_bytes(poison);
    }
    std::vector<BufferView> in_views, out_views;
    for (const Array& a : ins) in_views.push_back(host_view(a));
    for (const Array& a : got) out_views.push_back(host_view(a));
    InlineStream stream(kHostDevice);
    Status st = kernel->run(stream, in_views, out_views);
    ASSERT_TRUE(st.is_ok()) << source.name() << ": " << st.to_string();
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_TRUE(testing::arrays_close(got[i], want[i], kRtol, kAtol))
          << source.name() << " result " << i << " poison " << int(poison) << " on " << way_name(way);
    }
  }
  if (way.codegen == cpu::Codegen::Jit) {
    // The passes' generated loops were asked for (compiled, or found in the cache by structure)
    // on the first run; the later runs reuse them.
    const cpu::JitStats after = cpu::jit_stats();
    EXPECT_GT(after.compiled + after.cache_hits, before.compiled + before.cache_hits) << source.name();
  }
}

// The kernel's loops once per ISA (tests force each; the processor must have it), and generated
// code beside each.
class ReductionKernelIsa : public ::testing::TestWithParam<KernelWay> {
 protected:
  void SetUp() override {
    if (!cpu::row_isa_available(GetParam().isa)) {
      GTEST_SKIP() << "this processor has no " << cpu::row_isa_name(GetParam().isa)
                   << ": its loops cannot run here";
    }
    if (GetParam().codegen == cpu::Codegen::Jit && !cpu::jit_built())
      GTEST_SKIP() << "this build has no LLVM: no generated code";
  }
};

// The region's own kernel, run directly, must write every result element at every size.
TEST_P(ReductionKernelIsa, WritesEveryElementOnPoisonedOutputs) {
  for (const Case& c : kFusedCases) {
    uint64_t seed = 7;
    for (const SymbolBindings& sizes : c.sizes) check_kernel(function(c.func), sizes, GetParam(), seed += 10);
  }
}

// Rows longer than a tile (1024) and not a multiple of the 64 accumulator lanes; rows whose kept
// values pass the 256 KiB budget (70001 floats), so the sum pass's exp is recomputed by the
// write pass instead of kept.
TEST_P(ReductionKernelIsa, LongRowsKeptAndRecomputed) {
  for (int64_t d : {1025, 5000, 70001}) {
    check_kernel(function("softmax_temperature"), {{"N", 3}, {"D", d}}, GetParam(), 11);
    check_kernel(function("log_sum_exp"), {{"N", 2}, {"D", d}}, GetParam(), 21);
    check_kernel(function("layer_norm_two_pass"), {{"B", 1}, {"T", 2}, {"D", d}}, GetParam(), 31);
    check_kernel(function("row_bias"), {{"N", 2}, {"D", d}}, GetParam(), 41);
  }
}

// A NaN anywhere in a row makes the reference's row NaN (max, min and sums propagate it); +inf
// makes a softmax row NaN (inf - inf); -inf gives e^-inf, 0 (the kernel's exp clamps to about
// 1e-38, within the absolute bound). Other rows stay exact.
TEST_P(ReductionKernelIsa, NanAndInfinitiesPropagateAsInTheReference) {
  auto plant = [](std::vector<Array>& in) {
    float* x = in[0].data<float>();
    const int64_t n = in[0].shape().back();
    x[1 * n + n - 3] = std::numeric_limits<float>::quiet_NaN();
    x[2 * n + 17] = std::numeric_limits<float>::infinity();
    x[3 * n + 1000] = -std::numeric_limits<float>::infinity();
  };
  for (std::string_view f : {"softmax_temperature", "log_sum_exp", "row_bias", "row_dot"})
    check_kernel(function(f), {{"N", 5}, {"D", 3001}}, GetParam(), 51, plant);
  check_kernel(function("layer_norm_two_pass"), {{"B", 5}, {"T", 1}, {"D", 3001}}, GetParam(), 61, plant);
}

// The vectorised exp, tanh, sigmoid and silu over their whole range: x in [-45, 45) makes
// x - min(x) reach e^90 (overflow to inf) and min(x) - x e^-90 (below the normal floats).
TEST_P(ReductionKernelIsa, ElementwiseStepsOverTheirWholeRange) {
  auto widen = [](std::vector<Array>& in) {
    float* x = in[0].data<float>();
    for (int64_t i = 0; i < in[0].numel(); ++i) x[i] *= 15.0f;
  };
  check_kernel(function("wide_steps"), {{"N", 3}, {"D", 2000}}, GetParam(), 71, widen);
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, ReductionKernelIsa,
                         ::testing::Values(KernelWay{cpu::RowIsa::Generic, cpu::Codegen::Interpreter},
                                           KernelWay{cpu::RowIsa::Avx2, cpu::Codegen::Interpreter},
                                           KernelWay{cpu::RowIsa::Avx512, cpu::Codegen::Interpreter},
                                           KernelWay{cpu::RowIsa::Generic, cpu::Codegen::Jit},
                                           KernelWay{cpu::RowIsa::Avx512, cpu::Codegen::Jit}),
                         [](const auto& info) { return way_name(info.param); });

// Steps that only generated code has (clip, floor, round, hardswish, sin, hardsigmoid: no tile
// loop or scalar code) run in the reduction kernel when code is generated, at any size, whatever
// the codegen's size rule: row steps in the passes' code, per-row steps (a clip of a mean's
// square, a rounded sum) as one-step code per row; with the interpreter asked for, the kernel
// declines (the reference kernel runs the region). Fused graphs match the reference.
TEST(ReductionRegions, StepsWithoutTileLoopsRunAsGeneratedCode) {
  const std::vector<std::pair<std::string_view, SymbolBindings>> bodies = {
      {"clipped_softmax", {{"N", 5}, {"D", 3001}}},
      {"clipped_softmax", {{"N", 2}, {"D", 7}}},
      {"hard_norm", {{"N", 4}, {"D", 1500}}},
      {"hard_norm", {{"N", 1}, {"D", 1}}},
      {"per_row_floor", {{"N", 6}, {"D", 2049}}},
      {"per_row_floor", {{"N", 3}, {"D", 5}}},
      // only a per-row step lacks a tile loop: under Auto at this size the passes run on the
      // tile interpreter, the clip as one-step generated code
      {"per_row_clip", {{"N", 4}, {"D", 300}}}};
  for (const auto& [name, sizes] : bodies) {
    const Graph& g = function(name);
    auto [fused, at] = fused_region(g);
    const Node& region = fused.nodes()[at];
    ASSERT_EQ(region.op, Op::ReductionRegion) << name;
    EXPECT_EQ(cpu::make_reduction_kernel(fused, region, cpu::RowIsa::Generic, cpu::Codegen::Interpreter),
              nullptr)
        << name;
    EXPECT_EQ(cpu::reduction_codegen(region).kernel, cpu::jit_built()) << name;
    if (!cpu::jit_built()) continue;
    for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx512}) {
      if (cpu::row_isa_available(isa)) check_kernel(g, sizes, KernelWay{isa, cpu::Codegen::Jit}, 81);
    }
    // Auto under its size threshold still generates code (the interpreter cannot run the body).
    ASSERT_NE(cpu::make_reduction_kernel(fused, region, cpu::best_row_isa(), cpu::Codegen::Auto), nullptr)
        << name;
    NamedArrays in = inputs_for(g, sizes, 91);
    Graph ran;
    std::vector<Array> got = run(g, in, true, "cpu", &ran), want = run(g, in, false, "reference");
    EXPECT_EQ(testing::count_op(ran, Op::ReductionRegion), 1u) << name;
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::arrays_close(got[i], want[i], kRtol, kAtol)) << name;
  }
  // sinh has neither a tile loop nor generated code: the kernel declines the region.
  auto [fused, at] = fused_region(function("row_sinh"));
  EXPECT_EQ(cpu::make_reduction_kernel(fused, fused.nodes()[at], cpu::best_row_isa(), cpu::Codegen::Jit),
            nullptr);
  EXPECT_FALSE(cpu::reduction_codegen(fused.nodes()[at]).kernel);
}

// A region the reduction kernel declines runs unfused: the CPU backend's lowering inlines its
// body, whose ops run on their own kernels (not the region's reference kernel, a node at a time
// on one thread). Results match the reference.
TEST(ReductionRegions, RegionsTheKernelDeclinesRunUnfused) {
  struct Way {
    std::string_view func;
    cpu::Codegen codegen;
    bool declined;
  };
  const Way ways[] = {{"row_sinh", cpu::Codegen::Auto, true},
                      {"row_sinh", cpu::Codegen::Jit, true},
                      {"clipped_softmax", cpu::Codegen::Interpreter, true},
                      {"clipped_softmax", cpu::Codegen::Auto, !cpu::jit_built()},
                      {"softmax_temperature", cpu::Codegen::Interpreter, false}};
  for (const Way& w : ways) {
    const Graph& g = function(w.func);
    auto [fused, at] = fused_region(g);
    ASSERT_EQ(fused.nodes()[at].op, Op::ReductionRegion) << w.func;
    NamedArrays in = inputs_for(g, {{"N", 5}, {"D", 1001}}, 97);
    Graph ran;
    std::vector<Array> got = run(g, in, true, "cpu", &ran, w.codegen), want = run(g, in, false, "reference");
    EXPECT_EQ(testing::count_op(ran, Op::ReductionRegion), w.declined ? 0u : 1u)
        << w.func << " with codegen " << codegen_name(w.codegen);
    if (w.declined) {
      EXPECT_EQ(testing::count_op(ran, Op::ReduceMax), 1u) << w.func;
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_TRUE(testing::arrays_close(got[i], want[i], kRtol, kAtol)) << w.func;
  }
}

// Inlining the region gives back nodes that compute what the source graph computes.
TEST(ReductionRegions, UnfusedFormEqualsTheReference) {
  for (const Case& c : kFusedCases) {
    Graph g = function(c.func);
    PassContext ctx;
    ctx.claims = &claim_table_of(FusionTarget::Cpu);
    ctx.options = FusionOptions::for_cpu();
    ASSERT_TRUE(run_pipeline(g, {"fuse-reduction-regions"}, ctx, {}).is_ok());
    ASSERT_EQ(testing::count_op(g, Op::ReductionRegion), 1u) << c.func;
    Expected<int64_t> inlined = inline_reduction_regions(g);
    ASSERT_TRUE(inlined) << inlined.status().to_string();
    EXPECT_EQ(*inlined, 1);
    ASSERT_TRUE(verify(g).is_ok()) << c.func << ": " << verify(g).to_string();
    EXPECT_EQ(testing::count_op(g, Op::ReductionRegion), 0u);
    NamedArrays in = inputs_for(g, c.sizes.front(), 40);
    std::vector<Array> got = run(g, in, false, "reference");
    std::vector<Array> want = run(function(c.func), in, false, "reference");
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_TRUE(testing::arrays_close(got[i], want[i], 0, 0)) << c.func;
  }
}

// The standard softmax is recognised as softmax (a row kernel), not a reduction region; the same
// softmax with one extra step recognition deliberately skips is still one kernel.
// The softmax with a temperature through the whole CPU pipeline: its written-out tail leaves out
// the max of x = (a - max(a)) * 0.5 (expand_row_ops.cpp: that max is 0), which must hold in rows
// with a NaN, +inf, -inf, all -inf, all equal, and huge values, against the reference (NaN equals
// NaN); also a negative temperature, where the max of x is not 0 and its pass must stay.
TEST(ReductionRegions, TemperatureSoftmaxWithoutItsSecondMaxMatchesTheReference) {
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* c : {"0.5", "-0.5"}) {
    std::string text(kCases.substr(kCases.find("func @softmax_temperature")));
    text = text.substr(0, text.find("\n}\n") + 3);
    text.replace(text.find("[0.5]"), 5, std::string("[") + c + "]");
    Expected<Module> m = parse_module(text);
    ASSERT_TRUE(m) << m.status().to_string();
    const Graph& g = m->functions[0];
    NamedArrays in = inputs_for(g, {{"N", 8}, {"D", 300}}, 5);
    float* x = in["x"].data<float>();
    x[1 * 300 + 7] = std::numeric_limits<float>::quiet_NaN();
    for (int i = 0; i < 300; ++i) x[5 * 300 + i] = 1.25f;
    if (c[0] != '-') {
      // (With a negative temperature an infinity or a huge spread overflows exp in the source
      // graph, where the recognised softmax subtracts its max: recognition's own difference.)
      x[2 * 300 + 100] = inf;
      x[3 * 300 + 5] = -inf;
      for (int i = 0; i < 300; ++i) x[4 * 300 + i] = -inf;
      for (int i = 0; i < 300; ++i) x[6 * 300 + i] *= 1e30f;
    }
    Graph fused;
    std::vector<Array> got = run(g, in, true, "cpu", &fused);
    std::vector<Array> want = run(g, in, false, "reference");
    ASSERT_EQ(got.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_EQ(compute_nodes(fused), 1u) << c;
    // Positive: max, sum, write (the x - max(x) of the expansion left out); negative: it stays.
    const Node* region = nullptr;
    for (const Node& n : fused.nodes())
      if (n.op == Op::ReductionRegion) region = &n;
    ASSERT_NE(region, nullptr);
    EXPECT_EQ(testing::count_op(*region->body, Op::ReduceMax), c[0] == '-' ? 2u : 1u) << c;
    EXPECT_TRUE(testing::arrays_close(got[0], want[0], kRtol, kAtol)) << "temperature " << c;
  }
}

TEST(ReductionRegions, RecognitionStillWinsForTheStandardForm) {
  Expected<Module> m = parse_module(R"(
func @softmax(%x: f32[N,D]) -> f32[N,D] {
  %m = reduce_max %x {axes = [-1], keepdims = true} : f32[N,1]
  %d = sub %x, %m : f32[N,D]
  %e = exp %d : f32[N,D]
  %s = reduce_sum %e {axes = [-1], keepdims = true} : f32[N,1]
  %y = div %e, %s : f32[N,D]
  return %y
}
)");
  ASSERT_TRUE(m) << m.status().to_string();
  Graph fused;
  NamedArrays in = inputs_for(m->functions[0], {{"N", 3}, {"D", 40}}, 1);
  run(m->functions[0], in, true, "cpu", &fused);
  EXPECT_EQ(compute_nodes(fused), 1u);
  EXPECT_EQ(testing::count_op(fused, Op::Softmax), 1u);
  Graph variant;
  run(function("softmax_temperature"), in, true, "cpu", &variant);
  // Recognition names the variant's tail softmax(t), t = (x - max) * 0.5; on the CPU the tail is
  // written back out and joins the region of the max and the steps before it: one kernel.
  EXPECT_EQ(compute_nodes(variant), 1u);
  EXPECT_EQ(testing::count_op(variant, Op::ReductionRegion), 1u);
  EXPECT_EQ(testing::count_op(variant, Op::Softmax), 0u);
  // Other targets keep the named tail on its row kernel beside the region.
  Graph for_cuda = function("softmax_temperature");
  PassContext ctx;
  ctx.target = FusionTarget::Cuda;
  ctx.claims = &claim_table_of(FusionTarget::Cuda);
  ctx.options = FusionOptions::for_target(FusionTarget::Cuda);
  Status st = run_pipeline(for_cuda, {"canonicalize", "fuse-reduction-regions"}, ctx, PipelineHooks{});
  ASSERT_TRUE(st.is_ok()) << st.to_string();
  EXPECT_EQ(testing::count_op(for_cuda, Op::ReductionRegion), 1u);
  EXPECT_EQ(testing::count_op(for_cuda, Op::Softmax), 1u);
}

// A bad body is a clear verifier error naming the rule, never a crash.
TEST(ReductionRegions, VerifierRejectsAReductionOverALeadingAxis) {
  Expected<Module> m = parse_module(R"(
func @bad(%x: f32[4,8]) -> f32[4,8] {
  %0 = reduction_region %x {name = "bad", row_axes = 1} : f32[4,8] (%a: f32[4,8]) {
    %0 = reduce_sum %a {axes = [0], keepdims = true} : f32[1,8]
    %1 = sub %a, %0 : f32[4,8]
    return %1
  }
  return %0
}
)");
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.status().message().find("reduces other axes than the last 1"), std::string::npos) << m.status().to_string();
}

// A reduction that joins no region (alone in the graph, or unfused) runs on the reduction kernel
// when it is f32 over the trailing axes, keepdims or not: every ISA's loops and generated code,
// results poisoned first, against the reference kernel. Other reductions are declined.
TEST(ReductionRegions, LoneRowReductionsRunOnTheReductionKernel) {
  struct Lone {
    Op op;
    std::vector<int64_t> shape, axes;
    bool keepdims;
  };
  const Lone cases[] = {
      {Op::ReduceSum, {7, 1001}, {-1}, true},  {Op::ReduceMean, {3, 5, 300}, {1, 2}, false},
      {Op::ReduceMax, {4, 2049}, {1}, false},  {Op::ReduceMin, {1, 5}, {-1}, true},
      {Op::ReduceProd, {6, 33}, {-1}, true},   {Op::ReduceSum, {2, 3, 4, 17}, {-2, -1}, true},
      {Op::ReduceMean, {1, 4096}, {-1}, false}};
  auto lone = [](const Lone& c, DType dtype) {
    return testing::one_node(c.op, {TensorType{dtype, make_shape(c.shape)}},
                             {{"axes", c.axes}, {"keepdims", c.keepdims}});
  };
  std::vector<KernelWay> ways;
  for (cpu::RowIsa isa : {cpu::RowIsa::Generic, cpu::RowIsa::Avx2, cpu::RowIsa::Avx512}) {
    if (!cpu::row_isa_available(isa)) continue;
    ways.push_back({isa, cpu::Codegen::Interpreter});
    if (cpu::jit_built()) ways.push_back({isa, cpu::Codegen::Jit});
  }
  uint64_t seed = 300;
  for (const Lone& c : cases) {
    const Graph g = lone(c, DType::F32);
    const Node& n = g.nodes()[0];
    const std::string what = std::string(op_keyword(c.op)) + " of " + g.type(n.inputs[0]).to_string();
    const std::vector<Array> ins{nonzero(c.shape, seed++)};
    std::vector<Array> want{Array(DType::F32, static_dims(g.type(n.outputs[0]).shape))};
    ASSERT_TRUE(cpu::run_reference(n, ins, want).is_ok()) << what;
    for (const KernelWay& way : ways) {
      std::shared_ptr<const Kernel> kernel = cpu::make_row_reduce_kernel(g, n, way.isa, way.codegen);
      ASSERT_NE(kernel, nullptr) << what;
      for (uint8_t poison : testing::kPoisonBytes) {
        Expected<Array> got = testing::run_host_kernel(*kernel, ins[0], g.type(n.outputs[0]), poison);
        ASSERT_TRUE(got) << what << ": " << got.status().to_string();
        EXPECT_TRUE(testing::arrays_close(*got, want[0], kRtol, kAtol)) << what << " on " << way_name(way);
      }
    }
  }
  // A leading axis, an integer reduction, and rows of one element (the result is the operand: the
  // kernel cannot tell rows from per-row values there): not for this kernel.
  const Graph single = lone({Op::ReduceMax, {3, 1}, {-1}, true}, DType::F32);
  EXPECT_EQ(cpu::make_row_reduce_kernel(single, single.nodes()[0]), nullptr);
  const Graph leading = lone({Op::ReduceSum, {5, 7}, {0}, true}, DType::F32);
  EXPECT_EQ(cpu::make_row_reduce_kernel(leading, leading.nodes()[0]), nullptr);
  const Graph ints = lone({Op::ReduceSum, {5, 7}, {-1}, true}, DType::I32);
  EXPECT_EQ(cpu::make_row_reduce_kernel(ints, ints.nodes()[0]), nullptr);
}

}  // namespace
}  // namespace fusebox
