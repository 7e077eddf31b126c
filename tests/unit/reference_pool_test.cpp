// Tests of the CPU reference pooling kernels (max_pool2d, avg_pool2d, global_avg_pool): hand
// cases for stride, padding (which never wins a max), dilation, ceil_mode and count_include_pad
// both ways, NaN propagation, and random shapes against a naive version written here that pads
// the input explicitly.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "ir/layout.h"
#include "ir/shape_inference.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_f32;
using testing::array_of;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using I64s = std::vector<int64_t>;

Array pool(Op op, const Array& x, Attrs attrs) {
  auto y = run_reference_poisoned(op, {x}, std::move(attrs));
  return y.empty() ? Array(DType::F32, {0}) : y[0];
}

// 1 5 2 0 / 3 4 9 7 / 8 6 1 2 / 0 3 5 4
Array grid4() { return array_f32({1, 1, 4, 4}, {1, 5, 2, 0, 3, 4, 9, 7, 8, 6, 1, 2, 0, 3, 5, 4}); }

TEST(ReferencePool, MaxPoolStrideAndPadding) {
  Array x = grid4();
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}}}),
                           array_f32({1, 1, 2, 2}, {5, 9, 8, 5})));
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}}),
                           array_f32({1, 1, 3, 3}, {5, 9, 9, 8, 9, 9, 8, 6, 5})));
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{3, 3}}, {"stride", I64s{2, 2}},
                                                   {"pad", I64s{1, 1, 1, 1}}}),
                           array_f32({1, 1, 2, 2}, {5, 9, 8, 9})));
  // Asymmetric pads [top, left, bottom, right] = [1, 0, 0, 1].
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}},
                                                   {"pad", I64s{1, 0, 0, 1}}}),
                           array_f32({1, 1, 2, 2}, {5, 2, 8, 9})));
  // Dilation 2: each window reads a 2x2 lattice spread over 3x3.
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}, {"dilation", I64s{2, 2}}}),
                           array_f32({1, 1, 2, 2}, {8, 6, 9, 7})));
}

TEST(ReferencePool, MaxPoolPaddingNeverWins) {
  // All values negative: a zero pad would win every border window.
  Array x = array_f32({1, 1, 2, 2}, {-1, -2, -3, -4});
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}, {"pad", I64s{1, 1, 1, 1}}}),
                           array_f32({1, 1, 3, 3}, {-1, -1, -2, -1, -1, -2, -3, -3, -4})));
  // ceil_mode adds windows hanging over the edge; only their in-bounds part counts.
  Array y = array_f32({1, 1, 3, 3}, {-1, -2, -3, -4, -5, -6, -7, -8, -9});
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, y, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}}, {"ceil_mode", true}}),
                           array_f32({1, 1, 2, 2}, {-1, -3, -7, -9})));
  EXPECT_TRUE(arrays_close(pool(Op::MaxPool2d, y, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}}}),
                           array_f32({1, 1, 1, 1}, {-1})));
}

TEST(ReferencePool, MaxPoolPropagatesNaN) {
  Array x = grid4();
  x.set_f64(5, NAN);  // row 1, col 1: inside the first 2x2 window only
  Array y = pool(Op::MaxPool2d, x, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}}});
  ASSERT_EQ(y.numel(), 4);
  EXPECT_TRUE(std::isnan(y.get_f64(0)));
  EXPECT_EQ(y.get_f64(1), 9);
  EXPECT_EQ(y.get_f64(2), 8);
  EXPECT_EQ(y.get_f64(3), 5);
}

TEST(ReferencePool, AvgPoolCountIncludePadBothWays) {
  Array x = grid4();
  EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, x, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}}}),
                           array_f32({1, 1, 2, 2}, {3.25, 4.5, 4.25, 3})));
  Attrs padded{{"kernel", I64s{3, 3}}, {"stride", I64s{2, 2}}, {"pad", I64s{1, 1, 1, 1}}};
  EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, x, padded),
                           array_f32({1, 1, 2, 2}, {13.f / 4, 4.5f, 4, 41.f / 9})));
  padded.set("count_include_pad", true);
  EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, x, padded),
                           array_f32({1, 1, 2, 2}, {13.f / 9, 3, 24.f / 9, 41.f / 9})));
}

