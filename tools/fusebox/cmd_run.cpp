// fusebox run: parse a .fbir file, run one function on the CPU and print a checksum per output.
//
// Inputs come from .npy files (--input NAME=FILE.npy) or are drawn from a fixed seed; symbols
// (N, T, ...) that no given input fixes take --dim values (default 2). Every problem with the
// file, the inputs or the flags is a message and a non-zero exit, never a crash.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include "cli_util.h"
#include "commands.h"
#include "backends/cpu/region_jit.h"
#include "backends/registry/registry.h"
#ifdef FUSEBOX_HAVE_CUDA
#include "backends/cuda/context.h"
#include "backends/cuda/cuda_backend.h"
#endif
#include "ir/size.h"
#include "load_program.h"
#include "runtime/file_io.h"
#include "runtime/npy.h"
#include "runtime/session.h"

namespace fusebox::cli {

namespace {

constexpr int64_t kDefaultDim = 2;

struct RunRequest {
  std::string path;
  std::string func;
  NamedArrays given;                        // inputs read from .npy files
  std::map<std::string, int64_t> dims;      // --dim
  uint64_t seed = 0;
  std::optional<std::string> output_dir;
};

// Reads the flags into a request; the returned int is the exit code when they are unusable.
std::optional<int> read_request(const CommandLine& cl, RunRequest* req) {
  if (cl.positionals().size() != 1) {
    return cl.usage_error(cl.positionals().empty() ? "missing the .fbir file to run"
                                                   : "expected one .fbir file, got " +
                                                         std::to_string(cl.positionals().size()) + " arguments");
  }
  req->path = cl.positionals()[0];
  req->func = cl.value("--func").value_or("");
  if (!req->func.empty() && req->func[0] == '@') req->func.erase(0, 1);
  req->output_dir = cl.value("--output-dir");
  if (auto s = cl.value("--seed")) {
    std::optional<int64_t> seed = parse_int(*s);
    if (!seed || *seed < 0) return cl.usage_error("--seed expects a non-negative integer, got '" + *s + "'");
    req->seed = uint64_t(*seed);
  }
  for (const std::string& d : cl.values("--dim")) {
    auto kv = parse_dim_assignment(d);
    if (!kv) return cl.usage_error("--dim expects SYMBOL=SIZE with SIZE from 0 to 2^48, got '" + d + "'");
    if (!req->dims.emplace(kv->first, kv->second).second) return cl.usage_error("--dim " + kv->first + " is given twice");
  }
  for (const std::string& in : cl.values("--input")) {
    auto kv = split_assignment(in);
    if (!kv) return cl.usage_error("--input expects NAME=FILE.npy, got '" + in + "'");
    std::string name = kv->first[0] == '%' ? kv->first.substr(1) : kv->first;
    if (req->given.count(name)) return cl.usage_error("--input " + name + " is given twice");
    Expected<Array> a = read_npy(kv->second);
    if (!a) return cl.error("input %" + name + ": " + a.status().message());
    req->given.emplace(std::move(name), std::move(*a));
  }
  return std::nullopt;
}

// Sizes of every input symbol: from the given inputs first, then --dim, then the default (said
// in a note). A given input of the wrong rank is skipped here; the Session reports it.
Expected<SymbolBindings> bind_symbols(const Graph& g, const RunRequest& req, const CommandLine& cl) {
  SymbolBindings from_inputs;
  for (ValueId v : g.inputs()) {
    auto it = req.given.find(g.value(v).name);
    const TensorType& t = g.type(v);
    if (it == req.given.end() || it->second.rank() != t.rank()) continue;
    for (size_t d = 0; d < t.shape.size(); ++d) {
      if (t.shape[d].is_symbol()) from_inputs.emplace(t.shape[d].symbol_name(), it->second.shape()[d]);
    }
  }
  const std::vector<std::string> symbols = g.input_symbols();
  const std::string fn = "@" + g.name();
  for (const auto& [sym, n] : req.dims) {
    if (std::find(symbols.begin(), symbols.end(), sym) == symbols.end()) {
      std::string have;
      for (const std::string& s : symbols) have += (have.empty() ? "" : ", ") + s;
      return Status::invalid("--dim " + sym + ": " + fn + " has no symbol " + sym +
                             (have.empty() ? " (its inputs have static shapes)" : " (its symbols: " + have + ")"));
    }
    auto it = from_inputs.find(sym);
    if (it != from_inputs.end() && it->second != n) {
      return Status::invalid("--dim " + sym + "=" + std::to_string(n) + " disagrees with the given inputs, where " +
                             sym + " is " + std::to_string(it->second));
    }
  }
  SymbolBindings b = from_inputs;
  for (const std::string& sym : symbols) {
    if (b.count(sym)) continue;
    auto it = req.dims.find(sym);
    if (it != req.dims.end()) {
      b[sym] = it->second;
    } else {
      b[sym] = kDefaultDim;
      cl.note("symbol " + sym + " = " + std::to_string(kDefaultDim) + " (no input fixes it; set it with --dim " + sym +
              "=SIZE)");
    }
  }
  return b;
}

// The given inputs plus seeded random values for the others (uniform [-1, 1) for floats, small
// integers, random bools).
Expected<NamedArrays> complete_inputs(const Graph& g, const RunRequest& req, const SymbolBindings& b,
                                      const CommandLine& cl) {
  NamedArrays inputs = req.given;
  std::string drawn;
  for (ValueId v : g.inputs()) {
    const std::string& name = g.value(v).name;
    if (inputs.count(name)) continue;
    const TensorType& t = g.type(v);
    std::vector<int64_t> dims;
    for (const Dim& d : bind_shape(t.shape, b)) {
      if (!d.is_static()) return Status::invalid("input %" + name + " of @" + g.name() + " has an unknown dim");
      dims.push_back(d.value());
    }
    // Huge --dim values must be a message, not an overflowing size or a failed allocation.
    Status size = check_size(dims);
    if (!size.is_ok()) return size.with_context("input %" + name + " " + t.to_string());
    if (uint64_t(product(dims)) * uint64_t(dtype_size(t.dtype)) > max_tensor_bytes()) {
      return Status::invalid("input %" + name + " " + t.to_string() + " is too large to draw at these sizes: over the " +
                             format_byte_size(max_tensor_bytes()) + " limit for a tensor (half the physical memory)");
    }
    double lo = is_float(t.dtype) ? -1.0 : is_signed(t.dtype) ? -8.0 : 0.0;
    double hi = is_float(t.dtype) ? 1.0 : 8.0;
    Array a = random_array(t.dtype, std::move(dims), derive_seed(req.seed, name), lo, hi);
    drawn += (drawn.empty() ? "%" : ", %") + name + " " + a.type_string();
    inputs.emplace(name, std::move(a));
  }
  if (!drawn.empty()) cl.note("random inputs (seed " + std::to_string(req.seed) + "): " + drawn);
  return inputs;
}

Status write_outputs(const std::string& dir, const std::vector<std::string>& names, const std::vector<Array>& outs) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    return Status::invalid("cannot create the output directory '" + dir + "'" + (ec ? ": " + ec.message() : ""));
  }
  for (size_t i = 0; i < outs.size(); ++i) {
    FUSEBOX_RETURN_IF_ERROR(write_npy((std::filesystem::path(dir) / (file_safe(names[i]) + ".npy")).string(), outs[i]));
  }
  return Status::ok();
}

