// Sizes known only from data (ir/bind_symbols.h): a bind_symbols node binds symbols from a
// tensor's values as the plan runs, and the nodes after it are planned with them. Each case runs
// the fused CPU plan and the reference backend on random data against results computed here.
#include <algorithm>

#include "fusion/fuse.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "runtime/session.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::random_array;

#define EXPECT_CONTAINS(message, part) \
  EXPECT_NE(std::string(message).find(part), std::string::npos) << (message)

Graph parse_one(const std::string& text) {
  Expected<Module> m = parse_module(text);
  EXPECT_TRUE(m) << m.status().to_string();
  return m ? m->functions[0] : Graph();
}

Executable compile(const Graph& g, bool reference) {
  CompileOptions o;
  if (reference) {
    o.fuse = false;
    o.backend = "reference";
  }
  Expected<Executable> exe = Session(0).compile(g, o);
  EXPECT_TRUE(exe) << exe.status().to_string();
  return *exe;
}

// The sizes are computed from data (a cast of f32 values), x is reshaped to them, then two
// element-wise steps that fuse into one region over the run-time shape.
const char* kReshapeFromData = R"(func @f(%x: f32[N,12], %s: f32[2]) -> f32[R,C] {
  %0 = cast %s {to = i64} : i64[2]
  %1 = bind_symbols %x, %0 {symbols = [R,C]} : f32[N,12]
  %2 = reshape %1 {shape = [R,C]} : f32[R,C]
  %3 = relu %2 : f32[R,C]
  %4 = mul %3, %2 : f32[R,C]
  return %4
}
)";

Array sizes(float r, float c) { return Array::from_vector(DType::F32, {2}, std::vector<float>{r, c}); }

// relu(x) * x at x's elements, shaped [r, c].
Array expected(const Array& x, int64_t r, int64_t c) {
  Array e(DType::F32, {r, c});
  for (int64_t i = 0; i < e.numel(); ++i) {
    const double v = x.get_f64(i);
    e.set_f64(i, float(float(v > 0 ? v : 0) * float(v)));
  }
  return e;
}

TEST(RunTimeSizes, ReshapeToSizesComputedFromData) {
  Graph g = parse_one(kReshapeFromData);
  for (bool reference : {false, true}) {
    Executable exe = compile(g, reference);
    if (!reference) {
      EXPECT_EQ(testing::count_op(exe.graph(), Op::ElementwiseRegion), 1u)
          << "relu and mul fuse over the run-time shape";
    }
    struct Case {
      int64_t n, r, c;
    };
    for (Case k : {Case{2, 4, 6}, Case{2, 3, 8}, Case{2, 24, 1}, Case{3, 6, 6}, Case{2, 4, 6}}) {
      Array x = random_array(DType::F32, {k.n, 12}, uint64_t(k.n * 100 + k.r));
      Expected<std::vector<Array>> out = exe.run(std::vector<Array>{x, sizes(float(k.r), float(k.c))});
      ASSERT_TRUE(out) << out.status().to_string();
      EXPECT_TRUE((*out)[0].same_data(expected(x, k.r, k.c)))
          << (reference ? "reference " : "fused ") << (*out)[0].type_string() << " for " << k.r << "x" << k.c;
    }
  }
}

TEST(RunTimeSizes, ShapePlansAreKeptPerBoundValues) {
  Executable exe = compile(parse_one(kReshapeFromData), false);
  Array x = random_array(DType::F32, {2, 12}, 7);
  ASSERT_TRUE(exe.run(std::vector<Array>{x, sizes(4, 6)}));
  EXPECT_EQ(exe.stats().shape_plans, 2u);  // up to the bind, then after it with R=4, C=6
  ASSERT_TRUE(exe.run(std::vector<Array>{x, sizes(4, 6)}));
  EXPECT_EQ(exe.stats().shape_plans, 2u);  // the same sizes and values: nothing inferred
  ASSERT_TRUE(exe.run(std::vector<Array>{x, sizes(3, 8)}));
  EXPECT_EQ(exe.stats().shape_plans, 3u);  // new values: only the part after the bind
}

