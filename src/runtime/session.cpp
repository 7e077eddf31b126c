#include "runtime/session.h"

#include <cstdio>

#include "backends/cpu/reference/reference.h"
#include "backends/registry/registry.h"
#include "fusion/fuse.h"
#include "ir/bind_symbols.h"
#include "ir/check.h"
#include "ir/structural_hash.h"
#include "ir/verifier.h"
#include "runtime/executable_plan.h"
#include "runtime/plan_cache.h"
#include "runtime/shape_plan.h"

namespace fusebox {

namespace {

// Everything besides the graph that decides the compiled plan, as text: the plan cache's key.
std::string options_key(const CompileOptions& o, const Fuse& fuser) {
  std::string key = "target=" + std::string(target_name(o.target)) + ";fuse=" + std::to_string(o.fuse);
  if (o.fuse) {
    key += ";fusion=" + to_string(fuser.resolved_options()) + ";passes=";
    for (const std::string& p : fuser.passes()) key += p + ",";
  }
  key += ";backend=" + o.backend + ";codegen=" + std::string(codegen_name(o.cpu.codegen)) +
         ";onednn=" + std::to_string(o.cpu.onednn) + ";layout=" + cpu_layout_name(o.cpu.nchwc_block) +
         ";winograd=" + std::to_string(o.cpu.winograd) + ";tf32=" + std::to_string(o.cuda.allow_tf32) +
         ";cuda_layout=" + std::to_string(int(o.cuda.conv_layout)) + ";verify=" + std::to_string(o.verify) +
         ";verify_each_pass=" + std::to_string(o.verify_each_pass) +
         ";device_io=" + std::to_string(o.device_io) + ";sizes=";
  for (const auto& [sym, n] : o.report_sizes) key += sym + "=" + std::to_string(n) + ",";
  return key;
}

BackendMaker cpu_fallback(const CpuBackendOptions& cpu) {
  return [cpu] { return make_backend("cpu", BackendOptions{cpu}); };
}

}  // namespace

const ClaimTable& claim_table_of(FusionTarget target) {
  const ClaimTable* t = find_claim_table(target_name(target));
  FUSEBOX_CHECK(t) << "no claim table for target " << target_name(target);
  return *t;
}

Expected<std::vector<Array>> evaluate_with_reference(const Node& node, std::span<const Array> inputs) {
  std::vector<TensorType> types;
  for (const Array& a : inputs) types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  FUSEBOX_ASSIGN_OR_RETURN(std::vector<TensorType> result, infer_result_types(node, types));
  std::vector<Array> out;
  for (const TensorType& t : result) {
    if (!is_static(t.shape)) return Status::internal("constant folding: result shape is not static");
    out.emplace_back(t.dtype, static_dims(t.shape));
  }
  FUSEBOX_RETURN_IF_ERROR(cpu::run_reference(node, inputs, out));
  return out;
}

Expected<Graph> lower_on_backend(const Graph& g, const std::string& backend, const CpuBackendOptions& cpu) {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> target, make_backend(backend, BackendOptions{cpu}));
  return target->lower(g);
}

Expected<Placement> place_on_backend(const Graph& g, const std::string& backend, const CpuBackendOptions& cpu) {
  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> target, make_backend(backend, BackendOptions{cpu}));
  return place(g, std::move(target), cpu_fallback(cpu));
}

Session::Session(size_t max_cached_plans) : cache_(std::make_shared<PlanCache>(max_cached_plans)) {}

Session::Stats Session::stats() const { return cache_->stats(); }

