// What every backend whose memory is host memory shares: pooled allocation, copies as memcpy,
// and a stream that runs everything inline. The CPU and reference backends derive from it, and
// so may a test backend; a backend only says what it claims and how it compiles a node.
#pragma once

#include "backends/array_pool.h"
#include "backends/backend.h"

namespace fusebox {

// A stream whose work has finished when it was enqueued.
class InlineStream final : public Stream {
 public:
  explicit InlineStream(Device device) : device_(device) {}
  Device device() const override { return device_; }
  Status sync() override { return Status::ok(); }

 private:
  Device device_;
};

class HostBackend : public Backend {
 public:
  // `device` is host memory under another name when index > 0 (tests use {Cpu, 1} to exercise
  // copies between devices without a GPU).
  explicit HostBackend(Device device = kHostDevice) : device_(device), stream_(std::make_unique<InlineStream>(device)) {}

  Device device() const override { return device_; }
  Expected<Buffer> allocate(DType dtype, std::span<const int64_t> shape) const override;
  Status copy_from_host(Stream& stream, const BufferView& host, const BufferView& dst) const override;
  Status copy_to_host(Stream& stream, const BufferView& src, const BufferView& host) const override;
  Stream& stream() const override { return *stream_; }
  PoolStats pool_stats() const override { return pool_.stats(); }

 private:
  Device device_;
  std::unique_ptr<InlineStream> stream_;  // stateless: shared by every thread
  mutable ArrayPool pool_;                // thread-safe
};

}  // namespace fusebox
