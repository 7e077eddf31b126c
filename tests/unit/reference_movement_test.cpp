// Tests of the CPU reference kernels of the movement ops (reshape, transpose, slice, concat,
// pad, gather, flip): hand-worked cases, naive index arithmetic written here, round trips,
// every dtype, empty dims, and a gather index out of range coming back as a Status.
#include <gtest/gtest.h>

#include <climits>
#include <cstring>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using testing::to_doubles;
using testing::try_run_op;
using I64s = std::vector<int64_t>;

constexpr DType kAllDTypes[] = {DType::F32, DType::F16, DType::BF16, DType::F64, DType::I8,
                                DType::U8,  DType::I32, DType::I64,  DType::Bool};

Array iota(DType dtype, std::vector<int64_t> shape) {
  Array a(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, double(i));
  return a;
}

// Flat row-major offset of `index` in `shape`.
int64_t offset_of(const std::vector<int64_t>& index, const std::vector<int64_t>& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + index[d];
  return off;
}

std::vector<int64_t> index_of(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

// Compares one element of two arrays of the same dtype byte for byte.
bool same_element(const Array& a, int64_t i, const Array& b, int64_t j) {
  size_t e = static_cast<size_t>(dtype_size(a.dtype()));
  return std::memcmp(static_cast<const uint8_t*>(a.raw()) + size_t(i) * e,
                     static_cast<const uint8_t*>(b.raw()) + size_t(j) * e, e) == 0;
}

TEST(ReferenceMovement, ReshapeCopiesEveryDType) {
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {2, 3, 4}, 11, -100, 100);
    auto y = run_reference_poisoned(Op::Reshape, {x}, {{"shape", Shape{4, Dim::dynamic()}}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_EQ(y[0].shape(), (I64s{4, 6}));
    EXPECT_TRUE(y[0].reshaped({2, 3, 4}).same_data(x)) << dtype_name(t);
  }
  auto e = run_reference_poisoned(Op::Reshape, {Array(DType::F32, {0, 4})}, {{"shape", make_shape({2, 0, 3})}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].numel(), 0);
}

// Transposes that keep the last axis and slices of whole rows copy row by row (in parallel
// when large); each element is checked against index arithmetic written out here, at a small
// size and at one large enough to spread over threads, outputs poisoned first.
TEST(ReferenceMovement, RowCopiesMatchIndexArithmetic) {
  for (int64_t a : {3, 70}) {
    const int64_t b = 17, c = 64;
    Array x = random_array(DType::F32, {a, b, c}, 31);
    std::vector<double> xs = to_doubles(x);
    std::vector<Array> t = run_reference_poisoned(Op::Transpose, {x}, {{"perm", I64s{1, 0, 2}}});
    std::vector<double> ts = to_doubles(t[0]);
    ASSERT_EQ(t[0].shape(), (I64s{b, a, c}));
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < a; ++j)
        for (int64_t k = 0; k < c; ++k) ASSERT_EQ(ts[size_t((i * a + j) * c + k)], xs[size_t((j * b + i) * c + k)]);
    std::vector<Array> sl = run_reference_poisoned(Op::Slice, {x}, {{"starts", I64s{1, 16}}, {"ends", I64s{a, 48}}, {"axes", I64s{0, 2}}});
    std::vector<double> ss = to_doubles(sl[0]);
    ASSERT_EQ(sl[0].shape(), (I64s{a - 1, b, 32}));
    for (int64_t i = 0; i + 1 < a; ++i)
      for (int64_t j = 0; j < b; ++j)
        for (int64_t k = 0; k < 32; ++k) ASSERT_EQ(ss[size_t((i * b + j) * 32 + k)], xs[size_t(((i + 1) * b + j) * c + 16 + k)]);
  }
}

TEST(ReferenceMovement, TransposeHandCase) {
  auto y = run_reference_poisoned(Op::Transpose, {iota(DType::F32, {2, 3})}, {{"perm", I64s{1, 0}}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3, 2}, {0, 3, 1, 4, 2, 5})));
}

