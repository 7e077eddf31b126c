// ONNX control flow resolved at import (src/onnx/convert_control.cpp): If picks the branch of a
// known condition, Loop unrolls over a known trip count and condition, Scan over a static sequence
// length. Each model runs unfused on the reference kernels, compared with the values computed here
// straight from ONNX's definitions on random inputs, and fused on the CPU pipeline, compared with
// the unfused run; a driving value given at run time specialises an OnnxExecutable per value; bad
// input is refused with a message naming the node.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportControl, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <cmath>

#include "onnx_run/onnx_executable.h"
#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

std::vector<Array> run_both(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs,
                               [](const Array& f, const Array& u) { return arrays_close(f, u, 1e-6, 1e-6); });
}

Array bool_scalar(bool v) {
  Array a(DType::Bool, {});
  a.data<bool>()[0] = v;
  return a;
}

Array i64_scalar(int64_t v) {
  Array a(DType::I64, {});
  a.set_i64(0, v);
  return a;
}

// An array of `shape` whose elements are f(flat index).
template <typename F>
Array f32_of(std::vector<int64_t> shape, F f) {
  Array a(DType::F32, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, f(i));
  return a;
}

void expect_close(const Array& got, const Array& want) {
  EXPECT_TRUE(arrays_close(got, want, 1e-5, 1e-5)) << got.type_string() << " vs " << want.type_string();
}

// ---- If ----

// y = If(cond): Relu(x) or Neg(x) of the outer x.
void add_relu_or_neg(OnnxModel& m, const std::string& cond) {
  OnnxModel then_branch(13), else_branch(13);
  then_branch.node("Relu", {"x"}, {"a"});
  then_branch.output("a");
  else_branch.node("Neg", {"x"}, {"b"});
  else_branch.output("b");
  auto& n = m.node("If", {cond}, {"y"}, "if");
  set_attr(n, "then_branch", then_branch);
  set_attr(n, "else_branch", else_branch);
  m.output("y");
}

// x [2,3]; t = 2x; If(cond): then (x + 1), its own initializer and a `t` of its own that shadows
// the outer one; else t * x, reading the outer t. out = If + t, which must read the outer t again.
OnnxModel if_model(bool cond) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.initializer("cond", bool_scalar(cond));
  m.initializer("two", scalar_f32(2));
  m.node("Mul", {"x", "two"}, {"t"});
  OnnxModel then_branch(13);
  then_branch.initializer("one", scalar_f32(1));
  then_branch.node("Add", {"x", "one"}, {"t"});
  then_branch.output("t");
  OnnxModel else_branch(13);
  else_branch.node("Mul", {"t", "x"}, {"e"});
  else_branch.output("e");
  auto& n = m.node("If", {"cond"}, {"r"}, "if");
  set_attr(n, "then_branch", then_branch);
  set_attr(n, "else_branch", else_branch);
  m.node("Add", {"r", "t"}, {"out"});
  m.output("out");
  return m;
}

TEST(OnnxImportControl, IfImportsTheBranchOfAKnownCondition) {
  Array x = random_array(DType::F32, {2, 3}, 11);
  for (bool cond : {true, false}) {
    SCOPED_TRACE(cond ? "then" : "else");
    std::vector<Array> got = run_both(if_model(cond), {{"x", x}});
    ASSERT_EQ(got.size(), 1u);
    Array want = f32_of({2, 3}, [&](int64_t i) {
      double v = x.get_f64(i), t = 2 * v;
      return (cond ? v + 1 : t * v) + t;
    });
    expect_close(got[0], want);
  }
}

