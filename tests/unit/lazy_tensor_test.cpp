// The lazy Tensor API: recording, flush points, fusers and kernel counts, fused == unfused on
// random data, errors at the read, the plan cache and dead stores.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

Tensor rnd(std::vector<int64_t> shape, uint64_t seed) { return Tensor::randn(std::move(shape), seed); }

TEST_F(LazyTest, ChainReadOnceIsOneKernel) {
  Tensor a = rnd({64, 32}, 1), b = rnd({64, 32}, 2);
  Tensor y = (a * b + 1.0).relu();
  EXPECT_FALSE(y.is_computed());
  Array got = read(y);
  EXPECT_EQ(log->kernels(), 1u);
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_TRUE(log->blocks[0].fused);
  EXPECT_EQ(log->blocks[0].fuser, "elementwise");
  Array ea = read(a), eb = read(b);
  Array want(DType::F32, {64, 32});
  for (int64_t i = 0; i < want.numel(); ++i) want.set_f64(i, std::max(0.0f, float(ea.get_f64(i)) * float(eb.get_f64(i)) + 1.0f));
  EXPECT_TRUE(arrays_close(got, want));
}

TEST_F(LazyTest, ReadBetweenTwoOpsGivesTwoKernels) {
  Tensor a = rnd({128}, 3), b = rnd({128}, 4);
  Tensor t = a * b;
  Array mid = read(t);
  Tensor y = (t + 1.0).relu();
  Array got = read(y);
  EXPECT_EQ(log->blocks.size(), 2u);
  EXPECT_EQ(log->kernels(), 2u);
  for (int64_t i = 0; i < 128; ++i) EXPECT_FLOAT_EQ(float(got.get_f64(i)), std::max(0.0f, float(mid.get_f64(i)) + 1.0f));
}

TEST_F(LazyTest, ReadingComputedTensorKeepsQueue) {
  Tensor a = rnd({16}, 5);
  Tensor y = a.exp();
  Array va = read(a);  // computed already: the pending exp stays queued
  EXPECT_FALSE(y.is_computed());
  EXPECT_EQ(log->blocks.size(), 0u);
  read(y);
  EXPECT_TRUE(y.is_computed());
}

// Runs a program touching every fuser on a device, returns its results.
std::vector<Array> program(lazy::Device d) {
  Tensor x = Tensor::randn({8, 16}, 11, DType::F32, d);
  Tensor w = Tensor::randn({16, 12}, 12, DType::F32, d);
  Tensor b = Tensor::randn({12}, 13, DType::F32, d);
  Tensor h = (matmul(x * 0.5, w) + b).relu();                       // epilogue, matmul not first
  Tensor s = (h - h.max({1}, true)).exp();                          // reduction diamond
  Tensor p = s / s.sum({1}, true);
  Tensor t = p.transpose({1, 0}).slice({1}, {7}, {1}) * 2.0 + 1.0;  // preprocess
  Tensor c = where(h > p, h.sigmoid(), p.tanh());
  return {read(h), read(p), read(t), read(c)};
}

TEST_F(LazyTest, FusionOffGivesSameResults) {
  std::vector<Array> fused = program(lazy::Device::cpu());
  size_t fused_blocks = log->blocks.size();
  std::vector<Array> plain = program(lazy::Device::cpu().unfused());
  ASSERT_EQ(fused.size(), plain.size());
  for (size_t i = 0; i < fused.size(); ++i) EXPECT_TRUE(close_to_scale(fused[i], plain[i], 1e-5)) << "result " << i;
  EXPECT_LT(fused_blocks, log->blocks.size() - fused_blocks);  // fewer blocks when fused
}

// Weakness 4 of spec §8: the epilogue fuses also when the matmul is not the group's first record.
TEST_F(LazyTest, Weakness4MatmulEpilogueWhenMatmulNotFirst) {
  Tensor x = rnd({8, 16}, 21), w = rnd({16, 12}, 22), b = rnd({12}, 23);
  Tensor y = (matmul(x * 2.0, w) + b).relu();
  Array got = read(y);
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_EQ(log->blocks[0].fuser, "epilogue");
  EXPECT_EQ(log->blocks[0].ops.front(), Op::Mul);
  Tensor xu = Tensor::from_array(read(x), lazy::Device::cpu().unfused());
  Tensor wu = Tensor::from_array(read(w), lazy::Device::cpu().unfused());
  Tensor bu = Tensor::from_array(read(b), lazy::Device::cpu().unfused());
  EXPECT_TRUE(close_to_scale(got, read((matmul(xu * 2.0, wu) + bu).relu()), 1e-5));
}

