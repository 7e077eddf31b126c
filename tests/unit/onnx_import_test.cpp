// ONNX import of element-wise and neural-network ops: each test builds a small model with the
// protobuf API, imports it, runs it on the CPU reference backend and compares with values
// computed here (or, for conv/pool attribute mapping, with the fusebox op run directly).
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImport, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <cmath>
#include <functional>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

Array expected_from(const Array& like, const std::function<double(int64_t)>& f) {
  Array e(like.dtype(), like.shape());
  for (int64_t i = 0; i < e.numel(); ++i) e.set_f64(i, f(i));
  return e;
}

struct UnaryCase {
  std::string op;
  std::function<double(double)> f;
  double lo = -3, hi = 3;
};

TEST(OnnxImport, UnaryOpsMatchTheirDefinitions) {
  std::vector<UnaryCase> cases = {
      {"Relu", [](double x) { return x > 0 ? x : 0; }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Sqrt", [](double x) { return std::sqrt(x); }, 0.1, 4},
      {"Reciprocal", [](double x) { return 1 / x; }, 0.5, 4},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Log", [](double x) { return std::log(x); }, 0.1, 4},
      {"Neg", [](double x) { return -x; }},
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"HardSwish", [](double x) { return x * std::clamp(x / 6 + 0.5, 0.0, 1.0); }, -5, 5},
      {"HardSigmoid", [](double x) { return std::clamp(0.2 * x + 0.5, 0.0, 1.0); }, -5, 5},
      {"LeakyRelu", [](double x) { return x > 0 ? x : 0.01 * x; }},
      {"Identity", [](double x) { return x; }},
      {"Tan", [](double x) { return std::tan(x); }, -1.2, 1.2},
      {"Asin", [](double x) { return std::asin(x); }, -0.95, 0.95},
      {"Acos", [](double x) { return std::acos(x); }, -0.95, 0.95},
      {"Atan", [](double x) { return std::atan(x); }, -6, 6},
      {"Sinh", [](double x) { return std::sinh(x); }},
      {"Cosh", [](double x) { return std::cosh(x); }},
      {"Asinh", [](double x) { return std::asinh(x); }, -6, 6},
      {"Acosh", [](double x) { return std::acosh(x); }, 1.05, 8},
      {"Atanh", [](double x) { return std::atanh(x); }, -0.9, 0.9},
      {"Selu", [](double x) { return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1)); }},
      {"Softplus", [](double x) { return std::log1p(std::exp(x)); }, -30, 30},
      {"Softsign", [](double x) { return x / (1 + std::fabs(x)); }},
  };
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op);
    OnnxModel m(13);
    m.input("x", {2, "N"});
    m.node(c.op, {"x"}, {"y"});
    m.output("y");
    Array x = random_array(DType::F32, {2, 5}, 7, c.lo, c.hi);
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], expected_from(x, [&](int64_t i) { return c.f(x.get_f64(i)); }), 1e-5, 1e-6));
  }
}

// Opsets before 7: ops whose meaning did not change import (their legacy `consumed_inputs` is
// ignored) and compute what the current version computes.
TEST(OnnxImport, OpsetSixModelOfUnchangedOps) {
  OnnxModel m(6);
  m.input("x", {2, 3, 4, 5});
  m.input("s", {3});
  m.input("b", {3});
  set_attr(m.node("Elu", {"x"}, {"e"}), "consumed_inputs", std::vector<int64_t>{0});
  set_attr(m.node("InstanceNormalization", {"e", "s", "b"}, {"y"}), "epsilon", 0.01f);
  m.output("y");
  Array x = random_array(DType::F32, {2, 3, 4, 5}, 17, -3, 3);
  Array s = random_array(DType::F32, {3}, 18, 0.5, 2);
  Array b = random_array(DType::F32, {3}, 19, -1, 1);
  std::vector<Array> out = import_and_run(m, {{"x", x}, {"s", s}, {"b", b}});
  ASSERT_EQ(out.size(), 1u);
  Array want(DType::F32, {2, 3, 4, 5});
  for (int64_t nc = 0; nc < 6; ++nc) {
    double e[20], mean = 0, var = 0;
    for (int64_t i = 0; i < 20; ++i) {
      double v = x.get_f64(nc * 20 + i);
      e[i] = v < 0 ? std::exp(v) - 1 : v;
      mean += e[i] / 20;
    }
    for (double v : e) var += (v - mean) * (v - mean) / 20;
    for (int64_t i = 0; i < 20; ++i) {
      want.set_f64(nc * 20 + i, (e[i] - mean) / std::sqrt(var + 0.01) * s.get_f64(nc % 3) + b.get_f64(nc % 3));
    }
  }
  EXPECT_TRUE(arrays_close(out[0], want, 1e-5, 1e-5));
}

