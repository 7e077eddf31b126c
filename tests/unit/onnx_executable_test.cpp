// OnnxExecutable: ONNX models whose shape-like inputs (Slice starts, Tile repeats, ...) are
// graph inputs run with the values each call gives (a Reshape or Expand target of static length
// is bound as the plan runs instead: one plan for every value). Every case builds the model twice, once with
// the value as a graph input and once with it as an initializer (the import path other tests
// cover), and compares the fused CPU run of the first with the reference run of the second on
// random data, bit for bit (the same ops on the same data; only the plan differs).
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxExecutable, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <cstdio>
#include <cstdlib>
#include <functional>

#include "onnx_run/onnx_executable.h"
#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

// Builds a model; `value` (named in the model) is a graph input when `as_input`, else an
// initializer holding `v`.
using Build = std::function<void(OnnxModel& m, bool as_input, const Array& v)>;

// Compiles the model; a failure ends the test binary (every case needs the executable).
OnnxExecutable compile_model(const OnnxModel& m) {
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "test.onnx", CompileOptions{});
  if (!exe) {
    std::fprintf(stderr, "compile failed: %s\n", exe.status().to_string().c_str());
    std::abort();
  }
  return std::move(*exe);
}

OnnxExecutable compile_or_fail(const Build& build, const Array& any_value) {
  OnnxModel m(13);
  build(m, true, any_value);
  return compile_model(m);
}

// Runs `exe` with x and the value, and checks it against the model with the value built in.
void expect_matches_constant_model(const OnnxExecutable& exe, const Build& build, const Array& x, const Array& v) {
  OnnxModel fixed(13);
  build(fixed, false, v);
  std::vector<Array> want = import_and_run(fixed, {{"x", x}});
  Expected<std::vector<Array>> got = exe.run({{"x", x}, {"v", v}});
  ASSERT_TRUE(got.has_value()) << got.status().to_string();
  ASSERT_EQ(got->size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_TRUE((*got)[k].same_data(want[k])) << "output " << k << ": " << (*got)[k].type_string() << " vs "
                                              << want[k].type_string();
  }
}

// x [N,6] -> Reshape(v) -> Relu: the reshape target is a run-time value, the batch a symbol.
void reshape_relu(OnnxModel& m, bool as_input, const Array& v) {
  m.input("x", {"N", 6});
  if (as_input) m.input("v", TP::INT64, {2});
  else m.initializer("v", v);
  m.node("Reshape", {"x", "v"}, {"r"}, "reshape");
  m.node("Relu", {"r"}, {"y"});
  m.output("y");
}

// A Reshape target of static length known only at run time is not a value to specialise on: its
// sizes are bound as the plan runs (bind_symbols), so one plan serves every target.
TEST(OnnxExecutable, ReshapeTargetFromInputCompilesOnce) {
  OnnxExecutable exe = compile_or_fail(reshape_relu, i64s({-1, 3}));
  EXPECT_EQ(exe.specializations(), 1u);
  EXPECT_TRUE(exe.value_inputs().empty());
  Array x2 = random_array(DType::F32, {2, 6}, 1), x5 = random_array(DType::F32, {5, 6}, 2);
  expect_matches_constant_model(exe, reshape_relu, x2, i64s({-1, 3}));
  expect_matches_constant_model(exe, reshape_relu, x5, i64s({-1, 3}));  // a new batch, same plan
  expect_matches_constant_model(exe, reshape_relu, x2, i64s({1, -1}));
  expect_matches_constant_model(exe, reshape_relu, x5, i64s({0, -1}));  // 0 copies x's dim 0
  expect_matches_constant_model(exe, reshape_relu, x2, i64s({4, 3}));
  EXPECT_EQ(exe.specializations(), 1u);
}

// Slice with starts from the input and ends computed from it (Add): a value derived from an
// input is found and bound too.
void slice_derived(OnnxModel& m, bool as_input, const Array& v) {
  m.input("x", {4, 7});
  if (as_input) m.input("v", TP::INT64, {2});
  else m.initializer("v", v);
  m.initializer("three", i64s({3, 4}));
  m.node("Add", {"v", "three"}, {"ends"});
  m.node("Slice", {"x", "v", "ends"}, {"y"}, "slice");
  m.output("y");
}

