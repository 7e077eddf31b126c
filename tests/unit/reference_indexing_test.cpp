// Tests of the CPU reference kernels of gather_nd, scatter_elements, scatter_nd and
// reverse_sequence: the ONNX
// documentation's examples, random data and random (negative included) indices against naive
// loops written here, the three reductions, every reduction's dtype rules, and out-of-range
// indices and mismatched shapes coming back as errors.
#include <gtest/gtest.h>

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

std::vector<int64_t> index_of(int64_t flat, const I64s& shape) {
  I64s index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t offset_of(const I64s& index, const I64s& shape) {
  int64_t off = 0;
  for (size_t d = 0; d < shape.size(); ++d) off = off * shape[d] + index[d];
  return off;
}

int64_t numel(const I64s& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Combines like the kernels: floats in the dtype's precision (f32 here), integers exactly (the
// test values stay far from overflow).
double combine(const std::string& reduction, DType t, double a, double b) {
  if (reduction == "none") return b;
  double r = reduction == "add" ? a + b : a * b;
  return t == DType::F32 ? double(float(r)) : r;
}

// The ONNX ScatterElements definition as a loop over the update positions.
Array naive_scatter_elements(const Array& data, const Array& idx, const Array& upd, int axis,
                             const std::string& red) {
  I64s ds(data.shape().begin(), data.shape().end()), is(idx.shape().begin(), idx.shape().end());
  std::vector<double> out = to_doubles(data), u = to_doubles(upd);
  for (int64_t k = 0; k < idx.numel(); ++k) {
    I64s p = index_of(k, is);
    int64_t v = idx.get_i64(k);
    p[size_t(axis)] = v < 0 ? v + ds[size_t(axis)] : v;
    double& o = out[size_t(offset_of(p, ds))];
    o = combine(red, data.dtype(), o, u[size_t(k)]);
  }
  return array_of(data.dtype(), ds, out);
}

TEST(ReferenceIndexing, ScatterElementsOnnxExamples) {
  Array data = array_of(DType::F32, {1, 5}, {1, 2, 3, 4, 5});
  Array upd = array_of(DType::F32, {1, 2}, {1.1, 2.1});
  auto y = run_reference_poisoned(Op::ScatterElements, {data, array_of(DType::I64, {1, 2}, {1, 3}), upd},
                                  {{"axis", int64_t(1)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {1, 5}, {1, 1.1, 3, 2.1, 5})));
  // Negative indices count from the end; repeated indices with "add" sum every update.
  y = run_reference_poisoned(Op::ScatterElements, {data, array_of(DType::I32, {1, 2}, {1, -4}), upd},
                             {{"axis", int64_t(1)}, {"reduction", std::string("add")}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {1, 5}, {1, 2 + 1.1f + 2.1f, 3, 4, 5})));
  // Axis 0 (the default) on a 3x3 matrix.
  Array m = array_of(DType::F32, {3, 3}, {0, 0, 0, 0, 0, 0, 0, 0, 0});
  for (int64_t i = 0; i < 9; ++i) m.set_f64(i, 0.5 + double(i));
  y = run_reference_poisoned(Op::ScatterElements, {m, array_of(DType::I64, {2, 3}, {1, 0, 2, 0, 2, 1}),
                                                   array_of(DType::F32, {2, 3}, {1, 1.1, 1.2, 2, 2.1, 2.2})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {3, 3}, {2, 1.1, 2.5, 1, 4.5, 2.2, 6.5, 2.1, 1.2})));
}

