// Session: compile a graph into an Executable, then run it on inputs by name or by position.
//
//   fusebox::Session session;
//   auto exe = session.compile(graph);                    // verify, fuse, place, plan, kernels
//   auto outs = exe->run({{"x", x_array}, {"w", w_array}}); // binds N from x's shape
//   auto again = exe->run(std::vector<Array>{x_array, w_array});  // graph input order
//
// Symbolic dims are bound per call from the inputs' shapes, so a new batch size or image size
// runs the same Executable without recompiling; shapes are inferred once per set of sizes.
// Compiling an identical graph with identical options again returns the cached plan.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "backends/cpu/cpu_backend.h"
#include "backends/cuda/options.h"
#include "fusebox/status.h"
#include "fusion/env.h"
#include "fusion/options.h"
#include "fusion/report.h"
#include "ir/array.h"
#include "ir/claim_table.h"
#include "ir/graph.h"
#include "ir/shape_inference.h"
#include "runtime/placement.h"

namespace fusebox {

struct CompileOptions {
  FusionTarget target = FusionTarget::Cpu;
  // The caller's options; nullopt: FusionOptions::for_target(target).
  std::optional<FusionOptions> fusion;
  // false: run the graph exactly as written (no pipeline at all).
  bool fuse = true;
  // Apply FUSEBOX_*/RLX_* overrides (the CLI does). `env` empty: the process environment.
  bool merge_env = false;
  EnvLookup env;
  // The backend nodes are placed on (a registry name: backend_names()); what it does not claim
  // runs on "cpu". "reference" runs every node on its reference kernel: the oracle of tests.
  std::string backend = "cpu";
  CpuBackendOptions cpu;
  CudaBackendOptions cuda;  // TF32 for f32 contractions on the GPU (off: exact f32)
  bool verify = true;
  // Verify after every pass (on in debug builds; tests turn it on).
#ifdef NDEBUG
  bool verify_each_pass = false;
#else
  bool verify_each_pass = true;
#endif
  // Sizes of symbols for the report's byte estimate.
  SymbolBindings report_sizes;
  // Output positions the caller can do without (spec §4.6): on a target where reading one back
  // costs more than the IO output gate's minimum gain, select-peaks-only-outputs leaves it
  // unmaterialised; the output list keeps its arity and that slot comes back as an empty array
  // (Executable::output_materialized says which). Leave a slot out to request it explicitly.
  std::vector<int64_t> optional_outputs;
  // Inputs and outputs live on the target backend's device (Executable::run_buffers): no copy
  // in or out, so a plan on a GPU can be run again and again on device data.
  bool device_io = false;
};

using NamedArrays = std::map<std::string, Array, std::less<>>;

class ShapePlanCache;
struct ShapePlan;

class Executable {
 public:
  // The graph that runs (after fusion and the backend's lowering).
  const Graph& graph() const;
  const FusionReport& report() const;
  const Placement& placement() const;
  // Output names: the value's name when it has one, else "out<k>".
  const std::vector<std::string>& output_names() const;
  // False for an output slot the IO output gate left unmaterialised (run returns an empty array
  // of its dtype there).
  bool output_materialized(size_t slot) const;

  // Runs the plan. Errors: a missing or unknown input, a wrong dtype, rank or static dim, a
  // symbol bound to two sizes, a run-time failure of a kernel. Outputs follow graph order.
  Expected<std::vector<Array>> run(const NamedArrays& inputs) const;
  // The same with inputs in graph input order (graph().inputs()); a wrong count is an error.
  Expected<std::vector<Array>> run(std::span<const Array> inputs) const;
  // Same, and records each node's wall time in seconds (index: node of graph()).
  Expected<std::vector<Array>> run_profiled(const NamedArrays& inputs, std::vector<double>* node_seconds) const;
  Expected<std::vector<Array>> run_profiled(std::span<const Array> inputs, std::vector<double>* node_seconds) const;
  // Like run(inputs), and output k may be written into donated[k] (an empty Array: none) instead
  // of a new buffer: only when donated[k] is one of the inputs, has output k's dtype and shape,
  // and is read by no node but the element-wise node that produces output k. The caller gives
  // up the donated data (the lazy layer donates tensors nobody reads afterwards).
  Expected<std::vector<Array>> run_donating(std::span<const Array> inputs, std::span<const Array> donated) const;
  // Binds the symbols of the input shapes (exposed for tests and tools).
  Expected<SymbolBindings> bind(const NamedArrays& inputs) const;
  // Runs a plan compiled with CompileOptions::device_io on buffers of the target's device
  // (Backend::allocate, copy_from_host), inputs by position. The work is enqueued on the device's
  // stream and the outputs stay there: read them after sync() (or copy them to the host, which
  // orders after the work). The same checks as run().
  Expected<std::vector<Buffer>> run_buffers(std::span<const Buffer> inputs) const;
  // Waits for all work this plan enqueued on its backends' streams; reports a failed kernel.
  Status sync() const;
  // Buffers of every backend's pool this plan allocates from.
  PoolStats pool_stats() const;

