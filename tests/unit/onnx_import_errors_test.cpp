// ONNX import errors: what fusebox cannot honour exactly is refused with a message naming the op
// type, the node and the attribute or input; malformed, truncated and mutated files give errors,
// never a crash.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportErrors, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <random>

#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;

TEST(OnnxImportErrors, UnsupportedOpNamesOpTypeAndNode) {
  OnnxModel m(13);
  m.input("x", {1, 2, 3});
  m.node("StringNormalizer", {"x"}, {"y"}, "norm_1");
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "StringNormalizer node 'norm_1'");
  EXPECT_CONTAINS(e, "not supported");
}

TEST(OnnxImportErrors, UnknownAttributeIsRefusedNotIgnored) {
  OnnxModel m(13);
  m.input("x", {2});
  set_attr(m.node("Relu", {"x"}, {"y"}, "r"), "slope", 0.1f);
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "Relu node 'r': attribute 'slope' is not supported");
}

TEST(OnnxImportErrors, UnsupportedAttributeValueNamesTheAttribute) {
  OnnxModel m(13);
  m.input("x", {1, 1, 2, 2});
  m.initializer("scales", f32s({1, 1, 2, 2}));
  set_attr(m.node("Resize", {"x", "", "scales"}, {"y"}, "up"), "mode", "lanczos");
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "Resize node 'up'");
  EXPECT_CONTAINS(e, "'mode' = \"lanczos\"");

  OnnxModel m2(13);
  m2.input("x", {1, 1, 2, 2});
  m2.initializer("scales", f32s({1, 1, 2, 2}));
  set_attr(m2.node("Resize", {"x", "", "scales"}, {"y"}, "crop"), "coordinate_transformation_mode", "tf_crop_and_resize");
  m2.output("y");
  EXPECT_CONTAINS(import_error(m2), "coordinate_transformation_mode");
}

TEST(OnnxImportErrors, AttributeOfTheWrongType) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  set_attr(m.node("Softmax", {"x"}, {"y"}, "sm"), "axis", 1.0f);
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "Softmax node 'sm': attribute 'axis' must be INT, got FLOAT");
}

TEST(OnnxImportErrors, ValuesThatMustBeKnownAtImportTime) {
  OnnxModel m(13);
  m.input("x", {2, 3});
  m.input("k", TP::INT64, {});
  m.node("Trilu", {"x", "k"}, {"y"}, "tri");
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "Trilu node 'tri': k");
  EXPECT_CONTAINS(e, "must be known at import time");

  // A Reshape target of static length is bound at run time (bind_symbols); one whose length is
  // itself a run-time size leaves the result's rank unknown.
  OnnxModel r(13);
  r.input("x", {2, 3});
  r.input("shape", TP::INT64, {"K"});
  r.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  r.output("y");
  EXPECT_CONTAINS(import_error(r), "Reshape node 'reshape': shape");
  OnnxModel bound(13);
  bound.input("x", {2, 3});
  bound.input("shape", TP::INT64, {2});
  bound.node("Reshape", {"x", "shape"}, {"y"}, "reshape");
  bound.output("y");
  Graph g = import_model(bound);
  EXPECT_TRUE(
      std::any_of(g.nodes().begin(), g.nodes().end(), [](const Node& n) { return n.op == Op::BindSymbols; }));
}

TEST(OnnxImportErrors, OpsetAndDomain) {
  // Before opset 7, element-wise ops broadcast only with a `broadcast` attribute: such ops are
  // refused at old opsets, by name.
  OnnxModel old(6);
  old.input("x", {2});
  old.node("Relu", {"x"}, {"r"});
  old.node("Add", {"r", "x"}, {"y"}, "sum");
  old.output("y");
  EXPECT_CONTAINS(import_error(old), "Add node 'sum': at opset 6, older than 7, only ops whose meaning did not change");

  OnnxModel ancient(0);
  ancient.input("x", {2});
  ancient.node("Relu", {"x"}, {"y"});
  ancient.output("y");
  EXPECT_CONTAINS(import_error(ancient), "opset 0 is older than the oldest supported (1)");

  OnnxModel future(40);
  future.input("x", {2});
  future.node("Relu", {"x"}, {"y"});
  future.output("y");
  EXPECT_CONTAINS(import_error(future), "opset 40 is newer");

  OnnxModel ms(13);
  ms.input("x", {2});
  ms.node("Relu", {"x"}, {"y"}, "fused").set_domain("com.microsoft");
  ms.output("y");
  EXPECT_CONTAINS(import_error(ms), "domain 'com.microsoft'");
}