TEST(OnnxExecutable, SliceBoundsComputedFromAnInput) {
  OnnxExecutable exe = compile_or_fail(slice_derived, i64s({0, 0}));
  Array x = random_array(DType::F32, {4, 7}, 3);
  expect_matches_constant_model(exe, slice_derived, x, i64s({1, 2}));
  expect_matches_constant_model(exe, slice_derived, x, i64s({-3, 0}));
  EXPECT_EQ(exe.specializations(), 2u);
}

// ConstantOfShape(v) + x: the output's rank and dims come from the value.
void filled_plus_x(OnnxModel& m, bool as_input, const Array& v) {
  m.input("x", {"W"});
  if (as_input) m.input("v", TP::INT64, {"R"});
  else m.initializer("v", v);
  m.node("ConstantOfShape", {"v"}, {"c"}, "fill");
  m.node("Add", {"c", "x"}, {"y"});
  m.output("y");
}

TEST(OnnxExecutable, ConstantOfShapeOfAnyRank) {
  OnnxExecutable exe = compile_or_fail(filled_plus_x, i64s({1}));
  Array x = random_array(DType::F32, {5}, 4);
  expect_matches_constant_model(exe, filled_plus_x, x, i64s({5}));
  expect_matches_constant_model(exe, filled_plus_x, x, i64s({2, 3, 5}));
}

// Tile(x, v): the repeats fix the output's sizes.
void tiled(OnnxModel& m, bool as_input, const Array& v) {
  m.input("x", {2, 3});
  if (as_input) m.input("v", TP::INT64, {2});
  else m.initializer("v", v);
  m.node("Tile", {"x", "v"}, {"y"}, "tile");
  m.output("y");
}

TEST(OnnxExecutable, TileRepeatsFromInput) {
  OnnxExecutable exe = compile_or_fail(tiled, i64s({1, 1}));
  Array x = random_array(DType::F32, {2, 3}, 11);
  expect_matches_constant_model(exe, tiled, x, i64s({2, 3}));
  expect_matches_constant_model(exe, tiled, x, i64s({1, 0}));
}

TEST(OnnxExecutable, ModelWithoutValueInputsCompilesAtOnce) {
  OnnxModel m(13);
  m.input("x", {"N", 3});
  m.node("Relu", {"x"}, {"y"});
  m.output("y");
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "relu.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  EXPECT_EQ(exe->specializations(), 1u);
  EXPECT_TRUE(exe->value_inputs().empty());
}

// ---- bad values: errors name the node and the values given ----

std::string run_error(const OnnxExecutable& exe, const NamedArrays& inputs) {
  Expected<std::vector<Array>> out = exe.run(inputs);
  EXPECT_FALSE(out.has_value()) << "the run was expected to fail";
  return out ? std::string() : out.status().message();
}

TEST(OnnxExecutableErrors, ReshapeToAnotherElementCount) {
  OnnxExecutable exe = compile_or_fail(reshape_relu, i64s({-1, 3}));
  std::string e = run_error(exe, {{"x", random_array(DType::F32, {2, 6}, 5)}, {"v", i64s({5, 5})}});
  EXPECT_CONTAINS(e, "%r = reshape");  // the node's result, named after its ONNX output
  EXPECT_CONTAINS(e, "cannot reshape f32[2,6] (12 elements) to [5,5]");
  e = run_error(exe, {{"x", random_array(DType::F32, {2, 6}, 5)}, {"v", i64s({-1, 5})}});
  EXPECT_CONTAINS(e, "bind_symbols");
  EXPECT_CONTAINS(e, "target [-1,5] does not fit 12 elements");
}

TEST(OnnxExecutableErrors, NegativeSize) {
  OnnxExecutable exe = compile_or_fail(filled_plus_x, i64s({1}));
  std::string e = run_error(exe, {{"x", random_array(DType::F32, {5}, 6)}, {"v", i64s({-2, 5})}});
  EXPECT_CONTAINS(e, "with v = [-2,5]");
  EXPECT_CONTAINS(e, "ConstantOfShape node 'fill'");
}