// The condition is a graph input: one plan per value, each the branch that value picks.
TEST(OnnxImportControl, IfOnAGraphInputSpecialisesPerValue) {
  OnnxModel m(13);
  m.input("cond", TP::BOOL, {});
  m.input("x", {"N", 3});
  add_relu_or_neg(m, "cond");
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "if.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Array x = random_array(DType::F32, {4, 3}, 12);
  for (bool cond : {true, false, true}) {
    Expected<std::vector<Array> > got = exe->run({{"cond", bool_scalar(cond)}, {"x", x}});
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    expect_close((*got)[0], f32_of({4, 3}, [&](int64_t i) {
                   double v = x.get_f64(i);
                   return cond ? std::max(v, 0.0) : -v;
                 }));
  }
  EXPECT_EQ(exe->specializations(), 2u);
  EXPECT_EQ(exe->value_inputs(), std::set<std::string>{"cond"});
}

// ---- Loop ----

// A Loop body taking the iteration number i, the condition c and one carried value y_in.
OnnxModel loop_body(const std::vector<OnnxDim>& y_dims) {
  OnnxModel body(13);
  body.input("i", TP::INT64, {});
  body.input("c", TP::BOOL, {});
  body.input("y_in", y_dims);
  return body;
}

// Finishes a loop_body whose nodes define c_out and y_out, scanning y_out when `scanned`, and adds
// Loop(M, cond, x) -> y (, ys) named 'loop' to m.
void add_loop(OnnxModel& m, OnnxModel& body, const std::string& cond, bool scanned) {
  if (scanned) body.node("Identity", {"y_out"}, {"s_out"});
  body.output("c_out");
  body.output("y_out");
  if (scanned) body.output("s_out");
  auto& n = m.node("Loop", {"M", cond, "x"},
                   scanned ? std::vector<std::string>{"y", "ys"} : std::vector<std::string>{"y"}, "loop");
  set_attr(n, "body", body);
}

// Loop(M, cond, x): y = y * half + float(i), scanned; the body's condition is i < limit (outer
// names half and limit), so the loop stops after iteration `limit` unless M stops it first.
OnnxModel loop_model(int64_t trip, int64_t limit) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.initializer("M", i64_scalar(trip));
  m.initializer("cond", bool_scalar(true));
  m.initializer("half", scalar_f32(0.5f));
  m.initializer("limit", i64_scalar(limit));
  OnnxModel body = loop_body({2, 3});
  auto& cast = body.node("Cast", {"i"}, {"fi"});
  set_attr(cast, "to", int64_t(TP::FLOAT));
  body.node("Mul", {"y_in", "half"}, {"h"});
  body.node("Add", {"h", "fi"}, {"y_out"});
  body.node("Less", {"i", "limit"}, {"c_out"});
  add_loop(m, body, "cond", true);
  m.output("y");
  m.output("ys");
  return m;
}

TEST(OnnxImportControl, LoopUnrollsUntilTheTripCountOrTheCondition) {
  Array x = random_array(DType::F32, {2, 3}, 21);
  struct Case {
    int64_t trip, limit, iterations;
  };
  for (Case c : {Case{5, 2, 3}, Case{2, 10, 2}, Case{1, 0, 1}}) {
    SCOPED_TRACE("M = " + std::to_string(c.trip) + ", limit = " + std::to_string(c.limit));
    std::vector<Array> got = run_both(loop_model(c.trip, c.limit), {{"x", x}});
    ASSERT_EQ(got.size(), 2u);
    std::vector<double> y(x.numel());
    Array ys(DType::F32, {c.iterations, 2, 3});
    for (int64_t i = 0; i < x.numel(); ++i) y[size_t(i)] = x.get_f64(i);
    for (int64_t it = 0; it < c.iterations; ++it) {
      for (int64_t i = 0; i < x.numel(); ++i) {
        y[size_t(i)] = float(float(y[size_t(i)]) * 0.5f) + float(it);
        ys.set_f64(it * 6 + i, y[size_t(i)]);
      }
    }
    expect_close(got[0], f32_of({2, 3}, [&](int64_t i) { return y[size_t(i)]; }));
    expect_close(got[1], ys);
  }
}

