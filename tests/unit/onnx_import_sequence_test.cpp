// ONNX sequences and optionals resolved at import (src/onnx/convert_sequence.cpp) and given to or
// returned from OnnxExecutable::run_values. Each model runs through OnnxExecutable twice, fused on
// the CPU pipeline (after a run on NaN-poisoned inputs) and unfused on the reference kernels; both
// are compared with each other and with values computed here from ONNX's definitions on random
// inputs. Bad input is refused with a message naming the node and the input.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportSequence, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <cmath>

#include "onnx_run/onnx_executable.h"
#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;
using Kind = OnnxValue::Kind;

// A graph input that is a sequence of `elem_type` tensors (element shape left open), or an
// optional of a tensor of `dims`.
void sequence_input(OnnxModel& m, const std::string& name, int32_t elem_type) {
  auto* vi = m.proto().mutable_graph()->add_input();
  vi->set_name(name);
  vi->mutable_type()->mutable_sequence_type()->mutable_elem_type()->mutable_tensor_type()->set_elem_type(
      elem_type);
}
void optional_input(OnnxModel& m, const std::string& name, int32_t elem_type,
                    const std::vector<int64_t>& dims) {
  auto* vi = m.proto().mutable_graph()->add_input();
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_optional_type()->mutable_elem_type()->mutable_tensor_type();
  tt->set_elem_type(elem_type);
  for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
}

Array i64_scalar(int64_t v) {
  Array a(DType::I64, {});
  a.set_i64(0, v);
  return a;
}

// An input value with every float NaN (integers all bits set): what a run must never show.
OnnxValue poisoned(const OnnxValue& v) {
  std::vector<Array> elements;
  for (const Array& a : v.elements()) {
    Array p(a.dtype(), a.shape());
    p.fill_bytes(a.dtype() == DType::Bool ? 0x01 : 0xFF);
    elements.push_back(std::move(p));
  }
  if (v.kind() == Kind::Tensor) return OnnxValue(elements[0]);
  return v.kind() == Kind::Sequence ? OnnxValue::sequence(std::move(elements)) : OnnxValue::none();
}

void expect_same(const OnnxValue& got, const OnnxValue& want, const std::string& what) {
  ASSERT_EQ(int(got.kind()), int(want.kind())) << what;
  ASSERT_EQ(got.elements().size(), want.elements().size()) << what;
  for (size_t k = 0; k < want.elements().size(); ++k) {
    EXPECT_TRUE(arrays_close(got.elements()[k], want.elements()[k], 1e-6, 1e-6)) << what << ", element " << k;
  }
}

// The model through OnnxExecutable fused (cpu) and unfused (reference); the two must agree.
// Returns the unfused results.
std::vector<OnnxValue> run_both(const OnnxModel& m, const NamedOnnxValues& inputs) {
  CompileOptions unfused_options;
  unfused_options.fuse = false;
  use_backend(unfused_options, kReference);
  CompileOptions fused_options;
  use_backend(fused_options, kCpu);
  Expected<OnnxExecutable> unfused = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", unfused_options);
  Expected<OnnxExecutable> fused = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", fused_options);
  EXPECT_TRUE(unfused.has_value() && fused.has_value())
      << (unfused ? fused.status() : unfused.status()).to_string();
  if (!unfused || !fused) return {};
  NamedOnnxValues poison;
  for (const auto& [name, v] : inputs) poison.emplace(name, poisoned(v));
  (void)fused->run_values(poison);
  Expected<std::vector<OnnxValue> > ref = unfused->run_values(inputs);
  Expected<std::vector<OnnxValue> > got = fused->run_values(inputs);
  EXPECT_TRUE(ref.has_value()) << ref.status().to_string();
  EXPECT_TRUE(got.has_value()) << got.status().to_string();
  if (!ref || !got) return {};
  EXPECT_EQ(ref->size(), got->size());
  for (size_t k = 0; k < ref->size() && k < got->size(); ++k)
    expect_same((*got)[k], (*ref)[k], "fused output " + std::to_string(k));
  return *ref;
}

// Rows [begin, end) of a [rows, cols] array.
Array rows(const Array& x, int64_t begin, int64_t end) {
  const int64_t cols = x.shape()[1];
  Array r(x.dtype(), {end - begin, cols});
  for (int64_t i = 0; i < r.numel(); ++i) r.set_f64(i, x.get_f64(begin * cols + i));
  return r;
}

