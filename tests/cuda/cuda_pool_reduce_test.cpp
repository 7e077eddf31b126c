// The CUDA pooling kernels (max_pool2d, avg_pool2d, global_avg_pool) and reductions
// (reduce_sum/mean/max/min/prod, argmax, argmin) against the CPU reference. Without NVRTC
// everything skips; without a GPU only the code generation and claim tests run: every source
// variant compiles for sm_90, and the claims refuse what the kernels do not take with a reason.
// With a GPU, each op runs on the device on random inputs of odd shapes (windows of 2 and 3,
// strides 1 and 2, pads, dilations, ceil_mode; reductions over each axis and several, keepdims
// both, short and long reduced extents) and must match the reference unfused: pooling and the
// one-thread-per-output reductions bit for bit; max, min and the arg reductions always bit for
// bit; sums, means and products of the one-block-per-output and split variants within one ulp
// of the dtype (a double sum in another order may round the other way), see reduce_kernel.h.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/pool_kernel.h"
#include "backends/cuda/reduce_kernel.h"
#include "ir/builder.h"
#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

TEST(CudaPoolReduceCodegen, EveryPoolAndReduceVariantCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  const std::vector<cuda::PoolVariant> pools = cuda::all_pool_variants();
  EXPECT_EQ(pools.size(), 12u);  // 3 ops x 4 dtypes
  for (const cuda::PoolVariant& v : pools) {
    Expected<std::string> cubin = cuda::compile_cubin(cuda::pool_source(v), "pool_" + v.key() + ".cu", 90);
    ASSERT_TRUE(cubin) << v.key() << ": " << cubin.status().message();
    EXPECT_GT(cubin->size(), 1000u) << v.key();
  }
  const std::vector<cuda::ReduceVariant> reductions = cuda::all_reduce_variants();
  EXPECT_EQ(reductions.size(), 40u);  // 7 ops x 6 dtypes, no integer mean
  for (const cuda::ReduceVariant& v : reductions) {
    const std::string source = cuda::reduce_source(v);
    for (const char* entry : {cuda::kReduceThreadEntry, cuda::kReduceBlockEntry, cuda::kReduceSplitEntry, cuda::kReduceCombineEntry}) {
      EXPECT_NE(source.find(entry), std::string::npos) << v.key() << " lacks " << entry;
    }
    Expected<std::string> cubin = cuda::compile_cubin(source, "reduce_" + v.key() + ".cu", 90);
    ASSERT_TRUE(cubin) << v.key() << ": " << cubin.status().message();
    EXPECT_GT(cubin->size(), 1000u) << v.key();
  }
}

Graph parse(const std::string& text) { return testing::parse_or_fail(text); }

// The pool-or-reduce claim of the graph's first node.
std::optional<Claim> first_claim(const std::string& text) {
  Graph g = parse(text);
  if (g.nodes().empty()) return Claim::refuse("no graph");
  return cuda::claim_pool_or_reduce(g, g.nodes()[0]);
}

::testing::AssertionResult refused_with(const std::optional<Claim>& c, const std::string& words) {
  if (!c) return ::testing::AssertionFailure() << "not a pool or reduce op";
  if (c->yes) return ::testing::AssertionFailure() << "accepted";
  if (c->reason.find(words) == std::string::npos) return ::testing::AssertionFailure() << "reason: " << c->reason;
  return ::testing::AssertionSuccess();
}

