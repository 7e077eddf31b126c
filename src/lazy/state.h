// The data the lazy layer shares between handles, streams and fusers: a tensor's state (shape,
// dtype, device, its value once computed, on the host or the device, or the error that stopped
// it) and a record (one deferred op). Tensor handles count themselves in TensorState::handles; records and
// streams hold states through shared_ptr without counting as handles, so "no handle left" means "dead to the
// user" even while a pending record still reads the tensor.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/attributes.h"
#include "ir/op_info.h"
#include "lazy/small_vec.h"

namespace fusebox::lazy {

enum class DeviceKind : uint8_t { Cpu, Cuda };

// Where tensors live. `fusion` false: the device runs every recorded op alone (the decorator
// contract: same results with fusion off).
struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  bool fusion = true;

  static Device cpu() { return {}; }
  static Device cuda(int index = 0) { return {DeviceKind::Cuda, index, true}; }
  Device unfused() const { return {kind, index, false}; }
  // Whether tensors can run on the device: the CPU always; cuda:0 when this build has the CUDA
  // backend and its driver loads (cuda:1 and beyond are not supported yet). `availability`
  // says why not.
  bool available() const { return availability().is_ok(); }
  Status availability() const;
  std::string to_string() const;
  // One number per (kind, index, fusion): the stream registry's key.
  uint32_t key() const { return (uint32_t(kind) << 24) | (uint32_t(index) << 1) | (fusion ? 1u : 0u); }
  friend bool operator==(const Device& a, const Device& b) { return a.key() == b.key(); }
};

// The backend of an available non-CPU device, made once per process: the lazy layer allocates
// and copies tensor values with it. An error for the CPU or an unavailable device.
Expected<std::shared_ptr<Backend>> device_backend(const Device& device);

class Stream;
struct CustomOp;

struct TensorState {
  TensorState(uint64_t id, DType dtype, std::vector<int64_t> shape, Device device);
  ~TensorState();
  TensorState(const TensorState&) = delete;
  TensorState& operator=(const TensorState&) = delete;

  const uint64_t id;
  const DType dtype;
  const std::vector<int64_t> shape;
  const Device device;
  int64_t numel() const;
  size_t nbytes() const;

  std::atomic<int> handles{0};          // live Tensor handles
  std::atomic<bool> ready{false};       // value or error is set (release/acquire)
  std::atomic<Stream*> producer{nullptr};  // the stream holding its pending record
  // Its buffer is never written in place: read by another thread than the producer's, or
  // sharing memory with another tensor (a reshape's result aliases its operand).
  std::atomic<bool> no_inplace{false};
  std::atomic<Stream*> reader{nullptr};  // the first stream that recorded a read of it

  // Set once, before `ready` becomes true: a host value, or a buffer on the tensor's device (a
  // cuda block's result: it stays there for the next block and is copied to the host on the
  // first host read).
  void set_value(Array a);
  void set_device_value(Buffer b);
  void set_error(Status s);
  const Status& error() const { return error_; }
  // Whether the host value is there (set, or copied down already).
  bool on_host() const { return host_ready_.load(std::memory_order_acquire); }
  // Makes the host value available: a device value is copied down once (an error of the copy, or
  // of the device work that computed it, is returned here and at every later call).
  Status fetch_host() const;
  // The host value; only after on_host() or a successful fetch_host().
  const Array& value() const { return value_; }
  // The value on the device of `backend`: the device result itself, or the host value copied up
  // on the first call and kept (a tensor made on the host and read by several cuda blocks is
  // copied once).
  Expected<Buffer> device_value(const Backend& backend) const;

 private:
  mutable std::mutex copy_mu_;  // guards the copies made on demand
  mutable Array value_;
  mutable Buffer device_;
  mutable Status copy_error_;
  mutable std::atomic<bool> host_ready_{false};
  Status error_;
  mutable size_t host_bytes_ = 0, device_bytes_ = 0;  // counted in memory_usage
};

using StatePtr = std::shared_ptr<TensorState>;

// How a record's input is passed, from the handle count when the op is recorded (spec §2).
enum class InputStatus : uint8_t { NotInit, ReadOnly, ReadWrite };

// One deferred op (a dropped handle is not a record: it goes into the relative form only). A custom op's
// record has `custom` set and op ElementwiseRegion (lazy/custom_op.h). The lists keep up to three operands
// and one result inline: recording allocates no list (small_vec.h).
struct Record {
  Op op = Op::Identity;
  std::shared_ptr<const CustomOp> custom;
  Attrs attrs;
  SmallVec<StatePtr, 3> inputs;
  SmallVec<InputStatus, 3> status;
  SmallVec<StatePtr, 1> outputs;
};

}  // namespace fusebox::lazy
