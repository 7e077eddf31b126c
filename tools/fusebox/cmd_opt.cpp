// `fusebox opt`: parse and verify .fbir text, run passes, print the result. It is the driver of
// the textual tests (tests/lit, tests/error), so its output must be deterministic and its
// messages must carry file:line:col.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "cli_util.h"
#include "fusion/options.h"
#include "fusion/pipeline.h"
#include "fusion/pipeline_plan.h"
#include "runtime/file_io.h"
#include "runtime/session.h"
#include "ir/parser.h"
#include "load_program.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace fusebox::cli {

namespace {

constexpr const char* kSplitMarker = "// -----";

CommandLine make_command_line() {
  return CommandLine(
      "opt", "FILE.fbir [options]",
      "Parses and verifies FILE (`-` reads stdin), runs the given passes and prints the IR in\n"
      "canonical form.",
      {{"-o", "OUT", "write the result to OUT instead of stdout"},
       {"--split-input-file", "",
        "handle the parts between `// -----` lines one by one (whole-file line numbers)"},
       {"--passes", "a,b", "run these passes in order (none: parse, verify and print)"},
       {"--print-after", "NAME", "also print the IR after pass NAME (one of --passes)"},
       {"--target", "T", "the fusion target: cpu, cuda, metal, mlx, wgpu, rocm or tpu"},
       {"--pipeline", "", "run the target's whole fusion pipeline (spec §3) instead of --passes"},
       {"--fusion-options", "LIST", "options for --pipeline and the passes, e.g. fusion_limits=8x4"},
       {"--stats", "", "print per-pass statistics to stderr"},
       {"--cpu-layout", "L", "after the passes, the cpu backend's layout lowering: nchw8c, nchw16c, nhwc, auto, ..."}});
}

struct OptOptions {
  std::string input;
  std::string output;  // empty: stdout
  bool split_input_file = false;
  std::vector<std::string> passes;
  std::string print_after;
  FusionTarget target = FusionTarget::Cpu;
  bool pipeline = false;
  bool stats = false;
  FusionOptions fusion;  // resolved for the target (environment overrides applied)
  std::optional<int64_t> cpu_layout;  // --cpu-layout: CpuBackendOptions::nchwc_block
};

// "canonicalize{no-recognition}" -> "canonicalize".
std::string pass_base_name(const std::string& entry) { return entry.substr(0, entry.find('{')); }

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const std::string& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

// nullopt: carry on with *o filled; a value: exit with it (usage printed).
std::optional<int> parse_options(const Args& args, CommandLine& cl, OptOptions* o) {
  if (std::optional<int> rc = cl.parse(args)) return rc;
  if (cl.positionals().empty()) return cl.usage_error("missing input file");
  if (cl.positionals().size() > 1) {
    return cl.usage_error("more than one input file ('" + cl.positionals()[0] + "' and '" +
                          cl.positionals()[1] + "')");
  }
  o->input = cl.positionals()[0];
  o->output = cl.value("-o").value_or("");
  o->split_input_file = cl.has("--split-input-file");
  Expected<std::vector<std::string>> passes = parse_pass_list(cl.value("--passes").value_or(""));
  if (!passes) return cl.usage_error("--passes: " + passes.status().message());
  o->passes = *passes;
  o->print_after = cl.value("--print-after").value_or("");
  std::string target = cl.value("--target").value_or("cpu");
  std::optional<FusionTarget> parsed = parse_target(target);
  if (!parsed) {
    return cl.usage_error("unknown target '" + target + "' (expected cpu, cuda, metal, mlx, wgpu, rocm or tpu)");
  }
  o->target = *parsed;
  if (std::optional<std::string> layout = cl.value("--cpu-layout")) {
    o->cpu_layout = parse_cpu_layout(*layout);
    if (!o->cpu_layout) return cl.usage_error("unknown --cpu-layout '" + *layout + "' (choices: auto, nchw, nchw4c, nchw8c, nchw16c, nhwc)");
  }
  o->pipeline = cl.has("--pipeline");
  o->stats = cl.has("--stats");
  if (o->pipeline && cl.has("--passes")) return cl.usage_error("give --passes or --pipeline, not both");
  EnvLookup env = process_env();
  Expected<FusionOptions> base = fusion_options_flag(cl);
  if (!base) return cl.usage_error(base.status().message());
  o->fusion = resolve_options(o->target, claim_table_of(o->target), *base, &env);
  if (o->pipeline) o->passes = plan_pipeline(claim_table_of(o->target), o->fusion);
  if (cl.has("--print-after")) {
    // The pipeline writes options into names (canonicalize{no-recognition}); NAME is the pass's
    // own name, so match on that.
    auto named = std::find_if(o->passes.begin(), o->passes.end(), [&](const std::string& p) {
      return p == o->print_after || pass_base_name(p) == o->print_after;
    });
    if (named == o->passes.end()) {
      if (!o->pipeline) return cl.usage_error("--print-after=" + o->print_after + " names a pass that --passes does not run");
      return cl.usage_error("--print-after=" + o->print_after + " names a pass that the pipeline for target " +
                            std::string(target_name(o->target)) + " does not run (it runs: " + join_names(o->passes) +
                            ")");
    }
    if (!find_pass(pass_base_name(*named))) {
      return cl.usage_error("--print-after=" + o->print_after + ": the pipeline plans " + *named +
                            " but this build does not have it, so there is nothing to print after");
    }
  }
  return std::nullopt;
}

// Runs the passes over every function, verifying after each. Called once on an empty module
// before the input is read, so a bad pass name fails fast. *printed receives --print-after dumps.
Status run_passes(Module& module, const OptOptions& o, std::string* printed) {
  for (const std::string& name : o.passes) {
    std::string base = name.substr(0, name.find('{'));
    if (!find_pass(base) && !o.pipeline) {
      std::string known;
      for (const PassInfo& p : all_passes()) known += (known.empty() ? "" : ", ") + std::string(p.name);
      return Status::invalid("unknown pass '" + name + "' (passes: " + known + ")");
    }
  }
  for (Graph& g : module.functions) {
    PassContext ctx;
    ctx.target = o.target;
    ctx.claims = &claim_table_of(o.target);
    ctx.options = o.fusion;
    ctx.evaluate = &evaluate_with_reference;
    ctx.recognize_patterns = !o.fusion.skip_fusion;
    PipelineHooks hooks;
    hooks.verify_each = true;
    hooks.skip_unavailable = o.pipeline;
    hooks.after_pass = [&](std::string_view pass, const Graph& after) {
      if (printed && (pass == o.print_after || pass_base_name(std::string(pass)) == o.print_after)) {
        *printed += "// IR after " + std::string(pass) + "\n" + print_graph(after);
      }
    };
    FUSEBOX_RETURN_IF_ERROR(run_pipeline(g, o.passes, ctx, hooks).with_context("@" + g.name()));
    if (o.stats) {
      for (const auto& [key, value] : ctx.stats) std::fprintf(stderr, "stat @%s %s %lld\n", g.name().c_str(), key.c_str(), static_cast<long long>(value));
    }
  }
  return Status::ok();
}

// --cpu-layout: the cpu backend's lowering of every function, verified.
Status lower_for_cpu(Module& module, const OptOptions& o) {
  if (!o.cpu_layout) return Status::ok();
  CpuBackendOptions cpu;
  cpu.nchwc_block = *o.cpu_layout;
  for (Graph& g : module.functions) {
    FUSEBOX_ASSIGN_OR_RETURN(Graph lowered, lower_on_backend(g, "cpu", cpu));
    if (Status s = verify(lowered); !s.is_ok()) {
      return Status::internal("the cpu backend's lowering of @" + g.name() + " does not verify: " + s.message());
    }
    g = std::move(lowered);
  }
  return Status::ok();
}

struct Chunk {
  std::string text;
  int first_line;
};

// Splits on lines that are exactly the marker (a trailing '\r' allowed).
std::vector<Chunk> split_chunks(const std::string& text) {
  std::vector<Chunk> chunks{{"", 1}};
  int line = 1;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    size_t next = end == std::string::npos ? text.size() : end + 1;
    std::string_view l(text.data() + pos, (end == std::string::npos ? text.size() : end) - pos);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (l == kSplitMarker) {
      chunks.push_back({"", line + 1});
    } else {
      chunks.back().text.append(text, pos, next - pos);
    }
    pos = next;
    ++line;
  }
  return chunks;
}