TEST(ReferenceIndexing, ScatterElementsMatchesNaiveLoops) {
  const I64s ds{3, 4, 5}, is{2, 3, 4};
  uint64_t seed = 1;
  for (DType t : {DType::F32, DType::I32, DType::F64}) {
    for (int axis : {0, 1, 2, -1}) {
      for (const char* red : {"none", "add", "mul"}) {
        const int a = axis < 0 ? axis + 3 : axis;
        Array data = random_array(t, ds, ++seed, -9, 9);
        Array upd = random_array(t, is, ++seed, -9, 9);
        Array idx = random_array(DType::I64, is, ++seed, -double(ds[size_t(a)]), double(ds[size_t(a)]));
        auto y = run_reference_poisoned(Op::ScatterElements, {data, idx, upd},
                                        {{"axis", int64_t(axis)}, {"reduction", std::string(red)}});
        ASSERT_EQ(y.size(), 1u);
        EXPECT_TRUE(arrays_close(y[0], naive_scatter_elements(data, idx, upd, a, red), 0, 0))
            << dtype_name(t) << " axis " << axis << " " << red;
      }
    }
  }
  // f16 and bool move bytes unchanged with reduction none.
  for (DType t : {DType::F16, DType::Bool, DType::I8}) {
    Array data = random_array(t, ds, 7), upd = random_array(t, is, 8);
    Array idx = random_array(DType::I32, is, 9, -4, 4);
    auto y = run_reference_poisoned(Op::ScatterElements, {data, idx, upd}, {{"axis", int64_t(1)}});
    ASSERT_EQ(y.size(), 1u);
    EXPECT_TRUE(arrays_close(y[0], naive_scatter_elements(data, idx, upd, 1, "none"), 0, 0)) << dtype_name(t);
  }
}

TEST(ReferenceIndexing, ScatterNdOnnxExamplesAndNaiveLoops) {
  // ONNX: data 1..8, indices [[4],[3],[1],[7]], updates [9,10,11,12].
  Array data = array_of(DType::F32, {8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Array idx = array_of(DType::I64, {4, 1}, {4, 3, 1, 7});
  auto y = run_reference_poisoned(Op::ScatterNd, {data, idx, array_of(DType::F32, {4}, {9, 10, 11, 12})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {8}, {1, 11, 3, 10, 9, 6, 7, 12})));
  // Slices (k < rank), negative indices and every reduction, against a naive loop.
  const I64s ds{4, 3, 5};
  uint64_t seed = 100;
  for (DType t : {DType::F32, DType::I64}) {
    for (int64_t k : {1, 2, 3}) {
      for (const char* red : {"none", "add", "mul"}) {
        I64s is{2, 3, k}, us{2, 3};
        us.insert(us.end(), ds.begin() + k, ds.end());
        Array d = random_array(t, ds, ++seed, -9, 9), u = random_array(t, us, ++seed, -9, 9);
        Array ix(DType::I64, is);
        for (int64_t i = 0; i < ix.numel(); ++i) {
          int64_t size = ds[size_t(i % k)];
          ix.set_i64(i, random_array(DType::I64, {1}, ++seed, -double(size), double(size)).get_i64(0));
        }
        y = run_reference_poisoned(Op::ScatterNd, {d, ix, u}, {{"reduction", std::string(red)}});
        ASSERT_EQ(y.size(), 1u);
        std::vector<double> want = to_doubles(d), uv = to_doubles(u);
        const int64_t slice = numel(I64s(ds.begin() + k, ds.end()));
        for (int64_t tu = 0; tu < 6; ++tu) {
          I64s p(ds.size(), 0);
          for (int64_t j = 0; j < k; ++j) {
            int64_t v = ix.get_i64(tu * k + j);
            p[size_t(j)] = v < 0 ? v + ds[size_t(j)] : v;
          }
          int64_t base = offset_of(p, ds);
          for (int64_t s = 0; s < slice; ++s) {
            double& o = want[size_t(base + s)];
            o = combine(red, t, o, uv[size_t(tu * slice + s)]);
          }
        }
        EXPECT_TRUE(arrays_close(y[0], array_of(t, ds, want), 0, 0))
            << dtype_name(t) << " k " << k << " " << red;
      }
    }
  }
}

TEST(ReferenceIndexing, GatherNdOnnxExamplesAndNaiveLoops) {
  Array d2 = array_of(DType::I32, {2, 2}, {0, 1, 2, 3});
  auto y = run_reference_poisoned(Op::GatherNd, {d2, array_of(DType::I64, {2, 2}, {0, 0, 1, 1})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::I32, {2}, {0, 3})));
  y = run_reference_poisoned(Op::GatherNd, {d2, array_of(DType::I64, {2, 1}, {1, 0})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::I32, {2, 2}, {2, 3, 0, 1})));
  Array d3 = array_of(DType::F32, {2, 2, 2}, {0, 1, 2, 3, 4, 5, 6, 7});
  y = run_reference_poisoned(Op::GatherNd, {d3, array_of(DType::I64, {2, 1}, {1, 0})},
                             {{"batch_dims", int64_t(1)}});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, {2, 2}, {2, 3, 4, 5})));
  // Random data, batch_dims 0..2, every index length, negative indices.
  const I64s ds{3, 4, 5, 2};
  uint64_t seed = 300;
  for (int64_t b : {0, 1, 2}) {
    for (int64_t k = 1; k <= 4 - b; ++k) {
      I64s is(ds.begin(), ds.begin() + b);
      is.push_back(3);
      is.push_back(k);
      Array d = random_array(DType::F32, ds, ++seed);
      Array ix(DType::I64, is);
      for (int64_t i = 0; i < ix.numel(); ++i) {
        int64_t size = ds[size_t(b + i % k)];
        ix.set_i64(i, random_array(DType::I64, {1}, ++seed, -double(size), double(size)).get_i64(0));
      }
      y = run_reference_poisoned(Op::GatherNd, {d, ix}, {{"batch_dims", b}});
      ASSERT_EQ(y.size(), 1u);
      I64s os(is.begin(), is.end() - 1);
      os.insert(os.end(), ds.begin() + b + k, ds.end());
      ASSERT_EQ(I64s(y[0].shape().begin(), y[0].shape().end()), os);
      std::vector<double> dv = to_doubles(d), want;
      for (int64_t o = 0; o < numel(os); ++o) {
        I64s op = index_of(o, os), src(ds.size());
        for (int64_t j = 0; j < b; ++j) src[size_t(j)] = op[size_t(j)];
        I64s tuple_pos(op.begin(), op.begin() + b + 1);  // batch coords + the tuple's coordinate
        for (int64_t j = 0; j < k; ++j) {
          I64s ip = tuple_pos;
          ip.push_back(j);
          int64_t v = ix.get_i64(offset_of(ip, is));
          src[size_t(b + j)] = v < 0 ? v + ds[size_t(b + j)] : v;
        }
        for (size_t j = size_t(b + k); j < ds.size(); ++j) src[j] = op[size_t(b) + 1 + (j - size_t(b + k))];
        want.push_back(dv[size_t(offset_of(src, ds))]);
      }
      EXPECT_TRUE(arrays_close(y[0], array_of(DType::F32, os, want), 0, 0)) << "b " << b << " k " << k;
    }
  }
}

