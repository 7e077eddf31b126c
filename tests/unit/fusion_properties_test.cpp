// Properties of the CPU fusion pipeline for every fused kind it emits (issue 10, item 5):
//
//   1. the verifier accepts the output of every pass (the pipeline is run pass by pass);
//   2. running the pipeline again on its own output changes nothing (`identical`);
//   3. unfusing the result (unfuse-elementwise-regions, unfuse_contractions, unfuse_norms,
//      unfuse_attention) gives back
//      the original function: the same results on the reference backend, and the same
//      structure (structural_hash: ops, attributes, wiring; not names or sizes) as the input,
//      which is written in canonical form.
//
// Each graph is drawn at random odd sizes with batch 1 and must produce its fused kind, so a
// pattern that stops fusing fails here rather than passing vacuously. Inputs are random and
// never zero (|v| >= 0.25). Tolerance: 1e-5 relative plus 1e-5 absolute per element: the
// reference backend runs both graphs op by op, so only the intermediate types that unfusing
// gives (the fused result's) could differ.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "fusion/pipeline.h"
#include "fusion/pipeline_plan.h"
#include "ir/fused_norm_ops.h"
#include "ir/fused_attention_op.h"
#include "ir/fused_ops.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/structural_hash.h"
#include "ir/verifier.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

// Sizes drawn for one graph: odd, from 3 to 17.
struct Sizes {
  int64_t m, k, n, c, h;
};

Sizes draw_sizes(std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> odd(1, 8);
  auto next = [&] { return 2 * odd(rng) + 1; };
  return Sizes{next(), next(), next(), next(), next()};
}

std::string fill(std::string text, const Sizes& s) {
  const std::pair<const char*, int64_t> keys[] = {{"$M", s.m}, {"$K", s.k}, {"$N", s.n}, {"$C", s.c}, {"$H", s.h},
                                                  {"$D", 2 * s.n}};
  for (const auto& [key, value] : keys) {
    for (size_t at = text.find(key); at != std::string::npos; at = text.find(key)) {
      text.replace(at, 2, std::to_string(value));
    }
  }
  return text;
}

// One graph per fused kind (and one with several kinds), in canonical form: what canonicalize
// leaves as it is and what unfusing gives back (the conv spells out its default attributes, as
// unfused_nodes does).
struct Case {
  const char* name;
  Op fused_kind;
  const char* text;
};

