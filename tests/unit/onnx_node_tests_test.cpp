// The ONNX backend node tests (Debian's libonnx-testdata: ONNX's own conformance suite, one
// directory per test with model.onnx and test_data_set_*/{input,output}_*.pb) through fusebox.
//
// Every test is imported once and compiled twice: fused on the default CPU pipeline and unfused
// (CompileOptions::fuse = false, the graph as imported on the reference kernels). Every data set
// runs on both and is compared with ONNX's rule: |got - want| <= 1e-7 + 1e-3 * |want| for floats
// (NaN equals NaN, infinities equal themselves), exact for integers and bools, same dtype and
// shape. A model whose shape-like inputs (a Reshape shape, Slice starts, ...) are graph inputs
// runs through OnnxExecutable, compiled per data set's values of those inputs.
//
// Sequence and optional inputs and outputs (SequenceProto, OptionalProto data files, read by the
// type the model declares) go through OnnxExecutable::run_values and are compared element by
// element with the same rule.
//
// tests/onnx_node_expectations.txt lists the tests fusebox cannot run yet, one
// `test_name: reason` per line, sorted. It is checked both ways: a listed test that now passes
// fails (remove its line), a test that is refused but not listed fails, and so does a listed
// reason that no longer matches. A wrong result always fails unless its line says `WRONG:`.
//
//   FUSEBOX_ONNX_NODE_TESTS_WRITE=1 build/tests/onnx_node_tests_test   # rewrite the list
//   FUSEBOX_ONNX_NODE_TESTS_DIR=<dir>   # the node test directory (default: Debian's)
//
// The tests are split into kShards CTest tests (test i takes every kShards-th directory in
// sorted order) so that the suite runs in parallel and stays short under ASan.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxNodeTests, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <onnx/onnx-data_pb.h>

#include "onnx/importer.h"
#include "onnx/onnx_proto.h"
#include "onnx/tensor_data.h"
#include "onnx_run/onnx_executable.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

namespace fs = std::filesystem;

constexpr int kShards = 4;
constexpr double kRtol = 1e-3, kAtol = 1e-7;
constexpr size_t kMaxReason = 150;
const char* const kDefaultDir = "/usr/share/libonnx-testdata/data/node";
const char* const kExpectationsFile = "onnx_node_expectations.txt";

std::string data_dir() {
  const char* env = std::getenv("FUSEBOX_ONNX_NODE_TESTS_DIR");
  return env && *env ? env : kDefaultDir;
}

std::string expectations_path() { return std::string(FUSEBOX_SOURCE_DIR) + "/tests/" + kExpectationsFile; }

bool write_mode() {
  const char* env = std::getenv("FUSEBOX_ONNX_NODE_TESTS_WRITE");
  return env && std::string(env) == "1";
}

// The node test directories, sorted by name.
const std::vector<std::string>& all_tests() {
  static const std::vector<std::string> tests = [] {
    std::vector<std::string> t;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(data_dir(), ec)) {
      if (e.is_directory() && fs::exists(e.path() / "model.onnx")) t.push_back(e.path().filename().string());
    }
    std::sort(t.begin(), t.end());
    return t;
  }();
  return tests;
}

// The expectations file: name -> reason. Lines starting with '#' and empty lines are comments.
struct Expectations {
  std::vector<std::string> header;  // the comment lines at the top, kept when rewriting
  std::map<std::string, std::string> reasons;
  std::vector<std::string> order;  // names as listed
};

Expectations read_expectations(const std::string& path) {
  Expectations e;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') {
      if (e.reasons.empty()) e.header.push_back(line);
      continue;
    }
    size_t colon = line.find(": ");
    std::string name = line.substr(0, colon);
    std::string reason = colon == std::string::npos ? "" : line.substr(colon + 2);
    e.order.push_back(name);
    e.reasons[name] = reason;
  }
  return e;
}

void write_expectations(const std::string& path, const Expectations& e) {
  std::ofstream f(path, std::ios::trunc);
  for (const std::string& h : e.header) f << h << "\n";
  for (const auto& [name, reason] : e.reasons) f << name << ": " << reason << "\n";
}

