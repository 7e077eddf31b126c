// Values of the CPU reference kernels of the opaque ops: constant, fft_magnitude and peaks.
// Expected values come from closed forms (DFTs of pure tones), hand-worked cases and naive loops
// written here, independent of the kernels' code.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <memory>
#include <utility>

#include "backends/cpu/reference/reference.h"
#include "ir/shape_inference.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::arrays_close;
using testing::random_array;

// Runs one op through the runtime with the reference executor and no fusion.
std::vector<Array> run(Op op, const std::vector<Array>& inputs, Attrs attrs = {}) {
  GraphBuilder b("op");
  std::vector<ValueId> ins;
  NamedArrays named;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string name = "in" + std::to_string(i);
    ins.push_back(b.input(name, inputs[i].dtype(), make_shape(inputs[i].shape())));
    named[name] = inputs[i];
  }
  for (ValueId v : b.op_results(op, ins, std::move(attrs))) b.output(v);
  Expected<Graph> g = b.build();
  EXPECT_TRUE(g) << g.status().to_string();
  if (!g) return {};
  CompileOptions options;
  options.fuse = false;
  options.executor = ExecutorKind::Reference;
  Expected<Executable> exe = Session().compile(*g, options);
  EXPECT_TRUE(exe) << exe.status().to_string();
  if (!exe) return {};
  Expected<std::vector<Array>> r = exe->run(named);
  EXPECT_TRUE(r) << op_keyword(op) << ": " << r.status().to_string();
  return r ? *r : std::vector<Array>{};
}

Array fft(const Array& x) {
  std::vector<Array> r = run(Op::FftMagnitude, {x});
  return r.empty() ? Array() : r[0];
}

std::pair<Array, Array> peaks(const Array& x, int64_t k) {
  std::vector<Array> r = run(Op::Peaks, {x}, {{"k", k}});
  if (r.size() != 2) return {};
  return {r[0], r[1]};
}

std::vector<int64_t> to_ints(const Array& a) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < a.numel(); ++i) v.push_back(a.get_i64(i));
  return v;
}

TEST(ReferenceConstant, CopiesTheValueAttribute) {
  std::vector<Array> values = {random_array(DType::F32, {2, 3}, 1), random_array(DType::F16, {}, 2),
                               random_array(DType::Bool, {5}, 3), random_array(DType::F64, {0, 2}, 4)};
  Array big(DType::I64, {3});
  big.set_i64(0, INT64_MIN);
  big.set_i64(1, INT64_MAX);
  big.set_i64(2, -7);
  values.push_back(big);
  for (const Array& v : values) {
    std::vector<Array> r = run(Op::Constant, {}, {{"value", std::make_shared<const Array>(v.clone())}});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_TRUE(r[0].same_data(v)) << v.type_string();
  }
}

// |DFT| by std::complex with the angle -2*pi*k*t/n taken directly (no reduction mod n).
std::vector<double> naive_dft(const Array& x, int64_t row, int64_t n) {
  std::vector<double> out;
  const double pi = 3.14159265358979323846;
  for (int64_t k = 0; k <= n / 2; ++k) {
    std::complex<double> sum = 0;
    for (int64_t t = 0; t < n; ++t) sum += x.get_f64(row * n + t) * std::polar(1.0, -2 * pi * double(k * t) / double(n));
    out.push_back(std::abs(sum));
  }
  return out;
}