TEST(ReferencePool, AvgPoolCeilModeDivisors) {
  // kernel 3, stride 2, pad 1, ceil_mode on 4x4: windows start at -1, 1, 3; the last one covers
  // row 3 (input), row 4 (padding) and row 5 (beyond the padded extent [-1, 5)).
  Array x = grid4();
  Attrs a{{"kernel", I64s{3, 3}}, {"stride", I64s{2, 2}}, {"pad", I64s{1, 1, 1, 1}}, {"ceil_mode", true}};
  EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, x, a),
                           array_f32({1, 1, 3, 3}, {13.f / 4, 4.5f, 3.5f, 4, 41.f / 9, 13.f / 3, 1.5f, 4, 4})));
  a.set("count_include_pad", true);
  EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, x, a),
                           array_f32({1, 1, 3, 3}, {13.f / 9, 3, 7.f / 6, 24.f / 9, 41.f / 9, 13.f / 6, 0.5f, 2, 1})));
  // Without padding, the overhanging part is outside the padded extent too: both ways agree.
  Array y = array_f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  for (bool include : {false, true}) {
    EXPECT_TRUE(arrays_close(pool(Op::AvgPool2d, y, {{"kernel", I64s{2, 2}}, {"stride", I64s{2, 2}},
                                                     {"ceil_mode", true}, {"count_include_pad", include}}),
                             array_f32({1, 1, 2, 2}, {3, 4.5, 7.5, 9})));
  }
}

// The naive version: pad the input explicitly (cells marked inside / padding / beyond) large
// enough for every window, then reduce each window.
Array naive_pool(bool is_max, const Array& x, const I64s& out_hw, const I64s& k, const I64s& s,
                 const I64s& p, const I64s& d, bool include_pad) {
  int64_t N = x.shape()[0], C = x.shape()[1], H = x.shape()[2], W = x.shape()[3];
  int64_t PH = (out_hw[0] - 1) * s[0] + (k[0] - 1) * d[0] + 1;
  int64_t PW = (out_hw[1] - 1) * s[1] + (k[1] - 1) * d[1] + 1;
  enum Cell { kInside, kPadding, kBeyond };
  Array y(DType::F32, {N, C, out_hw[0], out_hw[1]});
  int64_t o = 0;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t c = 0; c < C; ++c) {
      std::vector<double> value(size_t(PH * PW), 0);
      std::vector<Cell> cell(size_t(PH * PW), kBeyond);
      for (int64_t r = 0; r < PH; ++r) {
        for (int64_t q = 0; q < PW; ++q) {
          int64_t ih = r - p[0], iw = q - p[1];
          size_t at = size_t(r * PW + q);
          if (ih >= 0 && ih < H && iw >= 0 && iw < W) {
            cell[at] = kInside;
            value[at] = x.get_f64(((n * C + c) * H + ih) * W + iw);
          } else if (ih < H + p[2] && iw < W + p[3]) {
            cell[at] = kPadding;
          }
        }
      }
      for (int64_t oh = 0; oh < out_hw[0]; ++oh) {
        for (int64_t ow = 0; ow < out_hw[1]; ++ow) {
          double best = -INFINITY, sum = 0;
          int64_t inside = 0, padded = 0;
          for (int64_t ky = 0; ky < k[0]; ++ky) {
            for (int64_t kx = 0; kx < k[1]; ++kx) {
              size_t at = size_t((oh * s[0] + ky * d[0]) * PW + ow * s[1] + kx * d[1]);
              if (cell[at] == kBeyond) continue;
              ++padded;
              if (cell[at] != kInside) continue;
              ++inside;
              sum += value[at];
              best = std::max(best, value[at]);
            }
          }
          y.set_f64(o++, is_max ? best : sum / double(include_pad ? padded : inside));
        }
      }
    }
  }
  return y;
}