// One line, at most kMaxReason characters, without the test data's directory (the importer's
// messages start with the model's path).
std::string shorten(std::string s) {
  const std::string dir = data_dir() + "/";
  for (size_t at; (at = s.find(dir)) != std::string::npos;) {
    size_t end = s.find(": ", at);
    s.erase(at, end == std::string::npos ? dir.size() : end + 2 - at);
  }
  std::replace(s.begin(), s.end(), '\n', ' ');
  if (s.size() > kMaxReason) s = s.substr(0, kMaxReason - 3) + "...";
  return s;
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A tensor of a data file; `elem_type` is the ONNX type the model declares for it. ONNX 1.12
// wrote bfloat16 test data as UINT16 tensors holding the bfloat16 bits.
Expected<Array> to_array(onnx::TensorProto t, int32_t elem_type, const std::string& what) {
  if (t.data_type() == onnx::TensorProto::UINT16 && elem_type == onnx::TensorProto::BFLOAT16) {
    t.set_data_type(onnx::TensorProto::BFLOAT16);
  }
  return onnx_import::tensor_to_array(t, what, onnx_import::ExternalDataDir{});
}

// The declared element type of a tensor, or of a sequence's or an optional's tensors.
int32_t tensor_elem_type(const onnx::TypeProto& type) {
  if (type.has_tensor_type()) return type.tensor_type().elem_type();
  if (type.has_sequence_type()) return tensor_elem_type(type.sequence_type().elem_type());
  if (type.has_optional_type()) return tensor_elem_type(type.optional_type().elem_type());
  return 0;
}

Expected<OnnxValue> sequence_value(const onnx::SequenceProto& seq, int32_t elem_type,
                                   const std::string& what) {
  if (seq.elem_type() != onnx::SequenceProto::TENSOR && seq.tensor_values_size() == 0 &&
      seq.elem_type() != onnx::SequenceProto::UNDEFINED) {
    return Status::unimplemented(what + " is a sequence of sequences, maps or optionals");
  }
  std::vector<Array> elements;
  for (int k = 0; k < seq.tensor_values_size(); ++k) {
    FUSEBOX_ASSIGN_OR_RETURN(Array a, to_array(seq.tensor_values(k), elem_type, what));
    elements.push_back(std::move(a));
  }
  return OnnxValue::sequence(std::move(elements));
}

// A data file read as what the model declares: a TensorProto, a SequenceProto of tensors or an
// OptionalProto (none, a tensor or a sequence).
Expected<OnnxValue> read_value(const fs::path& p, const onnx::TypeProto& type) {
  const std::string what = p.filename().string();
  const std::string bytes = read_file(p);
  const int32_t elem_type = tensor_elem_type(type);
  if (type.has_sequence_type()) {
    onnx::SequenceProto seq;
    if (!seq.ParseFromString(bytes)) return Status::invalid(what + " is not a SequenceProto");
    return sequence_value(seq, elem_type, what);
  }
  if (type.has_optional_type()) {
    onnx::OptionalProto opt;
    if (!opt.ParseFromString(bytes)) return Status::invalid(what + " is not an OptionalProto");
    if (opt.has_tensor_value()) {
      FUSEBOX_ASSIGN_OR_RETURN(Array a, to_array(opt.tensor_value(), elem_type, what));
      return OnnxValue(std::move(a));
    }
    if (opt.has_sequence_value()) return sequence_value(opt.sequence_value(), elem_type, what);
    if (opt.elem_type() != onnx::OptionalProto::UNDEFINED) {
      return Status::unimplemented(what + " is an optional of a map or an optional");
    }
    return OnnxValue::none();
  }
  onnx::TensorProto t;
  if (!t.ParseFromString(bytes)) return Status::invalid(what + " is not a TensorProto");
  FUSEBOX_ASSIGN_OR_RETURN(Array a, to_array(std::move(t), elem_type, what));
  return OnnxValue(std::move(a));
}

// "" when `got` matches `want` by ONNX's rule, else what differs.
std::string compare(const Array& got, const Array& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape()) {
    return "got " + got.type_string() + ", want " + want.type_string();
  }
  for (int64_t i = 0; i < got.numel(); ++i) {
    bool ok;
    if (is_float(want.dtype())) {
      double a = got.get_f64(i), b = want.get_f64(i);
      ok = (std::isnan(a) && std::isnan(b)) || a == b || std::fabs(a - b) <= kAtol + kRtol * std::fabs(b);
    } else {
      ok = got.get_i64(i) == want.get_i64(i);
    }
    if (!ok) {
      std::ostringstream s;
      s.precision(9);
      s << "element " << i << " of " << want.type_string() << ": got " << got.get_f64(i) << ", want "
        << want.get_f64(i);
      return s.str();
    }
  }
  return "";
}

const char* kind_name(OnnxValue::Kind k) {
  switch (k) {
    case OnnxValue::Kind::Tensor:
      return "a tensor";
    case OnnxValue::Kind::Sequence:
      return "a sequence";
    case OnnxValue::Kind::None:
      return "none";
  }
  return "?";
}

