// One GPU as fusebox uses it: the device's primary context, one stream, a memory pool, and the
// modules compiled for it (in memory, and as cubins on disk).
//
//   Context::get(i)  made once per device per process, shared by every backend and thread
//   pool             freed device buffers are kept by size class and handed out again; all
//                    kernels and copies run on the one stream, so a buffer released after its
//                    last kernel was enqueued can be reused by the next enqueued kernel
//   functions        source text -> CUfunction; a new source is compiled with NVRTC (or read
//                    from $XDG_CACHE_HOME/fusebox/cuda, else ~/.cache/fusebox/cuda, when the
//                    same source was compiled there before for this architecture)
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "backends/backend.h"
#include "backends/cuda/driver.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

// Compile-time counters of the function cache (fusebox explain --timings, tests).
struct CompileStats {
  uint64_t compiled = 0;       // NVRTC compiles
  uint64_t disk_hits = 0;      // cubins read from the disk cache
  uint64_t memory_hits = 0;    // functions found in memory
  double compile_seconds = 0;  // NVRTC time, summed
  double load_seconds = 0;     // disk reads and module loads, summed
};

class Context {
 public:
  // The context of GPU `index`, made on first use; an error says why there is none (no driver,
  // no such device).
  static Expected<std::shared_ptr<Context>> get(int index);

  const Driver& driver() const { return *driver_; }
  Device device() const { return {DeviceKind::Cuda, index_}; }
  CUstream stream() const { return stream_; }
  int arch() const { return arch_; }  // 90 for compute capability 9.0
  int multiprocessors() const { return sms_; }
  const std::string& name() const { return name_; }

  // Makes the context current on the calling thread (every entry point calls it first).
  Status make_current() const;
  // Whether the stream is being recorded into a CUDA graph now (work enqueued is not run).
  Expected<bool> capturing() const;

  // Device memory of at least `bytes`, 256-byte aligned, returned to the pool when the last
  // owner is released.
  Expected<std::shared_ptr<void>> allocate(size_t bytes);
  PoolStats pool_stats() const;

  // The kernel `entry` of `source`, compiled for this device on first use.
  Expected<CUfunction> function(const std::string& source, const std::string& entry);
  CompileStats compile_stats() const;

  ~Context();

 private:
  Context() = default;
  Status init(int index);
  void release(CUdeviceptr p, size_t capacity);

  const Driver* driver_ = nullptr;
  int index_ = 0;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
  CUstream stream_ = nullptr;
  int arch_ = 0;
  int sms_ = 0;
  std::string name_;

  mutable std::mutex pool_mu_;
  std::multimap<size_t, CUdeviceptr> idle_;
  size_t cached_bytes_ = 0;
  PoolStats stats_;

  mutable std::mutex fn_mu_;
  std::unordered_map<std::string, CUfunction> functions_;  // key: entry + '\0' + source
  CompileStats compile_stats_;
};

// One kernel's functions by variant key, so that a run finds its function without generating the
// variant's source again (Context::function is keyed by the whole source text).
class FunctionCache {
 public:
  // The function `entry` of the source `make_source()` returns, compiled on the key's first use.
  template <typename MakeSource>
  Expected<CUfunction> get(Context& context, const std::string& key, const char* entry, MakeSource&& make_source) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (auto it = functions_.find(key); it != functions_.end()) return it->second;
    }
    FUSEBOX_ASSIGN_OR_RETURN(CUfunction f, context.function(make_source(), entry));
    std::lock_guard<std::mutex> lock(mu_);
    functions_.emplace(key, f);
    return f;
  }

 private:
  std::mutex mu_;
  std::map<std::string, CUfunction> functions_;
};

// The folder of the on-disk cubin cache ("" when no home or cache folder is known).
std::string cubin_cache_dir();

}  // namespace fusebox::cuda