// --profile: the median over `runs` runs of each node's time, summed per op kind (grouped
// convolutions apart), largest first.
Status print_profile(const Executable& exe, const NamedArrays& inputs, int runs) {
  const auto& nodes = exe.graph().nodes();
  std::vector<std::vector<double>> per_node(nodes.size());
  std::vector<double> totals;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> seconds;
    auto start = std::chrono::steady_clock::now();
    FUSEBOX_RETURN_IF_ERROR(exe.run_profiled(inputs, &seconds).status());
    totals.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (size_t i = 0; i < nodes.size(); ++i) per_node[i].push_back(seconds[i]);
  }
  auto median = [](std::vector<double> v) {
    std::nth_element(v.begin(), v.begin() + long(v.size() / 2), v.end());
    return v[v.size() / 2];
  };
  std::map<std::string, std::pair<double, int>> by_kind;  // keyword -> (ms, nodes)
  for (size_t i = 0; i < nodes.size(); ++i) {
    // Grouped convolutions (depthwise ones among them) cost unlike dense ones: a row of their own.
    std::string kind(nodes[i].info().keyword);
    if (nodes[i].has_attr("groups") && nodes[i].attr_i64("groups") > 1) kind += " (grouped)";
    auto& [ms, count] = by_kind[kind];
    ms += median(per_node[i]) * 1e3;
    ++count;
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_kind.begin(), by_kind.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  const double total_ms = median(totals) * 1e3;
  std::fprintf(stderr, "profile @%s: %.3f ms per run (median of %d)\n", exe.graph().name().c_str(), total_ms, runs);
  for (const auto& [kind, v] : rows) {
    std::fprintf(stderr, "  %-32s %4d  %10.3f ms  %5.1f%%\n", kind.c_str(), v.second, v.first,
                 total_ms > 0 ? 100.0 * v.first / total_ms : 0.0);
  }
  return Status::ok();
}

