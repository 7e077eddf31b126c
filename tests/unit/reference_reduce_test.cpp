// Values of the CPU reference kernels of the reductions and normalisations: reduce_*, argmax,
// argmin, softmax, log_softmax, layer_norm, rms_norm and batch_norm. Expected values come from
// hand-worked cases, identities and naive loops written here in double.
#include <gtest/gtest.h>

#include <climits>
#include <cmath>
#include <functional>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::array_of_ints;
using testing::arrays_close;
using testing::random_array;
using testing::run_op1;
using testing::run_reference_poisoned;
using testing::to_ints;
using testing::try_run_op;

Attrs reduce_attrs(std::vector<int64_t> axes, bool keepdims = false) {
  return {{"axes", std::move(axes)}, {"keepdims", keepdims}};
}

// Every reduction of x over `axes` (normalised; empty: all) by a plain loop in double.
struct Naive {
  std::vector<int64_t> shape;  // with keepdims
  std::vector<double> sum, prod, max, min;
  int64_t count = 1;
};

Naive naive_reduce(const Array& x, std::vector<int64_t> axes, bool keepdims) {
  int rank = x.rank();
  std::vector<bool> reduced(size_t(rank), axes.empty());
  for (int64_t a : axes) reduced[size_t(a < 0 ? a + rank : a)] = true;
  Naive n;
  std::vector<int64_t> kept;
  for (int d = 0; d < rank; ++d) {
    if (reduced[size_t(d)]) n.count *= x.shape()[size_t(d)];
    else kept.push_back(x.shape()[size_t(d)]);
    if (!reduced[size_t(d)] || keepdims) n.shape.push_back(reduced[size_t(d)] ? 1 : x.shape()[size_t(d)]);
  }
  int64_t out = 1;
  for (int64_t k : kept) out *= k;
  n.sum.assign(size_t(out), 0.0);
  n.prod.assign(size_t(out), 1.0);
  n.max.assign(size_t(out), -INFINITY);
  n.min.assign(size_t(out), INFINITY);
  for (int64_t i = 0; i < x.numel(); ++i) {
    int64_t rest = i, o = 0, scale = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t coord = rest % x.shape()[size_t(d)];
      rest /= x.shape()[size_t(d)];
      if (!reduced[size_t(d)]) {
        o += coord * scale;
        scale *= x.shape()[size_t(d)];
      }
    }
    double v = x.get_f64(i);
    n.sum[size_t(o)] += v;
    n.prod[size_t(o)] *= v;
    n.max[size_t(o)] = std::max(n.max[size_t(o)], v);
    n.min[size_t(o)] = std::min(n.min[size_t(o)], v);
  }
  return n;
}

Array from(DType d, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  Array a(d, shape);
  for (size_t i = 0; i < v.size(); ++i) a.set_f64(int64_t(i), v[i]);
  return a;
}

TEST(ReferenceReduce, FloatReductionsMatchNaiveLoops) {
  const std::vector<std::vector<int64_t>> axes_cases = {{}, {1}, {0, 2}, {-1}, {-3, -1}, {2, 0, 1}};
  struct Tol {
    DType dtype;
    double rtol;
  };
  for (Tol t : {Tol{DType::F32, 1e-6}, Tol{DType::F64, 1e-14}, Tol{DType::F16, 1e-3}, Tol{DType::BF16, 8e-3}}) {
    Array x = random_array(t.dtype, {3, 4, 5}, 7, -2.0, 2.0);
    Array p = random_array(t.dtype, {3, 4, 5}, 8, 0.6, 1.4);
    for (const auto& axes : axes_cases) {
      for (bool keep : {false, true}) {
        Naive n = naive_reduce(x, axes, keep);
        Naive np = naive_reduce(p, axes, keep);
        Attrs attrs = reduce_attrs(axes, keep);
        std::vector<double> mean = n.sum;
        for (double& m : mean) m /= double(n.count);
        std::string what = std::string(dtype_name(t.dtype)) + " axes " + std::to_string(axes.size()) + (keep ? " keep" : "");
        EXPECT_TRUE(arrays_close(run_op1(Op::ReduceSum, {x}, attrs), from(t.dtype, n.shape, n.sum), t.rtol, 1e-6)) << what;
        EXPECT_TRUE(arrays_close(run_op1(Op::ReduceMean, {x}, attrs), from(t.dtype, n.shape, mean), t.rtol, 1e-7)) << what;
        EXPECT_TRUE(arrays_close(run_op1(Op::ReduceProd, {p}, attrs), from(t.dtype, n.shape, np.prod), t.rtol, 0)) << what;
        // max and min pick an input element: exact.
        EXPECT_TRUE(run_op1(Op::ReduceMax, {x}, attrs).same_data(from(t.dtype, n.shape, n.max))) << what;
        EXPECT_TRUE(run_op1(Op::ReduceMin, {x}, attrs).same_data(from(t.dtype, n.shape, n.min))) << what;
      }
    }
  }
}