TEST(ReferenceIndexing, OutOfRangeIndicesAreErrors) {
  Array data = random_array(DType::F32, {3, 4}, 5);
  auto r = try_run_op(Op::GatherNd, {data, array_of(DType::I64, {2, 2}, {0, 1, 2, 4})});
  ASSERT_FALSE(r.has_value());
  std::string m = r.status().message();
  EXPECT_NE(
      m.find("gather_nd: index 4 at indices[1,1] is out of range for axis 1 of size 4 (valid range [-4, 3])"),
      std::string::npos)
      << m;
  r = try_run_op(Op::ScatterNd,
                 {data, array_of(DType::I64, {1, 1}, {-4}), random_array(DType::F32, {1, 4}, 6)});
  ASSERT_FALSE(r.has_value());
  m = r.status().message();
  EXPECT_NE(m.find("scatter_nd: index -4 at indices[0,0] is out of range for axis 0 of size 3"),
            std::string::npos)
      << m;
  r = try_run_op(Op::ScatterElements,
                 {data, array_of(DType::I32, {1, 2}, {0, 7}), random_array(DType::F32, {1, 2}, 7)},
                 {{"axis", int64_t(1)}});
  ASSERT_FALSE(r.has_value());
  m = r.status().message();
  EXPECT_NE(m.find("scatter_elements: index 7 at indices[0,1]"), std::string::npos) << m;
  // The error names the node when the graph runs.
  EXPECT_NE(m.find("scatter_elements"), std::string::npos) << m;
}

