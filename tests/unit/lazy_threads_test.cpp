// The lazy Tensor API across threads: tensors shared between threads, drops on another thread,
// sync from another thread, and plans that do not depend on other threads' work (spec §6).
// Names contain "AcrossThreads" so the TSan run of `make test-sanitize` picks them.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <thread>

#include "support/lazy_test_util.h"

namespace fusebox::testing {
namespace {

TEST_F(LazyTest, PendingTensorUsedAcrossThreads) {
  Tensor a = Tensor::randn({256}, 1);
  Tensor y = (a * 2.0).exp();  // pending on this thread's stream
  Array got;
  std::thread t([&] {
    Tensor z = y + 1.0;  // drains the main thread's stream first
    got = read(z);
  });
  t.join();
  EXPECT_TRUE(y.is_computed());
  Array ya = read(y);
  for (int64_t i = 0; i < 256; ++i) EXPECT_FLOAT_EQ(float(got.get_f64(i)), float(ya.get_f64(i)) + 1.0f);
}

TEST_F(LazyTest, DropsAcrossThreads) {
  std::vector<Tensor> made;
  for (int i = 0; i < 8; ++i) made.push_back((Tensor::randn({64}, uint64_t(i)) + 1.0).relu());
  std::thread t([moved = std::move(made)]() mutable { moved.clear(); });  // last handles die there
  t.join();
  EXPECT_TRUE(sync().is_ok());
}

// Memory usage and stats are counted per thread and summed when read: what a thread counted stays
// counted after it ends, and a drop on another thread than the maker's balances it.
TEST_F(LazyTest, UsageAndStatsCountWorkOfThreadsThatEndedAcrossThreads) {
  const lazy::MemoryUsage start = lazy::memory_usage_all();
  lazy::reset_stats();
  std::vector<Tensor> kept;
  std::thread maker([&] {
    std::vector<Tensor> made;
    for (int i = 0; i < 5; ++i) made.push_back(Tensor::rand({100}, uint64_t(i)) * 3.0);
    EXPECT_TRUE(sync().is_ok());
    kept = {made[1], made[3]};
  });
  maker.join();
  EXPECT_EQ(lazy::memory_usage_all().live_tensors, start.live_tensors + 2);
  EXPECT_EQ(lazy::memory_usage_all().bytes, start.bytes + 800);
  EXPECT_EQ(lazy::stats().records, 5u);  // the five products; rand and the scalars are not records
  std::thread dropper([moved = std::move(kept)]() mutable { moved.clear(); });
  dropper.join();
  EXPECT_EQ(lazy::memory_usage_all().live_tensors, start.live_tensors);
  EXPECT_EQ(lazy::memory_usage_all().bytes, start.bytes);
  lazy::reset_stats();
  EXPECT_EQ(lazy::stats().records, 0u);
}

// Weakness 5 of spec §8: sync waits for every thread's stream, not only the caller's.
TEST_F(LazyTest, Weakness5SyncAcrossThreadsRunsEveryStream) {
  std::atomic<bool> recorded{false}, synced{false};
  Tensor shared;
  std::thread producer([&] {
    Tensor x = Tensor::randn({128}, 7);
    Tensor local = (x * x).sqrt();
    shared = local;
    recorded = true;
    while (!synced) std::this_thread::yield();
    EXPECT_TRUE(local.is_computed());  // the other thread's sync ran this stream
  });
  while (!recorded) std::this_thread::yield();
  EXPECT_TRUE(sync(lazy::Device::cpu()).is_ok());
  EXPECT_TRUE(shared.is_computed());
  synced = true;
  producer.join();
  Array v = read(shared);
  for (int64_t i = 0; i < v.numel(); ++i) EXPECT_GE(v.get_f64(i), 0.0);
}

// What fuses depends only on each thread's own sequence: the blocks of a program run alone and
// with other threads recording and flushing their own streams at the same time are the same.
std::vector<std::string> run_program(BlockLog& log, uint64_t seed) {
  Tensor x = Tensor::randn({16, 32}, seed), w = Tensor::randn({32, 8}, seed + 1);
  Tensor h = (matmul(x + 1.0, w) * 0.5).tanh();
  Tensor s = h - h.mean({1}, true);
  EXPECT_TRUE(s.to_array().has_value());
  std::vector<std::string> out;
  for (const auto& b : log.on_thread(std::this_thread::get_id())) out.push_back(b.fuser + ":" + std::to_string(b.ops.size()));
  return out;
}

TEST_F(LazyTest, SamePlansWithInterferingAcrossThreads) {
  std::vector<std::string> alone;
  std::thread solo([&] { alone = run_program(*log, 100); });
  solo.join();
  std::atomic<bool> stop{false};
  std::vector<std::thread> noise;
  for (int k = 0; k < 2; ++k) {
    noise.emplace_back([&, k] {
      int i = 0;
      while (!stop) {
        Tensor a = Tensor::rand({32}, uint64_t(k * 1000 + i++));
        Tensor b = (a.exp() + a).relu();
        if (i % 3 == 0) (void)flush();  // its own stream only: sync() would cut the others' queues
        (void)b.to_array();
      }
    });
  }
  std::vector<std::vector<std::string>> busy(3);
  std::vector<std::thread> runs;
  for (int k = 0; k < 3; ++k) runs.emplace_back([&, k] { busy[size_t(k)] = run_program(*log, 200 + uint64_t(k)); });
  for (auto& t : runs) t.join();
  stop = true;
  for (auto& t : noise) t.join();
  for (const auto& b : busy) EXPECT_EQ(b, alone);
}

// A tensor read by two threads' streams is never written in place: the other stream's pending
// record still needs its values after this thread dropped its last handle.
TEST_F(LazyTest, InplaceNeverTakesABufferSharedAcrossThreads) {
  Tensor t = Tensor::randn({256}, 9);
  const Array original = read(t);
  std::atomic<int> phase{0};
  Array y_value;
  std::thread other([&] {
    Tensor y = t * 2.0;  // pending on this thread's stream
    phase = 1;
    while (phase != 2) std::this_thread::yield();
    y_value = read(y);
  });
  while (phase != 1) std::this_thread::yield();
  Tensor z = t.exp();
  t = Tensor();  // the last handle: only the two records still read it
  read(z);
  EXPECT_EQ(lazy::stats().inplace_reuses, 0u);
  phase = 2;
  other.join();
  for (int64_t i = 0; i < 256; ++i) EXPECT_FLOAT_EQ(float(y_value.get_f64(i)), float(original.get_f64(i)) * 2.0f);
}

TEST_F(LazyTest, ConcurrentStreamsAcrossThreadsGiveReferenceResults) {
  std::vector<std::thread> ts;
  std::atomic<int> bad{0};
  for (int k = 0; k < 4; ++k) {
    ts.emplace_back([&, k] {
      for (int i = 0; i < 10; ++i) {
        Tensor a = Tensor::randn({64}, uint64_t(k * 100 + i));
        Tensor y = (a * a + 1.0).sqrt();
        Expected<Array> got = y.to_array();
        Expected<Array> src = a.to_array();
        if (!got || !src) {
          ++bad;
          continue;
        }
        for (int64_t j = 0; j < 64; ++j) {
          const float v = float(src->get_f64(j));
          if (std::abs(float(got->get_f64(j)) - std::sqrt(v * v + 1.0f)) > 1e-5f) ++bad;
        }
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(bad.load(), 0);
}

}  // namespace
}  // namespace fusebox::testing
