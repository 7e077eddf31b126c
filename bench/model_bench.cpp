// Real ONNX models on the CPU, fused against unfused, with a per-op profile of the fused run
// (docs/benchmarks-models.md has the figures; bench/run_model_bench.sh adds ONNX Runtime):
//
//   model_bench CACHE_DIR [--runs N] [--warmup W] [--profile-runs P] [--top K]
//
// CACHE_DIR is the model cache of onnx_models_test (tests/models/fetch_models.sh prepares it);
// its ref/manifest.txt lists the cases: <model>_<size>, the .onnx file, the input name, the
// input .npy and ONNX Runtime's output .npy. Each model is imported once and compiled twice:
//
//   fused    default CompileOptions (the CPU fusion pipeline, the CPU executor)
//   unfused  fuse = false, executor Cpu (the graph as imported, one kernel per node)
//
// For each case both run W warm-up runs, then N timed runs (median reported), on the same
// deterministic input ONNX Runtime ran. The outputs are compared with ONNX Runtime's
// (max|a-b| / max|b|) so a fast wrong answer shows. Then P profiled runs of the fused plan
// (Executable::run_profiled: wall time per node) are summed per op keyword (a region counts as
// its keyword, elementwise_region) and the top K printed with their share of the total.
//
// One machine-readable line per case, for the script:
//   fusebox <model> <size> fused_ms <ms> unfused_ms <ms> kernels <before> <after> rel_err <e>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "fusebox/session.h"
#include "onnx/importer.h"
#include "runtime/npy.h"

namespace fusebox {
namespace {

struct Case {
  std::string name, model, input_name, input_npy, output_npy;
};

struct Settings {
  std::string cache;
  int runs = 5, warmup = 1, profile_runs = 2, top = 8;
};

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double median(std::vector<double> xs) {
  std::sort(xs.begin(), xs.end());
  size_t m = xs.size() / 2;
  return xs.size() % 2 ? xs[m] : (xs[m - 1] + xs[m]) / 2;
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "model_bench: %s\n", message.c_str());
  std::exit(1);
}

[[noreturn]] void usage(const std::string& problem) {
  std::fprintf(stderr, "model_bench: %s\nusage: model_bench CACHE_DIR [--runs N] [--warmup W] "
               "[--profile-runs P] [--top K]\n", problem.c_str());
  std::exit(2);
}

Settings parse_args(int argc, char** argv) {
  Settings s;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto number = [&](int min) {
      if (i + 1 >= argc) usage(a + " needs a value");
      std::string v = argv[++i];
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end || n < min || n > 100000) usage(a + " takes an integer >= " + std::to_string(min));
      return static_cast<int>(n);
    };
    if (a == "--runs") s.runs = number(1);
    else if (a == "--warmup") s.warmup = number(0);
    else if (a == "--profile-runs") s.profile_runs = number(0);
    else if (a == "--top") s.top = number(1);
    else if (a.rfind("--", 0) == 0) usage("unknown option '" + a + "'");
    else if (s.cache.empty()) s.cache = a;
    else usage("more than one CACHE_DIR");
  }
  if (s.cache.empty()) usage("missing CACHE_DIR (the model cache tests/models/fetch_models.sh prepares)");
  return s;
}

std::vector<Case> read_manifest(const std::string& cache) {
  std::string path = cache + "/ref/manifest.txt";
  std::ifstream f(path);
  if (!f) fail("cannot read " + path + ": run tests/models/fetch_models.sh first");
  std::vector<Case> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    Case c;
    fields >> c.name >> c.model >> c.input_name >> c.input_npy >> c.output_npy;
    if (c.output_npy.empty()) fail(path + ": malformed line '" + line + "'");
    cases.push_back(c);
  }
  if (cases.empty()) fail(path + " lists no cases");
  return cases;
}

// Case names are <model>_<size>: det_1x3x320x320 -> (det, 1x3x320x320).
std::pair<std::string, std::string> split_case(const std::string& name) {
  size_t k = name.find('_');
  if (k == std::string::npos) return {name, "?"};
  return {name.substr(0, k), name.substr(k + 1)};
}

Array load(const std::string& path) {
  Expected<Array> a = read_npy(path);
  if (!a) fail(a.status().to_string());
  return *a;
}

Executable compile(const Graph& g, bool fused, const std::string& model) {
  CompileOptions o;
  o.fuse = fused;
  o.executor = ExecutorKind::Cpu;
  auto t0 = Clock::now();
  Expected<Executable> exe = Session().compile(g, o);
  if (!exe) fail(model + (fused ? " (fused)" : " (unfused)") + ": " + exe.status().to_string());
  std::printf("  compiled %s in %.0f ms: %zu nodes, kernels %zu -> %zu\n", fused ? "fused  " : "unfused",
              ms_since(t0), exe->graph().nodes().size(), exe->report().kernels_before, exe->report().kernels_after);
  return std::move(*exe);
}

