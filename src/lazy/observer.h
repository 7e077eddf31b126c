// Observability of the lazy layer: observers called when a record is registered and when a
// block (one fused group or one unfused op) runs; process-wide counters (plan-cache hits and
// misses, blocks, kernels, buffer allocations and in-place reuses); memory checks (live tensors
// and bytes per device, and a scope guard that reports leaked tensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fusebox/status.h"
#include "lazy/state.h"

namespace fusebox::lazy {

struct RecordEvent {
  Device device;
  Op op;
  size_t num_inputs = 0;
};

struct BlockEvent {
  Device device;
  std::vector<Op> ops;        // the records of the block, in the order they ran (lazy/schedule.h)
  bool fused = false;         // a fuser's optimization (else one UnfusedOp)
  std::string fuser;          // the fuser's name ("unfused" for UnfusedOp)
  std::vector<std::string> kernels;  // op keywords of the compiled graph's nodes
  size_t kernel_count = 0;
  bool plan_cache_hit = false;  // the segment's grouping came from the plan cache
  double seconds = 0;         // wall time of the run (compile excluded)
};

class Observer {
 public:
  virtual ~Observer() = default;
  virtual void on_record(const RecordEvent&) {}
  virtual void on_block(const BlockEvent&) {}
};

// Observers see events of every thread; callbacks must be thread-safe.
void add_observer(std::shared_ptr<Observer> observer);
void remove_observer(const std::shared_ptr<Observer>& observer);
bool has_observers();
void notify_record(const RecordEvent& e);
void notify_block(const BlockEvent& e);

struct LazyStats {
  uint64_t records = 0;
  uint64_t flushes = 0;
  uint64_t blocks_fused = 0;
  uint64_t blocks_unfused = 0;
  uint64_t kernels = 0;          // nodes run by compiled segment graphs
  uint64_t plan_hits = 0;        // segments whose grouping and executables came from the cache
  uint64_t plan_misses = 0;
  uint64_t allocations = 0;      // output buffers allocated for segment results
  uint64_t inplace_reuses = 0;   // outputs written into a dead input's buffer
  uint64_t device_uploads = 0;   // host values copied to a device (once per tensor)
  uint64_t device_downloads = 0;  // device values copied to the host (once per tensor)
};
LazyStats stats();
void reset_stats();
namespace counters {
void add(uint64_t LazyStats::*field, uint64_t n = 1);
}

// Tensors (states) alive on a device and the bytes their computed values hold in its memory: for
// the CPU, host arrays of CPU tensors; for a GPU, device buffers of its tensors (their host
// copies, made when read, count in memory_usage_all only). memory_usage_all: every tensor, and
// every byte on the host and the devices.
struct MemoryUsage {
  int64_t live_tensors = 0;
  int64_t bytes = 0;
};
MemoryUsage memory_usage(Device device = Device::cpu());
MemoryUsage memory_usage_all();
namespace memory_accounting {
void on_state(int delta, const Device& device);
void on_bytes(int64_t delta, const Device& device);  // host memory of a tensor on `device`
void on_device_bytes(int64_t delta);                 // GPU memory
}

// Notes the live tensors when made; check() syncs every stream and says which tensors made
// since are still alive (a leak) — for tests: `LeakCheck leaks; ...; EXPECT_TRUE(leaks.check().is_ok());`
class LeakCheck {
 public:
  LeakCheck();
  Status check() const;

 private:
  int64_t live_at_start_;
};

}  // namespace fusebox::lazy