TEST(CudaPoolReduceClaims, PoolAndReduceOpsAreClaimedAndRefusalsSayWhy) {
  EXPECT_FALSE(first_claim("func @f(%x: f32[4,8]) -> f32[4,8] {\n  %0 = tanh %x : f32[4,8]\n  return %0\n}"))
      << "tanh is neither: the backend looks further";
  std::optional<Claim> pool = first_claim(
      "func @f(%x: f16[N,3,17,19]) -> f16[N,3,9,10] {\n"
      "  %0 = max_pool2d %x {kernel = [3, 3], stride = [2, 2], pad = [1, 1, 1, 1]} : f16[N,3,9,10]\n  return %0\n}");
  ASSERT_TRUE(pool);
  EXPECT_TRUE(pool->yes) << pool->reason;
  std::optional<Claim> global = first_claim(
      "func @f(%x: bf16[2,3,5,7]) -> bf16[2,3,1,1] {\n  %0 = global_avg_pool %x : bf16[2,3,1,1]\n  return %0\n}");
  ASSERT_TRUE(global);
  EXPECT_TRUE(global->yes) << global->reason;

  std::optional<Claim> blocked = first_claim(
      "func @f(%x: f32[N,2,5,5,8]) -> f32[N,2,1,1,8] {\n"
      "  %0 = global_avg_pool %x {layout = \"nchwc\"} : f32[N,2,1,1,8]\n  return %0\n}");
  EXPECT_TRUE(refused_with(blocked, "in the nchwc layout"));

  std::optional<Claim> two = first_claim(
      "func @f(%x: f32[4,5,6]) -> f32[5] {\n  %0 = reduce_sum %x {axes = [0, 2]} : f32[5]\n  return %0\n}");
  EXPECT_TRUE(refused_with(two, "not contiguous"));
  // The kept axis between them has size 1: [4, 1, 6] reduces as one run.
  std::optional<Claim> around_one = first_claim(
      "func @f(%x: f32[4,1,6]) -> f32[1] {\n  %0 = reduce_max %x {axes = [0, 2]} : f32[1]\n  return %0\n}");
  ASSERT_TRUE(around_one);
  EXPECT_TRUE(around_one->yes) << around_one->reason;
  std::optional<Claim> several = first_claim(
      "func @f(%x: f32[N,5,6,7]) -> f32[N,1,1,7] {\n  %0 = reduce_mean %x {axes = [1, 2], keepdims = true} : f32[N,1,1,7]\n  return %0\n}");
  ASSERT_TRUE(several);
  EXPECT_TRUE(several->yes) << several->reason;

  std::optional<Claim> u8 = first_claim(
      "func @f(%x: u8[4,5]) -> u8[4] {\n  %0 = reduce_sum %x {axes = [1]} : u8[4]\n  return %0\n}");
  EXPECT_TRUE(refused_with(u8, "reduce_sum on u8"));
  std::optional<Claim> arg = first_claim(
      "func @f(%x: i64[4,5]) -> i64[4] {\n  %0 = argmin %x {axis = -1} : i64[4]\n  return %0\n}");
  ASSERT_TRUE(arg);
  EXPECT_TRUE(arg->yes) << arg->reason;
}

// ---- device runs against the reference ---------------------------------------------------------

struct Compiled {
  Expected<Executable> want;
  Expected<Executable> got;
};

Compiled compile_both(Session& session, const Graph& g) {
  CompileOptions ref;
  ref.fuse = false;
  ref.backend = "reference";
  CompileOptions dev;
  dev.fuse = false;
  dev.target = FusionTarget::Cuda;
  return {session.compile(g, ref), session.compile(g, dev)};
}

// The op's node ran on the target (backend 0).
::testing::AssertionResult op_on_target(const Executable& exe, Op op) {
  const Graph& g = exe.graph();
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (g.nodes()[i].op != op) continue;
    const int b = exe.placement().node_backend[i];
    if (b == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << op_keyword(op) << " ran on " << exe.placement().backends[size_t(b)]->name();
  }
  return ::testing::AssertionFailure() << op_keyword(op) << " is not in the plan";
}