TEST(OnnxImportErrors, BrokenGraphs) {
  OnnxModel undefined(13);
  undefined.input("x", {2});
  undefined.node("Add", {"x", "nowhere"}, {"y"}, "add");
  undefined.output("y");
  EXPECT_CONTAINS(import_error(undefined), "Add node 'add': input 1 'nowhere' is not defined");

  OnnxModel twice(13);
  twice.input("x", {2});
  twice.node("Relu", {"x"}, {"y"});
  twice.node("Neg", {"x"}, {"y"}, "neg");
  twice.output("y");
  EXPECT_CONTAINS(import_error(twice), "Neg node 'neg': output 'y' is already defined");

  OnnxModel no_output(13);
  no_output.input("x", {2});
  no_output.output("missing");
  EXPECT_CONTAINS(import_error(no_output), "graph output 'missing'");

  OnnxModel strings(13);
  strings.input("s", TP::STRING, {2});
  strings.node("Identity", {"s"}, {"y"});
  strings.output("y");
  EXPECT_CONTAINS(import_error(strings), "element type STRING");
}

TEST(OnnxImportErrors, ShapeMismatchNamesTheNodeAndOperands) {
  OnnxModel m(13);
  m.input("a", {2, 3});
  m.input("b", {4});
  m.node("Add", {"a", "b"}, {"y"}, "add_7");
  m.output("y");
  std::string e = import_error(m);
  EXPECT_CONTAINS(e, "Add node 'add_7'");
  EXPECT_CONTAINS(e, "f32[2,3], f32[4]");
}

TEST(OnnxImportErrors, BadInitializerData) {
  OnnxModel m(13);
  m.input("x", {2});
  onnx::TensorProto t = tensor_proto("w", f32s({1, 2}));
  t.set_raw_data(std::string(7, '\0'));
  *m.proto().mutable_graph()->add_initializer() = t;
  m.node("Add", {"x", "w"}, {"y"});
  m.output("y");
  EXPECT_CONTAINS(import_error(m), "initializer 'w': raw data has 7 bytes");

  OnnxModel neg(13);
  neg.input("x", {2});
  onnx::TensorProto n = tensor_proto("w", f32s({1, 2}));
  n.set_dims(0, -2);
  *neg.proto().mutable_graph()->add_initializer() = n;
  neg.node("Add", {"x", "w"}, {"y"});
  neg.output("y");
  EXPECT_CONTAINS(import_error(neg), "negative dim");

  // Zero elements with a huge other dim are over the size limit too (an Array of that shape
  // would be refused by the allocation's invariant check).
  OnnxModel empty(13);
  empty.input("x", {2});
  onnx::TensorProto e = tensor_proto("w", f32s({1, 2}));
  e.clear_dims();
  e.add_dims(0);
  e.add_dims(int64_t(1) << 61);
  e.clear_raw_data();
  *empty.proto().mutable_graph()->add_initializer() = e;
  empty.node("Add", {"x", "w"}, {"y"});
  empty.output("y");
  EXPECT_CONTAINS(import_error(empty), "initializer 'w': shape [0,2305843009213693952] has a dim of 2305843009213693952");
}

TEST(OnnxImportErrors, UnsupportedOutputsAndShapes) {
  // A training output (BatchNormalization's running mean) fusebox does not produce.
  OnnxModel bn(15);
  bn.input("x", {1, 2, 3});
  for (const char* p : {"scale", "bias", "mean", "var"}) bn.initializer(p, f32s({1, 2}));
  bn.node("BatchNormalization", {"x", "scale", "bias", "mean", "var"}, {"y", "running_mean"}, "bn");
  bn.output("y");
  EXPECT_CONTAINS(import_error(bn), "BatchNormalization node 'bn': output 1 ('running_mean') is not supported");

  OnnxModel conv3d(13);
  conv3d.input("x", {1, 2, 8, 8, 8});
  conv3d.initializer("w", random_array(DType::F32, {3, 2, 3, 3, 3}, 1));
  conv3d.node("Conv", {"x", "w"}, {"y"}, "c3");
  conv3d.output("y");
  EXPECT_CONTAINS(import_error(conv3d), "Conv node 'c3': only 1-D and 2-D");

  OnnxModel symbolic(13);
  symbolic.input("x", {1, 1, "H", 3});
  symbolic.initializer("w", random_array(DType::F32, {1, 1, 2, 2}, 2));
  auto& ct = symbolic.node("ConvTranspose", {"x", "w"}, {"y"}, "ct");
  set_attr(ct, "strides", std::vector<int64_t>{2, 2});
  set_attr(ct, "output_shape", std::vector<int64_t>{5, 5});
  symbolic.output("y");
  EXPECT_CONTAINS(import_error(symbolic), "ConvTranspose node 'ct': output_shape/auto_pad needs a static spatial size");

  OnnxModel same(13);
  same.input("x", {1, 1, "H", "W"});
  same.initializer("w", random_array(DType::F32, {1, 1, 3, 3}, 3));
  auto& sc = same.node("Conv", {"x", "w"}, {"y"}, "same");
  set_attr(sc, "auto_pad", "SAME_UPPER");
  set_attr(sc, "strides", std::vector<int64_t>{2, 2});
  same.output("y");
  EXPECT_CONTAINS(import_error(same), "needs a static spatial size");
}