TEST(OnnxExecutableErrors, NegativeRepeats) {
  OnnxExecutable exe = compile_or_fail(tiled, i64s({1, 1}));
  std::string e = run_error(exe, {{"x", random_array(DType::F32, {2, 3}, 9)}, {"v", i64s({2, -1})}});
  EXPECT_CONTAINS(e, "with v = [2,-1]");
  EXPECT_CONTAINS(e, "Tile node 'tile': repeats must be >= 0, got -1 for axis 1");
}

// x -> op(x, big[0:2]) with `big` a 70000-element graph input holding 4, 3, 4, 3, ...
OnnxModel sliced_from_big(const std::string& op, const std::vector<OnnxDim>& x_dims) {
  OnnxModel m(13);
  m.input("x", x_dims);
  m.input("big", TP::INT64, {70000});
  m.initializer("zero", i64s({0}));
  m.initializer("two", i64s({2}));
  m.node("Slice", {"big", "zero", "two"}, {"sizes"});
  m.node(op, {"x", "sizes"}, {"y"}, "op");
  m.output("y");
  return m;
}

Array big_input() {
  Array big(DType::I64, {70000});
  for (int64_t i = 0; i < big.numel(); ++i) big.set_i64(i, i % 2 ? 3 : 4);
  return big;
}

// A Reshape target sliced from a large data tensor: bound at run time like any other (the
// tensor is never read at import).
TEST(OnnxExecutable, ReshapeTargetFromALargeTensor) {
  OnnxExecutable exe = compile_model(sliced_from_big("Reshape", {2, 6}));
  EXPECT_TRUE(exe.value_inputs().empty());
  Array x = random_array(DType::F32, {2, 6}, 10);
  Expected<std::vector<Array>> out = exe.run({{"x", x}, {"big", big_input()}});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  EXPECT_TRUE((*out)[0].same_data(x.reshaped({4, 3}))) << (*out)[0].type_string();
}

// A data tensor whose values fix sizes that are not bound at run time (Tile's repeats) is refused
// rather than compiled per run.
TEST(OnnxExecutableErrors, LargeInputIsNotReadForShapes) {
  OnnxExecutable exe = compile_model(sliced_from_big("Tile", {2, 3}));
  std::string e = run_error(exe, {{"x", random_array(DType::F32, {2, 3}, 10)}, {"big", big_input()}});
  EXPECT_CONTAINS(e, "Tile node 'op'");
  EXPECT_CONTAINS(e, "graph input 'big' is i64[70000]; only inputs of up to 65536 elements are read to fix shapes");
}

TEST(OnnxExecutableErrors, ValueOfAnotherTypeOrRank) {
  OnnxExecutable exe = compile_or_fail(tiled, i64s({1, 1}));
  Array x = random_array(DType::F32, {2, 3}, 7);
  EXPECT_CONTAINS(run_error(exe, {{"x", x}, {"v", array_of_ints(DType::I32, {2}, {4, 3})}}),
                  "graph input 'v': the given value is i32[2], the model declares i64[2]");
  EXPECT_CONTAINS(run_error(exe, {{"x", x}, {"v", i64s({2, 2, 3})}}), "the given value is i64[3]");
}

TEST(OnnxExecutableErrors, MissingValueInput) {
  OnnxExecutable exe = compile_or_fail(tiled, i64s({1, 1}));
  Array x = random_array(DType::F32, {2, 3}, 8);
  std::string e = run_error(exe, {{"x", x}});
  EXPECT_CONTAINS(e, "input 'v' is missing (its value fixes shapes in the model: ");
  EXPECT_CONTAINS(e, "Tile node 'tile'");
  // Once a run has found the input, a run without it says so before importing.
  ASSERT_TRUE(exe.run({{"x", x}, {"v", i64s({3, 4})}}).has_value());
  EXPECT_CONTAINS(run_error(exe, {{"x", x}}), "input 'v' is missing (its value fixes shapes in the model)");
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
