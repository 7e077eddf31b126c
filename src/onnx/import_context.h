// ImportContext: what the ONNX converters share while one model is imported: the graph being
// built, what every ONNX tensor name stands for, and the values known at import time.
//
// An ONNX name can stand for
//   a graph value     emitted already (graph input, node result)
//   a constant        data known at import time (initializer, Constant node, folded node),
//                     emitted as a `constant` node only when an op reads it as a tensor
//   known integers    a rank-0/1 integer tensor whose elements are known up to run-time symbols
//                     (what Shape produces); shape arithmetic folds these, and Reshape, Expand,
//                     Slice, ... turn them into attributes
//   a sequence        a list of tensor values, resolved at import (convert_sequence.cpp)
//   an optional       none, or one tensor or sequence value
// Ops that take tensors refuse a sequence or an optional (lookup); only the sequence ops,
// Identity, If and Loop handle them.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/builder.h"
#include "onnx/importer.h"
#include "onnx/onnx_node.h"
#include "onnx/tensor_data.h"

namespace fusebox::onnx_import {

// One element of known ints: a number (any sign: -1 in a reshape target is a number), a symbol
// bound at run time (a size N), or unknown (a size fusebox does not name, printed `?`).
struct IntElem {
  enum class Kind : uint8_t { Number, Symbol, Unknown };
  Kind kind = Kind::Number;
  int64_t number = 0;
  std::string symbol;

  static IntElem of(int64_t v) { return {Kind::Number, v, {}}; }
  static IntElem unknown() { return {Kind::Unknown, 0, {}}; }
  static IntElem from_dim(const Dim& d);
  bool is_number() const { return kind == Kind::Number; }
  // The elem as a dim: a number >= 0 or a symbol; anything else is an unknown dim.
  Dim to_dim() const;
  std::string to_string() const;
  friend bool operator==(const IntElem& a, const IntElem& b) {
    return a.kind == b.kind && a.number == b.number && a.symbol == b.symbol;
  }
};

// A rank-0 or rank-1 integer tensor whose elements are known at import time up to run-time sizes.
struct KnownInts {
  DType dtype = DType::I64;
  bool scalar = false;
  std::vector<IntElem> elems;

  bool all_numbers() const;
  std::vector<int64_t> numbers() const;  // requires all_numbers()
  Shape shape() const;                   // [] or [n]
  std::string to_string() const;         // "[N,256,?]"
  Array to_array() const;                // requires all_numbers()
};

struct OnnxValue {
  ValueId id = kNoValue;
  std::shared_ptr<const Array> constant;
  std::optional<KnownInts> ints;
  std::string origin;  // "initializer", "graph input", "Shape node 's'", for messages
  // The graph inputs whose values this value is computed from (for a graph value only): when an
  // op needs it known at import time, the first of them is the input to give a value for.
  std::set<std::string> value_of_inputs;
  // A sequence holds its tensors in `elements`; an optional holds nothing (none) or one tensor or
  // sequence value there. The fields above describe a tensor only.
  enum class Kind : uint8_t { Tensor, Sequence, Optional };
  Kind kind = Kind::Tensor;
  std::vector<OnnxValue> elements;

  bool is_tensor() const { return kind == Kind::Tensor; }
  // "a sequence of 3 tensors", "an optional holding nothing", ... (for messages)
  std::string describe_kind() const;
};

class ImportContext {
 public:
  ImportContext(std::string graph_name, int64_t opset, ExternalDataDir external);

  int64_t opset() const { return opset_; }
  const ExternalDataDir& external() const { return external_; }
  GraphBuilder& builder() { return b_; }

  // Graph inputs and initializers.
  Status add_input(const std::string& onnx_name, DType dtype, Shape shape);
  // A graph input whose value the caller gave: a constant like an initializer.
  void add_given_input(const std::string& onnx_name, Array value);
  void add_constant(const std::string& onnx_name, Array value, std::string origin);
  bool defined(const std::string& onnx_name) const { return values_.count(onnx_name) > 0; }
  // A symbol for an ONNX dim_param (sanitised; the same dim_param gives the same symbol).
  std::string symbol(const std::string& dim_param);

  // ---- a node's inputs ----
  // The input as a graph value; constants are emitted on first use.
  Expected<ValueId> value(OnnxNode& n, int i);
  // The input's type, without emitting anything.
  Expected<TensorType> type_of(OnnxNode& n, int i);
  // The input's data when it is known at import time (constants and fully static known ints).
  const Array* constant(OnnxNode& n, int i);
  // The input as known integers (integer constants of rank <= 1 included), or nullopt.
  std::optional<KnownInts> ints(OnnxNode& n, int i);
  // Errors name the node, the input's role (`what`) and where a run-time value came from.
  Expected<Array> require_constant(OnnxNode& n, int i, const std::string& what);
  Expected<KnownInts> require_ints(OnnxNode& n, int i, const std::string& what);
  Expected<std::vector<int64_t>> require_static_ints(OnnxNode& n, int i, const std::string& what);
  Expected<double> require_scalar(OnnxNode& n, int i, const std::string& what);
  // After a require_* failed on a value computed from graph inputs: the first such input (its
  // ONNX name), whose value would let the import go on; "" otherwise.
  const std::string& needs_value() const { return needs_value_; }
  // Records that `v` had to be known at import time (for needs_value()), as require_* do.
  void note_needed(const OnnxValue& v);