// The same for values: the same kind and length, every element matching.
std::string compare(const OnnxValue& got, const OnnxValue& want) {
  if (got.kind() != want.kind())
    return std::string("got ") + kind_name(got.kind()) + ", want " + kind_name(want.kind());
  if (got.elements().size() != want.elements().size()) {
    return "got a sequence of " + std::to_string(got.elements().size()) + " tensors, want " +
           std::to_string(want.elements().size());
  }
  for (size_t k = 0; k < want.elements().size(); ++k) {
    std::string diff = compare(got.elements()[k], want.elements()[k]);
    if (!diff.empty())
      return want.kind() == OnnxValue::Kind::Sequence ? "tensor " + std::to_string(k) + ": " + diff : diff;
  }
  return "";
}

enum class Outcome { Passed, Refused, Wrong };

struct Result {
  Outcome outcome = Outcome::Passed;
  std::string reason;  // for Refused and Wrong, as the expectations file writes it
  // Milliseconds to import and compile the model fused: OnnxExecutable::compile, plus the first
  // data set's run where the model is imported per input values (it compiles then). Printed,
  // never asserted (docs/onnx.md: the goal is under 50 ms for every test).
  double compile_ms = 0;
};

Result refused(const std::string& stage, const Status& s) {
  return {Outcome::Refused, shorten(stage + ": " + s.message())};
}

// Imports, compiles (fused and unfused) and runs one node test.
Result run_node_test(const std::string& name) {
  fs::path dir = fs::path(data_dir()) / name;
  // An import that stops for want of an input's value or a sequence's layout goes on per data set
  // (OnnxExecutable).
  OnnxImportReport report;
  Expected<Graph> g = import_onnx_file((dir / "model.onnx").string(), {}, {}, &report);
  if (!g && report.needs_value.empty()) return refused("import", g.status());

  onnx::ModelProto model;
  if (!model.ParseFromString(read_file(dir / "model.onnx"))) return {Outcome::Refused, "model.onnx does not parse"};
  std::vector<std::string> input_names;
  std::vector<onnx::TypeProto> input_types, output_types;
  for (const auto& vi : model.graph().input()) {
    bool is_initializer = false;
    for (const auto& t : model.graph().initializer()) is_initializer |= t.name() == vi.name();
    if (is_initializer) continue;
    input_names.push_back(onnx_value_name(vi.name()));
    input_types.push_back(vi.type());
  }
  for (const auto& vi : model.graph().output()) output_types.push_back(vi.type());

  std::vector<std::pair<const char*, OnnxExecutable>> exes;
  double compile_ms = 0;
  for (bool fused : {true, false}) {
    CompileOptions options;
    options.fuse = fused;
    use_backend(options, fused ? kCpu : kReference);
    const auto start = std::chrono::steady_clock::now();
    Expected<OnnxExecutable> exe = OnnxExecutable::compile((dir / "model.onnx").string(), options);
    if (fused)
      compile_ms =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    const char* label = fused ? "fused" : "unfused";
    if (!exe) return refused(std::string("compile ") + label, exe.status());
    exes.emplace_back(label, std::move(*exe));
  }

  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  }
  std::sort(sets.begin(), sets.end());
  for (const fs::path& set : sets) {
    NamedOnnxValues inputs;
    std::vector<OnnxValue> wants;
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("input_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      if (i >= input_names.size()) return {Outcome::Refused, "data: more input files than graph inputs"};
      Expected<OnnxValue> a = read_value(p, input_types[i]);
      if (!a) return refused("data", a.status());
      inputs.insert_or_assign(input_names[i], std::move(*a));
    }
    for (size_t i = 0;; ++i) {
      fs::path p = set / ("output_" + std::to_string(i) + ".pb");
      if (!fs::exists(p)) break;
      Expected<OnnxValue> a = read_value(p, i < output_types.size() ? output_types[i] : onnx::TypeProto());
      if (!a) return refused("data", a.status());
      wants.push_back(std::move(*a));
    }
    for (const auto& [label, exe] : exes) {
      const auto start = std::chrono::steady_clock::now();
      Expected<std::vector<OnnxValue> > out = exe.run_values(inputs);
      if (std::string_view(label) == "fused" && set == sets.front() && !report.needs_value.empty()) {
        compile_ms +=
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      }
      std::string where = std::string(label) + " " + set.filename().string();
      if (!out) return refused("run " + std::string(label), out.status());
      if (out->size() != wants.size()) {
        return {Outcome::Wrong, shorten("WRONG: " + where + ": " + std::to_string(out->size()) + " outputs, want " +
                                        std::to_string(wants.size()))};
      }
      for (size_t k = 0; k < wants.size(); ++k) {
        std::string diff = compare((*out)[k], wants[k]);
        if (!diff.empty()) {
          return {Outcome::Wrong, shorten("WRONG: " + where + " output " + std::to_string(k) + ": " + diff)};
        }
      }
    }
  }
  Result r;
  r.compile_ms = compile_ms;
  return r;
}

