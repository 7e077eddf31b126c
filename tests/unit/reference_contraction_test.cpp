// Tests of the CPU reference contraction kernels: matmul against a naive triple loop (broadcast
// batches, 1-D promotion, every numeric dtype, integer wrap-around), conv2d against an explicit
// im2col + matmul written here (groups, depthwise, stride, asymmetric pad, dilation, bias), and
// conv_transpose2d through the adjoint identity <conv(x), y> == <x, conv_transpose(y)> plus hand
// cases.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_f32;
using testing::array_of;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using I64s = std::vector<int64_t>;

Array one(Op op, const std::vector<Array>& inputs, Attrs attrs = {}) {
  auto y = run_reference_poisoned(op, inputs, std::move(attrs));
  return y.empty() ? Array(DType::F32, {0}) : y[0];
}

// ---- matmul --------------------------------------------------------------------------------

// Naive numpy matmul: promote 1-D operands, broadcast batch dims by index (a size-1 dim reads
// index 0), sum over k in double (floats) or wrapping uint64 (integers).
Array naive_matmul(const Array& a, const Array& b) {
  I64s as = a.shape(), bs = b.shape();
  bool a_vec = as.size() == 1, b_vec = bs.size() == 1;
  if (a_vec) as.insert(as.begin(), 1);
  if (b_vec) bs.push_back(1);
  int64_t M = as[as.size() - 2], K = as.back(), N = bs.back();
  size_t rank = std::max(as.size(), bs.size());
  while (as.size() < rank) as.insert(as.begin(), 1);
  while (bs.size() < rank) bs.insert(bs.begin(), 1);
  I64s batch(rank - 2);
  for (size_t i = 0; i + 2 < rank; ++i) batch[i] = std::max(as[i], bs[i]);
  I64s out = batch;
  if (!a_vec) out.push_back(M);
  if (!b_vec) out.push_back(N);
  Array y(a.dtype(), out);
  int64_t batches = 1;
  for (int64_t d : batch) batches *= d;
  int64_t o = 0;
  for (int64_t bi = 0; bi < batches; ++bi) {
    // Decompose the batch index and map it into each operand.
    int64_t rest = bi, a_off = 0, b_off = 0, a_mul = 1, b_mul = 1;
    for (size_t d = batch.size(); d-- > 0;) {
      int64_t i = rest % batch[d];
      rest /= batch[d];
      a_off += (as[d] == 1 ? 0 : i) * a_mul;
      b_off += (bs[d] == 1 ? 0 : i) * b_mul;
      a_mul *= as[d];
      b_mul *= bs[d];
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double fsum = 0;
        uint64_t isum = 0;
        for (int64_t k = 0; k < K; ++k) {
          int64_t ai = a_off * M * K + i * K + k, bj = b_off * K * N + k * N + j;
          fsum += a.get_f64(ai) * b.get_f64(bj);
          isum += uint64_t(a.get_i64(ai)) * uint64_t(b.get_i64(bj));
        }
        if (is_float(a.dtype())) y.set_f64(o++, fsum);
        else y.set_i64(o++, int64_t(isum));  // set_i64 narrows by wrapping
      }
    }
  }
  return y;
}

TEST(ReferenceMatmul, HandCase) {
  EXPECT_TRUE(arrays_close(one(Op::MatMul, {array_f32({2, 2}, {1, 2, 3, 4}), array_f32({2, 2}, {5, 6, 7, 8})}),
                           array_f32({2, 2}, {19, 22, 43, 50})));
  // 1-D . 1-D is a scalar.
  EXPECT_TRUE(arrays_close(one(Op::MatMul, {array_f32({3}, {1, 2, 3}), array_f32({3}, {4, 5, 6})}),
                           array_f32({}, {32})));
}

