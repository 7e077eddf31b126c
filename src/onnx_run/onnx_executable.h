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

class OnnxExecutable {
 public:
  static Expected<OnnxExecutable> compile(std::string path, CompileOptions options);
  // A serialized model held in memory (import_onnx_bytes: no external data).
  static Expected<OnnxExecutable> compile_bytes(std::string bytes, std::string name, CompileOptions options);

  // Inputs by graph input name (onnx_value_name of the ONNX name), shape-like ones included.
  // Errors: those of import (a bad value, such as a negative size or a rank that does not match,
  // names the node and the values given), of compile, and of Executable::run.
  Expected<std::vector<Array>> run(const NamedArrays& inputs) const;

  // ONNX names of the graph inputs found so far whose values fix shapes.
  std::set<std::string> value_inputs() const;
  // Plans held (one per distinct set of values; the 64 most recent).
  size_t specializations() const;

 private:
  struct Plan;
  struct State;
  static Expected<OnnxExecutable> start(std::shared_ptr<State> state);
  Expected<std::shared_ptr<const Plan>> specialise(const NamedArrays& inputs) const;
  std::shared_ptr<State> state_;
};

}  // namespace fusebox