TEST(ReferenceMovement, TransposeMatchesIndexArithmeticAndInverts) {
  const I64s perm{2, 0, 3, 1}, inverse{1, 3, 0, 2};
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {2, 3, 4, 5}, 7, -50, 50);
    auto y = run_reference_poisoned(Op::Transpose, {x}, {{"perm", perm}});
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(y[0].shape(), (I64s{4, 2, 5, 3}));
    for (int64_t o = 0; o < y[0].numel(); ++o) {
      I64s out_index = index_of(o, y[0].shape());
      I64s in_index(4);
      for (size_t i = 0; i < 4; ++i) in_index[size_t(perm[i])] = out_index[i];
      ASSERT_TRUE(same_element(y[0], o, x, offset_of(in_index, x.shape()))) << dtype_name(t) << " at " << o;
    }
    auto back = run_reference_poisoned(Op::Transpose, {y[0]}, {{"perm", inverse}});
    ASSERT_EQ(back.size(), 1u);
    EXPECT_TRUE(back[0].same_data(x)) << dtype_name(t);
  }
  auto e = run_reference_poisoned(Op::Transpose, {Array(DType::I32, {0, 3})}, {{"perm", I64s{1, 0}}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].shape(), (I64s{3, 0}));
}

std::vector<double> slice1d(const std::vector<double>& values, Attrs attrs) {
  auto y = run_reference_poisoned(Op::Slice, {array_of(DType::F32, {int64_t(values.size())}, values)}, std::move(attrs));
  return y.empty() ? std::vector<double>{-999} : to_doubles(y[0]);
}

TEST(ReferenceMovement, SliceNegativeStepsAndClampedEnds) {
  std::vector<double> v{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  using D = std::vector<double>;
  EXPECT_EQ(slice1d(v, {{"starts", I64s{2}}, {"ends", I64s{100}}}), (D{2, 3, 4, 5, 6, 7, 8, 9}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{-3}}, {"ends", I64s{INT64_MAX}}}), (D{7, 8, 9}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{-1}}, {"ends", I64s{INT64_MIN}}, {"steps", I64s{-1}}}),
            (D{9, 8, 7, 6, 5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{8}}, {"ends", I64s{1}}, {"steps", I64s{-3}}}), (D{8, 5, 2}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{100}}, {"ends", I64s{-100}}, {"steps", I64s{-4}}}), (D{9, 5, 1}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{1}}, {"ends", I64s{-1}}, {"steps", I64s{3}}}), (D{1, 4, 7}));
  // Steps longer than the axis read one element.
  EXPECT_EQ(slice1d(v, {{"starts", I64s{3}}, {"ends", I64s{100}}, {"steps", I64s{1000}}}), (D{3}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{-2}}, {"ends", I64s{-100}}, {"steps", I64s{-1000}}}), (D{8}));
  EXPECT_EQ(slice1d(v, {{"starts", I64s{8}}, {"ends", I64s{2}}}), D{});
  EXPECT_EQ(slice1d(v, {{"starts", I64s{2}}, {"ends", I64s{8}}, {"steps", I64s{-1}}}), D{});
}

TEST(ReferenceMovement, SliceSeveralAxesMatchesIndexArithmetic) {
  // axes given out of order and negative; x[1:4:2, :, ::-2] for every dtype.
  Attrs attrs{{"starts", I64s{-1, 1}}, {"ends", I64s{INT64_MIN, 4}}, {"axes", I64s{-1, 0}},
              {"steps", I64s{-2, 2}}};
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {5, 3, 6}, 3, -50, 50);
    auto y = run_reference_poisoned(Op::Slice, {x}, attrs);
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(y[0].shape(), (I64s{2, 3, 3}));
    for (int64_t o = 0; o < y[0].numel(); ++o) {
      I64s i = index_of(o, y[0].shape());
      I64s src{1 + 2 * i[0], i[1], 5 - 2 * i[2]};
      ASSERT_TRUE(same_element(y[0], o, x, offset_of(src, x.shape()))) << dtype_name(t) << " at " << o;
    }
  }
  auto e = run_reference_poisoned(Op::Slice, {Array(DType::F32, {0, 4})},
                                  {{"starts", I64s{-1}}, {"ends", I64s{INT64_MIN}}, {"axes", I64s{1}}, {"steps", I64s{-1}}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].shape(), (I64s{0, 4}));
}

TEST(ReferenceMovement, ConcatThreeOperands) {
  Array a = array_of(DType::F32, {2, 1}, {1, 2});
  Array b = array_of(DType::F32, {2, 2}, {3, 4, 5, 6});
  Array c = array_of(DType::F32, {2, 3}, {7, 8, 9, 10, 11, 12});
  auto y = run_reference_poisoned(Op::Concat, {a, b, c}, {{"axis", int64_t(-1)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {2, 6}, {1, 3, 4, 7, 8, 9, 2, 5, 6, 10, 11, 12})));
  y = run_reference_poisoned(Op::Concat, {a, a, a}, {{"axis", int64_t(0)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {6, 1}, {1, 2, 1, 2, 1, 2})));
}