TEST(ReferenceMatmul, BroadcastAndPromotionMatchNaiveLoop) {
  const std::vector<std::pair<I64s, I64s>> cases = {
      {{3, 4}, {4, 5}},       {{2, 1, 3, 4}, {5, 4, 6}}, {{4}, {4, 6}},    {{3, 4}, {4}},
      {{2, 3, 4}, {4}},       {{4}, {2, 4, 3}},          {{7}, {7}},       {{1, 3, 5}, {2, 1, 5, 2}},
      {{2, 3, 0}, {0, 4}},    {{0, 3}, {3, 2}},          {{3, 2, 5}, {1, 5, 1}}};
  const DType dtypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16,
                          DType::I8,  DType::U8,  DType::I32, DType::I64};
  uint64_t seed = 1;
  for (const auto& [as, bs] : cases) {
    for (DType t : dtypes) {
      Array a = random_array(t, as, seed++, -9, 9), b = random_array(t, bs, seed++, -9, 9);
      Array y = one(Op::MatMul, {a, b});
      Array expected = naive_matmul(a, b);
      EXPECT_TRUE(arrays_close(y, expected, 1e-6, 1e-6)) << dtype_name(t) << " " << a.type_string() << " x " << b.type_string();
    }
  }
}

TEST(ReferenceMatmul, FloatAccumulatesInDouble) {
  // 1 + 1e-8 * 1000 in float would stall at 1; in double it is 1.00001, then rounded once.
  Array a(DType::F32, {1, 1001}), b(DType::F32, {1001, 1});
  for (int64_t k = 0; k < 1001; ++k) {
    a.set_f64(k, k == 0 ? 1.0 : 1e-8);
    b.set_f64(k, 1.0);
  }
  Array y = one(Op::MatMul, {a, b});
  ASSERT_EQ(y.numel(), 1);
  EXPECT_EQ(y.data<float>()[0], float(1.0 + 1000 * double(1e-8f)));
}

TEST(ReferenceMatmul, IntegersWrap) {
  // i32: 2^30 * 8 + 3 * 5 = 2^33 + 15 -> 15.
  EXPECT_TRUE(arrays_close(one(Op::MatMul, {array_of(DType::I32, {1, 2}, {double(1 << 30), 3}),
                                            array_of(DType::I32, {2, 1}, {8, 5})}),
                           array_of(DType::I32, {1, 1}, {15})));
  // i64: 2^62 * 4 + 2^62 = 2^64 + 2^62 -> 2^62.
  Array a(DType::I64, {1, 2}), b(DType::I64, {2, 1});
  a.set_i64(0, int64_t(1) << 62);
  a.set_i64(1, int64_t(1) << 62);
  b.set_i64(0, 4);
  b.set_i64(1, 1);
  Array y = one(Op::MatMul, {a, b});
  ASSERT_EQ(y.numel(), 1);
  EXPECT_EQ(y.get_i64(0), int64_t(1) << 62);
  // i8: 100*2 + 100 = 300 -> 44; -128 * -1 = 128 -> -128. u8: 200 * 3 = 600 -> 88.
  EXPECT_EQ(one(Op::MatMul, {array_of(DType::I8, {1, 2}, {100, 100}), array_of(DType::I8, {2, 1}, {2, 1})}).get_i64(0), 44);
  EXPECT_EQ(one(Op::MatMul, {array_of(DType::I8, {1}, {-128}), array_of(DType::I8, {1}, {-1})}).get_i64(0), -128);
  EXPECT_EQ(one(Op::MatMul, {array_of(DType::U8, {1, 1}, {200}), array_of(DType::U8, {1, 1}, {3})}).get_i64(0), 88);
}

// ---- conv2d ---------------------------------------------------------------------------------

struct ConvCase {
  int64_t n, c, h, w, o, kh, kw, groups;
  I64s stride, pad, dilation;
  bool bias;
};

Attrs conv_attrs(const ConvCase& cc) {
  return Attrs{{"stride", cc.stride}, {"pad", cc.pad}, {"dilation", cc.dilation}, {"groups", cc.groups}};
}