Array concat_rows(const std::vector<Array>& parts) {
  int64_t n = 0;
  for (const Array& p : parts) n += p.shape()[0];
  Array r(parts[0].dtype(), {n, parts[0].shape()[1]});
  int64_t at = 0;
  for (const Array& p : parts) {
    for (int64_t i = 0; i < p.numel(); ++i) r.set_f64(at++, p.get_f64(i));
  }
  return r;
}

// x [6,4], y [2,4]:
//   s  = SplitToSequence(x, split = [1,2,3])          [x0:1, x1:3, x3:6]
//   s2 = SequenceInsert(s, y, -1)                     [x0:1, x1:3, y, x3:6]
//   s3 = SequenceErase(s2, 0)                         [x1:3, y, x3:6]
//   at = SequenceAt(s3, -2)                           y
//   cat = ConcatFromSequence(s3, axis 0)              [x1:3; y; x3:6]
//   t  = ConcatFromSequence(SplitToSequence(x, axis 1, keepdims 0), axis 0, new_axis 1): x^T
//   len = SequenceLength(s3)                          3
// and s3 itself as an output sequence.
TEST(OnnxImportSequence, SequenceOpsMatchTheirDefinitions) {
  OnnxModel m(17);
  m.input("x", {6, 4});
  m.input("y", {2, 4});
  m.initializer("split", i64s({1, 2, 3}));
  m.initializer("minus_one", i64_scalar(-1));
  m.initializer("zero", i64_scalar(0));
  m.initializer("minus_two", i64_scalar(-2));
  m.node("SplitToSequence", {"x", "split"}, {"s"});
  m.node("SequenceInsert", {"s", "y", "minus_one"}, {"s2"});
  m.node("SequenceErase", {"s2", "zero"}, {"s3"});
  m.node("SequenceAt", {"s3", "minus_two"}, {"at"});
  set_attr(m.node("ConcatFromSequence", {"s3"}, {"cat"}), "axis", int64_t(0));
  auto& split = m.node("SplitToSequence", {"x"}, {"cols"});
  set_attr(split, "axis", int64_t(1));
  set_attr(split, "keepdims", int64_t(0));
  auto& stack = m.node("ConcatFromSequence", {"cols"}, {"t"});
  set_attr(stack, "axis", int64_t(0));
  set_attr(stack, "new_axis", int64_t(1));
  m.node("SequenceLength", {"s3"}, {"len"});
  for (const char* o : {"at", "cat", "t", "len", "s3"}) m.output(o);

  Array x = random_array(DType::F32, {6, 4}, 101), y = random_array(DType::F32, {2, 4}, 102);
  std::vector<OnnxValue> out = run_both(m, {{"x", x}, {"y", y}});
  ASSERT_EQ(out.size(), 5u);
  expect_same(out[0], y, "SequenceAt");
  expect_same(out[1], concat_rows({rows(x, 1, 3), y, rows(x, 3, 6)}), "ConcatFromSequence");
  Array xt(DType::F32, {4, 6});
  for (int64_t i = 0; i < 6; ++i) {
    for (int64_t j = 0; j < 4; ++j) xt.set_f64(j * 6 + i, x.get_f64(i * 4 + j));
  }
  expect_same(out[2], xt, "ConcatFromSequence new_axis");
  expect_same(out[3], i64_scalar(3), "SequenceLength");
  expect_same(out[4], OnnxValue::sequence({rows(x, 1, 3), y, rows(x, 3, 6)}), "the sequence output");
}

// A sequence input mapped through a body with a tensor shared by every element, an optional
// input tested and unwrapped; one plan per layout (length, element shapes, presence).
//   seq_out = SequenceMap(seq, w) { e, w -> e * e + w }
//   has = OptionalHasElement(opt); y = If(has) { OptionalGetElement(opt) * 2 } else { w }
OnnxModel map_model() {
  OnnxModel m(17);
  sequence_input(m, "seq", TP::FLOAT);
  m.input("w", {3});
  optional_input(m, "opt", TP::FLOAT, {3});
  OnnxModel body(17);
  body.input("e", {"R", 3});
  body.input("wb", {3});
  body.node("Mul", {"e", "e"}, {"sq"});
  body.node("Add", {"sq", "wb"}, {"r"});
  body.output("r");
  set_attr(m.node("SequenceMap", {"seq", "w"}, {"seq_out"}, "map"), "body", body);
  m.node("OptionalHasElement", {"opt"}, {"has"});
  OnnxModel then_branch(17), else_branch(17);
  then_branch.initializer("two", scalar_f32(2));
  then_branch.node("OptionalGetElement", {"opt"}, {"v"});
  then_branch.node("Mul", {"v", "two"}, {"v2"});
  then_branch.output("v2");
  else_branch.node("Identity", {"w"}, {"w2"});
  else_branch.output("w2");
  auto& n = m.node("If", {"has"}, {"y"}, "if");
  set_attr(n, "then_branch", then_branch);
  set_attr(n, "else_branch", else_branch);
  for (const char* o : {"seq_out", "has", "y"}) m.output(o);
  return m;
}

