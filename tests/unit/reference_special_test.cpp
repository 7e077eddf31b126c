// Values of the CPU reference kernels of the opaque ops: constant, fft_magnitude, peaks, nonzero,
// nms_select and unique_select.
// Expected values come from closed forms (DFTs of pure tones), hand-worked cases and naive loops
// written here, independent of the kernels' code.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>
#include <cstring>
#include <memory>
#include <utility>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::array_of_ints;
using testing::arrays_close;
using testing::random_array;
using testing::run_op;
using testing::run_op1;
using testing::run_reference_poisoned;
using testing::to_ints;
using testing::try_run_op;

Array fft(const Array& x) {
  std::vector<Array> r = run_op(Op::FftMagnitude, {x});
  return r.empty() ? Array() : r[0];
}

std::pair<Array, Array> peaks(const Array& x, int64_t k) {
  std::vector<Array> r = run_op(Op::Peaks, {x}, {{"k", k}});
  if (r.size() != 2) return {};
  return {r[0], r[1]};
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
    std::vector<Array> r = run_op(Op::Constant, {}, {{"value", std::make_shared<const Array>(v.clone())}});
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

TEST(ReferenceSpecial, KernelsOverwriteEveryResultElement) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64}) {
    Array x = random_array(d, {3, 9}, 71);
    run_reference_poisoned(Op::FftMagnitude, {x});
    run_reference_poisoned(Op::Peaks, {x}, {{"k", int64_t(2)}});
    run_reference_poisoned(Op::Peaks, {x}, {{"k", int64_t(8)}});  // more slots than peaks
    run_reference_poisoned(Op::Constant, {}, {{"value", std::make_shared<const Array>(x.clone())}});
  }
}

// ---- nonzero ----

Attrs count(int64_t k) { return {{"count", Shape{Dim(k)}}}; }

TEST(ReferenceNonZero, CoordinatesOfNonZeroElementsInRowMajorOrder) {
  Array x = random_array(DType::F32, {3, 4, 5}, 40);
  for (int64_t i : {0, 7, 8, 21, 59}) x.set_f64(i, 0.0);
  x.set_f64(3, -0.0), x.set_f64(4, std::nan("")), x.set_f64(30, -INFINITY);
  std::vector<std::array<int64_t, 3>> want;  // nested loops, in the order they visit
  for (int64_t a = 0; a < 3; ++a) {
    for (int64_t b = 0; b < 4; ++b) {
      for (int64_t c = 0; c < 5; ++c) {
        const double v = x.get_f64((a * 4 + b) * 5 + c);
        if (v != 0.0) want.push_back({a, b, c});  // NaN compares unequal to 0
      }
    }
  }
  const int64_t k = int64_t(want.size());
  ASSERT_EQ(k, 60 - 6);  // five zeros and -0
  std::vector<Array> r = run_reference_poisoned(Op::NonZero, {x}, count(k));
  ASSERT_EQ(r.size(), 1u);
  ASSERT_EQ(r[0].shape(), (std::vector<int64_t>{3, k}));
  for (int64_t j = 0; j < k; ++j) {
    for (int64_t d = 0; d < 3; ++d)
      EXPECT_EQ(r[0].get_i64(d * k + j), want[size_t(j)][size_t(d)]) << j << "," << d;
  }
}

TEST(ReferenceNonZero, ScalarsIntegersAndBoolBytes) {
  // A scalar reads as [1] (numpy's rule).
  Array r = run_op1(Op::NonZero, {array_of(DType::F32, {}, {2.5})}, count(1));
  EXPECT_TRUE(r.same_data(Array::from_vector(DType::I64, {1, 1}, std::vector<int64_t>{0})));
  r = run_op1(Op::NonZero, {array_of(DType::I32, {}, {0})}, count(0));
  EXPECT_EQ(r.shape(), (std::vector<int64_t>{1, 0}));
  r = run_op1(Op::NonZero, {array_of(DType::I64, {5}, {0, -3, 0, 0, 9})}, count(2));
  EXPECT_TRUE(r.same_data(Array::from_vector(DType::I64, {1, 2}, std::vector<int64_t>{1, 4})));
  // A bool is its byte: any non-zero byte counts (a caller's buffer may hold 2 or 255).
  Array b(DType::Bool, {2, 2});
  const uint8_t bytes[] = {0, 2, 255, 0};
  std::memcpy(b.raw(), bytes, 4);
  r = run_op1(Op::NonZero, {b}, count(2));
  EXPECT_TRUE(r.same_data(Array::from_vector(DType::I64, {2, 2}, std::vector<int64_t>{0, 1, 1, 0})));
}

