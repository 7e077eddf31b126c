#include "backends/cuda/cublaslt.h"

#include "backends/cuda/loader.h"

namespace fusebox::cuda {

namespace {

constexpr const char* kWhat = "cuBLASLt";

Expected<CublasLt> load() {
  FUSEBOX_ASSIGN_OR_RETURN(void* lib, open_library({kWhat, {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"}}));
  CublasLt lt;
#define FUSEBOX_CUBLASLT_RESOLVE(f)                                 \
  {                                                                 \
    FUSEBOX_ASSIGN_OR_RETURN(void* p, find_symbol(lib, kWhat, #f)); \
    lt.f = reinterpret_cast<decltype(lt.f)>(p);                     \
  }
  FUSEBOX_CUBLASLT_FUNCTIONS(FUSEBOX_CUBLASLT_RESOLVE)
#undef FUSEBOX_CUBLASLT_RESOLVE
  return lt;
}

}  // namespace

std::string CublasLt::status_text(cublasStatus_t s) const {
  const char* name = cublasLtGetStatusName ? cublasLtGetStatusName(s) : nullptr;
  const char* text = cublasLtGetStatusString ? cublasLtGetStatusString(s) : nullptr;
  return std::string(name ? name : "cuBLAS status " + std::to_string(int(s))) + (text ? std::string(": ") + text : "");
}

Status CublasLt::check(cublasStatus_t s, const std::string& what) const {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::ok();
  return Status::execution(what + ": " + status_text(s));
}

std::string CublasLt::version() const {
  // CUBLAS_VERSION's encoding: major * 10000 + minor * 100 + patch.
  const size_t v = cublasLtGetVersion();
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

Expected<const CublasLt*> cublaslt() {
  static const Expected<CublasLt> loaded = load();
  if (!loaded) return loaded.status();
  return &*loaded;
}

}  // namespace fusebox::cuda