// The trip count is a graph input: each count unrolls (and compiles) once.
TEST(OnnxImportControl, LoopTripCountFromAGraphInputSpecialisesPerValue) {
  OnnxModel m(13);
  m.input("M", TP::INT64, {});
  m.input("x", {"N", 3});
  OnnxModel body = loop_body({"N", 3});
  body.node("Add", {"y_in", "x"}, {"y_out"});
  body.node("Identity", {"c"}, {"c_out"});
  add_loop(m, body, "", true);
  m.output("ys");
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "loop.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Array x = random_array(DType::F32, {5, 3}, 22);
  for (int64_t trip : {2, 4}) {
    Expected<std::vector<Array> > got = exe->run({{"M", i64_scalar(trip)}, {"x", x}});
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    // Iteration k holds x * (k + 2), summed in f32 one addition at a time.
    expect_close((*got)[0], f32_of({trip, 5, 3}, [&](int64_t i) {
                   float v = float(x.get_f64(i % 15)), y = v;
                   for (int64_t k = 0; k <= i / 15; ++k) y += v;
                   return double(y);
                 }));
  }
  EXPECT_EQ(exe->specializations(), 2u);
}

// Range's function body: the trip count ceil((limit - start) / delta) is computed from scalar
// graph inputs (rank-0 float arithmetic folds once they are given), the loop adds delta.
TEST(OnnxImportControl, LoopOfRangesFunctionBody) {
  OnnxModel m(13);
  for (const char* name : {"start", "limit", "delta"}) m.input(name, {});
  m.node("Sub", {"limit", "start"}, {"diff"});
  m.node("Div", {"diff", "delta"}, {"q"});
  m.node("Ceil", {"q"}, {"qc"});
  m.node("Relu", {"qc"}, {"count"});
  set_attr(m.node("Cast", {"count"}, {"M"}), "to", int64_t(TP::INT64));
  set_attr(m.node("Cast", {"count"}, {"cond"}), "to", int64_t(TP::BOOL));
  OnnxModel body(13);
  body.input("i", TP::INT64, {});
  body.input("c", TP::BOOL, {});
  body.input("prev", {});
  body.node("Identity", {"c"}, {"c_out"});
  body.node("Add", {"prev", "delta"}, {"next"});
  body.node("Identity", {"prev"}, {"value"});
  body.output("c_out");
  body.output("next");
  body.output("value");
  set_attr(m.node("Loop", {"M", "cond", "start"}, {"last", "range"}, "loop"), "body", body);
  m.output("range");
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "range.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Array r = random_array(DType::F32, {3, 2}, 61, -4, 4);
  for (int64_t k = 0; k < 3; ++k) {
    float start = float(r.get_f64(2 * k)), delta = k == 1 ? -0.7f : 0.6f;
    float limit = start + float(r.get_f64(2 * k + 1)) * (delta < 0 ? -1.0f : 1.0f) + 3 * delta;
    Expected<std::vector<Array> > got =
        exe->run({{"start", scalar_f32(start)}, {"limit", scalar_f32(limit)}, {"delta", scalar_f32(delta)}});
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    int64_t count = int64_t(std::max(std::ceil((limit - start) / delta), 0.0f));
    ASSERT_GT(count, 0);
    std::vector<float> want{start};
    while (int64_t(want.size()) < count) want.push_back(want.back() + delta);
    expect_close((*got)[0], f32s(want));
  }
  EXPECT_EQ(exe->specializations(), 3u);
}

// ---- Scan ----