TEST(OnnxImport, AttributesOfHardSigmoidLeakyReluAndClip) {
  Array x = random_array(DType::F32, {3, 4}, 3, -4, 4);
  {
    OnnxModel m(9);
    m.input("x", {3, 4});
    auto& hs = m.node("HardSigmoid", {"x"}, {"a"});
    set_attr(hs, "alpha", 0.3f);
    set_attr(hs, "beta", 0.4f);
    auto& lr = m.node("LeakyRelu", {"a"}, {"b"});
    set_attr(lr, "alpha", 0.5f);
    auto& clip = m.node("Clip", {"x"}, {"c"});  // opset < 11: bounds are attributes
    set_attr(clip, "min", -1.0f);
    set_attr(clip, "max", 2.0f);
    m.output("b");
    m.output("c");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(arrays_close(out[0], expected_from(x, [&](int64_t i) {
      return std::clamp(double(0.3f) * x.get_f64(i) + double(0.4f), 0.0, 1.0);
    }), 1e-6));
    EXPECT_TRUE(arrays_close(out[1], expected_from(x, [&](int64_t i) { return std::clamp(x.get_f64(i), -1.0, 2.0); })));
  }
  {
    OnnxModel m(13);  // opset 11+: bounds are inputs; a missing one means no bound
    m.input("x", {3, 4});
    m.initializer("lo", scalar_f32(-0.5f));
    m.node("Clip", {"x", "lo"}, {"y"});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], expected_from(x, [&](int64_t i) { return std::max(x.get_f64(i), -0.5); })));
  }
  for (const auto& [lo, hi] : {std::pair<float, float>{-0.5f, 0.75f}, {1.0f, -1.0f}}) {
    OnnxModel m(13);  // bounds computed at run time: min(max(x, min), max); min > max gives max
    m.input("x", {3, 4});
    m.input("lo", {});
    m.input("hi", {});
    m.node("Clip", {"x", "lo", "hi"}, {"y"});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}, {"lo", scalar_f32(lo)}, {"hi", scalar_f32(hi)}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], expected_from(x, [&](int64_t i) { return std::min(std::max(x.get_f64(i), double(lo)), double(hi)); })));
  }
}

TEST(OnnxImport, PReluWithPerChannelSlope) {
  OnnxModel m(16);
  m.input("x", {1, 2, 3});
  m.initializer("slope", array_of(DType::F32, {2, 1}, {0.25, -2}));
  m.node("PRelu", {"x", "slope"}, {"y"});
  m.output("y");
  Array x = array_of(DType::F32, {1, 2, 3}, {-1, 0, 2, -3, 4, -0.5});
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {1, 2, 3}, {-0.25, 0, 2, 6, 4, 1}), 0, 0));
}