TEST(OnnxImportErrors, NotAModelAndMissingFile) {
  Expected<Graph> g = import_onnx_bytes("this is not a protobuf \xff\xff\xff", "junk.onnx");
  ASSERT_FALSE(g.has_value());
  EXPECT_CONTAINS(g.status().message(), "junk.onnx");
  Expected<Graph> empty = import_onnx_bytes("", "empty.onnx");
  ASSERT_FALSE(empty.has_value());
  EXPECT_CONTAINS(empty.status().message(), "empty.onnx");
  Expected<Graph> f = import_onnx_file("/nonexistent/dir/model.onnx");
  ASSERT_FALSE(f.has_value());
  EXPECT_EQ(f.status().code(), StatusCode::kNotFound);
}

// A model with a bit of everything, to mutate.
OnnxModel fuzz_seed() {
  OnnxModel m(13);
  m.input("x", {"N", 2, 4, 4});
  m.initializer("w", random_array(DType::F32, {3, 2, 3, 3}, 1));
  m.initializer("b", random_array(DType::F32, {3}, 2));
  auto& c = m.node("Conv", {"x", "w", "b"}, {"c"});
  set_attr(c, "pads", std::vector<int64_t>{1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"});
  m.initializer("scales", f32s({1, 1, 2, 2}));
  set_attr(m.node("Resize", {"r", "", "scales"}, {"u"}), "mode", "nearest");
  m.node("Shape", {"u"}, {"s"});
  m.initializer("i0", i64s({0}));
  m.node("Gather", {"s", "i0"}, {"n"});
  m.initializer("rest", i64s({-1}));
  set_attr(m.node("Concat", {"n", "rest"}, {"t"}), "axis", int64_t(0));
  m.node("Reshape", {"u", "t"}, {"f"});
  set_attr(m.node("Softmax", {"f"}, {"y"}), "axis", int64_t(-1));
  m.output("y");
  return m;
}

// Every outcome of a mutated model is a graph that verifies or an error with a message.
void expect_graceful(const std::string& bytes) {
  Expected<Graph> g = import_onnx_bytes(bytes, "fuzz.onnx");
  if (!g) {
    EXPECT_FALSE(g.status().message().empty());
    return;
  }
  EXPECT_TRUE(verify(*g).is_ok());
}

TEST(OnnxImportErrors, TruncatedFilesNeverCrash) {
  std::string bytes = fuzz_seed().bytes();
  ASSERT_TRUE(import_onnx_bytes(bytes, "seed.onnx").has_value());
  for (size_t len = 0; len < bytes.size(); len += (len < 512 ? 1 : 97)) expect_graceful(bytes.substr(0, len));
}

TEST(OnnxImportErrors, MutatedFilesNeverCrash) {
  std::string seed = fuzz_seed().bytes();
  std::mt19937_64 rng(1234);
  int imported = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes = seed;
    int edits = 1 + int(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t pos = rng() % bytes.size();
      switch (rng() % 3) {
        case 0: bytes[pos] = char(rng()); break;                 // overwrite
        case 1: bytes[pos] = char(bytes[pos] ^ (1 << (rng() % 8))); break;  // flip a bit
        default: bytes.erase(pos, 1 + rng() % 8); break;         // delete a few bytes
      }
      if (bytes.empty()) bytes = "x";
    }
    Expected<Graph> g = import_onnx_bytes(bytes, "fuzz.onnx");
    if (g) {
      ++imported;
      EXPECT_TRUE(verify(*g).is_ok());
    } else {
      EXPECT_FALSE(g.status().message().empty());
    }
  }
  // Most single-byte changes land in weight data and still import; the rest must fail cleanly.
  EXPECT_GT(imported, 0);
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
