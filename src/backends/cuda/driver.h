// The CUDA driver API, loaded at run time (loader.h): the table of entry points fusebox uses,
// resolved once per process. Types and constants come from the toolkit's cuda.h, which is only
// read at build time; nothing links libcuda.
#pragma once

#include <cuda.h>

#include <string>

#include "fusebox/status.h"

namespace fusebox::cuda {

// The entry points, named as cuda.h names them (cuda.h maps cuMemAlloc to cuMemAlloc_v2, ...;
// each pointer is resolved under the versioned name).
#define FUSEBOX_CUDA_DRIVER_FUNCTIONS(X) \
  X(cuInit)                              \
  X(cuDriverGetVersion)                  \
  X(cuDeviceGetCount)                    \
  X(cuDeviceGet)                         \
  X(cuDeviceGetName)                     \
  X(cuDeviceGetAttribute)                \
  X(cuDeviceTotalMem)                    \
  X(cuDevicePrimaryCtxRetain)            \
  X(cuCtxSetCurrent)                     \
  X(cuCtxSynchronize)                    \
  X(cuStreamCreate)                      \
  X(cuStreamSynchronize)                 \
  X(cuMemAlloc)                          \
  X(cuMemFree)                           \
  X(cuMemcpyHtoDAsync)                   \
  X(cuMemcpyDtoHAsync)                   \
  X(cuMemcpyDtoDAsync)                   \
  X(cuMemcpy2DAsync)                     \
  X(cuMemsetD8Async)                     \
  X(cuModuleLoadData)                    \
  X(cuModuleGetFunction)                 \
  X(cuFuncSetAttribute)                  \
  X(cuLaunchKernel)                      \
  X(cuEventCreate)                       \
  X(cuEventRecord)                       \
  X(cuEventDestroy)                      \
  X(cuEventSynchronize)                  \
  X(cuEventElapsedTime)                  \
  X(cuStreamBeginCapture)                \
  X(cuStreamEndCapture)                  \
  X(cuStreamIsCapturing)                 \
  X(cuGraphInstantiate)                  \
  X(cuGraphLaunch)                       \
  X(cuGraphDestroy)                      \
  X(cuGraphExecDestroy)                  \
  X(cuGetErrorName)                      \
  X(cuGetErrorString)

struct Driver {
#define FUSEBOX_CUDA_DRIVER_MEMBER(f) decltype(&::f) f = nullptr;
  FUSEBOX_CUDA_DRIVER_FUNCTIONS(FUSEBOX_CUDA_DRIVER_MEMBER)
#undef FUSEBOX_CUDA_DRIVER_MEMBER

  // "CUDA_ERROR_OUT_OF_MEMORY: out of memory" for a result code.
  std::string error_text(CUresult r) const;
  // ok, or an execution error "<what>: <error_text>".
  Status check(CUresult r, const std::string& what) const;
};

// The driver, loaded and initialised (cuInit) on first call; an error names what was missing
// (the library, a symbol, or a device) and is the same on every later call.
Expected<const Driver*> driver();

}  // namespace fusebox::cuda
