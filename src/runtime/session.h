// Session: compile a graph into an Executable, then run it on named inputs.
//
//   fusebox::Session session;
//   auto exe = session.compile(graph);                    // verify, fuse, plan memory, kernels
//   auto outs = exe->run({{"x", x_array}, {"w", w_array}}); // binds N from x's shape
//
// Symbolic dims are bound per call from the inputs' shapes, so a new batch size or image size
// runs the same Executable without recompiling.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "fusion/env.h"
#include "fusion/options.h"
#include "fusion/report.h"
#include "ir/array.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "runtime/array_pool.h"
#include "runtime/memory_plan.h"

namespace fusebox {

class CompiledKernel;

enum class ExecutorKind {
  Cpu,             // fused regions and element-wise ops on the fast CPU path (generated code for
                   // large runs when the build has LLVM, else the tile interpreter), the rest by
                   // reference
  CpuInterpreter,  // the same, regions always through the tile interpreter
  CpuJit,          // the same, regions through generated code at every size (tests)
  Reference,       // every node through the reference kernels (the oracle of tests)
};

// "cpu", "cpu-interpreter", "cpu-jit", "reference" (the CLI's --executor).
std::string_view executor_name(ExecutorKind e);
std::optional<ExecutorKind> parse_executor(std::string_view name);
std::string executor_choices();  // "cpu, cpu-interpreter, cpu-jit, reference"

struct CompileOptions {
  FusionTarget target = FusionTarget::Cpu;
  // The caller's options; nullopt: FusionOptions::for_target(target).
  std::optional<FusionOptions> fusion;
  // false: run the graph exactly as written (no pipeline at all).
  bool fuse = true;
  // Apply FUSEBOX_*/RLX_* overrides (the CLI does). `env` empty: the process environment.
  bool merge_env = false;
  EnvLookup env;
  ExecutorKind executor = ExecutorKind::Cpu;
  bool verify = true;
  // Verify after every pass (on in debug builds; tests turn it on).
#ifdef NDEBUG
  bool verify_each_pass = false;
#else
  bool verify_each_pass = true;
#endif
  // Sizes of symbols for the report's byte estimate.
  SymbolBindings report_sizes;
};

using NamedArrays = std::map<std::string, Array, std::less<>>;

class Executable {
 public:
  // The graph that runs (after fusion).
  const Graph& graph() const { return graph_; }
  const FusionReport& report() const { return report_; }
  // Output names: the value's name when it has one, else "out<k>".
  const std::vector<std::string>& output_names() const { return output_names_; }

  // Runs the plan. Errors: a missing or unknown input, a wrong dtype, rank or static dim, a
  // symbol bound to two sizes, a run-time failure of a kernel. Outputs follow graph order.
  Expected<std::vector<Array>> run(const NamedArrays& inputs) const;
  // Same, and records each node's wall time in seconds (index: node of graph()).
  Expected<std::vector<Array>> run_profiled(const NamedArrays& inputs, std::vector<double>* node_seconds) const;
  // Binds the symbols of the input shapes (exposed for tests and tools).
  Expected<SymbolBindings> bind(const NamedArrays& inputs) const;
  ArrayPool::Stats pool_stats() const { return pool_->stats(); }

 private:
  friend class Session;
  Graph graph_;
  FusionReport report_;
  MemoryPlan memory_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;  // per node
  std::vector<std::string> output_names_;
  std::shared_ptr<ArrayPool> pool_ = std::make_shared<ArrayPool>();
};

class Session {
 public:
  Expected<Executable> compile(const Graph& graph, const CompileOptions& options = {}) const;
};

// Runs one node with the reference kernels (the constant evaluator canonicalize uses).
Expected<std::vector<Array>> evaluate_with_reference(const Node& node, std::span<const Array> inputs);

}  // namespace fusebox
