// Tests of the CPU reference resize kernel against hand-computed values: every coordinate mode
// and nearest mode, 2x up and down, non-integer ratios (3->5, 5->3), one-pixel outputs, sizes
// versus scales, bilinear on 2-D and NCHW inputs, and u8/i8 rounding.
//
// The source coordinate of output x (in -> out, scale s = out/in unless scales are given):
//   half_pixel (x+0.5)/s-0.5   pytorch_half_pixel same, 0 when out == 1
//   align_corners x*(in-1)/(out-1), 0 when out == 1   asymmetric x/s
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using testing::to_doubles;
using testing::try_run_op;
using D = std::vector<double>;
using I64s = std::vector<int64_t>;

Attrs resize_attrs(std::string mode, std::string coordinate, std::string nearest = "round_prefer_floor") {
  return Attrs{{"mode", std::move(mode)}, {"coordinate", std::move(coordinate)}, {"nearest_mode", std::move(nearest)}};
}

// Resizes a 1-D f32 array to `out` elements.
D resize1d(const D& x, int64_t out, Attrs attrs) {
  attrs.set("sizes", make_shape({out}));
  auto y = run_reference_poisoned(Op::Resize, {array_of(DType::F32, {int64_t(x.size())}, x)}, std::move(attrs));
  return y.empty() ? D{-999} : to_doubles(y[0]);
}

D nearest(const D& x, int64_t out, const char* coordinate, const char* mode) {
  return resize1d(x, out, resize_attrs("nearest", coordinate, mode));
}

