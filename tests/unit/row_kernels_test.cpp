// The CPU row kernels (src/backends/cpu/row_kernels.h) against the reference kernels: softmax,
// log_softmax, layer_norm, rms_norm and the fused residual norms, on every ISA's loops the
// processor has (generic always; AVX2 and AVX-512 forced when present, skipped with a message
// otherwise), over row lengths 1, 3, 17, 1000, 4097 and row counts from 1 to several thousand,
// plus random sizes.
// Inputs are random (never zero: uniform in [-3, 3) away from 0), results are poisoned before
// each run. Tolerance (row_kernels.h): 1e-5 relative plus 1e-6 absolute; the returned residual
// sum bit-exact. NaN and infinity rows must come out as the reference's do.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/reference/reference.h"
#include "backends/cpu/row_kernels.h"
#include "ir/parser.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using cpu::RowIsa;

constexpr double kRtol = 1e-5, kAtol = 1e-6;

struct Size {
  int64_t rows, n;
};
// The fixed sizes, then random ones (a fixed seed: rows 1-300, lengths 1-2500).
std::vector<Size> sizes() {
  std::vector<Size> s = {{1, 1}, {7, 1}, {3, 3}, {1, 17}, {5, 17}, {3001, 33}, {1, 1000},
                         {64, 1000}, {2, 4097}, {4000, 3}};
  std::mt19937 rng(20261202);
  std::uniform_int_distribution<int64_t> rows(1, 300), n(1, 2500);
  for (int i = 0; i < 6; ++i) s.push_back({rows(rng), n(rng)});
  return s;
}
const std::vector<Size> kSizes = sizes();

Array nonzero(std::vector<int64_t> shape, uint64_t seed) {
  Array a = testing::random_array(DType::F32, std::move(shape), seed, -3.0, 3.0);
  float* p = a.data<float>();
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::fabs(p[i]) < 1e-3f) p[i] = 0.5f;
  return a;
}

Array poisoned(std::vector<int64_t> shape, uint8_t byte) {
  Array a(DType::F32, std::move(shape));
  a.fill_bytes(byte);
  return a;
}

std::vector<Array> reference(const Node& n, const std::vector<Array>& in, size_t results) {
  std::vector<Array> out;
  for (size_t i = 0; i < results; ++i) out.emplace_back(DType::F32, in[0].shape());
  Status s = cpu::run_reference(n, in, out);
  EXPECT_TRUE(s.is_ok()) << s.to_string();
  return out;
}

class RowKernels : public ::testing::TestWithParam<RowIsa> {
 protected:
  void SetUp() override {
    if (!cpu::row_isa_available(GetParam())) {
      GTEST_SKIP() << "this processor has no " << cpu::row_isa_name(GetParam()) << ": its row loops cannot run here";
    }
  }
};

void check_softmax(RowIsa isa, const Array& x, bool log) {
  const int64_t n = x.shape().back(), rows = x.numel() / n;
  Node node{log ? Op::LogSoftmax : Op::Softmax, {}, {}, {}, nullptr, {}};
  Array want = reference(node, {x}, 1)[0];
  for (uint8_t poison : testing::kPoisonBytes) {
    Array y = poisoned(x.shape(), poison);
    cpu::softmax_rows(isa, x.data<float>(), y.data<float>(), rows, n, log);
    ASSERT_TRUE(testing::arrays_close(y, want, kRtol, kAtol)) << (log ? "log_softmax" : "softmax") << " rows "
                                                              << rows << " n " << n;
  }
}

TEST_P(RowKernels, SoftmaxAndLogSoftmaxEqualTheReference) {
  uint64_t seed = 1;
  for (Size s : kSizes) {
    Array x = nonzero({s.rows, s.n}, seed++);
    check_softmax(GetParam(), x, false);
    check_softmax(GetParam(), x, true);
  }
}

// What one norm case feeds the row loops and the reference.
struct NormCase {
  Op op;
  bool residual, bias, bias_full, scale, shift, sum;
};

void check_norm(RowIsa isa, const NormCase& c, Size s, uint64_t seed, const Array* given_x = nullptr) {
  const std::vector<int64_t> shape{s.rows, s.n}, row{s.n};
  const bool fused = c.op == Op::FusedResidualLayerNorm || c.op == Op::FusedResidualRmsNorm;
  Array x = given_x ? *given_x : nonzero(shape, seed);
  std::vector<Array> in{x};
  cpu::NormRows a;
  a.rows = s.rows;
  a.n = s.n;
  a.rms = c.op == Op::RmsNorm || c.op == Op::FusedResidualRmsNorm;
  a.eps = a.rms ? 1e-6 : 1e-5;
  if (c.residual) in.push_back(nonzero(shape, seed + 1));
  if (c.bias) {
    in.push_back(nonzero(c.bias_full ? shape : row, seed + 2));
    a.bias_row_stride = c.bias_full ? s.n : 0;
  }
  if (c.scale) in.push_back(nonzero(row, seed + 3));
  if (c.shift) in.push_back(nonzero(row, seed + 4));
  size_t k = 0;
  a.x = in[k++].data<float>();
  if (c.residual) a.r = in[k++].data<float>();
  if (c.bias) a.bias = in[k++].data<float>();
  if (c.scale) a.scale = in[k++].data<float>();
  if (c.shift) a.shift = in[k++].data<float>();
  Node node{c.op, {}, {}, {}, nullptr, {}};
  if (fused) node.attrs.set("has_bias", c.bias);
  std::vector<Array> want = reference(node, in, c.sum ? 2 : 1);
  for (uint8_t poison : testing::kPoisonBytes) {
    Array y = poisoned(shape, poison), sum = poisoned(shape, poison);
    a.y = y.data<float>();
    a.sum = c.sum ? sum.data<float>() : nullptr;
    cpu::norm_rows(isa, a);
    ASSERT_TRUE(testing::arrays_close(y, want[0], kRtol, kAtol))
        << op_keyword(c.op) << " rows " << s.rows << " n " << s.n << " bias " << c.bias << " scale " << c.scale;
    if (c.sum) ASSERT_TRUE(sum.same_data(want[1])) << op_keyword(c.op) << ": the sum is not bit-exact";
  }
}