// One op over one input `x`, compiled both ways and run on `inputs`; compares result 0.
void expect_matches(Op op, DType dtype, const std::vector<int64_t>& shape, const Attrs& attrs, const std::vector<Array>& inputs,
                    double rtol, double atol, const std::string& what) {
  GraphBuilder b("f");
  ValueId x = b.input("x", dtype, make_shape(shape));
  b.output(b.op(op, {x}, attrs));
  Expected<Graph> g = b.build();
  ASSERT_TRUE(g) << what << ": " << g.status().message();
  Session session;
  Compiled c = compile_both(session, *g);
  ASSERT_TRUE(c.want) << what << ": " << c.want.status().message();
  ASSERT_TRUE(c.got) << what << ": " << c.got.status().message();
  EXPECT_TRUE(op_on_target(*c.got, op)) << what;
  for (const Array& in : inputs) {
    Expected<std::vector<Array>> want = c.want->run({{"x", in}}), got = c.got->run({{"x", in}});
    ASSERT_TRUE(want) << what << ": " << want.status().message();
    ASSERT_TRUE(got) << what << ": " << got.status().message();
    EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], rtol, atol)) << what;
  }
}

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "[";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? "," : "") + std::to_string(s[i]);
  return t + "]";
}

std::vector<Array> random_inputs(DType d, const std::vector<int64_t>& shape, uint64_t seed) {
  return {testing::random_array(d, shape, seed, -3.0, 3.0), testing::random_array(d, shape, seed + 1, 0.25, 4.0)};
}

struct PoolCase {
  std::vector<int64_t> kernel, stride, pad, dilation;
  bool ceil_mode = false;
};

std::vector<PoolCase> pool_cases() {
  return {
      {{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
      {{2, 2}, {2, 2}, {0, 0, 0, 0}, {1, 1}, true},
      {{3, 3}, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},
      {{3, 3}, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
      {{3, 2}, {2, 1}, {1, 0, 2, 1}, {1, 1}, true},
      {{2, 3}, {1, 2}, {0, 2, 1, 0}, {2, 1}, false},
      {{3, 3}, {2, 2}, {2, 2, 2, 2}, {2, 2}, true},
      {{1, 1}, {1, 1}, {0, 0, 0, 0}, {1, 1}, false},
  };
}

TEST(CudaPoolKernels, MaxAndAvgPoolMatchTheReferenceBitForBit) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 17, 19}, {1, 5, 8, 8}, {3, 2, 7, 33}};
  uint64_t seed = 1;
  for (DType d : {DType::F32, DType::F16, DType::BF16}) {
    for (const PoolCase& pc : pool_cases()) {
      for (const std::vector<int64_t>& shape : shapes) {
        const std::string where = std::string(dtype_name(d)) + shape_text(shape) + " k" + shape_text(pc.kernel) + " s" +
                                  shape_text(pc.stride) + " p" + shape_text(pc.pad) + (pc.ceil_mode ? " ceil" : "");
        Attrs max_attrs{{"kernel", pc.kernel}, {"stride", pc.stride}, {"pad", pc.pad}, {"dilation", pc.dilation}, {"ceil_mode", pc.ceil_mode}};
        expect_matches(Op::MaxPool2d, d, shape, max_attrs, random_inputs(d, shape, seed += 2), 0, 0,
                       "max_pool2d " + where + " d" + shape_text(pc.dilation));
        for (bool include_pad : {false, true}) {
          Attrs avg_attrs{{"kernel", pc.kernel}, {"stride", pc.stride}, {"pad", pc.pad}, {"ceil_mode", pc.ceil_mode},
                          {"count_include_pad", include_pad}};
          expect_matches(Op::AvgPool2d, d, shape, avg_attrs, random_inputs(d, shape, seed += 2), 0, 0,
                         "avg_pool2d " + where + (include_pad ? " count_include_pad" : ""));
        }
      }
    }
  }
}

TEST(CudaPoolKernels, GlobalAvgPoolMatchesTheReferenceBitForBit) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 17, 19}, {1, 7, 1, 1}, {4, 64, 7, 7}, {2, 5, 3, 4, 5}, {3, 4, 9}, {1, 2, 300, 301}};
  uint64_t seed = 500;
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    for (const std::vector<int64_t>& shape : shapes) {
      expect_matches(Op::GlobalAvgPool, d, shape, {}, random_inputs(d, shape, seed += 2), 0, 0,
                     "global_avg_pool " + std::string(dtype_name(d)) + shape_text(shape));
    }
  }
}