// Weakness 4: a reduction fuses with the element-wise work before it and the broadcast back.
TEST_F(LazyTest, Weakness4ReductionWithElementwiseBeforeAndAfter) {
  Tensor x = rnd({4, 33}, 31);
  Tensor e = (x * 1.5).exp();
  Tensor y = e / e.sum({1}, true);
  read(y);
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_EQ(log->blocks[0].fuser, "reduction");
}

// Weakness 4: slices and transposes join the element-wise work instead of breaking it.
TEST_F(LazyTest, Weakness4SliceAndTransposeDoNotBreakFusion) {
  Tensor x = rnd({6, 10}, 41);
  Tensor y = (x.slice({1}, {9}, {1}).transpose({1, 0}) + 1.0).relu();
  Array got = read(y);
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_TRUE(log->blocks[0].fused);
  EXPECT_EQ(got.shape(), (std::vector<int64_t>{8, 6}));
}

// Weakness 3: the score counts bytes and dtypes, not operands: the same chain over a large f64
// tensor saves more than over a small f32 one.
TEST_F(LazyTest, Weakness3ScoreIsSizeAndDtypeAware) {
  auto score_of = [](std::vector<int64_t> shape, DType dt) {
    Tensor x = Tensor::rand(shape, 1, dt);
    Tensor t = x.exp();
    std::vector<lazy::Record> records(2);
    records[0].op = Op::Exp;
    records[0].inputs = {x.state()};
    records[0].outputs = {t.state()};
    records[1].op = Op::Relu;
    records[1].inputs = {t.state()};
    lazy::SegmentView view{&records, [](const lazy::TensorState*, size_t, size_t) { return false; }};
    return lazy::fusion_score(view, 0, 2, 1);
  };
  const double small = score_of({16}, DType::F32), big = score_of({1 << 16}, DType::F32);
  const double big64 = score_of({1 << 16}, DType::F64);
  EXPECT_GT(big, small);
  EXPECT_GT(big64, big);
  EXPECT_TRUE(flush().is_ok());
}

TEST_F(LazyTest, DeadIntermediatesAreNeverWritten) {
  Tensor a = rnd({256}, 51);
  Tensor y = ((a * 3.0).exp() + 1.0).sqrt();  // three intermediates die inside the segment
  read(y);
  EXPECT_EQ(lazy::stats().allocations, 1u);
  Tensor keep = a * 3.0;
  Tensor y2 = keep.exp();
  read(y2);
  EXPECT_EQ(lazy::stats().allocations, 3u);  // `keep` has a handle: it is written too
  EXPECT_TRUE(keep.is_computed());
}

TEST_F(LazyTest, LoopHitsPlanCacheOnSecondIterationAndAfterBatchChange) {
  Tensor w = rnd({16, 8}, 61), b = rnd({8}, 62);
  auto step = [&](int64_t batch, double scale) {
    Tensor x = Tensor::randn({batch, 16}, uint64_t(batch));
    Tensor y = ((matmul(x, w) + b) * scale).relu().sum({1});
    return read(y);
  };
  step(4, 0.5);
  EXPECT_EQ(lazy::stats().plan_misses, 1u);
  EXPECT_EQ(lazy::stats().plan_hits, 0u);
  step(4, 0.25);
  EXPECT_EQ(lazy::stats().plan_hits, 1u);
  Array big = step(9, 0.75);  // a new batch size: same relative form
  EXPECT_EQ(lazy::stats().plan_hits, 2u);
  EXPECT_EQ(lazy::stats().plan_misses, 1u);
  EXPECT_EQ(big.shape(), (std::vector<int64_t>{9}));
  // The cached plan's result equals the unfused program's.
  lazy::Device u = lazy::Device::cpu().unfused();
  Tensor x = Tensor::randn({9, 16}, 9, DType::F32, u);
  Tensor wu = Tensor::from_array(read(w), u), bu = Tensor::from_array(read(b), u);
  EXPECT_TRUE(close_to_scale(big, read(((matmul(x, wu) + bu) * 0.75).relu().sum({1})), 1e-5));
}

