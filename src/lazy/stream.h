// Streams: one queue of pending records per (thread, device). Recording appends under a short
// lock and adds the record to the segment's relative form (the plan-cache key, relative_form.h);
// a flush takes the whole queue and its form and runs them as one segment (segment.h) while
// holding only the stream's flush lock, so recording on the stream's thread never waits for
// kernels of a flush started by another thread. Streams are never freed: when its thread exits a stream is
// flushed and parked for the next thread, so a pointer to a stream stays valid.
#pragma once

#include <cstddef>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "fusebox/status.h"
#include "lazy/relative_form.h"
#include "lazy/state.h"

namespace fusebox::lazy {

// Why a segment runs (part of a plan's key: its triggers).
enum class Trigger : uint8_t { OnSync, OnOperations };

inline constexpr size_t kMaxPendingRecords = 4096;

class Stream {
 public:
  explicit Stream(Device device);
  const Device& device() const { return device_; }

  // Appends a record built in place by `fill(Record&)` (and flushes when the queue reaches
  // kMaxPendingRecords). Building in place saves moving a record into the queue and destroying
  // the moved-from one, a third of what recording cost. `fill` runs under the record lock, so it
  // must not flush or append to a stream.
  template <typename Fill>
  void emplace(Fill&& fill) {
    size_t n;
    {
      std::lock_guard<std::mutex> lock(record_mu_);
      Record& r = pending_.emplace_back();
      fill(r);
      form_.add(r, int(pending_.size() - 1));
      n = pending_.size();
    }
    if (n >= kMaxPendingRecords) (void)flush(Trigger::OnOperations);
  }
  // The last handle of a pending tensor of this stream died.
  void drop(const TensorState* s);
  // Runs every pending record; the first error since the last flush/sync is returned and cleared.
  Status flush(Trigger trigger = Trigger::OnSync);
  size_t pending() const;
  // The stream's error from deferred work, returned and cleared.
  Status take_error();

 private:
  friend struct StreamRegistry;
  const Device device_;
  mutable std::mutex record_mu_;  // guards pending_ and form_
  std::vector<Record> pending_;
  RelativeFormBuilder form_;
  std::mutex flush_mu_;           // one segment at a time, in order
  std::mutex error_mu_;
  Status error_;
  bool parked_ = false;           // its thread exited; reusable (guarded by the registry)
};

// The calling thread's stream for a device.
Stream& current_stream(const Device& device);
// Every stream of a device (every thread's).
std::vector<Stream*> streams_of(const Device& device);
// Every stream of the calling thread.
const std::vector<Stream*>& thread_streams();

// Fusion disabled by FUSEBOX_NO_FUSION=1 (read once).
bool fusion_disabled_by_env();

}  // namespace fusebox::lazy
