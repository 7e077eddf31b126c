// ONNX ops the importer writes as compositions of fusebox ops (src/onnx/convert_decomposed.cpp):
// each model runs unfused on the reference kernels, compared with values computed here from
// ONNX's definition (NaN, infinities and the edges of each branch included), and fused on the
// CPU pipeline, compared with the unfused run.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportDecomposed, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Runs the model unfused (reference) and fused (cpu); the two must agree (NaN equals NaN).
std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs, [](const Array& f, const Array& u) { return arrays_close(f, u, 1e-6, 1e-7); });
}

// A one-node model of a float input x[2,5] and output y.
OnnxModel unary_model(const std::string& op, const std::function<void(onnx::NodeProto&)>& attrs = {}) {
  OnnxModel m(17);
  m.input("x", {2, 5});
  auto& n = m.node(op, {"x"}, {"y"});
  if (attrs) attrs(n);
  m.output("y");
  return m;
}

Array special_input() {
  return array_f32({2, 5}, {-2.5f, -1, -0.25f, 0, 0.25f, 1, 2.5f, float(kInf), float(-kInf), float(kNaN)});
}

Array expected_of(const Array& x, DType dtype, const std::function<double(double)>& f) {
  Array e(dtype, x.shape());
  for (int64_t i = 0; i < x.numel(); ++i) e.set_f64(i, f(x.get_f64(i)));
  return e;
}

TEST(OnnxImportDecomposed, UnaryOpsMatchTheirDefinitions) {
  Array x = special_input();
  struct Case {
    std::string op;
    std::function<void(onnx::NodeProto&)> attrs;
    DType dtype;
    std::function<double(double)> f;
  };
  std::vector<Case> cases = {
      {"IsNaN", {}, DType::Bool, [](double v) { return std::isnan(v) ? 1.0 : 0.0; }},
      {"IsInf", {}, DType::Bool, [](double v) { return std::isinf(v) ? 1.0 : 0.0; }},
      {"IsInf", [](onnx::NodeProto& n) { set_attr(n, "detect_negative", int64_t(0)); }, DType::Bool,
       [](double v) { return v == kInf ? 1.0 : 0.0; }},
      {"IsInf", [](onnx::NodeProto& n) { set_attr(n, "detect_positive", int64_t(0)); }, DType::Bool,
       [](double v) { return v == -kInf ? 1.0 : 0.0; }},
      {"Sign", {}, DType::F32, [](double v) { return std::isnan(v) ? v : v > 0 ? 1.0 : v < 0 ? -1.0 : 0.0; }},
      {"ThresholdedRelu", [](onnx::NodeProto& n) { set_attr(n, "alpha", 0.25f); }, DType::F32,
       [](double v) { return v > 0.25 ? v : 0.0; }},
      {"Shrink", [](onnx::NodeProto& n) { set_attr(n, "lambd", 1.0f), set_attr(n, "bias", 0.5f); }, DType::F32,
       [](double v) { return v < -1 ? v + 0.5 : v > 1 ? v - 0.5 : 0.0; }},
      {"Elu", [](onnx::NodeProto& n) { set_attr(n, "alpha", 2.0f); }, DType::F32,
       [](double v) { return v < 0 ? 2 * (std::exp(v) - 1) : v; }},
      {"Celu", [](onnx::NodeProto& n) { set_attr(n, "alpha", 2.0f); }, DType::F32,
       [](double v) { return v < 0 ? 2 * (std::exp(v / 2) - 1) : v; }},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    std::vector<Array> out = run_both(unary_model(c.op, c.attrs), {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], expected_of(x, c.dtype, c.f), 1e-6, 1e-7));
  }
}