TEST(ReferenceFft, PureTonesAndImpulses) {
  const double pi = 3.14159265358979323846;
  // cos(pi/2) is not exactly 0 in double: the zero bins are zero to rounding.
  EXPECT_TRUE(arrays_close(fft(array_of(DType::F64, {4}, {1, 1, 1, 1})), array_of(DType::F64, {3}, {4, 0, 0}), 0, 1e-15));
  Array impulse = fft(array_of(DType::F64, {5}, {1, 0, 0, 0, 0}));
  EXPECT_EQ(testing::to_doubles(impulse), (std::vector<double>{1, 1, 1}));  // n = 5: 3 bins
  Array nyquist = fft(array_of(DType::F64, {4}, {1, -1, 1, -1}));
  EXPECT_TRUE(arrays_close(nyquist, array_of(DType::F64, {3}, {0, 0, 4}), 0, 1e-14));
  // 32 samples: cos at bin 3 gives |X_3| = 32 / 2; sin of amplitude 2 at bin 5 gives 2 * 32 / 2.
  Array c(DType::F64, {2, 32});
  for (int64_t t = 0; t < 32; ++t) {
    c.set_f64(t, std::cos(2 * pi * 3 * double(t) / 32));
    c.set_f64(32 + t, 2 * std::sin(2 * pi * 5 * double(t) / 32));
  }
  Array tones = fft(c);
  ASSERT_EQ(tones.shape(), (std::vector<int64_t>{2, 17}));
  for (int64_t k = 0; k < 17; ++k) {
    EXPECT_NEAR(tones.get_f64(k), k == 3 ? 16.0 : 0.0, 1e-12) << k;
    EXPECT_NEAR(tones.get_f64(17 + k), k == 5 ? 32.0 : 0.0, 1e-12) << k;
  }
  // One sample: |x|. No samples: one bin of 0 per row.
  EXPECT_EQ(fft(array_of(DType::F32, {2, 1}, {-3, 2})).get_f64(0), 3.0);
  Array empty = fft(random_array(DType::F32, {2, 0}, 1));
  ASSERT_EQ(empty.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(testing::to_doubles(empty), (std::vector<double>{0, 0}));
}

TEST(ReferenceFft, MatchesNaiveDftOnRandomRows) {
  struct Tol {
    DType dtype;
    double rtol, atol;
  };
  for (Tol t : {Tol{DType::F64, 1e-11, 1e-11}, Tol{DType::F32, 1e-6, 1e-5}, Tol{DType::F16, 2e-3, 1e-2},
                Tol{DType::BF16, 8e-3, 5e-2}}) {
    for (int64_t n : {2, 7, 11, 64}) {
      Array x = random_array(t.dtype, {3, n}, uint64_t(n), -1, 1);
      Array got = fft(x);
      Array want(t.dtype, {3, n / 2 + 1});
      for (int64_t r = 0; r < 3; ++r) {
        std::vector<double> row = naive_dft(x, r, n);
        for (size_t k = 0; k < row.size(); ++k) want.set_f64(r * (n / 2 + 1) + int64_t(k), row[k]);
      }
      EXPECT_TRUE(arrays_close(got, want, t.rtol, t.atol)) << dtype_name(t.dtype) << " n=" << n;
    }
  }
}

TEST(ReferencePeaks, HandWorkedCases) {
  auto [v, i] = peaks(array_of(DType::F32, {7}, {0, 3, 1, 5, 5, 2, 4}), 3);
  EXPECT_EQ(testing::to_doubles(v), (std::vector<double>{5, 4, 3}));  // a plateau peaks at its start
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{3, 6, 1}));
  EXPECT_EQ(i.dtype(), DType::I64);
  // Fewer peaks than k: value 0, index -1.
  std::tie(v, i) = peaks(array_of(DType::F32, {3}, {1, 2, 3}), 3);
  EXPECT_EQ(testing::to_doubles(v), (std::vector<double>{3, 0, 0}));
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{2, -1, -1}));
  // Equal values: lower index first; the first element peaks when it is >= its neighbour.
  std::tie(v, i) = peaks(array_of(DType::F64, {5}, {2, 1, 2, 1, 2}), 2);
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{0, 2}));
  // NaN is never a peak, and a NaN neighbour fails the comparison.
  std::tie(v, i) = peaks(array_of(DType::F32, {6}, {3, 1, NAN, 2, 0, NAN}), 3);
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{0, -1, -1}));
  std::tie(v, i) = peaks(array_of(DType::F32, {2}, {NAN, NAN}), 1);
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{-1}));
  EXPECT_EQ(v.get_f64(0), 0.0);
  // One element is a peak; -inf can be one.
  std::tie(v, i) = peaks(array_of(DType::F16, {2, 1}, {7, -INFINITY}), 1);
  EXPECT_EQ(testing::to_doubles(v), (std::vector<double>{7, -INFINITY}));
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{0, 0}));
  // Empty rows: every slot filled.
  std::tie(v, i) = peaks(random_array(DType::F32, {2, 0}, 1), 2);
  ASSERT_EQ(v.shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(testing::to_doubles(v), (std::vector<double>{0, 0, 0, 0}));
  EXPECT_EQ(to_ints(i), (std::vector<int64_t>{-1, -1, -1, -1}));
}