  struct Stats {
    size_t shape_plans = 0;  // sets of concrete shapes computed (one per new set of input sizes,
                             // and one per new set of values a bind_symbols node binds)
    size_t recordings = 0;   // device_io runs recorded as one replayable graph (CUDA graphs)
    size_t replays = 0;      // runs that replayed a recording
  };
  Stats stats() const;

  struct Plan;        // the compiled, immutable part (executable.cpp)
  struct Recordings;  // recorded device runs (CUDA graphs; executable.cpp)

 private:
  friend class Session;
  Expected<std::vector<Array>> execute(std::span<const Array* const> inputs, std::vector<double>* node_seconds,
                                       std::span<const Array> donated = {}) const;
  // The plan over input buffers (`input_buffers` empty: the host arrays of `inputs`); the output
  // buffers where they end (an empty Buffer for an unmaterialised slot).
  Expected<std::vector<Buffer>> run_plan(std::span<const Array* const> inputs, std::span<const Buffer> input_buffers,
                                         std::vector<double>* node_seconds, std::span<const Array> donated,
                                         std::vector<Buffer>* keep = nullptr) const;
  // run_buffers through a recording of the plan when it can be recorded (executable.cpp).
  Expected<std::vector<Buffer>> run_recorded(std::span<const Array* const> inputs, std::span<const Buffer> buffers) const;
  // The donated array output `v` of node `i` may be written into, or null.
  const Array* donor_for(size_t i, ValueId v, std::span<const Array* const> inputs, std::span<const Array> donated,
                         const std::vector<int64_t>& dims) const;
  Expected<SymbolBindings> bind_inputs(std::span<const Array* const> inputs) const;
  Expected<std::shared_ptr<const ShapePlan>> shapes_for(std::span<const Array* const> inputs) const;
  Expected<std::shared_ptr<const ShapePlan>> shapes_after_bind(const ShapePlan& shapes, size_t i,
                                                               const BufferView& values) const;

  // Shared by copies: a cached plan hands out copies that share kernels and shape plans.
  std::shared_ptr<const Plan> plan_;
  std::shared_ptr<ShapePlanCache> shapes_;
  std::shared_ptr<Recordings> recordings_;
};

class Session {
 public:
  // Up to `max_cached_plans` compiled plans are kept (least recently used dropped first);
  // 0 turns the cache off.
  explicit Session(size_t max_cached_plans = 64);
  Expected<Executable> compile(const Graph& graph, const CompileOptions& options = {}) const;

  struct Stats {
    size_t plan_hits = 0;
    size_t plan_misses = 0;
    size_t cached_plans = 0;
  };
  Stats stats() const;

  class PlanCache;

 private:
  std::shared_ptr<PlanCache> cache_;  // shared by copies of the Session; thread-safe
};

// The claim table of a fusion target, from the target's backend folder (every target has one).
const ClaimTable& claim_table_of(FusionTarget target);

// Runs one node with the reference kernels (the constant evaluator canonicalize uses).
Expected<std::vector<Array>> evaluate_with_reference(const Node& node, std::span<const Array> inputs);

// The backend's lowering of a fused graph, as Session::compile runs it before placement (for
// `fusebox explain` and `fusebox opt --lower`).
Expected<Graph> lower_on_backend(const Graph& g, const std::string& backend, const CpuBackendOptions& cpu = {});
// Places a (lowered) graph on a backend as Session::compile would (for `fusebox explain`).
Expected<Placement> place_on_backend(const Graph& g, const std::string& backend, const CpuBackendOptions& cpu = {});

}  // namespace fusebox
