// OnnxNode: one NodeProto as the converters see it. Every attribute and input a converter reads
// is marked; after conversion the importer refuses any attribute or input left unread, so an
// attribute the converter does not know about can never be ignored silently.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "onnx/onnx_proto.h"

namespace fusebox::onnx_import {

class OnnxNode {
 public:
  OnnxNode(const onnx::NodeProto& proto, int index);

  const std::string& op_type() const { return proto_.op_type(); }
  // "Conv node 'conv_1'" (or "Conv node #12" when the node has no name).
  std::string describe() const;
  // An invalid-argument Status "<describe>: <msg>".
  Status error(const std::string& msg) const;

  // Inputs, including empty names (absent optional inputs).
  int num_inputs() const { return proto_.input_size(); }
  bool has_input(int i) const { return i < num_inputs() && !proto_.input(i).empty(); }
  // Marks the input read; "" when absent.
  const std::string& input(int i);
  // The input's name without marking it read (for bookkeeping that is not a use).
  const std::string& proto_input(int i) const { return proto_.input(i); }
  int num_outputs() const { return proto_.output_size(); }
  bool has_output(int i) const { return i < num_outputs() && !proto_.output(i).empty(); }
  const std::string& output(int i) const { return proto_.output(i); }

  // Attribute getters: each marks the attribute read. A present attribute of the wrong type is
  // remembered as the node's error (status()) and the default comes back.
  bool has_attr(const std::string& name) const { return find(name) >= 0; }
  int64_t attr_int(const std::string& name, int64_t def);
  std::optional<int64_t> attr_int(const std::string& name);
  float attr_float(const std::string& name, float def);
  std::optional<float> attr_float(const std::string& name);
  std::string attr_string(const std::string& name, const std::string& def);
  std::optional<std::vector<int64_t>> attr_ints(const std::string& name);
  std::optional<std::vector<float>> attr_floats(const std::string& name);
  std::optional<std::vector<std::string>> attr_strings(const std::string& name);
  const onnx::TensorProto* attr_tensor(const std::string& name);
  // A subgraph attribute (If's branches, Loop's and Scan's body); nullptr when absent.
  const onnx::GraphProto* attr_graph(const std::string& name);
  // An attribute the converter accepts but that does not change the result (e.g. momentum of
  // an inference batch norm).
  void accept_attr(const std::string& name);

  // The first attribute type error, or ok.
  const Status& status() const { return status_; }
  // After conversion: an error naming the first attribute or input that was not read.
  Status check_consumed() const;

 private:
  int find(const std::string& name) const;
  const onnx::AttributeProto* get(const std::string& name, onnx::AttributeProto::AttributeType type);

  const onnx::NodeProto& proto_;
  int index_;
  std::vector<bool> attr_read_;
  std::vector<bool> input_read_;
  Status status_;
};

}  // namespace fusebox::onnx_import
