// Builds small ONNX models through the protobuf API for the ONNX import tests.
//
//   OnnxModel m(13);
//   m.input("x", onnx::TensorProto::FLOAT, {"N", 3});
//   auto& n = m.node("Softmax", {"x"}, {"y"});
//   set_attr(n, "axis", int64_t(1));
//   m.output("y");
//   Expected<Graph> g = import_onnx_bytes(m.bytes(), "softmax");
#pragma once

#include <functional>
#include <string>
#include <variant>
#include <vector>

#include <gtest/gtest.h>

#include "fusebox/session.h"
#include "ir/array.h"
#include "onnx/importer.h"
#include "onnx/onnx_proto.h"
#include "support/test_util.h"

// The message contains `part` (printed in full when it does not).
#define EXPECT_CONTAINS(message, part) EXPECT_NE(std::string(message).find(part), std::string::npos) << (message)

namespace fusebox::testing {

using OnnxDim = std::variant<int64_t, std::string>;

inline int32_t onnx_type_of(DType t) {
  switch (t) {
    case DType::F32: return onnx::TensorProto::FLOAT;
    case DType::F16: return onnx::TensorProto::FLOAT16;
    case DType::BF16: return onnx::TensorProto::BFLOAT16;
    case DType::F64: return onnx::TensorProto::DOUBLE;
    case DType::I8: return onnx::TensorProto::INT8;
    case DType::U8: return onnx::TensorProto::UINT8;
    case DType::I32: return onnx::TensorProto::INT32;
    case DType::I64: return onnx::TensorProto::INT64;
    case DType::Bool: return onnx::TensorProto::BOOL;
    case DType::I16: return onnx::TensorProto::INT16;
    case DType::U16: return onnx::TensorProto::UINT16;
    case DType::U32: return onnx::TensorProto::UINT32;
    case DType::U64: return onnx::TensorProto::UINT64;
  }
  return 0;
}

inline onnx::TensorProto tensor_proto(const std::string& name, const Array& a) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx_type_of(a.dtype()));
  for (int64_t d : a.shape()) t.add_dims(d);
  t.set_raw_data(std::string(static_cast<const char*>(a.raw()), a.nbytes()));
  return t;
}

class OnnxModel {
 public:
  explicit OnnxModel(int64_t opset, const std::string& domain = "") {
    model_.set_ir_version(8);
    auto* o = model_.add_opset_import();
    o->set_domain(domain);
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  void input(const std::string& name, int32_t elem_type, const std::vector<OnnxDim>& dims) {
    auto* vi = model_.mutable_graph()->add_input();
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elem_type);
    auto* shape = tt->mutable_shape();
    for (const OnnxDim& d : dims) {
      auto* dim = shape->add_dim();
      if (const int64_t* v = std::get_if<int64_t>(&d)) dim->set_dim_value(*v);
      else if (!std::get<std::string>(d).empty()) dim->set_dim_param(std::get<std::string>(d));
    }
  }
  void input(const std::string& name, const std::vector<OnnxDim>& dims) {
    input(name, onnx::TensorProto::FLOAT, dims);
  }
  void output(const std::string& name) { model_.mutable_graph()->add_output()->set_name(name); }
  void initializer(const std::string& name, const Array& a) {
    *model_.mutable_graph()->add_initializer() = tensor_proto(name, a);
  }
  onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& inputs,
                        const std::vector<std::string>& outputs, const std::string& name = "") {
    auto* n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(model_.graph().node_size()) : name);
    for (const auto& i : inputs) n->add_input(i);
    for (const auto& o : outputs) n->add_output(o);
    return *n;
  }
  // A Constant node defining `name`.
  void constant(const std::string& name, const Array& a) {
    auto& n = node("Constant", {}, {name});
    auto* attr = n.add_attribute();
    attr->set_name("value");
    attr->set_type(onnx::AttributeProto::TENSOR);
    *attr->mutable_t() = tensor_proto(name, a);
  }

  onnx::ModelProto& proto() { return model_; }
  const onnx::GraphProto& graph() const { return model_.graph(); }
  std::string bytes() const { return model_.SerializeAsString(); }

 private:
  onnx::ModelProto model_;
};