TEST(ReferenceReduce, HandWorkedValuesAndShapes) {
  Array x = array_of(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  Array s = run_op1(Op::ReduceSum, {x}, reduce_attrs({1}, true));
  EXPECT_EQ(s.shape(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(testing::to_doubles(s), (std::vector<double>{6, 15}));
  Array m = run_op1(Op::ReduceMean, {x}, reduce_attrs({-2}));
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{3}));
  EXPECT_EQ(testing::to_doubles(m), (std::vector<double>{2.5, 3.5, 4.5}));
  Array all = run_op1(Op::ReduceProd, {x}, reduce_attrs({}, true));
  EXPECT_EQ(all.shape(), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(all.get_f64(0), 720.0);
  EXPECT_EQ(run_op1(Op::ReduceMax, {x}, reduce_attrs({})).shape(), (std::vector<int64_t>{}));
  // Accumulating in double: 1 + 2^-30 * k sums exactly before the single rounding to f32.
  Array tiny = Array(DType::F32, {1025});
  tiny.set_f64(0, 1.0);
  for (int64_t i = 1; i < 1025; ++i) tiny.set_f64(i, std::ldexp(1.0, -30));
  EXPECT_EQ(run_op1(Op::ReduceSum, {tiny}, reduce_attrs({})).get_f64(0), double(float(1.0 + std::ldexp(1.0, -20))));
}

TEST(ReferenceReduce, IntegerSumAndProductWrap) {
  EXPECT_EQ(to_ints(run_op1(Op::ReduceSum, {array_of_ints(DType::I8, {3}, {100, 100, 100})}, reduce_attrs({}))), (std::vector<int64_t>{44}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceSum, {array_of_ints(DType::U8, {2}, {200, 100})}, reduce_attrs({}))), (std::vector<int64_t>{44}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceSum, {array_of_ints(DType::I64, {2}, {INT64_MAX, 1})}, reduce_attrs({}))), (std::vector<int64_t>{INT64_MIN}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceProd, {array_of_ints(DType::I32, {2}, {65536, 65536})}, reduce_attrs({}))), (std::vector<int64_t>{0}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceProd, {array_of_ints(DType::I8, {2}, {-128, -1})}, reduce_attrs({}))), (std::vector<int64_t>{-128}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceMax, {array_of_ints(DType::I64, {3}, {INT64_MIN, -5, INT64_MIN})}, reduce_attrs({}))), (std::vector<int64_t>{-5}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceMin, {array_of_ints(DType::U8, {3}, {255, 7, 9})}, reduce_attrs({}))), (std::vector<int64_t>{7}));
  // Random i32 rows against int64 sums wrapped to 32 bits.
  Array x = random_array(DType::I32, {4, 50}, 3, -2e9, 2e9);
  Array got = run_op1(Op::ReduceSum, {x}, reduce_attrs({1}));
  for (int64_t r = 0; r < 4; ++r) {
    int64_t sum = 0;
    for (int64_t c = 0; c < 50; ++c) sum += x.get_i64(r * 50 + c);
    EXPECT_EQ(got.get_i64(r), int64_t(int32_t(uint32_t(uint64_t(sum)))));
  }
}