// Scan-11: state s [2]; x [4,2] scanned along axis 0 forwards, w [2,4] along axis 1 backwards;
// s += x_t * w_t, scan output s - x_t stacked along axis -1 in reverse order.
TEST(OnnxImportControl, ScanFollowsAxesAndDirections) {
  OnnxModel m(11);
  m.input("s0", {2});
  m.input("x", {4, 2});
  m.input("w", {2, 4});
  OnnxModel body(11);
  body.input("s_in", {2});
  body.input("xt", {2});
  body.input("wt", {2});
  body.node("Mul", {"xt", "wt"}, {"p"});
  body.node("Add", {"s_in", "p"}, {"s_out"});
  body.node("Sub", {"s_out", "xt"}, {"o"});
  body.output("s_out");
  body.output("o");
  auto& n = m.node("Scan", {"s0", "x", "w"}, {"s", "ys"}, "scan");
  set_attr(n, "body", body);
  set_attr(n, "num_scan_inputs", int64_t(2));
  set_attr(n, "scan_input_axes", std::vector<int64_t>{0, 1});
  set_attr(n, "scan_input_directions", std::vector<int64_t>{0, 1});
  set_attr(n, "scan_output_axes", std::vector<int64_t>{-1});
  set_attr(n, "scan_output_directions", std::vector<int64_t>{1});
  m.output("s");
  m.output("ys");
  Array s0 = random_array(DType::F32, {2}, 31), x = random_array(DType::F32, {4, 2}, 32),
        w = random_array(DType::F32, {2, 4}, 33);
  std::vector<Array> got = run_both(m, {{"s0", s0}, {"x", x}, {"w", w}});
  ASSERT_EQ(got.size(), 2u);
  float s[2] = {float(s0.get_f64(0)), float(s0.get_f64(1))};
  Array ys(DType::F32, {2, 4});
  for (int64_t t = 0; t < 4; ++t) {
    for (int64_t j = 0; j < 2; ++j) {
      float xt = float(x.get_f64(t * 2 + j)), wt = float(w.get_f64(j * 4 + (3 - t)));
      s[j] += xt * wt;
      ys.set_f64(j * 4 + (3 - t), s[j] - xt);
    }
  }
  expect_close(got[0], f32_of({2}, [&](int64_t i) { return s[i]; }));
  expect_close(got[1], ys);
}

// Scan-8: batch axis 0, sequence_lens all full, the scan input read backwards.
TEST(OnnxImportControl, Scan8UnrollsEveryBatchElement) {
  OnnxModel m(8);
  m.input("init", {2, 2});
  m.input("x", {2, 3, 2});
  Array lens(DType::I32, {2});
  lens.set_i64(0, 3);
  lens.set_i64(1, 3);
  m.initializer("lens", lens);
  OnnxModel body(8);
  body.input("s_in", {2});
  body.input("xt", {2});
  body.node("Add", {"s_in", "xt"}, {"s_out"});
  body.node("Mul", {"s_out", "xt"}, {"o"});
  body.output("s_out");
  body.output("o");
  auto& n = m.node("Scan", {"lens", "init", "x"}, {"y", "z"}, "scan");
  set_attr(n, "body", body);
  set_attr(n, "num_scan_inputs", int64_t(1));
  set_attr(n, "directions", std::vector<int64_t>{1});
  m.output("y");
  m.output("z");
  Array init = random_array(DType::F32, {2, 2}, 41), x = random_array(DType::F32, {2, 3, 2}, 42);
  std::vector<Array> got = run_both(m, {{"init", init}, {"x", x}});
  ASSERT_EQ(got.size(), 2u);
  Array y(DType::F32, {2, 2}), z(DType::F32, {2, 3, 2});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t j = 0; j < 2; ++j) {
      float s = float(init.get_f64(b * 2 + j));
      for (int64_t t = 0; t < 3; ++t) {
        float xt = float(x.get_f64(b * 6 + (2 - t) * 2 + j));
        s += xt;
        z.set_f64(b * 6 + t * 2 + j, s * xt);
      }
      y.set_f64(b * 2 + j, s);
    }
  }
  expect_close(got[0], y);
  expect_close(got[1], z);
}

// ---- refusals ----

