// The CUDA row kernels (softmax, log_softmax, layer_norm, rms_norm, the fused residual norms)
// against the CPU reference. Without NVRTC everything skips; without a GPU only the code
// generation and claim tests run: every source variant compiles for sm_90, and the claims
// refuse what the kernels do not take with a reason. With a GPU, every op and operand set on
// f32, f16 and bf16 runs on the device over rows of 1 to 12000 elements (held in registers up
// to 8192, streamed beyond; 16-byte and scalar accesses) on random inputs, and must match the
// reference: f32 within 1e-5 relative and absolute (float arithmetic against the reference's
// double: a few roundings), f16 2e-3, bf16 1.6e-2 (one ulp of the dtype: a float result on a
// rounding boundary may round the other way); a returned residual sum bit-exact.
#include <gtest/gtest.h>

#include <algorithm>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/nvrtc.h"
#include "backends/cuda/row_kernel.h"
#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

constexpr DType kRowDTypes[] = {DType::F32, DType::F16, DType::BF16};

TEST(CudaRowCodegen, EveryRowKernelVariantCompilesWithNvrtc) {
  if (Expected<std::string> v = cuda::nvrtc_version(); !v) GTEST_SKIP() << v.status().message();
  const std::vector<cuda::RowVariant> variants = cuda::all_row_variants();
  EXPECT_EQ(variants.size(), 48u);  // 6 ops x 3 dtypes x 2 access widths, 2 more budgets for f32 x 16 bytes
  for (const cuda::RowVariant& v : variants) {
    const std::string source = cuda::row_source(v);
    Expected<std::string> cubin = cuda::compile_cubin(source, "row_" + v.key() + ".cu", 90);
    ASSERT_TRUE(cubin) << v.key() << ": " << cubin.status().message();
    EXPECT_GT(cubin->size(), 1000u) << v.key();
  }
}

Graph parse(const std::string& text) { return testing::parse_or_fail(text); }

// The claim of the graph's first node.
std::optional<Claim> first_claim(const std::string& text) {
  Graph g = parse(text);
  if (g.nodes().empty()) return Claim::refuse("no graph");
  return cuda::claim_row_op(g, g.nodes()[0]);
}

TEST(CudaRowClaims, RowOpsAreClaimedAndRefusalsSayWhy) {
  EXPECT_FALSE(first_claim("func @f(%x: f32[4,8]) -> f32[4,8] {\n  %0 = tanh %x : f32[4,8]\n  return %0\n}"))
      << "tanh is not a row op: the backend looks further";
  std::optional<Claim> yes = first_claim(
      "func @f(%x: bf16[N,3,8], %g: bf16[8]) -> bf16[N,3,8] {\n  %0 = rms_norm %x, %g {axis = 2} : bf16[N,3,8]\n  return %0\n}");
  ASSERT_TRUE(yes);
  EXPECT_TRUE(yes->yes) << yes->reason;

  std::optional<Claim> axis = first_claim(
      "func @f(%x: f32[4,8]) -> f32[4,8] {\n  %0 = softmax %x {axis = 0} : f32[4,8]\n  return %0\n}");
  ASSERT_TRUE(axis);
  EXPECT_FALSE(axis->yes);
  EXPECT_NE(axis->reason.find("last axis only"), std::string::npos) << axis->reason;

  std::optional<Claim> f64 = first_claim(
      "func @f(%x: f64[4,8]) -> f64[4,8] {\n  %0 = layer_norm %x : f64[4,8]\n  return %0\n}");
  ASSERT_TRUE(f64);
  EXPECT_FALSE(f64->yes);
  EXPECT_NE(f64->reason.find("layer_norm on f64"), std::string::npos) << f64->reason;

  std::optional<Claim> bias = first_claim(
      "func @f(%x: f32[4,8], %r: f32[4,8], %b: f32[4,1]) -> f32[4,8] {\n"
      "  %0 = fused_residual_rms_norm %x, %r, %b {has_bias = true} : f32[4,8]\n  return %0\n}");
  ASSERT_TRUE(bias);
  EXPECT_FALSE(bias->yes);
  EXPECT_NE(bias->reason.find("bias f32[4,1]"), std::string::npos) << bias->reason;
}