TEST(RunTimeSizes, BadValuesAreErrorsNamingTheNode) {
  Executable exe = compile(parse_one(kReshapeFromData), false);
  Array x = random_array(DType::F32, {2, 12}, 8);
  Expected<std::vector<Array>> out = exe.run(std::vector<Array>{x, sizes(5, 5)});
  ASSERT_FALSE(out);
  EXPECT_CONTAINS(out.status().message(), "%2 = reshape");
  EXPECT_CONTAINS(out.status().message(), "cannot reshape f32[2,12] (24 elements) to [5,5]");
  out = exe.run(std::vector<Array>{x, sizes(-4, -6)});
  ASSERT_FALSE(out);
  EXPECT_CONTAINS(out.status().message(), "%1 = bind_symbols");
  EXPECT_CONTAINS(out.status().message(), "R would be -4, a negative size");
  // The plan still runs with good values after the errors.
  out = exe.run(std::vector<Array>{x, sizes(6, 4)});
  ASSERT_TRUE(out) << out.status().to_string();
  EXPECT_TRUE((*out)[0].same_data(expected(x, 6, 4)));
}

// rule = "reshape": a target with ONNX's conventions, 0 keeping x's size and -1 the rest.
TEST(RunTimeSizes, ReshapeRuleKeepsZerosAndInfersMinusOne) {
  Graph g = parse_one(R"(func @f(%x: f32[N,12], %v: i64[3]) -> f32[A,B,C] {
  %0 = bind_symbols %x, %v {symbols = [A,B,C], rule = "reshape"} : f32[N,12]
  %1 = reshape %0 {shape = [A,B,C]} : f32[A,B,C]
  return %1
}
)");
  for (bool reference : {false, true}) {
    Executable exe = compile(g, reference);
    Array x = random_array(DType::F32, {4, 12}, 9);
    auto run = [&](std::vector<int64_t> v) {
      return exe.run(std::vector<Array>{x, Array::from_vector(DType::I64, {3}, v)});
    };
    Expected<std::vector<Array>> out = run({0, -1, 2});
    ASSERT_TRUE(out) << out.status().to_string();
    EXPECT_TRUE((*out)[0].same_data(x.reshaped({4, 6, 2})));
    out = run({2, 0, -1});
    ASSERT_TRUE(out) << out.status().to_string();
    EXPECT_TRUE((*out)[0].same_data(x.reshaped({2, 12, 2})));
    out = run({-1, -1, 2});
    ASSERT_FALSE(out);
    EXPECT_CONTAINS(out.status().message(), "target [-1,-1,2] has more than one -1");
    out = run({5, -1, 1});
    ASSERT_FALSE(out);
    EXPECT_CONTAINS(out.status().message(), "target [5,-1,1] does not fit 48 elements");
  }
}

// A constant filled to sizes read from an i32 scalar and vector (ONNX's ConstantOfShape).
TEST(RunTimeSizes, ExpandAScalarToBoundSizes) {
  Graph g = parse_one(R"(func @f(%v: i32[2], %y: f32[M]) -> f32[A,B] {
  %0 = constant {value = dense<f32[]: [1.5]>} : f32[]
  %1 = bind_symbols %0, %v {symbols = [A,B]} : f32[]
  %2 = expand %1 {shape = [A,B]} : f32[A,B]
  %3 = add %2, %y : f32[A,B]
  return %3
}
)");
  for (bool reference : {false, true}) {
    Executable exe = compile(g, reference);
    Array y = random_array(DType::F32, {5}, 10);
    Expected<std::vector<Array>> out =
        exe.run(std::vector<Array>{Array::from_vector(DType::I32, {2}, std::vector<int32_t>{3, 5}), y});
    ASSERT_TRUE(out) << out.status().to_string();
    ASSERT_EQ((*out)[0].shape(), (std::vector<int64_t>{3, 5}));
    for (int64_t i = 0; i < 15; ++i) EXPECT_EQ((*out)[0].get_f64(i), double(1.5f + float(y.get_f64(i % 5))));
    out = exe.run(std::vector<Array>{Array::from_vector(DType::I32, {2}, std::vector<int32_t>{3, 4}), y});
    ASSERT_FALSE(out);  // [3,4] + [5] does not broadcast
  }
}