// The key is built record by record; whether an intermediate is still needed is known only at the
// flush (its handle, or the drop of its last one), and two flushes that differ in it must not share
// a plan: the plan of the dropped case never writes the intermediate.
TEST_F(LazyTest, PlanKeyTellsAKeptIntermediateFromADroppedOne) {
  Tensor a = rnd({64}, 71);
  const Array expect_mid = read(Tensor::from_array(read(a), lazy::Device::cpu().unfused()) * 3.0);
  const uint64_t misses = lazy::stats().plan_misses, hits = lazy::stats().plan_hits;
  for (int round = 0; round < 2; ++round) {
    Tensor kept = a * 3.0;
    Tensor y = kept.exp();
    read(y);
    ASSERT_TRUE(kept.is_computed()) << "round " << round;
    EXPECT_TRUE(close_to_scale(read(kept), expect_mid, 1e-6));
    const uint64_t before = lazy::stats().allocations;
    Tensor y2 = (a * 3.0).exp();  // the same records; the intermediate's handle died at once
    read(y2);
    EXPECT_EQ(lazy::stats().allocations, before + 1) << "round " << round << ": only y2 is written";
    EXPECT_TRUE(close_to_scale(read(y2), read(y), 1e-6));
  }
  EXPECT_EQ(lazy::stats().plan_misses, misses + 2);
  EXPECT_EQ(lazy::stats().plan_hits, hits + 2);
}

// A handle that dies on another thread records no drop on the producer's stream: only the flush's
// handle count tells the key that the intermediate is dead. The kept case that follows must not
// run that plan, which never writes it.
TEST_F(LazyTest, PlanKeyCountsHandlesThatDiedOnAnotherThread) {
  Tensor a = rnd({64}, 72);
  for (int round = 0; round < 2; ++round) {
    Tensor gone = a * 5.0;
    Tensor y = gone.sin();
    std::thread([h = std::move(gone)]() mutable { h = Tensor(); }).join();
    const uint64_t before = lazy::stats().allocations;
    read(y);
    EXPECT_EQ(lazy::stats().allocations, before + 1)
        << "round " << round << ": the dead intermediate is not written";
    Tensor kept = a * 5.0;
    Tensor y2 = kept.sin();
    read(y2);
    ASSERT_TRUE(kept.is_computed()) << "round " << round;
    EXPECT_TRUE(close_to_scale(read(y2), read(y), 1e-6));
  }
}

// Minibatches sliced from a computed tensor are views, not records: their bounds never reach the
// plan-cache key, so a loop over them compiles once (the last, shorter batch included) and each
// result equals the recorded slice of the same rows with fusion off.
TEST_F(LazyTest, MinibatchSlicesOfAComputedTensorRunOneCachedPlan) {
  Tensor x = rnd({100, 16}, 81), w = rnd({16, 8}, 82);  // no size equals the last batch's 4
  const lazy::Device u = lazy::Device::cpu().unfused();
  const Tensor xu = Tensor::from_array(read(x), u), wu = Tensor::from_array(read(w), u);
  std::vector<Array> want;
  for (int64_t begin = 0; begin < 100; begin += 32) {
    // (xu * 1) is pending: its slice is recorded and run by the slice kernel.
    want.push_back(
        read((matmul((xu * 1.0).slice({begin}, {std::min<int64_t>(begin + 32, 100)}), wu) * 0.5).relu()));
  }
  const uint64_t misses = lazy::stats().plan_misses, hits = lazy::stats().plan_hits;
  for (int64_t begin = 0, k = 0; begin < 100; begin += 32, ++k) {
    const int64_t end = std::min<int64_t>(begin + 32, 100);
    Tensor batch = x.slice({begin}, {end});
    EXPECT_TRUE(batch.is_computed()) << "a view needs no run";
    Array got = read((matmul(batch, w) * 0.5).relu());
    ASSERT_EQ(got.shape(), (std::vector<int64_t>{end - begin, 8}));
    EXPECT_TRUE(close_to_scale(got, want[size_t(k)], 1e-5)) << "rows " << begin << ".." << end;
  }
  EXPECT_EQ(lazy::stats().plan_misses, misses + 1);
  EXPECT_EQ(lazy::stats().plan_hits, hits + 3);
}