TEST(OnnxImport, BinaryOpsBroadcast) {
  Array a = random_array(DType::F32, {2, 3}, 1, 0.5, 2), b = random_array(DType::F32, {3}, 2, 0.5, 2);
  std::vector<std::pair<std::string, std::function<double(double, double)>>> cases = {
      {"Add", std::plus<double>()}, {"Sub", std::minus<double>()}, {"Mul", std::multiplies<double>()},
      {"Div", std::divides<double>()}, {"Pow", [](double x, double y) { return std::pow(x, y); }}};
  for (const auto& [op, f] : cases) {
    SCOPED_TRACE(op);
    OnnxModel m(14);
    m.input("a", {2, 3});
    m.input("b", {3});
    m.node(op, {"a", "b"}, {"y"});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"a", a}, {"b", b}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], expected_from(a, [&](int64_t i) { return f(a.get_f64(i), b.get_f64(i % 3)); }), 1e-5));
  }
}

TEST(OnnxImport, PowWithIntegerExponentCastsTheExponent) {
  OnnxModel m(15);
  m.input("x", {4});
  Array two(DType::I64, {});
  two.set_i64(0, 2);
  m.initializer("two", two);
  m.node("Pow", {"x", "two"}, {"y"});
  m.output("y");
  Array x = f32s({1.5f, -2, 3, 0.5f});
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], f32s({2.25f, 4, 9, 0.25f})));
}

TEST(OnnxImport, VariadicMaxMinSumMean) {
  Array a = random_array(DType::F32, {2, 3}, 1), b = random_array(DType::F32, {3}, 2), c = random_array(DType::F32, {2, 1}, 3);
  OnnxModel m(13);
  m.input("a", {2, 3});
  m.input("b", {3});
  m.input("c", {2, 1});
  m.node("Max", {"a", "b", "c"}, {"max"});
  m.node("Min", {"a", "b", "c"}, {"min"});
  m.node("Sum", {"a", "b", "c"}, {"sum"});
  m.node("Mean", {"a", "b"}, {"mean"});
  for (const char* o : {"max", "min", "sum", "mean"}) m.output(o);
  std::vector<Array> out = import_and_run(m, {{"a", a}, {"b", b}, {"c", c}});
  ASSERT_EQ(out.size(), 4u);
  auto A = [&](int64_t i) { return a.get_f64(i); };
  auto B = [&](int64_t i) { return b.get_f64(i % 3); };
  auto C = [&](int64_t i) { return c.get_f64(i / 3); };
  EXPECT_TRUE(arrays_close(out[0], expected_from(a, [&](int64_t i) { return std::max({A(i), B(i), C(i)}); })));
  EXPECT_TRUE(arrays_close(out[1], expected_from(a, [&](int64_t i) { return std::min({A(i), B(i), C(i)}); })));
  EXPECT_TRUE(arrays_close(out[2], expected_from(a, [&](int64_t i) { return float(float(A(i) + B(i)) + C(i)); }), 1e-6));
  EXPECT_TRUE(arrays_close(out[3], expected_from(a, [&](int64_t i) { return (A(i) + B(i)) / 2; }), 1e-6));
}

TEST(OnnxImport, EqualWhereAndCast) {
  OnnxModel m(13);
  m.input("a", {4});
  m.input("b", {4});
  m.node("Equal", {"a", "b"}, {"eq"});
  m.node("Where", {"eq", "a", "b"}, {"w"});
  auto& c = m.node("Cast", {"a"}, {"i"});
  set_attr(c, "to", int64_t(TP::INT32));
  m.output("eq");
  m.output("w");
  m.output("i");
  Array a = f32s({1, 2.7f, -3.5f, 4}), b = f32s({1, 2, 3, 4});
  std::vector<Array> out = import_and_run(m, {{"a", a}, {"b", b}});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::Bool, {4}, {1, 0, 0, 1})));
  EXPECT_TRUE(arrays_close(out[1], f32s({1, 2, 3, 4})));
  EXPECT_TRUE(arrays_close(out[2], array_of(DType::I32, {4}, {1, 2, -3, 4})));
}

