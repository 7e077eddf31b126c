#include "backends/cuda/cudnn.h"

#ifdef FUSEBOX_HAVE_CUDNN

#include "backends/cuda/loader.h"

namespace fusebox::cuda {

namespace {

constexpr const char* kWhat = "cuDNN";

Expected<Cudnn> load() {
  LibrarySpec spec{kWhat, {"libcudnn.so.9", "libcudnn.so"}};
  spec.python_wheels = true;
  spec.wheel = "cudnn";
  FUSEBOX_ASSIGN_OR_RETURN(void* lib, open_library(spec));
  Cudnn dnn;
#define FUSEBOX_CUDNN_RESOLVE(f)                                    \
  {                                                                 \
    FUSEBOX_ASSIGN_OR_RETURN(void* p, find_symbol(lib, kWhat, #f)); \
    dnn.f = reinterpret_cast<decltype(dnn.f)>(p);                   \
  }
  FUSEBOX_CUDNN_FUNCTIONS(FUSEBOX_CUDNN_RESOLVE)
#undef FUSEBOX_CUDNN_RESOLVE
  // libcudnn.so names no version of its own: an older cuDNN has other entry points and rules.
  if (const size_t v = dnn.cudnnGetVersion(); v < 90000) {
    return Status::unimplemented(std::string(kWhat) + " " + std::to_string(v / 10000) + "." +
                                 std::to_string(v / 100 % 100) +
                                 " was loaded; fusebox needs cuDNN 9 (libcudnn.so.9)");
  }
  return dnn;
}

}  // namespace

std::string Cudnn::status_text(cudnnStatus_t s) const {
  const char* text = cudnnGetErrorString ? cudnnGetErrorString(s) : nullptr;
  return text && *text ? std::string(text) : "cuDNN status " + std::to_string(int(s));
}

Status Cudnn::check(cudnnStatus_t s, const std::string& what) const {
  if (s == CUDNN_STATUS_SUCCESS) return Status::ok();
  return Status::execution(what + ": " + status_text(s));
}

std::string Cudnn::version() const {
  // cuDNN 9's encoding: major * 10000 + minor * 100 + patch.
  const size_t v = cudnnGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Expected<const Cudnn*> cudnn() {
  static const Expected<Cudnn> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

}  // namespace fusebox::cuda

#endif  // FUSEBOX_HAVE_CUDNN