TEST(ReferenceNonZero, ACountThatDiffersIsAnError) {
  Expected<std::vector<Array>> r =
      try_run_op(Op::NonZero, {array_of(DType::F32, {4}, {1, 0, 2, 3})}, count(2));
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("the operand has 3 non-zero elements, the result's count is 2"),
            std::string::npos)
      << r.status().message();
}

// ---- nms_select ----

// Hand-worked: four corner boxes in one image, two classes. Class 0 scores 0.9, 0.8, 0.7, 0.6:
// box 1 ([0,0.5]-[1,1.5] against box 0's [0,0]-[1,1]: IoU 0.5/1.5 = 1/3) survives a 0.4 threshold
// but not a 0.3 one; box 2 equals box 0 (IoU 1); box 3 is apart. Class 1 scores box 3 highest and
// box 2 below the score threshold.
TEST(ReferenceNmsSelect, KeptBoxesPerClassInOrderThenMinusOne) {
  Array boxes = array_of(DType::F32, {1, 4, 4}, {0, 0, 1, 1, 0, 0.5, 1, 1.5, 1, 1, 0, 0, 5, 5, 6, 6});
  Array scores = array_of(DType::F32, {1, 2, 4}, {0.9, 0.8, 0.7, 0.6, 0.3, 0.2, 0.05, 0.95});
  auto select = [&](double iou, int64_t max_out) {
    return run_reference_poisoned(Op::NmsSelect,
                                  {boxes, scores, array_of_ints(DType::I64, {1}, {max_out}),
                                   array_of(DType::F32, {}, {iou}), array_of(DType::F32, {1}, {0.1})});
  };
  std::vector<Array> r = select(0.4, 10);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(to_ints(r[0]), (std::vector<int64_t>{0, 1, 3, -1, 3, 0, 1, -1}));
  r = select(0.3, 10);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(to_ints(r[0]), (std::vector<int64_t>{0, 3, -1, -1, 3, 0, -1, -1}));
  r = select(0.4, 1);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(to_ints(r[0]), (std::vector<int64_t>{0, -1, -1, -1, 3, -1, -1, -1}));
  // Without a score threshold and with max_output empty (absent): nothing is kept.
  r = run_reference_poisoned(Op::NmsSelect,
                             {boxes, scores, Array(DType::I64, {0}), array_of(DType::F32, {}, {0.4})});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(to_ints(r[0]), std::vector<int64_t>(8, -1));
}

// ---- unique_select ----

// Hand-worked: the columns of a 2x5 matrix (axis 1) are c0 = (1,2), c1 = (0,5), c2 = (1,2),
// c3 = (0,-1), c4 = (0,5): sorted, the unique columns are c3 < c1 < c0 (first by row 0, then row 1).
TEST(ReferenceUniqueSelect, FirstOccurrencesInverseAndCountsThenPadding) {
  Array x = array_of(DType::F32, {2, 5}, {1, 0, 1, 0, 0, 2, 5, 2, -1, 5});
  for (bool sorted : {true, false}) {
    std::vector<Array> r =
        run_reference_poisoned(Op::UniqueSelect, {x}, {{"axis", int64_t(1)}, {"sorted", sorted}});
    ASSERT_EQ(r.size(), 3u);
    if (sorted) {
      EXPECT_EQ(to_ints(r[0]), (std::vector<int64_t>{3, 1, 0, -1, -1}));
      EXPECT_EQ(to_ints(r[1]), (std::vector<int64_t>{2, 1, 2, 0, 1}));
      EXPECT_EQ(to_ints(r[2]), (std::vector<int64_t>{1, 2, 2, 0, 0}));
    } else {
      EXPECT_EQ(to_ints(r[0]), (std::vector<int64_t>{0, 1, 3, -1, -1}));
      EXPECT_EQ(to_ints(r[1]), (std::vector<int64_t>{0, 1, 0, 2, 1}));
      EXPECT_EQ(to_ints(r[2]), (std::vector<int64_t>{2, 2, 1, 0, 0}));
    }
  }
}

}  // namespace
}  // namespace fusebox
