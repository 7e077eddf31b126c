// Real ONNX models on the CPU, fused against unfused, with a per-op profile of the fused run
// (docs/benchmarks.md has the figures; bench/run_model_bench.sh adds ONNX Runtime):
//
//   model_bench CACHE_DIR [--runs N] [--warmup W] [--min-ms T] [--profile-runs P] [--top K]
//   model_bench CACHE_DIR --only CASE [--runs N]      (peak resident memory of the fused plan)
//   ... [--cpu-layout auto|nchw|nchw8c|nchw16c|nhwc]   (the cpu backend's activation layout, both plans)
//   ... [--cpu-winograd]                               (CpuBackendOptions::winograd, both plans)
//
// CACHE_DIR is the model cache of onnx_models_test (tests/models/fetch_models.sh prepares it);
// its ref/manifest.txt lists the cases: <model>_<size>, the .onnx file, the input name, the
// input .npy and ONNX Runtime's output .npy. Each model is imported once and compiled twice:
//
//   fused    default CompileOptions (the CPU fusion pipeline, the cpu backend)
//   unfused  fuse = false, backend cpu (the graph as imported, one kernel per node)
//
// For each case the two run alternately on the same deterministic input ONNX Runtime ran:
// W warm-up pairs, then at least N timed pairs and T ms (medians reported). The outputs are
// compared with ONNX Runtime's (max|a-b| / max|b|) so a fast wrong answer shows. Then P profiled
// runs of each plan (Executable::run_profiled: wall time per node) are summed per op keyword (a
// region counts as its keyword, elementwise_region); the fused plan's top K are printed with their
// share of the total, and the time outside contractions (conv, matmul: op kind Contraction, the
// part fusion can change) fused against unfused.
//
// One machine-readable line per case, for the script:
//   fusebox <model> <size> fused_ms <ms> unfused_ms <ms> kernels <before> <after> rel_err <e> samples <n>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <sys/resource.h>

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
  int runs = 5, warmup = 1, profile_runs = 2, top = 8, min_ms = 2000;
  std::string only;  // --only CASE: that case alone, fused plan only, then the peak resident memory
  int64_t nchwc_block = CpuBackendOptions::kAutoBlock;  // --cpu-layout, for both plans
  bool winograd = false;                                // --cpu-winograd, for both plans
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
  std::fprintf(stderr,
               "model_bench: %s\nusage: model_bench CACHE_DIR [--runs N] [--warmup W] "
               "[--profile-runs P] [--top K] [--min-ms T] [--only CASE] [--cpu-layout L] [--cpu-winograd]\n",
               problem.c_str());
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
    else if (a == "--min-ms") s.min_ms = number(0);
    else if (a == "--cpu-winograd")
      s.winograd = true;
    else if (a == "--cpu-layout") {
      if (i + 1 >= argc) usage("--cpu-layout needs a value");
      std::optional<int64_t> b = parse_cpu_layout(argv[++i]);
      if (!b) usage("--cpu-layout takes auto, nchw, nchw8c, nchw16c or nhwc");
      s.nchwc_block = *b;
    }
    else if (a == "--only") {
      if (i + 1 >= argc) usage("--only needs a case name");
      s.only = argv[++i];
    }
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

Executable compile(const Graph& g, bool fused, const std::string& model, const Settings& s) {
  CompileOptions o;
  o.fuse = fused;
  o.cpu.nchwc_block = s.nchwc_block;
  o.cpu.winograd = s.winograd;
  auto t0 = Clock::now();
  Expected<Executable> exe = Session().compile(g, o);
  if (!exe) fail(model + (fused ? " (fused)" : " (unfused)") + ": " + exe.status().to_string());
  std::printf("  compiled %s in %.0f ms: %zu nodes, kernels %zu -> %zu\n", fused ? "fused  " : "unfused",
              ms_since(t0), exe->graph().nodes().size(), exe->report().kernels_before, exe->report().kernels_after);
  return std::move(*exe);
}

// Median ms of the fused and the unfused plan. The two alternate run by run, so a change in the
// machine's load hits both alike: `warmup` pairs, then at least `runs` timed pairs and at least
// `min_ms` of timed fused runs (small models get more samples), at most 1000 pairs.
struct Timing {
  double fused_ms = 0, unfused_ms = 0;
  int samples = 0;
  Array fused_out, unfused_out;
};

Timing time_pair(const Executable& fused, const Executable& unfused, const NamedArrays& inputs, const Settings& s,
                 const std::string& label) {
  auto once = [&](const Executable& exe, const char* what, Array* out) {
    auto t0 = Clock::now();
    Expected<std::vector<Array>> r = exe.run(inputs);
    double ms = ms_since(t0);
    if (!r) fail(label + " (" + what + "): " + r.status().to_string());
    *out = (*r)[0];
    return ms;
  };
  Timing t;
  for (int i = 0; i < s.warmup; ++i) {
    once(fused, "fused", &t.fused_out);
    once(unfused, "unfused", &t.unfused_out);
  }
  std::vector<double> f, u;
  double spent = 0;
  while ((int(f.size()) < s.runs || spent < s.min_ms) && f.size() < 1000) {
    f.push_back(once(fused, "fused", &t.fused_out));
    u.push_back(once(unfused, "unfused", &t.unfused_out));
    spent += f.back();
  }
  t.fused_ms = median(f);
  t.unfused_ms = median(u);
  t.samples = int(f.size());
  return t;
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

// Seconds per op keyword over `runs` profiled runs of a plan (summed over nodes, averaged over
// runs), with the number of nodes of each keyword; and the seconds outside contractions.
struct Profile {
  std::map<std::string, std::pair<double, int>> by_op;  // keyword -> (seconds, nodes)
  double total = 0, outside_contractions = 0;
};

Profile profile(const Executable& exe, const NamedArrays& inputs, int runs, const std::string& label) {
  const Graph& g = exe.graph();
  Profile p;
  for (const Node& n : g.nodes()) p.by_op[std::string(n.info().keyword)].second++;
  for (int r = 0; r < runs; ++r) {
    std::vector<double> seconds;
    Expected<std::vector<Array>> out = exe.run_profiled(inputs, &seconds);
    if (!out) fail(label + " (profiled): " + out.status().to_string());
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      const Node& n = g.nodes()[i];
      double t = seconds[i] / runs;
      p.by_op[std::string(n.info().keyword)].first += t;
      p.total += t;
      if (op_kind(n.op) != OpKind::Contraction) p.outside_contractions += t;
    }
  }
  return p;
}

