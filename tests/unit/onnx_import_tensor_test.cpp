// ONNX import of shape, movement and resize ops, and of the Shape-driven subgraphs exporters
// emit (folded at import so that nothing but a reshape with symbolic dims is left).
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportTensor, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <limits>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

Array iota(std::vector<int64_t> shape) {
  Array a(DType::F32, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, double(i));
  return a;
}

int count_ops(const Graph& g, Op op) {
  int n = 0;
  for (const Node& node : g.nodes()) n += node.op == op;
  return n;
}

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape with a symbolic batch folds to one reshape
// whose target names the symbol; the graph then runs at any batch size.
TEST(OnnxImportTensor, ShapeSubgraphFoldsToReshapeWithSymbols) {
  OnnxModel m(13);
  m.input("x", {"batch.size", 3, 4});
  m.node("Shape", {"x"}, {"s"});
  Array zero(DType::I64, {});
  zero.set_i64(0, 0);
  m.initializer("zero", zero);
  m.node("Gather", {"s", "zero"}, {"n"});
  m.initializer("axes0", i64s({0}));
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  m.constant("twelve", i64s({12}));
  set_attr(m.node("Concat", {"n1", "twelve"}, {"target"}), "axis", int64_t(0));
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y");
  Graph g = import_model(m);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.type(g.outputs()[0]).to_string(), "f32[batch_size,12]");
  EXPECT_EQ(count_ops(g, Op::Reshape), 1);
  EXPECT_EQ(count_ops(g, Op::Gather) + count_ops(g, Op::Concat) + count_ops(g, Op::Constant), 0);
  Expected<Executable> exe = Session().compile(g);
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  for (int64_t n : {1, 5}) {
    Array x = iota({n, 3, 4});
    Expected<std::vector<Array>> out = exe->run({{"x", x}});
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    EXPECT_TRUE(arrays_close((*out)[0], x.reshaped({n, 12}), 0, 0));
  }
}

// The PaddleOCR classifier head at opset 9: Shape -> Cast(i32) -> Slice (attributes) -> Cast(i64)
// -> Concat with a constant -1 -> Reshape.
TEST(OnnxImportTensor, LegacyShapeSliceCastPatternFolds) {
  OnnxModel m(9);
  m.input("x", {"N", 6, 1, 1});
  m.node("Shape", {"x"}, {"s"});
  set_attr(m.node("Cast", {"s"}, {"s32"}), "to", int64_t(TP::INT32));
  auto& sl = m.node("Slice", {"s32"}, {"n"});
  set_attr(sl, "axes", std::vector<int64_t>{0});
  set_attr(sl, "starts", std::vector<int64_t>{0});
  set_attr(sl, "ends", std::vector<int64_t>{1});
  set_attr(m.node("Cast", {"n"}, {"n64"}), "to", int64_t(TP::INT64));
  m.constant("minus1", i64s({-1}));
  set_attr(m.node("Concat", {"n64", "minus1"}, {"target"}), "axis", int64_t(0));
  m.node("Reshape", {"x", "target"}, {"y"});
  m.output("y");
  Graph g = import_model(m);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.type(g.outputs()[0]).to_string(), "f32[N,6]");
  Array x = iota({3, 6, 1, 1});
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], x.reshaped({3, 6}), 0, 0));
}

TEST(OnnxImportTensor, DynamicDimsBecomeSanitizedSymbols) {
  OnnxModel m(13);
  m.input("in:0", {"p2o.DynamicDimension.0", 3, ""});
  m.node("Relu", {"in:0"}, {"out/1"});
  m.output("out/1");
  Graph g = import_model(m);
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).name, "in_0");
  EXPECT_EQ(g.type(g.inputs()[0]).to_string(), "f32[p2o_DynamicDimension_0,3,in_0_dim2]");
  EXPECT_EQ(g.value(g.outputs()[0]).name, "out_1");
}