struct Totals {
  int passed = 0, refused = 0, wrong = 0;
  double slowest_ms = 0;  // the longest fused import and compile of a passing test
  std::string slowest;
  void add_time(const std::string& name, double ms) {
    if (ms > slowest_ms) slowest_ms = ms, slowest = name;
  }
  void print(const std::string& what) const {
    std::printf(
        "onnx node tests%s: %d passed (fused and unfused), %d refused, %d wrong, %d total; slowest import + "
        "compile %.1f ms (%s)\n",
        what.c_str(), passed, refused, wrong, passed + refused + wrong, slowest_ms, slowest.c_str());
  }
};
Totals g_totals;
int g_shards_run = 0;

// Prints the totals over every shard this process ran (when it ran more than one).
class SummaryEnvironment : public ::testing::Environment {
 public:
  void TearDown() override {
    if (g_shards_run > 1) g_totals.print(" (" + std::to_string(g_shards_run) + " shards)");
  }
};
const auto* const g_env = ::testing::AddGlobalTestEnvironment(new SummaryEnvironment);

// Holds an exclusive lock on the expectations file while a shard rewrites its lines, so shards
// run in parallel by CTest do not lose each other's updates.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT, 0644)) {
    if (fd_ >= 0) ::flock(fd_, LOCK_EX);
  }
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  int fd_;
};

class OnnxNodeTests : public ::testing::TestWithParam<int> {};

TEST_P(OnnxNodeTests, Shard) {
  if (all_tests().empty()) {
    GTEST_SKIP() << "no ONNX node tests in " << data_dir()
                 << " (install Debian's libonnx-testdata, or set FUSEBOX_ONNX_NODE_TESTS_DIR)";
  }
  const int shard = GetParam();
  const Expectations expected = read_expectations(expectations_path());
  std::map<std::string, std::string> results;  // this shard's refused and wrong tests
  Totals totals;
  for (size_t i = shard; i < all_tests().size(); i += kShards) {
    const std::string& name = all_tests()[i];
    Result r = run_node_test(name);
    auto listed = expected.reasons.find(name);
    switch (r.outcome) {
      case Outcome::Passed:
        ++totals.passed, totals.add_time(name, r.compile_ms);
        break;
      case Outcome::Refused: ++totals.refused; break;
      case Outcome::Wrong: ++totals.wrong; break;
    }
    if (r.outcome != Outcome::Passed) results[name] = r.reason;
    if (write_mode()) continue;
    if (r.outcome == Outcome::Passed) {
      EXPECT_TRUE(listed == expected.reasons.end())
          << name << " now passes: remove its line from tests/" << kExpectationsFile;
    } else if (listed == expected.reasons.end()) {
      ADD_FAILURE() << name << ": " << r.reason << "\n  (not in tests/" << kExpectationsFile << ")";
    } else {
      EXPECT_EQ(listed->second, r.reason) << name << ": the reason in tests/" << kExpectationsFile << " changed";
    }
  }
  totals.print(" shard " + std::to_string(shard) + "/" + std::to_string(kShards));
  g_totals.passed += totals.passed;
  g_totals.refused += totals.refused;
  g_totals.wrong += totals.wrong;
  g_totals.add_time(totals.slowest, totals.slowest_ms);
  ++g_shards_run;

  if (write_mode()) {
    FileLock lock(expectations_path());
    Expectations e = read_expectations(expectations_path());
    for (size_t i = shard; i < all_tests().size(); i += kShards) e.reasons.erase(all_tests()[i]);
    for (const auto& [name, reason] : results) e.reasons[name] = reason;
    write_expectations(expectations_path(), e);
    std::printf("rewrote this shard's lines of %s\n", expectations_path().c_str());
  }
}

INSTANTIATE_TEST_SUITE_P(All, OnnxNodeTests, ::testing::Range(0, kShards));

// The file itself: sorted, no duplicates, every line `name: reason`, every name a node test.
TEST(OnnxNodeTestsExpectations, WellFormed) {
  if (all_tests().empty()) GTEST_SKIP() << "no ONNX node tests in " << data_dir();
  Expectations e = read_expectations(expectations_path());
  EXPECT_TRUE(std::is_sorted(e.order.begin(), e.order.end())) << "tests/" << kExpectationsFile << " is not sorted";
  EXPECT_EQ(e.order.size(), e.reasons.size()) << "tests/" << kExpectationsFile << " lists a test twice";
  for (const auto& [name, reason] : e.reasons) {
    EXPECT_FALSE(reason.empty()) << name << " has no reason";
    EXPECT_TRUE(std::binary_search(all_tests().begin(), all_tests().end(), name))
        << name << " is listed but is not a node test in " << data_dir();
  }
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
