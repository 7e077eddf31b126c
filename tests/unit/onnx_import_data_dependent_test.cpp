// ONNX ops whose output size depends on input values (src/onnx/convert_data_dependent.cpp):
// Compress, NonZero, Unique, NonMaxSuppression. Each runs with the size-fixing input as an
// initializer (fused on the CPU pipeline and unfused on the reference kernels) and as a graph input
// given at run time (OnnxExecutable, fused and unfused; Compress and NonZero bind their counts as
// the plan runs, the others specialise on the value), on random data with ties, and is compared
// with a direct computation written here. Refusals name the node and the input.
#ifndef FUSEBOX_HAVE_ONNX
#include <gtest/gtest.h>
TEST(OnnxImportDataDependent, Skipped) {
  GTEST_SKIP() << "the ONNX component is not built (install libonnx-dev libprotobuf-dev protobuf-compiler)";
}
#else

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <optional>
#include <random>
#include <set>

#include "onnx_run/onnx_executable.h"
#include "onnx_test_model.h"
#include "support/test_util.h"

namespace fusebox::testing {
namespace {

using TP = onnx::TensorProto;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// The model with every input given as a value: fused and unfused results must be bit-identical
// (gathers and folded constants); returns the unfused one.
std::vector<Array> run_constant_model(const OnnxModel& m, const NamedArrays& inputs) {
  return run_fused_and_unfused(m, inputs, [](const Array& f, const Array& u) {
    return f.same_data(u) ? ::testing::AssertionSuccess() : ::testing::AssertionFailure() << "fused and unfused differ";
  });
}

OnnxExecutable compile_executable(const OnnxModel& m, bool fused) {
  CompileOptions options;
  options.fuse = fused;
  use_backend(options, fused ? kCpu : kReference);
  Expected<OnnxExecutable> exe = OnnxExecutable::compile_bytes(m.bytes(), "test.onnx", options);
  EXPECT_TRUE(exe.has_value()) << exe.status().to_string();
  if (!exe) std::abort();  // every caller needs the executable
  return std::move(*exe);
}

// Runs the executables (fused, unfused) on `inputs`; the fused one first runs once with the
// inputs that stay run-time values poisoned (all bits set), so an unwritten output element shows.
// Both must agree bit for bit; returns the unfused results.
std::vector<Array> run_executables(const OnnxExecutable& fused, const OnnxExecutable& unfused, const NamedArrays& inputs) {
  Expected<std::vector<Array>> want = unfused.run(inputs);
  EXPECT_TRUE(want.has_value()) << want.status().to_string();
  if (!want) return {};
  NamedArrays poisoned = inputs;
  std::set<std::string> values = unfused.value_inputs();  // known once it has run
  for (auto& [name, a] : poisoned) {
    if (values.count(name)) continue;
    Array p(a.dtype(), a.shape());
    p.fill_bytes(0xFF);
    a = p;
  }
  (void)fused.run(poisoned);
  Expected<std::vector<Array>> got = fused.run(inputs);
  EXPECT_TRUE(got.has_value()) << got.status().to_string();
  if (!got) return *want;
  EXPECT_EQ(got->size(), want->size());
  for (size_t k = 0; k < got->size() && k < want->size(); ++k) {
    EXPECT_TRUE((*got)[k].same_data((*want)[k])) << "output " << k << ": " << (*got)[k].type_string() << " vs "
                                                 << (*want)[k].type_string();
  }
  return *want;
}

std::string run_error(const OnnxExecutable& exe, const NamedArrays& inputs) {
  Expected<std::vector<Array>> out = exe.run(inputs);
  EXPECT_FALSE(out.has_value()) << "the run was expected to fail";
  return out ? std::string() : out.status().to_string();
}

Array random_bools(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Array a(DType::Bool, {n});
  for (int64_t i = 0; i < n; ++i) a.data<bool>()[i] = rng() % 2 == 1;
  return a;
}

// ---- Compress ----

// numpy.compress, written out: slices of x along `axis` (or elements of the flattened x) whose
// condition entry is true; entries past the condition's end are dropped.
Array direct_compress(const Array& x, const Array& cond, std::optional<int> axis) {
  Array src = axis ? x : x.reshaped({x.numel()});
  int a = axis.value_or(0);
  std::vector<int64_t> shape = src.shape();
  int64_t outer = 1, inner = 1, size = shape[size_t(a)];
  for (int d = 0; d < src.rank(); ++d) {
    if (d < a) outer *= shape[size_t(d)];
    if (d > a) inner *= shape[size_t(d)];
  }
  std::vector<int64_t> keep;
  for (int64_t i = 0; i < std::min(size, cond.numel()); ++i) {
    if (cond.data<bool>()[i]) keep.push_back(i);
  }
  shape[size_t(a)] = int64_t(keep.size());
  Array out(src.dtype(), shape);
  int64_t k = 0;
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t s : keep) {
      for (int64_t i = 0; i < inner; ++i) out.set_f64(k++, src.get_f64((o * size + s) * inner + i));
    }
  }
  return out;
}

