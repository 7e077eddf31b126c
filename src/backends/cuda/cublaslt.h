// cuBLASLt, loaded at run time (loader.h): the table of entry points the matmul kernels use
// (matmul_kernel.h), resolved once per process. Types and constants come from the toolkit's
// cublasLt.h, read only at build time; nothing links libcublasLt. Loading needs no GPU, so a
// machine without one still says whether the library is there.
#pragma once

#include <cublasLt.h>

#include <string>

#include "fusebox/status.h"

namespace fusebox::cuda {

#define FUSEBOX_CUBLASLT_FUNCTIONS(X)     \
  X(cublasLtGetVersion)                   \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtCreate)                       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

struct CublasLt {
#define FUSEBOX_CUBLASLT_MEMBER(f) decltype(&::f) f = nullptr;
  FUSEBOX_CUBLASLT_FUNCTIONS(FUSEBOX_CUBLASLT_MEMBER)
#undef FUSEBOX_CUBLASLT_MEMBER

  // "CUBLAS_STATUS_NOT_SUPPORTED: the requested functionality is not supported".
  std::string status_text(cublasStatus_t s) const;
  // ok, or an execution error "<what>: <status_text>".
  Status check(cublasStatus_t s, const std::string& what) const;
  // "13.1.0" (cublasLtGetVersion's number spelled out).
  std::string version() const;
};

// The library, loaded on first call; an error names libcublasLt and where it was searched for,
// or the symbol it lacks, and is the same on every later call.
Expected<const CublasLt*> cublaslt();

}  // namespace fusebox::cuda
