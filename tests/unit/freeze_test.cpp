// freeze_inputs (ir/freeze.h): weights known at compile time become constants, so canonicalize
// folds what depends on them once; the frozen graph computes what the original does on the same
// values, and bad requests are errors naming the input.
#include <gtest/gtest.h>

#include "ir/freeze.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

constexpr const char* kConvBn = R"(
func @block(%x: f32[N,4,6,6], %w: f32[4,4,3,3], %s: f32[4], %b: f32[4], %m: f32[4], %v: f32[4]) -> f32[N,4,6,6] {
  %0 = conv2d %x, %w {pad = [1, 1, 1, 1]} : f32[N,4,6,6]
  %1 = batch_norm %0, %s, %b, %m, %v : f32[N,4,6,6]
  %y = relu %1 : f32[N,4,6,6]
  return %y
}
)";

Graph parse(const char* text) {
  Expected<Module> m = parse_module(text, "freeze_test");
  EXPECT_TRUE(m) << m.status().to_string();
  return m ? m->functions.front() : Graph();
}

NamedArrays weights() {
  return {{"w", random_array(DType::F32, {4, 4, 3, 3}, 1, -0.5, 0.5)},
          {"s", random_array(DType::F32, {4}, 2, 0.5, 1.5)},
          {"b", random_array(DType::F32, {4}, 3)},
          {"m", random_array(DType::F32, {4}, 4)},
          {"v", random_array(DType::F32, {4}, 5, 0.5, 1.5)}};
}

TEST(Freeze, FrozenWeightsFoldAtCompileTimeAndComputeTheSame) {
  Graph g = parse(kConvBn);
  Expected<Graph> frozen = freeze_inputs(g, weights());
  ASSERT_TRUE(frozen) << frozen.status().to_string();
  ASSERT_EQ(frozen->inputs().size(), 1u);
  EXPECT_EQ(frozen->value(frozen->inputs()[0]).name, "x");
  EXPECT_EQ(frozen->value(frozen->outputs()[0]).name, "y");

  Array x = random_array(DType::F32, {2, 4, 6, 6}, 6);
  NamedArrays all = weights();
  all.emplace("x", x);
  CompileOptions reference;
  reference.fuse = false;
  reference.backend = "reference";
  Expected<Executable> want = Session().compile(g, reference);
  ASSERT_TRUE(want) << want.status().to_string();
  Expected<std::vector<Array>> expected = want->run(all);
  ASSERT_TRUE(expected) << expected.status().to_string();

  // Fused, the batch norm folds into the conv's constant weights: one fused conv is left.
  Expected<Executable> exe = Session().compile(*frozen);
  ASSERT_TRUE(exe) << exe.status().to_string();
  size_t kernels = 0;
  for (const Node& n : exe->graph().nodes()) kernels += n.op != Op::Constant && n.op != Op::ToNchwc && n.op != Op::ToNchw;
  EXPECT_EQ(kernels, 1u) << print_graph(exe->graph());
  EXPECT_EQ(count_op(exe->graph(), Op::FusedConvBiasAct), 1u) << print_graph(exe->graph());
  Expected<std::vector<Array>> got = exe->run({{"x", x}});
  ASSERT_TRUE(got) << got.status().to_string();
  EXPECT_TRUE(close_to_scale((*got)[0], (*expected)[0], 1e-5));
}

TEST(Freeze, BadRequestsNameTheInput) {
  Graph g = parse(kConvBn);
  Expected<Graph> unknown = freeze_inputs(g, {{"q", random_array(DType::F32, {4}, 1)}});
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.status().message().find("no input %q"), std::string::npos) << unknown.status().message();
  Expected<Graph> wrong = freeze_inputs(g, {{"s", random_array(DType::F32, {5}, 1)}});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.status().message().find("input %s is f32[4], the value is f32[5]"), std::string::npos)
      << wrong.status().message();
  Expected<Graph> symbolic = freeze_inputs(g, {{"x", random_array(DType::F32, {1, 4, 6, 6}, 1)}});
  ASSERT_FALSE(symbolic);
  EXPECT_NE(symbolic.status().message().find("input %x has symbolic dims"), std::string::npos)
      << symbolic.status().message();
}

}  // namespace
}  // namespace fusebox::testing
