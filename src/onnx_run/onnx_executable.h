// OnnxExecutable: an ONNX model compiled once per distinct value of its shape-like graph inputs.
//
// ONNX lets a shape, axes, sizes, scales, pads, k or depth be a tensor computed at run time, even
// a graph input (Reshape's shape, Slice's starts, Resize's sizes, TopK's k, ConstantOfShape's
// shape, ...). fusebox's IR fixes ranks and writes such operands as attributes, so the importer
// needs their values. This class reads them from the inputs each run is given, imports the model
// with them as constants (import_onnx_file with OnnxInputValues), compiles that graph and keeps
// it keyed on the values: a run with values seen before reuses its plan, new values compile again.
// Every other input is bound as usual (its dynamic dims are symbols bound from its shape), so one
// specialisation still runs at every batch size.
//
//   Expected<OnnxExecutable> exe = OnnxExecutable::compile("model.onnx", CompileOptions{});
//   exe->run({{"data", x}, {"shape", shape_values}});   // names as onnx_value_name gives them
//
// Which inputs are shape-like is found by importing: an import that stops because a node needs a
// value computed from a graph input names that input; when the run gives it, its value is bound
// and the import tried again. A value is never read unless the caller passes it to run(), and only
// inputs of up to 65536 elements are read (a data tensor feeding a shape is refused, not compiled
// per run). A model without such inputs compiles once in compile() and runs like a plain
// Executable. run() may be called from several threads; compiles are serialised.
//
// Sequences and optionals: run_values() takes and returns OnnxValues (a tensor, a sequence of
// tensors, or an optional holding nothing). A model is specialised on the layout of each sequence
// or optional input too (its length, each element's dtype and shape, an optional's presence),
// found the same way: one plan per distinct layout, its elements bound as tensors.
//
//   exe->run_values({{"x", OnnxValue::sequence({a, b})}, {"opt", OnnxValue::none()}});
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "onnx/importer.h"
#include "runtime/session.h"

namespace fusebox {

// A value of an ONNX graph input or output: a tensor, a sequence of tensors, or none (an optional
// holding nothing). An optional holding a value is given and returned as that value.
class OnnxValue {
 public:
  enum class Kind : uint8_t { Tensor, Sequence, None };
  OnnxValue(Array tensor)
      : kind_(Kind::Tensor), elements_{std::move(tensor)} {}  // NOLINT: a tensor is a value
  static OnnxValue sequence(std::vector<Array> elements) {
    return OnnxValue(Kind::Sequence, std::move(elements));
  }
  static OnnxValue none() { return OnnxValue(Kind::None, {}); }

  Kind kind() const { return kind_; }
  const Array& tensor() const { return elements_.at(0); }           // requires kind() == Tensor
  const std::vector<Array>& elements() const { return elements_; }  // a sequence's (a tensor: itself)

 private:
  OnnxValue(Kind kind, std::vector<Array> elements) : kind_(kind), elements_(std::move(elements)) {}
  Kind kind_;
  std::vector<Array> elements_;
};
using NamedOnnxValues = std::map<std::string, OnnxValue, std::less<>>;

class OnnxExecutable {
 public:
  static Expected<OnnxExecutable> compile(std::string path, CompileOptions options);
  // A serialized model held in memory (import_onnx_bytes: no external data).
  static Expected<OnnxExecutable> compile_bytes(std::string bytes, std::string name, CompileOptions options);

  // Inputs by graph input name (onnx_value_name of the ONNX name), shape-like ones included.
  // Errors: those of import (a bad value, such as a negative size or a rank that does not match,
  // names the node and the values given), of compile, and of Executable::run.
  // Tensors only: a sequence output's elements come back in its place, one array each.
  Expected<std::vector<Array>> run(const NamedArrays& inputs) const;
  // Any values, by graph input name; one value per ONNX graph output.
  Expected<std::vector<OnnxValue>> run_values(const NamedOnnxValues& inputs) const;

  // ONNX names of the graph inputs found so far whose values fix shapes.
  std::set<std::string> value_inputs() const;
  // ONNX names of the sequence and optional graph inputs found so far.
  std::set<std::string> layout_inputs() const;
  // Plans held (one per distinct set of values; the 64 most recent).
  size_t specializations() const;

 private:
  struct Plan;
  struct State;
  static Expected<OnnxExecutable> start(std::shared_ptr<State> state);
  Expected<std::shared_ptr<const Plan>> specialise(const NamedArrays& inputs,
                                                   const NamedOnnxValues& structured) const;
  Expected<std::vector<Array>> run_plan(const Plan& plan, const NamedArrays& inputs) const;
  static NamedArrays plan_inputs(const Plan& plan, const NamedArrays& inputs,
                                 const NamedOnnxValues& structured);
  std::shared_ptr<State> state_;
};

}  // namespace fusebox