Array square_plus(const Array& e, const Array& w) {
  Array r(DType::F32, e.shape());
  for (int64_t i = 0; i < e.numel(); ++i)
    r.set_f64(i, float(float(e.get_f64(i) * e.get_f64(i)) + float(w.get_f64(i % 3))));
  return r;
}

TEST(OnnxImportSequence, SequenceAndOptionalInputsSpecialisePerLayout) {
  OnnxModel m = map_model();
  Array w = random_array(DType::F32, {3}, 201), opt = random_array(DType::F32, {3}, 202);
  std::vector<Array> seq = {random_array(DType::F32, {2, 3}, 203), random_array(DType::F32, {1, 3}, 204),
                            random_array(DType::F32, {4, 3}, 205)};

  // Two elements and the optional present; three elements and none.
  std::vector<OnnxValue> a =
      run_both(m, {{"seq", OnnxValue::sequence({seq[0], seq[1]})}, {"w", w}, {"opt", opt}});
  ASSERT_EQ(a.size(), 3u);
  expect_same(a[0], OnnxValue::sequence({square_plus(seq[0], w), square_plus(seq[1], w)}), "SequenceMap");
  Array yes(DType::Bool, {});
  yes.data<bool>()[0] = true;
  expect_same(a[1], yes, "OptionalHasElement");
  Array twice(DType::F32, {3});
  for (int64_t i = 0; i < 3; ++i) twice.set_f64(i, 2 * opt.get_f64(i));
  expect_same(a[2], twice, "OptionalGetElement");

  std::vector<OnnxValue> b =
      run_both(m, {{"seq", OnnxValue::sequence(seq)}, {"w", w}, {"opt", OnnxValue::none()}});
  ASSERT_EQ(b.size(), 3u);
  expect_same(b[0],
              OnnxValue::sequence({square_plus(seq[0], w), square_plus(seq[1], w), square_plus(seq[2], w)}),
              "SequenceMap");
  Array no(DType::Bool, {});
  no.data<bool>()[0] = false;
  expect_same(b[1], no, "OptionalHasElement of none");
  expect_same(b[2], w, "the else branch");

  // One executable: a layout seen before reuses its plan; the empty sequence is a layout too.
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  for (const NamedOnnxValues& in : std::vector<NamedOnnxValues>{
           {{"seq", OnnxValue::sequence({seq[0], seq[1]})}, {"w", w}, {"opt", opt}},
           {{"seq", OnnxValue::sequence({})}, {"w", w}, {"opt", OnnxValue::none()}},
           {{"seq", OnnxValue::sequence({seq[0], seq[1]})}, {"w", w}, {"opt", opt}}}) {
    Expected<std::vector<OnnxValue> > got = exe->run_values(in);
    ASSERT_TRUE(got.has_value()) << got.status().to_string();
    EXPECT_EQ((*got)[0].elements().size(), in.at("seq").elements().size());
  }
  EXPECT_EQ(exe->specializations(), 2u);
  EXPECT_EQ(exe->layout_inputs(), (std::set<std::string>{"opt", "seq"}));

  // run() cannot give a sequence: it says which input is missing.
  Expected<std::vector<Array> > flat = exe->run({{"w", w}, {"opt", opt}});
  ASSERT_FALSE(flat.has_value());
  EXPECT_CONTAINS(flat.status().message(), "input 'seq' (a sequence or an optional) is missing");
}

// An optional tensor given as a tensor through the tensor-only run(); Identity passes a sequence
// on; a sequence output comes back as its elements.
TEST(OnnxImportSequence, TensorOnlyRunTakesOptionalTensorsAndFlattensSequences) {
  OnnxModel m(17);
  optional_input(m, "opt", TP::FLOAT, {3});
  m.node("OptionalGetElement", {"opt"}, {"v"});
  m.node("Neg", {"v"}, {"n"});
  m.node("SequenceConstruct", {"v", "n"}, {"s"});
  m.node("Identity", {"s"}, {"s_copy"});
  m.output("s_copy");
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Array v = random_array(DType::F32, {3}, 301);
  Expected<std::vector<Array> > out = exe->run({{"opt", v}});
  ASSERT_TRUE(out.has_value()) << out.status().to_string();
  ASSERT_EQ(out->size(), 2u);
  Array neg(DType::F32, {3});
  for (int64_t i = 0; i < 3; ++i) neg.set_f64(i, -v.get_f64(i));
  EXPECT_TRUE(arrays_close((*out)[0], v, 0, 0));
  EXPECT_TRUE(arrays_close((*out)[1], neg, 0, 0));
}