TEST(OnnxImportDecomposed, XorAndCastLike) {
  OnnxModel m(16);
  m.input("a", TP::BOOL, {2, 2});
  m.input("b", TP::BOOL, {2});
  m.input("x", TP::FLOAT, {3});
  m.input("like", TP::INT32, {1});
  m.node("Xor", {"a", "b"}, {"xor"});
  m.node("CastLike", {"x", "like"}, {"cast"});
  m.output("xor");
  m.output("cast");
  Array a = array_of(DType::Bool, {2, 2}, {0, 1, 1, 0}), b = array_of(DType::Bool, {2}, {1, 1});
  Array x = array_f32({3}, {-2.75f, 0.5f, 3.25f});
  std::vector<Array> out = run_both(m, {{"a", a}, {"b", b}, {"x", x}, {"like", array_of(DType::I32, {1}, {0})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].same_data(array_of(DType::Bool, {2, 2}, {1, 0, 0, 1})));
  EXPECT_TRUE(out[1].same_data(array_of(DType::I32, {3}, {-2, 0, 3})));
}

TEST(OnnxImportDecomposed, Reductions) {
  Array x = random_array(DType::F32, {2, 3, 4}, 21, 0.1, 3);
  x.set_f64(5, 90);  // exp(90) overflows f32: ReduceLogSumExp must still be finite
  struct Case {
    std::string op;
    std::function<double(double)> pre;
    std::function<double(double)> post;
  };
  std::vector<Case> cases = {
      {"ReduceL1", [](double v) { return std::fabs(v); }, [](double s) { return s; }},
      {"ReduceL2", [](double v) { return v * v; }, [](double s) { return std::sqrt(s); }},
      {"ReduceSumSquare", [](double v) { return v * v; }, [](double s) { return s; }},
      {"ReduceLogSum", [](double v) { return v; }, [](double s) { return std::log(s); }},
      {"ReduceLogSumExp", [](double v) { return std::exp(v); }, [](double s) { return std::log(s); }},
  };
  for (const Case& c : cases) {
    for (int64_t keepdims : {0, 1}) {
      SCOPED_TRACE(c.op + " keepdims " + std::to_string(keepdims));
      // Opset 13: axes as an attribute; reduce axis 1 of [2,3,4].
      OnnxModel m(13);
      m.input("x", {2, 3, 4});
      auto& n = m.node(c.op, {"x"}, {"y"});
      set_attr(n, "axes", std::vector<int64_t>{1});
      set_attr(n, "keepdims", keepdims);
      m.output("y");
      std::vector<Array> out = run_both(m, {{"x", x}});
      ASSERT_EQ(out.size(), 1u);
      Array e(DType::F32, keepdims ? std::vector<int64_t>{2, 1, 4} : std::vector<int64_t>{2, 4});
      for (int64_t i = 0; i < 2; ++i) {
        for (int64_t k = 0; k < 4; ++k) {
          double s = 0;
          for (int64_t j = 0; j < 3; ++j) s += c.pre(x.get_f64((i * 3 + j) * 4 + k));
          e.set_f64(i * 4 + k, c.post(s));
        }
      }
      if (c.op == "ReduceLogSumExp") e.set_f64(1, 90 + std::log(1 + std::exp(x.get_f64(1) - 90) + std::exp(x.get_f64(9) - 90)));
      EXPECT_TRUE(arrays_close(out[0], e, 1e-5, 1e-6));
    }
  }
  OnnxModel noop(18);
  noop.input("x", {2, 3});
  set_attr(noop.node("ReduceL1", {"x"}, {"y"}, "l1"), "noop_with_empty_axes", int64_t(1));
  noop.output("y");
  EXPECT_NE(import_error(noop).find("noop_with_empty_axes"), std::string::npos) << import_error(noop);
}

// select_last_index = 1 picks the last of equal extremes (reverse, arg-reduce, count from the end).
TEST(OnnxImportDecomposed, ArgMaxArgMinSelectLastIndex) {
  Array x = array_f32({2, 4}, {1, 3, 3, 0, 2, 2, 1, 2});
  for (const auto& [op, keepdims, want] :
       {std::tuple<const char*, int64_t, std::vector<int64_t>>{"ArgMax", 1, {2, 3}}, {"ArgMin", 0, {3, 2}}}) {
    SCOPED_TRACE(op);
    OnnxModel m(13);
    m.input("x", {2, 4});
    auto& n = m.node(op, {"x"}, {"i"});
    set_attr(n, "axis", int64_t(-1));
    set_attr(n, "keepdims", keepdims);
    set_attr(n, "select_last_index", int64_t(1));
    m.output("i");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), keepdims ? std::vector<int64_t>({2, 1}) : std::vector<int64_t>({2}));
    EXPECT_EQ(to_ints(out[0]), want);
  }
  OnnxModel dynamic(13);
  dynamic.input("x", {2, "N"});
  auto& n = dynamic.node("ArgMax", {"x"}, {"i"}, "arg");
  set_attr(n, "axis", int64_t(1));
  set_attr(n, "select_last_index", int64_t(1));
  dynamic.output("i");
  EXPECT_NE(import_error(dynamic).find("needs a static size along the axis"), std::string::npos) << import_error(dynamic);
}