// A NaN in a window wins the max and poisons the averages over it, as in the reference.
TEST(CudaPoolKernels, NanInWindowsMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<int64_t> shape{1, 2, 9, 11};
  Array x = testing::random_array(DType::F32, shape, 77, -3.0, 3.0);
  float* p = x.data<float>();
  p[3 * 11 + 4] = std::numeric_limits<float>::quiet_NaN();
  p[99 + 8 * 11 + 10] = std::numeric_limits<float>::quiet_NaN();
  p[5] = std::numeric_limits<float>::infinity();
  Attrs max_attrs{{"kernel", std::vector<int64_t>{3, 3}}, {"stride", std::vector<int64_t>{2, 2}}, {"pad", std::vector<int64_t>{1, 1, 1, 1}},
                  {"ceil_mode", true}};
  expect_matches(Op::MaxPool2d, DType::F32, shape, max_attrs, {x}, 0, 0, "max_pool2d with NaN");
  expect_matches(Op::AvgPool2d, DType::F32, shape, max_attrs, {x}, 0, 0, "avg_pool2d with NaN");
  expect_matches(Op::GlobalAvgPool, DType::F32, shape, {}, {x}, 0, 0, "global_avg_pool with NaN");
}

// [outer, n, inner] of a reduction as the kernel views it (the test's own arithmetic).
std::array<int64_t, 3> view_of(const std::vector<int64_t>& shape, const std::vector<int64_t>& axes) {
  std::vector<bool> reduced(shape.size(), axes.empty());
  for (int64_t a : axes) reduced[size_t(a < 0 ? a + int64_t(shape.size()) : a)] = true;
  std::array<int64_t, 3> v{1, 1, 1};
  bool seen = false;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (reduced[d]) {
      v[1] *= shape[d];
      seen = true;
    } else {
      v[seen ? 2 : 0] *= shape[d];
    }
  }
  return v;
}

struct ReduceCase {
  std::vector<int64_t> shape;
  std::vector<int64_t> axes;
};

std::vector<ReduceCase> reduce_cases() {
  return {
      {{2, 3, 17, 19}, {0}},   {{2, 3, 17, 19}, {1}},       {{2, 3, 17, 19}, {2}},    {{2, 3, 17, 19}, {3}},
      {{2, 3, 17, 19}, {-1}},  {{2, 3, 17, 19}, {2, 3}},    {{2, 3, 17, 19}, {1, 2}}, {{2, 3, 17, 19}, {0, 1, 2}},
      {{2, 3, 17, 19}, {}},    {{5, 3001}, {1}},            {{3001, 5}, {0}},         {{7, 1000, 3}, {1}},
      {{40000, 70}, {1}},      {{130, 257, 5}, {0}},        {{1}, {0}},               {{9, 1, 11}, {1}},
      {{4, 1, 6}, {0, 2}},     {{3, 20000, 1}, {1}},
      // Long rows and few outputs: split into chunks, then combined.
      {{1000003}, {}},         {{7, 50001, 3}, {1}},        {{2, 3, 170, 190}, {}},
  };
}

TEST(CudaReduceKernels, ReductionsMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  uint64_t seed = 1000;
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
    for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I32, DType::I64}) {
      if (op == Op::ReduceMean && !is_float(d)) continue;
      for (const ReduceCase& rc : reduce_cases()) {
        auto [outer, n, inner] = view_of(rc.shape, rc.axes);
        const bool reorders = cuda::reduce_by_block(outer * inner, n, inner) && is_float(d) &&
                              (op == Op::ReduceSum || op == Op::ReduceMean || op == Op::ReduceProd);
        // One ulp of the dtype relative, plus the double sum's reordering error absolute.
        const double ulp = d == DType::F16 ? 1e-3 : d == DType::BF16 ? 8e-3 : d == DType::F32 ? 2.4e-7 : 4.5e-16;
        const double rtol = reorders ? ulp : 0, atol = reorders ? 1e-9 : 0;
        for (bool keepdims : {false, true}) {
          const std::string what = std::string(op_keyword(op)) + " " + std::string(dtype_name(d)) + shape_text(rc.shape) +
                                   " axes " + shape_text(rc.axes) + (keepdims ? " keepdims" : "");
          // Products of many values stay finite near 1; sums and extremes take signed values.
          std::vector<Array> in = op == Op::ReduceProd && is_float(d)
                                      ? std::vector<Array>{testing::random_array(d, rc.shape, seed += 2, 0.9, 1.1)}
                                      : std::vector<Array>{testing::random_array(d, rc.shape, seed += 2, is_float(d) ? -3.0 : -100.0,
                                                                                 is_float(d) ? 3.0 : 100.0)};
          expect_matches(op, d, rc.shape, Attrs{{"axes", rc.axes}, {"keepdims", keepdims}}, in, rtol, atol, what);
        }
      }
    }
  }
}