TEST(OnnxImport, MatMulBatched) {
  OnnxModel m(13);
  m.input("a", {2, 3, 4});
  m.initializer("w", random_array(DType::F32, {4, 5}, 9));
  m.node("MatMul", {"a", "w"}, {"y"});
  m.output("y");
  Array a = random_array(DType::F32, {2, 3, 4}, 8), w = random_array(DType::F32, {4, 5}, 9);
  std::vector<Array> out = import_and_run(m, {{"a", a}});
  ASSERT_EQ(out.size(), 1u);
  Array e(DType::F32, {2, 3, 5});
  for (int64_t bm = 0; bm < 6; ++bm)
    for (int64_t n = 0; n < 5; ++n) {
      double s = 0;
      for (int64_t k = 0; k < 4; ++k) s += a.get_f64(bm * 4 + k) * w.get_f64(k * 5 + n);
      e.set_f64(bm * 5 + n, s);
    }
  EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-5));
}

TEST(OnnxImport, GemmTransposesScalesAndBroadcastsC) {
  OnnxModel m(13);
  m.input("a", {2, 3});  // transA: A' is [3,2]
  m.initializer("b", random_array(DType::F32, {4, 2}, 5));  // transB: B' is [2,4]
  m.initializer("c", random_array(DType::F32, {4}, 6));
  auto& g = m.node("Gemm", {"a", "b", "c"}, {"y"});
  set_attr(g, "transA", int64_t(1));
  set_attr(g, "transB", int64_t(1));
  set_attr(g, "alpha", 0.5f);
  set_attr(g, "beta", 2.0f);
  m.output("y");
  Array a = random_array(DType::F32, {2, 3}, 4), b = random_array(DType::F32, {4, 2}, 5), c = random_array(DType::F32, {4}, 6);
  std::vector<Array> out = import_and_run(m, {{"a", a}});
  ASSERT_EQ(out.size(), 1u);
  Array e(DType::F32, {3, 4});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) {
      double s = 0;
      for (int64_t k = 0; k < 2; ++k) s += a.get_f64(k * 3 + i) * b.get_f64(j * 2 + k);
      e.set_f64(i * 4 + j, 0.5 * s + 2.0 * c.get_f64(j));
    }
  EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-5));

  // Compiled with fusion, alpha and beta fold into the constant B and C at compile time: one
  // fused matmul with its bias, no separate scaling pass, the same values.
  Expected<Executable> fused = Session().compile(import_model(m));
  ASSERT_TRUE(fused) << fused.status().to_string();
  std::vector<Op> ops;
  for (const Node& n : fused->graph().nodes()) {
    if (n.op != Op::Constant) ops.push_back(n.op);
  }
  EXPECT_EQ(ops, (std::vector<Op>{Op::Transpose, Op::FusedMatmulBiasAct})) << print_graph(fused->graph());
  Expected<std::vector<Array>> got = fused->run({{"a", a}});
  ASSERT_TRUE(got) << got.status().to_string();
  EXPECT_TRUE(arrays_close((*got)[0], e, 1e-5, 1e-5));
}

// Before opset 13 Softmax flattens at `axis` and normalises over everything after it; from 13 on
// it normalises along `axis` only.
TEST(OnnxImport, SoftmaxAxisSemanticsDependOnOpset) {
  Array x = random_array(DType::F32, {2, 3, 4}, 11);
  for (int64_t opset : {11, 13}) {
    SCOPED_TRACE(opset);
    OnnxModel m(opset);
    m.input("x", {"N", 3, 4});
    set_attr(m.node("Softmax", {"x"}, {"y"}), "axis", int64_t(1));
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    Array e(DType::F32, {2, 3, 4});
    for (int64_t n = 0; n < 2; ++n) {
      if (opset == 11) {
        double s = 0;
        for (int64_t i = 0; i < 12; ++i) s += std::exp(x.get_f64(n * 12 + i));
        for (int64_t i = 0; i < 12; ++i) e.set_f64(n * 12 + i, std::exp(x.get_f64(n * 12 + i)) / s);
      } else {
        for (int64_t k = 0; k < 4; ++k) {
          double s = 0;
          for (int64_t c = 0; c < 3; ++c) s += std::exp(x.get_f64(n * 12 + c * 4 + k));
          for (int64_t c = 0; c < 3; ++c) e.set_f64(n * 12 + c * 4 + k, std::exp(x.get_f64(n * 12 + c * 4 + k)) / s);
        }
      }
    }
    EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-6));
  }
}