// ---- refusals: each names the node and the input ----

std::string import_error_of(OnnxModel& m) {
  Expected<Graph> g = import_onnx_bytes(m.bytes(), "seq.onnx");
  EXPECT_FALSE(g.has_value());
  return g ? "" : g.status().message();
}

// x [4,3] split into a sequence of 4 rows; `p` a position.
OnnxModel rows_model() {
  OnnxModel m(17);
  m.input("x", {4, 3});
  auto& n = m.node("SplitToSequence", {"x"}, {"s"}, "split");
  set_attr(n, "keepdims", int64_t(0));
  return m;
}

TEST(OnnxImportSequence, PositionsMustBeKnownAndInRange) {
  {
    OnnxModel m = rows_model();
    m.input("p", TP::INT64, {});
    m.node("Abs", {"p"}, {"q"});
    m.node("SequenceAt", {"s", "q"}, {"y"}, "at");
    m.output("y");
    std::string e = import_error_of(m);
    EXPECT_CONTAINS(e, "SequenceAt node 'at'");
    EXPECT_CONTAINS(e, "the position (input 1 'q'");
    EXPECT_CONTAINS(e, "must be known at import time");
  }
  {
    OnnxModel m = rows_model();
    m.initializer("p", i64_scalar(4));
    m.node("SequenceAt", {"s", "p"}, {"y"}, "at");
    m.output("y");
    EXPECT_CONTAINS(import_error_of(m),
                    "SequenceAt node 'at': the position 4 is outside [-4, 3] for a sequence of 4 tensors");
  }
  {
    // A position given at run time specialises the executable on its value.
    OnnxModel m = rows_model();
    m.input("p", TP::INT64, {});
    m.node("SequenceAt", {"s", "p"}, {"y"}, "at");
    m.output("y");
    Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", CompileOptions{});
    ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
    Array x = random_array(DType::F32, {4, 3}, 401);
    for (int64_t p : {-1, 2}) {
      Expected<std::vector<Array> > out = exe->run({{"x", x}, {"p", i64_scalar(p)}});
      ASSERT_TRUE(out.has_value()) << out.status().to_string();
      EXPECT_TRUE(arrays_close((*out)[0], rows(x, (p + 4) % 4, (p + 4) % 4 + 1).reshaped({3}), 0, 0));
    }
  }
}

TEST(OnnxImportSequence, RefusesWhatItCannotExpress) {
  {
    // A tensor op on a sequence.
    OnnxModel m = rows_model();
    m.node("Relu", {"s"}, {"y"}, "relu");
    m.output("y");
    EXPECT_CONTAINS(import_error_of(m),
                    "Relu node 'relu': input 0 's' is a sequence of 4 tensors; this input takes a tensor");
  }
  {
    // An element of another dtype.
    OnnxModel m = rows_model();
    m.initializer("k", i64s({1, 2}));
    m.node("SequenceInsert", {"s", "k"}, {"y"}, "insert");
    m.output("y");
    EXPECT_CONTAINS(import_error_of(m),
                    "SequenceInsert node 'insert': the inserted tensor is i64, the sequence holds f32");
  }
  {
    // An optional holding nothing has no element.
    OnnxModel m(17);
    auto& opt = m.node("Optional", {}, {"o"}, "none");
    auto* a = opt.add_attribute();
    a->set_name("type");
    a->set_type(onnx::AttributeProto::TYPE_PROTO);
    a->mutable_tp()->mutable_tensor_type()->set_elem_type(TP::FLOAT);
    m.node("OptionalGetElement", {"o"}, {"y"}, "get");
    m.output("y");
    EXPECT_CONTAINS(import_error_of(m), "OptionalGetElement node 'get': input 0 'o'");
    EXPECT_CONTAINS(import_error_of(m), "holds nothing");
  }
  {
    // Strings stay refused; so does concatenating nothing.
    OnnxModel m(17);
    set_attr(m.node("SequenceEmpty", {}, {"s"}, "empty"), "dtype", int64_t(TP::STRING));
    m.output("s");
    EXPECT_CONTAINS(import_error_of(m), "SequenceEmpty node 'empty': attribute 'dtype' is STRING");
    OnnxModel c(17);
    c.node("SequenceEmpty", {}, {"s"}, "empty");
    set_attr(c.node("ConcatFromSequence", {"s"}, {"y"}, "cat"), "axis", int64_t(0));
    c.output("y");
    EXPECT_CONTAINS(import_error_of(c), "ConcatFromSequence node 'cat': the sequence is empty");
  }
  {
    // A split that does not cover the axis.
    OnnxModel m(17);
    m.input("x", {4, 3});
    m.initializer("split", i64s({1, 2}));
    m.node("SplitToSequence", {"x", "split"}, {"s"}, "split");
    m.output("s");
    EXPECT_CONTAINS(import_error_of(m),
                    "SplitToSequence node 'split': split sums to 3, but the axis has size 4");
  }
}