// The launch a row op gets for its operands: 16-byte accesses only where every full-size
// operand and the row length allow them, a warp for short rows, a bias read per row only when
// it has x's shape, and a run-time error (never a wrong answer) for a parameter of another size.
TEST(CudaRowClaims, LaunchesFollowTheOperands) {
  Graph g = parse(
      "func @f(%x: f16[R,N], %r: f16[R,N], %b: f16[R,N], %g: f16[1]) -> (f16[R,N], f16[R,N]) {\n"
      "  %0:2 = fused_residual_layer_norm %x, %r, %b, %g {has_bias = true} : f16[R,N], f16[R,N]\n  return %0#0, %0#1\n}");
  ASSERT_EQ(g.nodes().size(), 1u);
  const cuda::RowSpec spec = cuda::row_spec(g.nodes()[0]);
  auto launch = [&](int64_t rows, int64_t n, size_t misaligned_operand, int64_t scale_size) {
    std::vector<Array> arrays;
    for (int i = 0; i < 3; ++i) arrays.push_back(testing::random_array(DType::F16, {rows, n + 1}, uint64_t(i)));
    arrays.push_back(testing::random_array(DType::F16, {scale_size}, 9));
    for (int i = 0; i < 2; ++i) arrays.push_back(Array(DType::F16, {rows, n + 1}));
    std::vector<BufferView> views;
    for (size_t i = 0; i < arrays.size(); ++i) {
      BufferView v = host_view(arrays[i]);
      if (i != 3) {
        v.shape = {rows, n};
        if (i == misaligned_operand) v.data = static_cast<uint16_t*>(v.data) + 1;
      }
      views.push_back(std::move(v));
    }
    return cuda::plan_row_launch(spec, std::span(views).first(4), std::span(views).subspan(4));
  };
  Expected<cuda::RowLaunch> wide = launch(3, 1024, 99, 1);
  ASSERT_TRUE(wide) << wide.status().message();
  EXPECT_EQ(wide->variant.vector, 8);
  EXPECT_EQ(wide->threads, unsigned(std::min(128, cuda::row_threads(spec.op)))) << "a warp per 32 chunks of 8 (FUSEBOX_CUDA_ROW_THREADS caps it)";
  EXPECT_EQ(wide->blocks, 3u);
  // 1024 f16 over 128 threads: 8 each, the smallest register budget.
  if (cuda::row_threads(spec.op) >= 128) EXPECT_EQ(wide->variant.items, 8);
  EXPECT_EQ(wide->sizes[2], 1024) << "a bias of x's shape is read row by row";
  EXPECT_EQ(wide->sizes[4], 0) << "a one-value scale is read once";
  for (size_t operand : {size_t(0), size_t(1), size_t(2), size_t(4), size_t(5)}) {
    Expected<cuda::RowLaunch> narrow = launch(3, 1024, operand, 1);
    ASSERT_TRUE(narrow);
    EXPECT_EQ(narrow->variant.vector, 1) << "operand " << operand << " is not 16-byte aligned";
  }
  Expected<cuda::RowLaunch> odd = launch(2, 7, 99, 1);
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->variant.vector, 1);
  EXPECT_EQ(odd->threads, 32u);
  Expected<cuda::RowLaunch> long_row = launch(1, 12000, 99, 1);
  ASSERT_TRUE(long_row);
  EXPECT_EQ(long_row->threads, unsigned(cuda::row_threads(spec.op)));
  // Held in registers when threads x items covers the row; else the largest budget, streamed.
  if (12000 <= int64_t(long_row->threads) * 32) {
    EXPECT_GE(int64_t(long_row->threads) * long_row->variant.items, 12000);
  } else {
    EXPECT_EQ(long_row->variant.items, 32);
  }
  Expected<cuda::RowLaunch> bad_scale = launch(2, 8, 99, 3);
  ASSERT_FALSE(bad_scale);
  EXPECT_NE(bad_scale.status().message().find("not one value or one row"), std::string::npos) << bad_scale.status().message();
}

// One op with its operands, written for dtype `D` (replaced) over x of shape [R,N] (or another
// shape whose last dim is N).
struct RowCase {
  std::string name;
  std::string params;  // the function's parameters after %x
  std::string op;      // the op line's right-hand side, before " : "
  int results = 1;
  std::string x = "R,N";  // x's dims
};