Expected<Executable> Session::compile(const Graph& graph_in, const CompileOptions& options) const {
  // The caller's optional outputs join the graph's own (a copy only when there are any).
  std::optional<Graph> with_optional;
  if (!options.optional_outputs.empty()) {
    for (int64_t k : options.optional_outputs) {
      if (k < 0 || k >= int64_t(graph_in.outputs().size())) {
        return Status::invalid("CompileOptions::optional_outputs: @" + graph_in.name() + " has no output " +
                               std::to_string(k) + " (it returns " + std::to_string(graph_in.outputs().size()) +
                               " values)");
      }
    }
    with_optional.emplace(graph_in);
    std::vector<int64_t> slots = graph_in.optional_outputs();
    slots.insert(slots.end(), options.optional_outputs.begin(), options.optional_outputs.end());
    with_optional->set_optional_outputs(std::move(slots));
  }
  const Graph& graph = with_optional ? *with_optional : graph_in;
  if (!claim_table_of(options.target).has_executor) {
    return Status::unimplemented("target " + std::string(target_name(options.target)) +
                                 " has no executor in this build; `fusebox opt --target " +
                                 std::string(target_name(options.target)) +
                                 "` or `fusebox explain` shows what it would fuse");
  }
  // A target other than the CPU runs on its own backend unless the caller named another.
  const std::string backend_name =
      options.target != FusionTarget::Cpu && options.backend == "cpu" ? std::string(target_name(options.target)) : options.backend;
  EnvLookup env = options.env ? options.env : process_env();
  Fuse fuser(options.target, claim_table_of(options.target));
  if (options.fusion) fuser.options(*options.fusion);
  if (options.merge_env) fuser.merge_env(env);
  fuser.evaluator(&evaluate_with_reference).verify_each_pass(options.verify_each_pass);
  fuser.report_sizes(options.report_sizes);

  // A graph identical to one compiled before, with the same options, was verified then.
  const std::string key = options_key(options, fuser);
  const uint64_t hash = structural_hash(graph) ^ (std::hash<std::string>()(key) * 0x9e3779b97f4a7c15ull);
  if (std::optional<Executable> hit = cache_->find(hash, graph, key)) {
    if (fusion_report_requested(env)) std::fprintf(stderr, "%s", hit->report().to_string().c_str());
    return *hit;
  }
  if (options.verify) FUSEBOX_RETURN_IF_ERROR(verify(graph));
  auto plan = std::make_shared<Executable::Plan>();
  if (options.fuse) {
    FUSEBOX_ASSIGN_OR_RETURN(FuseResult fused, fuser.run_with_report(graph));
    plan->graph = std::move(fused.graph);
    plan->report = std::move(fused.report);
  } else {
    plan->graph = graph;
    plan->report = make_fusion_report(graph, graph, options.target, {}, {}, options.report_sizes);
  }
  if (fusion_report_requested(env)) std::fprintf(stderr, "%s", plan->report.to_string().c_str());
  const Graph& g = plan->graph;

  FUSEBOX_ASSIGN_OR_RETURN(std::shared_ptr<Backend> target, make_backend(backend_name, BackendOptions{options.cpu, options.cuda}));
  FUSEBOX_ASSIGN_OR_RETURN(plan->graph, target->lower(plan->graph));
  if (options.verify_each_pass) {
    if (Status s = verify(plan->graph); !s.is_ok()) {
      return Status::internal("the " + backend_name + " backend's lowering broke the graph: " + s.message());
    }
  }
  plan->device_io = options.device_io;
  plan->run_time_sizes = has_bind_symbols(g);
  FUSEBOX_ASSIGN_OR_RETURN(plan->placement, place(g, std::move(target), cpu_fallback(options.cpu), options.device_io));
  plan->memory = plan_memory(g, plan->placement);
  plan->constants.resize(g.num_values());
  plan->aliases.assign(g.nodes().size(), false);
  auto is_returned = [&](ValueId v) {
    return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
  };
  std::vector<int> producer(g.num_values(), -1);
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    for (ValueId v : g.nodes()[i].outputs) producer[size_t(v)] = int(i);
  }
  // A returned reshape may be a view too when its operand is a kernel's own result that is not
  // returned: the caller then holds no memory shared with an input, a constant or another result.
  auto kernel_result = [&](ValueId v) {
    const int p = producer[size_t(v)];
    return p >= 0 && g.nodes()[size_t(p)].op != Op::Constant && !plan->aliases[size_t(p)] && !is_returned(v);
  };
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    const bool returned = is_returned(n.outputs[0]);
    if (n.op == Op::Constant && !returned) {
      plan->constants[size_t(n.outputs[0])] = Buffer::wrap(n.attr_array("value"));
      plan->kernels.push_back(nullptr);
      continue;
    }
    // bind_symbols gives its operand unchanged (the runtime reads its values: executable.cpp).
    if ((n.op == Op::Reshape || n.op == Op::BindSymbols) &&
        (!returned || (n.op == Op::Reshape && kernel_result(n.inputs[0])))) {
      plan->aliases[i] = true;
      plan->kernels.push_back(nullptr);
      continue;
    }
    const Backend& backend = *plan->placement.backends[size_t(plan->placement.node_backend[i])];
    FUSEBOX_ASSIGN_OR_RETURN(auto kernel, backend.compile(g, n));
    plan->kernels.push_back(std::move(kernel));
  }
  for (size_t i = 0; i < g.outputs().size(); ++i) {
    const std::string& name = g.value(g.outputs()[i]).name;
    plan->output_names.push_back(name.empty() ? "out" + std::to_string(i) : name);
  }
  Executable exe;
  exe.plan_ = std::move(plan);
  exe.shapes_ = std::make_shared<ShapePlanCache>();
  exe.recordings_ = make_recordings();
  cache_->insert(hash, graph, key, exe);
  return exe;
}

}  // namespace fusebox