TEST(OnnxImportDecomposed, TriluWithConstantK) {
  Array x = random_array(DType::F32, {2, 3, 4}, 31);
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-1, 0, 2}) {
      SCOPED_TRACE("upper " + std::to_string(upper) + " k " + std::to_string(k));
      OnnxModel m(14);
      m.input("x", {2, 3, 4});
      m.initializer("k", array_of_ints(DType::I64, {}, {k}));
      set_attr(m.node("Trilu", {"x", "k"}, {"y"}), "upper", upper);
      m.output("y");
      std::vector<Array> out = run_both(m, {{"x", x}});
      ASSERT_EQ(out.size(), 1u);
      Array e = expected_of(x, DType::F32, [](double v) { return v; });
      for (int64_t i = 0; i < x.numel(); ++i) {
        int64_t r = (i / 4) % 3, c = i % 4;
        if (upper ? c - r < k : c - r > k) e.set_f64(i, 0);
      }
      EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
    }
  }
  OnnxModel dynamic(14);
  dynamic.input("x", {"N", 4});
  dynamic.node("Trilu", {"x"}, {"y"}, "tri");
  dynamic.output("y");
  EXPECT_NE(import_error(dynamic).find("needs a static size along axis 0"), std::string::npos) << import_error(dynamic);
}

TEST(OnnxImportDecomposed, HardmaxMarksTheFirstMaximum) {
  // Ties along axis 1 of [2,3,2]: the first of the equal maxima is 1.
  Array x = array_f32({2, 3, 2}, {1, 5, 3, 5, 3, 0, -1, 2, -1, 2, -3, 2});
  OnnxModel m(13);
  m.input("x", {2, 3, 2});
  set_attr(m.node("Hardmax", {"x"}, {"y"}), "axis", int64_t(1));
  m.output("y");
  std::vector<Array> out = run_both(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].same_data(array_f32({2, 3, 2}, {0, 1, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0})));
  // Before opset 13, the input is flattened at `axis`: refused unless it is the last axis.
  OnnxModel old(11);
  old.input("x", {2, 3, 2});
  set_attr(old.node("Hardmax", {"x"}, {"y"}, "hm"), "axis", int64_t(1));
  old.output("y");
  EXPECT_NE(import_error(old).find("only the last axis"), std::string::npos) << import_error(old);
}

TEST(OnnxImportDecomposed, DepthToSpaceAndSpaceToDepth) {
  // x[n, c, h, w] = 1000n + 100c + 10h + w; blocksize 2, C = 8, H = 2, W = 3.
  Array x(DType::F32, {1, 8, 2, 3});
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, 100 * (i / 6) + 10 * ((i / 3) % 2) + i % 3);
  auto value = [&](int64_t c, int64_t h, int64_t w) { return x.get_f64((c * 2 + h) * 3 + w); };
  for (const char* mode : {"DCR", "CRD"}) {
    SCOPED_TRACE(mode);
    OnnxModel m(13);
    m.input("x", {"N", 8, 2, 3});
    auto& n = m.node("DepthToSpace", {"x"}, {"y"});
    set_attr(n, "blocksize", int64_t(2));
    set_attr(n, "mode", mode);
    auto& back = m.node("SpaceToDepth", {"y"}, {"z"});
    set_attr(back, "blocksize", int64_t(2));
    m.output("y");
    m.output("z");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 2u);
    // ONNX: DCR y[c, 2h+i, 2w+j] = x[(2i + j) * C' + c, h, w]; CRD: x[c * 4 + 2i + j, h, w].
    Array e(DType::F32, {1, 2, 4, 6});
    for (int64_t c = 0; c < 2; ++c)
      for (int64_t yh = 0; yh < 4; ++yh)
        for (int64_t yw = 0; yw < 6; ++yw) {
          int64_t i = yh % 2, j = yw % 2;
          int64_t src = std::string(mode) == "DCR" ? (2 * i + j) * 2 + c : c * 4 + 2 * i + j;
          e.set_f64((c * 4 + yh) * 6 + yw, value(src, yh / 2, yw / 2));
        }
    EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
    // SpaceToDepth is DepthToSpace's DCR inverse.
    if (std::string(mode) == "DCR") EXPECT_TRUE(arrays_close(out[1], x, 0, 0));
  }
}