// Runs `warmup` + `runs` times; returns the median ms and the last output.
double time_runs(const Executable& exe, const NamedArrays& inputs, const Settings& s, const std::string& what,
                 Array* output) {
  std::vector<double> ms;
  for (int i = 0; i < s.warmup + s.runs; ++i) {
    auto t0 = Clock::now();
    Expected<std::vector<Array>> out = exe.run(inputs);
    double t = ms_since(t0);
    if (!out) fail(what + ": " + out.status().to_string());
    if (i >= s.warmup) ms.push_back(t);
    *output = (*out)[0];
  }
  return median(ms);
}

double rel_error(const Array& got, const Array& want) {
  if (got.shape() != want.shape()) return INFINITY;
  double diff = 0, scale = 1e-6;
  for (int64_t i = 0; i < want.numel(); ++i) {
    diff = std::max(diff, std::abs(got.get_f64(i) - want.get_f64(i)));
    scale = std::max(scale, std::abs(want.get_f64(i)));
  }
  return diff / scale;
}

// P profiled runs of the fused plan: seconds per op keyword (summed over nodes, averaged over
// runs), printed largest first with their share of the time spent in nodes.
void print_profile(const Executable& exe, const NamedArrays& inputs, const Settings& s, const std::string& label) {
  if (s.profile_runs == 0) return;
  const Graph& g = exe.graph();
  std::map<std::string, std::pair<double, int>> by_op;  // keyword -> (seconds, nodes)
  for (const Node& n : g.nodes()) by_op[std::string(n.info().keyword)].second++;
  for (int r = 0; r < s.profile_runs; ++r) {
    std::vector<double> seconds;
    Expected<std::vector<Array>> out = exe.run_profiled(inputs, &seconds);
    if (!out) fail(label + " (profiled): " + out.status().to_string());
    for (size_t i = 0; i < g.nodes().size(); ++i) by_op[std::string(g.nodes()[i].info().keyword)].first += seconds[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(by_op.begin(), by_op.end());
  double total = 0;
  for (auto& row : rows) total += (row.second.first /= s.profile_runs);
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("  profile %s (fused, mean of %d profiled runs): %.1f ms in nodes\n", label.c_str(), s.profile_runs,
              total * 1e3);
  for (size_t i = 0; i < rows.size() && i < size_t(s.top); ++i) {
    const auto& [op, v] = rows[i];
    std::printf("    %-24s %10.2f ms  %5.1f%%  (%d nodes)\n", op.c_str(), v.first * 1e3,
                total > 0 ? 100 * v.first / total : 0.0, v.second);
  }
}

int run(const Settings& s) {
  std::vector<Case> cases = read_manifest(s.cache);
  std::vector<std::string> models;  // in manifest order
  for (const Case& c : cases)
    if (std::find(models.begin(), models.end(), c.model) == models.end()) models.push_back(c.model);
  std::printf("model_bench: %zu cases, %d warm-up + %d timed runs each (median), %d profiled runs\n", cases.size(),
              s.warmup, s.runs, s.profile_runs);
  for (const std::string& model : models) {
    auto t0 = Clock::now();
    Expected<Graph> g = import_onnx_file(s.cache + "/" + model);
    if (!g) fail(g.status().to_string());
    std::printf("%s: imported %zu nodes in %.0f ms\n", model.c_str(), g->nodes().size(), ms_since(t0));
    Executable fused = compile(*g, true, model);
    Executable unfused = compile(*g, false, model);
    for (const Case& c : cases) {
      if (c.model != model) continue;
      Array input = load(s.cache + "/" + c.input_npy);
      Array want = load(s.cache + "/" + c.output_npy);
      NamedArrays inputs{{onnx_value_name(c.input_name), input}};
      Array out_fused, out_unfused;
      double fused_ms = time_runs(fused, inputs, s, c.name + " (fused)", &out_fused);
      double unfused_ms = time_runs(unfused, inputs, s, c.name + " (unfused)", &out_unfused);
      double err = std::max(rel_error(out_fused, want), rel_error(out_unfused, want));
      auto [key, size] = split_case(c.name);
      std::printf("fusebox %s %s fused_ms %.3f unfused_ms %.3f kernels %zu %zu rel_err %.2g\n", key.c_str(),
                  size.c_str(), fused_ms, unfused_ms, fused.report().kernels_before, fused.report().kernels_after,
                  err);
      std::fflush(stdout);
      print_profile(fused, inputs, s, c.name);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) { return fusebox::run(fusebox::parse_args(argc, argv)); }
