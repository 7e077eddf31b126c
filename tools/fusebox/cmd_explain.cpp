// `fusebox explain`: the fusion report of every function of a program, for one target, and
// optionally a Graphviz picture of one fused function (--dot, rendered to SVG with --svg).
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "backends/assign_blocked_layout.h"
#include "backends/cpu/reduction_kernel.h"
#include "backends/cpu/region_jit.h"
#include "backends/registry/registry.h"
#include "cli_util.h"
#include "dot_writer.h"
#include "fusion/fuse.h"
#include "fusion/pipeline_plan.h"
#include "ir/region_prologue.h"
#include "ir/shape_inference.h"
#include "ir/size.h"
#include "load_program.h"
#include "runtime/file_io.h"
#include "runtime/session.h"

extern char** environ;

namespace fusebox::cli {

namespace {

// Runs Graphviz's `dot -Tsvg DOT -o SVG` (found through PATH). Errors say what to install.
Status render_svg(const std::string& dot_path, const std::string& svg_path) {
  std::vector<std::string> words = {"dot", "-Tsvg", dot_path, "-o", svg_path};
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, "dot", nullptr, nullptr, argv.data(), environ);
  if (rc == ENOENT) {
    return Status::unimplemented("cannot render " + svg_path + ": Graphviz's `dot` is not on PATH (install the "
                                 "graphviz package); the graph was written to " + dot_path);
  }
  if (rc != 0) return Status::internal("cannot run `dot`: " + std::string(std::strerror(rc)));
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::internal("waiting for `dot`: " + std::string(std::strerror(errno)));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
    return Status::unimplemented("cannot render " + svg_path + ": Graphviz's `dot` could not be started (install "
                                 "the graphviz package); the graph was written to " + dot_path);
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return Status::internal("`dot -Tsvg " + dot_path + " -o " + svg_path + "` failed (status " +
                            std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) + ")");
  }
  return Status::ok();
}

// How the CPU runs each region: generated code, or the tile interpreter and why, or (reduction
// regions the reduction kernel does not take) unfused, its ops on kernels of their own (the CPU
// backend's lowering inlines them; "" without regions).
std::string codegen_line(const Graph& g) {
  std::string generated, interpreted, reference;
  auto add = [](std::string& list, const std::string& item) { list += (list.empty() ? "" : ", ") + item; };
  for (const Node& n : g.nodes()) {
    if (n.op == Op::ReductionRegion && n.body) {
      // The reduction kernel's passes; bodies it does not take run unfused.
      const std::string name = n.attr_str("name");
      const cpu::ReductionCodegen rc = cpu::reduction_codegen(n);
      if (!rc.kernel)
        add(reference, name);
      else if (!cpu::jit_built())
        add(interpreted, name);
      else if (rc.missing.empty())
        add(generated, name + " (passes)");
      else
        add(interpreted, name + " (no code for " + rc.missing + ")");
      continue;
    }
    if (n.op != Op::ElementwiseRegion || !n.body) continue;
    const std::string name = n.attr_str("name");
    if (!cpu::jit_built()) {
      add(interpreted, name);
      continue;
    }
    // A prologue's transform runs on its own plan; the code is generated for the rest.
    Expected<PrologueParts> parts = prologue_input(n) >= 0 ? split_prologue(n) : Expected<PrologueParts>(PrologueParts{});
    const Graph& body = prologue_input(n) >= 0 && parts ? *parts->region.body : *n.body;
    std::string why = cpu::jit_unsupported_step(body);
    if (why.empty()) {
      const size_t stages = cpu::jit_stage_starts(body).size();
      add(generated, name + (stages > 1 ? " (" + std::to_string(stages) + " stages)" : ""));
    } else {
      add(interpreted, name + " (no code for " + why + ")");
    }
  }
  if (generated.empty() && interpreted.empty() && reference.empty()) return "";
  std::string line = "  codegen  ";
  if (!generated.empty()) line += "generated code for " + generated;
  if (!interpreted.empty()) {
    line += std::string(generated.empty() ? "" : "; ") + "tile interpreter for " + interpreted;
    if (!cpu::jit_built()) line += " (this build has no CPU code generation)";
  }
  if (!reference.empty()) {
    line += std::string(generated.empty() && interpreted.empty() ? "" : "; ") +
            "unfused (ops one by one) for " + reference + " (the reduction kernel cannot run it here)";
  }
  return line + "\n";
}

}  // namespace

