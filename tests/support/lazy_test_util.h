// Helpers for tests of the lazy Tensor API: a fixture that resets the counters, counts blocks
// through an observer and fails the test when tensors made in it are still alive at its end.
#pragma once

#include <gtest/gtest.h>

#include <mutex>
#include <thread>
#include <vector>

#include "fusebox/tensor.h"
#include "support/test_util.h"

namespace fusebox::testing {

// Remembers every block that ran (with the thread that ran it).
class BlockLog : public lazy::Observer {
 public:
  void on_block(const lazy::BlockEvent& e) override {
    std::lock_guard<std::mutex> lock(mu);
    blocks.push_back(e);
    threads.push_back(std::this_thread::get_id());
  }
  std::vector<lazy::BlockEvent> on_thread(std::thread::id id) {
    std::lock_guard<std::mutex> lock(mu);
    std::vector<lazy::BlockEvent> out;
    for (size_t i = 0; i < blocks.size(); ++i) {
      if (threads[i] == id) out.push_back(blocks[i]);
    }
    return out;
  }
  size_t kernels() {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& b : blocks) n += b.kernel_count;
    return n;
  }
  std::mutex mu;
  std::vector<lazy::BlockEvent> blocks;
  std::vector<std::thread::id> threads;
};

class LazyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    lazy::clear_plan_cache();
    lazy::reset_stats();
    log = std::make_shared<BlockLog>();
    lazy::add_observer(log);
    leaks = std::make_unique<lazy::LeakCheck>();
  }
  void TearDown() override {
    Status s = leaks->check();
    EXPECT_TRUE(s.is_ok()) << s.to_string();
    lazy::remove_observer(log);
  }
  std::shared_ptr<BlockLog> log;
  std::unique_ptr<lazy::LeakCheck> leaks;
};

// The tensor's value (fails the test on an error).
inline Array read(const Tensor& t) {
  Expected<Array> a = t.to_array();
  EXPECT_TRUE(a.has_value()) << a.status().to_string();
  return a ? *a : Array();
}

}  // namespace fusebox::testing