std::vector<RowCase> row_cases() {
  return {
      {"softmax", "", "softmax %x", 1},
      {"log_softmax", "", "log_softmax %x", 1},
      {"layer_norm", "", "layer_norm %x {eps = 0.001}", 1},
      {"layer_norm scale", ", %g: D[N]", "layer_norm %x, %g", 1},
      {"layer_norm scale bias", ", %g: D[N], %h: D[N]", "layer_norm %x, %g, %h", 1},
      {"layer_norm one-value scale", ", %g: D[1], %h: D[N]", "layer_norm %x, %g, %h", 1},
      {"rms_norm", "", "rms_norm %x", 1},
      {"rms_norm scale", ", %g: D[N]", "rms_norm %x, %g {eps = 0.0001}", 1},
      {"residual layer_norm", ", %r: D[R,N]", "fused_residual_layer_norm %x, %r", 1},
      {"residual layer_norm bias scale shift, sum", ", %r: D[R,N], %b: D[N], %g: D[N], %h: D[N]",
       "fused_residual_layer_norm %x, %r, %b, %g, %h {has_bias = true}", 2},
      {"residual layer_norm bias scale", ", %r: D[R,N], %b: D[N], %g: D[N]",
       "fused_residual_layer_norm %x, %r, %b, %g {has_bias = true}", 1},
      {"residual layer_norm scale shift, sum", ", %r: D[R,N], %g: D[N], %h: D[N]",
       "fused_residual_layer_norm %x, %r, %g, %h", 2},
      {"residual layer_norm full-shape bias, sum", ", %r: D[R,N], %b: D[R,N], %g: D[N], %h: D[N]",
       "fused_residual_layer_norm %x, %r, %b, %g, %h {has_bias = true}", 2},
      {"residual rms_norm", ", %r: D[R,N]", "fused_residual_rms_norm %x, %r", 1},
      {"residual rms_norm bias scale, sum", ", %r: D[R,N], %b: D[N], %g: D[N]",
       "fused_residual_rms_norm %x, %r, %b, %g {has_bias = true}", 2},
      {"residual rms_norm one-value bias, sum", ", %r: D[R,N], %b: D[1], %g: D[N]",
       "fused_residual_rms_norm %x, %r, %b, %g {has_bias = true}", 2},
      {"softmax rank 3", "", "softmax %x {axis = 2}", 1, "3,R,N"},
      {"layer_norm rank 1 scale bias", ", %g: D[N], %h: D[N]", "layer_norm %x, %g, %h", 1, "N"},
      {"residual rms_norm rank 3 bias [1,1,N], sum", ", %r: D[3,R,N], %b: D[1,1,N], %g: D[N]",
       "fused_residual_rms_norm %x, %r, %b, %g {has_bias = true}", 2, "3,R,N"},
  };
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) s.replace(at, from.size(), to);
  return s;
}

std::string case_text(const RowCase& c, DType d) {
  const std::string t = "D[" + c.x + "]";
  std::string text = "func @f(%x: " + t + c.params + ") -> " + (c.results == 2 ? "(" + t + ", " + t + ")" : t) + " {\n";
  text += std::string("  %0") + (c.results == 2 ? ":2" : "") + " = " + c.op + " : " + t + (c.results == 2 ? ", " + t : "") + "\n";
  text += c.results == 2 ? "  return %0#0, %0#1\n}" : "  return %0\n}";
  return replace_all(text, "D[", std::string(dtype_name(d)) + "[");
}

// The graphs the device test runs parse here, and their row op is claimed.
TEST(CudaRowClaims, EveryTestedGraphIsClaimed) {
  for (const RowCase& c : row_cases()) {
    for (DType d : kRowDTypes) {
      const Graph g = parse(case_text(c, d));
      ASSERT_EQ(g.nodes().size(), 1u) << c.name;
      std::optional<Claim> claim = cuda::claim_row_op(g, g.nodes()[0]);
      ASSERT_TRUE(claim) << c.name;
      EXPECT_TRUE(claim->yes) << c.name << " " << dtype_name(d) << ": " << claim->reason;
    }
  }
}