// The fused plan's top K op keywords with their share of the time spent in nodes, and the time
// outside contractions (the part fusion can change) fused against unfused.
void print_profile(const Executable& fused, const Executable& unfused, const NamedArrays& inputs, const Settings& s,
                   const std::string& label) {
  if (s.profile_runs == 0) return;
  Profile f = profile(fused, inputs, s.profile_runs, label + " fused");
  Profile u = profile(unfused, inputs, s.profile_runs, label + " unfused");
  std::vector<std::pair<std::string, std::pair<double, int>>> rows(f.by_op.begin(), f.by_op.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::printf("  profile %s (fused, mean of %d profiled runs): %.1f ms in nodes\n", label.c_str(), s.profile_runs,
              f.total * 1e3);
  for (size_t i = 0; i < rows.size() && i < size_t(s.top); ++i) {
    const auto& [op, v] = rows[i];
    std::printf("    %-24s %10.2f ms  %5.1f%%  (%d nodes)\n", op.c_str(), v.first * 1e3,
                f.total > 0 ? 100 * v.first / f.total : 0.0, v.second);
  }
  std::printf("  outside contractions (conv, matmul): fused %.2f ms, unfused %.2f ms (of %.1f / %.1f ms in nodes)\n",
              f.outside_contractions * 1e3, u.outside_contractions * 1e3, f.total * 1e3, u.total * 1e3);
}

// --only: the fused plan of one case, run as the timed loop would, then the process's peak
// resident memory (model weights, plan, pools and the runtime's libraries), to set beside ONNX
// Runtime's (ort_bench.js --only).
int run_peak_memory(const Settings& s, const Case& c) {
  Expected<Graph> g = import_onnx_file(s.cache + "/" + c.model);
  if (!g) fail(g.status().to_string());
  Executable fused = compile(*g, true, c.model, s);
  g = Graph();  // the caller keeps only the plan
  NamedArrays inputs{{onnx_value_name(c.input_name), load(s.cache + "/" + c.input_npy)}};
  for (int i = 0; i < std::max(1, s.runs); ++i) {
    Expected<std::vector<Array>> out = fused.run(inputs);
    if (!out) fail(c.name + ": " + out.status().to_string());
  }
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto [key, size] = split_case(c.name);
  std::printf("fusebox_peak %s %s peak_rss_mb %.1f\n", key.c_str(), size.c_str(), double(u.ru_maxrss) / 1024.0);
  return 0;
}

int run(const Settings& s) {
  std::vector<Case> cases = read_manifest(s.cache);
  if (!s.only.empty()) {
    std::erase_if(cases, [&](const Case& c) { return c.name != s.only; });
    if (cases.empty()) fail("no case " + s.only + " in the manifest");
    return run_peak_memory(s, cases[0]);
  }
  std::vector<std::string> models;  // in manifest order
  for (const Case& c : cases)
    if (std::find(models.begin(), models.end(), c.model) == models.end()) models.push_back(c.model);
  std::printf("model_bench: %zu cases; per case %d warm-up + at least %d timed runs and %d ms (median; fused and "
              "unfused alternate), %d profiled runs\n", cases.size(), s.warmup, s.runs, s.min_ms, s.profile_runs);
  for (const std::string& model : models) {
    auto t0 = Clock::now();
    Expected<Graph> g = import_onnx_file(s.cache + "/" + model);
    if (!g) fail(g.status().to_string());
    std::printf("%s: imported %zu nodes in %.0f ms\n", model.c_str(), g->nodes().size(), ms_since(t0));
    Executable fused = compile(*g, true, model, s);
    Executable unfused = compile(*g, false, model, s);
    for (const Case& c : cases) {
      if (c.model != model) continue;
      Array input = load(s.cache + "/" + c.input_npy);
      Array want = load(s.cache + "/" + c.output_npy);
      NamedArrays inputs{{onnx_value_name(c.input_name), input}};
      Timing t = time_pair(fused, unfused, inputs, s, c.name);
      double err = std::max(rel_error(t.fused_out, want), rel_error(t.unfused_out, want));
      auto [key, size] = split_case(c.name);
      std::printf("fusebox %s %s fused_ms %.3f unfused_ms %.3f kernels %zu %zu rel_err %.2g samples %d\n",
                  key.c_str(), size.c_str(), t.fused_ms, t.unfused_ms, fused.report().kernels_before,
                  fused.report().kernels_after, err, t.samples);
      std::fflush(stdout);
      print_profile(fused, unfused, inputs, s, c.name);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace fusebox

int main(int argc, char** argv) { return fusebox::run(fusebox::parse_args(argc, argv)); }