OnnxModel compress_model(const std::vector<OnnxDim>& x_dims, std::optional<int64_t> axis, const Array* cond,
                         int64_t cond_length) {
  OnnxModel m(11);
  m.input("x", x_dims);
  if (cond) m.initializer("cond", *cond);
  else m.input("cond", TP::BOOL, {cond_length});
  auto& n = m.node("Compress", {"x", "cond"}, {"y"}, "compress");
  if (axis) set_attr(n, "axis", *axis);
  m.output("y");
  return m;
}

TEST(OnnxImportDataDependent, CompressAlongEveryAxisMatchesDirectSelection) {
  Array x = random_array(DType::F32, {3, 4, 5}, 41);
  uint64_t seed = 100;
  for (std::optional<int64_t> axis : {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(1),
                                      std::optional<int64_t>(2), std::optional<int64_t>(-2)}) {
    int a = axis ? int(*axis < 0 ? *axis + 3 : *axis) : 0;
    int64_t size = axis ? x.shape()[size_t(a)] : x.numel();
    // Shorter than the axis, as long, and longer with a false tail (numpy.compress accepts it).
    for (int64_t length : {size - 2, size, size + 3}) {
      SCOPED_TRACE("axis " + (axis ? std::to_string(*axis) : std::string("none")) + " length " + std::to_string(length));
      Array cond = random_bools(length, ++seed);
      for (int64_t i = size; i < length; ++i) cond.data<bool>()[i] = false;
      std::vector<Array> out = run_constant_model(compress_model({3, 4, 5}, axis, &cond, length), {{"x", x}});
      ASSERT_EQ(out.size(), 1u);
      Array want = direct_compress(x, cond, axis ? std::optional<int>(a) : std::nullopt);
      EXPECT_TRUE(out[0].same_data(want)) << out[0].type_string() << " vs " << want.type_string();
    }
  }
}

TEST(OnnxImportDataDependent, CompressSelectingNothingIsEmpty) {
  Array x = random_array(DType::F32, {3, 4}, 42);
  Array none = array_of(DType::Bool, {4}, {0, 0, 0, 0});
  std::vector<Array> out = run_constant_model(compress_model({3, 4}, 1, &none, 4), {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{3, 0}));
}

// The condition as a graph input: counted as the plan runs (bind_symbols), so one plan serves
// every condition and batch size; an all-false condition gives an empty result.
TEST(OnnxImportDataDependent, CompressConditionGivenAtRunTime) {
  OnnxModel m = compress_model({"N", 6}, 1, nullptr, 6);
  OnnxExecutable fused = compile_executable(m, true), unfused = compile_executable(m, false);
  Array c1 = array_of(DType::Bool, {6}, {1, 0, 1, 1, 0, 0}), c2 = array_of(DType::Bool, {6}, {0, 1, 0, 0, 0, 1});
  Array none = array_of(DType::Bool, {6}, {0, 0, 0, 0, 0, 0});
  uint64_t seed = 50;
  for (const Array* c : {&c1, &c2, &none, &c1}) {
    for (int64_t batch : {2, 5}) {
      Array x = random_array(DType::F32, {batch, 6}, ++seed);
      std::vector<Array> out = run_executables(fused, unfused, {{"x", x}, {"cond", *c}});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(out[0].same_data(direct_compress(x, *c, 1)));
    }
  }
  EXPECT_TRUE(fused.value_inputs().empty());
  EXPECT_EQ(fused.specializations(), 1u);
  EXPECT_EQ(unfused.specializations(), 1u);
}

// Without an axis over symbolic sizes: flattened to one inferred size; a true entry past a run-time
// size is gather's run-time error.
TEST(OnnxImportDataDependent, CompressFlattensSymbolicSizes) {
  Array cond = array_of(DType::Bool, {7}, {0, 1, 1, 0, 1, 0, 1});
  OnnxModel m = compress_model({"N", "M"}, std::nullopt, &cond, 7);
  Array x = random_array(DType::F32, {2, 4}, 45);
  std::vector<Array> out = run_constant_model(m, {{"x", x}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].same_data(direct_compress(x, cond, std::nullopt)));
  Expected<Executable> exe = Session().compile(import_model(m), CompileOptions{});
  ASSERT_TRUE(exe.has_value()) << exe.status().to_string();
  Expected<std::vector<Array>> small = exe->run({{"x", random_array(DType::F32, {2, 3}, 46)}});
  ASSERT_FALSE(small.has_value());
  EXPECT_CONTAINS(small.status().to_string(), "index 6 at indices[3] is out of range for axis 0 of size 6");
}

// A condition too large to specialise on (more than 65536 elements) is no longer needed at import.
TEST(OnnxImportDataDependent, CompressConditionFromALargeInput) {
  const int64_t n = 70000;
  OnnxModel m = compress_model({n}, 0, nullptr, n);
  Array x = random_array(DType::F32, {n}, 43), cond = random_bools(n, 44);
  std::vector<Array> out =
      run_executables(compile_executable(m, true), compile_executable(m, false), {{"x", x}, {"cond", cond}});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].same_data(direct_compress(x, cond, 0)));
}