inline void set_attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::STRING);
  a->set_s(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const char* v) {
  set_attr(n, name, std::string(v));
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<int64_t>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<float>& v) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOATS);
  for (float x : v) a->add_floats(x);
}

// A subgraph attribute (If's branches, Loop's and Scan's body): `body` is built like a model (its
// inputs, nodes and outputs) and its graph becomes the attribute.
inline void set_attr(onnx::NodeProto& n, const std::string& name, const OnnxModel& body) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::GRAPH);
  *a->mutable_g() = body.graph();
}

inline Array i64s(std::vector<int64_t> v) {
  Array a(DType::I64, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.set_i64(int64_t(i), v[i]);
  return a;
}
inline Array f32s(std::vector<float> v) {
  Array a(DType::F32, {int64_t(v.size())});
  for (size_t i = 0; i < v.size(); ++i) a.data<float>()[i] = v[i];
  return a;
}
inline Array scalar_f32(float v) {
  Array a(DType::F32, {});
  a.data<float>()[0] = v;
  return a;
}

// Imports the model (failing the test on an error).
inline Graph import_model(const OnnxModel& m) {
  Expected<Graph> g = import_onnx_bytes(m.bytes(), "test.onnx");
  EXPECT_TRUE(g.has_value()) << g.status().to_string();
  return g ? *g : Graph();
}

// The import error message ("" and a test failure when the import succeeds).
inline std::string import_error(const OnnxModel& m) {
  Expected<Graph> g = import_onnx_bytes(m.bytes(), "test.onnx");
  EXPECT_FALSE(g.has_value()) << "the import was expected to fail";
  return g ? std::string() : g.status().message();
}

// Imports the model and runs it on the CPU reference backend; fails the test on any error.
inline std::vector<Array> import_and_run(const OnnxModel& m, const NamedArrays& inputs) {
  Graph g = import_model(m);
  if (g.outputs().empty()) return {};
  // The import as written, op by op on the reference kernels: the tests compare it bit for bit
  // with the ops they expect.
  CompileOptions options;
  options.fuse = false;
  options.backend = "reference";
  Expected<Executable> exe = Session().compile(g, options);
  EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
  if (!exe) return {};
  Expected<std::vector<Array>> out = exe->run(inputs);
  EXPECT_TRUE(out.has_value()) << out.status().to_string();
  return out ? *out : std::vector<Array>{};
}

// Whether a fused result agrees with the unfused one (arrays_close or close_to_scale with the
// test's tolerance).
using Agreement = std::function<::testing::AssertionResult(const Array& fused, const Array& unfused)>;

// Runs the model unfused on the reference kernels (import_and_run) and fused on the CPU pipeline;
// every fused output must `agree` with the unfused one. The fused executable runs once on
// poisoned inputs first (floats NaN, integers all bits set, bools true; its result is not looked at), so a
// result element the real run leaves unwritten shows stale data from the reused buffers.
// Returns the unfused results.
inline std::vector<Array> run_fused_and_unfused(const OnnxModel& m, const NamedArrays& inputs, const Agreement& agree) {
  std::vector<Array> ref = import_and_run(m, inputs);
  Graph g = import_model(m);
  CompileOptions options;
  use_backend(options, kCpu);
  Expected<Executable> exe = Session().compile(g, options);
  EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
  if (!exe) return ref;
  NamedArrays poisoned;
  for (const auto& [name, a] : inputs) {
    Array p(a.dtype(), a.shape());
    p.fill_bytes(a.dtype() == DType::Bool ? 0x01 : 0xFF);  // a bool holds only 0 or 1
    poisoned.emplace(name, std::move(p));
  }
  (void)exe->run(poisoned);
  Expected<std::vector<Array>> fused = exe->run(inputs);
  EXPECT_TRUE(fused.has_value()) << fused.status().to_string();
  if (!fused) return ref;
  EXPECT_EQ(fused->size(), ref.size());
  for (size_t i = 0; i < ref.size() && i < fused->size(); ++i) {
    EXPECT_TRUE(agree((*fused)[i], ref[i])) << "fused output " << i;
  }
  return ref;
}

}  // namespace fusebox::testing