TEST(OnnxImportControl, RefusesAConditionComputedFromALargeInput) {
  OnnxModel m(13);
  m.input("x", {"N", 4});
  m.initializer("zero", scalar_f32(0));
  auto& r = m.node("ReduceMax", {"x"}, {"mx"});
  set_attr(r, "keepdims", int64_t(0));
  m.node("Greater", {"mx", "zero"}, {"c"});
  add_relu_or_neg(m, "c");
  std::string needs;
  Expected<Graph> g = import_onnx_bytes(m.bytes(), "if.onnx", {}, &needs);
  ASSERT_FALSE(g.has_value());
  EXPECT_CONTAINS(g.status().message(), "If node 'if'");
  EXPECT_CONTAINS(g.status().message(), "the condition");
  EXPECT_CONTAINS(g.status().message(), "must be known at import time");
  EXPECT_EQ(needs, "x");
  // Run time: x is data (more elements than a shape-like input may have), never read as a value.
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "if.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Expected<std::vector<Array> > out = exe->run({{"x", random_array(DType::F32, {20000, 4}, 51)}});
  ASSERT_FALSE(out.has_value());
  EXPECT_CONTAINS(out.status().message(), "If node 'if'");
}

TEST(OnnxImportControl, RefusesATripCountAboveTheUnrollLimit) {
  std::string e = import_error(loop_model(5000, 10000));
  EXPECT_CONTAINS(e, "Loop node 'loop'");
  EXPECT_CONTAINS(e, "trip count M = 5000 is above the 1024");
}

// Zero iterations leave the stacked scan output without a shape (the body never ran).
TEST(OnnxImportControl, RefusesAScanOutputOfZeroIterations) {
  std::string e = import_error(loop_model(0, 5));
  EXPECT_CONTAINS(e, "Loop node 'loop': scan output 1 has no iterations to stack");
}

TEST(OnnxImportControl, RefusesABodyWithAnUnsupportedOp) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.initializer("M", i64_scalar(3));
  OnnxModel body = loop_body({2, 3});
  body.node("Bernoulli", {"y_in"}, {"y_out"}, "coin");
  body.node("Identity", {"c"}, {"c_out"});
  add_loop(m, body, "", false);
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(
      e, "Loop node 'loop' (iteration 0): Bernoulli node 'coin': op type 'Bernoulli' is not supported");
}

TEST(OnnxImportControl, RefusesALoopConditionKnownOnlyAtRunTime) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.initializer("M", i64_scalar(3));
  m.initializer("zero", scalar_f32(0));
  OnnxModel body = loop_body({2, 3});
  body.node("Neg", {"y_in"}, {"y_out"});
  auto& r = body.node("ReduceSum", {"y_out"}, {"sum"});
  set_attr(r, "keepdims", int64_t(0));
  body.node("Greater", {"sum", "zero"}, {"c_out"});
  add_loop(m, body, "", false);
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "Loop node 'loop'");
  EXPECT_CONTAINS(e, "condition output 'c_out'");
  EXPECT_CONTAINS(e, "iteration 0");
  EXPECT_CONTAINS(e, "must be known at import time");
}

TEST(OnnxImportControl, RefusesAScanOfDynamicLength) {
  OnnxModel m(11);
  m.input("s0", {2});
  m.input("x", {"T", 2});
  OnnxModel body(11);
  body.input("s_in", {2});
  body.input("xt", {2});
  body.node("Add", {"s_in", "xt"}, {"s_out"});
  body.output("s_out");
  auto& n = m.node("Scan", {"s0", "x"}, {"s"}, "scan");
  set_attr(n, "body", body);
  set_attr(n, "num_scan_inputs", int64_t(1));
  m.output("s");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "Scan node 'scan'");
  EXPECT_CONTAINS(e, "sequence length of scan input 1 'x' is not static");
}

TEST(OnnxImportControl, RefusesAnIfWithoutABranch) {
  OnnxModel m(13);
  m.input("x", {2});
  m.initializer("cond", bool_scalar(true));
  OnnxModel then_branch(13);
  then_branch.node("Relu", {"x"}, {"a"});
  then_branch.output("a");
  auto& n = m.node("If", {"cond"}, {"y"}, "if");
  set_attr(n, "then_branch", then_branch);
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "If node 'if': attribute 'else_branch' is missing");
}

}  // namespace
}  // namespace fusebox::testing

#endif