TEST(ReferenceReduce, NanPropagatesThroughMaxAndMin) {
  Array x = array_of(DType::F32, {3, 3}, {1, NAN, 3, -INFINITY, -INFINITY, -INFINITY, NAN, 2, 1});
  Array mx = run_op1(Op::ReduceMax, {x}, reduce_attrs({1}));
  Array mn = run_op1(Op::ReduceMin, {x}, reduce_attrs({1}));
  EXPECT_TRUE(std::isnan(mx.get_f64(0)));
  EXPECT_EQ(mx.get_f64(1), -INFINITY);
  EXPECT_TRUE(std::isnan(mx.get_f64(2)));
  EXPECT_TRUE(std::isnan(mn.get_f64(0)));
  EXPECT_TRUE(std::isnan(mn.get_f64(2)));
  EXPECT_TRUE(std::isnan(run_op1(Op::ReduceSum, {x}, reduce_attrs({0})).get_f64(0)));
}

TEST(ReferenceReduce, EmptyReductions) {
  Array e = random_array(DType::F32, {0, 3}, 1);
  Array s = run_op1(Op::ReduceSum, {e}, reduce_attrs({0}));
  EXPECT_EQ(testing::to_doubles(s), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(testing::to_doubles(run_op1(Op::ReduceProd, {e}, reduce_attrs({0}))), (std::vector<double>{1, 1, 1}));
  Array m = run_op1(Op::ReduceMean, {e}, reduce_attrs({0}, true));
  EXPECT_EQ(m.shape(), (std::vector<int64_t>{1, 3}));
  EXPECT_TRUE(std::isnan(m.get_f64(0)));
  EXPECT_EQ(run_op1(Op::ReduceMax, {e}, reduce_attrs({1})).shape(), (std::vector<int64_t>{0}));
  EXPECT_EQ(to_ints(run_op1(Op::ReduceSum, {array_of_ints(DType::I32, {2, 0}, {})}, reduce_attrs({1}))), (std::vector<int64_t>{0, 0}));
  EXPECT_FALSE(try_run_op(Op::ReduceMax, {e}, reduce_attrs({0})));  // max of nothing: an error
  EXPECT_EQ(run_op1(Op::ArgMax, {e}, {{"axis", int64_t(1)}}).shape(), (std::vector<int64_t>{0}));
}

TEST(ReferenceArgReduce, FirstOccurrenceAndNanWin) {
  Array x = array_of(DType::F32, {2, 4}, {1, 3, 3, 2, 5, NAN, 7, NAN});
  EXPECT_EQ(to_ints(run_op1(Op::ArgMax, {x}, {{"axis", int64_t(1)}})), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::ArgMin, {x}, {{"axis", int64_t(-1)}})), (std::vector<int64_t>{0, 1}));
  Array k = run_op1(Op::ArgMax, {x}, {{"axis", int64_t(0)}, {"keepdims", true}});
  EXPECT_EQ(k.dtype(), DType::I64);
  EXPECT_EQ(k.shape(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(to_ints(k), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(to_ints(run_op1(Op::ArgMin, {array_of_ints(DType::I8, {5}, {3, -128, 4, -128, 127})}, {{"axis", int64_t(0)}})),
            (std::vector<int64_t>{1}));
  // Random data against a naive scan along the middle axis, several dtypes.
  for (DType d : {DType::F32, DType::F16, DType::I32, DType::U8, DType::F64}) {
    Array r = random_array(d, {3, 6, 4}, 9, -5, 5);
    Array amax = run_op1(Op::ArgMax, {r}, {{"axis", int64_t(-2)}});
    Array amin = run_op1(Op::ArgMin, {r}, {{"axis", int64_t(1)}, {"keepdims", true}});
    EXPECT_EQ(amin.shape(), (std::vector<int64_t>{3, 1, 4}));
    for (int64_t o = 0; o < 3; ++o) {
      for (int64_t i = 0; i < 4; ++i) {
        int64_t bmax = 0, bmin = 0;
        for (int64_t k2 = 1; k2 < 6; ++k2) {
          double v = r.get_f64((o * 6 + k2) * 4 + i);
          if (v > r.get_f64((o * 6 + bmax) * 4 + i)) bmax = k2;
          if (v < r.get_f64((o * 6 + bmin) * 4 + i)) bmin = k2;
        }
        EXPECT_EQ(amax.get_i64(o * 4 + i), bmax) << dtype_name(d);
        EXPECT_EQ(amin.get_i64(o * 4 + i), bmin) << dtype_name(d);
      }
    }
  }
}

// ---- softmax and the norms -----------------------------------------------------------------

TEST(ReferenceSoftmax, HandWorkedAndStable) {
  Array x = array_of(DType::F64, {3, 2}, {0.0, std::log(2.0), 1000.0, 1000.0, -INFINITY, 0.0});
  Array s = run_op1(Op::Softmax, {x});
  std::vector<double> want = {1.0 / 3, 2.0 / 3, 0.5, 0.5, 0.0, 1.0};
  for (int64_t i = 0; i < 6; ++i) EXPECT_NEAR(s.get_f64(i), want[size_t(i)], 1e-15) << i;
  Array l = run_op1(Op::LogSoftmax, {x});
  EXPECT_NEAR(l.get_f64(0), std::log(1.0 / 3), 1e-15);
  EXPECT_NEAR(l.get_f64(2), std::log(0.5), 1e-15);
  EXPECT_EQ(l.get_f64(4), -INFINITY);
  // A NaN poisons its own slice only.
  Array n = run_op1(Op::Softmax, {array_of(DType::F32, {2, 2}, {NAN, 1, 1, 1})});
  EXPECT_TRUE(std::isnan(n.get_f64(0)) && std::isnan(n.get_f64(1)));
  EXPECT_EQ(n.get_f64(2), 0.5);
}

TEST(ReferenceSoftmax, MatchesNaiveFormulaOnEveryAxis) {
  for (DType d : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    double rtol = d == DType::F32 ? 1e-6 : d == DType::F64 ? 1e-14 : d == DType::F16 ? 1e-3 : 8e-3;
    Array x = random_array(d, {3, 4, 5}, 17, -3, 3);
    for (int64_t axis : {0, 1, 2, -1, -3}) {
      int a = int(axis < 0 ? axis + 3 : axis);
      Array s = run_op1(Op::Softmax, {x}, {{"axis", axis}});
      Array l = run_op1(Op::LogSoftmax, {x}, {{"axis", axis}});
      Array want_s(d, {3, 4, 5}), want_l(d, {3, 4, 5});
      int64_t inner = a == 2 ? 1 : a == 1 ? 5 : 20, n = x.shape()[size_t(a)];
      for (int64_t i = 0; i < 60; ++i) {
        int64_t start = i - ((i / inner) % n) * inner;  // the slice's first element
        double sum = 0;
        for (int64_t k = 0; k < n; ++k) sum += std::exp(x.get_f64(start + k * inner));
        want_s.set_f64(i, std::exp(x.get_f64(i)) / sum);
        want_l.set_f64(i, x.get_f64(i) - std::log(sum));
      }
      EXPECT_TRUE(arrays_close(s, want_s, rtol, 1e-7)) << dtype_name(d) << " axis " << axis;
      EXPECT_TRUE(arrays_close(l, want_l, rtol, 1e-6)) << dtype_name(d) << " axis " << axis;
    }
  }
  // Identities: slices sum to 1 and log_softmax = log(softmax).
  Array y = random_array(DType::F64, {6, 9}, 18, -20, 20);
  Array s = run_op1(Op::Softmax, {y}), l = run_op1(Op::LogSoftmax, {y});
  for (int64_t r = 0; r < 6; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < 9; ++c) {
      sum += s.get_f64(r * 9 + c);
      EXPECT_NEAR(l.get_f64(r * 9 + c), std::log(s.get_f64(r * 9 + c)), 1e-12);
    }
    EXPECT_NEAR(sum, 1.0, 1e-15);
  }
}

// Naive layer_norm / rms_norm over the last `dims` axes with per-position scale and bias
// (nullptr: absent), indexed by the position inside the normalised block.
Array naive_norm(const Array& x, int64_t block, double eps, bool rms, const std::function<double(int64_t)>& scale,
                 const std::function<double(int64_t)>& bias) {
  Array out(x.dtype(), x.shape());
  for (int64_t start = 0; start < x.numel(); start += block) {
    double mean = 0, var = 0;
    for (int64_t k = 0; k < block; ++k) mean += x.get_f64(start + k) / double(block);
    for (int64_t k = 0; k < block; ++k) {
      double v = x.get_f64(start + k);
      var += rms ? v * v : (v - mean) * (v - mean);
    }
    double denom = std::sqrt(var / double(block) + eps);
    for (int64_t k = 0; k < block; ++k) {
      double v = ((x.get_f64(start + k) - (rms ? 0.0 : mean)) / denom);
      out.set_f64(start + k, v * (scale ? scale(k) : 1.0) + (bias ? bias(k) : 0.0));
    }
  }
  return out;
}

TEST(ReferenceNorm, LayerNormMatchesNaiveAndNormalises) {
  Array x = random_array(DType::F64, {4, 3, 8}, 27, -5, 5);
  Array y = run_op1(Op::LayerNorm, {x}, {{"eps", 0.0}});
  for (int64_t r = 0; r < 12; ++r) {
    double mean = 0, sq = 0;
    for (int64_t c = 0; c < 8; ++c) mean += y.get_f64(r * 8 + c) / 8;
    for (int64_t c = 0; c < 8; ++c) sq += (y.get_f64(r * 8 + c) - mean) * (y.get_f64(r * 8 + c) - mean) / 8;
    EXPECT_NEAR(mean, 0.0, 1e-14);
    EXPECT_NEAR(sq, 1.0, 1e-13);
  }
  for (DType d : {DType::F32, DType::F64, DType::F16}) {
    double rtol = d == DType::F16 ? 2e-3 : 1e-6;
    Array xd = random_array(d, {4, 3, 8}, 28, -5, 5);
    Array scale = random_array(d, {8}, 29, 0.5, 2), bias = random_array(d, {8}, 30);
    Array got = run_op1(Op::LayerNorm, {xd, scale, bias});
    Array want = naive_norm(xd, 8, 1e-5, false, [&](int64_t k) { return scale.get_f64(k); },
                            [&](int64_t k) { return bias.get_f64(k); });
    EXPECT_TRUE(arrays_close(got, want, rtol, 1e-5)) << dtype_name(d);
    // Over the last two axes, scale [1, 8] broadcast over the 3 rows, bias [3, 1] over columns.
    Array s2 = random_array(d, {1, 8}, 31, 0.5, 2), b2 = random_array(d, {3, 1}, 32);
    got = run_op1(Op::LayerNorm, {xd, s2, b2}, {{"axis", int64_t(-2)}, {"eps", 1e-3}});
    want = naive_norm(xd, 24, 1e-3, false, [&](int64_t k) { return s2.get_f64(k % 8); },
                      [&](int64_t k) { return b2.get_f64(k / 8); });
    EXPECT_TRUE(arrays_close(got, want, rtol, 1e-5)) << dtype_name(d);
  }
  // A scale that does not fit the normalised shape at run time is an error, not a crash.
  Expected<std::vector<Array>> bad = try_run_op(Op::LayerNorm, {random_array(DType::F32, {2, 1}, 1), random_array(DType::F32, {5}, 2)});
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("scale"), std::string::npos) << bad.status().message();
}