// y[x > 0.25] as exporters write it: the mask's true entries counted as the plan runs (rule
// count_nonzero), their coordinates (nonzero), gathered from y, then two element-wise steps over
// the run-time count that fuse into one region.
const char* kMaskedSelect = R"(func @f(%x: f32[N,M], %y: f32[N,M]) -> (f32[K], i64[2,K]) {
  %0 = constant {value = dense<f32[]: [0.25]>} : f32[]
  %1 = gt %x, %0 : bool[N,M]
  %2 = bind_symbols %1, %1 {symbols = [K], rule = "count_nonzero"} : bool[N,M]
  %3 = nonzero %2 {count = [K]} : i64[2,K]
  %4 = transpose %3 {perm = [1, 0]} : i64[K,2]
  %5 = gather_nd %y, %4 : f32[K]
  %6 = relu %5 : f32[K]
  %7 = mul %6, %5 : f32[K]
  return %7, %3
}
)";

TEST(RunTimeSizes, MaskedSelectCountsAsThePlanRuns) {
  Graph g = parse_one(kMaskedSelect);
  for (bool reference : {false, true}) {
    Executable exe = compile(g, reference);
    if (!reference) {
      EXPECT_EQ(testing::count_op(exe.graph(), Op::ElementwiseRegion), 1u)
          << "relu and mul fuse over the run-time count";
    }
    for (uint64_t seed = 20; seed < 26; ++seed) {
      const int64_t n = int64_t(seed % 3) + 1, m = 7;
      Array x = random_array(DType::F32, {n, m}, seed), y = random_array(DType::F32, {n, m}, seed + 100);
      if (seed == 25) x = random_array(DType::F32, {n, m}, seed, -1, 0.25);  // nothing selected
      std::vector<int64_t> rows, cols;
      std::vector<float> want;
      for (int64_t i = 0; i < n * m; ++i) {
        if (!(float(x.get_f64(i)) > 0.25f)) continue;
        const float v = float(y.get_f64(i));
        rows.push_back(i / m), cols.push_back(i % m), want.push_back(float(std::max(v, 0.0f) * v));
      }
      const int64_t k = int64_t(want.size());
      Expected<std::vector<Array>> out = exe.run(std::vector<Array>{x, y});
      ASSERT_TRUE(out) << out.status().to_string();
      SCOPED_TRACE((reference ? "reference, seed " : "fused, seed ") + std::to_string(seed));
      ASSERT_EQ((*out)[0].shape(), (std::vector<int64_t>{k}));
      ASSERT_EQ((*out)[1].shape(), (std::vector<int64_t>{2, k}));
      for (int64_t i = 0; i < k; ++i) {
        EXPECT_EQ((*out)[0].get_f64(i), double(want[size_t(i)]));
        EXPECT_EQ((*out)[1].get_i64(i), rows[size_t(i)]);
        EXPECT_EQ((*out)[1].get_i64(k + i), cols[size_t(i)]);
      }
    }
  }
}

// The count keys the plan of the nodes after the bind (not the mask's bytes): another mask with
// the same count infers nothing.
TEST(RunTimeSizes, ShapePlansAreKeptPerCount) {
  Executable exe = compile(parse_one(kMaskedSelect), false);
  Array y = random_array(DType::F32, {2, 7}, 30);
  auto mask = [](std::vector<float> v) { return Array::from_vector(DType::F32, {2, 7}, v); };
  ASSERT_TRUE(exe.run(std::vector<Array>{mask({1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1}), y}));
  EXPECT_EQ(exe.stats().shape_plans, 2u);
  ASSERT_TRUE(exe.run(std::vector<Array>{mask({0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}), y}));
  EXPECT_EQ(exe.stats().shape_plans, 2u);  // K = 3 again
  ASSERT_TRUE(exe.run(std::vector<Array>{mask({0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1}), y}));
  EXPECT_EQ(exe.stats().shape_plans, 3u);  // K = 4
}