// conv2d as im2col + matmul per group, in double: cols[(c, ky, kx), (n, oh, ow)] holds the input
// value each kernel tap sees (0 in the padding); out_g = W_g[Og, Cg*kh*kw] @ cols_g.
Array im2col_conv(const ConvCase& cc, const Array& x, const Array& w, const Array* bias, int64_t OH, int64_t OW) {
  int64_t Cg = cc.c / cc.groups, Og = cc.o / cc.groups, rows = Cg * cc.kh * cc.kw, cols = cc.n * OH * OW;
  Array y(DType::F32, {cc.n, cc.o, OH, OW});
  for (int64_t g = 0; g < cc.groups; ++g) {
    std::vector<double> col(size_t(rows * cols), 0.0);
    for (int64_t c = 0; c < Cg; ++c)
      for (int64_t ky = 0; ky < cc.kh; ++ky)
        for (int64_t kx = 0; kx < cc.kw; ++kx)
          for (int64_t n = 0; n < cc.n; ++n)
            for (int64_t oh = 0; oh < OH; ++oh)
              for (int64_t ow = 0; ow < OW; ++ow) {
                int64_t ih = oh * cc.stride[0] - cc.pad[0] + ky * cc.dilation[0];
                int64_t iw = ow * cc.stride[1] - cc.pad[1] + kx * cc.dilation[1];
                if (ih < 0 || ih >= cc.h || iw < 0 || iw >= cc.w) continue;
                int64_t r = (c * cc.kh + ky) * cc.kw + kx, q = (n * OH + oh) * OW + ow;
                col[size_t(r * cols + q)] = x.get_f64(((n * cc.c + g * Cg + c) * cc.h + ih) * cc.w + iw);
              }
    for (int64_t o = 0; o < Og; ++o) {
      int64_t oc = g * Og + o;
      for (int64_t q = 0; q < cols; ++q) {
        double sum = bias ? bias->get_f64(oc) : 0.0;
        for (int64_t r = 0; r < rows; ++r) sum += w.get_f64(oc * rows + r) * col[size_t(r * cols + q)];
        int64_t n = q / (OH * OW), pix = q % (OH * OW);
        y.set_f64((n * cc.o + oc) * OH * OW + pix, sum);
      }
    }
  }
  return y;
}

TEST(ReferenceConv, HandCase) {
  // [[1 2 3] [4 5 6] [7 8 9]] * [[1 0] [0 -1]] = x[i][j] - x[i+1][j+1] = -4 everywhere, + bias.
  Array x = array_f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Array w = array_f32({1, 1, 2, 2}, {1, 0, 0, -1});
  EXPECT_TRUE(arrays_close(one(Op::Conv2d, {x, w, array_f32({1}, {0.5})}), array_f32({1, 1, 2, 2}, {-3.5, -3.5, -3.5, -3.5})));
  // Pad 1 on the top and left only: out[0][0] = -x[0][0], out[0][1] = -x[0][1], out[1][0] = -x[1][0].
  EXPECT_TRUE(arrays_close(one(Op::Conv2d, {x, w}, {{"pad", I64s{1, 1, 0, 0}}}),
                           array_f32({1, 1, 3, 3}, {-1, -2, -3, -4, -4, -4, -7, -4, -4})));
}

