// The CUDA backend: one GPU, its stream and memory pool (context.h), the kernels it compiles.
//
// It claims what it has device code for: element-wise regions and lone element-wise ops
// (generated with NVRTC, region_kernel.h; transform, prologue and batch regions too),
// softmax, log_softmax and the norms over the last axis (row_kernel.h), matmul and the
// fused matmuls with bias, residual and activation (cuBLASLt, matmul_kernel.h), and reshapes and identities (device copies).
// The runtime places every other node on the CPU with copies at the boundary, and `fusebox
// explain` shows where each node runs. Built when the CUDA toolkit's headers are found; the
// driver and NVRTC are loaded when a backend is first made (cuBLASLt when a matmul is first
// claimed), so binaries without a GPU start and run.
#pragma once

#include <memory>

#include "backends/backend.h"
#include "backends/cuda/options.h"
#include "fusebox/status.h"

namespace fusebox::cuda {

// A backend on GPU `index`; an error says what is missing (the driver library, a GPU, NVRTC).
Expected<std::shared_ptr<Backend>> make_cuda_backend(int index = 0, const CudaBackendOptions& options = {});

// Whether this machine can run the CUDA backend: ok, or the reason (tests skip with it).
Status cuda_available();

}  // namespace fusebox::cuda
