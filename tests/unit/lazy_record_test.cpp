// The recording path of the lazy Tensor API: operand and result lists kept inline in a record
// (lazy::SmallVec) and spilled past their inline size, operators that borrow their operands,
// and records built in place in the stream's queue, including the flush that a full queue
// triggers while a record is appended.
#include <gtest/gtest.h>

#include <cmath>
#include <memory>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

TEST(SmallVecTest, KeepsOrderInlineAndPastItsInlineSize) {
  lazy::SmallVec<std::shared_ptr<int>, 2> v;
  auto probe = std::make_shared<int>(0);
  for (int i = 0; i < 5; ++i) {
    v.push_back(i == 0 ? probe : std::make_shared<int>(i));
    ASSERT_EQ(v.size(), size_t(i + 1));
    for (int k = 0; k <= i; ++k) EXPECT_EQ(*v[size_t(k)], k) << "after " << i + 1 << " elements";
  }
  lazy::SmallVec<std::shared_ptr<int>, 2> copy = v;
  EXPECT_EQ(probe.use_count(), 3);  // probe, v, copy: spilling moved the element, it did not copy it
  lazy::SmallVec<std::shared_ptr<int>, 2> moved = std::move(copy);
  EXPECT_EQ(probe.use_count(), 3);
  int sum = 0;
  for (const auto& p : moved) sum += *p;
  EXPECT_EQ(sum, 0 + 1 + 2 + 3 + 4);
}

TEST(SmallVecTest, InitializerListAndReserveBeyondInline) {
  lazy::SmallVec<int, 3> small = {7, 8};
  EXPECT_EQ(small.size(), 2u);
  EXPECT_EQ(small[1], 8);
  lazy::SmallVec<int, 3> big;
  big.reserve(10);  // moves to the heap before any element: later pushes stay contiguous
  for (int i = 0; i < 10; ++i) big.push_back(i);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(big.data()[i], i);
  lazy::SmallVec<int, 3> assigned;
  assigned = {1, 2, 3, 4};
  EXPECT_EQ(assigned.size(), 4u);
  EXPECT_EQ(assigned[3], 4);
}

// Counts records and their operands, as the recording thread reports them.
class RecordLog : public lazy::Observer {
 public:
  void on_record(const lazy::RecordEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    inputs.push_back(e.num_inputs);
    ops.push_back(e.op);
  }
  std::mutex mu;
  std::vector<size_t> inputs;
  std::vector<Op> ops;
};

// A concat of six parts keeps more operands than a record holds inline.
TEST_F(LazyTest, WideConcatMatchesItsParts) {
  std::vector<Tensor> parts;
  for (int i = 0; i < 6; ++i) parts.push_back(Tensor::randn({3, int64_t(2 + i)}, uint64_t(10 + i)) * 2.0);
  Tensor y = concat(parts, 1);
  Array got = read(y);
  ASSERT_EQ(got.shape(), (std::vector<int64_t>{3, 2 + 3 + 4 + 5 + 6 + 7}));
  int64_t col = 0;
  for (const Tensor& p : parts) {
    Array want = read(p);
    const int64_t w = want.shape()[1];
    for (int64_t r = 0; r < 3; ++r) {
      for (int64_t c = 0; c < w; ++c) EXPECT_EQ(got.get_f64(r * 27 + col + c), want.get_f64(r * w + c));
    }
    col += w;
  }
}

// A segment of one record reading 40 computed tensors: its relative form indexes far more tensors
// than it reserved for one record, so the index grows while it is built. Run twice (the second
// time from the plan cache), both give the parts' values in order.
TEST_F(LazyTest, OneRecordReadingManyTensorsGrowsTheIndex) {
  std::vector<Tensor> parts;
  for (int i = 0; i < 40; ++i) parts.push_back(Tensor::randn({2, 3}, uint64_t(100 + i)));
  std::vector<Array> want;
  for (const Tensor& p : parts) want.push_back(read(p));
  for (int run = 0; run < 2; ++run) {
    Tensor y = concat(parts, 0);
    Array got = read(y);
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{80, 3}));
    for (size_t i = 0; i < want.size(); ++i) {
      for (int64_t e = 0; e < 6; ++e) EXPECT_EQ(got.get_f64(int64_t(i) * 6 + e), want[i].get_f64(e)) << i << " " << e;
    }
  }
  EXPECT_EQ(lazy::stats().plan_hits, 1u);
}

// Operators borrow their arguments; the generic form takes a vector. Both record the same op
// with the same operands and give the same values.
TEST_F(LazyTest, OperatorsAndApplyRecordTheSame) {
  auto records = std::make_shared<RecordLog>();
  lazy::add_observer(records);
  Tensor a = Tensor::randn({33}, 5), b = Tensor::randn({33}, 6), c = Tensor::rand({33}, 7);
  // One statement per op: the order of records does not depend on argument evaluation order.
  Tensor gt = c > b, prod = a * b, neg = -a;
  Tensor by_operator = where(gt, prod, neg);
  Tensor gt2 = Tensor::apply(Op::Greater, {c, b}), prod2 = Tensor::apply(Op::Mul, {a, b});
  Tensor neg2 = Tensor::apply(Op::Neg, {a});
  Tensor by_apply = Tensor::apply(Op::Where, {gt2, prod2, neg2});
  lazy::remove_observer(records);
  ASSERT_EQ(records->ops.size(), 8u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(records->ops[i], records->ops[i + 4]) << "record " << i;
    EXPECT_EQ(records->inputs[i], records->inputs[i + 4]) << "record " << i;
  }
  EXPECT_EQ(records->ops[3], Op::Where);
  EXPECT_EQ(records->inputs[3], 3u);
  Array x = read(by_operator), y = read(by_apply);
  Array ea = read(a), eb = read(b), ec = read(c);
  for (int64_t i = 0; i < 33; ++i) {
    const float want = float(ec.get_f64(i)) > float(eb.get_f64(i)) ? float(ea.get_f64(i)) * float(eb.get_f64(i))
                                                                   : -float(ea.get_f64(i));
    EXPECT_EQ(float(x.get_f64(i)), want) << i;
    EXPECT_EQ(float(y.get_f64(i)), want) << i;
  }
}

// More records than a queue holds: the queue flushes while a record is appended (in place,
// under the record lock), and recording goes on into the emptied queue.
TEST_F(LazyTest, ChainLongerThanTheQueue) {
  const int n = int(lazy::kMaxPendingRecords) + 500;
  Tensor x = Tensor::rand({8}, 9);
  Tensor s = Tensor::scalar(1.0001);
  Tensor y = x;
  for (int i = 0; i < n; ++i) y = y * s;
  Array got = read(y), ex = read(x);
  EXPECT_GE(lazy::stats().flushes, 2u);
  for (int64_t i = 0; i < 8; ++i) {
    float want = float(ex.get_f64(i));
    for (int k = 0; k < n; ++k) want *= 1.0001f;
    // f32, n sequential products rounded each: fused or not, the same roundings (1e-5 relative).
    EXPECT_NEAR(got.get_f64(i), want, 1e-5 * std::fabs(want)) << i;
  }
}

}  // namespace
}  // namespace fusebox::testing