TEST(OnnxImportTensor, ReshapeFlattenTransposeSqueezeUnsqueeze) {
  Array x = iota({2, 3, 4});
  OnnxModel m(11);
  m.input("x", {"N", 3, 4});
  m.initializer("shape", i64s({0, -1}));
  m.node("Reshape", {"x", "shape"}, {"r"});
  set_attr(m.node("Flatten", {"x"}, {"f"}), "axis", int64_t(2));
  m.node("Transpose", {"x"}, {"t"});
  set_attr(m.node("Unsqueeze", {"x"}, {"u"}), "axes", std::vector<int64_t>{0, -1});
  set_attr(m.node("Squeeze", {"u"}, {"s"}), "axes", std::vector<int64_t>{0, 4});
  for (const char* o : {"r", "f", "t", "u", "s"}) m.output(o);
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 5u);
  EXPECT_TRUE(arrays_close(out[0], x.reshaped({2, 12}), 0, 0));
  EXPECT_TRUE(arrays_close(out[1], x.reshaped({6, 4}), 0, 0));
  Array t(DType::F32, {4, 3, 2});
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 4; ++c) t.set_f64(c * 6 + b * 2 + a, x.get_f64(a * 12 + b * 4 + c));
  EXPECT_TRUE(arrays_close(out[2], t, 0, 0));
  EXPECT_TRUE(arrays_close(out[3], x.reshaped({1, 2, 3, 4, 1}), 0, 0));
  EXPECT_TRUE(arrays_close(out[4], x, 0, 0));
}

TEST(OnnxImportTensor, SliceInputsAndAttributes) {
  Array x = iota({3, 4});
  {
    OnnxModel m(13);
    m.input("x", {3, 4});
    m.initializer("starts", i64s({-1, 2}));
    m.initializer("ends", i64s({std::numeric_limits<int64_t>::min(), 100}));
    m.initializer("axes", i64s({-1, 0}));
    m.initializer("steps", i64s({-2, 1}));
    m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {1, 2}, {11, 9}), 0, 0));
  }
  {
    OnnxModel m(9);
    m.input("x", {3, 4});
    auto& s = m.node("Slice", {"x"}, {"y"});
    set_attr(s, "starts", std::vector<int64_t>{1, 1});
    set_attr(s, "ends", std::vector<int64_t>{1000, 3});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {2, 2}, {5, 6, 9, 10}), 0, 0));
  }
}

TEST(OnnxImportTensor, SplitWithSizesAndEvenly) {
  Array x = iota({2, 4});
  OnnxModel m(13);
  m.input("x", {2, 4});
  m.initializer("split", i64s({1, 3}));
  set_attr(m.node("Split", {"x", "split"}, {"a", "b"}), "axis", int64_t(1));
  m.node("Split", {"x"}, {"c", "d"});
  for (const char* o : {"a", "b", "c", "d"}) m.output(o);
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {2, 1}, {0, 4}), 0, 0));
  EXPECT_TRUE(arrays_close(out[1], array_of(DType::F32, {2, 3}, {1, 2, 3, 5, 6, 7}), 0, 0));
  EXPECT_TRUE(arrays_close(out[2], array_of(DType::F32, {1, 4}, {0, 1, 2, 3}), 0, 0));
  EXPECT_TRUE(arrays_close(out[3], array_of(DType::F32, {1, 4}, {4, 5, 6, 7}), 0, 0));
}

