#include "backends/cuda/context.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include <unistd.h>

#include "backends/cuda/nvrtc.h"

namespace fusebox::cuda {

namespace {

// Size classes: 256-byte granules up to 1 MiB, then steps of 1/8 of the power of two below, so a
// reused buffer wastes at most about 12%.
size_t size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= (size_t(1) << 20)) return (bytes + 255) / 256 * 256;
  size_t p = size_t(1) << (63 - __builtin_clzll(bytes));
  const size_t step = p / 8;
  return (bytes + step - 1) / step * step;
}

constexpr size_t kMaxCachedBytes = size_t(8) << 30;

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::string cubin_cache_dir() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/fusebox/cuda";
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/fusebox/cuda";
  return {};
}

Expected<std::shared_ptr<Context>> Context::get(int index) {
  static std::mutex mu;
  static std::map<int, Expected<std::shared_ptr<Context>>> made;
  std::lock_guard<std::mutex> lock(mu);
  auto it = made.find(index);
  if (it == made.end()) {
    std::shared_ptr<Context> c(new Context());
    Status s = c->init(index);
    it = made.emplace(index, s.is_ok() ? Expected<std::shared_ptr<Context>>(c) : Expected<std::shared_ptr<Context>>(s)).first;
  }
  return it->second;
}

Status Context::init(int index) {
  FUSEBOX_ASSIGN_OR_RETURN(driver_, cuda::driver());
  const Driver& d = *driver_;
  int count = 0;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (index < 0 || index >= count) {
    return Status::invalid("no CUDA device " + std::to_string(index) + " (this machine has " + std::to_string(count) + ")");
  }
  index_ = index;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuDeviceGet(&device_, index), "cuDeviceGet"));
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof(name), device_);
  name_ = name;
  int major = 0, minor = 0;
  d.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_);
  d.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_);
  d.cuDeviceGetAttribute(&sms_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device_);
  arch_ = major * 10 + minor;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuDevicePrimaryCtxRetain(&context_, device_), "cuDevicePrimaryCtxRetain"));
  FUSEBOX_RETURN_IF_ERROR(make_current());
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return Status::ok();
}

// The primary context and its stream live until the process ends (the driver frees them then);
// releasing them from a static destructor could run after the driver has shut down.
Context::~Context() = default;

Status Context::make_current() const { return driver_->check(driver_->cuCtxSetCurrent(context_), "cuCtxSetCurrent"); }

Expected<bool> Context::capturing() const {
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  FUSEBOX_RETURN_IF_ERROR(
      driver_->check(driver_->cuStreamIsCapturing(stream_, &capture), "cuStreamIsCapturing"));
  return capture != CU_STREAM_CAPTURE_STATUS_NONE;
}

Expected<std::shared_ptr<void>> Context::allocate(size_t bytes) {
  const size_t capacity = size_class(bytes);
  CUdeviceptr p = 0;
  {
    std::lock_guard<std::mutex> lock(pool_mu_);
    auto it = idle_.find(capacity);
    if (it != idle_.end()) {
      p = it->second;
      idle_.erase(it);
      cached_bytes_ -= capacity;
      ++stats_.reuses;
      stats_.cached_bytes = cached_bytes_;
    }
  }
  if (!p) {
    FUSEBOX_RETURN_IF_ERROR(make_current());
    CUresult r = driver_->cuMemAlloc(&p, capacity);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {  // give the idle buffers back and try once more
      std::multimap<size_t, CUdeviceptr> idle;
      {
        std::lock_guard<std::mutex> lock(pool_mu_);
        idle.swap(idle_);
        cached_bytes_ = 0;
        stats_.cached_bytes = 0;
      }
      driver_->cuStreamSynchronize(stream_);
      for (auto& [size, q] : idle) driver_->cuMemFree(q);
      r = driver_->cuMemAlloc(&p, capacity);
    }
    if (r != CUDA_SUCCESS) {
      return Status::execution("cannot allocate " + std::to_string(capacity) + " bytes on " + name_ + " (cuda:" +
                               std::to_string(index_) + "): " + driver_->error_text(r));
    }
    std::lock_guard<std::mutex> lock(pool_mu_);
    ++stats_.allocations;
  }
  // The context outlives its buffers (contexts are never destroyed).
  return std::shared_ptr<void>(reinterpret_cast<void*>(p), [this, capacity](void* q) {
    release(reinterpret_cast<CUdeviceptr>(q), capacity);
  });
}