TEST(ReferenceConv, RandomShapesMatchIm2colMatmul) {
  const std::vector<ConvCase> cases = {
      {1, 3, 7, 6, 4, 3, 3, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, true},
      {2, 4, 8, 8, 6, 3, 3, 2, {2, 2}, {1, 1, 1, 1}, {1, 1}, true},
      {2, 6, 9, 7, 6, 3, 3, 6, {1, 1}, {1, 1, 1, 1}, {1, 1}, false},   // depthwise
      {1, 4, 9, 9, 8, 3, 3, 4, {2, 1}, {2, 0, 1, 2}, {1, 1}, true},    // depthwise x2, asym pad
      {1, 2, 10, 11, 3, 3, 2, 1, {1, 2}, {2, 1, 0, 3}, {2, 3}, true},  // dilation
      {2, 6, 6, 5, 9, 1, 1, 3, {1, 1}, {0, 0, 0, 0}, {1, 1}, false},   // pointwise, groups
      {1, 3, 5, 5, 2, 5, 5, 1, {3, 3}, {2, 2, 2, 2}, {1, 1}, true},
  };
  uint64_t seed = 100;
  for (const ConvCase& cc : cases) {
    for (DType t : {DType::F32, DType::F64}) {
      Array x = random_array(t, {cc.n, cc.c, cc.h, cc.w}, seed++);
      Array w = random_array(t, {cc.o, cc.c / cc.groups, cc.kh, cc.kw}, seed++);
      Array b = random_array(t, {cc.o}, seed++);
      std::vector<Array> in{x, w};
      if (cc.bias) in.push_back(b);
      Array y = one(Op::Conv2d, in, conv_attrs(cc));
      ASSERT_EQ(y.rank(), 4);
      Array expected = im2col_conv(cc, x, w, cc.bias ? &b : nullptr, y.shape()[2], y.shape()[3]);
      Array actual(DType::F32, y.shape());
      for (int64_t i = 0; i < y.numel(); ++i) actual.set_f64(i, y.get_f64(i));
      EXPECT_TRUE(arrays_close(actual, expected, 1e-5, 1e-5)) << dtype_name(t) << " case c=" << cc.c << " g=" << cc.groups;
    }
  }
}

TEST(ReferenceConv, HalfPrecisionRoundsOnce) {
  Array x = random_array(DType::F16, {1, 2, 5, 5}, 3), w = random_array(DType::F16, {2, 2, 3, 3}, 4);
  Array y = one(Op::Conv2d, {x, w}, {{"pad", I64s{1, 1, 1, 1}}});
  ConvCase cc{1, 2, 5, 5, 2, 3, 3, 1, {1, 1}, {1, 1, 1, 1}, {1, 1}, false};
  Array expected = im2col_conv(cc, x, w, nullptr, 5, 5);
  Array rounded(DType::F16, {1, 2, 5, 5});
  for (int64_t i = 0; i < expected.numel(); ++i) rounded.set_f64(i, expected.get_f64(i));
  EXPECT_TRUE(arrays_close(y, rounded, 0, 1e-3));
}

// ---- conv_transpose2d ----------------------------------------------------------------------

double dot(const Array& a, const Array& b) {
  EXPECT_EQ(a.numel(), b.numel());
  double s = 0;
  for (int64_t i = 0; i < a.numel() && i < b.numel(); ++i) s += a.get_f64(i) * b.get_f64(i);
  return s;
}

TEST(ReferenceConvTranspose, HandCases) {
  Array x = array_f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Array ones = array_f32({1, 1, 2, 2}, {1, 1, 1, 1});
  // Stride 2: every input pixel paints its own 2x2 block.
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x, ones}, {{"stride", I64s{2, 2}}}),
                           array_f32({1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4})));
  // Stride 1: blocks overlap and add; bias once per element.
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x, ones, array_f32({1}, {0.5})}),
                           array_f32({1, 1, 3, 3}, {1.5, 3.5, 2.5, 4.5, 10.5, 6.5, 3.5, 7.5, 4.5})));
  // Pad 1 crops one from every side of the 3x3 result.
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x, ones}, {{"pad", I64s{1, 1, 1, 1}}}),
                           array_f32({1, 1, 1, 1}, {10})));
  // output_padding grows the bottom/right with positions no input reaches (stride 2: 5x5).
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x, ones}, {{"stride", I64s{2, 2}}, {"output_padding", I64s{1, 1}}}),
                           array_f32({1, 1, 5, 5}, {1, 1, 2, 2, 0, 1, 1, 2, 2, 0, 3, 3, 4, 4, 0, 3, 3, 4, 4, 0, 0, 0, 0, 0, 0})));
  // Groups: channel 0 only feeds output 0, channel 1 output 1; without groups both add.
  Array x2 = array_f32({1, 2, 1, 1}, {2, 3});
  Array w2 = array_f32({2, 1, 1, 1}, {10, 100});
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x2, w2}, {{"groups", int64_t(2)}}), array_f32({1, 2, 1, 1}, {20, 300})));
  EXPECT_TRUE(arrays_close(one(Op::ConvTranspose2d, {x2, w2}), array_f32({1, 1, 1, 1}, {320})));
}

