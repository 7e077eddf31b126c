#include "runtime/session.h"

#include "backends/cpu/reference/reference.h"
#include <algorithm>
#include <chrono>
#include <cstdio>

#include "fusion/fuse.h"
#include "ir/verifier.h"
#include "runtime/backend.h"

namespace fusebox {

namespace {

std::string dims_string(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Concrete result shapes must agree with what the graph declares (symbols substituted).
Status check_declared(const TensorType& declared, const std::vector<int64_t>& actual,
                      const SymbolBindings& b) {
  Shape d = bind_shape(declared.shape, b);
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i].is_static() && d[i].value() != actual[i]) {
      return Status::execution("result is declared " + declared.to_string() + " but computes to " +
                               dims_string(actual));
    }
  }
  return Status::ok();
}

}  // namespace

std::string_view executor_name(ExecutorKind e) {
  switch (e) {
    case ExecutorKind::Cpu: return "cpu";
    case ExecutorKind::CpuInterpreter: return "cpu-interpreter";
    case ExecutorKind::CpuJit: return "cpu-jit";
    case ExecutorKind::Reference: return "reference";
  }
  return "cpu";
}

constexpr ExecutorKind kExecutors[] = {ExecutorKind::Cpu, ExecutorKind::CpuInterpreter, ExecutorKind::CpuJit,
                                       ExecutorKind::Reference};

std::optional<ExecutorKind> parse_executor(std::string_view name) {
  for (ExecutorKind e : kExecutors) {
    if (executor_name(e) == name) return e;
  }
  return std::nullopt;
}

std::string executor_choices() {
  std::string s;
  for (ExecutorKind e : kExecutors) s += (s.empty() ? "" : ", ") + std::string(executor_name(e));
  return s;
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

Expected<Executable> Session::compile(const Graph& graph, const CompileOptions& options) const {
  if (options.verify) FUSEBOX_RETURN_IF_ERROR(verify(graph));
  if (options.target != FusionTarget::Cpu) {
    return Status::unimplemented("target " + std::string(target_name(options.target)) +
                                 " has no executor in this build; `fusebox opt --target " +
                                 std::string(target_name(options.target)) +
                                 "` or `fusebox explain` shows what it would fuse");
  }
  EnvLookup env = options.env ? options.env : process_env();
  Executable exe;
  if (options.fuse) {
    Fuse fuser(options.target);
    if (options.fusion) fuser.options(*options.fusion);
    if (options.merge_env) fuser.merge_env(env);
    fuser.evaluator(&evaluate_with_reference).verify_each_pass(options.verify_each_pass);
    fuser.report_sizes(options.report_sizes);
    FUSEBOX_ASSIGN_OR_RETURN(FuseResult fused, fuser.run_with_report(graph));
    exe.graph_ = std::move(fused.graph);
    exe.report_ = std::move(fused.report);
  } else {
    exe.graph_ = graph;
    exe.report_ = make_fusion_report(graph, graph, options.target, {}, {}, options.report_sizes);
  }
  if (fusion_report_requested(env)) std::fprintf(stderr, "%s", exe.report_.to_string().c_str());
  exe.memory_ = plan_memory(exe.graph_);
  const cpu::Codegen codegen = options.executor == ExecutorKind::CpuInterpreter ? cpu::Codegen::Interpreter
                              : options.executor == ExecutorKind::CpuJit       ? cpu::Codegen::Jit
                                                                               : cpu::Codegen::Auto;
  const Backend& backend = options.executor == ExecutorKind::Reference ? reference_backend() : cpu_backend(codegen);
  for (const Node& n : exe.graph_.nodes()) {
    FUSEBOX_ASSIGN_OR_RETURN(auto kernel, backend.compile(exe.graph_, n));
    exe.kernels_.push_back(std::move(kernel));
  }
  for (size_t i = 0; i < exe.graph_.outputs().size(); ++i) {
    const std::string& name = exe.graph_.value(exe.graph_.outputs()[i]).name;
    exe.output_names_.push_back(name.empty() ? "out" + std::to_string(i) : name);
  }
  return exe;
}

Expected<SymbolBindings> Executable::bind(const NamedArrays& inputs) const {
  const std::string fn = "@" + graph_.name();
  SymbolBindings bindings;
  for (ValueId v : graph_.inputs()) {
    const std::string& name = graph_.value(v).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) return Status::invalid(fn + ": missing input %" + name);
    const TensorType& want = graph_.type(v);
    const Array& a = it->second;
    if (a.dtype() != want.dtype) {
      return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                             a.type_string() + " (dtype differs)");
    }
    if (a.rank() != want.rank()) {
      return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                             a.type_string() + " (rank differs)");
    }
    for (int d = 0; d < a.rank(); ++d) {
      const Dim& dim = want.shape[static_cast<size_t>(d)];
      int64_t actual = a.shape()[static_cast<size_t>(d)];
      if (dim.is_static() && dim.value() != actual) {
        return Status::invalid(fn + ": input %" + name + " must be " + want.to_string() + ", got " +
                               a.type_string() + " (dim " + std::to_string(d) + ")");
      }
      if (dim.is_symbol()) {
        auto [pos, inserted] = bindings.emplace(dim.symbol_name(), actual);
        if (!inserted && pos->second != actual) {
          return Status::invalid(fn + ": symbol " + dim.symbol_name() + " is " + std::to_string(pos->second) +
                                 " from an earlier input but " + std::to_string(actual) + " in %" + name);
        }
      }
    }
  }
  for (const auto& [name, array] : inputs) {
    if (graph_.find_input(name) < 0) return Status::invalid(fn + ": unknown input %" + name);
  }
  return bindings;
}