TEST(ReferenceMovement, ConcatEveryDTypeWithAnEmptyOperand) {
  for (DType t : kAllDTypes) {
    std::vector<Array> parts{random_array(t, {2, 3, 2}, 1, -50, 50), random_array(t, {2, 0, 2}, 2),
                             random_array(t, {2, 4, 2}, 3, -50, 50)};
    auto y = run_reference_poisoned(Op::Concat, parts, {{"axis", int64_t(1)}});
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(y[0].shape(), (I64s{2, 7, 2}));
    for (int64_t o = 0; o < y[0].numel(); ++o) {
      I64s i = index_of(o, y[0].shape());
      const Array& src = i[1] < 3 ? parts[0] : parts[2];
      if (i[1] >= 3) i[1] -= 3;
      ASSERT_TRUE(same_element(y[0], o, src, offset_of(i, src.shape()))) << dtype_name(t) << " at " << o;
    }
  }
}

TEST(ReferenceMovement, PadModesOnSmallArrays) {
  Array x = array_of(DType::F32, {4}, {1, 2, 3, 4});
  using D = std::vector<double>;
  auto y = run_reference_poisoned(Op::Pad, {x}, {{"pads", I64s{2, 3}}, {"mode", std::string("reflect")}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{3, 2, 1, 2, 3, 4, 3, 2, 1}));
  y = run_reference_poisoned(Op::Pad, {x}, {{"pads", I64s{2, 1}}, {"mode", std::string("edge")}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{1, 1, 1, 2, 3, 4, 4}));
  y = run_reference_poisoned(Op::Pad, {x}, {{"pads", I64s{1, 2}}, {"value", 2.5}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{2.5, 1, 2, 3, 4, 2.5, 2.5}));
  // The fill value is cast to the element type like a cast: truncation toward zero.
  y = run_reference_poisoned(Op::Pad, {array_of(DType::I32, {2}, {5, 6})}, {{"pads", I64s{1, 1}}, {"value", -1.75}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{-1, 5, 6, -1}));

  // 2-D: rows [1 2 3; 4 5 6], one row before, two columns before and one after.
  Array m = array_of(DType::F32, {2, 3}, {1, 2, 3, 4, 5, 6});
  y = run_reference_poisoned(Op::Pad, {m}, {{"pads", I64s{1, 2, 0, 1}}, {"mode", std::string("reflect")}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{6, 5, 4, 5, 6, 5,  //
                                 3, 2, 1, 2, 3, 2,  //
                                 6, 5, 4, 5, 6, 5}));
  y = run_reference_poisoned(Op::Pad, {m}, {{"pads", I64s{0, 1, 2, 2}}, {"mode", std::string("edge")}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (D{1, 1, 2, 3, 3, 3,  //
                                 4, 4, 5, 6, 6, 6,  //
                                 4, 4, 5, 6, 6, 6,  //
                                 4, 4, 5, 6, 6, 6}));
}

TEST(ReferenceMovement, PadEveryDTypeAndEmptyInput) {
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {3, 2}, 5, -50, 50);
    for (const char* mode : {"constant", "reflect", "edge"}) {
      auto y = run_reference_poisoned(Op::Pad, {x}, {{"pads", I64s{2, 1, 1, 1}}, {"mode", std::string(mode)}});
      ASSERT_EQ(y.size(), 1u);
      ASSERT_EQ(y[0].shape(), (I64s{6, 4}));
      // The interior is the input, bit for bit.
      for (int64_t r = 0; r < 3; ++r) {
        for (int64_t c = 0; c < 2; ++c) {
          ASSERT_TRUE(same_element(y[0], (r + 2) * 4 + c + 1, x, r * 2 + c)) << dtype_name(t) << " " << mode;
        }
      }
    }
  }
  // Constant padding of an empty input is all fill.
  auto y = run_reference_poisoned(Op::Pad, {Array(DType::F32, {0, 2})}, {{"pads", I64s{1, 0, 1, 1}}, {"value", 3.0}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(to_doubles(y[0]), (std::vector<double>(6, 3.0)));
}

TEST(ReferenceMovement, GatherWithNegativeIndices) {
  Array data = array_of(DType::F32, {3, 2}, {1, 2, 3, 4, 5, 6});
  for (DType it : {DType::I32, DType::I64}) {
    auto y = run_reference_poisoned(Op::Gather, {data, array_of(it, {3}, {2, -1, 0})}, {{"axis", int64_t(0)}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3, 2}, {5, 6, 5, 6, 1, 2})));
    // Axis 1 with 2-D indices: the index dims are spliced in place of the axis.
    y = run_reference_poisoned(Op::Gather, {data, array_of(it, {2, 2}, {1, 0, -2, -1})}, {{"axis", int64_t(-1)}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3, 2, 2}, {2, 1, 1, 2, 4, 3, 3, 4, 6, 5, 5, 6})));
  }
  // A scalar index removes the axis.
  auto y = run_reference_poisoned(Op::Gather, {data, array_of(DType::I64, {}, {1})}, {{"axis", int64_t(1)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3}, {2, 4, 6})));
}