// --executor: the shorthand of earlier releases (lit tests and docs use it) for a backend and
// its region codegen.
struct ExecutorShorthand {
  const char* name;
  const char* backend;
  cpu::Codegen codegen;
};
constexpr ExecutorShorthand kExecutors[] = {
    {"cpu", "cpu", cpu::Codegen::Auto},
    {"cpu-interpreter", "cpu", cpu::Codegen::Interpreter},
    {"cpu-jit", "cpu", cpu::Codegen::Jit},
    {"reference", "reference", cpu::Codegen::Auto},
};

// --backend, --cpu-codegen and --executor into the options; the int is the exit code when
// they are unusable.
std::optional<int> read_backend(const CommandLine& cl, CompileOptions* options) {
  std::optional<std::string> executor = cl.value("--executor"), backend = cl.value("--backend"),
                             codegen = cl.value("--cpu-codegen");
  if (executor && (backend || codegen)) {
    return cl.usage_error("--executor is a shorthand for --backend and --cpu-codegen: give one or the other");
  }
  if (executor) {
    for (const ExecutorShorthand& e : kExecutors) {
      if (*executor != e.name) continue;
      options->backend = e.backend;
      options->cpu.codegen = e.codegen;
      return std::nullopt;
    }
    std::string choices;
    for (const ExecutorShorthand& e : kExecutors) choices += (choices.empty() ? "" : ", ") + std::string(e.name);
    return cl.usage_error("unknown executor '" + *executor + "' (executors: " + choices + ")");
  }
  if (backend) {
    std::vector<std::string> names = backend_names();
    if (std::find(names.begin(), names.end(), *backend) == names.end()) {
      return cl.usage_error("unknown backend '" + *backend + "' (backends: " + backend_choices() + ")");
    }
    options->backend = *backend;
  }
  if (codegen) {
    std::optional<cpu::Codegen> c = parse_codegen(*codegen);
    if (!c) return cl.usage_error("unknown --cpu-codegen '" + *codegen + "' (choices: auto, interpreter, jit)");
    options->cpu.codegen = *c;
  }
  if (std::optional<std::string> layout = cl.value("--cpu-layout")) {
    std::optional<int64_t> b = parse_cpu_layout(*layout);
    if (!b) return cl.usage_error("unknown --cpu-layout '" + *layout + "' (choices: auto, nchw, nchw4c, nchw8c, nchw16c, nhwc)");
    options->cpu.nchwc_block = *b;
  }
  options->cpu.winograd = cl.has("--cpu-winograd");
  options->cuda.allow_tf32 = cl.has("--cuda-tf32");
  if (cl.has("--cuda-nhwc")) options->cuda.conv_layout = CudaConvLayout::Nhwc;
  return std::nullopt;
}

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Kernel code generation so far in this process: the CPU's generated region code and, with the
// CUDA backend, NVRTC compiles (and cubins read from the disk cache).
struct CodegenCounters {
  uint64_t cpu_jit = 0;
  uint64_t nvrtc = 0, nvrtc_disk = 0;
  double nvrtc_seconds = 0;
};