const NormCase kNormCases[] = {
    {Op::LayerNorm, false, false, false, true, true, false},
    {Op::LayerNorm, false, false, false, true, false, false},
    {Op::LayerNorm, false, false, false, false, false, false},
    {Op::RmsNorm, false, false, false, true, false, false},
    {Op::RmsNorm, false, false, false, false, false, false},
    {Op::FusedResidualLayerNorm, true, false, false, true, true, false},
    {Op::FusedResidualLayerNorm, true, true, false, true, true, true},
    {Op::FusedResidualLayerNorm, true, true, true, false, false, true},
    {Op::FusedResidualRmsNorm, true, false, false, true, false, true},
    {Op::FusedResidualRmsNorm, true, true, false, true, false, false},
    {Op::FusedResidualRmsNorm, true, true, true, false, false, false},
};

TEST_P(RowKernels, NormsEqualTheReference) {
  uint64_t seed = 100;
  for (const NormCase& c : kNormCases) {
    for (Size s : kSizes) {
      check_norm(GetParam(), c, s, seed);
      seed += 10;
    }
  }
}

// A row holding NaN, +inf or -inf, between ordinary rows: the same NaN/inf pattern as the
// reference (arrays_close takes NaN for NaN and an infinity only for itself).
TEST_P(RowKernels, NanAndInfinityRowsBehaveLikeTheReference) {
  const float specials[] = {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  for (int64_t n : {1, 17, 1000}) {
    Array x = nonzero({4, n}, uint64_t(n));
    float* p = x.data<float>();
    p[1 * n + n / 2] = specials[0];
    p[2 * n] = specials[1];
    for (int64_t i = 0; i < n; ++i) p[3 * n + i] = specials[2];
    check_softmax(GetParam(), x, false);
    check_softmax(GetParam(), x, true);
    for (const NormCase& c : kNormCases) check_norm(GetParam(), c, {4, n}, 7, &x);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryIsa, RowKernels, ::testing::Values(RowIsa::Generic, RowIsa::Avx2, RowIsa::Avx512),
                         [](const auto& info) { return std::string(cpu::row_isa_name(info.param)); });

// Through the CPU backend: fused residual norms (fused by the pipeline) and plain row ops, at
// symbolic sizes, against the reference backend. A scale and shift of one value (f32[1], f32[])
// are spread over a row for the row loops; a norm over two axes takes the reference kernel
// inside the CPU backend; results must agree all the same.
TEST(RowKernelsInTheCpuBackend, FusedGraphsEqualTheReference) {
  const char* text = R"(
func @f(%x: f32[N,D], %r: f32[N,D], %b: f32[D], %g: f32[D], %h: f32[D], %one: f32[1], %k: f32[]) -> (f32[N,D], f32[N,D], f32[N,D], f32[N,D], f32[N,D], f32[N,D], f32[N,D]) {
  %s = add %x, %r : f32[N,D]
  %t = add %s, %b : f32[N,D]
  %y = layer_norm %t, %g, %h : f32[N,D]
  %u = add %x, %y : f32[N,D]
  %z = rms_norm %u, %one : f32[N,D]
  %p = softmax %z : f32[N,D]
  %q = log_softmax %y : f32[N,D]
  %w = layer_norm %x {axis = 0} : f32[N,D]
  %v = layer_norm %r, %k, %one : f32[N,D]
  return %y, %u, %z, %p, %q, %w, %v
})";
  Expected<Graph> g = parse_graph(text);
  ASSERT_TRUE(g) << g.status().to_string();
  for (Size s : {Size{1, 1}, Size{3, 17}, Size{257, 1000}}) {
    NamedArrays in;
    uint64_t seed = 11;
    for (const char* name : {"x", "r"}) in[name] = nonzero({s.rows, s.n}, seed++);
    for (const char* name : {"b", "g", "h"}) in[name] = nonzero({s.n}, seed++);
    in["one"] = nonzero({1}, seed++);
    in["k"] = nonzero({}, seed++);
    CompileOptions ref;
    ref.backend = "reference";
    ref.fuse = false;
    Expected<Executable> want_exe = Session().compile(*g, ref);
    Expected<Executable> got_exe = Session().compile(*g, CompileOptions{});
    ASSERT_TRUE(want_exe && got_exe);
    EXPECT_GE(testing::count_op(got_exe->graph(), Op::FusedResidualLayerNorm), 1u);
    EXPECT_GE(testing::count_op(got_exe->graph(), Op::FusedResidualRmsNorm), 1u);
    Expected<std::vector<Array>> want = want_exe->run(in), got = got_exe->run(in);
    ASSERT_TRUE(want && got) << (want ? got.status() : want.status()).to_string();
    for (size_t i = 0; i < want->size(); ++i) {
      EXPECT_TRUE(testing::arrays_close((*got)[i], (*want)[i], kRtol, kAtol)) << "result " << i << " at " << s.rows << "x" << s.n;
    }
  }
}

}  // namespace
}  // namespace fusebox