TEST(ReferenceMovement, GatherEveryDTypeAndEmptyIndices) {
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {2, 5, 3}, 9, -50, 50);
    Array idx = array_of(DType::I64, {4}, {4, -5, 2, -1});
    auto y = run_reference_poisoned(Op::Gather, {x, idx}, {{"axis", int64_t(1)}});
    ASSERT_EQ(y.size(), 1u);
    ASSERT_EQ(y[0].shape(), (I64s{2, 4, 3}));
    const int64_t resolved[] = {4, 0, 2, 4};
    for (int64_t o = 0; o < y[0].numel(); ++o) {
      I64s i = index_of(o, y[0].shape());
      i[1] = resolved[i[1]];
      ASSERT_TRUE(same_element(y[0], o, x, offset_of(i, x.shape()))) << dtype_name(t);
    }
  }
  auto y = run_reference_poisoned(Op::Gather, {random_array(DType::F32, {3, 2}, 1), Array(DType::I32, {0})}, {{"axis", int64_t(0)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_EQ(y[0].shape(), (I64s{0, 2}));
}

TEST(ReferenceMovement, GatherOutOfRangeIsAnError) {
  Array data = random_array(DType::F32, {3, 4}, 2);
  for (int64_t bad : {4, -5, 1000}) {
    auto r = try_run_op(Op::Gather, {data, array_of(DType::I64, {2, 2}, {0, 1, double(bad), 2})}, {{"axis", int64_t(1)}});
    ASSERT_FALSE(r.has_value()) << bad;
    std::string m = r.status().message();
    EXPECT_NE(m.find("index " + std::to_string(bad)), std::string::npos) << m;
    EXPECT_NE(m.find("indices[1,0]"), std::string::npos) << m;
    EXPECT_NE(m.find("axis 1 of size 4"), std::string::npos) << m;
    EXPECT_NE(m.find("[-4, 3]"), std::string::npos) << m;
  }
  // An empty gathered axis has no valid index at all.
  auto r = try_run_op(Op::Gather, {Array(DType::F32, {0, 2}), array_of(DType::I32, {1}, {0})});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("axis 0 of size 0"), std::string::npos) << r.status().message();
}

TEST(ReferenceMovement, FlipHandCaseAndTwiceIsIdentity) {
  auto y = run_reference_poisoned(Op::Flip, {iota(DType::F32, {2, 3})}, {{"axes", I64s{-1}}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {2, 3}, {2, 1, 0, 5, 4, 3})));
  y = run_reference_poisoned(Op::Flip, {iota(DType::F32, {2, 3})}, {{"axes", I64s{0, 1}}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {2, 3}, {5, 4, 3, 2, 1, 0})));
  for (DType t : kAllDTypes) {
    Array x = random_array(t, {3, 4, 2}, 4, -50, 50);
    auto once = run_reference_poisoned(Op::Flip, {x}, {{"axes", I64s{0, 2}}});
    ASSERT_EQ(once.size(), 1u);
    for (int64_t o = 0; o < x.numel(); ++o) {
      I64s i = index_of(o, x.shape());
      i[0] = 2 - i[0];
      i[2] = 1 - i[2];
      ASSERT_TRUE(same_element(once[0], o, x, offset_of(i, x.shape()))) << dtype_name(t);
    }
    auto twice = run_reference_poisoned(Op::Flip, {once[0]}, {{"axes", I64s{2, 0}}});
    ASSERT_EQ(twice.size(), 1u);
    EXPECT_TRUE(twice[0].same_data(x)) << dtype_name(t);
  }
  auto e = run_reference_poisoned(Op::Flip, {Array(DType::U8, {3, 0})}, {{"axes", I64s{0, 1}}});
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].shape(), (I64s{3, 0}));
}

}  // namespace
}  // namespace fusebox