void Context::release(CUdeviceptr p, size_t capacity) {
  std::lock_guard<std::mutex> lock(pool_mu_);
  if (cached_bytes_ + capacity > kMaxCachedBytes) {
    // Freeing waits for the device; work already enqueued that reads p completes first.
    driver_->cuMemFree(p);
    return;
  }
  idle_.emplace(capacity, p);
  cached_bytes_ += capacity;
  stats_.cached_bytes = cached_bytes_;
}

PoolStats Context::pool_stats() const {
  std::lock_guard<std::mutex> lock(pool_mu_);
  return stats_;
}

CompileStats Context::compile_stats() const {
  std::lock_guard<std::mutex> lock(fn_mu_);
  return compile_stats_;
}

Expected<CUfunction> Context::function(const std::string& source, const std::string& entry) {
  std::string key = entry;
  key.push_back('\0');
  key += source;
  std::lock_guard<std::mutex> lock(fn_mu_);
  if (auto it = functions_.find(key); it != functions_.end()) {
    ++compile_stats_.memory_hits;
    return it->second;
  }
  FUSEBOX_ASSIGN_OR_RETURN(std::string version, nvrtc_version());
  namespace fs = std::filesystem;
  const std::string dir = cubin_cache_dir();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(fnv1a(key + version)));
  const std::string stem = "sm" + std::to_string(arch_) + "-" + hex;
  auto start = std::chrono::steady_clock::now();
  std::string cubin;
  // A cached cubin counts only when the source stored beside it is this source.
  if (!dir.empty() && read_file(fs::path(dir) / (stem + ".cu")) == source) cubin = read_file(fs::path(dir) / (stem + ".cubin"));
  if (!cubin.empty()) {
    ++compile_stats_.disk_hits;
  } else {
    FUSEBOX_ASSIGN_OR_RETURN(cubin, compile_cubin(source, entry + ".cu", arch_));
    ++compile_stats_.compiled;
    compile_stats_.compile_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    start = std::chrono::steady_clock::now();
    std::error_code ec;
    if (!dir.empty() && (fs::create_directories(dir, ec), !ec || fs::is_directory(dir))) {
      // Written under temporary names and renamed, so a reader never sees half a file.
      const std::string tmp = std::to_string(::getpid()) + ".tmp";
      std::ofstream(fs::path(dir) / (stem + ".cubin." + tmp), std::ios::binary) << cubin;
      std::ofstream(fs::path(dir) / (stem + ".cu." + tmp), std::ios::binary) << source;
      fs::rename(fs::path(dir) / (stem + ".cubin." + tmp), fs::path(dir) / (stem + ".cubin"), ec);
      fs::rename(fs::path(dir) / (stem + ".cu." + tmp), fs::path(dir) / (stem + ".cu"), ec);
    }
  }
  FUSEBOX_RETURN_IF_ERROR(make_current());
  CUmodule module = nullptr;
  FUSEBOX_RETURN_IF_ERROR(driver_->check(driver_->cuModuleLoadData(&module, cubin.data()), "loading " + entry));
  CUfunction fn = nullptr;
  FUSEBOX_RETURN_IF_ERROR(driver_->check(driver_->cuModuleGetFunction(&fn, module, entry.c_str()), "finding " + entry));
  compile_stats_.load_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  functions_.emplace(std::move(key), fn);
  return fn;
}

}  // namespace fusebox::cuda