TEST(CudaReduceKernels, ArgReductionsMatchTheReferenceWithTiesAndNan) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const std::vector<std::vector<int64_t>> shapes = {{2, 3, 17, 19}, {5, 3001}, {3001, 5}, {7, 1000, 3}, {1, 1}, {2, 100003}};
  uint64_t seed = 3000;
  for (Op op : {Op::ArgMax, Op::ArgMin}) {
    for (DType d : {DType::F32, DType::F16, DType::I32, DType::I64}) {
      for (const std::vector<int64_t>& shape : shapes) {
        for (int64_t axis = -1; axis < int64_t(shape.size()); ++axis) {
          for (bool keepdims : {false, true}) {
            const std::string what = std::string(op_keyword(op)) + " " + std::string(dtype_name(d)) + shape_text(shape) +
                                     " axis " + std::to_string(axis) + (keepdims ? " keepdims" : "");
            // Few distinct values: many ties, whose first index must win.
            std::vector<Array> in = {testing::random_array(d, shape, seed += 2, -3.0, 3.0)};
            if (is_float(d)) {
              Array rounded = testing::random_array(d, shape, seed += 2, -3.0, 3.0);
              for (int64_t i = 0; i < rounded.numel(); ++i) rounded.set_f64(i, std::round(rounded.get_f64(i)));
              in.push_back(rounded);
            }
            expect_matches(op, d, shape, Attrs{{"axis", axis}, {"keepdims", keepdims}}, in, 0, 0, what);
          }
        }
      }
    }
  }
}

// NaN wins max and min and is the index argmax/argmin report (the first one), in the
// one-thread, one-block and split variants.
TEST(CudaReduceKernels, NanMatchesTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const std::vector<int64_t>& shape : {std::vector<int64_t>{6, 33}, std::vector<int64_t>{6, 5000}, std::vector<int64_t>{6, 40000}}) {
    Array x = testing::random_array(DType::F32, shape, 9, -3.0, 3.0);
    const int64_t n = shape[1];
    const float nan = std::numeric_limits<float>::quiet_NaN();
    x.set_f64(0 * n + n / 2, nan);                                 // row 0: one NaN
    x.set_f64(1 * n + 3, nan);                                     // row 1: two NaNs, the first wins
    x.set_f64(1 * n + n - 2, nan);
    x.set_f64(2 * n + n - 1, std::numeric_limits<float>::infinity());  // row 2: +inf
    x.set_f64(3 * n + 0, -std::numeric_limits<float>::infinity());    // row 3: -inf first
    for (Op op : {Op::ReduceMax, Op::ReduceMin, Op::ReduceSum}) {
      // The long rows run one block each: a sum may then round one ulp away (see above).
      const double tol = op == Op::ReduceSum ? 2.4e-7 : 0;
      expect_matches(op, DType::F32, shape, Attrs{{"axes", std::vector<int64_t>{1}}}, {x}, tol, tol ? 1e-9 : 0,
                     std::string(op_keyword(op)) + " with NaN " + shape_text(shape));
    }
    for (Op op : {Op::ArgMax, Op::ArgMin}) {
      expect_matches(op, DType::F32, shape, Attrs{{"axis", int64_t(1)}}, {x}, 0, 0,
                     std::string(op_keyword(op)) + " with NaN " + shape_text(shape));
    }
  }
}

}  // namespace
}  // namespace fusebox