TEST(OnnxImportTensor, GatherConcatExpandConstantOfShape) {
  Array x = iota({3, 4});
  OnnxModel m(13);
  m.input("x", {3, 4});
  m.input("idx", TP::INT64, {2});
  set_attr(m.node("Gather", {"x", "idx"}, {"g"}), "axis", int64_t(1));
  set_attr(m.node("Concat", {"x", "g"}, {"c"}), "axis", int64_t(1));
  m.initializer("col", array_of(DType::F32, {3, 1}, {1, 2, 3}));
  m.initializer("shape", i64s({2, 3, 2}));
  m.node("Expand", {"col", "shape"}, {"e"});
  // A shape negated at import (ConstantOfShape refuses a shape it cannot know).
  m.initializer("negshape", i64s({-2, -2}));
  m.node("Neg", {"negshape"}, {"cshape"});
  auto& cos = m.node("ConstantOfShape", {"cshape"}, {"k"});
  auto* v = cos.add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  Array seven(DType::I64, {1});
  seven.set_i64(0, 7);
  *v->mutable_t() = tensor_proto("", seven);
  for (const char* o : {"g", "c", "e", "k"}) m.output(o);
  std::vector<Array> out = import_and_run(m, {{"x", x}, {"idx", array_of(DType::I64, {2}, {-1, 0})}});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {3, 2}, {3, 0, 7, 4, 11, 8}), 0, 0));
  EXPECT_TRUE(arrays_close(out[1], array_of(DType::F32, {3, 6}, {0, 1, 2, 3, 3, 0, 4, 5, 6, 7, 7, 4, 8, 9, 10, 11, 11, 8}), 0, 0));
  EXPECT_TRUE(arrays_close(out[2], array_of(DType::F32, {2, 3, 2}, {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}), 0, 0));
  EXPECT_TRUE(arrays_close(out[3], array_of(DType::I64, {2, 2}, {7, 7, 7, 7}), 0, 0));
}

TEST(OnnxImportTensor, PadModesAndNegativePads) {
  Array x = iota({2, 3});
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.initializer("pads", i64s({0, 1, 0, 2}));
  m.initializer("value", scalar_f32(1.5f));
  m.node("Pad", {"x", "pads", "value"}, {"c"});
  set_attr(m.node("Pad", {"x", "pads"}, {"r"}), "mode", "reflect");
  set_attr(m.node("Pad", {"x", "pads"}, {"e"}), "mode", "edge");
  m.initializer("crop", i64s({0, -1, 1, 0}));  // crop a column at the start, add a row at the end
  m.node("Pad", {"x", "crop"}, {"n"});
  for (const char* o : {"c", "r", "e", "n"}) m.output(o);
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {2, 6}, {1.5, 0, 1, 2, 1.5, 1.5, 1.5, 3, 4, 5, 1.5, 1.5}), 0, 0));
  EXPECT_TRUE(arrays_close(out[1], array_of(DType::F32, {2, 6}, {1, 0, 1, 2, 1, 0, 4, 3, 4, 5, 4, 3}), 0, 0));
  EXPECT_TRUE(arrays_close(out[2], array_of(DType::F32, {2, 6}, {0, 0, 1, 2, 2, 2, 3, 3, 4, 5, 5, 5}), 0, 0));
  EXPECT_TRUE(arrays_close(out[3], array_of(DType::F32, {3, 2}, {1, 2, 4, 5, 0, 0}), 0, 0));
}

TEST(OnnxImportTensor, ResizeNearestAndLinear) {
  Array x = array_of(DType::F32, {1, 1, 2, 2}, {1, 2, 3, 4});
  OnnxModel m(13);
  m.input("x", {"N", 1, "H", "W"});
  m.initializer("scales", f32s({1, 1, 2, 2}));
  auto& nn = m.node("Resize", {"x", "", "scales"}, {"nearest"});
  set_attr(nn, "coordinate_transformation_mode", "asymmetric");
  set_attr(nn, "nearest_mode", "floor");
  m.initializer("sizes", i64s({1, 1, 3, 3}));
  auto& lin = m.node("Resize", {"x", "", "", "sizes"}, {"linear"});
  set_attr(lin, "mode", "linear");
  set_attr(lin, "coordinate_transformation_mode", "align_corners");
  m.output("nearest");
  m.output("linear");
  std::vector<Array> out = import_and_run(m, {{"x", x}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4}), 0, 0));
  EXPECT_TRUE(arrays_close(out[1], array_of(DType::F32, {1, 1, 3, 3}, {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4}), 1e-6, 0));
}

