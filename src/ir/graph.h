// The IR: a Graph is one function in SSA form.
//
//   values  every tensor value: graph inputs, node results; each has a TensorType and an
//           optional name (printed as %name; unnamed values print as %0, %1, ... in order)
//   inputs  graph inputs, in signature order (their names are the caller's input names)
//   nodes   in topological order; each reads values and defines its results
//   outputs ordered list of values returned (positions are stable across every pass)
//
// A node may carry a body (a Graph) for ops whose body is a small program (regions).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/attributes.h"
#include "ir/op_info.h"
#include "ir/shape.h"

namespace fusebox {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

struct ValueInfo {
  TensorType type;
  std::string name;  // empty: printed with a number
};

class Graph;

// Where a node came from in .fbir text (line 0: not from text).
struct SourceLoc {
  int line = 0;
  int column = 0;
};

struct Node {
  Op op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  Attrs attrs;
  std::shared_ptr<Graph> body;  // region bodies; null for primitive ops
  SourceLoc loc;

  const OpInfo& info() const { return op_info(op); }
  // Attribute lookup that falls back to the schema default. FUSEBOX_CHECKs that the attribute
  // exists with that type (the verifier guarantees it for verified graphs).
  const AttrValue* attr_or_default(std::string_view name) const;
  int64_t attr_i64(std::string_view name) const;
  double attr_f64(std::string_view name) const;
  bool attr_bool(std::string_view name) const;
  const std::string& attr_str(std::string_view name) const;
  const std::vector<int64_t>& attr_i64s(std::string_view name) const;
  const std::vector<double>& attr_f64s(std::string_view name) const;
  const Shape& attr_dims(std::string_view name) const;
  DType attr_dtype(std::string_view name) const;
  const Array& attr_array(std::string_view name) const;
  bool has_attr(std::string_view name) const { return attr_or_default(name) != nullptr; }
};

class Graph {
 public:
  Graph() = default;
  explicit Graph(std::string name) : name_(std::move(name)) {}
  Graph(const Graph& other);             // deep-copies region bodies
  Graph& operator=(const Graph& other);
  Graph(Graph&&) = default;
  Graph& operator=(Graph&&) = default;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  ValueId add_value(TensorType type, std::string name = {});
  ValueId add_input(std::string name, TensorType type);
  // Appends a node whose result values already exist. Returns its index.
  size_t add_node(Node node);
  // Creates result values of the given types and appends the node; returns the results.
  std::vector<ValueId> add_node(Op op, std::vector<ValueId> inputs, std::vector<TensorType> results,
                                Attrs attrs = {}, std::shared_ptr<Graph> body = nullptr);
  void add_output(ValueId v) { outputs_.push_back(v); }

  size_t num_values() const { return values_.size(); }
  const ValueInfo& value(ValueId v) const { return values_.at(static_cast<size_t>(v)); }
  ValueInfo& value(ValueId v) { return values_.at(static_cast<size_t>(v)); }
  const TensorType& type(ValueId v) const { return value(v).type; }
  bool valid(ValueId v) const { return v >= 0 && static_cast<size_t>(v) < values_.size(); }

  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& mutable_nodes() { return nodes_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId>& mutable_outputs() { return outputs_; }
  // Output slots by position (spec §4.6): those the caller marked optional, and the subset the
  // IO output gate left unmaterialised (the slot stays in outputs(); running the graph does not
  // hand its value back). Both sorted, no repeats; printed on the return line.
  const std::vector<int64_t>& optional_outputs() const { return optional_outputs_; }
  const std::vector<int64_t>& unmaterialized_outputs() const { return unmaterialized_outputs_; }
  void set_optional_outputs(std::vector<int64_t> slots);
  void set_unmaterialized_outputs(std::vector<int64_t> slots);
  bool output_materialized(size_t slot) const;

  // Index of the input with this name, or -1.
  int find_input(std::string_view name) const;
  // The distinct symbol names used by input shapes, in order of first appearance.
  std::vector<std::string> input_symbols() const;

 private:
  std::string name_;
  std::vector<ValueInfo> values_;
  std::vector<ValueId> inputs_;
  std::vector<Node> nodes_;
  std::vector<ValueId> outputs_;
  std::vector<int64_t> optional_outputs_;
  std::vector<int64_t> unmaterialized_outputs_;
};

// Display names of all values, as the printer writes them (without '%'): a value's own name, or
// the next free number for unnamed values, in definition order. Unique within the graph: a
// repeated own name gets a suffix (x, x.1), characters outside [A-Za-z0-9_.] become '_'. The
// later results of a multi-result node are "<first>#k" and use no number of their own.
std::vector<std::string> value_display_names(const Graph& g);

// "4:3: %3 = add" (the "line:col: " only when the node has a source location), for messages.
std::string describe_node(const Graph& g, const Node& n, const std::vector<std::string>& names);

// Several functions, as in one .fbir file.
struct Module {
  std::vector<Graph> functions;
  const Graph* find(std::string_view name) const;
};

}  // namespace fusebox