// The whole input, bounded (kMaxTextBytes), from a file or "-" for standard input.
Expected<std::string> read_input(const std::string& path) {
  if (path == "-") return read_stream(stdin, "<stdin>", kMaxTextBytes, /*text=*/true);
  return read_file(path, kMaxTextBytes, /*text=*/true);
}

// Parses, verifies and transforms one file or chunk; returns its printed form or the error.
Expected<std::string> process(const Chunk& chunk, const std::string& filename, const OptOptions& o) {
  FUSEBOX_ASSIGN_OR_RETURN(Module module, parse_module(chunk.text, filename, chunk.first_line));
  std::string printed;
  FUSEBOX_RETURN_IF_ERROR(run_passes(module, o, &printed));
  FUSEBOX_RETURN_IF_ERROR(lower_for_cpu(module, o));
  return printed + print_module(module);
}

}  // namespace

int cmd_opt(const Args& args) {
  CommandLine cl = make_command_line();
  OptOptions o;
  if (std::optional<int> rc = parse_options(args, cl, &o)) return *rc;
  Module none;
  if (Status s = run_passes(none, o, nullptr); !s.is_ok()) return cl.error(s);

  std::string out;
  bool failed = false;
  if (o.input.size() > 5 && o.input.compare(o.input.size() - 5, 5, ".onnx") == 0) {
    // An ONNX model is imported first (one function); --split-input-file is for text only.
    Expected<Module> module = load_program(o.input);
    if (!module) return cl.error(module.status());
    if (Status s = run_passes(*module, o, &out); !s.is_ok()) return cl.error(s);
    if (Status s = lower_for_cpu(*module, o); !s.is_ok()) return cl.error(s);
    out += print_module(*module);
  } else {
    Expected<std::string> input = read_input(o.input);
    if (!input) return cl.error(input.status());
    std::string filename = o.input == "-" ? "<stdin>" : o.input;
    std::vector<Chunk> chunks = o.split_input_file ? split_chunks(*input) : std::vector<Chunk>{{*input, 1}};
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (i) out += std::string(kSplitMarker) + "\n";
      Expected<std::string> result = process(chunks[i], filename, o);
      if (!result) {
        std::fprintf(stderr, "%s\n", result.status().message().c_str());
        failed = true;
        continue;
      }
      out += *result;
    }
  }

  if (o.output.empty()) {
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    if (Status s = write_file(o.output, out); !s.is_ok()) return cl.error(s);
  }
  return failed ? kExitError : kExitOk;
}

}  // namespace fusebox::cli