// Random operands for `g` at row count `rows` and row length `n`: x and r in [-3, 3), params
// (scale, shift, bias) in [0.5, 1.5) — never zero.
NamedArrays operands(const Graph& g, int64_t rows, int64_t n, uint64_t seed) {
  NamedArrays in;
  for (ValueId v : g.inputs()) {
    const TensorType& t = g.type(v);
    std::vector<int64_t> shape;
    for (const Dim& d : t.shape) shape.push_back(d.is_static() ? d.value() : d.symbol_name() == "R" ? rows : n);
    const std::string& name = g.value(v).name;
    const bool row_operand = name == "x" || name == "r";
    in[name] = testing::random_array(t.dtype, shape, seed++, row_operand ? -3.0 : 0.5, row_operand ? 3.0 : 1.5);
  }
  return in;
}

TEST(CudaRowKernels, EveryRowOpMatchesTheReferenceOnTheDevice) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  const int64_t lengths[] = {1, 7, 33, 1000, 4096, 5000, 8192, 8193, 12000};
  for (const RowCase& c : row_cases()) {
    for (DType d : kRowDTypes) {
      const Graph g = parse(case_text(c, d));
      CompileOptions dev;
      dev.fuse = false;
      dev.target = FusionTarget::Cuda;
      Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
      ASSERT_TRUE(exes) << exes.status().message();
      const Executable* want_exe = &exes->reference;
      const Executable* got_exe = &exes->plan;
      EXPECT_EQ(got_exe->placement().summary().find("cpu"), std::string::npos)
          << c.name << " " << dtype_name(d) << ": " << got_exe->placement().summary();
      const double tol = d == DType::F16 ? 2e-3 : d == DType::BF16 ? 1.6e-2 : 1e-5;
      uint64_t seed = 100;
      for (int64_t n : lengths) {
        for (int64_t rows : {int64_t(1), int64_t(5), n <= 33 ? int64_t(3001) : int64_t(37)}) {
          const NamedArrays in = operands(g, rows, n, seed += 10);
          Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
          ASSERT_TRUE(want) << want.status().message();
          ASSERT_TRUE(got) << c.name << " " << dtype_name(d) << " [" << rows << "," << n << "]: " << got.status().message();
          ASSERT_EQ(got->size(), size_t(c.results));
          EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], tol, tol))
              << c.name << " " << dtype_name(d) << " [" << rows << "," << n << "]";
          if (c.results == 2) {
            EXPECT_TRUE(testing::arrays_close((*got)[1], (*want)[1], 0, 0))
                << c.name << " " << dtype_name(d) << " [" << rows << "," << n << "]: the sum";
          }
        }
      }
    }
  }
}

// NaN and infinities come out as the reference's: a NaN row is NaN, -inf entries of a softmax
// row are zeros, a +inf makes the row NaN; in registers and streamed.
TEST(CudaRowKernels, NanAndInfinityRowsMatchTheReference) {
  if (Status s = cuda::cuda_available(); !s.is_ok()) GTEST_SKIP() << s.message();
  for (const char* op : {"softmax %x", "log_softmax %x", "layer_norm %x", "rms_norm %x"}) {
    const Graph g = parse(case_text({op, "", op, 1}, DType::F32));
    CompileOptions dev;
    dev.fuse = false;
    dev.target = FusionTarget::Cuda;
    Expected<testing::OracleAndPlan> exes = testing::compile_against_reference(g, dev);
    ASSERT_TRUE(exes) << exes.status().message();
    const Executable* want_exe = &exes->reference;
    const Executable* got_exe = &exes->plan;
    for (int64_t n : {int64_t(1000), int64_t(12000)}) {
      Array x = testing::random_array(DType::F32, {5, n}, 7, -3.0, 3.0);
      float* p = x.data<float>();
      const float inf = std::numeric_limits<float>::infinity();
      p[0 * n + n / 2] = std::numeric_limits<float>::quiet_NaN();  // row 0: NaN
      p[1 * n + 3] = -inf;                                            // row 1: one -inf
      p[2 * n + n - 1] = inf;                                         // row 2: one +inf
      for (int64_t k = 0; k < n; ++k) p[3 * n + k] = -inf;            // row 3: all -inf
      Expected<std::vector<Array>> want = want_exe->run({{"x", x}}), got = got_exe->run({{"x", x}});
      ASSERT_TRUE(want && got) << got.status().message();
      EXPECT_TRUE(testing::arrays_close((*got)[0], (*want)[0], 1e-5, 1e-5)) << op << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace fusebox