CodegenCounters codegen_counters() {
  CodegenCounters c;
  c.cpu_jit = cpu::jit_stats().compiled;
#ifdef FUSEBOX_HAVE_CUDA
  if (cuda::cuda_available().is_ok()) {
    if (Expected<std::shared_ptr<cuda::Context>> ctx = cuda::Context::get(0)) {
      const cuda::CompileStats s = (*ctx)->compile_stats();
      c.nvrtc = s.compiled;
      c.nvrtc_disk = s.disk_hits;
      c.nvrtc_seconds = s.compile_seconds;
    }
  }
#endif
  return c;
}

std::string describe_codegen(const CodegenCounters& a, const CodegenCounters& b) {
  char buf[200];
  std::snprintf(buf, sizeof(buf), "cpu kernels generated %llu; cuda kernels compiled %llu (%.1f ms), from the disk cache %llu",
                static_cast<unsigned long long>(b.cpu_jit - a.cpu_jit), static_cast<unsigned long long>(b.nvrtc - a.nvrtc),
                1e3 * (b.nvrtc_seconds - a.nvrtc_seconds), static_cast<unsigned long long>(b.nvrtc_disk - a.nvrtc_disk));
  return buf;
}

}  // namespace

int cmd_run(const Args& args) {
  CommandLine cl(
      "run", "FILE.fbir [options]",
      "Runs one function of FILE.fbir (or an ONNX model, FILE.onnx) on the CPU and prints each\n"
      "output's type and checksum (the sum of its values and an FNV-1a hash of its bytes).",
      {
          {"--input", "NAME=FILE.npy", "value of input %NAME (others are drawn from --seed)", true},
          {"--func", "NAME", "the function to run (default: the first)"},
          {"--dim", "SYM=N", "size of symbol SYM when no input fixes it (default 2)", true},
          {"--seed", "S", "seed of the random inputs (default 0)"},
          {"--output-dir", "DIR", "write each output to DIR/<name>.npy"},
          {"--target", "T", "cpu (default) or cuda (when built with the CUDA backend and run on a GPU)"},
          {"--fusion-options", "LIST", "e.g. skip_fusion=1 or unfuse_elementwise_regions=1"},
          {"--backend", "B", "cpu (default), reference (every op on its reference kernel) or cuda"},
          {"--cpu-codegen", "C", "fused regions on cpu: auto (default), interpreter or jit"},
          {"--cpu-layout", "L",
           "CNN activations on cpu: auto (default: as the host prefers), nchw, nchw8c/16c or nhwc"},
          {"--executor", "E", "shorthand: cpu, cpu-interpreter, cpu-jit or reference"},
          {"--cpu-winograd", "",
           "3x3 stride-1 convolutions on cpu may use Winograd kernels (about 1e-5 relative error)"},
          {"--cuda-tf32", "",
           "f32 matmuls and convolutions on cuda may use TF32 tensor cores (about 1e-3 relative error)"},
          {"--cuda-nhwc", "",
           "CNN activations on cuda channels-last between cuDNN convolutions (default NCHW)"},
          {"--profile", "RUNS", "run RUNS more times and print the time per op kind to stderr"},
          {"--timings", "",
           "print compile, first-run and warm-run times and kernel code generation to stderr"},
      });
  if (std::optional<int> exit = cl.parse(args)) return *exit;
  RunRequest req;
  if (std::optional<int> exit = read_request(cl, &req)) return *exit;
  CompileOptions options;
  options.merge_env = true;  // FUSEBOX_* overrides apply to the CLI
  if (std::optional<int> exit = read_backend(cl, &options)) return *exit;

  std::set<std::string> specialised;
  Expected<Module> module = load_program(req.path, req.given, &specialised);
  if (!module) return cl.error(module.status());
  for (const std::string& name : specialised) {
    cl.note("ONNX input " + name + " fixes shapes: the model is imported with its given value as a constant");
    req.given.erase(name);
  }
  Expected<Graph> graph = pick_function(*module, req.func);
  if (!graph) return cl.error(graph.status().with_context(req.path));

  Expected<SymbolBindings> bindings = bind_symbols(*graph, req, cl);
  if (!bindings) return cl.error(bindings.status());
  Expected<NamedArrays> inputs = complete_inputs(*graph, req, *bindings, cl);
  if (!inputs) return cl.error(inputs.status());

  Session session;
  Expected<std::optional<FusionTarget>> target = target_flag(cl);
  if (!target) return cl.usage_error(target.status().message());
  if (*target) options.target = **target;
  if (cl.has("--fusion-options")) {
    Expected<FusionOptions> fo = fusion_options_flag(cl);
    if (!fo) return cl.usage_error(fo.status().message());
    options.fusion = *fo;
  }
  const CodegenCounters before = codegen_counters();
  const double t0 = seconds_now();
  Expected<Executable> exe = session.compile(*graph, options);
  if (!exe) return cl.error(exe.status());
  const double t1 = seconds_now();
  Expected<std::vector<Array>> outs = exe->run(*inputs);
  if (!outs) return cl.error(outs.status());
  if (cl.has("--timings")) {
    // The first run generates the kernels whose variant depends on the sizes; the warm run is
    // what every later run costs.
    const double t2 = seconds_now();
    Expected<std::vector<Array>> again = exe->run(*inputs);
    if (!again) return cl.error(again.status());
    const double t3 = seconds_now();
    std::fprintf(stderr, "timings @%s: compile %.3f ms, first run %.3f ms, warm run %.3f ms; %s\n", graph->name().c_str(),
                 1e3 * (t1 - t0), 1e3 * (t2 - t1), 1e3 * (t3 - t2), describe_codegen(before, codegen_counters()).c_str());
  }
  if (std::optional<std::string> runs = cl.value("--profile")) {
    std::optional<int64_t> n = parse_int(*runs);
    if (!n || *n < 1 || *n > 100000) return cl.usage_error("--profile expects a run count from 1 to 100000, got '" + *runs + "'");
    Status s = print_profile(*exe, *inputs, int(*n));
    if (!s.is_ok()) return cl.error(s);
  }

  const std::vector<std::string>& names = exe->output_names();
  for (size_t i = 0; i < outs->size(); ++i) {
    Checksum c;
    c.add((*outs)[i]);
    // Values print as in the IR (%y, %3); an output without a value name as its position (out0).
    const bool is_value = !graph->value(graph->outputs()[i]).name.empty();
    if (!exe->output_materialized(i)) {  // an optional output the IO output gate left unread
      std::printf("%s%s  not materialised\n", is_value ? "%" : "", names[i].c_str());
      continue;
    }
    std::printf("%s%s  %s  %s\n", is_value ? "%" : "", names[i].c_str(), (*outs)[i].type_string().c_str(),
                c.to_string().c_str());
  }
  std::fflush(stdout);
  if (req.output_dir) {
    Status s = write_outputs(*req.output_dir, names, *outs);
    if (!s.is_ok()) return cl.error(s);
  }
  return kExitOk;
}

}  // namespace fusebox::cli