// A view shares its tensor's buffer: neither is written in place by a later op, even when the
// handle of one of them has died.
TEST_F(LazyTest, SliceViewsAreNeverWrittenInPlace) {
  Tensor x = rnd({8, 5}, 83);
  const Array before = read(x).clone();
  Tensor row = x.slice({-3}, {-2});  // row 5, negative bounds
  x = x * 2.0;                       // the old x has no handle left
  row = row + 1.0;                   // nor has the old row
  const Array rows = read(row), doubled = read(x);
  for (int64_t j = 0; j < 5; ++j) {
    EXPECT_EQ(rows.get_f64(j), float(before.get_f64(25 + j) + 1.0)) << j;
  }
  for (int64_t i = 0; i < 40; ++i) EXPECT_EQ(doubled.get_f64(i), float(before.get_f64(i) * 2.0)) << i;
  EXPECT_EQ(lazy::stats().inplace_reuses, 0u);
}

// A slice that is not one block of its computed tensor (a column range; a row range under a
// leading axis of extent > 1) is recorded, not viewed, and reads the right elements; a row range
// under leading axes of extent 1 is a view.
TEST_F(LazyTest, OnlyContiguousSlicesOfComputedTensorsAreViews) {
  Tensor x = rnd({4, 6}, 84), y = rnd({2, 5, 3}, 85), z = rnd({1, 5, 3}, 86);
  const Array xs = read(x), ys = read(y), zs = read(z);
  Tensor cols = x.slice({2}, {5}, {1});
  Tensor rows = y.slice({1}, {3}, {1});
  Tensor block = z.slice({1}, {3}, {1});
  EXPECT_FALSE(cols.is_computed());
  EXPECT_FALSE(rows.is_computed());
  EXPECT_TRUE(block.is_computed());
  const Array c = read(cols), r = read(rows), b = read(block);
  ASSERT_EQ(c.shape(), (std::vector<int64_t>{4, 3}));
  for (int64_t i = 0; i < 4; ++i) {
    for (int64_t j = 0; j < 3; ++j) EXPECT_EQ(c.get_f64(i * 3 + j), xs.get_f64(i * 6 + 2 + j));
  }
  ASSERT_EQ(r.shape(), (std::vector<int64_t>{2, 2, 3}));
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(r.get_f64(n * 6 + k), ys.get_f64(n * 15 + 3 + k));
  }
  ASSERT_EQ(b.shape(), (std::vector<int64_t>{1, 2, 3}));
  for (int64_t k = 0; k < 6; ++k) EXPECT_EQ(b.get_f64(k), zs.get_f64(3 + k));
}

// Weakness 2: the plan store is bounded.
TEST_F(LazyTest, Weakness2PlanCacheIsBounded) {
  lazy::set_plan_cache_capacity(3);
  for (int i = 1; i <= 6; ++i) {
    Tensor x = rnd({4}, uint64_t(i));
    Tensor y = x;
    for (int k = 0; k < i; ++k) y = y.exp();
    read(y);
  }
  EXPECT_EQ(lazy::plan_cache_info().entries, 3u);
  lazy::set_plan_cache_capacity(256);
}

TEST_F(LazyTest, ShapeErrorComesBackAtRead) {
  Tensor a = rnd({3, 4}, 71), b = rnd({5, 6}, 72);
  Tensor y = matmul(a, b).relu();
  Expected<Array> r = y.to_array();
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.status().message().find("matmul"), std::string::npos) << r.status().to_string();
}

// cuda:1 is never available (only cuda:0 is supported); cuda:0 is where a GPU and the driver are.
TEST_F(LazyTest, UnavailableDeviceIsAnError) {
  EXPECT_FALSE(lazy::Device::cuda(1).available());
  Tensor a = Tensor::ones({4}, DType::F32, lazy::Device::cuda(1));
  Expected<Array> r = (a + 1.0).to_array();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("cuda:1"), std::string::npos);
  if (Status why = lazy::Device::cuda(0).availability(); !why.is_ok()) {
    EXPECT_NE(why.message().find("cuda:0 is not available: "), std::string::npos) << why.message();
  }
}