TEST(ReferencePeaks, MatchesNaiveSearchOnRandomRows) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    // Values on a 0.5 grid, so that plateaus and ties occur.
    std::vector<double> grid;
    for (double e : testing::to_doubles(random_array(d, {2, 3, 40}, 5, -4, 4))) grid.push_back(std::round(2 * e) / 2);
    Array x = array_of(d, {2, 3, 40}, grid);
    auto [v, i] = peaks(x, 6);
    ASSERT_EQ(v.shape(), (std::vector<int64_t>{2, 3, 6}));
    for (int64_t r = 0; r < 6; ++r) {
      std::vector<std::pair<double, int64_t>> found;
      for (int64_t j = 0; j < 40; ++j) {
        double c = x.get_f64(r * 40 + j);
        bool left = j == 0 || c > x.get_f64(r * 40 + j - 1);
        bool right = j == 39 || c >= x.get_f64(r * 40 + j + 1);
        if (left && right) found.push_back({-c, j});  // sorts by value descending, then index
      }
      std::sort(found.begin(), found.end());
      for (int64_t s = 0; s < 6; ++s) {
        bool have = s < int64_t(found.size());
        EXPECT_EQ(i.get_i64(r * 6 + s), have ? found[size_t(s)].second : -1) << dtype_name(d) << " row " << r;
        EXPECT_EQ(v.get_f64(r * 6 + s), have ? -found[size_t(s)].first : 0.0) << dtype_name(d) << " row " << r;
      }
    }
  }
}

// Runs the kernel directly twice, on results filled with 0xFF bytes and with 0x00 bytes: the runs
// must agree bit for bit (so every element is written) and match the runtime's reference result.
void expect_overwrites(Op op, const std::vector<Array>& in, Attrs attrs = {}) {
  Node node{op, {}, {}, attrs, nullptr, {}};
  std::vector<TensorType> types;
  for (const Array& a : in) types.push_back(TensorType{a.dtype(), make_shape(a.shape())});
  Expected<std::vector<TensorType>> out_types = infer_result_types(node, types);
  ASSERT_TRUE(out_types) << out_types.status().to_string();
  std::vector<Array> ones, zeros;
  for (const TensorType& t : *out_types) {
    ones.emplace_back(t.dtype, static_dims(t.shape));
    ones.back().fill_bytes(0xFF);
    zeros.emplace_back(t.dtype, static_dims(t.shape));
    zeros.back().fill_bytes(0x00);
  }
  ASSERT_TRUE(cpu::run_reference(node, in, ones).is_ok()) << op_keyword(op);
  ASSERT_TRUE(cpu::run_reference(node, in, zeros).is_ok()) << op_keyword(op);
  std::vector<Array> runtime = run(op, in, attrs);
  ASSERT_EQ(runtime.size(), ones.size());
  for (size_t r = 0; r < ones.size(); ++r) {
    EXPECT_TRUE(ones[r].same_data(zeros[r])) << op_keyword(op) << " leaves result elements unwritten";
    EXPECT_TRUE(ones[r].same_data(runtime[r])) << op_keyword(op);
  }
}

TEST(ReferenceSpecial, KernelsOverwriteEveryResultElement) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Array x = random_array(d, {3, 9}, 71);
    expect_overwrites(Op::FftMagnitude, {x});
    expect_overwrites(Op::Peaks, {x}, {{"k", int64_t(2)}});
    expect_overwrites(Op::Peaks, {x}, {{"k", int64_t(8)}});  // more slots than peaks
    expect_overwrites(Op::Constant, {}, {{"value", std::make_shared<const Array>(x.clone())}});
  }
}

}  // namespace
}  // namespace fusebox