TEST(OnnxImportDecomposed, EyeLikeIsAConstant) {
  OnnxModel m(9);
  m.input("x", TP::INT32, {3, 4});
  auto& n = m.node("EyeLike", {"x"}, {"y"});
  set_attr(n, "k", int64_t(1));
  set_attr(n, "dtype", int64_t(TP::FLOAT));
  m.output("y");
  std::vector<Array> out = run_both(m, {{"x", array_of(DType::I32, {3, 4}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].same_data(array_f32({3, 4}, {0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1})));
}

// NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss over [N=2, C=3, D=2] with weights and an
// ignore_index, every reduction, against the definition computed here.
TEST(OnnxImportDecomposed, NllAndSoftmaxCrossEntropyLoss) {
  Array x = random_array(DType::F32, {2, 3, 2}, 41);
  Array target = array_of_ints(DType::I64, {2, 2}, {2, 0, -1, 1});  // -1: ignored
  Array weight = array_f32({3}, {0.5f, 2, 1.5f});
  for (const char* op : {"NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"}) {
    bool sce = std::string(op) == "SoftmaxCrossEntropyLoss";
    // log_softmax over C for SoftmaxCrossEntropyLoss.
    Array in = x.clone();
    if (sce) {
      for (int64_t nn = 0; nn < 2; ++nn)
        for (int64_t d = 0; d < 2; ++d) {
          double s = 0;
          for (int64_t c = 0; c < 3; ++c) s += std::exp(x.get_f64((nn * 3 + c) * 2 + d));
          for (int64_t c = 0; c < 3; ++c) in.set_f64((nn * 3 + c) * 2 + d, x.get_f64((nn * 3 + c) * 2 + d) - std::log(s));
        }
    }
    Array none(DType::F32, {2, 2});
    double sum = 0, wsum = 0;
    for (int64_t nn = 0; nn < 2; ++nn)
      for (int64_t d = 0; d < 2; ++d) {
        int64_t t = target.get_i64(nn * 2 + d);
        double w = t == -1 ? 0 : weight.get_f64(t);
        double l = t == -1 ? 0 : -in.get_f64((nn * 3 + t) * 2 + d) * w;
        none.set_f64(nn * 2 + d, l);
        sum += l, wsum += w;
      }
    for (const char* reduction : {"none", "sum", "mean"}) {
      SCOPED_TRACE(std::string(op) + " " + reduction);
      OnnxModel m(13);
      m.input("x", {2, 3, 2});
      m.input("t", TP::INT64, {2, 2});
      m.input("w", {3});
      auto& n = m.node(op, {"x", "t", "w"}, {"loss"});
      set_attr(n, "reduction", reduction);
      set_attr(n, "ignore_index", int64_t(-1));
      m.output("loss");
      std::vector<Array> out = run_both(m, {{"x", x}, {"t", target}, {"w", weight}});
      ASSERT_EQ(out.size(), 1u);
      Array want = std::string(reduction) == "none"  ? none
                   : std::string(reduction) == "sum" ? array_f32({}, {float(sum)})
                                                     : array_f32({}, {float(sum / wsum)});
      EXPECT_TRUE(arrays_close(out[0], want, 1e-5, 1e-6));
    }
  }
}

// GatherElements along axis 0 and 1, negative indices, indices smaller than the data elsewhere.
TEST(OnnxImportDecomposed, GatherElements) {
  Array data = random_array(DType::F32, {3, 4}, 51);
  Array idx = array_of_ints(DType::I64, {2, 3}, {0, -1, 3, 2, 1, -4});
  for (int64_t axis : {0, 1}) {
    SCOPED_TRACE("axis " + std::to_string(axis));
    Array ix = idx.clone();
    if (axis == 0) ix = array_of_ints(DType::I64, {2, 3}, {0, -1, 2, 2, 1, -3});
    OnnxModel m(13);
    m.input("data", {3, 4});
    m.input("idx", TP::INT64, {2, 3});
    set_attr(m.node("GatherElements", {"data", "idx"}, {"y"}), "axis", axis);
    m.output("y");
    std::vector<Array> out = run_both(m, {{"data", data}, {"idx", ix}});
    ASSERT_EQ(out.size(), 1u);
    Array e(DType::F32, {2, 3});
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j) {
        int64_t k = ix.get_i64(i * 3 + j), d = axis == 0 ? 3 : 4;
        if (k < 0) k += d;
        e.set_f64(i * 3 + j, axis == 0 ? data.get_f64(k * 4 + j) : data.get_f64(i * 4 + k));
      }
    EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
  }
}

// Tile: every output element is x at the index modulo x's size; a symbolic batch repeated once
// keeps its symbol, repeated twice is the one size the reshape infers.
TEST(OnnxImportDecomposed, Tile) {
  struct Case {
    std::vector<int64_t> reps;
    std::vector<int64_t> want_shape;
  };
  Array x = random_array(DType::F32, {2, 3}, 71);
  for (const Case& c : {Case{{1, 2}, {2, 6}}, Case{{2, 1}, {4, 3}}, Case{{3, 2}, {6, 6}}, Case{{1, 0}, {2, 0}}}) {
    SCOPED_TRACE("repeats " + std::to_string(c.reps[0]) + "," + std::to_string(c.reps[1]));
    OnnxModel m(13);
    m.input("x", {"N", 3});
    m.initializer("r", i64s(c.reps));
    m.node("Tile", {"x", "r"}, {"y"});
    m.output("y");
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    Array e(DType::F32, c.want_shape);
    for (int64_t i = 0; i < c.want_shape[0]; ++i)
      for (int64_t j = 0; j < c.want_shape[1]; ++j) e.set_f64(i * c.want_shape[1] + j, x.get_f64((i % 2) * 3 + j % 3));
    EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
  }
}

// OneHot along each axis: negative indices count from the end from opset 11 (before, and out of
// range always, they match nothing and give `off`); float indices are truncated.
TEST(OnnxImportDecomposed, OneHot) {
  const int64_t depth = 4;
  Array idx = array_of_ints(DType::I64, {2, 3}, {0, 3, -1, 5, -4, 2});
  Array values = random_array(DType::F32, {2}, 81);
  for (int64_t opset : {9, 11}) {
    for (int64_t axis : {0, 1, -1}) {
      SCOPED_TRACE("opset " + std::to_string(opset) + " axis " + std::to_string(axis));
      OnnxModel m(opset);
      m.input("i", TP::INT64, {2, 3});
      m.input("values", {2});
      Array d(DType::I64, {1});
      d.set_i64(0, depth);
      m.initializer("depth", d);
      set_attr(m.node("OneHot", {"i", "depth", "values"}, {"y"}), "axis", axis);
      m.output("y");
      std::vector<Array> out = run_both(m, {{"i", idx}, {"values", values}});
      ASSERT_EQ(out.size(), 1u);
      int64_t a = axis < 0 ? axis + 3 : axis;
      std::vector<int64_t> shape = {2, 3};
      shape.insert(shape.begin() + a, depth);
      Array e(DType::F32, shape);
      for (int64_t p = 0; p < 2; ++p)
        for (int64_t q = 0; q < 3; ++q) {
          int64_t v = idx.get_i64(p * 3 + q);
          if (opset >= 11 && v < 0) v += depth;
          for (int64_t k = 0; k < depth; ++k) {
            int64_t pos[3] = {p, q, 0};
            std::vector<int64_t> at(pos, pos + 2);
            at.insert(at.begin() + a, k);
            e.set_f64((at[0] * shape[1] + at[1]) * shape[2] + at[2], values.get_f64(v == k ? 1 : 0));
          }
        }
      EXPECT_TRUE(arrays_close(out[0], e, 0, 0));
    }
  }
}

// QuantizeLinear per axis (i8, halves round to even, saturation) and DequantizeLinear back.
TEST(OnnxImportDecomposed, QuantizeAndDequantizeLinear) {
  Array x = random_array(DType::F32, {2, 3, 4}, 91, -300, 300);
  x.set_f64(0, 2.5), x.set_f64(1, -3.5), x.set_f64(2, 0.5);  // halves, with scale 1 below
  Array scale = array_f32({3}, {1.0f, 0.7f, 2.5f});
  Array zp = array_of_ints(DType::I8, {3}, {0, -3, 10});
  OnnxModel m(13);
  m.input("x", {2, 3, 4});
  m.initializer("scale", scale);
  m.initializer("zp", zp);
  m.node("QuantizeLinear", {"x", "scale", "zp"}, {"q"});  // axis 1 by default
  m.node("DequantizeLinear", {"q", "scale", "zp"}, {"d"});
  m.output("q");
  m.output("d");
  std::vector<Array> out = run_both(m, {{"x", x}});
  ASSERT_EQ(out.size(), 2u);
  Array q(DType::I8, {2, 3, 4}), d(DType::F32, {2, 3, 4});
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t c = (i / 4) % 3;
    float v = std::nearbyint(x.data<float>()[i] / scale.data<float>()[c]) + float(zp.get_i64(c));
    int64_t qi = int64_t(std::clamp(v, -128.0f, 127.0f));
    q.set_i64(i, qi);
    d.data<float>()[i] = (float(qi) - float(zp.get_i64(c))) * scale.data<float>()[c];
  }
  EXPECT_TRUE(arrays_close(out[0], q, 0, 0));
  EXPECT_TRUE(arrays_close(out[1], d, 0, 0));
}