// An optional output holding nothing comes back as none; an empty sequence as no tensors. A
// model returning nothing but those is refused (a graph returns at least one tensor).
TEST(OnnxImportSequence, EmptyOutputs) {
  OnnxModel m(17);
  optional_input(m, "opt", TP::FLOAT, {3});
  m.input("x", {2});
  m.node("SequenceEmpty", {}, {"empty"});
  m.node("Identity", {"opt"}, {"same"});
  m.node("Neg", {"x"}, {"y"});
  for (const char* o : {"empty", "same", "y"}) m.output(o);
  Array x = random_array(DType::F32, {2}, 601), v = random_array(DType::F32, {3}, 602);
  std::vector<OnnxValue> out = run_both(m, {{"opt", OnnxValue::none()}, {"x", x}});
  ASSERT_EQ(out.size(), 3u);
  expect_same(out[0], OnnxValue::sequence({}), "SequenceEmpty");
  expect_same(out[1], OnnxValue::none(), "the optional");
  out = run_both(m, {{"opt", v}, {"x", x}});
  ASSERT_EQ(out.size(), 3u);
  expect_same(out[1], v, "the optional");

  OnnxModel nothing(17);
  nothing.node("SequenceEmpty", {}, {"empty"});
  nothing.output("empty");
  EXPECT_CONTAINS(import_error_of(nothing),
                  "every graph output is an optional holding nothing or an empty sequence");
}

TEST(OnnxImportSequence, SequenceInputsNeedTheirLayout) {
  OnnxModel m(17);
  sequence_input(m, "s", TP::FLOAT);
  m.input("x", {3});
  m.node("SequenceLength", {"s"}, {"n"});
  m.output("n");
  // Without OnnxExecutable nothing gives the layout.
  EXPECT_CONTAINS(import_error_of(m), "graph input 's' is a sequence: fusebox needs its layout");
  // ... and a value would not help: only the layout-taking import names the input.
  std::string needs = "unset";
  EXPECT_FALSE(import_onnx_bytes(m.bytes(), "seq.onnx", {}, &needs).has_value());
  EXPECT_EQ(needs, "");
  OnnxImportReport report;
  EXPECT_FALSE(import_onnx_bytes(m.bytes(), "seq.onnx", {}, {}, &report).has_value());
  EXPECT_EQ(report.needs_value, "s");
  EXPECT_TRUE(report.needs_layout);
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "seq.onnx", CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Array x = random_array(DType::F32, {3}, 501);
  // A sequence for a tensor input, a tensor for a sequence input, an element of another dtype.
  Expected<std::vector<OnnxValue> > bad =
      exe->run_values({{"s", OnnxValue::sequence({x})}, {"x", OnnxValue::sequence({x})}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_CONTAINS(bad.status().message(), "'x'");
  bad = exe->run_values({{"s", x}, {"x", x}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_CONTAINS(bad.status().message(), "graph input 's' is a sequence; a tensor was given for it");
  bad = exe->run_values({{"s", OnnxValue::sequence({i64s({1})})}, {"x", x}});
  ASSERT_FALSE(bad.has_value());
  EXPECT_CONTAINS(bad.status().message(), "element 0 of graph input 's': the given element is i64[1]");
  Expected<std::vector<OnnxValue> > good = exe->run_values({{"s", OnnxValue::sequence({x, x})}, {"x", x}});
  ASSERT_TRUE(good.has_value()) << good.status().to_string();
  expect_same((*good)[0], i64_scalar(2), "SequenceLength");
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