  // ---- a node's outputs ----
  // kNoValue (an emit that failed) returns the builder's error in the node's context.
  Status set_output(OnnxNode& n, int i, ValueId v);
  Status set_output_constant(OnnxNode& n, int i, Array a);
  Status set_output_ints(OnnxNode& n, int i, KnownInts k);
  bool output_defined(const std::string& onnx_name) const { return defined(onnx_name); }

  // ---- emitting ----
  ValueId emit(Op op, std::vector<ValueId> inputs, Attrs attrs = {});
  const TensorType& type(ValueId v) const { return b_.type(v); }
  // The builder's first error in the node's context (ok when there is none).
  Status builder_status(const OnnxNode& n) const;
  // x reshaped to `target`; one unknown dim becomes -1, more than one is an error.
  Expected<ValueId> reshape(OnnxNode& n, ValueId x, const Shape& target);
  // A shape-like input i known only at run time (a tensor computed from data, or a graph input):
  // x passed through a bind_symbols node (ir/bind_symbols.h, `rule` its rule) that binds one new
  // symbol per element of input i when the plan runs. Returns the passed-through x and the
  // symbols; nullopt when input i is known at import time (constant or known ints), or is not an
  // integer vector of static length.
  struct RunTimeShape {
    ValueId x;
    Shape symbols;
  };
  Expected<std::optional<RunTimeShape>> run_time_shape(OnnxNode& n, ValueId x, int i,
                                                       const std::string& rule);
  // The i64[rank, K] coordinates of x's non-zero elements (rank 1 for a scalar) when x is known
  // only at run time: a bind_symbols node (rule count_nonzero) binds a new symbol K, the count,
  // when the plan runs, and a nonzero node lists them.
  Expected<ValueId> run_time_nonzero(OnnxNode& n, ValueId x);

  // ---- subgraphs (If, Loop, Scan; convert_control.cpp) ----
  // A body's names live in a scope: inside it they shadow outer names of the same spelling, and
  // end_scope() restores what every name defined since the matching begin_scope() stood for.
  void begin_scope();
  void end_scope();
  // Whether `onnx_name` is defined in the innermost scope (the whole graph outside any body).
  bool defined_here(const std::string& onnx_name) const;
  // What `onnx_name` stands for (nullptr when undefined); bind() defines a name as another value
  // (a body input bound to a loop-carried value; a node output bound to a body output).
  const OnnxValue* find(const std::string& onnx_name) const;
  void bind(const std::string& onnx_name, OnnxValue v);
  // Converts one node of a body (the importer's node conversion, set by the importer).
  using NodeConverter = std::function<Status(ImportContext&, const onnx::NodeProto&, int index)>;
  void set_node_converter(NodeConverter f) { convert_node_ = std::move(f); }
  Status convert_node(const onnx::NodeProto& proto, int index);

  // ---- sequences and optionals (convert_sequence.cpp) ----
  // What input i stands for, whatever its kind (a copy, marked read); errors name the node.
  Expected<OnnxValue> any_input(OnnxNode& n, int i);
  bool input_is_tensor(const OnnxNode& n, int i) const;
  // Defines output i as `v` (any kind; a tensor value keeps its own name).
  Status set_output_value(OnnxNode& n, int i, OnnxValue v);
  // A graph input named exactly `graph_name` (an element of a sequence or optional graph input),
  // not bound to any ONNX name.
  Expected<ValueId> add_element_input(const std::string& graph_name, DType dtype, Shape shape);

  // Marks `onnx_name` as a graph output (emitting an identity when its value already carries
  // another name) and builds the verified graph. A sequence or optional becomes one graph output
  // per element (named by onnx_element_name); *layout (when not null) says which.
  Status add_output(const std::string& onnx_name, OnnxOutputLayout* layout = nullptr);
  Expected<Graph> build();

 private:
  Expected<OnnxValue*> lookup(OnnxNode& n, int i);
  Status add_tensor_output(OnnxValue& ov, const std::string& onnx_name);
  void name_value(ValueId v, const std::string& onnx_name);
  std::string unique_name(const std::string& onnx_name);
  // `base`, or base_1, base_2, ...: a symbol name no other symbol of the graph has.
  std::string fresh_symbol(const std::string& base);
  void define(const std::string& onnx_name, OnnxValue v);

  GraphBuilder b_;
  int64_t opset_;
  ExternalDataDir external_;
  std::map<std::string, OnnxValue> values_;
  std::map<ValueId, std::string> value_names_;
  std::set<std::string> used_names_;
  std::set<ValueId> returned_;
  std::map<std::string, std::string> symbols_;
  std::set<std::string> used_symbols_;
  std::string needs_value_;
  // Per open scope: each name it defined and what the name stood for before (nullopt: nothing).
  std::vector<std::map<std::string, std::optional<OnnxValue>>> scopes_;
  NodeConverter convert_node_;
};

// "[A-Za-z0-9_]" form of an ONNX name (a leading digit gets a 'v' prefix; empty gives "v").
std::string sanitize_name(const std::string& name);

}  // namespace fusebox::onnx_import
