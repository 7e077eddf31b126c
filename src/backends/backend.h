// The boundary between the runtime and a backend (DESIGN.md §5). Depends on `ir` only.
//
//   runtime ──lower(graph)─────────> Graph          its own rewrites (layouts), same results
//           ──claims(graph, node)──> Backend        which nodes it takes, a reason for each no
//           ──compile(graph, node)─> Kernel         once per node, immutable, shared by threads
//           ──allocate / copy──────> Buffer         memory on the backend's device, pooled
//           ──kernel.run(stream, views)──> Stream   enqueued; the CPU's runs inline; sync()
//
// Kernels see BufferViews (a pointer on the device, a dtype, concrete shape and strides), never
// host Arrays, so one runtime drives host and device backends alike. Every Backend method is
// const and thread-safe: an Executable runs on several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "fusebox/status.h"
#include "ir/array.h"
#include "ir/graph.h"

namespace fusebox {

enum class DeviceKind { Cpu, Cuda };

struct Device {
  DeviceKind kind = DeviceKind::Cpu;
  int index = 0;
  bool operator==(const Device&) const = default;
  // Host memory: what users' Arrays live in. Device {Cpu, 0}.
  bool is_host() const { return kind == DeviceKind::Cpu && index == 0; }
  std::string to_string() const;  // "cpu:0", "cuda:1"
};
inline constexpr Device kHostDevice{};

// Memory seen by a kernel. `data` is a pointer on `device` (a device pointer for a GPU).
// Contiguous row-major for now; strides are in elements so other layouts fit later.
struct BufferView {
  void* data = nullptr;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;
  Device device;

  int64_t numel() const { return product(shape); }
  size_t nbytes() const { return size_t(numel()) * size_t(dtype_size(dtype)); }
};

// A view of a host Array (its strides contiguous). The Array keeps the memory alive.
BufferView host_view(const Array& a);
// A host Array over a view's memory, owning nothing (FUSEBOX_CHECKs a contiguous host view):
// how host kernels hand views to code written for Arrays.
Array array_over(const BufferView& v);
std::vector<Array> arrays_over(std::span<const BufferView> views);

// Owned memory on a device. Copies share it; it goes back to its backend's pool when the last
// copy is released. An empty Buffer holds nothing.
class Buffer {
 public:
  Buffer() = default;
  Buffer(BufferView view, std::shared_ptr<void> owner) : view_(std::move(view)), owner_(std::move(owner)) {}
  // A host Buffer sharing an Array's memory (the Array's buffer stays alive while it does).
  static Buffer wrap(const Array& a);

  const BufferView& view() const { return view_; }
  explicit operator bool() const { return owner_ != nullptr; }
  // The host Array sharing this buffer's memory (FUSEBOX_CHECKs a host buffer).
  Array to_array() const;
  // The same memory under another shape of as many elements (a reshape that moves no data;
  // FUSEBOX_CHECKs a contiguous view and the element count).
  Buffer reshaped(std::vector<int64_t> shape) const;

 private:
  BufferView view_;
  std::shared_ptr<void> owner_;
};

// Work recorded from a stream (a CUDA graph): replayed as one launch, with the same buffers.
class RecordedWork {
 public:
  virtual ~RecordedWork() = default;
  virtual Status replay() const = 0;
};

// Where a backend's kernels and copies run in order. sync() returns when all enqueued work is
// done (and reports the first failure of asynchronous work).
class Stream {
 public:
  virtual ~Stream() = default;
  virtual Device device() const = 0;
  virtual Status sync() = 0;
  // Recording: between begin and end, work enqueued on the stream by the calling thread is
  // recorded instead of run. Streams that cannot record (the CPU's) say so.
  virtual Status begin_recording() { return Status::unimplemented("this stream cannot record work"); }
  // Ends a recording (also after a failure while recording, to leave the stream usable).
  virtual Expected<std::shared_ptr<const RecordedWork>> end_recording() {
    return Status::unimplemented("this stream cannot record work");
  }
  // The device API's own stream (a CUstream on CUDA), for code outside fusebox that enqueues work
  // in order with this stream's (a custom op's device kernel); nullptr where there is none.
  virtual void* native_handle() const { return nullptr; }
};

// A compiled node. Outputs are allocated by the runtime with the node's concrete result shapes;
// their contents are undefined (poisoned in tests). Immutable; runs on several threads at once.
class Kernel {
 public:
  virtual ~Kernel() = default;
  virtual Status run(Stream& stream, std::span<const BufferView> in, std::span<const BufferView> out) const = 0;
  virtual std::string_view kind() const = 0;  // "region", "elementwise", "reference", ...
};

// A backend's answer to "will you run this node?": yes, or no with the reason.
struct Claim {
  bool yes = false;
  std::string reason;  // why not; empty for a yes
  static Claim accept() { return {true, {}}; }
  static Claim refuse(std::string why) { return {false, std::move(why)}; }
  explicit operator bool() const { return yes; }
};

struct PoolStats {
  size_t allocations = 0;   // buffers newly allocated
  size_t reuses = 0;        // buffers handed out again
  size_t cached_bytes = 0;  // idle bytes held now
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string_view name() const = 0;
  virtual Device device() const = 0;

  virtual Claim claims(const Graph& g, const Node& n) const = 0;
  // The backend's own lowering of the fused graph before its nodes are placed and compiled (the
  // CPU's keeps CNN activations in a blocked layout); the result computes the same values with
  // the same inputs and outputs. Default: the graph as it is.
  virtual Expected<Graph> lower(const Graph& g) const { return g; }
  virtual Expected<std::shared_ptr<const Kernel>> compile(const Graph& g, const Node& n) const = 0;

  // Uninitialised memory of a type and concrete shape on device().
  virtual Expected<Buffer> allocate(DType dtype, std::span<const int64_t> shape) const = 0;
  // Copies between host memory and this device, enqueued on `stream`; the host side must stay
  // alive until the stream is synced. Views must agree in dtype and shape.
  virtual Status copy_from_host(Stream& stream, const BufferView& host, const BufferView& dst) const = 0;
  virtual Status copy_to_host(Stream& stream, const BufferView& src, const BufferView& host) const = 0;
  // A copy within this device's memory, enqueued on `stream`.
  virtual Status copy_on_device(Stream& stream, const BufferView& src, const BufferView& dst) const {
    return Status::unimplemented(std::string(name()) + " has no device-to-device copy");
  }
  // The stream kernels of this backend run on.
  virtual Stream& stream() const = 0;
  virtual PoolStats pool_stats() const { return {}; }
};

}  // namespace fusebox