TEST(ReferenceNorm, RmsNormMatchesNaive) {
  Array x = random_array(DType::F64, {5, 16}, 37, -3, 3);
  Array y = run_op1(Op::RmsNorm, {x}, {{"eps", 0.0}});
  for (int64_t r = 0; r < 5; ++r) {
    double sq = 0;
    for (int64_t c = 0; c < 16; ++c) sq += y.get_f64(r * 16 + c) * y.get_f64(r * 16 + c) / 16;
    EXPECT_NEAR(sq, 1.0, 1e-14);
  }
  for (DType d : {DType::F32, DType::BF16, DType::F64}) {
    double rtol = d == DType::BF16 ? 8e-3 : 1e-6;
    Array xd = random_array(d, {2, 3, 16}, 38, -3, 3), scale = random_array(d, {16}, 39, 0.5, 2);
    Array want = naive_norm(xd, 16, 1e-6, true, [&](int64_t k) { return scale.get_f64(k); }, nullptr);
    EXPECT_TRUE(arrays_close(run_op1(Op::RmsNorm, {xd, scale}), want, rtol, 1e-5)) << dtype_name(d);
    want = naive_norm(xd, 48, 0.5, true, nullptr, nullptr);
    EXPECT_TRUE(arrays_close(run_op1(Op::RmsNorm, {xd}, {{"axis", int64_t(1)}, {"eps", 0.5}}), want, rtol, 1e-5));
  }
}

