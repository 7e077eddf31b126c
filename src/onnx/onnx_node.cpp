#include "onnx/onnx_node.h"

namespace fusebox::onnx_import {

using AP = onnx::AttributeProto;

namespace {

std::string type_name(int t) {
  if (AP::AttributeType_IsValid(t)) return AP::AttributeType_Name(static_cast<AP::AttributeType>(t));
  return "type " + std::to_string(t);
}

}  // namespace

OnnxNode::OnnxNode(const onnx::NodeProto& proto, int index)
    : proto_(proto),
      index_(index),
      attr_read_(static_cast<size_t>(proto.attribute_size()), false),
      input_read_(static_cast<size_t>(proto.input_size()), false) {}

std::string OnnxNode::describe() const {
  std::string op = proto_.op_type().empty() ? "(no op type)" : proto_.op_type();
  if (!proto_.name().empty()) return op + " node '" + proto_.name() + "'";
  return op + " node #" + std::to_string(index_);
}

Status OnnxNode::error(const std::string& msg) const { return Status::invalid(describe() + ": " + msg); }

const std::string& OnnxNode::input(int i) {
  static const std::string kEmpty;
  if (i < 0 || i >= num_inputs()) return kEmpty;
  input_read_[static_cast<size_t>(i)] = true;
  return proto_.input(i);
}

int OnnxNode::find(const std::string& name) const {
  for (int i = 0; i < proto_.attribute_size(); ++i)
    if (proto_.attribute(i).name() == name) return i;
  return -1;
}

const AP* OnnxNode::get(const std::string& name, AP::AttributeType type) {
  int i = find(name);
  if (i < 0) return nullptr;
  attr_read_[static_cast<size_t>(i)] = true;
  const AP& a = proto_.attribute(i);
  // Old exporters leave `type` unset; accept the attribute when the field that type uses is set.
  bool ok = a.type() == type;
  if (a.type() == AP::UNDEFINED) {
    switch (type) {
      case AP::INT: ok = a.has_i(); break;
      case AP::FLOAT: ok = a.has_f(); break;
      case AP::STRING: ok = a.has_s(); break;
      case AP::TENSOR: ok = a.has_t(); break;
      case AP::INTS: ok = a.ints_size() > 0; break;
      case AP::FLOATS: ok = a.floats_size() > 0; break;
      case AP::GRAPH: ok = a.has_g(); break;
      default: break;
    }
  }
  if (!ok) {
    if (status_.is_ok()) {
      status_ = error("attribute '" + name + "' must be " + type_name(type) + ", got " + type_name(a.type()));
    }
    return nullptr;
  }
  return &a;
}

int64_t OnnxNode::attr_int(const std::string& name, int64_t def) { return attr_int(name).value_or(def); }

std::optional<int64_t> OnnxNode::attr_int(const std::string& name) {
  const AP* a = get(name, AP::INT);
  if (!a) return std::nullopt;
  return a->i();
}

float OnnxNode::attr_float(const std::string& name, float def) { return attr_float(name).value_or(def); }

std::optional<float> OnnxNode::attr_float(const std::string& name) {
  const AP* a = get(name, AP::FLOAT);
  if (!a) return std::nullopt;
  return a->f();
}

std::string OnnxNode::attr_string(const std::string& name, const std::string& def) {
  const AP* a = get(name, AP::STRING);
  return a ? a->s() : def;
}

std::optional<std::vector<int64_t>> OnnxNode::attr_ints(const std::string& name) {
  const AP* a = get(name, AP::INTS);
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

std::optional<std::vector<float>> OnnxNode::attr_floats(const std::string& name) {
  const AP* a = get(name, AP::FLOATS);
  if (!a) return std::nullopt;
  return std::vector<float>(a->floats().begin(), a->floats().end());
}

std::optional<std::vector<std::string>> OnnxNode::attr_strings(const std::string& name) {
  const AP* a = get(name, AP::STRINGS);
  if (!a) return std::nullopt;
  return std::vector<std::string>(a->strings().begin(), a->strings().end());
}

const onnx::TensorProto* OnnxNode::attr_tensor(const std::string& name) {
  const AP* a = get(name, AP::TENSOR);
  return a ? &a->t() : nullptr;
}

const onnx::GraphProto* OnnxNode::attr_graph(const std::string& name) {
  const AP* a = get(name, AP::GRAPH);
  return a ? &a->g() : nullptr;
}

void OnnxNode::accept_attr(const std::string& name) {
  int i = find(name);
  if (i >= 0) attr_read_[static_cast<size_t>(i)] = true;
}

Status OnnxNode::check_consumed() const {
  for (size_t i = 0; i < attr_read_.size(); ++i) {
    if (!attr_read_[i]) {
      return error("attribute '" + proto_.attribute(static_cast<int>(i)).name() + "' is not supported");
    }
  }
  for (size_t i = 0; i < input_read_.size(); ++i) {
    if (!input_read_[i] && !proto_.input(static_cast<int>(i)).empty()) {
      return error("input " + std::to_string(i) + " ('" + proto_.input(static_cast<int>(i)) +
                   "') is not supported (the op takes " + std::to_string(i) + " inputs here)");
    }
  }
  return Status::ok();
}

}  // namespace fusebox::onnx_import