TEST(ReferencePool, RandomShapesMatchExplicitPadding) {
  std::mt19937 rng(1234);
  auto pick = [&](int lo, int hi) { return int64_t(std::uniform_int_distribution<int>(lo, hi)(rng)); };
  int tested = 0;
  for (int trial = 0; trial < 300 && tested < 120; ++trial) {
    bool is_max = trial % 2 == 0;
    I64s k{pick(1, 3), pick(1, 3)}, s{pick(1, 3), pick(1, 3)};
    I64s d = is_max ? I64s{pick(1, 2), pick(1, 2)} : I64s{1, 1};
    I64s p{pick(0, int(k[0] * d[0] - 1)), pick(0, int(k[1] * d[1] - 1)), pick(0, int(k[0] * d[0] - 1)),
           pick(0, int(k[1] * d[1] - 1))};
    bool ceil_mode = pick(0, 1), include_pad = pick(0, 1);
    Array x = random_array(DType::F32, {2, 3, pick(3, 8), pick(3, 8)}, uint64_t(trial));
    Attrs a{{"kernel", k}, {"stride", s}, {"pad", p}, {"ceil_mode", ceil_mode}};
    if (is_max) a.set("dilation", d);
    else a.set("count_include_pad", include_pad);
    Op op = is_max ? Op::MaxPool2d : Op::AvgPool2d;
    Node node{op, {}, {}, a, nullptr, {}};
    std::vector<TensorType> types{TensorType{DType::F32, make_shape(x.shape())}};
    if (!infer_result_types(node, types)) continue;  // no window fits
    Array y = pool(op, x, a);
    ASSERT_EQ(y.rank(), 4);
    Array expected = naive_pool(is_max, x, {y.shape()[2], y.shape()[3]}, k, s, p, d, include_pad);
    ASSERT_TRUE(arrays_close(y, expected, 1e-6, 1e-6)) << "trial " << trial;
    ++tested;
  }
  EXPECT_GE(tested, 100);
}

TEST(ReferencePool, HalfPrecisionPools) {
  for (DType t : {DType::F16, DType::BF16, DType::F64}) {
    Array x = array_of(t, {1, 1, 2, 2}, {1, 2, 3, 4});
    auto y = run_reference_poisoned(Op::AvgPool2d, {x}, {{"kernel", I64s{2, 2}}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(t, {1, 1, 1, 1}, {2.5})));
    y = run_reference_poisoned(Op::MaxPool2d, {x}, {{"kernel", I64s{2, 2}}, {"pad", I64s{1, 1, 0, 0}}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(t, {1, 1, 2, 2}, {1, 2, 3, 4})));
  }
}

TEST(ReferencePool, GlobalAvgPoolAnyRank) {
  for (const I64s& shape : {I64s{2, 3, 4, 5}, I64s{2, 3, 7}, I64s{1, 2, 2, 3, 2}}) {
    for (DType t : {DType::F32, DType::F64, DType::F16}) {
      Array x = random_array(t, shape, 17);
      auto y = run_reference_poisoned(Op::GlobalAvgPool, {x}, {});
      ASSERT_EQ(y.size(), 1u);
      int64_t planes = shape[0] * shape[1], size = x.numel() / planes;
      I64s out_shape(shape.size(), 1);
      out_shape[0] = shape[0];
      out_shape[1] = shape[1];
      ASSERT_EQ(y[0].shape(), out_shape);
      Array expected(t, out_shape);
      for (int64_t p = 0; p < planes; ++p) {
        double sum = 0;
        for (int64_t i = 0; i < size; ++i) sum += x.get_f64(p * size + i);
        expected.set_f64(p, sum / double(size));
      }
      EXPECT_TRUE(arrays_close(y[0], expected, 1e-6, 1e-6)) << dtype_name(t);
    }
  }
  auto y = run_reference_poisoned(Op::GlobalAvgPool, {array_f32({1, 2, 2, 2}, {1, 2, 3, 4, -1, -2, -3, -10})}, {});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_f32({1, 2, 1, 1}, {2.5, -4})));
}

// Blocked layouts give the plain kernel's bits: NHWC (one block of all 160 channels) and
// nChw16c, on one image and on two.
TEST(ReferencePool, GlobalAvgPoolBlockedEqualsPlainBitForBit) {
  for (int64_t n : {1, 2}) {
    Array x = random_array(DType::F32, {n, 160, 31, 33}, 18);
    auto plain = run_reference_poisoned(Op::GlobalAvgPool, {x}, {});
    ASSERT_EQ(plain.size(), 1u);
    for (auto [block, layout] : {std::pair<int64_t, const char*>{160, "nhwc"}, {16, "nchwc"}}) {
      auto y = run_reference_poisoned(Op::GlobalAvgPool, {to_nchwc(x, block)}, {{"layout", std::string(layout)}});
      ASSERT_EQ(y.size(), 1u);
      ASSERT_EQ(y[0].numel(), n * 160) << layout;
      EXPECT_TRUE(y[0].reshaped(plain[0].shape()).same_data(plain[0])) << layout << " n=" << n;
    }
  }
}

}  // namespace
}  // namespace fusebox
