// The CPU's column reduction kernel (reductions over a run of axes before the last): its results
// are the reference kernel's bit for bit, on every reduction kind, f32 and f64, keepdims or not,
// leading and middle runs, chunk boundaries, NaN and infinities, and empty reduced axes; outputs
// are poisoned before each run. Reductions it is not for are declined.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "backends/cpu/column_reduce_kernel.h"
#include "backends/cpu/reference/reference.h"
#include "support/test_util.h"

namespace fusebox {
namespace {

struct Reduction {
  Op op;
  std::vector<int64_t> shape, axes;
  bool keepdims;
};

Graph lone(const Reduction& r, DType dtype) {
  return testing::one_node(r.op, {TensorType{dtype, make_shape(r.shape)}},
                           {{"axes", r.axes}, {"keepdims", r.keepdims}});
}

// Bitwise equality, NaN equal to NaN.
bool same_bits(const Array& a, const Array& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.get_f64(i), y = b.get_f64(i);
    if (std::isnan(x) && std::isnan(y)) continue;
    if (std::memcmp(&x, &y, sizeof x) != 0) return false;
  }
  return true;
}

TEST(ColumnReduceKernel, EqualsTheReferenceBitForBit) {
  const std::vector<Reduction> shapes = {
      {Op::ReduceSum, {33, 1000}, {0}, false},     {Op::ReduceSum, {3, 50, 7}, {1}, true},
      {Op::ReduceSum, {4, 5, 300}, {0, 1}, false}, {Op::ReduceSum, {2, 3, 4, 5}, {-3, -2}, true},
      {Op::ReduceSum, {1, 257}, {0}, true},        {Op::ReduceSum, {700, 3}, {0}, false}};
  uint64_t seed = 1;
  for (Op op : {Op::ReduceSum, Op::ReduceMean, Op::ReduceProd, Op::ReduceMax, Op::ReduceMin}) {
    for (DType dtype : {DType::F32, DType::F64}) {
      for (Reduction r : shapes) {
        r.op = op;
        const Graph g = lone(r, dtype);
        const Node& n = g.nodes()[0];
        const std::string what = std::string(op_keyword(op)) + " of " + g.type(n.inputs[0]).to_string() +
                                 " over " + std::to_string(r.axes.size()) + " axes";
        std::shared_ptr<const Kernel> kernel = cpu::make_column_reduce_kernel(g, n);
        ASSERT_NE(kernel, nullptr) << what;
        // Products of values near 1 stay finite; a NaN and an infinity in some columns.
        Array x = op == Op::ReduceProd ? testing::random_array(dtype, r.shape, seed++, 0.8, 1.25)
                                       : testing::random_array(dtype, r.shape, seed++, -3.0, 3.0);
        if (x.numel() > 40) {
          x.set_f64(17, std::numeric_limits<double>::quiet_NaN());
          x.set_f64(x.numel() - 3, std::numeric_limits<double>::infinity());
        }
        const std::vector<Array> ins{x};
        std::vector<Array> want{Array(dtype, static_dims(g.type(n.outputs[0]).shape))};
        ASSERT_TRUE(cpu::run_reference(n, ins, want).is_ok()) << what;
        for (uint8_t poison : testing::kPoisonBytes) {
          Expected<Array> got = testing::run_host_kernel(*kernel, x, g.type(n.outputs[0]), poison);
          ASSERT_TRUE(got) << what << ": " << got.status().to_string();
          EXPECT_TRUE(same_bits(*got, want[0])) << what << ", poison " << int(poison);
        }
      }
    }
  }
}

// An empty reduced axis: sums are 0, means NaN (as in the reference; shape inference refuses max
// and min of an empty axis).
TEST(ColumnReduceKernel, EmptyReducedAxes) {
  for (Op op : {Op::ReduceSum, Op::ReduceMean}) {
    const Graph g = lone({op, {0, 6}, {0}, false}, DType::F32);
    std::shared_ptr<const Kernel> kernel = cpu::make_column_reduce_kernel(g, g.nodes()[0]);
    ASSERT_NE(kernel, nullptr);
    Expected<Array> got =
        testing::run_host_kernel(*kernel, Array(DType::F32, {0, 6}), g.type(g.outputs()[0]), 0x5A);
    ASSERT_TRUE(got) << got.status().to_string();
    for (int64_t i = 0; i < 6; ++i) {
      if (op == Op::ReduceSum)
        EXPECT_EQ(got->get_f64(i), 0.0);
      else
        EXPECT_TRUE(std::isnan(got->get_f64(i)));
    }
  }
}

TEST(ColumnReduceKernel, DeclinesOtherReductions) {
  for (const Reduction& r :
       std::vector<Reduction>{{Op::ReduceSum, {3, 4}, {1}, true},            // trailing
                              {Op::ReduceSum, {2, 3, 4}, {0, 2}, false},     // two runs
                              {Op::ReduceSum, {2, 3, 4}, {}, false},         // every axis
                              {Op::ReduceSum, {2, 3, 4}, {1, 2}, false}}) {  // trailing run
    const Graph g = lone(r, DType::F32);
    EXPECT_EQ(cpu::make_column_reduce_kernel(g, g.nodes()[0]), nullptr);
  }
  const Graph ints = lone({Op::ReduceSum, {5, 7}, {0}, true}, DType::I32);
  EXPECT_EQ(cpu::make_column_reduce_kernel(ints, ints.nodes()[0]), nullptr);
  const Graph halves = lone({Op::ReduceSum, {5, 7}, {0}, true}, DType::F16);
  EXPECT_EQ(cpu::make_column_reduce_kernel(halves, halves.nodes()[0]), nullptr);
}

}  // namespace
}  // namespace fusebox