// A true entry past the axis (a condition longer than it) is gather's run error, named.
TEST(OnnxImportDataDependentErrors, CompressRunTimeConditionBeyondTheAxis) {
  OnnxModel m = compress_model({3, 4}, 1, nullptr, 6);
  OnnxExecutable exe = compile_executable(m, true);
  Array x = random_array(DType::F32, {3, 4}, 47);
  EXPECT_CONTAINS(run_error(exe, {{"x", x}, {"cond", array_of(DType::Bool, {6}, {1, 0, 0, 0, 0, 1})}}),
                  "index 5 at indices[1] is out of range for axis 1 of size 4");
  Expected<std::vector<Array>> ok =
      exe.run({{"x", x}, {"cond", array_of(DType::Bool, {6}, {0, 1, 0, 1, 0, 0})}});
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();  // the plan goes on with good values
  EXPECT_TRUE((*ok)[0].same_data(direct_compress(x, array_of(DType::Bool, {6}, {0, 1, 0, 1, 0, 0}), 1)));
}

TEST(OnnxImportDataDependentErrors, CompressBadConditions) {
  Array beyond = array_of(DType::Bool, {6}, {1, 0, 0, 0, 0, 1});
  EXPECT_CONTAINS(import_error(compress_model({3, 4}, 1, &beyond, 6)),
                  "Compress node 'compress': condition (input 1 'cond') selects index 5, beyond the size 4 of axis 1");
  Array ints = array_of(DType::I64, {4}, {1, 0, 1, 0});
  EXPECT_CONTAINS(import_error(compress_model({3, 4}, 1, &ints, 4)),
                  "Compress node 'compress': condition must be a 1-D bool tensor, got i64[4]");
  Array cond = array_of(DType::Bool, {2}, {1, 0});
  EXPECT_CONTAINS(import_error(compress_model({3, 4}, 2, &cond, 2)), "Compress node 'compress': axis 2 is out of range for rank 2");
}

// ---- NonZero ----

Array direct_non_zero(const Array& x) {
  std::vector<std::vector<int64_t>> coords;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.get_f64(i) == 0) continue;  // NaN compares unequal: non-zero
    std::vector<int64_t> c(x.shape().size());
    for (int64_t d = x.rank() - 1, rest = i; d >= 0; --d) {
      c[size_t(d)] = rest % x.shape()[size_t(d)];
      rest /= x.shape()[size_t(d)];
    }
    coords.push_back(c);
  }
  Array out(DType::I64, {x.rank(), int64_t(coords.size())});
  for (size_t k = 0; k < coords.size(); ++k) {
    for (int d = 0; d < x.rank(); ++d) out.set_i64(d * int64_t(coords.size()) + int64_t(k), coords[k][size_t(d)]);
  }
  return out;
}