TEST(OnnxImport, LayerNormalization) {
  OnnxModel m(17);
  m.input("x", {2, 3, 4});
  m.initializer("s", f32s({1, 2, 0.5f, -1}));
  m.initializer("b", f32s({0, 0.1f, 0.2f, 0.3f}));
  set_attr(m.node("LayerNormalization", {"x", "s", "b"}, {"y", "mean", "inv_std"}), "epsilon", 1e-3f);
  m.output("y");
  m.output("mean");
  m.output("inv_std");
  Array x = random_array(DType::F32, {2, 3, 4}, 12);
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 3u);
  const double s[] = {1, 2, 0.5, -1}, b[] = {0, double(0.1f), double(0.2f), double(0.3f)};
  Array e(DType::F32, {2, 3, 4}), e_mean(DType::F32, {2, 3, 1}), e_inv(DType::F32, {2, 3, 1});
  for (int64_t r = 0; r < 6; ++r) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < 4; ++k) mean += x.get_f64(r * 4 + k) / 4;
    for (int64_t k = 0; k < 4; ++k) var += std::pow(x.get_f64(r * 4 + k) - mean, 2) / 4;
    for (int64_t k = 0; k < 4; ++k) {
      e.set_f64(r * 4 + k, (x.get_f64(r * 4 + k) - mean) / std::sqrt(var + double(1e-3f)) * s[k] + b[k]);
    }
    e_mean.set_f64(r, mean);
    e_inv.set_f64(r, 1 / std::sqrt(var + double(1e-3f)));
  }
  EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-5));
  // The Mean and InvStdDev outputs keep the normalised axes as size-1 dims.
  EXPECT_TRUE(arrays_close(out[1], e_mean, 1e-5, 1e-6));
  EXPECT_TRUE(arrays_close(out[2], e_inv, 1e-5, 1e-6));
}

TEST(OnnxImport, BatchNormalizationAndGlobalAveragePool) {
  OnnxModel m(15);
  m.input("x", {"N", 2, 2, 3});
  m.initializer("scale", f32s({1.5f, -1}));
  m.initializer("bias", f32s({0.5f, 0}));
  m.initializer("mean", f32s({0.1f, -0.2f}));
  m.initializer("var", f32s({2, 0.5f}));
  auto& bn = m.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"bn"});
  set_attr(bn, "epsilon", 1e-3f);
  set_attr(bn, "momentum", 0.9f);
  m.node("GlobalAveragePool", {"bn"}, {"y"});
  m.output("bn");
  m.output("y");
  Array x = random_array(DType::F32, {2, 2, 2, 3}, 13);
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 2u);
  const double sc[] = {1.5, -1}, bi[] = {0.5, 0}, mu[] = {double(0.1f), double(-0.2f)}, va[] = {2, 0.5};
  Array e = expected_from(x, [&](int64_t i) {
    int64_t c = (i / 6) % 2;
    return (x.get_f64(i) - mu[c]) / std::sqrt(va[c] + double(1e-3f)) * sc[c] + bi[c];
  });
  EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-6));
  Array pooled(DType::F32, {2, 2, 1, 1});
  for (int64_t p = 0; p < 4; ++p) {
    double s = 0;
    for (int64_t k = 0; k < 6; ++k) s += e.get_f64(p * 6 + k) / 6;
    pooled.set_f64(p, s);
  }
  EXPECT_TRUE(arrays_close(out[1], pooled, 1e-5, 1e-6));
}