// A nonzero whose count was bound from another tensor: a run error naming both numbers.
TEST(RunTimeSizes, NonZeroCountThatDiffersIsAnError) {
  Graph g = parse_one(R"(func @f(%x: f32[N], %m: f32[N]) -> i64[1,K] {
  %0 = bind_symbols %x, %m {symbols = [K], rule = "count_nonzero"} : f32[N]
  %1 = nonzero %0 {count = [K]} : i64[1,K]
  return %1
}
)");
  for (bool reference : {false, true}) {
    Executable exe = compile(g, reference);
    auto v = [](std::vector<float> a) { return Array::from_vector(DType::F32, {4}, a); };
    Expected<std::vector<Array>> out = exe.run(std::vector<Array>{v({1, 0, 2, 3}), v({0, 0, 5, 0})});
    ASSERT_FALSE(out);
    EXPECT_CONTAINS(out.status().message(), "nonzero");
    EXPECT_CONTAINS(out.status().message(), "the operand has 3 non-zero elements, the result's count is 1");
    out = exe.run(std::vector<Array>{v({1, 0, -0.0f, 3}), v({0, 4, 5, 0})});
    ASSERT_TRUE(out) << out.status().to_string();  // -0 is zero
    EXPECT_TRUE((*out)[0].same_data(Array::from_vector(DType::I64, {1, 2}, std::vector<int64_t>{0, 3})));
  }
}

TEST(RunTimeSizes, VerifierChecksWhereSymbolsAreBound) {
  struct Case {
    const char* values;  // %v's type
    const char* body;    // nodes over %x: f32[N,12] and %v; the last defines %r: f32[N,12]
    const char* error;
  };
  const Case cases[] = {
      {"i64[2]",
       "  %0 = reshape %x {shape = [R,C]} : f32[R,C]\n"
       "  %1 = bind_symbols %0, %v {symbols = [R,C]} : f32[R,C]\n"
       "  %r = reshape %1 {shape = [N,12]} : f32[N,12]\n",
       "symbol 'R' is not bound by any input shape or earlier bind_symbols"},
      {"i64[1]", "  %r = bind_symbols %x, %v {symbols = [N]} : f32[N,12]\n",
       "symbol 'N' is already bound before this node"},
      {"i64[1]",
       "  %0 = bind_symbols %x, %v {symbols = [R]} : f32[N,12]\n"
       "  %r = bind_symbols %0, %v {symbols = [R]} : f32[N,12]\n",
       "symbol 'R' is already bound before this node"},
      {"i64[3]", "  %r = bind_symbols %x, %v {symbols = [R,C]} : f32[N,12]\n",
       "values i64[3] must hold one element per symbol (2)"},
      {"f32[1]", "  %r = bind_symbols %x, %v {symbols = [R]} : f32[N,12]\n",
       "values must be i32 or i64, got f32[1]"},
      {"f32[5]", "  %r = bind_symbols %x, %v {symbols = [R,C], rule = \"count_nonzero\"} : f32[N,12]\n",
       "rule count_nonzero binds one symbol, got [R,C]"},
      {"i64[1]",
       "  %0 = nonzero %x {count = [K]} : i64[2,K]\n"
       "  %r = bind_symbols %x, %x {symbols = [K], rule = \"count_nonzero\"} : f32[N,12]\n",
       "symbol 'K' is not bound by any input shape or earlier bind_symbols"},
  };
  for (const Case& c : cases) {
    const std::string text = std::string("func @f(%x: f32[N,12], %v: ") + c.values + ") -> f32[N,12] {\n" +
                             c.body + "  return %r\n}\n";
    // The parser verifies what it reads; the verifier is asked again for a module it accepted.
    Expected<Module> m = parse_module(text);
    Status verified = m ? verify(m->functions[0]) : m.status();
    EXPECT_CONTAINS(verified.is_ok() ? std::string("verified") : verified.message(), c.error);
  }
}

}  // namespace
}  // namespace fusebox