::testing::AssertionResult near(const D& actual, const D& expected) {
  if (actual.size() != expected.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (size_t i = 0; i < actual.size(); ++i) {
    if (!(std::fabs(actual[i] - expected[i]) <= 1e-4 * (1 + std::fabs(expected[i])))) {
      return ::testing::AssertionFailure() << "element " << i << ": " << actual[i] << " vs " << expected[i];
    }
  }
  return ::testing::AssertionSuccess();
}

D linear(const D& x, int64_t out, const char* coordinate) {
  return resize1d(x, out, resize_attrs("linear", coordinate));
}

const D k4{10, 20, 30, 40};
const D k3{10, 20, 30};
const D k5{10, 20, 30, 40, 50};

TEST(ReferenceResize, NearestTwiceUpAndDown) {
  // half_pixel 4->8: x/2 - 0.25 = -0.25 0.25 0.75 1.25 ... 3.25
  EXPECT_EQ(nearest(k4, 8, "half_pixel", "round_prefer_floor"), (D{10, 10, 20, 20, 30, 30, 40, 40}));
  // asymmetric 4->8: x/2 = 0 0.5 1 1.5 ... 3.5: the ties decide.
  EXPECT_EQ(nearest(k4, 8, "asymmetric", "round_prefer_floor"), (D{10, 10, 20, 20, 30, 30, 40, 40}));
  EXPECT_EQ(nearest(k4, 8, "asymmetric", "round_prefer_ceil"), (D{10, 20, 20, 30, 30, 40, 40, 40}));
  EXPECT_EQ(nearest(k4, 8, "asymmetric", "floor"), (D{10, 10, 20, 20, 30, 30, 40, 40}));
  EXPECT_EQ(nearest(k4, 8, "asymmetric", "ceil"), (D{10, 20, 20, 30, 30, 40, 40, 40}));
  // half_pixel 4->2: 2x + 0.5 = 0.5, 2.5.
  EXPECT_EQ(nearest(k4, 2, "half_pixel", "round_prefer_floor"), (D{10, 30}));
  EXPECT_EQ(nearest(k4, 2, "half_pixel", "round_prefer_ceil"), (D{20, 40}));
  EXPECT_EQ(nearest(k4, 2, "asymmetric", "round_prefer_ceil"), (D{10, 30}));
  // align_corners 4->2: x*3/1 = 0, 3.
  EXPECT_EQ(nearest(k4, 2, "align_corners", "round_prefer_floor"), (D{10, 40}));
}

TEST(ReferenceResize, NearestNonIntegerRatios) {
  // asymmetric 3->5: 0 0.6 1.2 1.8 2.4
  EXPECT_EQ(nearest(k3, 5, "asymmetric", "floor"), (D{10, 10, 20, 20, 30}));
  EXPECT_EQ(nearest(k3, 5, "asymmetric", "ceil"), (D{10, 20, 30, 30, 30}));
  EXPECT_EQ(nearest(k3, 5, "asymmetric", "round_prefer_floor"), (D{10, 20, 20, 30, 30}));
  // half_pixel 3->5: -0.2 0.4 1.0 1.6 2.2
  EXPECT_EQ(nearest(k3, 5, "half_pixel", "round_prefer_floor"), (D{10, 10, 20, 30, 30}));
  EXPECT_EQ(nearest(k3, 5, "half_pixel", "floor"), (D{10, 10, 20, 20, 30}));
  EXPECT_EQ(nearest(k3, 5, "half_pixel", "ceil"), (D{10, 20, 20, 30, 30}));
  EXPECT_EQ(nearest(k3, 5, "pytorch_half_pixel", "round_prefer_ceil"), (D{10, 10, 20, 30, 30}));
  // align_corners 3->5: 0 0.5 1 1.5 2
  EXPECT_EQ(nearest(k3, 5, "align_corners", "round_prefer_floor"), (D{10, 10, 20, 20, 30}));
  EXPECT_EQ(nearest(k3, 5, "align_corners", "round_prefer_ceil"), (D{10, 20, 20, 30, 30}));
  // half_pixel 5->3: 1/3, 2, 11/3
  EXPECT_EQ(nearest(k5, 3, "half_pixel", "round_prefer_floor"), (D{10, 30, 50}));
  EXPECT_EQ(nearest(k5, 3, "half_pixel", "floor"), (D{10, 30, 40}));
  EXPECT_EQ(nearest(k5, 3, "half_pixel", "ceil"), (D{20, 30, 50}));
  // asymmetric 5->3: 0, 5/3, 10/3
  EXPECT_EQ(nearest(k5, 3, "asymmetric", "round_prefer_floor"), (D{10, 30, 40}));
  // align_corners 5->3: 0, 2, 4
  EXPECT_EQ(nearest(k5, 3, "align_corners", "floor"), (D{10, 30, 50}));
}

TEST(ReferenceResize, OnePixelOutputs) {
  // half_pixel 4->1: 0.5/0.25 - 0.5 = 1.5; the other modes give 0.
  EXPECT_EQ(nearest(k4, 1, "half_pixel", "round_prefer_floor"), (D{20}));
  EXPECT_EQ(nearest(k4, 1, "half_pixel", "round_prefer_ceil"), (D{30}));
  EXPECT_EQ(nearest(k4, 1, "pytorch_half_pixel", "round_prefer_ceil"), (D{10}));
  EXPECT_EQ(nearest(k4, 1, "align_corners", "ceil"), (D{10}));
  EXPECT_EQ(nearest(k4, 1, "asymmetric", "ceil"), (D{10}));
  EXPECT_TRUE(near(linear(k4, 1, "half_pixel"), D{25}));
  EXPECT_TRUE(near(linear(k4, 1, "pytorch_half_pixel"), D{10}));
  EXPECT_TRUE(near(linear(k4, 1, "align_corners"), D{10}));
  EXPECT_TRUE(near(linear(k4, 1, "asymmetric"), D{10}));
  // One input pixel: every output repeats it.
  EXPECT_TRUE(near(linear(D{7}, 3, "half_pixel"), D{7, 7, 7}));
  EXPECT_TRUE(near(linear(D{7}, 3, "align_corners"), D{7, 7, 7}));
}

TEST(ReferenceResize, LinearOneDimension) {
  // half_pixel 4->8: coordinates clamped to [0, 3] at the borders.
  EXPECT_TRUE(near(linear(k4, 8, "half_pixel"), D{10, 12.5, 17.5, 22.5, 27.5, 32.5, 37.5, 40}));
  EXPECT_TRUE(near(linear(k4, 8, "pytorch_half_pixel"), D{10, 12.5, 17.5, 22.5, 27.5, 32.5, 37.5, 40}));
  EXPECT_TRUE(near(linear(k4, 8, "asymmetric"), D{10, 15, 20, 25, 30, 35, 40, 40}));
  D corners;
  for (int x = 0; x < 8; ++x) corners.push_back(10 + 10 * (x * 3.0 / 7.0));
  EXPECT_TRUE(near(linear(k4, 8, "align_corners"), corners));
  EXPECT_TRUE(near(linear(k4, 2, "half_pixel"), D{15, 35}));
  EXPECT_TRUE(near(linear(k4, 2, "asymmetric"), D{10, 30}));
  EXPECT_TRUE(near(linear(k3, 5, "half_pixel"), D{10, 14, 20, 26, 30}));
  EXPECT_TRUE(near(linear(k3, 5, "align_corners"), D{10, 15, 20, 25, 30}));
  EXPECT_TRUE(near(linear(k3, 5, "asymmetric"), D{10, 16, 22, 28, 30}));
  EXPECT_TRUE(near(linear(k5, 3, "half_pixel"), D{10 + 10.0 / 3, 30, 40 + 20.0 / 3}));
  EXPECT_TRUE(near(linear(k5, 3, "asymmetric"), D{10, 20 + 20.0 / 3, 40 + 10.0 / 3}));
  EXPECT_TRUE(near(linear(k5, 3, "align_corners"), D{10, 30, 50}));
}

TEST(ReferenceResize, ScalesAreUsedAsGiven) {
  // scales 1.5 on 3 elements: 4 outputs, coordinates (x+0.5)/1.5-0.5 = -1/6 0.5 7/6 11/6 (not
  // the 4/3 that sizes=[4] would use: -0.125 0.625 1.375 2.125).
  Attrs a = resize_attrs("nearest", "half_pixel");
  a.set("scales", std::vector<double>{1.5});
  auto y = run_reference_poisoned(Op::Resize, {array_of(DType::F32, {3}, k3)}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{10, 10, 20, 30}));
  EXPECT_EQ(nearest(k3, 4, "half_pixel", "round_prefer_floor"), (D{10, 20, 20, 30}));
  a = resize_attrs("linear", "half_pixel");
  a.set("scales", std::vector<double>{1.5});
  y = run_reference_poisoned(Op::Resize, {array_of(DType::F32, {3}, k3)}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(near(to_doubles(y[0]), D{10, 15, 20 + 10.0 / 6, 20 + 50.0 / 6}));
}

TEST(ReferenceResize, BilinearTwoDimensions) {
  // [[0, 10], [20, 30]] -> 4x4 half_pixel: both axes use coordinates 0 0.25 0.75 1, and the
  // plane is 20*cy + 10*cx.
  for (DType t : {DType::F32, DType::F64, DType::F16, DType::BF16}) {
    Array x = array_of(t, {2, 2}, {0, 10, 20, 30});
    Attrs a = resize_attrs("linear", "half_pixel");
    a.set("sizes", make_shape({4, 4}));
    auto y = run_reference_poisoned(Op::Resize, {x}, a);
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(t, {4, 4}, {0, 2.5, 7.5, 10, 5, 7.5, 12.5, 15,  //
                                                        15, 17.5, 22.5, 25, 20, 22.5, 27.5, 30}),
                             1e-6, 1e-5))
        << dtype_name(t);
  }
}

