// `fusebox explain`: the fusion report of every function of a program, for one target.
#include <cstdio>

#include "cli_util.h"
#include "fusion/fuse.h"
#include "fusion/pipeline_plan.h"
#include "load_program.h"
#include "runtime/session.h"

namespace fusebox::cli {

int cmd_explain(const Args& args) {
  CommandLine cl("explain", "FILE [options]",
                 "Fuses each function of FILE (.fbir, or .onnx when built with ONNX) for a target\n"
                 "and prints what was fused and what was not, with reasons. FUSEBOX_* environment\n"
                 "overrides apply (docs/fusion-options.md).",
                 {{"--target", "T", "cpu (default), cuda, metal, mlx, wgpu, rocm or tpu"},
                  {"--fusion-options", "LIST", "e.g. skip_fusion=1,fusion_limits=8x4"},
                  {"--func", "NAME", "only this function"},
                  {"--dim", "SYM=N", "size of a symbol for the byte estimate", true},
                  {"--passes", "", "also print the pass list"}});
  if (std::optional<int> done = cl.parse(args)) return *done;
  if (cl.positionals().size() != 1) return cl.usage_error("expected one FILE");
  FusionTarget target = FusionTarget::Cpu;
  if (std::optional<std::string> t = cl.value("--target")) {
    std::optional<FusionTarget> parsed = parse_target(*t);
    if (!parsed) return cl.usage_error("unknown target '" + *t + "' (targets: " + target_choices() + ")");
    target = *parsed;
  }
  EnvLookup env = process_env();
  FusionOptions options = FusionOptions::for_target(target, env);
  if (std::optional<std::string> text = cl.value("--fusion-options")) {
    Expected<FusionOptions> parsed = parse_fusion_options(*text, options);
    if (!parsed) return cl.usage_error(parsed.status().message());
    options = *parsed;
  }
  SymbolBindings sizes;
  for (const std::string& d : cl.values("--dim")) {
    auto kv = split_assignment(d);
    std::optional<int64_t> n = kv ? parse_int(kv->second) : std::nullopt;
    if (!n || *n < 0) return cl.usage_error("--dim takes SYM=N with N >= 0, got '" + d + "'");
    sizes[kv->first] = *n;
  }
  Expected<Module> m = load_program(cl.positionals()[0]);
  if (!m) return cl.error(m.status());
  std::string func = cl.value("--func").value_or("");
  if (!func.empty() && !m->find(func)) return cl.error(pick_function(*m, func).status());
  for (const Graph& g : m->functions) {
    if (!func.empty() && g.name() != func) continue;
    Fuse fuser(target);
    fuser.options(options).merge_env(env).report_sizes(sizes).evaluator(&evaluate_with_reference);
    Expected<FuseResult> r = fuser.run_with_report(g);
    if (!r) return cl.error(r.status().with_context("@" + g.name()));
    std::fputs(r->report.to_string().c_str(), stdout);
    if (cl.has("--passes")) std::printf("  passes   %s\n", join_pipeline(fuser.passes()).c_str());
  }
  return kExitOk;
}

}  // namespace fusebox::cli