// DynamicQuantizeLinear: scale and zero point from the data's range (widened to include 0).
TEST(OnnxImportDecomposed, DynamicQuantizeLinear) {
  for (double lo : {-3.0, 0.5}) {  // a range across 0, and one above it (the minimum becomes 0)
    SCOPED_TRACE("lo " + std::to_string(lo));
    Array x = random_array(DType::F32, {3, 5}, 93, lo, 7.0);
    OnnxModel m(13);
    m.input("x", {3, 5});
    m.node("DynamicQuantizeLinear", {"x"}, {"y", "s", "zp"});
    for (const char* o : {"y", "s", "zp"}) m.output(o);
    std::vector<Array> out = run_both(m, {{"x", x}});
    ASSERT_EQ(out.size(), 3u);
    const float* v = x.data<float>();
    float mn = std::min(*std::min_element(v, v + 15), 0.0f), mx = std::max(*std::max_element(v, v + 15), 0.0f);
    float s = (mx - mn) / 255.0f;
    float zp = std::nearbyint(std::clamp(0.0f - mn / s, 0.0f, 255.0f));
    Array y(DType::U8, {3, 5});
    for (int64_t i = 0; i < 15; ++i) y.set_i64(i, int64_t(std::clamp(std::nearbyint(v[i] / s) + zp, 0.0f, 255.0f)));
    EXPECT_TRUE(arrays_close(out[0], y, 0, 0));
    EXPECT_EQ(out[1].get_f64(0), double(s));
    EXPECT_EQ(out[2].get_i64(0), int64_t(zp));
  }
}