TEST_F(LazyTest, ItemAndVectorReads) {
  Tensor a = Tensor::arange(10);
  Expected<float> s = a.sum().item<float>();
  ASSERT_TRUE(s.has_value());
  EXPECT_FLOAT_EQ(*s, 45.0f);
  Expected<std::vector<int64_t>> v = (a * 2.0).cast(DType::I64).to_vector<int64_t>();
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ((*v)[9], 18);
  EXPECT_FALSE(a.item<float>().has_value());  // 10 elements
}

// Weakness 1: recording is cheap (counted, not timed: no kernel runs and no graph is built
// while recording).
TEST_F(LazyTest, Weakness1RecordingRunsNothing) {
  Tensor a = rnd({1024}, 81);
  Tensor y = a;
  for (int i = 0; i < 100; ++i) y = y * 1.0001 + 0.5;
  EXPECT_EQ(lazy::stats().records, 200u);
  EXPECT_EQ(lazy::stats().flushes, 0u);
  EXPECT_EQ(log->blocks.size(), 0u);
  read(y);
  EXPECT_EQ(lazy::stats().flushes, 1u);
}

TEST_F(LazyTest, QueueBoundFlushes) {
  Tensor y = rnd({8}, 91);
  for (size_t i = 0; i < lazy::kMaxPendingRecords + 10; ++i) y = y + 1.0;
  EXPECT_GE(lazy::stats().flushes, 1u);
  Expected<float> v = y.sum().item<float>();
  ASSERT_TRUE(v.has_value());
}

class RecordCounter : public lazy::Observer {
 public:
  void on_record(const lazy::RecordEvent& e) override { ops.push_back(e.op); }
  std::vector<Op> ops;
};

TEST_F(LazyTest, ObserverSeesRecordsAndBlocks) {
  auto counter = std::make_shared<RecordCounter>();
  lazy::add_observer(counter);
  Tensor x = rnd({32}, 101);
  Tensor y = (x.exp() * x).sum();
  read(y);
  lazy::remove_observer(counter);
  EXPECT_EQ(counter->ops, (std::vector<Op>{Op::Exp, Op::Mul, Op::ReduceSum}));
  ASSERT_EQ(log->blocks.size(), 1u);
  EXPECT_EQ(log->blocks[0].ops, counter->ops);
  EXPECT_EQ(log->blocks[0].kernel_count, log->blocks[0].kernels.size());
  EXPECT_GE(log->blocks[0].seconds, 0.0);
  EXPECT_FALSE(log->blocks[0].plan_cache_hit);
}

// A fuser of the user's: takes sin followed by cos and outbids the built-in ones.
class SinCosFuser : public lazy::Fuser {
 public:
  std::string name() const override { return "sincos"; }
  bool fuse(size_t, const lazy::Record& r) override {
    const Op want = taken_ == 0 ? Op::Sin : Op::Cos;
    if (closed_ || taken_ == 2 || r.op != want) {
      closed_ = true;
      return false;
    }
    ++taken_;
    return true;
  }
  lazy::FuserStatus status() const override { return closed_ ? lazy::FuserStatus::Closed : lazy::FuserStatus::Open; }
  lazy::FuserProperties properties(const lazy::SegmentView&) const override { return {1e12, taken_ == 2}; }
  size_t finish(const lazy::SegmentView&) override { return taken_; }
  void reset(size_t) override {
    taken_ = 0;
    closed_ = false;
  }

 private:
  size_t taken_ = 0;
  bool closed_ = false;
};

TEST_F(LazyTest, RegisteredFuserWins) {
  lazy::register_fuser([] { return std::make_unique<SinCosFuser>(); });
  Tensor x = rnd({64}, 111);
  Array got = read((x.sin().cos() + 1.0).exp());
  ASSERT_EQ(log->blocks.size(), 2u);
  EXPECT_EQ(log->blocks[0].fuser, "sincos");
  EXPECT_EQ(log->blocks[1].fuser, "elementwise");  // add and exp after it
  Array xs = read(x);
  for (int64_t i = 0; i < 64; ++i) EXPECT_NEAR(got.get_f64(i), std::exp(std::cos(std::sin(float(xs.get_f64(i)))) + 1.0), 1e-5);
}

}  // namespace
}  // namespace fusebox::testing
