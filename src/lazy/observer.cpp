// Observers, counters and memory accounting of the lazy layer (observer.h).
#include "lazy/observer.h"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <mutex>
#include <vector>

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

// Counters kept per thread and summed when read: every op made and dropped two tensor states,
// and the process-wide atomic add of each state's count and bytes was a tenth of a cached 100-op
// chain's time. A thread's slot is written only by its thread (a plain load and store); readers
// and the slot's owner at thread end take the registry's lock.
enum Counter : int {
  kRecords,
  kFlushes,
  kBlocksFused,
  kBlocksUnfused,
  kKernels,
  kPlanHits,
  kPlanMisses,
  kAllocations,
  kInplaceReuses,
  kDeviceUploads,
  kDeviceDownloads,
  kLiveTensors,
  kCudaTensors,
  kCpuHostBytes,   // host values of CPU tensors
  kCudaHostBytes,  // host copies of cuda tensors
  kCudaBytes,      // device buffers of cuda tensors
  kCounters
};
constexpr uint64_t LazyStats::*kStatFields[] = {
    &LazyStats::records,        &LazyStats::flushes,         &LazyStats::blocks_fused,
    &LazyStats::blocks_unfused, &LazyStats::kernels,         &LazyStats::plan_hits,
    &LazyStats::plan_misses,    &LazyStats::allocations,     &LazyStats::inplace_reuses,
    &LazyStats::device_uploads, &LazyStats::device_downloads};
constexpr int kStats = int(std::size(kStatFields));

struct Slot {
  std::atomic<int64_t> value[kCounters]{};
};
struct Registry {
  std::mutex mu;
  std::vector<Slot*> slots;                 // of running threads
  std::atomic<int64_t> ended[kCounters]{};  // of threads that ended, and adds made while ending
  int64_t stats_base[kStats]{};             // the totals at the last reset_stats()
};
Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: threads may end after static destruction
  return *r;
}

// Trivially destructible, so they stay usable while other thread-locals are destroyed (a stream's
// records drop states then).
thread_local Slot* t_slot = nullptr;
thread_local bool t_ended = false;
struct SlotOwner {
  ~SlotOwner() {
    if (!t_slot) return;
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (int k = 0; k < kCounters; ++k)
      r.ended[k].fetch_add(t_slot->value[k].load(std::memory_order_relaxed));
    r.slots.erase(std::find(r.slots.begin(), r.slots.end(), t_slot));
    delete t_slot;
    t_slot = nullptr;
    t_ended = true;
  }
};
thread_local SlotOwner t_owner;

void add_to(Counter k, int64_t n) {
  if (!t_slot && !t_ended) {
    auto* s = new Slot();
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      registry().slots.push_back(s);
    }
    static_cast<void>(&t_owner);  // constructs the owner, whose destructor folds the slot back
    t_slot = s;
  }
  if (!t_slot) {
    registry().ended[k].fetch_add(n, std::memory_order_relaxed);
    return;
  }
  std::atomic<int64_t>& v = t_slot->value[k];
  v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

// The caller holds the registry's lock.
int64_t total_locked(Counter k) {
  Registry& r = registry();
  int64_t sum = r.ended[k].load(std::memory_order_relaxed);
  for (const Slot* s : r.slots) sum += s->value[k].load(std::memory_order_relaxed);
  return sum;
}

Counter counter_for(uint64_t LazyStats::*field) {
  for (int k = 0; k < kStats; ++k) {
    if (kStatFields[k] == field) return Counter(k);
  }
  return kInplaceReuses;
}

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
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  LazyStats out;
  for (int k = 0; k < kStats; ++k) out.*kStatFields[k] = uint64_t(total_locked(Counter(k)) - r.stats_base[k]);
  return out;
}

void reset_stats() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  for (int k = 0; k < kStats; ++k) r.stats_base[k] = total_locked(Counter(k));
}

namespace counters {
void add(uint64_t LazyStats::*field, uint64_t n) { add_to(counter_for(field), int64_t(n)); }
}  // namespace counters

MemoryUsage memory_usage(Device device) {
  if (!device.available()) return {};
  std::lock_guard<std::mutex> lock(registry().mu);
  const int64_t cuda = total_locked(kCudaTensors);
  if (device.kind == DeviceKind::Cuda) return {cuda, total_locked(kCudaBytes)};
  return {total_locked(kLiveTensors) - cuda, total_locked(kCpuHostBytes)};
}
MemoryUsage memory_usage_all() {
  std::lock_guard<std::mutex> lock(registry().mu);
  return {total_locked(kLiveTensors),
          total_locked(kCpuHostBytes) + total_locked(kCudaHostBytes) + total_locked(kCudaBytes)};
}

namespace memory_accounting {
void on_state(int delta, const Device& device) {
  add_to(kLiveTensors, delta);
  if (device.kind == DeviceKind::Cuda) add_to(kCudaTensors, delta);
}
void on_bytes(int64_t delta, const Device& device) {
  add_to(device.kind == DeviceKind::Cuda ? kCudaHostBytes : kCpuHostBytes, delta);
}
void on_device_bytes(int64_t delta) { add_to(kCudaBytes, delta); }
}  // namespace memory_accounting

LeakCheck::LeakCheck() : live_at_start_(memory_usage_all().live_tensors) {}

Status LeakCheck::check() const {
  for (Stream* s : streams_of(Device::cpu())) (void)s->flush();
  const int64_t now = memory_usage_all().live_tensors;
  if (now <= live_at_start_) return Status::ok();
  return Status::internal(std::to_string(now - live_at_start_) + " tensor(s) made in this scope are still alive");
}

}  // namespace fusebox::lazy
