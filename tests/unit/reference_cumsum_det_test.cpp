// Tests of the CPU reference kernels of cumsum and det: running sums on random data against a
// loop written here (every axis, exclusive, reverse, the axis as attribute and as operand, integer
// wrap-around), determinants against a Laplace expansion on random matrices, singular and
// permuted matrices, and the errors of a bad axis or a non-square input.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_util.h"

namespace fusebox {
namespace {

using testing::array_of;
using testing::array_of_ints;
using testing::arrays_close;
using testing::random_array;
using testing::run_reference_poisoned;
using testing::try_run_op;
using I64s = std::vector<int64_t>;

TEST(ReferenceCumSum, HandCases) {
  Array x = array_of(DType::F64, {5}, {1, 2, 3, 4, 5});
  const std::pair<std::pair<bool, bool>, std::vector<double>> cases[] = {
      {{false, false}, {1, 3, 6, 10, 15}},
      {{true, false}, {0, 1, 3, 6, 10}},
      {{false, true}, {15, 14, 12, 9, 5}},
      {{true, true}, {14, 12, 9, 5, 0}},
  };
  for (const auto& [flags, want] : cases) {
    auto y = run_reference_poisoned(
        Op::CumSum, {x}, {{"axis", int64_t(0)}, {"exclusive", flags.first}, {"reverse", flags.second}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], array_of(DType::F64, {5}, want), 0, 0)) << flags.first << flags.second;
  }
}

TEST(ReferenceCumSum, MatchesNaiveLoopsOnEveryAxis) {
  const I64s shape{3, 4, 5};
  uint64_t seed = 60;
  for (DType t : {DType::F32, DType::F64, DType::I32, DType::I64}) {
    for (int64_t axis : {0, 1, 2, -1}) {
      for (bool exclusive : {false, true}) {
        for (bool reverse : {false, true}) {
          for (bool as_operand : {false, true}) {
            Array x = random_array(t, shape, ++seed, -50, 50);
            std::vector<Array> in{x};
            Attrs attrs{{"exclusive", exclusive}, {"reverse", reverse}};
            if (as_operand)
              in.push_back(array_of_ints(DType::I64, {}, {axis}));
            else
              attrs.set("axis", axis);
            auto y = run_reference_poisoned(Op::CumSum, in, attrs);
            ASSERT_EQ(y.size(), 1u);
            const size_t a = size_t(axis < 0 ? axis + 3 : axis);
            I64s stride{20, 5, 1};
            Array want(t, shape);
            for (int64_t o = 0; o < x.numel(); ++o) {
              const int64_t pos = (o / stride[a]) % shape[a], base = o - pos * stride[a];
              double s = 0;
              for (int64_t k = 0; k < shape[a]; ++k) {
                bool take = reverse ? (exclusive ? k > pos : k >= pos) : (exclusive ? k < pos : k <= pos);
                if (take) s += x.get_f64(base + k * stride[a]);
              }
              want.set_f64(o, s);
            }
            double tol = t == DType::F32 ? 1e-5 : 1e-12;
            EXPECT_TRUE(arrays_close(y[0], want, tol, tol))
                << dtype_name(t) << " axis " << axis << " exclusive " << exclusive << " reverse " << reverse;
          }
        }
      }
    }
  }
}

TEST(ReferenceCumSum, IntegersWrapAndErrors) {
  Array x = array_of_ints(DType::I32, {3}, {2147483647, 1, 1});
  auto y = run_reference_poisoned(Op::CumSum, {x}, {{"axis", int64_t(0)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(
      arrays_close(y[0], array_of_ints(DType::I32, {3}, {2147483647, -2147483647 - 1, -2147483647}), 0, 0));
  auto r = try_run_op(Op::CumSum, {random_array(DType::F32, {2, 3}, 1), array_of_ints(DType::I32, {1}, {2})});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("cumsum: axis 2 is out of range for rank 2"), std::string::npos)
      << r.status().message();
  r = try_run_op(Op::CumSum, {random_array(DType::F32, {2, 3}, 1)}, {{"axis", int64_t(-3)}});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("axis -3 out of range"), std::string::npos) << r.status().message();
  r = try_run_op(Op::CumSum, {random_array(DType::F32, {2, 3}, 1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("needs the axis"), std::string::npos) << r.status().message();
}

// Laplace expansion along the first row, in double: independent of elimination and pivoting.
double laplace(const std::vector<double>& m, int64_t n) {
  if (n == 1) return m[0];
  double det = 0;
  for (int64_t c = 0; c < n; ++c) {
    std::vector<double> minor;
    for (int64_t r = 1; r < n; ++r)
      for (int64_t k = 0; k < n; ++k)
        if (k != c) minor.push_back(m[size_t(r * n + k)]);
    det += (c % 2 == 0 ? 1 : -1) * m[size_t(c)] * laplace(minor, n - 1);
  }
  return det;
}

TEST(ReferenceDet, MatchesLaplaceExpansion) {
  uint64_t seed = 80;
  for (DType t : {DType::F32, DType::F64}) {
    for (int64_t n : {1, 2, 3, 4, 5}) {
      Array x = random_array(t, {2, 3, n, n}, ++seed);
      auto y = run_reference_poisoned(Op::Det, {x});
      ASSERT_EQ(y.size(), 1u);
      ASSERT_EQ(I64s(y[0].shape().begin(), y[0].shape().end()), (I64s{2, 3}));
      Array want(t, {2, 3});
      for (int64_t b = 0; b < 6; ++b) {
        std::vector<double> m;
        for (int64_t i = 0; i < n * n; ++i) m.push_back(x.get_f64(b * n * n + i));
        want.set_f64(b, laplace(m, n));
      }
      EXPECT_TRUE(arrays_close(y[0], want, 1e-5, 1e-6)) << dtype_name(t) << " n " << n;
    }
  }
}

TEST(ReferenceDet, HandCasesSingularAndErrors) {
  // A permutation that needs pivoting (zero on the diagonal), a singular matrix, and 2-D input.
  auto y = run_reference_poisoned(Op::Det, {array_of(DType::F32, {3, 3, 3}, {0, 1, 0, 1, 0, 0, 0, 0, 1,  //
                                                                             1, 2, 3, 2, 4, 6, 7, 8, 9,  //
                                                                             2, 0, 0, 0, 3, 0, 0, 0, 4})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3}, {-1, 0, 24}), 0, 1e-6));
  y = run_reference_poisoned(Op::Det, {array_of(DType::F64, {2, 2}, {1, 2, 3, 4})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F64, {}, {-2}), 1e-15, 0));
  auto r = try_run_op(Op::Det, {random_array(DType::F32, {2, 3}, 1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("square"), std::string::npos) << r.status().message();
  r = try_run_op(Op::Det, {random_array(DType::I32, {2, 2}, 1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("float tensor"), std::string::npos) << r.status().message();
}

}  // namespace
}  // namespace fusebox