// Conv attribute mapping: the imported conv equals fusebox conv2d with the pads ONNX implies.
TEST(OnnxImport, ConvPadsGroupsDilationAndAutoPad) {
  Array x = random_array(DType::F32, {1, 4, 6, 7}, 20), w = random_array(DType::F32, {6, 2, 3, 3}, 21);
  Array b = random_array(DType::F32, {6}, 22);
  struct Case {
    std::string auto_pad;
    std::vector<int64_t> strides, dilations, onnx_pads, fusebox_pads;
  };
  std::vector<Case> cases = {
      {"NOTSET", {1, 2}, {2, 1}, {1, 0, 2, 1}, {1, 0, 2, 1}},
      // in 6x7, stride 2: out 3x4, total pads 1 and 2 -> upper: (0,1), (1,1); lower: (1,0), (1,1)
      {"SAME_UPPER", {2, 2}, {1, 1}, {}, {0, 1, 1, 1}},
      {"SAME_LOWER", {2, 2}, {1, 1}, {}, {1, 1, 0, 1}},
      {"VALID", {1, 1}, {1, 1}, {}, {0, 0, 0, 0}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.auto_pad);
    OnnxModel m(11);
    m.input("x", {1, 4, 6, 7});
    m.initializer("w", w);
    m.initializer("b", b);
    auto& n = m.node("Conv", {"x", "w", "b"}, {"y"});
    set_attr(n, "group", int64_t(2));
    set_attr(n, "strides", c.strides);
    set_attr(n, "dilations", c.dilations);
    set_attr(n, "kernel_shape", std::vector<int64_t>{3, 3});
    if (c.auto_pad == "NOTSET") set_attr(n, "pads", c.onnx_pads);
    else set_attr(n, "auto_pad", c.auto_pad);
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    std::vector<Array> want = run_op(Op::Conv2d, {x, w, b},
                                     {{"stride", c.strides}, {"pad", c.fusebox_pads}, {"dilation", c.dilations}, {"groups", int64_t(2)}});
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(want.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], want[0], 0, 0));
  }
}

TEST(OnnxImport, ConvTransposeOutputShapeGivesPads) {
  Array x = random_array(DType::F32, {1, 2, 3, 3}, 30), w = random_array(DType::F32, {2, 3, 3, 3}, 31);
  OnnxModel m(11);
  m.input("x", {1, 2, 3, 3});
  m.initializer("w", w);
  auto& n = m.node("ConvTranspose", {"x", "w"}, {"y"});
  set_attr(n, "strides", std::vector<int64_t>{2, 2});
  set_attr(n, "output_shape", std::vector<int64_t>{5, 5});  // natural 7: total padding 2
  m.output("y");
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  std::vector<Array> want = run_op(Op::ConvTranspose2d, {x, w}, {{"stride", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{1, 1, 1, 1}}});
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{1, 3, 5, 5}));
  EXPECT_TRUE(arrays_close(out[0], want[0], 0, 0));
}