TEST(ReferenceIndexing, ShapeErrors) {
  Array data = random_array(DType::F32, {3, 4}, 5);
  // Index tuples longer than the data's rank.
  auto r = try_run_op(Op::GatherNd, {data, array_of(DType::I64, {1, 3}, {0, 0, 0})});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("index length 3 must be in [1, 2]"), std::string::npos)
      << r.status().message();
  // batch_dims over the batch sizes.
  r = try_run_op(Op::GatherNd, {data, array_of(DType::I64, {2, 1}, {0, 0})}, {{"batch_dims", int64_t(1)}});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("batch dim 0 differs"), std::string::npos) << r.status().message();
  // scatter_nd updates of the wrong shape.
  r = try_run_op(Op::ScatterNd,
                 {data, array_of(DType::I64, {2, 1}, {0, 1}), random_array(DType::F32, {2, 3}, 1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("updates must be f32[2,4]"), std::string::npos) << r.status().message();
  // scatter_elements: updates and indices differ; indices larger than the data; bool with add.
  r = try_run_op(Op::ScatterElements,
                 {data, array_of(DType::I64, {1, 2}, {0, 1}), random_array(DType::F32, {1, 3}, 1)});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("differ in shape"), std::string::npos) << r.status().message();
  r = try_run_op(Op::ScatterElements,
                 {data, array_of(DType::I64, {4, 1}, {0, 1, 2, 0}), random_array(DType::F32, {4, 1}, 1)},
                 {{"axis", int64_t(1)}});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("larger than data"), std::string::npos) << r.status().message();
  Array flags = random_array(DType::Bool, {4}, 3);
  r = try_run_op(Op::ScatterElements,
                 {flags, array_of(DType::I64, {1}, {0}), random_array(DType::Bool, {1}, 1)},
                 {{"reduction", std::string("add")}});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("needs numeric data"), std::string::npos) << r.status().message();
}

TEST(ReferenceIndexing, ReverseSequenceMatchesNaiveLoops) {
  // ONNX example (time_axis 0, batch_axis 1): lens [4, 3, 2, 1] over a 4x4 matrix.
  Array x = array_of(DType::F32, {4, 4}, {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15});
  auto y = run_reference_poisoned(Op::ReverseSequence, {x, array_of(DType::I64, {4}, {4, 3, 2, 1})});
  ASSERT_EQ(y.size(), 1u);
  EXPECT_TRUE(arrays_close(
      y[0], array_of(DType::F32, {4, 4}, {3, 6, 9, 12, 2, 5, 8, 13, 1, 4, 10, 14, 0, 7, 11, 15})));
  // Random data of rank 3, both axis orders, lengths 0 to the full time axis.
  const I64s shape{4, 5, 3};
  for (int64_t batch_axis : {0, 1}) {
    const int64_t time_axis = 1 - batch_axis;
    Array d = random_array(DType::F16, shape, 40 + batch_axis);
    const int64_t batches = shape[size_t(batch_axis)], steps = shape[size_t(time_axis)];
    Array lens(DType::I32, {batches});
    for (int64_t b = 0; b < batches; ++b) lens.set_i64(b, (b * 3 + 1) % (steps + 1));
    y = run_reference_poisoned(Op::ReverseSequence, {d, lens},
                               {{"batch_axis", batch_axis}, {"time_axis", time_axis}});
    ASSERT_EQ(y.size(), 1u);
    Array want(DType::F16, shape);
    for (int64_t o = 0; o < d.numel(); ++o) {
      I64s p = index_of(o, shape);
      int64_t len = lens.get_i64(p[size_t(batch_axis)]), t = p[size_t(time_axis)];
      if (t < len) p[size_t(time_axis)] = len - 1 - t;
      want.set_f64(o, d.get_f64(offset_of(p, shape)));
    }
    EXPECT_TRUE(arrays_close(y[0], want, 0, 0)) << "batch_axis " << batch_axis;
  }
  auto r = try_run_op(Op::ReverseSequence, {x, array_of(DType::I64, {4}, {4, 5, 0, 1})});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("sequence_lens[1] = 5 is out of range [0, 4]"), std::string::npos)
      << r.status().message();
  r = try_run_op(Op::ReverseSequence, {x, array_of(DType::I64, {3}, {1, 1, 1})});
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("sequence_lens must be i32 or i64 [batch]"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace fusebox