Expected<std::vector<Array>> Executable::run(const NamedArrays& inputs) const { return run_profiled(inputs, nullptr); }

Expected<std::vector<Array>> Executable::run_profiled(const NamedArrays& inputs,
                                                      std::vector<double>* node_seconds) const {
  if (node_seconds) node_seconds->assign(graph_.nodes().size(), 0.0);
  FUSEBOX_ASSIGN_OR_RETURN(SymbolBindings bindings, bind(inputs));
  std::vector<Array> values(graph_.num_values());
  for (ValueId v : graph_.inputs()) values[static_cast<size_t>(v)] = inputs.find(graph_.value(v).name)->second;
  std::vector<std::string> names;  // computed lazily for error messages
  auto where = [&](const Node& n) {
    if (names.empty()) names = value_display_names(graph_);
    return "@" + graph_.name() + ": " + describe_node(graph_, n, names);
  };
  const auto& nodes = graph_.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    // A constant read only by kernels (which never write their operands) shares the graph's
    // array instead of copying it every run; a returned constant is copied so the caller owns it.
    if (n.op == Op::Constant && std::find(graph_.outputs().begin(), graph_.outputs().end(), n.outputs[0]) ==
                                    graph_.outputs().end()) {
      values[static_cast<size_t>(n.outputs[0])] = n.attr_array("value");
      continue;
    }
    std::vector<Array> in;
    std::vector<TensorType> in_types;
    in.reserve(n.inputs.size());
    for (ValueId v : n.inputs) {
      const Array& a = values[static_cast<size_t>(v)];
      in.push_back(a);
      in_types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
    }
    Expected<std::vector<TensorType>> types = infer_result_types(n, in_types, &bindings);
    if (!types) return Status::execution(where(n) + ": " + types.status().message());
    std::vector<Array> out;
    out.reserve(types->size());
    for (size_t r = 0; r < types->size(); ++r) {
      const TensorType& t = (*types)[r];
      if (!is_static(t.shape)) {
        return Status::execution(where(n) + ": result shape [" + shape_to_string(t.shape) +
                                 "] is not known at run time");
      }
      std::vector<int64_t> dims = static_dims(t.shape);
      Status ok = check_declared(graph_.type(n.outputs[r]), dims, bindings);
      if (!ok.is_ok()) return ok.with_context(where(n));
      out.push_back(pool_->allocate(t.dtype, std::move(dims)));
    }
    auto start = std::chrono::steady_clock::now();
    Status s = kernels_[i]->run(in, out);
    if (node_seconds) {
      (*node_seconds)[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    if (!s.is_ok()) return Status(s.code() == StatusCode::kInvalidArgument ? StatusCode::kExecutionError : s.code(),
                                  where(n) + ": " + s.message());
    for (size_t r = 0; r < out.size(); ++r) values[static_cast<size_t>(n.outputs[r])] = std::move(out[r]);
    for (ValueId dead : memory_.release_after[i]) values[static_cast<size_t>(dead)] = Array();
  }
  std::vector<Array> results;
  for (ValueId v : graph_.outputs()) results.push_back(values[static_cast<size_t>(v)]);
  return results;
}

}  // namespace fusebox