TEST(OnnxImport, MaxPoolAndAveragePoolAttributes) {
  Array x = random_array(DType::F32, {1, 2, 5, 6}, 40);
  OnnxModel m(12);
  m.input("x", {"N", 2, 5, 6});
  auto& mp = m.node("MaxPool", {"x"}, {"mp"});
  set_attr(mp, "kernel_shape", std::vector<int64_t>{3, 2});
  set_attr(mp, "strides", std::vector<int64_t>{2, 2});
  set_attr(mp, "pads", std::vector<int64_t>{1, 0, 1, 1});
  set_attr(mp, "ceil_mode", int64_t(1));
  auto& ap = m.node("AveragePool", {"x"}, {"ap"});
  set_attr(ap, "kernel_shape", std::vector<int64_t>{2, 2});
  set_attr(ap, "auto_pad", "SAME_UPPER");
  set_attr(ap, "count_include_pad", int64_t(1));
  m.output("mp");
  m.output("ap");
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 2u);
  std::vector<Array> mp_want = run_op(Op::MaxPool2d, {x}, {{"kernel", std::vector<int64_t>{3, 2}}, {"stride", std::vector<int64_t>{2, 2}},
                                                          {"pad", std::vector<int64_t>{1, 0, 1, 1}}, {"ceil_mode", true}});
  // SAME_UPPER with stride 1 and kernel 2: one pad row/column at the end, whatever the size.
  std::vector<Array> ap_want = run_op(Op::AvgPool2d, {x}, {{"kernel", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{0, 0, 1, 1}},
                                                          {"count_include_pad", true}});
  EXPECT_TRUE(arrays_close(out[0], mp_want[0], 0, 0));
  EXPECT_TRUE(arrays_close(out[1], ap_want[0], 0, 0));
}

TEST(OnnxImport, Reductions) {
  Array x = random_array(DType::F32, {2, 3, 4}, 50);
  OnnxModel m(13);
  m.input("x", {2, 3, 4});
  auto& mean = m.node("ReduceMean", {"x"}, {"mean"});  // opset 13: axes attribute
  set_attr(mean, "axes", std::vector<int64_t>{1});
  set_attr(mean, "keepdims", int64_t(0));
  m.initializer("axes", i64s({0, -1}));
  m.node("ReduceSum", {"x", "axes"}, {"sum"});  // opset 13: axes input, keepdims 1
  auto& noop = m.node("ReduceSum", {"x"}, {"noop"});
  set_attr(noop, "noop_with_empty_axes", int64_t(1));
  set_attr(m.node("ArgMax", {"x"}, {"arg"}), "axis", int64_t(2));
  m.output("mean");
  m.output("sum");
  m.output("noop");
  m.output("arg");
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 4u);
  Array e_mean(DType::F32, {2, 4}), e_sum(DType::F32, {1, 3, 1}), e_arg(DType::I64, {2, 3, 1});
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c) {
      double s = 0;
      for (int64_t b = 0; b < 3; ++b) s += x.get_f64(a * 12 + b * 4 + c);
      e_mean.set_f64(a * 4 + c, s / 3);
    }
  for (int64_t b = 0; b < 3; ++b) {
    double s = 0;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t c = 0; c < 4; ++c) s += x.get_f64(a * 12 + b * 4 + c);
    e_sum.set_f64(b, s);
  }
  for (int64_t r = 0; r < 6; ++r) {
    int64_t best = 0;
    for (int64_t c = 1; c < 4; ++c)
      if (x.get_f64(r * 4 + c) > x.get_f64(r * 4 + best)) best = c;
    e_arg.set_i64(r, best);
  }
  EXPECT_TRUE(arrays_close(out[0], e_mean, 1e-5, 1e-6));
  EXPECT_TRUE(arrays_close(out[1], e_sum, 1e-5, 1e-5));
  EXPECT_TRUE(arrays_close(out[2], x, 0, 0));
  EXPECT_TRUE(arrays_close(out[3], e_arg, 0, 0));
}

TEST(OnnxImport, ReduceAxesInputFromOpset18) {
  Array x = random_array(DType::F32, {2, 3}, 51);
  OnnxModel m(18);
  m.input("x", {2, 3});
  m.initializer("axes", i64s({1}));
  m.node("ReduceMax", {"x", "axes"}, {"y"});
  m.output("y");
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  Array e(DType::F32, {2, 1});
  for (int64_t r = 0; r < 2; ++r) e.set_f64(r, std::max({x.get_f64(r * 3), x.get_f64(r * 3 + 1), x.get_f64(r * 3 + 2)}));
  EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