TEST(ReferenceResize, NchwResizesEachPlaneAlone) {
  Array x = random_array(DType::F32, {2, 3, 3, 4}, 21);
  x.set_f64(1 * 12 + 5, NAN);  // a NaN in (n=0, c=1) must not leak into other channels
  Attrs a = resize_attrs("linear", "align_corners");
  a.set("sizes", make_shape({2, 3, 5, 7}));
  auto y = run_reference_poisoned(Op::Resize, {x}, a);
  ASSERT_EQ(y.size(), 1u);
  Attrs plane_attrs = resize_attrs("linear", "align_corners");
  plane_attrs.set("sizes", make_shape({5, 7}));
  for (int64_t p = 0; p < 6; ++p) {
    Array plane(DType::F32, {3, 4});
    for (int64_t i = 0; i < 12; ++i) plane.set_f64(i, x.get_f64(p * 12 + i));
    auto expected = run_reference_poisoned(Op::Resize, {plane}, plane_attrs);
    ASSERT_EQ(expected.size(), 1u);
    Array got(DType::F32, {5, 7});
    int nans = 0;
    for (int64_t i = 0; i < 35; ++i) {
      got.set_f64(i, y[0].get_f64(p * 35 + i));
      nans += std::isnan(got.get_f64(i));
    }
    EXPECT_TRUE(arrays_close(got, expected[0], 0, 0)) << "plane " << p;
    EXPECT_EQ(nans > 0, p == 1) << "plane " << p;
  }
  // Hand check of one interior value: align_corners 3->5 rows 0 0.5 1 1.5 2, 4->7 cols
  // 0 0.5 1 ... 3; output (1, 1) is the mean of the top-left 2x2 block of plane 0.
  double mean = (x.get_f64(0) + x.get_f64(1) + x.get_f64(4) + x.get_f64(5)) / 4;
  EXPECT_NEAR(y[0].get_f64(1 * 7 + 1), mean, 1e-6);
}

