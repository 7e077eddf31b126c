// Internals shared by the oneDNN kernels (not part of the interface): the one CPU engine, the
// mapping of an Epilogue's activation onto eltwise post-ops, error conversion, the per-kernel
// primitive cache and per-thread scratch buffers for layout reorders.
#pragma once

#ifdef FUSEBOX_HAVE_DNNL

#include <oneapi/dnnl/dnnl.hpp>

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backends/cpu/onednn/onednn_kernels.h"

namespace fusebox::cpu::onednn {

// One engine for the process: oneDNN CPU engines are cheap but primitives are tied to theirs.
const dnnl::engine& cpu_engine();

// Appends the activation's eltwise post-op(s) (HardSigmoid takes two: oneDNN 2.6 has no
// hardsigmoid). Errors for parameters the activation cannot take.
Status append_activation(const Epilogue& ep, dnnl::post_ops& ops);

// Status::unimplemented naming the dtype for anything but f32.
Status check_dtype(DType t, const char* kernel);

Status from_dnnl(const dnnl::error& e, const std::string& what);

dnnl::memory::dims to_dims(std::span<const int64_t> v);

// Runs `body` (a Status), turning what oneDNN throws into a Status that names the kernel `op` and
// its `operands`.
template <typename Body>
Status guarded(const std::string& op, const std::string& operands, Body&& body) {
  try {
    return body();
  } catch (const dnnl::error& e) {
    return from_dnnl(e, op + " " + operands);
  } catch (const std::exception& e) {
    return Status::internal(op + ": " + e.what());
  }
}

// The format tag of nChw<b>c (4, 8, 16), nullopt for another block; with nhwc, channels-last
// (one block of all channels: [N,1,H,W,C] is NHWC's order), whatever the block.
std::optional<dnnl::memory::format_tag> nchwc_tag(int64_t block, bool nhwc = false);
// [N,C/b,H,W,b] -> the logical dims [N,C,H,W] oneDNN describes it by.
std::vector<int64_t> logical_nchw(std::span<const int64_t> blocked);

// A plain buffer; oneDNN does not take const pointers, though it never writes inputs.
inline void* data_ptr(const Array& a) { return const_cast<void*>(a.raw()); }

// Primitives per concrete shape set. get() builds an entry under the lock, so two threads that
// meet a new shape build it once; the entry is immutable afterwards and runs outside the lock.
// Bounded: a kernel that sees many shapes (a dynamic dim) starts over rather than grow.
template <typename Entry>
class ShapeCache {
 public:
  using Key = std::vector<int64_t>;
  template <typename Make>
  Expected<std::shared_ptr<const Entry>> get(const Key& key, Make make) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) return it->second;
    Expected<std::shared_ptr<const Entry>> made = make();
    if (!made) return made.status();
    if (map_.size() >= kMaxEntries) map_.clear();
    map_.emplace(key, *made);
    return made;
  }

 private:
  static constexpr size_t kMaxEntries = 16;
  mutable std::mutex mu_;
  mutable std::map<Key, std::shared_ptr<const Entry>> map_;
};

// Per-thread scratch memory for reorders (blocked activations, per-run weights) and for the
// primitives' own scratchpads (slot kPrimitiveScratch: every primitive is built with
// scratchpad_mode::user, since a library-owned scratchpad is shared by concurrent runs of one
// primitive, which then corrupt each other, e.g. gemm's accumulator under a sum post-op); grown on
// demand and kept, so steady-state runs neither allocate nor fault in fresh pages. `slot` tells
// apart the buffers one run needs at the same time.
void* thread_scratch(int slot, size_t bytes);
inline constexpr int kPrimitiveScratch = 3;
inline constexpr int kScratchSlots = 4;
// The DNNL_ARG_SCRATCHPAD memory for a primitive whose scratchpad is `desc`, on this thread.
dnnl::memory primitive_scratchpad(const dnnl::memory::desc& desc);

}  // namespace fusebox::cpu::onednn

#endif  // FUSEBOX_HAVE_DNNL