TEST(ReferenceNorm, BatchNormPerChannel) {
  // x [2, 1, 2]: channel 0 holds 1, 2, 3, 4; mean 2 and var 4 give (x - 2) / 2.
  Array x = array_of(DType::F32, {2, 1, 2}, {1, 2, 3, 4});
  auto one = [](double v) { return array_of(DType::F32, {1}, {v}); };
  Array y = run_op1(Op::BatchNorm, {x, one(3), one(1), one(2), one(4)}, {{"eps", 0.0}});
  EXPECT_EQ(testing::to_doubles(y), (std::vector<double>{-0.5, 1, 2.5, 4}));
  for (DType d : {DType::F32, DType::F64, DType::F16}) {
    Array xd = random_array(d, {2, 3, 4, 5}, 47, -4, 4);
    Array scale = random_array(d, {3}, 48), bias = random_array(d, {3}, 49);
    Array mean = random_array(d, {3}, 50), var = random_array(d, {3}, 51, 0.1, 3);
    Array want(d, xd.shape());
    for (int64_t i = 0; i < xd.numel(); ++i) {
      int64_t c = (i / 20) % 3;
      want.set_f64(i, (xd.get_f64(i) - mean.get_f64(c)) / std::sqrt(var.get_f64(c) + 1e-5) * scale.get_f64(c) +
                          bias.get_f64(c));
    }
    EXPECT_TRUE(arrays_close(run_op1(Op::BatchNorm, {xd, scale, bias, mean, var}), want,
                             d == DType::F16 ? 2e-3 : 1e-6, 1e-5)) << dtype_name(d);
  }
}

