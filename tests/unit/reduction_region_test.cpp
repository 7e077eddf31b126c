// Reduction regions (spec §4.4): written-out softmax, norm and row-reduction forms that
// recognition does not name become one reduction_region kernel; the region's CPU kernel run
// directly on poisoned outputs, the whole fused graph, and the unfused form (the region inlined
// back) all equal the reference backend on random inputs (uniform in [-3, 3), never zero), over
// rows of one element, one row, odd sizes and several leading dims.
// Tolerance: 1e-4 relative plus 1e-5 absolute (the kernel is bit-exact today, reduction_kernel.h;
// the bound leaves room for vector-lane sums, which reassociate).
#include <gtest/gtest.h>

#include <cmath>

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

constexpr double kRtol = 1e-4, kAtol = 1e-5;

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
func @row_bias(%x: f32[N,D], %bias: f32[N,1]) -> f32[N,D] {
  %a = add %x, %bias : f32[N,D]
  %m = reduce_min %a {axes = [-1], keepdims = true} : f32[N,1]
  %y = sub %a, %m : f32[N,D]
  return %y
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
                       Graph* ran = nullptr) {
  Session s;
  CompileOptions o;
  o.fuse = fuse;
  o.backend = backend;
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
  // Kernels and reduction regions after fusion. Recognition names part of three forms (the softmax
  // tail of the temperature softmax; rms_norm(x, 2) + 1; the layer norm with E[x²] - E[x]²), which keep their vectorised row
  // kernels beside a region (fuse_reduction_regions.cpp, kWriteOutNamedRowOps).
  size_t kernels = 1;
  size_t regions = 1;
};

const std::vector<Case> kFusedCases = {
    {"softmax_temperature", {{{"N", 1}, {"D", 1}}, {{"N", 1}, {"D", 4097}}, {{"N", 7}, {"D", 1}}, {{"N", 33}, {"D", 257}}}, 2, 1},
    {"custom_rms", {{{"N", 5}, {"D", 1}}, {{"N", 1}, {"D", 1000}}, {{"N", 17}, {"D", 129}}}, 2, 0},
    {"layer_norm_two_pass", {{{"B", 2}, {"T", 3}, {"D", 255}}, {{"B", 1}, {"T", 1}, {"D", 1}}, {{"B", 3}, {"T", 5}, {"D", 31}}}, 2, 0},
    {"row_dot", {{{"N", 1}, {"D", 1}}, {{"N", 9}, {"D", 513}}, {{"N", 300}, {"D", 17}}}},
    {"mean_relu", {{{"N", 1}, {"H", 1}, {"W", 1}}, {{"N", 4}, {"H", 7}, {"W", 9}}, {{"N", 2}, {"H", 33}, {"W", 65}}}},
    {"log_sum_exp", {{{"N", 1}, {"D", 3}}, {{"N", 11}, {"D", 600}}, {{"N", 4}, {"D", 1}}}},
    {"row_bias", {{{"N", 1}, {"D", 1}}, {{"N", 6}, {"D", 300}}}},
    // an operand that broadcasts along one axis of a two-axis row: read through an offset table
    {"row_gather", {{{"N", 1}, {"H", 1}, {"W", 1}}, {{"N", 3}, {"H", 5}, {"W", 7}}, {{"N", 2}, {"H", 40}, {"W", 9}}}},
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

// The region's own kernel, run directly, must write every result element: outputs are filled
// with each poison byte first. The reference kernel of the region node is the oracle here.
TEST(ReductionRegions, KernelWritesEveryElementOnPoisonedOutputs) {
  for (const Case& c : kFusedCases) {
    const Graph& source = function(c.func);
    Graph g = source;
    PassContext ctx;
    ctx.claims = &claim_table_of(FusionTarget::Cpu);
    ctx.options = FusionOptions::for_cpu();
    PipelineHooks hooks;
    hooks.verify_each = true;
    ASSERT_TRUE(run_pipeline(g, {"fuse-reduction-regions"}, ctx, hooks).is_ok()) << c.func;
    const Node* region = nullptr;
    for (const Node& n : g.nodes())
      if (n.op == Op::ReductionRegion) region = &n;
    ASSERT_NE(region, nullptr) << c.func;
    std::shared_ptr<const Kernel> kernel = cpu::make_reduction_kernel(g, *region);
    ASSERT_NE(kernel, nullptr) << c.func << ": the interpreter should cover this body";
    const SymbolBindings& sizes = c.sizes.back();
    std::vector<Array> ins;
    std::vector<TensorType> in_types;
    uint64_t seed = 7;
    for (ValueId v : region->inputs) {
      ins.push_back(nonzero(static_dims(bind_shape(g.type(v).shape, sizes)), seed++));
      in_types.push_back(TensorType{DType::F32, make_shape(ins.back().shape())});
    }
    Expected<std::vector<TensorType>> types = infer_result_types(*region, in_types);
    ASSERT_TRUE(types) << types.status().to_string();
    std::vector<Array> want;
    for (const TensorType& t : *types) want.emplace_back(t.dtype, static_dims(t.shape));
    ASSERT_TRUE(cpu::run_reference(*region, ins, want).is_ok());
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
      ASSERT_TRUE(kernel->run(stream, in_views, out_views).is_ok());
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_TRUE(testing::arrays_close(got[i], want[i], kRtol, kAtol)) << c.func << " result " << i << " poison "
                                                                         << int(poison);
      }
    }
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
  // Recognition names the variant's tail softmax(t), t = (x - max) * 0.5: the max and the steps
  // before the tail are one region, the tail keeps its row kernel.
  EXPECT_EQ(compute_nodes(variant), 2u);
  EXPECT_EQ(testing::count_op(variant, Op::ReductionRegion), 1u);
  EXPECT_EQ(testing::count_op(variant, Op::Softmax), 1u);
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

}  // namespace
}  // namespace fusebox