// Opsets 7 and 8: element-wise ops broadcast like numpy (no `broadcast` attribute since 7);
// Upsample-7 takes its scales as an attribute; BatchNormalization-7's `spatial` is refused.
TEST(OnnxImportTensor, Opset7BroadcastsAndUpsampleTakesScalesAsAttribute) {
  OnnxModel m(7);
  m.input("a", {2, 3});
  m.input("b", {3});
  m.input("x", {1, 1, 2, 2});
  m.node("Add", {"a", "b"}, {"sum"});
  auto& up = m.node("Upsample", {"x"}, {"up"});
  set_attr(up, "scales", std::vector<float>{1, 1, 2, 2});
  set_attr(up, "mode", "nearest");
  m.output("sum");
  m.output("up");
  Array a = random_array(DType::F32, {2, 3}, 3), b = random_array(DType::F32, {3}, 4);
  Array x = random_array(DType::F32, {1, 1, 2, 2}, 5);
  std::vector<Array> out = import_and_run(m, {{"a", a}, {"b", b}, {"x", x}});
  ASSERT_EQ(out.size(), 2u);
  Array sum(DType::F32, {2, 3});
  for (int64_t i = 0; i < 6; ++i) sum.set_f64(i, a.get_f64(i) + b.get_f64(i % 3));
  EXPECT_TRUE(arrays_close(out[0], sum));
  Array want(DType::F32, {1, 1, 4, 4});
  for (int64_t i = 0; i < 16; ++i) want.set_f64(i, x.get_f64((i / 4 / 2) * 2 + (i % 4) / 2));
  EXPECT_TRUE(arrays_close(out[1], want, 0, 0));

  OnnxModel bn(7);
  bn.input("x", {1, 2, 2, 2});
  for (const char* p : {"scale", "bias", "mean", "var"}) bn.initializer(p, f32s({1, 1}));
  set_attr(bn.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y"}, "bn"), "spatial", int64_t(1));
  bn.output("y");
  EXPECT_NE(import_error(bn).find("spatial"), std::string::npos) << import_error(bn);
}

// Upsample (opset 9) and Resize-10 map coordinates asymmetrically and round nearest down when
// upsampling, as ONNX Runtime does.
TEST(OnnxImportTensor, LegacyUpsampleAndResize10) {
  Array x = array_of(DType::F32, {1, 1, 1, 3}, {1, 2, 3});
  for (const char* op : {"Upsample", "Resize"}) {
    SCOPED_TRACE(op);
    OnnxModel m(std::string(op) == "Upsample" ? 9 : 10);
    m.input("x", {1, 1, 1, 3});
    m.initializer("scales", f32s({1, 1, 2, 1.5f}));
    m.node(op, {"x", "scales"}, {"y"});
    m.output("y");
    std::vector<Array> out = import_and_run(m, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    // W: out 4, source floor(o / 1.5) = 0, 0, 1, 2
    EXPECT_TRUE(arrays_close(out[0], array_of(DType::F32, {1, 1, 2, 4}, {1, 1, 2, 3, 1, 1, 2, 3}), 0, 0));
  }
}

TEST(OnnxImportTensor, IdentityDropoutAndOutputNames) {
  OnnxModel m(13);
  m.input("x", {2});
  m.node("Identity", {"x"}, {"a"});
  m.node("Dropout", {"a"}, {"b"});
  m.output("b");
  m.output("x");  // a graph input returned as is
  Graph g = import_model(m);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "b");
  EXPECT_EQ(g.value(g.outputs()[1]).name, "x");
  std::vector<Array> out = import_and_run(m, {{"x", f32s({1, 2})}});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(arrays_close(out[0], f32s({1, 2}), 0, 0));
}

TEST(OnnxImportTensor, InitializersListedAsInputsAreConstants) {
  OnnxModel m(9);
  m.input("x", {2});
  m.input("w", {2});  // IR < 4 style: the initializer also appears among the inputs
  m.initializer("w", f32s({10, 20}));
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  Graph g = import_model(m);
  EXPECT_EQ(g.inputs().size(), 1u);
  std::vector<Array> out = import_and_run(m, {{"x", f32s({1, 2})}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(arrays_close(out[0], f32s({11, 22}), 0, 0));
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