// Window functions fold to constants; the expected values are the textbook ones (Hann's and
// Blackman's ends are 0 and their centre 1; Hamming's ends 25/46 - 21/46).
TEST(OnnxImportDecomposed, WindowFunctions) {
  struct Case {
    const char* op;
    int64_t size, periodic;
    std::vector<double> want;
  };
  const double h0 = 4.0 / 46.0;
  for (const Case& c : {Case{"HannWindow", 4, 1, {0, 0.5, 1, 0.5}}, Case{"HannWindow", 5, 0, {0, 0.5, 1, 0.5, 0}},
                        Case{"HammingWindow", 2, 1, {h0, 1}}, Case{"BlackmanWindow", 3, 0, {0, 1, 0}},
                        Case{"BlackmanWindow", 1, 0, {0}}}) {
    SCOPED_TRACE(std::string(c.op) + " size " + std::to_string(c.size));
    OnnxModel m(17);
    m.input("x", {1});
    Array size(DType::I64, {});
    size.set_i64(0, c.size);
    m.initializer("size", size);
    set_attr(m.node(c.op, {"size"}, {"w"}), "periodic", c.periodic);
    m.node("Identity", {"x"}, {"y"});
    m.output("w");
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", random_array(DType::F32, {1}, 61)}});
    ASSERT_EQ(out.size(), 2u);
    EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {c.size}, c.want), 1e-6, 1e-6));
  }
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
