// Streams and their registry (see stream.h).
#include "lazy/stream.h"

#include <cstdlib>
#include <cstring>
#include <utility>

#include "lazy/segment.h"

namespace fusebox::lazy {

Stream::Stream(Device device) : device_(device), form_(device.fusion && !fusion_disabled_by_env()) {}

void Stream::drop(const TensorState* s) {
  std::lock_guard<std::mutex> lock(record_mu_);
  form_.drop(s);
}

size_t Stream::pending() const {
  std::lock_guard<std::mutex> lock(record_mu_);
  return pending_.size();
}

Status Stream::flush(Trigger trigger) {
  std::lock_guard<std::mutex> flush_lock(flush_mu_);
  std::vector<Record> records;
  RelativeForm form;
  {
    // The record lock stays held until the segment's handles are counted (finish): a record the
    // owner thread appends meanwhile reads its operand through a handle, so that operand is seen
    // alive and gets written.
    std::lock_guard<std::mutex> lock(record_mu_);
    // Nothing recorded leaves the form without a tensor (a drop counts only for a tensor of its
    // segment): an idle stream's flush allocates nothing.
    if (!pending_.empty()) {
      records.swap(pending_);
      form = form_.finish(uint8_t(trigger));
      // The next batch is likely as long as this one: growing the queue record by record would
      // move every pending record at each doubling, on the recording thread.
      pending_.reserve(records.size());
    }
  }
  if (records.empty()) return take_error();
  Status s = run_segment(std::move(records), std::move(form), device_);
  if (!s.is_ok()) {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (error_.is_ok()) error_ = s;
  }
  return take_error();
}

Status Stream::take_error() {
  std::lock_guard<std::mutex> lock(error_mu_);
  Status s = std::move(error_);
  error_ = Status::ok();
  return s;
}

struct StreamRegistry {
  std::mutex mu;
  std::vector<std::unique_ptr<Stream>> all;

  static StreamRegistry& get() {
    static StreamRegistry* r = new StreamRegistry();  // outlives thread_local destructors
    return *r;
  }
  Stream* acquire(const Device& device) {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& s : all) {
      if (s->parked_ && s->device_ == device) {
        s->parked_ = false;
        return s.get();
      }
    }
    all.push_back(std::make_unique<Stream>(device));
    return all.back().get();
  }
  void park(Stream* s) {
    std::lock_guard<std::mutex> lock(mu);
    s->parked_ = true;
  }
};

namespace {

// The calling thread's streams; at thread exit they run what is pending and are parked.
struct ThreadStreams {
  std::vector<Stream*> streams;
  ~ThreadStreams() {
    for (Stream* s : streams) {
      (void)s->flush();
      StreamRegistry::get().park(s);
    }
  }
};
thread_local ThreadStreams t_streams;

}  // namespace

Stream& current_stream(const Device& device) {
  for (Stream* s : t_streams.streams) {
    if (s->device() == device) return *s;
  }
  Stream* s = StreamRegistry::get().acquire(device);
  t_streams.streams.push_back(s);
  return *s;
}

std::vector<Stream*> streams_of(const Device& device) {
  StreamRegistry& r = StreamRegistry::get();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Stream*> out;
  for (auto& s : r.all) {
    if (s->device().kind == device.kind && s->device().index == device.index) out.push_back(s.get());
  }
  return out;
}

const std::vector<Stream*>& thread_streams() { return t_streams.streams; }

bool fusion_disabled_by_env() {
  static const bool disabled = [] {
    const char* v = std::getenv("FUSEBOX_NO_FUSION");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  return disabled;
}

}  // namespace fusebox::lazy