TEST(ReferenceResize, IntegerLinearRoundsHalfAwayFromZero) {
  // align_corners 2->3 puts the middle output exactly between the inputs.
  Attrs a = resize_attrs("linear", "align_corners");
  a.set("sizes", make_shape({3}));
  auto y = run_reference_poisoned(Op::Resize, {array_of(DType::U8, {2}, {10, 11})}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{10, 11, 11}));
  y = run_reference_poisoned(Op::Resize, {array_of(DType::I8, {2}, {-10, -11})}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{-10, -11, -11}));
  y = run_reference_poisoned(Op::Resize, {array_of(DType::U8, {2}, {0, 255})}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{0, 128, 255}));  // 127.5 rounds up, not truncated to 127

  // A u8 image: [[0, 255], [255, 0]] -> 4x4 half_pixel, value 255*(cx(1-cy) + cy(1-cx)).
  a = resize_attrs("linear", "half_pixel");
  a.set("sizes", make_shape({4, 4}));
  y = run_reference_poisoned(Op::Resize, {array_of(DType::U8, {2, 2}, {0, 255, 255, 0})}, a);
  ASSERT_EQ(y.size(), 1u);
  const double c[] = {0, 0.25, 0.75, 1};
  D expected;
  for (double cy : c)
    for (double cx : c) expected.push_back(std::round(255 * (cx * (1 - cy) + cy * (1 - cx))));
  EXPECT_EQ(to_doubles(y[0]), expected);
  EXPECT_EQ(expected[1], 64);  // 63.75
  EXPECT_EQ(expected[5], 96);  // 95.625
}

TEST(ReferenceResize, NearestCopiesEveryDTypeExactly) {
  for (DType t : {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8, DType::U8, DType::I32, DType::I64}) {
    Array x = random_array(t, {2, 3}, 8, -100, 100);
    if (t == DType::I64) x.set_i64(0, (int64_t(1) << 60) + 1);  // not representable in double
    Attrs a = resize_attrs("nearest", "asymmetric", "floor");
    a.set("sizes", make_shape({4, 6}));
    auto y = run_reference_poisoned(Op::Resize, {x}, a);
    ASSERT_EQ(y.size(), 1u);
    for (int64_t r = 0; r < 4; ++r) {
      for (int64_t col = 0; col < 6; ++col) {
        ASSERT_EQ(y[0].get_i64(r * 6 + col), x.get_i64((r / 2) * 3 + col / 2)) << dtype_name(t);
      }
    }
    if (t == DType::I64) {
      EXPECT_EQ(y[0].get_i64(1), (int64_t(1) << 60) + 1);
    }
  }
}

TEST(ReferenceResize, EmptyInputDimIsAnError) {
  Attrs a = resize_attrs("linear", "half_pixel");
  a.set("sizes", make_shape({3, 4}));
  auto r = try_run_op(Op::Resize, {Array(DType::F32, {0, 2})}, a);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("empty dim 0"), std::string::npos) << r.status().message();
  // Scales on an empty input give an empty output: nothing to compute.
  a = resize_attrs("linear", "half_pixel");
  a.set("scales", std::vector<double>{2.0, 2.0});
  auto y = run_reference_poisoned(Op::Resize, {Array(DType::F32, {0, 2})}, a);
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].shape(), (I64s{0, 4}));
}

}  // namespace
}  // namespace fusebox