int cmd_explain(const Args& args) {
  CommandLine cl("explain", "FILE [options]",
                 "Fuses each function of FILE (.fbir, or .onnx when built with ONNX) for a target\n"
                 "and prints what was fused and what was not, with reasons. FUSEBOX_* environment\n"
                 "overrides apply (docs/fusion-options.md).",
                 {{"--target", "T", "cpu (default), cuda, metal, mlx, wgpu, rocm or tpu"},
                  {"--fusion-options", "LIST", "e.g. skip_fusion=1,fusion_limits=8x4"},
                  {"--func", "NAME", "only this function"},
                  {"--dim", "SYM=N", "size of a symbol for the byte estimate", true},
                  {"--passes", "", "also print the pass list"},
                  {"--backend", "B", "the backend whose placement is shown (cpu target; default cpu)"},
                  {"--cpu-layout", "L", "the cpu backend's activation layout: auto (default), nchw, nchw8c, nchw16c, nhwc"},
                  {"--dot", "OUT.dot", "write the fused graph of the first (or --func) function as Graphviz"},
                  {"--svg", "OUT.svg", "with --dot: also render it with Graphviz's `dot -Tsvg`"}});
  if (std::optional<int> done = cl.parse(args)) return *done;
  if (cl.positionals().size() != 1) return cl.usage_error("expected one FILE");
  std::optional<std::string> dot_path = cl.value("--dot"), svg_path = cl.value("--svg");
  if (svg_path && !dot_path) return cl.usage_error("--svg needs --dot OUT.dot (the graph is rendered from it)");
  if (dot_path && dot_path->empty()) return cl.usage_error("--dot needs a file name");
  if (svg_path && svg_path->empty()) return cl.usage_error("--svg needs a file name");
  FusionTarget target = FusionTarget::Cpu;
  Expected<std::optional<FusionTarget>> parsed = target_flag(cl);
  if (!parsed) return cl.usage_error(parsed.status().message());
  if (*parsed) target = **parsed;
  EnvLookup env = process_env();
  Expected<FusionOptions> options = fusion_options_flag(cl);
  if (!options) return cl.usage_error(options.status().message());
  const std::string backend = cl.value("--backend").value_or("cpu");
  {
    std::vector<std::string> names = backend_names();
    if (std::find(names.begin(), names.end(), backend) == names.end()) {
      return cl.usage_error("unknown backend '" + backend + "' (backends: " + backend_choices() + ")");
    }
  }
  CpuBackendOptions cpu_options;
  if (std::optional<std::string> layout = cl.value("--cpu-layout")) {
    std::optional<int64_t> b = parse_cpu_layout(*layout);
    if (!b) return cl.usage_error("unknown --cpu-layout '" + *layout + "' (choices: auto, nchw, nchw4c, nchw8c, nchw16c, nhwc)");
    cpu_options.nchwc_block = *b;
  }
  SymbolBindings sizes;
  for (const std::string& d : cl.values("--dim")) {
    auto kv = parse_dim_assignment(d);
    if (!kv) return cl.usage_error("--dim takes SYM=N with N from 0 to 2^48, got '" + d + "'");
    sizes[kv->first] = kv->second;
  }
  Expected<Module> m = load_program(cl.positionals()[0]);
  if (!m) return cl.error(m.status());
  std::string func = cl.value("--func").value_or("");
  if (!func.empty() && !m->find(func)) return cl.error(pick_function(*m, func).status());
  bool drawn = false;
  for (const Graph& g : m->functions) {
    if (!func.empty() && g.name() != func) continue;
    // --dim sizes are held to the size limit as `run` holds them: an input over it is an error,
    // not a byte estimate of zettabytes.
    for (ValueId v : g.inputs()) {
      const TensorType& t = g.type(v);
      Status size = check_size(bind_shape(t.shape, sizes));
      if (!size.is_ok()) {
        return cl.error(
            size.with_context("@" + g.name() + ": input %" + g.value(v).name + " " + t.to_string()));
      }
    }
    Fuse fuser(target, claim_table_of(target));
    fuser.options(*options).merge_env(env).report_sizes(sizes).evaluator(&evaluate_with_reference);
    Expected<FuseResult> r = fuser.run_with_report(g);
    if (!r) return cl.error(r.status().with_context("@" + g.name()));
    std::fputs(r->report.to_string().c_str(), stdout);
    if (target == FusionTarget::Cpu) {
      std::fputs(codegen_line(r->graph).c_str(), stdout);
      Expected<Graph> lowered = lower_on_backend(r->graph, backend, cpu_options);
      if (!lowered) return cl.error(lowered.status().with_context("@" + g.name()));
      Expected<Placement> placed = place_on_backend(*lowered, backend, cpu_options);
      if (!placed) return cl.error(placed.status().with_context("@" + g.name()));
      std::printf("  placement %s\n", placed->summary().c_str());
      std::printf("  layout   %s\n", summarize_layout(*lowered).to_string().c_str());
    }
    if (cl.has("--passes")) std::printf("  passes   %s\n", join_pipeline(fuser.passes()).c_str());
    if (!dot_path || drawn) continue;
    drawn = true;
    if (Status s = write_file(*dot_path, graph_to_dot(r->graph)); !s.is_ok()) return cl.error(s);
    std::printf("wrote %s (@%s, %zu nodes)\n", dot_path->c_str(), g.name().c_str(), r->graph.nodes().size());
    if (!svg_path) continue;
    if (Status s = render_svg(*dot_path, *svg_path); !s.is_ok()) return cl.error(s);
    std::printf("wrote %s\n", svg_path->c_str());
  }
  return kExitOk;
}

}  // namespace fusebox::cli