const Case kCases[] = {
    {"elementwise_region", Op::ElementwiseRegion, R"(
func @f(%x: f32[1,$M,$N], %y: f32[$N]) -> (f32[1,$M,$N], f32[1,$M,$N]) {
  %0 = mul %x, %y : f32[1,$M,$N]
  %1 = tanh %0 : f32[1,$M,$N]
  %2 = add %1, %x : f32[1,$M,$N]
  %3 = sigmoid %2 : f32[1,$M,$N]
  %4 = sub %3, %0 : f32[1,$M,$N]
  return %4, %2
})"},
    {"fused_matmul_bias_act", Op::FusedMatmulBiasAct, R"(
func @f(%a: f32[1,$M,$K], %w: f32[$K,$N], %b: f32[$N]) -> f32[1,$M,$N] {
  %0 = matmul %a, %w : f32[1,$M,$N]
  %1 = add %0, %b : f32[1,$M,$N]
  %2 = relu %1 : f32[1,$M,$N]
  return %2
})"},
    {"fused_matmul_residual", Op::FusedMatmulResidual, R"(
func @f(%a: f32[1,$M,$K], %w: f32[$K,$N], %b: f32[$N], %r: f32[1,$M,$N]) -> f32[1,$M,$N] {
  %0 = matmul %a, %w : f32[1,$M,$N]
  %1 = add %0, %b : f32[1,$M,$N]
  %2 = add %1, %r : f32[1,$M,$N]
  return %2
})"},
    {"fused_conv_bias_act", Op::FusedConvBiasAct, R"(
func @f(%x: f32[1,$C,$H,$H], %w: f32[$N,$C,3,3], %b: f32[$N]) -> f32[1,$N,$H,$H] {
  %0 = conv2d %x, %w, %b {stride = [1, 1], pad = [1, 1, 1, 1], dilation = [1, 1], groups = 1} : f32[1,$N,$H,$H]
  %1 = relu %0 : f32[1,$N,$H,$H]
  return %1
})"},
    {"fused_residual_layer_norm", Op::FusedResidualLayerNorm, R"(
func @f(%x: f32[1,$M,$N], %r: f32[1,$M,$N], %b: f32[$N], %g: f32[$N], %h: f32[$N]) -> f32[1,$M,$N] {
  %0 = add %x, %r : f32[1,$M,$N]
  %1 = add %0, %b : f32[1,$M,$N]
  %2 = layer_norm %1, %g, %h {axis = -1, eps = 1e-05} : f32[1,$M,$N]
  return %2
})"},
    // The sum is returned too: the fused node's second result.
    {"fused_residual_rms_norm", Op::FusedResidualRmsNorm, R"(
func @f(%x: f32[1,$M,$N], %r: f32[1,$M,$N], %g: f32[$N]) -> (f32[1,$M,$N], f32[1,$M,$N]) {
  %0 = add %x, %r : f32[1,$M,$N]
  %1 = rms_norm %0, %g {axis = -1, eps = 1e-06} : f32[1,$M,$N]
  return %1, %0
})"},
    // SwiGLU over the halves of one matmul (+ bias), the gate first; and without a bias, the
    // gate second (unfusing writes the gate's slice first whichever half it takes).
    {"fused_swiglu", Op::FusedSwiglu, R"(
func @f(%a: f32[1,$M,$K], %w: f32[$K,$D], %b: f32[$D]) -> f32[1,$M,$N] {
  %0 = matmul %a, %w : f32[1,$M,$D]
  %1 = add %0, %b : f32[1,$M,$D]
  %2 = slice %1 {starts = [0], ends = [$N], axes = [2]} : f32[1,$M,$N]
  %3 = slice %1 {starts = [$N], ends = [$D], axes = [2]} : f32[1,$M,$N]
  %4 = silu %2 : f32[1,$M,$N]
  %5 = mul %4, %3 : f32[1,$M,$N]
  return %5
})"},
    {"fused_swiglu_gate_second", Op::FusedSwiglu, R"(
func @f(%a: f32[1,$M,$K], %w: f32[$K,$D]) -> f32[1,$M,$N] {
  %0 = matmul %a, %w : f32[1,$M,$D]
  %1 = slice %0 {starts = [$N], ends = [$D], axes = [2]} : f32[1,$M,$N]
  %2 = slice %0 {starts = [0], ends = [$N], axes = [2]} : f32[1,$M,$N]
  %3 = silu %1 : f32[1,$M,$N]
  %4 = mul %3, %2 : f32[1,$M,$N]
  return %4
})"},
    // Attention with its head split and merge, a scale and a key mask (cross attention: the
    // key length differs from the query length).
    {"fused_attention", Op::FusedAttention, R"(
func @f(%q: f32[1,$M,16], %k: f32[1,$N,16], %v: f32[1,$N,16], %m: f32[1,1,1,$N]) -> f32[1,$M,16] {
  %0 = reshape %q {shape = [1, $M, 2, 8]} : f32[1,$M,2,8]
  %1 = transpose %0 {perm = [0, 2, 1, 3]} : f32[1,2,$M,8]
  %2 = reshape %k {shape = [1, $N, 2, 8]} : f32[1,$N,2,8]
  %3 = transpose %2 {perm = [0, 2, 3, 1]} : f32[1,2,8,$N]
  %4 = reshape %v {shape = [1, $N, 2, 8]} : f32[1,$N,2,8]
  %5 = transpose %4 {perm = [0, 2, 1, 3]} : f32[1,2,$N,8]
  %6 = matmul %1, %3 : f32[1,2,$M,$N]
  %7 = constant {value = dense<f32[]: [0.35]>} : f32[]
  %8 = mul %6, %7 : f32[1,2,$M,$N]
  %9 = add %8, %m : f32[1,2,$M,$N]
  %10 = softmax %9 {axis = -1} : f32[1,2,$M,$N]
  %11 = matmul %10, %5 : f32[1,2,$M,8]
  %12 = transpose %11 {perm = [0, 2, 1, 3]} : f32[1,$M,2,8]
  %13 = reshape %12 {shape = [1, $M, 16]} : f32[1,$M,16]
  return %13
})"},
    // A contraction whose result feeds an element-wise chain: both kinds in one graph.
    {"matmul_then_region", Op::ElementwiseRegion, R"(
func @f(%a: f32[1,$M,$K], %w: f32[$K,$N], %b: f32[$N], %s: f32[1,$M,$N]) -> f32[1,$M,$N] {
  %0 = matmul %a, %w : f32[1,$M,$N]
  %1 = add %0, %b : f32[1,$M,$N]
  %2 = relu %1 : f32[1,$M,$N]
  %3 = mul %2, %s : f32[1,$M,$N]
  %4 = exp %3 : f32[1,$M,$N]
  %5 = add %4, %s : f32[1,$M,$N]
  return %5
})"},
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

size_t count_op(const Graph& g, Op op) {
  size_t n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

// Uniform in [-2, 2) with magnitudes below 0.25 moved to 0.25 (sign kept): never zero.
Array nonzero_array(const TensorType& t, uint64_t seed) {
  Array a = testing::random_array(t.dtype, static_dims(t.shape), seed);
  for (int64_t i = 0; i < a.numel(); ++i) {
    double v = a.get_f64(i);
    if (std::fabs(v) < 0.25) a.set_f64(i, v < 0 ? -0.25 : 0.25);
  }
  return a;
}

NamedArrays random_inputs(const Graph& g, uint64_t seed) {
  NamedArrays in;
  for (ValueId v : g.inputs()) in.emplace(g.value(v).name, nonzero_array(g.type(v), seed++));
  return in;
}

// The CPU pipeline run pass by pass; every pass's output must verify.
Expected<Graph> fuse_checked(const Graph& g) {
  PassContext ctx;
  ctx.target = FusionTarget::Cpu;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  ctx.options = resolve_options(FusionTarget::Cpu, *ctx.claims, FusionOptions{}, nullptr);
  ctx.evaluate = &evaluate_with_reference;
  Graph out = g;
  PipelineHooks hooks;
  hooks.skip_unavailable = true;  // as Fuse does: planned passes this build lacks
  hooks.after_pass = [](std::string_view pass, const Graph& after) {
    Status s = verify(after);
    EXPECT_TRUE(s.is_ok()) << "after " << pass << ": " << s.to_string() << "\n" << print_graph(after);
  };
  FUSEBOX_RETURN_IF_ERROR(run_pipeline(out, plan_pipeline(*ctx.claims, ctx.options), ctx, hooks));
  return out;
}

Expected<Graph> unfuse(const Graph& fused) {
  Graph out = fused;
  PassContext ctx;
  ctx.claims = &claim_table_of(FusionTarget::Cpu);
  FUSEBOX_RETURN_IF_ERROR(run_pipeline(out, {"unfuse-elementwise-regions"}, ctx));
  unfuse_contractions(out);
  unfuse_norms(out);
  FUSEBOX_RETURN_IF_ERROR(unfuse_attention(out).status());
  FUSEBOX_RETURN_IF_ERROR(verify(out));
  return out;
}

Expected<std::vector<Array>> run_reference(const Graph& g, const NamedArrays& in) {
  CompileOptions o;
  o.fuse = false;
  o.backend = "reference";
  FUSEBOX_ASSIGN_OR_RETURN(Executable exe, Session().compile(g, o));
  return exe.run(in);
}

class FusionProperties : public ::testing::TestWithParam<Case> {};

TEST_P(FusionProperties, HoldAtRandomSizes) {
  const Case& c = GetParam();
  std::mt19937 rng(20261201);
  for (int trial = 0; trial < 4; ++trial) {
    Sizes s = draw_sizes(rng);
    std::string text = fill(c.text, s);
    SCOPED_TRACE(text);
    Expected<Graph> g = parse_graph(text);
    ASSERT_TRUE(g) << g.status().to_string();

    Expected<Graph> fused = fuse_checked(*g);
    ASSERT_TRUE(fused) << fused.status().to_string();
    ASSERT_GE(count_op(*fused, c.fused_kind), 1u) << print_graph(*fused);

    Expected<Graph> again = fuse_checked(*fused);
    ASSERT_TRUE(again) << again.status().to_string();
    EXPECT_TRUE(identical(*fused, *again)) << "first:\n" << print_graph(*fused) << "second:\n" << print_graph(*again);

    Expected<Graph> unfused = unfuse(*fused);
    ASSERT_TRUE(unfused) << unfused.status().to_string();
    for (const Node& n : unfused->nodes()) {
      EXPECT_FALSE(n.body || is_fused_contraction(n.op) || is_fused_norm(n.op) || n.op == Op::FusedSwiglu ||
                   n.op == Op::FusedAttention) << print_graph(*unfused);
    }
    EXPECT_EQ(structural_hash(*unfused), structural_hash(*g)) << print_graph(*unfused);

    NamedArrays in = random_inputs(*g, 100 * uint64_t(trial) + 1);
    Expected<std::vector<Array>> want = run_reference(*g, in);
    Expected<std::vector<Array>> got = run_reference(*unfused, in);
    ASSERT_TRUE(want) << want.status().to_string();
    ASSERT_TRUE(got) << got.status().to_string();
    ASSERT_EQ(got->size(), want->size());
    for (size_t i = 0; i < got->size(); ++i) EXPECT_TRUE(testing::arrays_close((*got)[i], (*want)[i], 1e-5, 1e-5)) << "output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(EveryFusedKind, FusionProperties, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace fusebox