TEST(ReferenceConvTranspose, IsTheAdjointOfConv) {
  const std::vector<ConvCase> cases = {
      {1, 3, 7, 6, 4, 3, 3, 1, {1, 1}, {0, 0, 0, 0}, {1, 1}, false},
      {2, 4, 8, 9, 6, 3, 3, 2, {2, 2}, {1, 1, 1, 1}, {1, 1}, false},
      {1, 4, 9, 8, 4, 3, 3, 4, {2, 3}, {1, 0, 2, 1}, {1, 1}, false},  // depthwise, asym pad
      {2, 2, 10, 11, 6, 3, 2, 2, {2, 1}, {2, 1, 0, 3}, {2, 3}, false},  // dilation
      {1, 6, 7, 7, 3, 4, 4, 3, {3, 2}, {1, 2, 1, 0}, {1, 1}, false},
      {1, 2, 5, 5, 2, 1, 1, 1, {2, 2}, {0, 0, 0, 0}, {1, 1}, false},
  };
  uint64_t seed = 500;
  for (const ConvCase& cc : cases) {
    Array x = random_array(DType::F64, {cc.n, cc.c, cc.h, cc.w}, seed++);
    Array w = random_array(DType::F64, {cc.o, cc.c / cc.groups, cc.kh, cc.kw}, seed++);
    Array cx = one(Op::Conv2d, {x, w}, conv_attrs(cc));
    ASSERT_EQ(cx.rank(), 4);
    int64_t OH = cx.shape()[2], OW = cx.shape()[3];
    // The transposed conv must land back on H x W: output_padding takes up the rows and
    // columns the strided conv skipped at the end.
    I64s output_padding(2);
    const int64_t in[2] = {cc.h, cc.w}, out[2] = {OH, OW}, k[2] = {cc.kh, cc.kw};
    for (size_t i = 0; i < 2; ++i) {
      output_padding[i] = in[i] - ((out[i] - 1) * cc.stride[i] - cc.pad[i] - cc.pad[i + 2] + cc.dilation[i] * (k[i] - 1) + 1);
      ASSERT_GE(output_padding[i], 0);
      ASSERT_LT(output_padding[i], cc.stride[i]);
    }
    Array y = random_array(DType::F64, cx.shape(), seed++);
    Attrs ta = conv_attrs(cc);
    ta.set("output_padding", output_padding);
    Array ty = one(Op::ConvTranspose2d, {y, w}, ta);
    ASSERT_EQ(ty.shape(), x.shape());
    double lhs = dot(cx, y), rhs = dot(x, ty);
    EXPECT_NEAR(lhs, rhs, 1e-9 * (1 + std::fabs(lhs))) << "case c=" << cc.c << " g=" << cc.groups;
  }
  // f32 with bias: the result minus the bias still satisfies the identity.
  ConvCase cc{1, 4, 6, 6, 4, 3, 3, 2, {2, 2}, {1, 1, 1, 1}, {1, 1}, true};
  Array x = random_array(DType::F32, {1, 4, 6, 6}, 7), w = random_array(DType::F32, {4, 2, 3, 3}, 8);
  Array cx = one(Op::Conv2d, {x, w}, conv_attrs(cc));
  Array y = random_array(DType::F32, cx.shape(), 9), bias = array_f32({4}, {1, -2, 3, 0.25});
  Attrs ta = conv_attrs(cc);
  ta.set("output_padding", I64s{1, 1});
  Array ty = one(Op::ConvTranspose2d, {y, w, bias}, ta);
  ASSERT_EQ(ty.shape(), x.shape());
  for (int64_t i = 0; i < ty.numel(); ++i) ty.set_f64(i, ty.get_f64(i) - bias.get_f64(i / 36));
  EXPECT_NEAR(dot(cx, y), dot(x, ty), 1e-4 * (1 + std::fabs(dot(cx, y))));
}

}  // namespace
}  // namespace fusebox