TEST(OnnxImportDataDependent, NonZeroMatchesDirectScan) {
  // Integers in (-2, 2) rounded toward zero: about half are zero.
  Array ints = random_array(DType::I32, {3, 4, 2}, 61, -2, 2);
  Array floats = random_array(DType::F32, {5, 3}, 62);
  for (int64_t i : {1, 4, 9}) floats.set_f64(i, 0.0);
  floats.set_f64(6, -0.0), floats.set_f64(7, kNaN), floats.set_f64(8, -kInf);
  Array bools = random_bools(7, 63);
  for (const Array* x : {&ints, &floats, &bools}) {
    SCOPED_TRACE(x->type_string());
    Array want = direct_non_zero(*x);
    OnnxModel folded(13);
    folded.initializer("x", *x);
    folded.node("NonZero", {"x"}, {"y"});
    folded.output("y");
    std::vector<Array> out = run_constant_model(folded, {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].same_data(want));

    std::vector<OnnxDim> dims(x->shape().begin(), x->shape().end());
    OnnxModel given(13);
    given.input("x", onnx_type_of(x->dtype()), dims);
    given.node("NonZero", {"x"}, {"y"});
    given.output("y");
    OnnxExecutable fused = compile_executable(given, true), unfused = compile_executable(given, false);
    out = run_executables(fused, unfused, {{"x", *x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].same_data(want));
    // Other values, other counts (all zero included): the same plan.
    Array zeros(x->dtype(), x->shape());
    zeros.fill_bytes(0);
    Array other = x->clone();
    for (int64_t i = 0; i < other.numel(); i += 2) other.set_f64(i, 0.0);
    for (const Array* y : {&zeros, &other}) {
      out = run_executables(fused, unfused, {{"x", *y}});
      ASSERT_EQ(out.size(), 1u);
      EXPECT_TRUE(out[0].same_data(direct_non_zero(*y))) << out[0].type_string();
    }
    EXPECT_EQ(fused.specializations(), 1u);
    EXPECT_TRUE(fused.value_inputs().empty());
  }
}

// NonZero of a value computed at run time from data (not a graph input) runs too: one plan, each
// run counts the non-zero elements (Relu of random data: about half).
TEST(OnnxImportDataDependent, NonZeroOfAComputedValue) {
  OnnxModel m(13);
  m.input("x", {"N", 3});
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("NonZero", {"r"}, {"y"}, "nz");
  m.output("y");
  OnnxExecutable fused = compile_executable(m, true), unfused = compile_executable(m, false);
  for (uint64_t seed = 64; seed < 70; ++seed) {
    Array x = random_array(DType::F32, {int64_t(seed % 4 + 1), 3}, seed);
    Array relu = x.clone();
    for (int64_t i = 0; i < relu.numel(); ++i) relu.set_f64(i, std::max(relu.get_f64(i), 0.0));
    std::vector<Array> out = run_executables(fused, unfused, {{"x", x}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_TRUE(out[0].same_data(direct_non_zero(relu))) << out[0].type_string();
  }
  EXPECT_EQ(fused.specializations(), 1u);
}

// ---- Unique ----

struct UniqueWant {
  Array y;
  std::vector<int64_t> indices, inverse, counts;
};

// Unique written out with ordered maps (no NaN in x): the slices along `axis` as vectors,
// sorted = 1 in std::map's lexicographic order, sorted = 0 in order of first appearance.
UniqueWant direct_unique(const Array& x, std::optional<int> axis, bool sorted) {
  Array src = axis ? x : x.reshaped({x.numel()});
  int a = axis.value_or(0);
  int64_t outer = 1, inner = 1, count = src.shape()[size_t(a)];
  for (int d = 0; d < src.rank(); ++d) {
    if (d < a) outer *= src.shape()[size_t(d)];
    if (d > a) inner *= src.shape()[size_t(d)];
  }
  auto slice = [&](int64_t s) {
    std::vector<double> v;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t i = 0; i < inner; ++i) v.push_back(src.get_f64((o * count + s) * inner + i));
    }
    return v;
  };
  std::vector<std::vector<double>> keys;  // unique slices in output order
  std::map<std::vector<double>, int64_t> first;
  for (int64_t s = 0; s < count; ++s) {
    if (first.emplace(slice(s), s).second && !sorted) keys.push_back(slice(s));
  }
  if (sorted) {
    for (const auto& entry : first) keys.push_back(entry.first);
  }
  UniqueWant w;
  for (const auto& k : keys) w.indices.push_back(first[k]);
  w.counts.assign(keys.size(), 0);
  for (int64_t s = 0; s < count; ++s) {
    int64_t u = std::find(keys.begin(), keys.end(), slice(s)) - keys.begin();
    w.inverse.push_back(u);
    ++w.counts[size_t(u)];
  }
  std::vector<int64_t> shape = src.shape();
  shape[size_t(a)] = int64_t(keys.size());
  w.y = Array(src.dtype(), shape);
  for (int64_t o = 0; o < outer; ++o) {
    for (size_t u = 0; u < keys.size(); ++u) {
      for (int64_t i = 0; i < inner; ++i) {
        w.y.set_f64((o * int64_t(keys.size()) + int64_t(u)) * inner + i, keys[u][size_t(o * inner + i)]);
      }
    }
  }
  return w;
}

// Whole numbers in [-2, 2] of any dtype: repeated elements.
Array few_values(DType dtype, const std::vector<int64_t>& shape, uint64_t seed) {
  Array ints = random_array(DType::I32, shape, seed, -3, 3), x(dtype, shape);
  for (int64_t i = 0; i < x.numel(); ++i) x.set_f64(i, ints.get_f64(i));
  return x;
}

// x of `shape` whose slices along `axis` repeat: each is one of three random patterns.
Array repeating_slices(DType dtype, const std::vector<int64_t>& shape, int axis, uint64_t seed) {
  std::mt19937_64 rng(seed);
  int64_t outer = 1, inner = 1, count = shape[size_t(axis)];
  for (int d = 0; d < int(shape.size()); ++d) {
    if (d < axis) outer *= shape[size_t(d)];
    if (d > axis) inner *= shape[size_t(d)];
  }
  // Patterns of few values often share leading elements: the order looks past them.
  Array patterns = few_values(dtype, {3, outer * inner}, seed);
  Array x(dtype, shape);
  for (int64_t s = 0; s < count; ++s) {
    int64_t p = int64_t(rng() % 3);
    for (int64_t k = 0; k < outer * inner; ++k) {
      x.set_f64((k / inner * count + s) * inner + k % inner, patterns.get_f64(p * outer * inner + k));
    }
  }
  return x;
}

OnnxModel unique_model(const std::vector<OnnxDim>& dims, int32_t type, std::optional<int64_t> axis, int64_t sorted,
                       const Array* x) {
  OnnxModel m(11);
  if (x) m.initializer("x", *x);
  else m.input("x", type, dims);
  auto& n = m.node("Unique", {"x"}, {"y", "indices", "inverse", "counts"}, "unique");
  if (axis) set_attr(n, "axis", *axis);
  set_attr(n, "sorted", sorted);
  for (const char* o : {"y", "indices", "inverse", "counts"}) m.output(o);
  return m;
}

void expect_unique(const std::vector<Array>& out, const UniqueWant& w) {
  ASSERT_EQ(out.size(), 4u);
  EXPECT_TRUE(out[0].same_data(w.y)) << out[0].type_string() << " vs " << w.y.type_string();
  EXPECT_EQ(to_ints(out[1]), w.indices);
  EXPECT_EQ(to_ints(out[2]), w.inverse);
  EXPECT_EQ(to_ints(out[3]), w.counts);
}

TEST(OnnxImportDataDependent, UniqueMatchesDirectComputation) {
  // Every axis holds more slices than there are patterns: each case has repeats.
  const std::vector<int64_t> shape{4, 5, 6};
  uint64_t seed = 70;
  for (DType dtype : {DType::F32, DType::I64}) {
    for (std::optional<int64_t> axis : {std::optional<int64_t>(), std::optional<int64_t>(0), std::optional<int64_t>(1),
                                        std::optional<int64_t>(-1)}) {
      int a = axis ? int(*axis < 0 ? *axis + 3 : *axis) : 1;
      // Without an axis: elements from few values repeat; with one, whole slices repeat.
      Array x = axis ? repeating_slices(dtype, shape, a, ++seed) : few_values(dtype, shape, ++seed);
      for (int64_t sorted : {0, 1}) {
        SCOPED_TRACE(x.type_string() + " axis " + (axis ? std::to_string(*axis) : std::string("none")) + " sorted " +
                     std::to_string(sorted));
        UniqueWant w = direct_unique(x, axis ? std::optional<int>(a) : std::nullopt, sorted != 0);
        ASSERT_LT(w.indices.size(), size_t(axis ? shape[size_t(a)] : x.numel()));  // the data has repeats
        expect_unique(run_constant_model(unique_model({}, 0, axis, sorted, &x), {}), w);
        OnnxModel given = unique_model({4, 5, 6}, onnx_type_of(dtype), axis, sorted, nullptr);
        OnnxExecutable fused = compile_executable(given, true), unfused = compile_executable(given, false);
        expect_unique(run_executables(fused, unfused, {{"x", x}}), w);
        // Another input with another number of unique slices: the same plan.
        Array other =
            axis ? repeating_slices(dtype, shape, a, seed + 1000) : few_values(dtype, shape, seed + 1000);
        expect_unique(run_executables(fused, unfused, {{"x", other}}),
                      direct_unique(other, axis ? std::optional<int>(a) : std::nullopt, sorted != 0));
        EXPECT_EQ(fused.specializations(), 1u);
        EXPECT_TRUE(fused.value_inputs().empty());
      }
    }
  }
}

// NaN equals NaN and sorts last; -0 equals 0, and Y holds the first occurrence's value.
TEST(OnnxImportDataDependent, UniqueNaNAndSignedZero) {
  Array x = array_f32({7}, {kNaN, 1, -0.0f, kNaN, 0, -kInf, 1});
  std::vector<Array> out = run_constant_model(unique_model({}, 0, std::nullopt, 1, &x), {});
  UniqueWant w{array_f32({4}, {-kInf, -0.0f, 1, kNaN}), {5, 2, 1, 0}, {3, 2, 1, 3, 1, 0, 2}, {1, 2, 2, 2}};
  expect_unique(out, w);
  out = run_constant_model(unique_model({}, 0, std::nullopt, 0, &x), {});
  w = UniqueWant{array_f32({4}, {kNaN, 1, -0.0f, -kInf}), {0, 1, 2, 5}, {0, 1, 2, 0, 2, 3, 1}, {2, 2, 2, 1}};
  expect_unique(out, w);
  // The same input given at run time (unique_select's kernel).
  OnnxModel given = unique_model({7}, TP::FLOAT, std::nullopt, 0, nullptr);
  expect_unique(
      run_executables(compile_executable(given, true), compile_executable(given, false), {{"x", x}}), w);
}

// Unique of a value computed at run time from data (no axis: the flattened elements), one plan
// for every input and batch size: rounded values repeat.
TEST(OnnxImportDataDependent, UniqueOfAComputedValue) {
  OnnxModel m(11);
  m.input("x", {"N", 6});
  m.node("Round", {"x"}, {"r"}, "round");
  m.node("Unique", {"r"}, {"y", "indices", "inverse", "counts"}, "u");
  for (const char* o : {"y", "indices", "inverse", "counts"}) m.output(o);
  OnnxExecutable fused = compile_executable(m, true), unfused = compile_executable(m, false);
  for (uint64_t seed = 130; seed < 134; ++seed) {
    Array x = random_array(DType::F32, {int64_t(seed % 3 + 1), 6}, seed, -3, 3);
    Array rounded = x.clone();
    for (int64_t i = 0; i < x.numel(); ++i) rounded.set_f64(i, std::nearbyint(x.get_f64(i)));
    expect_unique(run_executables(fused, unfused, {{"x", x}}), direct_unique(rounded, std::nullopt, true));
  }
  EXPECT_EQ(fused.specializations(), 1u);
}

TEST(OnnxImportDataDependentErrors, UniqueBadAttributes) {
  Array x = array_f32({3}, {1, 2, 1});
  EXPECT_CONTAINS(import_error(unique_model({}, 0, std::nullopt, 2, &x)),
                  "Unique node 'unique': attribute 'sorted' must be 0 or 1, got 2");
  EXPECT_CONTAINS(import_error(unique_model({}, 0, 1, 1, &x)), "Unique node 'unique': axis 1 is out of range for rank 1");
}

// ---- NonMaxSuppression ----

struct NmsCase {
  bool center = false;
  std::optional<int64_t> max_out;
  std::optional<float> iou, score;
};

// The selection written out: per batch and class, repeatedly take the best remaining candidate
// (highest score, lowest index on ties) and keep it unless a kept box overlaps it by IoU above
// the threshold. Boxes become [x0, x1, y0, y1] spans first; f32 like ONNX's reference.
std::vector<int64_t> direct_nms(const Array& boxes, const Array& scores, const NmsCase& c) {
  const int64_t batches = boxes.shape()[0], count = boxes.shape()[1], classes = scores.shape()[1];
  auto spans = [&](int64_t b, int64_t i) {
    const float* p = boxes.data<float>() + (b * count + i) * 4;
    std::array<float, 4> s;
    if (c.center) s = {p[0] - p[2] / 2, p[0] + p[2] / 2, p[1] - p[3] / 2, p[1] + p[3] / 2};
    else s = {std::min(p[1], p[3]), std::max(p[1], p[3]), std::min(p[0], p[2]), std::max(p[0], p[2])};
    return s;
  };
  auto iou_above = [&](int64_t b, int64_t i, int64_t j) {
    std::array<float, 4> u = spans(b, i), v = spans(b, j);
    float w = std::min(u[1], v[1]) - std::max(u[0], v[0]), h = std::min(u[3], v[3]) - std::max(u[2], v[2]);
    if (w <= 0 || h <= 0) return false;
    float inter = w * h, au = (u[1] - u[0]) * (u[3] - u[2]), av = (v[1] - v[0]) * (v[3] - v[2]);
    return inter / (au + av - inter) > c.iou.value_or(0.0f);
  };
  std::vector<int64_t> rows;
  for (int64_t b = 0; b < batches; ++b) {
    for (int64_t k = 0; k < classes; ++k) {
      const float* sc = scores.data<float>() + (b * classes + k) * count;
      std::vector<bool> left(static_cast<size_t>(count));
      for (int64_t i = 0; i < count; ++i) left[size_t(i)] = !c.score || sc[i] > *c.score;
      std::vector<int64_t> kept;
      while (int64_t(kept.size()) < c.max_out.value_or(0)) {
        int64_t best = -1;
        for (int64_t i = 0; i < count; ++i) {
          if (left[size_t(i)] && (best < 0 || sc[i] > sc[best])) best = i;
        }
        if (best < 0) break;
        left[size_t(best)] = false;
        if (std::any_of(kept.begin(), kept.end(), [&](int64_t j) { return iou_above(b, best, j); })) continue;
        kept.push_back(best);
        rows.insert(rows.end(), {b, k, best});
      }
    }
  }
  return rows;
}

OnnxModel nms_model(const NmsCase& c, const std::vector<int64_t>& boxes, const std::vector<int64_t>& scores,
                    const NamedArrays* constants) {
  OnnxModel m(11);
  std::vector<std::string> inputs{"boxes", "scores"};
  auto add = [&](const std::string& name, int32_t type, const std::vector<int64_t>& dims) {
    if (constants) m.initializer(name, constants->at(name));
    else m.input(name, type, std::vector<OnnxDim>(dims.begin(), dims.end()));
  };
  add("boxes", TP::FLOAT, boxes);
  add("scores", TP::FLOAT, scores);
  // Optional inputs: absent ones are empty names when a later one is present.
  auto optional = [&](const std::string& name, bool present, int32_t type) {
    if (present) add(name, type, {1});
    inputs.push_back(present ? name : "");
  };
  optional("max_output_boxes_per_class", bool(c.max_out), TP::INT64);
  optional("iou_threshold", bool(c.iou), TP::FLOAT);
  optional("score_threshold", bool(c.score), TP::FLOAT);
  while (inputs.back().empty()) inputs.pop_back();
  auto& n = m.node("NonMaxSuppression", inputs, {"selected"}, "nms");
  if (c.center) set_attr(n, "center_point_box", int64_t(1));
  m.output("selected");
  return m;
}

NamedArrays nms_inputs(const NmsCase& c, const Array& boxes, const Array& scores) {
  NamedArrays in{{"boxes", boxes}, {"scores", scores}};
  if (c.max_out) in.emplace("max_output_boxes_per_class", i64s({*c.max_out}));
  if (c.iou) in.emplace("iou_threshold", f32s({*c.iou}));
  if (c.score) in.emplace("score_threshold", f32s({*c.score}));
  return in;
}

// Boxes of 12 spread over a small area (many overlaps), corners in random order for the corner
// format; scores from 5 levels, so that ties are frequent.
std::pair<Array, Array> random_boxes(bool center, uint64_t seed) {
  const int64_t batches = 2, classes = 3, count = 12;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> pos(0, 3), size(0.5f, 2);
  Array boxes(DType::F32, {batches, count, 4}), scores(DType::F32, {batches, classes, count});
  float* p = boxes.data<float>();
  for (int64_t i = 0; i < batches * count; ++i, p += 4) {
    float y = pos(rng), x = pos(rng), h = size(rng), w = size(rng);
    if (center) {
      p[0] = x, p[1] = y, p[2] = w, p[3] = h;
    } else {
      bool flip_y = rng() % 2, flip_x = rng() % 2;
      p[0] = flip_y ? y + h : y, p[2] = flip_y ? y : y + h;
      p[1] = flip_x ? x + w : x, p[3] = flip_x ? x : x + w;
    }
  }
  for (int64_t i = 0; i < scores.numel(); ++i) scores.data<float>()[i] = float(1 + rng() % 5) / 5.0f;
  return {boxes, scores};
}

TEST(OnnxImportDataDependent, NonMaxSuppressionMatchesDirectSelection) {
  std::vector<NmsCase> cases = {
      {false, 100, 0.5f, std::nullopt}, {false, 3, 0.3f, 0.4f}, {false, 1, 0.0f, 0.2f},
      {true, 100, 0.5f, 0.5f},          {true, 4, 0.1f, std::nullopt}, {true, 2, std::nullopt, 0.0f},
      {false, 5, std::nullopt, std::nullopt},
  };
  uint64_t seed = 80;
  for (const NmsCase& c : cases) {
    SCOPED_TRACE("center " + std::to_string(c.center) + " max " + std::to_string(c.max_out.value_or(-1)) + " iou " +
                 std::to_string(c.iou.value_or(-1)) + " score " + std::to_string(c.score.value_or(-1)));
    auto [boxes, scores] = random_boxes(c.center, ++seed);
    std::vector<int64_t> want = direct_nms(boxes, scores, c);
    ASSERT_FALSE(want.empty());
    NamedArrays in = nms_inputs(c, boxes, scores);
    std::vector<Array> out = run_constant_model(nms_model(c, boxes.shape(), scores.shape(), &in), {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{int64_t(want.size() / 3), 3}));
    EXPECT_EQ(to_ints(out[0]), want);
    OnnxModel given = nms_model(c, boxes.shape(), scores.shape(), nullptr);
    out = run_executables(compile_executable(given, true), compile_executable(given, false), in);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(to_ints(out[0]), want);
  }
}

// Equal scores keep box order; identical boxes suppress each other (IoU 1); touching boxes do not
// (IoU 0 is not above 0), nor does an IoU equal to the threshold; without
// max_output_boxes_per_class nothing is selected ([0, 3]).
TEST(OnnxImportDataDependent, NonMaxSuppressionTiesAndDefaults) {
  Array boxes = array_f32({1, 4, 4}, {0, 0, 1, 1, 0, 1, 1, 2, 0, 0, 1, 1, 5, 5, 6, 6});
  Array scores = array_f32({1, 1, 4}, {0.5f, 0.5f, 0.5f, 0.5f});
  NmsCase c{false, 10, 0.0f, std::nullopt};
  NamedArrays in = nms_inputs(c, boxes, scores);
  std::vector<Array> out = run_constant_model(nms_model(c, {1, 4, 4}, {1, 1, 4}, &in), {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(to_ints(out[0]), (std::vector<int64_t>{0, 0, 0, 0, 0, 1, 0, 0, 3}));
  // [0,0,1,1] lies inside [0,0,1,2]: IoU exactly 0.5.
  Array nested = array_f32({1, 2, 4}, {0, 0, 1, 2, 0, 0, 1, 1}), two = array_f32({1, 1, 2}, {0.9f, 0.8f});
  for (float iou : {0.5f, 0.49f}) {
    NmsCase t{false, 10, iou, std::nullopt};
    in = nms_inputs(t, nested, two);
    out = run_constant_model(nms_model(t, {1, 2, 4}, {1, 1, 2}, &in), {});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(to_ints(out[0]), iou == 0.5f ? std::vector<int64_t>({0, 0, 0, 0, 0, 1}) : std::vector<int64_t>({0, 0, 0}));
  }
  NmsCase none{false, std::nullopt, 0.5f, std::nullopt};
  in = nms_inputs(none, boxes, scores);
  out = run_constant_model(nms_model(none, {1, 4, 4}, {1, 1, 4}, &in), {});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].shape(), (std::vector<int64_t>{0, 3}));
}

TEST(OnnxImportDataDependentErrors, NonMaxSuppressionBadInputs) {
  NmsCase c{false, 3, 0.5f, std::nullopt};
  NamedArrays in = nms_inputs(c, random_array(DType::F32, {1, 4, 3}, 90), random_array(DType::F32, {1, 2, 4}, 91));
  EXPECT_CONTAINS(import_error(nms_model(c, {1, 4, 3}, {1, 2, 4}, &in)),
                  "NonMaxSuppression node 'nms': boxes must be f32[num_batches, spatial_dimension, 4], got f32[1,4,3]");
  in = nms_inputs(c, random_array(DType::F32, {1, 4, 4}, 92), random_array(DType::F32, {1, 2, 5}, 93));
  EXPECT_CONTAINS(import_error(nms_model(c, {1, 4, 4}, {1, 2, 5}, &in)),
                  "NonMaxSuppression node 'nms': scores must be f32[num_batches, num_classes, spatial_dimension] "
                  "matching boxes f32[1,4,4], got f32[1,2,5]");
  in["max_output_boxes_per_class"] = i64s({1, 2});
  in["scores"] = random_array(DType::F32, {1, 2, 4}, 94);
  EXPECT_CONTAINS(import_error(nms_model(c, {1, 4, 4}, {1, 2, 4}, &in)),
                  "NonMaxSuppression node 'nms': max_output_boxes_per_class must hold one value, got i64[2]");
  // The same values given at run time (an input of any length): the run fails naming the node,
  // and the plan goes on.
  OnnxModel given(11);
  given.input("boxes", {1, 4, 4});
  given.input("scores", {1, 2, 4});
  given.input("max_output_boxes_per_class", TP::INT64, {"M"});
  given.node("NonMaxSuppression", {"boxes", "scores", "max_output_boxes_per_class"}, {"selected"}, "nms");
  given.output("selected");
  OnnxExecutable exe = compile_executable(given, true);
  in.erase("iou_threshold");
  const std::string e = run_error(exe, in);
  EXPECT_CONTAINS(e, "nms_select");
  EXPECT_CONTAINS(e, "max_output_boxes_per_class must hold one integer value or none, got i64[2]");
  in["max_output_boxes_per_class"] = i64s({2});
  Expected<std::vector<Array> > ok = exe.run(in);
  ASSERT_TRUE(ok.has_value()) << ok.status().to_string();
  EXPECT_EQ(to_ints((*ok)[0]),
            direct_nms(in["boxes"], in["scores"], NmsCase{false, 2, std::nullopt, std::nullopt}));
  // A type that cannot fit is refused at import, naming the node.
  OnnxModel ints(11);
  ints.input("boxes", TP::INT64, {1, 4, 4});
  ints.input("scores", {1, 2, 4});
  ints.node("NonMaxSuppression", {"boxes", "scores"}, {"selected"}, "nms");
  ints.output("selected");
  EXPECT_CONTAINS(import_error(ints), "NonMaxSuppression node 'nms'");
  EXPECT_CONTAINS(import_error(ints), "boxes must be f32[batches, count, 4], got i64[1,4,4]");
}

// Scores computed from data at run time (a network's sigmoid): selected as the plan runs, one plan
// for every set of scores and every batch size.
TEST(OnnxImportDataDependent, NonMaxSuppressionOverScoresComputedAtRunTime) {
  NmsCase c{false, 3, 0.4f, 0.55f};
  OnnxModel m(11);
  m.input("boxes", {"B", 12, 4});
  m.input("logits", {"B", 3, 12});
  m.initializer("max_output_boxes_per_class", i64s({3}));
  m.initializer("iou_threshold", f32s({0.4f}));
  m.initializer("score_threshold", f32s({0.55f}));
  m.node("Sigmoid", {"logits"}, {"scores"}, "sig");
  m.node("NonMaxSuppression",
         {"boxes", "scores", "max_output_boxes_per_class", "iou_threshold", "score_threshold"}, {"selected"},
         "nms");
  m.output("selected");
  OnnxExecutable fused = compile_executable(m, true), unfused = compile_executable(m, false);
  for (uint64_t seed = 120; seed < 126; ++seed) {
    auto [boxes, scores] = random_boxes(false, seed);
    if (seed % 2) {  // batch 1: the first image only
      auto first = [](const Array& a) {
        std::vector<int64_t> shape = a.shape();
        shape[0] = 1;
        Array f(a.dtype(), shape);
        std::memcpy(f.raw(), a.raw(), f.nbytes());
        return f;
      };
      boxes = first(boxes), scores = first(scores);
    }
    // logit(s) in f32, then sigmoid in the model: compare with the sigmoid the reference computes.
    Array logits(DType::F32, scores.shape()), sig(DType::F32, scores.shape());
    for (int64_t i = 0; i < scores.numel(); ++i) {
      const float s = float(scores.get_f64(i)) * 0.98f + 0.01f;
      logits.set_f64(i, double(std::log(s / (1 - s))));
    }
    std::vector<Array> sigmoid = run_op(Op::Sigmoid, {logits});
    ASSERT_EQ(sigmoid.size(), 1u);
    std::vector<int64_t> want = direct_nms(boxes, sigmoid[0], c);
    std::vector<Array> out = run_executables(fused, unfused, {{"boxes", boxes}, {"logits", logits}});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(to_ints(out[0]), want) << "seed " << seed;
  }
  EXPECT_EQ(fused.specializations(), 1u);
  EXPECT_TRUE(fused.value_inputs().empty());
}

}  // namespace
}  // namespace fusebox::testing

#endif  // FUSEBOX_HAVE_ONNX
