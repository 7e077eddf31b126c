// Session: compile a graph into an Executable, then run it on named inputs.
//
//   fusebox::Session session;
//   auto exe = session.compile(graph);                    // verify, (fuse), plan memory
//   auto outs = exe->run({{"x", x_array}, {"w", w_array}}); // binds N from x's shape
//
// Symbolic dims are bound per call from the inputs' shapes, so a new batch size or image size
// runs the same Executable without recompiling.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "runtime/memory_plan.h"

namespace fusebox {

class Backend;

struct CompileOptions {
  // Run the verifier on the compiled graph (always on in tests and debug builds).
  bool verify = true;
};

using NamedArrays = std::map<std::string, Array, std::less<>>;

class Executable {
 public:
  const Graph& graph() const { return graph_; }
  // Output names: the value's name when it has one, else "out<k>".
  const std::vector<std::string>& output_names() const { return output_names_; }

  // Runs the plan. Errors: a missing or unknown input, a wrong dtype, rank or static dim, a
  // symbol bound to two sizes, a run-time failure of a kernel. Outputs follow graph order.
  Expected<std::vector<Array>> run(const NamedArrays& inputs) const;
  // Binds the symbols of the input shapes (exposed for tests and tools).
  Expected<SymbolBindings> bind(const NamedArrays& inputs) const;

 private:
  friend class Session;
  Graph graph_;
  MemoryPlan memory_;
  const Backend* backend_ = nullptr;
  std::vector<std::string> output_names_;
};

class Session {
 public:
  Expected<Executable> compile(const Graph& graph, const CompileOptions& options = {}) const;
};

}  // namespace fusebox