TEST(ReferenceNorm, EmptyTensors) {
  Array e = random_array(DType::F32, {0, 4}, 1);
  EXPECT_EQ(run_op1(Op::Softmax, {e}).shape(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(run_op1(Op::LogSoftmax, {e}, {{"axis", int64_t(0)}}).shape(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(run_op1(Op::LayerNorm, {e}).shape(), (std::vector<int64_t>{0, 4}));
  EXPECT_EQ(run_op1(Op::RmsNorm, {random_array(DType::F32, {3, 0}, 2)}).shape(), (std::vector<int64_t>{3, 0}));
  Array c = random_array(DType::F32, {3}, 3);
  EXPECT_EQ(run_op1(Op::BatchNorm, {random_array(DType::F32, {0, 3, 2}, 4), c, c, c, c}).shape(),
            (std::vector<int64_t>{0, 3, 2}));
}

TEST(ReferenceReduce, KernelsOverwriteEveryResultElement) {
  for (DType d : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64}) {
    Array x = random_array(d, {3, 4, 5}, 61, -9, 9);
    for (Op op : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
      run_reference_poisoned(op, {x}, reduce_attrs({1}));
      run_reference_poisoned(op, {x}, reduce_attrs({0, -1}, true));
    }
    for (Op op : {Op::ArgMax, Op::ArgMin}) run_reference_poisoned(op, {x}, {{"axis", int64_t(-1)}});
    if (!is_float(d)) continue;
    run_reference_poisoned(Op::ReduceMean, {x}, reduce_attrs({}));
    for (Op op : {Op::Softmax, Op::LogSoftmax}) run_reference_poisoned(op, {x}, {{"axis", int64_t(1)}});
    Array s = random_array(d, {5}, 62), b = random_array(d, {4, 1}, 63);
    run_reference_poisoned(Op::LayerNorm, {x, s, b}, {{"axis", int64_t(1)}});
    run_reference_poisoned(Op::RmsNorm, {x, s});
    Array c = random_array(d, {4}, 64, 0.5, 2);
    run_reference_poisoned(Op::BatchNorm, {x.reshaped({3, 4, 5}), c, c, c, c});
  }
}

}  // namespace
}  // namespace fusebox
