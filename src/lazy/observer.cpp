// Observers, counters and memory accounting of the lazy layer (observer.h).
#include "lazy/observer.h"

#include <algorithm>
#include <atomic>
#include <mutex>

#include "lazy/stream.h"

namespace fusebox::lazy {
namespace {

struct ObserverList {
  std::mutex mu;
  std::shared_ptr<const std::vector<std::shared_ptr<Observer>>> list =
      std::make_shared<const std::vector<std::shared_ptr<Observer>>>();
  std::atomic<bool> any{false};
};
ObserverList& observers() {
  static ObserverList* l = new ObserverList();
  return *l;
}
std::shared_ptr<const std::vector<std::shared_ptr<Observer>>> snapshot() {
  std::lock_guard<std::mutex> lock(observers().mu);
  return observers().list;
}

struct Counters {
  std::atomic<uint64_t> records{0}, flushes{0}, blocks_fused{0}, blocks_unfused{0}, kernels{0}, plan_hits{0},
      plan_misses{0}, allocations{0}, inplace_reuses{0};
};
Counters& counters_store() {
  static Counters* c = new Counters();
  return *c;
}
std::atomic<uint64_t>& counter_for(uint64_t LazyStats::*field) {
  Counters& c = counters_store();
  if (field == &LazyStats::records) return c.records;
  if (field == &LazyStats::flushes) return c.flushes;
  if (field == &LazyStats::blocks_fused) return c.blocks_fused;
  if (field == &LazyStats::blocks_unfused) return c.blocks_unfused;
  if (field == &LazyStats::kernels) return c.kernels;
  if (field == &LazyStats::plan_hits) return c.plan_hits;
  if (field == &LazyStats::plan_misses) return c.plan_misses;
  if (field == &LazyStats::allocations) return c.allocations;
  return c.inplace_reuses;
}

std::atomic<int64_t> g_live{0};
std::atomic<int64_t> g_bytes{0};

}  // namespace

void add_observer(std::shared_ptr<Observer> observer) {
  std::lock_guard<std::mutex> lock(observers().mu);
  auto next = std::make_shared<std::vector<std::shared_ptr<Observer>>>(*observers().list);
  next->push_back(std::move(observer));
  observers().list = std::move(next);
  observers().any.store(true, std::memory_order_release);
}

void remove_observer(const std::shared_ptr<Observer>& observer) {
  std::lock_guard<std::mutex> lock(observers().mu);
  auto next = std::make_shared<std::vector<std::shared_ptr<Observer>>>(*observers().list);
  next->erase(std::remove(next->begin(), next->end(), observer), next->end());
  observers().any.store(!next->empty(), std::memory_order_release);
  observers().list = std::move(next);
}

bool has_observers() { return observers().any.load(std::memory_order_acquire); }

void notify_record(const RecordEvent& e) {
  for (const auto& o : *snapshot()) o->on_record(e);
}
void notify_block(const BlockEvent& e) {
  for (const auto& o : *snapshot()) o->on_block(e);
}

LazyStats stats() {
  Counters& c = counters_store();
  return {c.records.load(), c.flushes.load(), c.blocks_fused.load(), c.blocks_unfused.load(), c.kernels.load(),
          c.plan_hits.load(), c.plan_misses.load(), c.allocations.load(), c.inplace_reuses.load()};
}

void reset_stats() {
  for (auto f : {&LazyStats::records, &LazyStats::flushes, &LazyStats::blocks_fused, &LazyStats::blocks_unfused,
                 &LazyStats::kernels, &LazyStats::plan_hits, &LazyStats::plan_misses, &LazyStats::allocations,
                 &LazyStats::inplace_reuses}) {
    counter_for(f).store(0);
  }
}

namespace counters {
void add(uint64_t LazyStats::*field, uint64_t n) { counter_for(field).fetch_add(n, std::memory_order_relaxed); }
}  // namespace counters

// Tensor values live in host memory between blocks on every device (a cuda block copies its
// operands in and its results out), so every available device's usage is the same count.
MemoryUsage memory_usage(Device device) {
  if (!device.available()) return {};
  return memory_usage_all();
}
MemoryUsage memory_usage_all() { return {g_live.load(), g_bytes.load()}; }

namespace memory_accounting {
void on_state(int delta) { g_live.fetch_add(delta, std::memory_order_relaxed); }
void on_bytes(int64_t delta) { g_bytes.fetch_add(delta, std::memory_order_relaxed); }
}  // namespace memory_accounting

LeakCheck::LeakCheck() : live_at_start_(memory_usage_all().live_tensors) {}

Status LeakCheck::check() const {
  for (Stream* s : streams_of(Device::cpu())) (void)s->flush();
  const int64_t now = memory_usage_all().live_tensors;
  if (now <= live_at_start_) return Status::ok();
  return Status::internal(std::to_string(now - live_at_start_) + " tensor(s) made in this scope are still alive");
}

}  // namespace fusebox::lazy
