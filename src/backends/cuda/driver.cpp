#include "backends/cuda/driver.h"

#include "backends/cuda/loader.h"

namespace fusebox::cuda {

namespace {

#define FUSEBOX_STRINGIFY_EXPANDED(x) FUSEBOX_STRINGIFY(x)
#define FUSEBOX_STRINGIFY(x) #x

Expected<Driver> load() {
  FUSEBOX_ASSIGN_OR_RETURN(void* lib, open_library({"the CUDA driver", {"libcuda.so.1", "libcuda.so"}}));
  Driver d;
#define FUSEBOX_CUDA_DRIVER_RESOLVE(f)                                                                  \
  {                                                                                                     \
    FUSEBOX_ASSIGN_OR_RETURN(void* p, find_symbol(lib, "the CUDA driver", FUSEBOX_STRINGIFY_EXPANDED(f))); \
    d.f = reinterpret_cast<decltype(d.f)>(p);                                                           \
  }
  FUSEBOX_CUDA_DRIVER_FUNCTIONS(FUSEBOX_CUDA_DRIVER_RESOLVE)
#undef FUSEBOX_CUDA_DRIVER_RESOLVE
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuInit(0), "cuInit"));
  int count = 0;
  FUSEBOX_RETURN_IF_ERROR(d.check(d.cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return Status::unimplemented("the CUDA driver is loaded but sees no GPU");
  return d;
}

}  // namespace

std::string Driver::error_text(CUresult r) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName) cuGetErrorName(r, &name);
  if (cuGetErrorString) cuGetErrorString(r, &text);
  return std::string(name ? name : "CUDA error " + std::to_string(int(r))) + (text ? std::string(": ") + text : "");
}

Status Driver::check(CUresult r, const std::string& what) const {
  if (r == CUDA_SUCCESS) return Status::ok();
  return Status::execution(what + ": " + error_text(r));
}

Expected<const Driver*> driver() {
  static const Expected<Driver> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

}  // namespace fusebox::cuda
